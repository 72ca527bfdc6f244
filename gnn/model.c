/* GNN model lifetime: params, the weight layout, initial weights, caches.
 * Nothing here calls BLAS, so the model-file fuzzer can link it alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gnn-impl.h"
#include "fail.h"

mt_gnn_params mt_gnn_default_params(void) {
    return (mt_gnn_params){
        .arch = MT_GNN_MODULAR,
        .hidden = 32,
        .layers = 3,
        .seed = 1,
        .lr = 3e-3,
        .epochs = 30,
        .batch = 64,
        .loss = MT_GNN_LOSS_BOTH,
        .threads = 2,
    };
}

mt_status mt__gnn_check_params(const mt_gnn_params *p, char *err, size_t errlen) {
    if (p->arch != MT_GNN_MODULAR && p->arch != MT_GNN_SHARED && p->arch != MT_GNN_MLP)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: unknown architecture %d", (int)p->arch);
    if (p->hidden < 1 || p->hidden > MT__GNN_MAX_HIDDEN)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: hidden %d outside [1, %d]", p->hidden, MT__GNN_MAX_HIDDEN);
    int lmin = p->arch == MT_GNN_MLP ? 1 : 0;
    if (p->layers < lmin || p->layers > MT__GNN_MAX_LAYERS)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: layers %d outside [%d, %d]", p->layers, lmin, MT__GNN_MAX_LAYERS);
    if (!(p->lr > 0) || !isfinite(p->lr)) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: learning rate must be positive");
    if (p->epochs < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: epochs %d < 0", p->epochs);
    if (p->batch < 1 || p->batch > 1 << 16) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: batch %d outside [1, 65536]", p->batch);
    if (p->loss != MT_GNN_LOSS_RANK && p->loss != MT_GNN_LOSS_REG && p->loss != MT_GNN_LOSS_BOTH)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: unknown loss %d", (int)p->loss);
    return MT_OK;
}

mt_status mt__gnn_layout_make(mt_gnn_arch arch, int F, int H, int L, mt__gnn_layout *lay, char *err, size_t errlen) {
    memset(lay, 0, sizeof *lay);
    if (H < 1 || H > MT__GNN_MAX_HIDDEN || L < 0 || L > MT__GNN_MAX_LAYERS || F < 1 || (arch == MT_GNN_MLP && L < 1))
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: shapes out of range (hidden %d, layers %d)", H, L);
    size_t o = 0, h = (size_t)H, f = (size_t)F;
    lay->F = F, lay->H = H, lay->L = L;
    if (arch == MT_GNN_MLP) {
        lay->nt = lay->et = 0;
        for (int l = 0; l < L; l++) {
            size_t in = l == 0 ? 2 * f : h;
            lay->mlp_w[l] = o, o += in * h;
            lay->mlp_b[l] = o, o += h;
        }
    } else {
        lay->nt = arch == MT_GNN_SHARED ? 1 : MT_GRAPH_NODE_TYPES;
        lay->et = arch == MT_GNN_SHARED ? 1 : MT_GRAPH_EDGE_TYPES;
        size_t nt = (size_t)lay->nt, et = (size_t)lay->et;
        lay->in_w = o, o += nt * f * h;
        lay->in_b = o, o += nt * h;
        for (int l = 0; l < L; l++) {
            lay->msg_w[l] = o, o += et * h * h;
            lay->upd_w[l] = o, o += nt * h * h;
            lay->upd_b[l] = o, o += nt * h;
        }
        lay->head_w1 = o, o += 2 * h * h;
        lay->head_b1 = o, o += h;
    }
    lay->out_w = o, o += h;
    lay->out_b = o, o += 1;
    lay->total = o;
    return MT_OK;
}

/* splitmix64: small, seedable, the same on every platform. */
uint64_t mt__gnn_rand(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *st, float a) { return a * (2.0f * (float)((mt__gnn_rand(st) >> 40) * (1.0 / 16777216.0)) - 1.0f); }

static void fill(float *w, size_t n, float a, uint64_t *st) {
    for (size_t i = 0; i < n; i++) w[i] = uniform(st, a);
}

