/* GNN training: sample checks, feature normalisation, minibatches, losses,
 * Adam. One thread, a fixed order drawn from the seed: the same samples and
 * params give bit-identical weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gnn-impl.h"
#include "fail.h"

typedef struct tshape {
    const mt_graph_shape *s;
    mt__gnn_plan *plan;
    mt__gnn_ws *ws;
} tshape;

typedef struct item {
    int sid;
    uint64_t gkey, skey;
    int i;
} item;

typedef struct tctx {
    const mt_gnn_sample *smp;
    int n, batch;
    int *sid;      /* shape of each sample */
    int *gid;      /* dense group of each sample */
    int ngroups;
    float *rtarget; /* regression target of each sample */
    tshape *shapes;
    int nshapes;
    item *items;   /* [n] */
    uint64_t *gkey;
    int *bstart, *border, nb; /* minibatches: items[bstart[k] .. bstart[k+1]) in order border */
    /* one minibatch */
    const float **ptr;
    float *tg, *rt;
    int *grp, *fail;
} tctx;

static void ctx_free(tctx *c) {
    for (int k = 0; k < c->nshapes; k++) {
        mt__gnn_plan_free(c->shapes[k].plan);
        mt__gnn_ws_free(c->shapes[k].ws);
    }
    free(c->shapes);
    free(c->sid);
    free(c->gid);
    free(c->rtarget);
    free(c->items);
    free(c->gkey);
    free(c->bstart);
    free(c->border);
    free(c->ptr);
    free(c->tg);
    free(c->rt);
    free(c->grp);
    free(c->fail);
}

static int same_shape(const mt_graph_shape *a, const mt_graph_shape *b) {
    if (a == b) return 1;
    size_t E = (size_t)a->n_edges;
    return a->n_nodes == b->n_nodes && a->n_edges == b->n_edges && a->hash == b->hash &&
           memcmp(a->node_type, b->node_type, sizeof(int) * (size_t)a->n_nodes) == 0 &&
           (E == 0 || (memcmp(a->edge_src, b->edge_src, sizeof(int) * E) == 0 && memcmp(a->edge_dst, b->edge_dst, sizeof(int) * E) == 0 &&
                       memcmp(a->edge_type, b->edge_type, sizeof(int) * E) == 0));
}

typedef struct gi {
    int group, i;
} gi;

static int by_group(const void *a, const void *b) {
    const gi *x = a, *y = b;
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->i - y->i;
}

static int by_item(const void *a, const void *b) {
    const item *x = a, *y = b;
    if (x->sid != y->sid) return x->sid - y->sid;
    if (x->gkey != y->gkey) return x->gkey < y->gkey ? -1 : 1;
    if (x->skey != y->skey) return x->skey < y->skey ? -1 : 1;
    return x->i - y->i;
}

/* Checks the samples and prepares everything training needs, allocating
 * all of it up front so that training itself cannot fail. */
static mt_status ctx_make(const mt_gnn *m, const mt_gnn_sample *s, int n, tctx *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!s || n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: no training samples");
    c->smp = s, c->n = n, c->batch = m->p.batch;
    c->sid = malloc(sizeof(int) * (size_t)n);
    c->gid = malloc(sizeof(int) * (size_t)n);
    c->rtarget = malloc(sizeof(float) * (size_t)n);
    c->items = malloc(sizeof(item) * (size_t)n);
    c->gkey = malloc(sizeof(uint64_t) * (size_t)n);
    c->bstart = malloc(sizeof(int) * ((size_t)n + 1));
    c->border = malloc(sizeof(int) * (size_t)n);
    c->ptr = malloc(sizeof(float *) * (size_t)c->batch);
    c->tg = malloc(sizeof(float) * (size_t)c->batch);
    c->rt = malloc(sizeof(float) * (size_t)c->batch);
    c->grp = malloc(sizeof(int) * (size_t)c->batch);
    c->fail = malloc(sizeof(int) * (size_t)c->batch);
    gi *g = malloc(sizeof(gi) * (size_t)n);
    mt_status st = MT_OK;
    if (!c->sid || !c->gid || !c->rtarget || !c->items || !c->gkey || !c->bstart || !c->border || !c->ptr || !c->tg || !c->rt || !c->grp ||
        !c->fail || !g)
        st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %d samples", n);
    for (int i = 0; i < n && st == MT_OK; i++) {
        if (!s[i].feats) {
            st = mt__fail(err, errlen, MT_INVALID_ARG, "gnn: sample %d has no features", i);
            break;
        }
        if (!s[i].failed && !isfinite(s[i].target)) {
            st = mt__fail(err, errlen, MT_INVALID_ARG, "gnn: sample %d has a non-finite target", i);
            break;
        }
        int k = 0;
        while (k < c->nshapes && !same_shape(c->shapes[k].s, s[i].shape)) k++;
        if (k == c->nshapes) {
            char why[160];
            if (mt__gnn_check_shape(s[i].shape, why, sizeof why) != MT_OK) {
                st = mt__fail(err, errlen, MT_INVALID_ARG, "gnn: sample %d: %s", i, why);
                break;
            }
            tshape *ns = realloc(c->shapes, sizeof *ns * (size_t)(c->nshapes + 1));
            if (!ns) {
                st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
                break;
            }
            c->shapes = ns;
            c->shapes[k] = (tshape){.s = s[i].shape};
            c->nshapes++;
            if (mt__gnn_plan_make(m, s[i].shape, &c->shapes[k].plan) != MT_OK ||
                mt__gnn_ws_make(m, c->shapes[k].plan, c->batch, 1, &c->shapes[k].ws) != MT_OK) {
                st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a training workspace");
                break;
            }
        }
        c->sid[i] = k;
        g[i] = (gi){s[i].group, i};
    }
    if (st == MT_OK) {
        /* dense group ids; a group must keep to one shape */
        qsort(g, (size_t)n, sizeof *g, by_group);
        for (int a = 0, e; a < n && st == MT_OK; a = e) {
            double lo = INFINITY;
            for (e = a; e < n && g[e].group == g[a].group; e++) {
                int i = g[e].i;
                c->gid[i] = c->ngroups;
                if (c->sid[i] != c->sid[g[a].i])
                    st = mt__fail(err, errlen, MT_INVALID_ARG, "gnn: group %d mixes graphs of different shapes (samples %d, %d)", g[a].group,
                                  g[a].i, i);
                if (!s[i].failed && s[i].target < lo) lo = s[i].target;
            }
            if (!isfinite(lo)) lo = 1; /* no working config: the failed ones get 0 */
            for (int k = a; k < e; k++) {
                int i = g[k].i;
                c->rtarget[i] = s[i].failed ? (float)(lo - 1) : s[i].target;
            }
            c->ngroups++;
        }
    }
    free(g);
    if (st != MT_OK) ctx_free(c);
    return st;
}

