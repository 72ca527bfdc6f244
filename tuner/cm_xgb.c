/* The "xgb" cost model: AutoTVM's XGBoost baseline through XGBoost's C API.
 *
 * Rows are loop-nest features (tuner/loop_features.h) of every sample seen since
 * the last fit; labels are throughputs normalised per (workload, template):
 * min cost / cost, so the group's best is 1 and failed configs are 0.
 * Training uses AutoTVM's parameters (max_depth 3, gamma 1e-4,
 * min_child_weight 1, subsample 1, eta 0.3, lambda 1, alpha 0) with its
 * "reg" loss (reg:squarederror) or its "rank" loss (rank:pairwise, the
 * (workload, template) groups as query groups), and AutoTVM's early stop:
 * every 5 rounds the model ranks its own
 * training rows, and training stops when the average recall curve up to the
 * plan size has not improved for xgb_early_stop rounds. Each fit or update
 * trains a new booster from scratch on all stored rows (as AutoTVM does);
 * the old booster is kept until the new one is complete, so a failed
 * training leaves the model as it was.
 *
 * Two things keep it fast. Columns that are constant over the training rows
 * (for one template, more than half of them: unused loop slots, the workload)
 * are dropped before XGBoost sees them, and candidates are compacted the same
 * way. XGBoost gets one OpenMP thread per MT__XGB_ROWS_PER_THREAD rows (up to
 * `threads`): on a few hundred rows its thread start-up and barriers cost
 * more than they save, many times over on a loaded machine. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xgboost/c_api.h>

#include "costmodel-impl.h"
#include "loop_features.h"
#include "fail.h"

#define D MT_FEATURES_DIM
#define MT__XGB_ROWS_PER_THREAD 2000

typedef struct group {
    mt_workload wl;
    const mt_template *t;
} group;

typedef struct xgb_cm {
    float *x;     /* n rows of D features */
    double *cost; /* ms; <= 0 for failed samples */
    int *grp;     /* group of each row */
    int n, cap;
    group *groups;
    int ngroups, capgroups;
    uint64_t rng;
} xgb_cm;

/* A trained booster and the feature columns it reads. */
typedef struct booster {
    BoosterHandle h; /* NULL until fitted */
    int *cols;
    int ncols;
    int nthread; /* as last set on h */
} booster;

typedef struct xgb_model {
    xgb_cm store;
    booster b;
} xgb_model;

static void booster_free(booster *b) {
    if (b->h) XGBoosterFree(b->h);
    free(b->cols);
    memset(b, 0, sizeof *b);
}

static int threads_for(const mt_costmodel_params *p, int rows) {
    int t = 1 + rows / MT__XGB_ROWS_PER_THREAD;
    return t < p->threads ? t : p->threads;
}

static mt_status set_nthread(booster *b, int t, char *err, size_t errlen);

static mt_status xgb_fail(char *err, size_t errlen, const char *what) {
    const char *msg = XGBGetLastError();
    return mt__fail(err, errlen, MT_IO, "xgboost: %s: %s", what, msg && *msg ? msg : "unknown error");
}

/* ---- features, on several threads ---- */

typedef struct job {
    const mt_workload *const *wl; /* per row, or one for all when stride 0 */
    const mt_template *const *t;
    const mt_space *const *sp;
    int stride;                   /* 1: per-row pointers; 0: the same for all */
    const mt_config *cfgs;
    size_t cfg_stride;            /* bytes between configs */
    int lo, hi;
    float *out;
    mt_config *tmp;               /* scratch: hi - lo configs */
    mt_status st;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    j->st = MT_OK;
    int i = j->lo;
    while (i < j->hi && j->st == MT_OK) {
        int a = i * j->stride;
        int e = i + 1;
        while (e < j->hi && j->wl[e * j->stride] == j->wl[a] && j->t[e * j->stride] == j->t[a] && j->sp[e * j->stride] == j->sp[a]) e++;
        for (int r = i; r < e; r++) j->tmp[r - i] = *(const mt_config *)((const char *)j->cfgs + (size_t)r * j->cfg_stride);
        int dim;
        j->st = mt_features_extract(j->wl[a], j->t[a], j->sp[a], j->tmp, e - i, j->out + (size_t)i * D, &dim);
        i = e;
    }
    return NULL;
}

/* Features of n configs into out; task pointers per row (stride 1) or shared
 * (stride 0). Splits the rows over up to `threads` threads. */
