/* Meta-learning on the GNN (gnn/gnn.h): whole-set losses, the inner
 * procedure, meta-iterations (first-order MAML and Meta-SGD), meta-training
 * and adaptation.
 *
 * One thread and fixed orders (chunks in set order, tasks summed in draw
 * order), so the same inputs give bit-identical weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "gnn-impl.h"

/* Graphs per forward/backward chunk of a set: as many as a training
 * minibatch holds by default, so that a support or query set of up to 64
 * samples runs in one chunk, and a task's hundreds of records in a few. */
#define SET_CHUNK 64

typedef struct lshape {
    mt__gnn_plan *plan;
    mt__gnn_ws *ws; /* keep workspace of cap graphs */
    int cap;
} lshape;

struct mt__gnn_lctx {
    lshape *sh;
    int nsh;
    /* per sample of the largest set so far */
    int ncap;
    int *sid, *order, *grp, *fail;
    float *s, *tg, *rt, *ds;
    /* per group of a set */
    float *gmax, *gmin, *gshift;
    int *gval, *gwork, *gref;
    /* one chunk */
    const float **ptr;
    float *dsc;
};

mt_status mt__gnn_lctx_make(const mt_gnn *m, mt__gnn_lctx **out, char *err, size_t errlen) {
    (void)m;
    *out = calloc(1, sizeof **out);
    if (!*out) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    (*out)->ptr = malloc(sizeof(float *) * SET_CHUNK);
    (*out)->dsc = malloc(sizeof(float) * SET_CHUNK);
    if (!(*out)->ptr || !(*out)->dsc) {
        mt__gnn_lctx_free(*out);
        *out = NULL;
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    }
    return MT_OK;
}

static void free_scratch(mt__gnn_lctx *c) {
    free(c->sid), free(c->order), free(c->grp), free(c->fail);
    free(c->s), free(c->tg), free(c->rt), free(c->ds);
    free(c->gmax), free(c->gmin), free(c->gval), free(c->gwork), free(c->gshift), free(c->gref);
}

void mt__gnn_lctx_free(mt__gnn_lctx *c) {
    if (!c) return;
    for (int k = 0; k < c->nsh; k++) {
        mt__gnn_plan_free(c->sh[k].plan);
        mt__gnn_ws_free(c->sh[k].ws);
    }
    free(c->sh);
    free_scratch(c);
    free(c->ptr);
    free(c->dsc);
    free(c);
}

static mt_status ensure_scratch(mt__gnn_lctx *c, int n) {
    if (n <= c->ncap) return MT_OK;
    free_scratch(c);
    size_t k = (size_t)n;
    c->sid = malloc(sizeof(int) * k), c->order = malloc(sizeof(int) * k), c->grp = malloc(sizeof(int) * k), c->fail = malloc(sizeof(int) * k);
    c->s = malloc(sizeof(float) * k), c->tg = malloc(sizeof(float) * k), c->rt = malloc(sizeof(float) * k), c->ds = malloc(sizeof(float) * k);
    c->gmax = malloc(sizeof(float) * k), c->gmin = malloc(sizeof(float) * k), c->gval = malloc(sizeof(int) * k), c->gwork = malloc(sizeof(int) * k);
    c->gshift = malloc(sizeof(float) * k), c->gref = malloc(sizeof(int) * k);
    if (!c->sid || !c->order || !c->grp || !c->fail || !c->s || !c->tg || !c->rt || !c->ds || !c->gmax || !c->gmin || !c->gval || !c->gwork ||
        !c->gshift || !c->gref) {
        free_scratch(c);
        c->sid = c->order = c->grp = c->fail = c->gval = c->gwork = c->gref = NULL;
        c->s = c->tg = c->rt = c->ds = c->gmax = c->gmin = c->gshift = NULL;
        c->ncap = 0;
        return MT_NOMEM;
    }
    c->ncap = n;
    return MT_OK;
}