void mt__gnn_init_weights(mt_gnn *m, uint64_t seed) {
    const mt__gnn_layout *y = &m->lay;
    uint64_t st = seed ^ 0x6A09E667F3BCC908ull;
    size_t h = (size_t)y->H, f = (size_t)y->F;
    memset(m->w, 0, sizeof(float) * y->total); /* biases start at 0 */
    /* LeCun-uniform (variance 1/fan_in). Messages add up over a node's
     * in-edges and the residual adds every round, so those weights start at
     * half scale to keep node states of unit size through the rounds. */
    if (m->p.arch == MT_GNN_MLP) {
        for (int l = 0; l < y->L; l++) {
            size_t in = l == 0 ? 2 * f : h;
            fill(m->w + y->mlp_w[l], in * h, sqrtf(3.0f / (float)in), &st);
        }
    } else {
        fill(m->w + y->in_w, (size_t)y->nt * f * h, sqrtf(3.0f / (float)f), &st);
        for (int l = 0; l < y->L; l++) {
            fill(m->w + y->msg_w[l], (size_t)y->et * h * h, 0.5f * sqrtf(3.0f / (float)h), &st);
            fill(m->w + y->upd_w[l], (size_t)y->nt * h * h, 0.5f * sqrtf(3.0f / (float)h), &st);
        }
        fill(m->w + y->head_w1, 2 * h * h, sqrtf(3.0f / (float)(2 * h)), &st);
    }
    fill(m->w + y->out_w, h, 0.1f * sqrtf(3.0f / (float)h), &st);
}

void mt__gnn_plan_free(mt__gnn_plan *p) {
    if (!p) return;
    free(p->node_type);
    free(p->edge_src);
    free(p->edge_dst);
    free(p->edge_type);
    free(p->node_mod);
    free(p->node_rank);
    free(p->node_off);
    free(p->node_cnt);
    free(p->edge_order);
    free(p->edge_cnt);
    free(p->pos);
    free(p->mrow_off);
    free(p->mside);
    free(p->mrun);
    free(p->mrow_pos);
    free(p->madj_off);
    free(p->madj_pos);
    free(p->in_off);
    free(p->in_row);
    free(p->out_off);
    free(p->out_row);
    free(p);
}

void mt__gnn_ws_free(mt__gnn_ws *ws) {
    if (!ws) return;
    free(ws->rowmap);
    free(ws->X);
    free(ws->H);
    free(ws->A);
    free(ws->U);
    free(ws->M);
    free(ws->G);
    free(ws->G2);
    free(ws->ptr);
    free(ws->xrow);
    free(ws->R);
    free(ws->argmax);
    free(ws->Z);
    free(ws->s);
    free(ws->dH);
    free(ws->dU);
    free(ws->dR);
    free(ws->dZ);
    free(ws->dZ2);
    free(ws->ds);
    free(ws);
}

void mt__gnn_drop_caches(mt_gnn *m) {
    mt__gnn_plan_free(m->plan);
    m->plan = NULL;
    for (int i = 0; i < MT__GNN_MAX_THREADS; i++) {
        mt__gnn_ws_free(m->ws[i]);
        m->ws[i] = NULL;
    }
}

mt_status mt__gnn_alloc(const mt_gnn_params *p, mt_gnn **out, char *err, size_t errlen) {
    *out = NULL;
    mt_status st = mt__gnn_check_params(p, err, errlen);
    if (st != MT_OK) return st;
    mt_gnn *m = calloc(1, sizeof *m);
    if (!m) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    m->p = *p;
    st = mt__gnn_layout_make(p->arch, MT_GRAPH_FEATS, p->hidden, p->layers, &m->lay, err, errlen);
    if (st != MT_OK) {
        free(m);
        return st;
    }
    m->w = malloc(sizeof(float) * m->lay.total);
    m->mean = calloc(MT_GRAPH_FEATS, sizeof(float));
    m->std = malloc(sizeof(float) * MT_GRAPH_FEATS);
    m->istd = malloc(sizeof(float) * MT_GRAPH_FEATS);
    if (!m->w || !m->mean || !m->std || !m->istd) {
        mt_gnn_free(m);
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %zu weights", m->lay.total);
    }
    for (int i = 0; i < MT_GRAPH_FEATS; i++) m->std[i] = m->istd[i] = 1.0f;
    m->rng = p->seed;
    *out = m;
    return MT_OK;
}