/* Orders the samples into minibatches: by shape, groups in a random order
 * and kept together, samples in a random order within a group, cut at the
 * batch size or a change of shape; then the minibatches are shuffled. With
 * rng NULL the order is fixed (shape, group, sample index). */
static void ctx_epoch(tctx *c, uint64_t *rng) {
    for (int k = 0; k < c->ngroups; k++) c->gkey[k] = rng ? mt__gnn_rand(rng) : (uint64_t)k;
    for (int i = 0; i < c->n; i++) c->items[i] = (item){c->sid[i], c->gkey[c->gid[i]], rng ? mt__gnn_rand(rng) : 0, i};
    qsort(c->items, (size_t)c->n, sizeof *c->items, by_item);
    c->nb = 0;
    for (int i = 0; i < c->n; i++)
        if (i == 0 || c->items[i].sid != c->items[i - 1].sid || i - c->bstart[c->nb - 1] >= c->batch) c->bstart[c->nb++] = i;
    c->bstart[c->nb] = c->n;
    for (int k = 0; k < c->nb; k++) c->border[k] = k;
    if (rng)
        for (int k = c->nb - 1; k > 0; k--) {
            int j = (int)(mt__gnn_rand(rng) % (uint64_t)(k + 1));
            int t = c->border[k];
            c->border[k] = c->border[j], c->border[j] = t;
        }
}

/* Forward (and with grad, backward) of minibatch k; returns its loss. */
static double run_batch(mt_gnn *m, tctx *c, int k, float *grad) {
    int a = c->bstart[k], b = c->bstart[k + 1] - a;
    tshape *ts = &c->shapes[c->items[a].sid];
    for (int j = 0; j < b; j++) {
        int i = c->items[a + j].i;
        c->ptr[j] = c->smp[i].feats;
        c->tg[j] = c->smp[i].target;
        c->rt[j] = c->rtarget[i];
        c->grp[j] = c->gid[i];
        c->fail[j] = c->smp[i].failed != 0;
    }
    mt__gnn_ws *w = ts->ws;
    mt__gnn_input(m, ts->plan, w, b, c->ptr);
    mt__gnn_forward(m, ts->plan, w, b);
    float *ds = grad ? w->ds : NULL;
    if (ds) memset(ds, 0, sizeof(float) * (size_t)b);
    double loss = 0;
    if (m->p.loss != MT_GNN_LOSS_REG) loss += mt__rank_loss(b, w->s, c->tg, c->grp, c->fail, 1.0f, ds, NULL);
    if (m->p.loss != MT_GNN_LOSS_RANK) loss += mt__mse(b, w->s, c->rt, 1.0f, ds);
    if (grad) mt__gnn_backward(m, ts->plan, w, b, ds, grad);
    return loss;
}

static void adam_step(mt_gnn *m) {
    size_t P = m->lay.total;
    double norm = 0;
    for (size_t i = 0; i < P; i++) norm += (double)m->grad[i] * m->grad[i];
    norm = sqrt(norm);
    float scale = norm > MT__GNN_CLIP ? (float)(MT__GNN_CLIP / norm) : 1.0f;
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    m->adam_t++;
    float c1 = 1.0f / (1.0f - powf(b1, (float)m->adam_t)), c2 = 1.0f / (1.0f - powf(b2, (float)m->adam_t));
    float lr = (float)m->p.lr;
    for (size_t i = 0; i < P; i++) {
        float g = m->grad[i] * scale;
        m->adam_m[i] = b1 * m->adam_m[i] + (1 - b1) * g;
        m->adam_v[i] = b2 * m->adam_v[i] + (1 - b2) * g * g;
        m->w[i] -= lr * (m->adam_m[i] * c1) / (sqrtf(m->adam_v[i] * c2) + eps);
    }
}