static mt_status extract(const mt_workload *const *wl, const mt_template *const *t, const mt_space *const *sp, int stride, const mt_config *cfgs,
                         size_t cfg_stride, int n, float *out, int threads, char *err, size_t errlen) {
    enum { MAXT = 16, MIN_ROWS = 32 };
    if (threads > MAXT) threads = MAXT;
    if (threads > n / MIN_ROWS) threads = n / MIN_ROWS;
    if (threads < 1) threads = 1;
    mt_config *tmp = malloc(sizeof(mt_config) * (size_t)n);
    if (!tmp) return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory");
    job jobs[MAXT];
    pthread_t tid[MAXT];
    int started[MAXT] = {0};
    for (int k = 0; k < threads; k++) {
        jobs[k] = (job){.wl = wl, .t = t, .sp = sp, .stride = stride, .cfgs = cfgs, .cfg_stride = cfg_stride,
                        .lo = (int)((int64_t)n * k / threads), .hi = (int)((int64_t)n * (k + 1) / threads), .out = out};
        jobs[k].tmp = tmp + jobs[k].lo;
    }
    for (int k = 1; k < threads; k++) started[k] = pthread_create(&tid[k], NULL, run_job, &jobs[k]) == 0;
    run_job(&jobs[0]);
    for (int k = 1; k < threads; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else run_job(&jobs[k]); /* no thread: do its share here */
    }
    free(tmp);
    for (int k = 0; k < threads; k++)
        if (jobs[k].st != MT_OK) return mt__fail(err, errlen, jobs[k].st, "xgb: feature extraction failed (%s)", mt_status_str(jobs[k].st));
    return MT_OK;
}

/* ---- sample store ---- */

static int find_group(xgb_cm *c, const mt_workload *wl, const mt_template *t) {
    for (int g = 0; g < c->ngroups; g++)
        if (c->groups[g].t == t && memcmp(&c->groups[g].wl, wl, sizeof *wl) == 0) return g;
    if (c->ngroups == c->capgroups) {
        int cap = c->capgroups ? 2 * c->capgroups : 8;
        group *ng = realloc(c->groups, sizeof *ng * (size_t)cap);
        if (!ng) return -1;
        c->groups = ng;
        c->capgroups = cap;
    }
    c->groups[c->ngroups] = (group){.wl = *wl, .t = t};
    return c->ngroups++;
}

/* Appends samples' rows; on failure the store keeps its old rows (groups
 * added on the way stay, unused, which is harmless). */
static mt_status add_samples(xgb_cm *c, const mt_costmodel_params *p, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    if (c->n + n > c->cap) {
        int cap = c->cap ? c->cap : 256;
        while (cap < c->n + n) cap *= 2;
        float *x = realloc(c->x, sizeof(float) * (size_t)cap * D);
        if (!x) return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory for %d samples", cap);
        c->x = x;
        double *cost = realloc(c->cost, sizeof(double) * (size_t)cap);
        if (!cost) return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory for %d samples", cap);
        c->cost = cost;
        int *grp = realloc(c->grp, sizeof(int) * (size_t)cap);
        if (!grp) return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory for %d samples", cap);
        c->grp = grp;
        c->cap = cap;
    }
    const mt_workload **wl = malloc(sizeof *wl * (size_t)n);
    const mt_template **t = malloc(sizeof *t * (size_t)n);
    const mt_space **sp = malloc(sizeof *sp * (size_t)n);
    mt_status st = MT_OK;
    if (!wl || !t || !sp) st = mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory");
    for (int i = 0; i < n && st == MT_OK; i++) {
        wl[i] = s[i].wl, t[i] = s[i].tmpl, sp[i] = s[i].space;
        int g = find_group(c, s[i].wl, s[i].tmpl);
        if (g < 0) st = mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory");
        c->grp[c->n + i] = g;
        c->cost[c->n + i] = s[i].failed ? 0.0 : s[i].cost_ms;
    }
    if (st == MT_OK)
        st = extract((const mt_workload *const *)wl, (const mt_template *const *)t, (const mt_space *const *)sp, 1, &s[0].cfg, sizeof s[0], n,
                     c->x + (size_t)c->n * D, p->threads, err, errlen);
    free(wl);
    free(t);
    free(sp);
    if (st == MT_OK) c->n += n;
    return st;
}

/* ---- training ---- */

typedef struct scored {
    double key;
    int i;
} scored;

static int by_key_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1;
    return x->i - y->i;
}