/* The cached shape of s (made on first sight, with a workspace for `need`
 * graphs); -1 (message in err) when malformed or out of memory. */
static int shape_of(mt__gnn_lctx *c, const mt_gnn *m, const mt_graph_shape *s, int need, mt_status *st, char *err, size_t errlen) {
    int k = 0;
    while (k < c->nsh && !mt__gnn_plan_matches(c->sh[k].plan, s)) k++;
    if (k == c->nsh) {
        if ((*st = mt__gnn_check_shape(s, err, errlen)) != MT_OK) return -1;
        lshape *ns = realloc(c->sh, sizeof *ns * (size_t)(c->nsh + 1));
        if (!ns) goto nomem;
        c->sh = ns;
        c->sh[k] = (lshape){0};
        if (mt__gnn_plan_make(m, s, &c->sh[k].plan) != MT_OK) goto nomem;
        c->nsh++;
    }
    if (c->sh[k].cap < need) {
        mt__gnn_ws_free(c->sh[k].ws);
        c->sh[k].ws = NULL;
        c->sh[k].cap = 0;
        if (mt__gnn_ws_make(m, c->sh[k].plan, need, 1, &c->sh[k].ws) != MT_OK) goto nomem;
        c->sh[k].cap = need;
    }
    return k;
nomem:
    *st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a training workspace");
    return -1;
}

/* Forward of the chunk order[a .. a+b) (one shape k) into its workspace. */
static void chunk_forward(mt__gnn_lctx *c, const mt_gnn *m, const mt_gnn_sample *const *set, int k, int a, int b) {
    for (int j = 0; j < b; j++) c->ptr[j] = set[c->order[a + j]]->feats;
    mt__gnn_input(m, c->sh[k].plan, c->sh[k].ws, b, c->ptr);
    mt__gnn_forward(m, c->sh[k].plan, c->sh[k].ws, b);
}