mt_status mt_gnn_create(const mt_gnn_params *p, mt_gnn **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: out is NULL");
    mt_gnn_params def = mt_gnn_default_params();
    mt_status st = mt__gnn_alloc(p ? p : &def, out, err, errlen);
    if (st == MT_OK) mt__gnn_init_weights(*out, (*out)->p.seed);
    return st;
}

void mt_gnn_free(mt_gnn *m) {
    if (!m) return;
    mt__gnn_drop_caches(m);
    free(m->w);
    free(m->mean);
    free(m->std);
    free(m->istd);
    free(m->rates);
    free(m->grad);
    free(m->adam_m);
    free(m->adam_v);
    free(m);
}

mt_gnn_params mt_gnn_get_params(const mt_gnn *m) { return m->p; }

mt_status mt_gnn_set_params(mt_gnn *m, const mt_gnn_params *p, char *err, size_t errlen) {
    if (!m || !p) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: NULL argument");
    if (p->arch != m->p.arch || p->hidden != m->p.hidden || p->layers != m->p.layers)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: architecture, hidden and layers are fixed once a model exists");
    mt_status st = mt__gnn_check_params(p, err, errlen);
    if (st != MT_OK) return st;
    if (p->seed != m->p.seed) m->rng = p->seed;
    m->p = *p;
    return MT_OK;
}

int64_t mt_gnn_param_count(const mt_gnn *m) { return (int64_t)m->lay.total; }

mt_gnn_origin mt_gnn_get_origin(const mt_gnn *m) { return m->origin; }
mt_gnn_inner mt_gnn_get_inner(const mt_gnn *m) { return m->inner; }

void mt__gnn_clear_inner(mt_gnn *m) {
    m->origin = MT_GNN_ORIGIN_POOLED;
    memset(&m->inner, 0, sizeof m->inner);
    free(m->rates);
    m->rates = NULL;
}

mt_status mt_gnn_copy(mt_gnn *dst, const mt_gnn *src, char *err, size_t errlen) {
    if (!dst || !src) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: copy: NULL argument");
    if (dst == src) return MT_OK;
    if (dst->p.arch != src->p.arch || dst->p.hidden != src->p.hidden || dst->p.layers != src->p.layers)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: copy: architectures differ");
    size_t P = src->lay.total;
    /* the only allocation first, so that a failure changes nothing */
    if (src->rates && !dst->rates && !(dst->rates = malloc(sizeof(float) * P)))
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %zu rates", P);
    if (src->rates) memcpy(dst->rates, src->rates, sizeof(float) * P);
    else {
        free(dst->rates);
        dst->rates = NULL;
    }
    memcpy(dst->w, src->w, sizeof(float) * P);
    memcpy(dst->mean, src->mean, sizeof(float) * MT_GRAPH_FEATS);
    memcpy(dst->std, src->std, sizeof(float) * MT_GRAPH_FEATS);
    memcpy(dst->istd, src->istd, sizeof(float) * MT_GRAPH_FEATS);
    dst->trained = src->trained;
    dst->origin = src->origin;
    dst->inner = src->inner;
    /* Adam afresh: moments of other weights mean nothing for these */
    free(dst->adam_m);
    free(dst->adam_v);
    dst->adam_m = dst->adam_v = NULL;
    dst->adam_t = 0;
    dst->rng = dst->p.seed;
    return MT_OK;
}

mt_status mt_gnn_clone(const mt_gnn *m, mt_gnn **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: clone: out is NULL");
    *out = NULL;
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: clone: model is NULL");
    mt_gnn *c;
    mt_status st = mt__gnn_alloc(&m->p, &c, err, errlen);
    if (st != MT_OK) return st;
    if ((st = mt_gnn_copy(c, m, err, errlen)) != MT_OK) {
        mt_gnn_free(c);
        return st;
    }
    *out = c;
    return MT_OK;
}
int64_t mt_gnn_trained(const mt_gnn *m) { return m->trained; }