/* AutoTVM's average recall curve up to k, averaged over groups: rows
 * [start[g], start[g+1]) form group g. */
static double recall_score(const float *label, const float *pred, const int *start, int ngroups, int k, scored *tmp, int *rank) {
    double total = 0;
    int counted = 0;
    for (int g = 0; g < ngroups; g++) {
        int a = start[g], m = start[g + 1] - a;
        if (m < 2) continue;
        for (int i = 0; i < m; i++) tmp[i] = (scored){label[a + i], i};
        qsort(tmp, (size_t)m, sizeof *tmp, by_key_desc);
        for (int r = 0; r < m; r++) rank[tmp[r].i] = r;
        for (int i = 0; i < m; i++) tmp[i] = (scored){pred[a + i], i};
        qsort(tmp, (size_t)m, sizeof *tmp, by_key_desc);
        int kk = k < m ? k : m, hit = 0;
        double curve = 0;
        /* after i+1 trials: how many of them are among the true top i+1 */
        for (int i = 0; i < kk; i++) {
            hit = 0;
            for (int j = 0; j <= i; j++) hit += rank[tmp[j].i] <= i;
            curve += (double)hit / (double)(i + 1);
        }
        total += curve / kk;
        counted++;
    }
    return counted ? total / counted : 0;
}