static mt_status ensure_adam(mt_gnn *m, char *err, size_t errlen) {
    size_t P = m->lay.total;
    if (!m->grad) m->grad = malloc(sizeof(float) * P);
    if (!m->adam_m) {
        m->adam_m = calloc(P, sizeof(float));
        m->adam_t = 0;
    }
    if (!m->adam_v) {
        m->adam_v = calloc(P, sizeof(float));
        m->adam_t = 0;
    }
    if (!m->grad || !m->adam_m || !m->adam_v) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for the optimiser");
    return MT_OK;
}

/* Runs `steps` minibatches (steps < 0: that many epochs) from rng. */
static void train(mt_gnn *m, tctx *c, long steps, uint64_t *rng) {
    long done = 0;
    while (done < steps) {
        ctx_epoch(c, rng);
        for (int k = 0; k < c->nb && done < steps; k++, done++) {
            memset(m->grad, 0, sizeof(float) * m->lay.total);
            run_batch(m, c, c->border[k], m->grad);
            adam_step(m);
            m->trained += c->bstart[c->border[k] + 1] - c->bstart[c->border[k]];
        }
    }
}

void mt__gnn_norm_add(mt__gnn_norm *a, int F, const mt_gnn_sample *samples, int n) {
    for (int i = 0; i < n; i++) {
        const float *x = samples[i].feats;
        int nn = samples[i].shape->n_nodes;
        for (int v = 0; v < nn; v++)
            for (int f = 0; f < F; f++) {
                double x1 = x[(size_t)v * F + f];
                if (isfinite(x1)) a->sum[f] += x1, a->sq[f] += x1 * x1;
            }
        a->cnt += nn;
    }
}

void mt__gnn_norm_set(mt_gnn *m, const mt__gnn_norm *a) {
    for (int f = 0; f < m->lay.F; f++) {
        double mu = a->cnt > 0 ? a->sum[f] / a->cnt : 0, var = a->cnt > 0 ? a->sq[f] / a->cnt - mu * mu : 0;
        double sd = var > 1e-12 ? sqrt(var) : 1.0;
        m->mean[f] = (float)mu;
        m->std[f] = (float)sd;
        /* as a loader computes it from the stored deviation: a loaded model
         * must score with the same bits */
        m->istd[f] = 1.0f / m->std[f];
    }
}

mt_status mt_gnn_fit(mt_gnn *m, const mt_gnn_sample *samples, int n, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: model is NULL");
    tctx c;
    mt_status st = ctx_make(m, samples, n, &c, err, errlen);
    if (st != MT_OK) return st;
    st = ensure_adam(m, err, errlen);
    if (st != MT_OK) {
        ctx_free(&c);
        return st;
    }
    /* feature normalisation over every node of every sample */
    mt__gnn_norm a;
    memset(&a, 0, sizeof a);
    mt__gnn_norm_add(&a, m->lay.F, samples, n);
    mt__gnn_norm_set(m, &a);
    mt__gnn_init_weights(m, m->p.seed);
    memset(m->adam_m, 0, sizeof(float) * m->lay.total);
    memset(m->adam_v, 0, sizeof(float) * m->lay.total);
    m->adam_t = 0;
    m->trained = 0;
    mt__gnn_clear_inner(m);
    m->rng = m->p.seed ^ 0xA5A5A5A55A5A5A5Aull;
    ctx_epoch(&c, NULL);
    train(m, &c, (long)m->p.epochs * c.nb, &m->rng);
    ctx_free(&c);
    return MT_OK;
}

mt_status mt_gnn_train_steps(mt_gnn *m, const mt_gnn_sample *samples, int n, int steps, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: model is NULL");
    if (steps < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: steps %d < 0", steps);
    tctx c;
    mt_status st = ctx_make(m, samples, n, &c, err, errlen);
    if (st != MT_OK) return st;
    st = ensure_adam(m, err, errlen);
    if (st == MT_OK) {
        train(m, &c, steps, &m->rng);
        mt__gnn_clear_inner(m);
    }
    ctx_free(&c);
    return st;
}

mt_status mt_gnn_loss_value(mt_gnn *m, const mt_gnn_sample *samples, int n, double *loss, char *err, size_t errlen) {
    if (!m || !loss) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: NULL argument");
    tctx c;
    mt_status st = ctx_make(m, samples, n, &c, err, errlen);
    if (st != MT_OK) return st;
    ctx_epoch(&c, NULL);
    double total = 0;
    for (int k = 0; k < c.nb; k++) total += run_batch(m, &c, k, NULL);
    *loss = total / c.nb;
    ctx_free(&c);
    return MT_OK;
}