mt_status mt__gnn_set_loss(mt__gnn_lctx *c, mt_gnn *m, const float *w, mt_gnn_loss loss, const mt_gnn_sample *const *set, int n,
                           const mt_gnn_sample *const *ref, int nref, double *out, float *grad, char *err, size_t errlen) {
    if (!c || !m || !set || !out || n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: no samples to adapt or meta-train on");
    if (ensure_scratch(c, n) != MT_OK) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %d samples", n);
    int need = n < SET_CHUNK ? n : SET_CHUNK;
    mt_status st = MT_OK;
    for (int i = 0; i < n; i++) {
        const mt_gnn_sample *x = set[i];
        if (!x || !x->feats) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: sample %d has no features", i);
        if (!x->failed && !isfinite(x->target)) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: sample %d has a non-finite target", i);
        char why[160];
        if ((c->sid[i] = shape_of(c, m, x->shape, need, &st, why, sizeof why)) < 0)
            return mt__fail(err, errlen, st, "gnn: sample %d: %s", i, why);
    }
    /* Groups: targets shifted so that each group's best working one in
     * ref (or, where ref has none, in the set) is 0; a failed sample's
     * regression target is its group's lowest in the set, shifted, minus 1
     * (0 in a group with no working sample), as in training. */
    int ng = 0;
    for (int i = 0; i < n; i++) {
        int g = 0;
        while (g < ng && c->gval[g] != set[i]->group) g++;
        if (g == ng) c->gval[ng] = set[i]->group, c->gwork[ng] = 0, c->gref[ng] = 0, ng++;
        c->grp[i] = g;
        c->fail[i] = set[i]->failed != 0;
        if (c->fail[i]) continue;
        float t = set[i]->target;
        if (!c->gwork[g]++) c->gmax[g] = c->gmin[g] = t;
        else c->gmax[g] = t > c->gmax[g] ? t : c->gmax[g], c->gmin[g] = t < c->gmin[g] ? t : c->gmin[g];
    }
    for (int i = 0; i < nref && ref; i++) {
        if (!ref[i] || ref[i]->failed || !isfinite(ref[i]->target)) continue;
        int g = 0;
        while (g < ng && c->gval[g] != ref[i]->group) g++;
        if (g == ng) continue;
        float t = ref[i]->target;
        if (!c->gref[g]++ || t > c->gshift[g]) c->gshift[g] = t;
    }
    for (int g = 0; g < ng; g++)
        if (!c->gref[g]) c->gshift[g] = c->gwork[g] ? c->gmax[g] : 0.0f;
    for (int i = 0; i < n; i++) {
        int g = c->grp[i];
        c->tg[i] = c->fail[i] ? 0.0f : set[i]->target - c->gshift[g];
        c->rt[i] = c->fail[i] ? (c->gwork[g] ? c->gmin[g] - c->gshift[g] - 1.0f : 0.0f) : c->tg[i];
    }
    /* chunk order: by shape, set order within a shape */
    int o = 0;
    for (int k = 0; k < c->nsh; k++)
        for (int i = 0; i < n; i++)
            if (c->sid[i] == k) c->order[o++] = i;
    float *keep = m->w;
    if (w) m->w = (float *)w; /* the forward and backward read the model's weights */
    int nchunks = 0;
    for (int a = 0, b; a < n; a += b, nchunks++) {
        int k = c->sid[c->order[a]];
        for (b = 1; a + b < n && b < SET_CHUNK && c->sid[c->order[a + b]] == k; b++) {}
        chunk_forward(c, m, set, k, a, b);
        for (int j = 0; j < b; j++) c->s[c->order[a + j]] = c->sh[k].ws->s[j];
    }
    float *ds = grad ? c->ds : NULL;
    if (ds) memset(ds, 0, sizeof(float) * (size_t)n);
    double L = 0;
    if (loss != MT_GNN_LOSS_REG) L += mt__rank_loss(n, c->s, c->tg, c->grp, c->fail, 1.0f, ds, NULL);
    if (loss != MT_GNN_LOSS_RANK) L += mt__mse(n, c->s, c->rt, 1.0f, ds);
    if (grad) {
        memset(grad, 0, sizeof(float) * m->lay.total);
        for (int a = 0, b; a < n; a += b) {
            int k = c->sid[c->order[a]];
            for (b = 1; a + b < n && b < SET_CHUNK && c->sid[c->order[a + b]] == k; b++) {}
            /* one chunk: its forward is still in the workspace */
            if (nchunks > 1) chunk_forward(c, m, set, k, a, b);
            for (int j = 0; j < b; j++) c->dsc[j] = ds[c->order[a + j]];
            mt__gnn_backward(m, c->sh[k].plan, c->sh[k].ws, b, c->dsc, grad);
        }
    }
    m->w = keep;
    *out = L;
    return MT_OK;
}

/* Scales g[0..P) down to an L2 norm of MT__GNN_CLIP, as training does. */
static void clip(float *g, size_t P) {
    double norm = 0;
    for (size_t i = 0; i < P; i++) norm += (double)g[i] * g[i];
    norm = sqrt(norm);
    if (norm <= MT__GNN_CLIP) return;
    float scale = (float)(MT__GNN_CLIP / norm);
    for (size_t i = 0; i < P; i++) g[i] *= scale;
}

/* The inner procedure of m on weights w[P], in place: m->inner.steps
 * times w -= rate * g (g: the clipped gradient of the set's loss at w).
 * g is scratch; gsum (if not NULL) gets the sum of the steps' g. */
static mt_status inner_run(mt__gnn_lctx *c, mt_gnn *m, float *w, const mt_gnn_sample *const *set, int n, float *g, float *gsum, char *err,
                           size_t errlen) {
    size_t P = m->lay.total;
    const float lr = (float)m->inner.lr;
    if (gsum) memset(gsum, 0, sizeof(float) * P);
    for (int k = 0; k < m->inner.steps; k++) {
        double loss;
        mt_status st = mt__gnn_set_loss(c, m, w, m->inner.loss, set, n, NULL, 0, &loss, g, err, errlen);
        if (st != MT_OK) return st;
        clip(g, P);
        if (m->rates)
            for (size_t i = 0; i < P; i++) w[i] -= m->rates[i] * g[i];
        else
            for (size_t i = 0; i < P; i++) w[i] -= lr * g[i];
        if (gsum)
            for (size_t i = 0; i < P; i++) gsum[i] += g[i];
    }
    return MT_OK;
}

mt_status mt_gnn_adapt(mt_gnn *m, const mt_gnn_sample *samples, int n, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: adapt: model is NULL");
    if (m->inner.steps < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: adapt: the model has no inner procedure (it is not meta-trained)");
    if (!samples || n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: adapt: no samples");
    size_t P = m->lay.total;
    const mt_gnn_sample **set = malloc(sizeof *set * (size_t)n);
    float *w = malloc(sizeof(float) * P), *g = malloc(sizeof(float) * P);
    mt__gnn_lctx *c = NULL;
    mt_status st = set && w && g ? mt__gnn_lctx_make(m, &c, err, errlen) : mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    if (st == MT_OK) {
        for (int i = 0; i < n; i++) set[i] = &samples[i];
        memcpy(w, m->w, sizeof(float) * P);
        st = inner_run(c, m, w, set, n, g, NULL, err, errlen);
    }
    if (st == MT_OK) {
        memcpy(m->w, w, sizeof(float) * P);
        m->origin = MT_GNN_ORIGIN_ADAPTED;
    }
    mt__gnn_lctx_free(c);
    free(set);
    free(w);
    free(g);
    return st;
}

/* ---- meta-training ---- */

/* Measured (gnn/gnn.h) for a start from pooled training. */
mt_gnn_meta_params mt_gnn_meta_default_params(void) {
    return (mt_gnn_meta_params){
        .algorithm = MT_GNN_META_SGD,
        .support = 16,
        .query = 32,
        .inner_steps = 1,
        .inner_lr = 1e-3,
        .tasks_per_batch = 16,
        .outer_lr = 3e-4,
        .rate_lr = 1e-2,
        .iterations = 300,
        .seed = 1,
        .from_current = 0,
    };
}

static mt_status check_meta_params(const mt_gnn_meta_params *p, char *err, size_t errlen) {
    if (!p) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: params are NULL");
    if (p->algorithm != MT_GNN_META_FOMAML && p->algorithm != MT_GNN_META_SGD)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: unknown algorithm %d", (int)p->algorithm);
    if (p->support < 1 || p->query < 1 || p->support > 1 << 20 || p->query > 1 << 20)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: support %d and query %d must be in [1, 2^20]", p->support, p->query);
    if (p->inner_steps < 1 || p->inner_steps > MT_GNN_MAX_INNER_STEPS)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: inner steps %d outside [1, %d]", p->inner_steps, MT_GNN_MAX_INNER_STEPS);
    if (!(p->inner_lr > 0) || !isfinite(p->inner_lr) || !((float)p->inner_lr > 0))
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: the inner rate must be positive");
    if (!(p->outer_lr > 0) || !isfinite(p->outer_lr) || !(p->rate_lr > 0) || !isfinite(p->rate_lr))
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: the outer and rate step sizes must be positive");
    if (p->tasks_per_batch < 1 || p->tasks_per_batch > 1 << 20)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: tasks per batch %d outside [1, 2^20]", p->tasks_per_batch);
    if (p->iterations < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: iterations %d < 0", p->iterations);
    return MT_OK;
}

struct mt__gnn_meta {
    mt_gnn *m;
    mt_gnn_meta_params p;
    mt__gnn_lctx *lc;
    size_t P;
    float *wi;      /* a task's adapted weights */
    float *g;       /* scratch gradient */
    float *gsum;    /* Meta-SGD: the sum of the inner steps' gradients */
    float *G, *GR;  /* the meta-gradient of the weights and of the log rates */
    float *am, *av; /* Adam's moments of the weights */
    float *rho, *rm, *rv; /* Meta-SGD: log rates and their moments */
    int64_t t;
};

void mt__gnn_meta_free(mt__gnn_meta *st) {
    if (!st) return;
    mt__gnn_lctx_free(st->lc);
    free(st->wi), free(st->g), free(st->gsum), free(st->G), free(st->GR);
    free(st->am), free(st->av), free(st->rho), free(st->rm), free(st->rv);
    free(st);
}

mt_status mt__gnn_meta_make(mt_gnn *m, const mt_gnn_meta_params *p, mt__gnn_meta **out, char *err, size_t errlen) {
    *out = NULL;
    mt_status st = check_meta_params(p, err, errlen);
    if (st != MT_OK) return st;
    mt__gnn_meta *s = calloc(1, sizeof *s);
    if (!s) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    s->m = m, s->p = *p, s->P = m->lay.total;
    size_t P = s->P;
    int sgd = p->algorithm == MT_GNN_META_SGD;
    s->wi = malloc(sizeof(float) * P), s->g = malloc(sizeof(float) * P), s->G = malloc(sizeof(float) * P);
    s->am = calloc(P, sizeof(float)), s->av = calloc(P, sizeof(float));
    int ok = s->wi && s->g && s->G && s->am && s->av;
    float *rates = NULL;
    if (sgd) {
        s->gsum = malloc(sizeof(float) * P), s->GR = malloc(sizeof(float) * P), s->rho = malloc(sizeof(float) * P);
        s->rm = calloc(P, sizeof(float)), s->rv = calloc(P, sizeof(float));
        rates = malloc(sizeof(float) * P);
        ok = ok && s->gsum && s->GR && s->rho && s->rm && s->rv && rates;
    }
    if (!ok || mt__gnn_lctx_make(m, &s->lc, err, errlen) != MT_OK) {
        free(rates);
        mt__gnn_meta_free(s);
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for meta-training");
    }
    float lr = (float)p->inner_lr;
    mt__gnn_clear_inner(m);
    m->origin = MT_GNN_ORIGIN_META;
    m->inner = (mt_gnn_inner){.algorithm = p->algorithm, .steps = p->inner_steps, .lr = lr, .loss = m->p.loss};
    if (sgd) {
        for (size_t i = 0; i < P; i++) rates[i] = lr, s->rho[i] = logf(lr);
        m->rates = rates;
    }
    *out = s;
    return MT_OK;
}

/* One Adam step of x[P] along g (b1 0.9, b2 0.999, eps 1e-8, as training). */
static void adam(float *x, const float *g, float *am, float *av, int64_t t, float lr, size_t P) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    float c1 = 1.0f / (1.0f - powf(b1, (float)t)), c2 = 1.0f / (1.0f - powf(b2, (float)t));
    for (size_t i = 0; i < P; i++) {
        am[i] = b1 * am[i] + (1 - b1) * g[i];
        av[i] = b2 * av[i] + (1 - b2) * g[i] * g[i];
        x[i] -= lr * (am[i] * c1) / (sqrtf(av[i] * c2) + eps);
    }
}

mt_status mt__gnn_meta_step(mt__gnn_meta *st, const mt__gnn_split *tasks, int T, double *qloss, char *err, size_t errlen) {
    if (!st || !tasks || T < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-step: no tasks");
    for (int k = 0; k < T; k++)
        if (tasks[k].ns < 1 || tasks[k].nq < 1 || !tasks[k].support || !tasks[k].query)
            return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-step: task %d has an empty support or query set", k);
    mt_gnn *m = st->m;
    const size_t P = st->P;
    const int sgd = m->rates != NULL;
    const float inv = 1.0f / (float)T;
    memset(st->G, 0, sizeof(float) * P);
    if (sgd) memset(st->GR, 0, sizeof(float) * P);
    double qsum = 0;
    for (int k = 0; k < T; k++) {
        memcpy(st->wi, m->w, sizeof(float) * P);
        mt_status s = inner_run(st->lc, m, st->wi, tasks[k].support, tasks[k].ns, st->g, sgd ? st->gsum : NULL, err, errlen);
        double lq = 0;
        /* the query's targets relative to the support's best: what the
         * adapted model is asked for when tuning (scores relative to the
         * best measured so far) */
        if (s == MT_OK)
            s = mt__gnn_set_loss(st->lc, m, st->wi, m->inner.loss, tasks[k].query, tasks[k].nq, tasks[k].support, tasks[k].ns, &lq, st->g, err,
                                 errlen);
        if (s != MT_OK) return s;
        qsum += lq;
        /* first order: the query gradient at the adapted weights stands for
         * the initial weights'; the rates': dL/d rate = -g_q * gsum, and
         * through rate = exp(rho), dL/d rho = rate * dL/d rate */
        for (size_t i = 0; i < P; i++) st->G[i] += inv * st->g[i];
        if (sgd)
            for (size_t i = 0; i < P; i++) st->GR[i] -= inv * st->g[i] * st->gsum[i] * m->rates[i];
    }
    clip(st->G, P);
    st->t++;
    adam(m->w, st->G, st->am, st->av, st->t, (float)st->p.outer_lr, P);
    if (sgd) {
        clip(st->GR, P);
        adam(st->rho, st->GR, st->rm, st->rv, st->t, (float)st->p.rate_lr, P);
        for (size_t i = 0; i < P; i++) m->rates[i] = expf(st->rho[i]);
    }
    if (qloss) *qloss = qsum / T;
    return MT_OK;
}

const float *mt__gnn_meta_grad(const mt__gnn_meta *st, int rates) { return rates ? st->GR : st->G; }

static int shapes_equal(const mt_graph_shape *a, const mt_graph_shape *b) {
    if (a == b) return 1;
    if (!a || !b) return 0;
    size_t E = (size_t)a->n_edges;
    return a->n_nodes == b->n_nodes && a->n_edges == b->n_edges && a->hash == b->hash &&
           memcmp(a->node_type, b->node_type, sizeof(int) * (size_t)a->n_nodes) == 0 &&
           (E == 0 || (memcmp(a->edge_src, b->edge_src, sizeof(int) * E) == 0 && memcmp(a->edge_dst, b->edge_dst, sizeof(int) * E) == 0 &&
                       memcmp(a->edge_type, b->edge_type, sizeof(int) * E) == 0));
}

/* Checks every sample of the usable tasks up front, so that a run cannot
 * stop half-way on bad input. */
static mt_status check_tasks(const mt_gnn_task *tasks, int ntasks, int *usable, char *err, size_t errlen) {
    *usable = 0;
    for (int t = 0; t < ntasks; t++) {
        const mt_gnn_task *k = &tasks[t];
        if (k->n < 2) continue;
        if (!k->samples) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: task %d has no samples", t);
        char why[160];
        if (mt__gnn_check_shape(k->samples[0].shape, why, sizeof why) != MT_OK)
            return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: task %d: %s", t, why);
        for (int i = 0; i < k->n; i++) {
            const mt_gnn_sample *x = &k->samples[i];
            if (!x->feats) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: task %d, sample %d has no features", t, i);
            if (!x->failed && !isfinite(x->target))
                return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: task %d, sample %d has a non-finite target", t, i);
            if (!shapes_equal(x->shape, k->samples[0].shape))
                return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: task %d mixes graphs of different shapes (samples 0, %d)", t, i);
        }
        (*usable)++;
    }
    if (*usable == 0) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: no task with 2 or more samples");
    return MT_OK;
}

static int draw(uint64_t *rng, int n) { return (int)(mt__gnn_rand(rng) % (uint64_t)n); }

mt_status mt_gnn_meta_train(mt_gnn *m, const mt_gnn_meta_params *p, const mt_gnn_task *tasks, int ntasks, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: model is NULL");
    mt_status st = check_meta_params(p, err, errlen);
    if (st != MT_OK) return st;
    if (!tasks || ntasks < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: meta-train: no tasks");
    int nuse;
    if ((st = check_tasks(tasks, ntasks, &nuse, err, errlen)) != MT_OK) return st;
    /* Train a copy: m stays as it was unless the whole run succeeds. */
    mt_gnn *work = NULL;
    mt__gnn_meta *ms = NULL;
    int *use = malloc(sizeof(int) * (size_t)nuse), *idx = NULL;
    int T = p->tasks_per_batch < nuse ? p->tasks_per_batch : nuse, maxn = 0;
    int64_t total = 0;
    for (int t = 0, u = 0; use && t < ntasks; t++)
        if (tasks[t].n >= 2) {
            use[u++] = t;
            total += tasks[t].n;
            if (tasks[t].n > maxn) maxn = tasks[t].n;
        }
    mt__gnn_split *split = calloc((size_t)T, sizeof *split);
    const mt_gnn_sample **sup = malloc(sizeof *sup * (size_t)T * (size_t)p->support);
    const mt_gnn_sample **qry = malloc(sizeof *qry * (size_t)T * (size_t)p->query);
    idx = malloc(sizeof(int) * (size_t)maxn);
    if (!use || !split || !sup || !qry || !idx) {
        st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for meta-training");
        goto out;
    }
    if ((st = mt_gnn_clone(m, &work, err, errlen)) != MT_OK) goto out;
    if (!p->from_current) {
        mt__gnn_norm a;
        memset(&a, 0, sizeof a);
        for (int u = 0; u < nuse; u++) mt__gnn_norm_add(&a, work->lay.F, tasks[use[u]].samples, tasks[use[u]].n);
        mt__gnn_norm_set(work, &a);
        mt__gnn_init_weights(work, p->seed);
    }
    if ((st = mt__gnn_meta_make(work, p, &ms, err, errlen)) != MT_OK) goto out;
    uint64_t rng = p->seed ^ 0x3C6EF372FE94F82Bull;
    for (int it = 0; it < p->iterations; it++) {
        /* T distinct tasks (a partial shuffle of the usable ones), then per
         * task a partial shuffle of its samples: support first, query next */
        for (int k = 0; k < T; k++) {
            int j = k + draw(&rng, nuse - k), tmp = use[k];
            use[k] = use[j], use[j] = tmp;
            const mt_gnn_task *tk = &tasks[use[k]];
            int n = tk->n, K = p->support < n - 1 ? p->support : n - 1, Q = p->query < n - K ? p->query : n - K;
            for (int i = 0; i < n; i++) idx[i] = i;
            for (int i = 0; i < K + Q; i++) {
                int r = i + draw(&rng, n - i), x = idx[i];
                idx[i] = idx[r], idx[r] = x;
            }
            const mt_gnn_sample **ks = sup + (size_t)k * p->support, **qs = qry + (size_t)k * p->query;
            for (int i = 0; i < K; i++) ks[i] = &tk->samples[idx[i]];
            for (int i = 0; i < Q; i++) qs[i] = &tk->samples[idx[K + i]];
            split[k] = (mt__gnn_split){.support = ks, .ns = K, .query = qs, .nq = Q};
        }
        double ql;
        if ((st = mt__gnn_meta_step(ms, split, T, &ql, err, errlen)) != MT_OK) goto out;
        if (p->progress) p->progress(it, ql, p->user);
    }
    work->trained = total;
    st = mt_gnn_copy(m, work, err, errlen);
out:
    mt__gnn_meta_free(ms);
    mt_gnn_free(work);
    free(use);
    free(idx);
    free(split);
    free(sup);
    free(qry);
    return st;
}