static mt_status set_params(BoosterHandle b, const mt_costmodel_params *p, int threads, char *err, size_t errlen) {
    char depth[16], eta[32], nthread[16], seed[32];
    snprintf(depth, sizeof depth, "%d", p->xgb_max_depth);
    snprintf(eta, sizeof eta, "%.17g", p->xgb_eta);
    snprintf(nthread, sizeof nthread, "%d", threads);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)(p->seed & 0x7fffffff));
    const char *kv[][2] = {
        {"booster", "gbtree"},   {"max_depth", depth}, {"gamma", "0.0001"}, {"min_child_weight", "1"},
        {"subsample", "1.0"},    {"eta", eta},         {"lambda", "1"},     {"alpha", "0"},
        {"objective", p->xgb_loss == MT_XGB_LOSS_RANK ? "rank:pairwise" : "reg:squarederror"}, {"nthread", nthread}, {"seed", seed}, {"verbosity", "0"},
        {"tree_method", "hist"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (XGBoosterSetParam(b, kv[i][0], kv[i][1]) != 0) return xgb_fail(err, errlen, "setting parameters");
    return MT_OK;
}

static mt_status set_nthread(booster *b, int t, char *err, size_t errlen) {
    if (b->nthread == t) return MT_OK;
    char v[16];
    snprintf(v, sizeof v, "%d", t);
    if (XGBoosterSetParam(b->h, "nthread", v) != 0) return xgb_fail(err, errlen, "setting nthread");
    b->nthread = t;
    return MT_OK;
}

/* Copies the columns cols[0..ncols) of n full rows into x. */
static void compact(const float *full, int n, const int *cols, int ncols, float *x) {
    for (int r = 0; r < n; r++) {
        const float *src = full + (size_t)r * D;
        float *dst = x + (size_t)r * (size_t)ncols;
        for (int j = 0; j < ncols; j++) dst[j] = src[cols[j]];
    }
}

/* Trains a new booster on all stored rows into *out. */
static mt_status train(xgb_cm *c, const mt_costmodel_params *p, booster *out, char *err, size_t errlen) {
    int n = c->n, G = c->ngroups;
    mt_status st = MT_OK;
    float *x = malloc(sizeof(float) * (size_t)n * D);
    float *label = malloc(sizeof(float) * (size_t)n);
    float *pred = malloc(sizeof(float) * (size_t)n);
    int *order = malloc(sizeof(int) * (size_t)n);
    int *start = calloc((size_t)G + 1, sizeof(int));
    unsigned *sizes = malloc(sizeof(unsigned) * (size_t)(G ? G : 1));
    double *best = malloc(sizeof(double) * (size_t)(G ? G : 1));
    scored *tmp = malloc(sizeof(scored) * (size_t)n);
    int *rank = malloc(sizeof(int) * (size_t)n);
    int *cols = malloc(sizeof(int) * D);
    int ncols = 0;
    DMatrixHandle dm = NULL;
    BoosterHandle b = NULL;
    if (!x || !label || !pred || !order || !start || !sizes || !best || !tmp || !rank || !cols) {
        st = mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory for %d training rows", n);
        goto done;
    }
    /* Rows grouped (XGBoost wants each group contiguous), shuffled inside each group. */
    for (int i = 0; i < n; i++) start[c->grp[i] + 1]++;
    for (int g = 0; g < G; g++) start[g + 1] += start[g];
    for (int g = 0; g < G; g++) best[g] = INFINITY;
    {
        int *fill = calloc((size_t)(G ? G : 1), sizeof(int));
        if (!fill) {
            st = mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory");
            goto done;
        }
        for (int i = 0; i < n; i++) order[start[c->grp[i]] + fill[c->grp[i]]++] = i;
        free(fill);
    }
    for (int g = 0; g < G; g++)
        for (int i = start[g + 1] - 1; i > start[g]; i--) {
            int j = start[g] + (int)mt_rng_below(&c->rng, (uint64_t)(i - start[g] + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
    for (int i = 0; i < n; i++)
        if (c->cost[i] > 0 && c->cost[i] < best[c->grp[i]]) best[c->grp[i]] = c->cost[i];
    /* Columns that vary over the training rows (at least one, to have a matrix). */
    for (int j = 0; j < D; j++) {
        const float v = c->x[j];
        for (int i = 1; i < n; i++)
            if (c->x[(size_t)i * D + j] != v) {
                cols[ncols++] = j;
                break;
            }
    }
    if (ncols == 0) cols[ncols++] = 0;
    for (int r = 0; r < n; r++) {
        int i = order[r];
        compact(c->x + (size_t)i * D, 1, cols, ncols, x + (size_t)r * (size_t)ncols);
        label[r] = c->cost[i] > 0 ? (float)(best[c->grp[i]] / c->cost[i]) : 0.0f;
    }
    int ng = 0;
    for (int g = 0; g < G; g++)
        if (start[g + 1] > start[g]) sizes[ng++] = (unsigned)(start[g + 1] - start[g]);
    /* start[] compacted the same way, for the recall score */
    {
        int w = 0;
        for (int g = 0; g < G; g++)
            if (start[g + 1] > start[g]) start[w++] = start[g];
        start[w] = n;
    }

    int nthread = threads_for(p, n);
    if (XGDMatrixCreateFromMat_omp(x, (bst_ulong)n, (bst_ulong)ncols, NAN, &dm, nthread) != 0) {
        dm = NULL;
        st = xgb_fail(err, errlen, "creating the training matrix");
        goto done;
    }
    if (XGDMatrixSetFloatInfo(dm, "label", label, (bst_ulong)n) != 0) {
        st = xgb_fail(err, errlen, "setting labels");
        goto done;
    }
    if (p->xgb_loss == MT_XGB_LOSS_RANK && XGDMatrixSetUIntInfo(dm, "group", sizes, (bst_ulong)ng) != 0) {
        st = xgb_fail(err, errlen, "setting groups");
        goto done;
    }
    if (XGBoosterCreate(&dm, 1, &b) != 0) {
        b = NULL;
        st = xgb_fail(err, errlen, "creating the booster");
        goto done;
    }
    if ((st = set_params(b, p, nthread, err, errlen)) != MT_OK) goto done;
    double best_score = -1;
    int best_round = 0;
    for (int it = 0; it < p->xgb_rounds; it++) {
        if (XGBoosterUpdateOneIter(b, it, dm) != 0) {
            st = xgb_fail(err, errlen, "boosting");
            goto done;
        }
        if (p->xgb_early_stop <= 0 || (it + 1) % 5 != 0) continue;
        bst_ulong len = 0;
        const float *res = NULL;
        if (XGBoosterPredict(b, dm, 0, 0, 0, &len, &res) != 0 || len != (bst_ulong)n) {
            st = xgb_fail(err, errlen, "predicting the training rows");
            goto done;
        }
        memcpy(pred, res, sizeof(float) * (size_t)n);
        double score = recall_score(label, pred, start, ng, p->plan_size, tmp, rank);
        if (score > best_score + 1e-9) {
            best_score = score;
            best_round = it;
        } else if (it - best_round >= p->xgb_early_stop) {
            break;
        }
    }
    *out = (booster){.h = b, .cols = cols, .ncols = ncols, .nthread = nthread};
    b = NULL;
    cols = NULL;
done:
    if (b) XGBoosterFree(b);
    free(cols);
    if (dm) XGDMatrixFree(dm);
    free(x);
    free(label);
    free(pred);
    free(order);
    free(start);
    free(sizes);
    free(best);
    free(tmp);
    free(rank);
    return st;
}

/* ---- the kind ---- */

static mt_status xgb_init(mt_costmodel *m, char *err, size_t errlen) {
    xgb_model *c = calloc(1, sizeof *c);
    if (!c) return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory");
    c->store.rng = m->params.seed;
    m->context = c;
    return MT_OK;
}

static void clear_store(xgb_cm *c) {
    free(c->x);
    free(c->cost);
    free(c->grp);
    free(c->groups);
    c->x = NULL, c->cost = NULL, c->grp = NULL, c->groups = NULL;
    c->n = c->cap = c->ngroups = c->capgroups = 0;
}

static mt_status xgb_fit(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    xgb_model *c = m->context;
    /* Build the new store aside so that a failure leaves the old one. */
    xgb_cm fresh = {.rng = c->store.rng};
    booster b = {0};
    mt_status st = add_samples(&fresh, &m->params, s, n, err, errlen);
    if (st == MT_OK) st = train(&fresh, &m->params, &b, err, errlen);
    if (st != MT_OK) {
        clear_store(&fresh);
        return st;
    }
    clear_store(&c->store);
    booster_free(&c->b);
    c->store = fresh;
    c->b = b;
    return MT_OK;
}

static mt_status xgb_update(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    xgb_model *c = m->context;
    int old_n = c->store.n, old_groups = c->store.ngroups;
    booster b = {0};
    mt_status st = add_samples(&c->store, &m->params, s, n, err, errlen);
    if (st == MT_OK) st = train(&c->store, &m->params, &b, err, errlen);
    if (st != MT_OK) {
        c->store.n = old_n;
        c->store.ngroups = old_groups;
        return st;
    }
    booster_free(&c->b);
    c->b = b;
    return MT_OK;
}

static mt_status xgb_predict(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err, size_t errlen) {
    xgb_model *c = m->context;
    float *full = malloc(sizeof(float) * (size_t)n * D);
    float *x = malloc(sizeof(float) * (size_t)n * (size_t)(c->b.h ? c->b.ncols : 1));
    if (!full || !x) {
        free(full);
        free(x);
        return mt__fail(err, errlen, MT_NOMEM, "xgb: out of memory for %d candidates", n);
    }
    mt_status st = extract(&q->wl, &q->tmpl, &q->space, 0, cfgs, sizeof cfgs[0], n, full, m->params.threads, err, errlen);
    if (st == MT_OK && !c->b.h) {
        /* not fitted: no ranking yet, but unbuildable configs are known */
        for (int i = 0; i < n; i++) scores[i] = full[(size_t)i * D] > 0 ? 0.0 : MT_COSTMODEL_INVALID_SCORE;
        free(full);
        free(x);
        return MT_OK;
    }
    if (st == MT_OK) st = set_nthread(&c->b, threads_for(&m->params, n), err, errlen);
    DMatrixHandle dm = NULL;
    bst_ulong len = 0;
    const float *res = NULL;
    if (st == MT_OK) {
        compact(full, n, c->b.cols, c->b.ncols, x);
        if (XGDMatrixCreateFromMat_omp(x, (bst_ulong)n, (bst_ulong)c->b.ncols, NAN, &dm, c->b.nthread) != 0) {
            dm = NULL;
            st = xgb_fail(err, errlen, "creating the candidate matrix");
        } else if (XGBoosterPredict(c->b.h, dm, 0, 0, 0, &len, &res) != 0) {
            st = xgb_fail(err, errlen, "predicting");
        } else if (len != (bst_ulong)n) {
            st = mt__fail(err, errlen, MT_IO, "xgboost: %llu predictions for %d candidates", (unsigned long long)len, n);
        } else {
            for (int i = 0; i < n; i++) scores[i] = full[(size_t)i * D] > 0 ? (double)res[i] : MT_COSTMODEL_INVALID_SCORE;
        }
    }
    if (dm) XGDMatrixFree(dm);
    free(full);
    free(x);
    return st;
}

static void xgb_free(mt_costmodel *m) {
    xgb_model *c = m->context;
    if (!c) return;
    booster_free(&c->b);
    clear_store(&c->store);
    free(c);
}

const struct mt_costmodel_i mt__costmodel_xgb = {
    /* .kind    = */ "xgb",
    /* .init    = */ xgb_init,
    /* .fit     = */ xgb_fit,
    /* .update  = */ xgb_update,
    /* .predict = */ xgb_predict,
    /* .free    = */ xgb_free,
};
