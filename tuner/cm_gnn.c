/* The GNN cost models: kernel graphs (graph_enc/) scored by the GNN
 * (gnn/), behind the cost-model interface.
 *
 * The model keeps every sample it was given as encoded graph features (the
 * template's shape is fixed, so a sample is n_nodes x MT_GRAPH_FEATS floats),
 * because each update retrains on all of them, as AutoTVM's XGBoost model
 * does. Targets are per group (workload, template, device): log(best cost /
 * cost), so 0 is the group's best and a config twice as slow is -0.69; the
 * GNN's ranking loss only compares configs within a group.
 *
 * Three ways to learn (mode):
 *   scratch   "gnn", "gnn-shared", "mlp" without params.gnn_model: every fit
 *             and update trains from freshly drawn weights for gnn_epochs
 *             epochs;
 *   transfer  "gnn-transfer" (and the three above with params.gnn_model):
 *             the weights start from the file; a fit goes back to them and
 *             an update continues from the current weights, each with
 *             gnn_adapt_steps Adam steps at gnn_adapt_lr on every sample;
 *   meta      "gnn-meta": the file's meta-learned initial weights score a
 *             group with no samples (zero-shot); a group with samples is
 *             scored by weights adapted from the initial ones, on all of the
 *             group's samples, with the file's inner procedure
 *             (mt_gnn_adapt), again from the initial weights on every
 *             update, so nothing drifts. One set of adapted weights per
 *             group, as each group is one meta-training task. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel-impl.h"
#include "gnn.h"
#include "gnn_gpu.h"
#include "graph_enc.h"
#include "fail.h"

#define MAX_ENCODERS 8
#define MAX_THREADS 8
/* Candidates per share of a predict call. Each thread takes shares in
 * turn, encodes a share (only the configs the template builds, packed) and
 * scores it at once, while its features are still in cache (64 graphs of
 * the gemm template are 1.7 MB at most). Fixed, so a candidate's score does
 * not depend on the thread count; small, so that a batch of a few hundred
 * still keeps both threads busy (64, 128 and 256 scored equally fast). */
#define PREDICT_SHARE 64
/* Candidates per GPU pass of a predict call (when the GNN scores on a GPU,
 * gnn/gnn_gpu.h): the threads encode its shares, then one
 * scorer call runs them all on the device. */
#define GPU_CHUNK 4096
#define GPU_SHARES (GPU_CHUNK / PREDICT_SHARE)

typedef struct stored_sample {
    const mt_graph_shape *shape; /* the encoder's; encoders live as long as the model */
    float *feats;
    double cost_ms;
    int failed;
    int group;
} stored_sample;

typedef struct group_key {
    char key[320]; /* workload text | template | device fingerprint */
    double best_ms; /* over working samples; 0 when none */
} group_key;

enum { MODE_SCRATCH, MODE_TRANSFER, MODE_META };

typedef struct gnn_cm {
    mt_gnn_arch arch;
    int mode;
    mt_gnn *net;    /* the weights that score (meta: a copy of init or of one group's) */
    mt_gnn *init;   /* transfer and meta: the weights of params.gnn_model */
    int fitted;     /* net has been trained (or loaded) */
    /* meta: each group's adapted weights (NULL: no samples yet, init scores
     * it), and whose weights net holds (-1: init's) */
    mt_gnn **gnet;
    int gnet_cap;
    int net_holds;
    struct {
        const mt_template *t;
        mt_graph_encoder *enc;
    } enc[MAX_ENCODERS];
    int nenc;
    stored_sample *s;
    int ns, cap;
    group_key *groups;
    int ngroups, gcap;
    /* predict, per thread: a scorer for the last template's shape and the
     * buffers of one share */
    struct {
        mt_gnn_scorer *sc;
        float *feats;
        size_t feats_floats;
        int *index;
        float *scores;
    } th[MAX_THREADS];
    /* GPU scoring: gpu is 1 where a device is usable (decided at init),
     * 0 where not or after a failure (then the CPU scores, with a note) */
    int gpu;
    mt_gnn_gpu_scorer *gsc;
    float *gfeats;            /* [GPU_CHUNK][n][F]: the shares' encodings, then packed */
    size_t gfeats_floats;
    int *gindex;              /* [GPU_CHUNK]: each packed graph's place in its share */
    int gnv[GPU_SHARES];      /* buildable configs per share */
    float *gscores;           /* [GPU_CHUNK] */
} gnn_cm;

static mt_status find_encoder(gnn_cm *c, const mt_template *t, const mt_graph_encoder **out, char *err, size_t errlen) {
    for (int i = 0; i < c->nenc; i++)
        if (c->enc[i].t == t) {
            *out = c->enc[i].enc;
            return MT_OK;
        }
    if (c->nenc == MAX_ENCODERS) return mt__fail(err, errlen, MT_RANGE, "gnn: more than %d templates in one model", MAX_ENCODERS);
    mt_graph_encoder *e = NULL;
    mt_status st = mt_graph_encoder_create(t, &e, err, errlen);
    if (st != MT_OK) return st;
    c->enc[c->nenc].t = t;
    c->enc[c->nenc].enc = e;
    c->nenc++;
    *out = e;
    return MT_OK;
}

static void group_key_of(char *key, size_t len, const mt_workload *wl, const mt_template *t, const mt_device_info *dev) {
    char wtext[200];
    mt_workload_format(wl, wtext, sizeof wtext);
    snprintf(key, len, "%s|%s|%s", wtext, mt_template_name(t), dev ? dev->fingerprint : "");
}

/* The group of (wl, t, dev), or -1 when there is none yet. */
static int group_find(const gnn_cm *c, const mt_workload *wl, const mt_template *t, const mt_device_info *dev) {
    char key[320];
    group_key_of(key, sizeof key, wl, t, dev);
    for (int i = 0; i < c->ngroups; i++)
        if (strcmp(c->groups[i].key, key) == 0) return i;
    return -1;
}

static int group_of(gnn_cm *c, const mt_workload *wl, const mt_template *t, const mt_device_info *dev) {
    char key[320];
    int found = group_find(c, wl, t, dev);
    if (found >= 0) return found;
    group_key_of(key, sizeof key, wl, t, dev);
    if (c->ngroups == c->gcap) {
        int cap = c->gcap ? 2 * c->gcap : 16;
        group_key *g = realloc(c->groups, sizeof *g * (size_t)cap);
        if (!g) return -1;
        c->groups = g;
        c->gcap = cap;
    }
    snprintf(c->groups[c->ngroups].key, sizeof c->groups[c->ngroups].key, "%s", key);
    c->groups[c->ngroups].best_ms = 0;
    return c->ngroups++;
}

/* Encodes and stores samples; on failure nothing is added. */
static mt_status add_samples(mt_costmodel *m, gnn_cm *c, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    if (c->ns + n > c->cap) {
        int cap = c->cap ? c->cap : 64;
        while (cap < c->ns + n) cap *= 2;
        stored_sample *ns = realloc(c->s, sizeof *ns * (size_t)cap);
        if (!ns) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
        c->s = ns;
        c->cap = cap;
    }
    int added = 0, ngroups0 = c->ngroups;
    mt_status st = MT_OK;
    for (int i = 0; i < n; i++) {
        const mt_graph_encoder *enc = NULL;
        if ((st = find_encoder(c, s[i].tmpl, &enc, err, errlen)) != MT_OK) break;
        const mt_graph_shape *shape = mt_graph_encoder_shape(enc);
        float *f = malloc(sizeof *f * (size_t)shape->n_nodes * MT_GRAPH_FEATS);
        int valid = 0;
        if (!f) {
            st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
            break;
        }
        if ((st = mt_graph_encode(enc, s[i].wl, s[i].space, &s[i].cfg, 1, s[i].dev, f, &valid, err, errlen)) != MT_OK) {
            free(f);
            break;
        }
        int g = group_of(c, s[i].wl, s[i].tmpl, s[i].dev);
        if (g < 0) {
            free(f);
            st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
            break;
        }
        int failed = s[i].failed || !valid || !(s[i].cost_ms > 0);
        c->s[c->ns + added] = (stored_sample){.shape = shape, .feats = f, .cost_ms = s[i].cost_ms, .failed = failed, .group = g};
        added++;
    }
    if (st != MT_OK) {
        for (int i = 0; i < added; i++) free(c->s[c->ns + i].feats);
        c->ngroups = ngroups0;
        return st;
    }
    (void)m;
    c->ns += added;
    return MT_OK;
}

static void drop_samples_from(gnn_cm *c, int from) {
    for (int i = from; i < c->ns; i++) free(c->s[i].feats);
    c->ns = from;
}

/* The stored samples as GNN samples, with their targets: log(best / cost)
 * per group, best over the group's working samples. NULL: out of memory. */
static mt_gnn_sample *gnn_samples(gnn_cm *c) {
    for (int g = 0; g < c->ngroups; g++) c->groups[g].best_ms = 0;
    for (int i = 0; i < c->ns; i++) {
        group_key *g = &c->groups[c->s[i].group];
        if (!c->s[i].failed && (g->best_ms == 0 || c->s[i].cost_ms < g->best_ms)) g->best_ms = c->s[i].cost_ms;
    }
    mt_gnn_sample *gs = malloc(sizeof *gs * (size_t)(c->ns > 0 ? c->ns : 1));
    if (!gs) return NULL;
    for (int i = 0; i < c->ns; i++) {
        const stored_sample *x = &c->s[i];
        double best = c->groups[x->group].best_ms;
        gs[i] = (mt_gnn_sample){.shape = x->shape, .feats = x->feats, .group = x->group, .failed = x->failed,
                                .target = x->failed ? 0.0f : (float)log(best / x->cost_ms)};
    }
    return gs;
}

static mt_status ensure_gnet(gnn_cm *c, char *err, size_t errlen) {
    if (c->ngroups <= c->gnet_cap) return MT_OK;
    mt_gnn **g = realloc(c->gnet, sizeof *g * (size_t)c->ngroups);
    if (!g) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    for (int i = c->gnet_cap; i < c->ngroups; i++) g[i] = NULL;
    c->gnet = g;
    c->gnet_cap = c->ngroups;
    return MT_OK;
}

/* meta: adapts, from the initial weights, every group that has a sample
 * in [from, ns) on all of its samples; with reset, the other groups'
 * adapted weights are forgotten. All or nothing: the new weights replace
 * the old only when every group adapted. */
static mt_status meta_adapt(gnn_cm *c, const mt_gnn_sample *gs, int from, int reset, char *err, size_t errlen) {
    mt_status st = ensure_gnet(c, err, errlen);
    if (st != MT_OK) return st;
    int ng = c->ngroups;
    mt_gnn **fresh = calloc((size_t)(ng > 0 ? ng : 1), sizeof *fresh);
    mt_gnn_sample *sub = malloc(sizeof *sub * (size_t)(c->ns > 0 ? c->ns : 1));
    char *touched = calloc((size_t)(ng > 0 ? ng : 1), 1);
    if (!fresh || !sub || !touched) st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    for (int i = from; st == MT_OK && i < c->ns; i++) touched[c->s[i].group] = 1;
    for (int g = 0; st == MT_OK && g < ng; g++) {
        if (!touched[g]) continue;
        int k = 0;
        for (int i = 0; i < c->ns; i++)
            if (gs[i].group == g) sub[k++] = gs[i];
        if ((st = mt_gnn_clone(c->init, &fresh[g], err, errlen)) == MT_OK) st = mt_gnn_adapt(fresh[g], sub, k, err, errlen);
    }
    if (st == MT_OK) {
        for (int g = 0; g < ng; g++) {
            if (!touched[g] && !reset) continue;
            mt_gnn_free(c->gnet[g]);
            c->gnet[g] = fresh[g];
            fresh[g] = NULL;
        }
        c->net_holds = -2; /* whatever net holds may be stale */
    }
    for (int g = 0; fresh && g < ng; g++) mt_gnn_free(fresh[g]);
    free(fresh);
    free(sub);
    free(touched);
    return st;
}

/* Learns from every stored sample, as the mode says (the comment at the
 * top); `from` is the first new sample, reset says it is a fit. */
static mt_status train(mt_costmodel *m, gnn_cm *c, int from, int reset, char *err, size_t errlen) {
    mt_gnn_sample *gs = gnn_samples(c);
    if (!gs) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    mt_status st = MT_OK;
    if (c->mode == MODE_SCRATCH) {
        st = mt_gnn_fit(c->net, gs, c->ns, err, errlen);
    } else if (c->mode == MODE_TRANSFER && !reset) {
        st = mt_gnn_train_steps(c->net, gs, c->ns, m->params.gnn_adapt_steps, err, errlen);
    } else if (c->mode == MODE_TRANSFER) {
        /* back to the file's weights, fine-tuned in a copy so that a
         * failure leaves net as it was */
        mt_gnn *tmp = NULL;
        mt_gnn_params gp = mt_gnn_get_params(c->net);
        st = mt_gnn_clone(c->init, &tmp, err, errlen);
        if (st == MT_OK) st = mt_gnn_set_params(tmp, &gp, err, errlen);
        if (st == MT_OK) st = mt_gnn_train_steps(tmp, gs, c->ns, m->params.gnn_adapt_steps, err, errlen);
        if (st == MT_OK) st = mt_gnn_copy(c->net, tmp, err, errlen);
        mt_gnn_free(tmp);
    } else {
        st = meta_adapt(c, gs, from, reset, err, errlen);
    }
    free(gs);
    if (st == MT_OK) c->fitted = 1;
    return st;
}

/* The kinds: the architecture of a model trained from scratch, and the
 * mode (gnn-transfer and gnn-meta take theirs from the file). */
static mt_status gnn_init_mode(mt_costmodel *m, mt_gnn_arch arch, int mode, char *err, size_t errlen) {
    const char *kind = m->iface->kind, *file = m->params.gnn_model;
    if (mode != MODE_SCRATCH && !file)
        return mt__fail(err, errlen, MT_INVALID_ARG, "%s: needs a model file (params.gnn_model; mtgpu: --model FILE)", kind);
    if (mode == MODE_SCRATCH && file) mode = MODE_TRANSFER; /* gnn, gnn-shared, mlp with a file: fine-tuned */
    gnn_cm *c = calloc(1, sizeof *c);
    if (!c) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    c->mode = mode;
    c->net_holds = -1;
    mt_status st;
    if (file) {
        st = mt_gnn_load(file, &c->init, err, errlen);
        if (st == MT_OK && mode == MODE_META && mt_gnn_get_origin(c->init) != MT_GNN_ORIGIN_META)
            st = mt__fail(err, errlen, MT_INVALID_ARG, "%s: %s is %s, not meta-trained (train one with 'mtgpu train --meta', or use gnn-transfer)", kind,
                          file, mt_gnn_get_origin(c->init) == MT_GNN_ORIGIN_ADAPTED ? "an adapted model" : "a pooled-trained model");
        if (st == MT_OK) st = mt_gnn_clone(c->init, &c->net, err, errlen);
        c->fitted = st == MT_OK;
    } else {
        mt_gnn_params gp = mt_gnn_default_params();
        gp.arch = arch;
        gp.hidden = m->params.gnn_hidden;
        gp.layers = m->params.gnn_layers;
        st = mt_gnn_create(&gp, &c->net, err, errlen);
    }
    if (st == MT_OK) {
        mt_gnn_params gp = mt_gnn_get_params(c->net);
        gp.seed = m->params.seed;
        gp.epochs = m->params.gnn_epochs;
        gp.threads = m->params.threads;
        if (mode == MODE_TRANSFER) gp.lr = m->params.gnn_adapt_lr;
        st = mt_gnn_set_params(c->net, &gp, err, errlen);
    }
    if (st != MT_OK) {
        mt_gnn_free(c->net);
        mt_gnn_free(c->init);
        free(c);
        return st;
    }
    c->arch = mt_gnn_get_params(c->net).arch;
    c->gpu = mt_gnn_gpu_available(NULL, 0) == MT_OK;
    m->context = c;
    return MT_OK;
}

static mt_status gnn_init(mt_costmodel *m, char *err, size_t errlen) { return gnn_init_mode(m, MT_GNN_MODULAR, MODE_SCRATCH, err, errlen); }
static mt_status gnn_shared_init(mt_costmodel *m, char *err, size_t errlen) { return gnn_init_mode(m, MT_GNN_SHARED, MODE_SCRATCH, err, errlen); }
static mt_status mlp_init(mt_costmodel *m, char *err, size_t errlen) { return gnn_init_mode(m, MT_GNN_MLP, MODE_SCRATCH, err, errlen); }
static mt_status transfer_init(mt_costmodel *m, char *err, size_t errlen) { return gnn_init_mode(m, MT_GNN_MODULAR, MODE_TRANSFER, err, errlen); }
static mt_status meta_init(mt_costmodel *m, char *err, size_t errlen) { return gnn_init_mode(m, MT_GNN_MODULAR, MODE_META, err, errlen); }

static mt_status gnn_update(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    gnn_cm *c = m->context;
    int ns0 = c->ns;
    mt_status st = add_samples(m, c, s, n, err, errlen);
    if (st != MT_OK) return st;
    if ((st = train(m, c, ns0, 0, err, errlen)) != MT_OK) drop_samples_from(c, ns0);
    return st;
}

static mt_status gnn_fit(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    gnn_cm *c = m->context;
    /* Keep the old samples until the new ones are encoded and trained on, so
     * that a failure leaves the model as it was (the weights of a failed
     * mt_gnn_fit are untouched too). */
    stored_sample *old = c->s;
    int old_n = c->ns, old_cap = c->cap;
    c->s = NULL;
    c->ns = c->cap = 0;
    mt_status st = add_samples(m, c, s, n, err, errlen);
    if (st == MT_OK) st = train(m, c, 0, 1, err, errlen);
    if (st != MT_OK) {
        drop_samples_from(c, 0);
        free(c->s);
        c->s = old;
        c->ns = old_n;
        c->cap = old_cap;
        return st;
    }
    for (int i = 0; i < old_n; i++) free(old[i].feats);
    free(old);
    return MT_OK;
}

/* What the threads of one predict call share: the next share to take and
 * whether one of them failed. Threads take shares as they go, so one that
 * the machine holds back takes fewer; a share's scores are the same
 * whichever thread computes them. */
typedef struct predict_shared {
    atomic_int next, failed;
} predict_shared;

/* One thread's part of a predict call. */
typedef struct predict_job {
    gnn_cm *c;
    int t; /* the thread's slot in c->th */
    predict_shared *sh;
    const mt_graph_encoder *enc;
    const mt_cm_query *q;
    const mt_config *cfgs;
    int n, fitted;
    double *scores;
    mt_status st;
    char err[256];
} predict_job;

static void *predict_run(void *arg) {
    predict_job *j = arg;
    gnn_cm *c = j->c;
    float *f = c->th[j->t].feats, *fs = c->th[j->t].scores;
    int *index = c->th[j->t].index;
    for (int s; !atomic_load(&j->sh->failed) && (long)(s = atomic_fetch_add(&j->sh->next, 1)) * PREDICT_SHARE < j->n;) {
        int lo = s * PREDICT_SHARE, k = j->n - lo < PREDICT_SHARE ? j->n - lo : PREDICT_SHARE, nv = 0;
        j->st = mt_graph_encode_packed(j->enc, j->q->wl, j->q->space, j->cfgs + lo, k, j->q->dev, f, index, &nv, j->err, sizeof j->err);
        if (j->st == MT_OK && j->fitted) j->st = mt_gnn_scorer_run(c->th[j->t].sc, nv, f, fs, j->err, sizeof j->err);
        else if (j->st == MT_OK) memset(fs, 0, sizeof(float) * (size_t)nv);
        if (j->st != MT_OK) {
            atomic_store(&j->sh->failed, 1);
            break;
        }
        for (int i = 0; i < k; i++) j->scores[lo + i] = MT_COSTMODEL_INVALID_SCORE;
        for (int i = 0; i < nv; i++) {
            double v = fs[i];
            j->scores[lo + index[i]] = isfinite(v) ? v : MT_COSTMODEL_INVALID_SCORE / 2;
        }
    }
    return NULL;
}

/* The buffers and the scorer of thread slot t for the shape of enc. */
static mt_status predict_slot(gnn_cm *c, int t, const mt_graph_encoder *enc, char *err, size_t errlen) {
    const mt_graph_shape *shape = mt_graph_encoder_shape(enc);
    size_t need = (size_t)PREDICT_SHARE * (size_t)shape->n_nodes * MT_GRAPH_FEATS;
    if (need > c->th[t].feats_floats) {
        float *f = realloc(c->th[t].feats, sizeof *f * need);
        if (!f) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %d candidates' features", PREDICT_SHARE);
        c->th[t].feats = f;
        c->th[t].feats_floats = need;
    }
    if (!c->th[t].index) c->th[t].index = malloc(sizeof(int) * PREDICT_SHARE);
    if (!c->th[t].scores) c->th[t].scores = malloc(sizeof(float) * PREDICT_SHARE);
    if (!c->th[t].index || !c->th[t].scores) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    if (c->fitted && !mt_gnn_scorer_matches(c->th[t].sc, shape)) {
        mt_gnn_scorer_free(c->th[t].sc);
        c->th[t].sc = NULL;
        mt_status st = mt_gnn_scorer_create(c->net, shape, &c->th[t].sc, err, errlen);
        if (st != MT_OK) return st;
    }
    return MT_OK;
}

/* ---- scoring on the GPU ---- */

/* One thread's part of encoding one GPU chunk: shares of it claimed in
 * turn, each encoded (packed) into its own slot of c->gfeats. */
typedef struct gpu_encode_job {
    gnn_cm *c;
    atomic_int *next, *failed;
    const mt_graph_encoder *enc;
    const mt_cm_query *q;
    const mt_config *cfgs; /* the chunk's */
    int n;                 /* the chunk's candidates */
    size_t per;            /* floats per graph */
    mt_status st;
    char err[256];
} gpu_encode_job;

static void *gpu_encode_run(void *arg) {
    gpu_encode_job *j = arg;
    gnn_cm *c = j->c;
    for (int s; !atomic_load(j->failed) && (long)(s = atomic_fetch_add(j->next, 1)) * PREDICT_SHARE < j->n;) {
        int lo = s * PREDICT_SHARE, k = j->n - lo < PREDICT_SHARE ? j->n - lo : PREDICT_SHARE;
        j->st = mt_graph_encode_packed(j->enc, j->q->wl, j->q->space, j->cfgs + lo, k, j->q->dev, c->gfeats + (size_t)lo * j->per,
                                       c->gindex + lo, &c->gnv[s], j->err, sizeof j->err);
        if (j->st != MT_OK) {
            atomic_store(j->failed, 1);
            break;
        }
    }
    return NULL;
}

/* Scores n candidates on the GPU, GPU_CHUNK at a time: the threads encode
 * a chunk's shares, the packed graphs go to the device in one call. */
static mt_status gpu_predict(mt_costmodel *m, gnn_cm *c, const mt_graph_encoder *enc, const mt_cm_query *q, const mt_config *cfgs, int n,
                             double *scores, char *err, size_t errlen) {
    const mt_graph_shape *shape = mt_graph_encoder_shape(enc);
    size_t per = (size_t)shape->n_nodes * MT_GRAPH_FEATS, need = (size_t)GPU_CHUNK * per;
    if (need > c->gfeats_floats) {
        float *f = realloc(c->gfeats, sizeof *f * need);
        if (!f) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %d candidates' features", GPU_CHUNK);
        c->gfeats = f;
        c->gfeats_floats = need;
    }
    if (!c->gindex) c->gindex = malloc(sizeof(int) * GPU_CHUNK);
    if (!c->gscores) c->gscores = malloc(sizeof(float) * GPU_CHUNK);
    if (!c->gindex || !c->gscores) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    mt_status st;
    if (!mt_gnn_gpu_scorer_matches(c->gsc, shape)) {
        mt_gnn_gpu_scorer_free(c->gsc);
        c->gsc = NULL;
        if ((st = mt_gnn_gpu_scorer_create(c->net, shape, &c->gsc, err, errlen)) != MT_OK) return st;
    }
    int T = m->params.threads < 1 ? 1 : m->params.threads;
    if (T > MAX_THREADS) T = MAX_THREADS;
    for (int lo = 0; lo < n; lo += GPU_CHUNK) {
        int k = n - lo < GPU_CHUNK ? n - lo : GPU_CHUNK, shares = (k + PREDICT_SHARE - 1) / PREDICT_SHARE;
        int Tc = T < shares ? T : shares;
        atomic_int next, failed;
        atomic_init(&next, 0);
        atomic_init(&failed, 0);
        gpu_encode_job jobs[MAX_THREADS];
        pthread_t tid[MAX_THREADS];
        int started[MAX_THREADS] = {0};
        for (int t = 0; t < Tc; t++)
            jobs[t] = (gpu_encode_job){.c = c, .next = &next, .failed = &failed, .enc = enc, .q = q, .cfgs = cfgs + lo, .n = k, .per = per,
                                       .st = MT_OK};
        for (int t = 1; t < Tc; t++) started[t] = pthread_create(&tid[t], NULL, gpu_encode_run, &jobs[t]) == 0;
        gpu_encode_run(&jobs[0]);
        for (int t = 1; t < Tc; t++) {
            if (started[t]) pthread_join(tid[t], NULL);
            else gpu_encode_run(&jobs[t]);
        }
        for (int t = 0; t < Tc; t++)
            if (jobs[t].st != MT_OK) return mt__fail(err, errlen, jobs[t].st, "%s", jobs[t].err);
        /* pack the shares' graphs (and their places) one after another */
        int nv = 0;
        for (int s = 0; s < shares; s++) {
            int s0 = s * PREDICT_SHARE;
            if (nv != s0 && c->gnv[s] > 0) {
                memmove(c->gfeats + (size_t)nv * per, c->gfeats + (size_t)s0 * per, sizeof(float) * per * (size_t)c->gnv[s]);
                memmove(c->gindex + nv, c->gindex + s0, sizeof(int) * (size_t)c->gnv[s]);
            }
            for (int i = 0; i < c->gnv[s]; i++) c->gindex[nv + i] += s0;
            nv += c->gnv[s];
        }
        if ((st = mt_gnn_gpu_scorer_run(c->gsc, nv, c->gfeats, c->gscores, err, errlen)) != MT_OK) return st;
        for (int i = 0; i < k; i++) scores[lo + i] = MT_COSTMODEL_INVALID_SCORE;
        for (int i = 0; i < nv; i++) {
            double v = c->gscores[i];
            scores[lo + c->gindex[i]] = isfinite(v) ? v : MT_COSTMODEL_INVALID_SCORE / 2;
        }
    }
    return MT_OK;
}

/* Said once per process: a GPU that failed and the CPU taking over. */
static atomic_int g_gpu_noted;

/* Encodes and scores on up to params.threads threads, each holding only a
 * share's features at a time (a few MiB, whatever n), never scoring a
 * config the template cannot build. */
static mt_status gnn_predict(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err,
                             size_t errlen) {
    gnn_cm *c = m->context;
    const mt_graph_encoder *enc = NULL;
    mt_status st = find_encoder(c, q->tmpl, &enc, err, errlen);
    if (st != MT_OK || n == 0) return st;
    if (c->mode == MODE_META) {
        /* the query's group's adapted weights, or the initial ones */
        int g = group_find(c, q->wl, q->tmpl, q->dev);
        if (g >= c->gnet_cap || (g >= 0 && !c->gnet[g])) g = -1;
        if (c->net_holds != g) {
            if ((st = mt_gnn_copy(c->net, g >= 0 ? c->gnet[g] : c->init, err, errlen)) != MT_OK) return st;
            c->net_holds = g;
        }
    }
    if (c->gpu && c->fitted) {
        char gerr[1024];
        if ((st = gpu_predict(m, c, enc, q, cfgs, n, scores, gerr, sizeof gerr)) == MT_OK) return MT_OK;
        /* any GPU failure: the CPU scores from now on */
        c->gpu = 0;
        mt_gnn_gpu_scorer_free(c->gsc);
        c->gsc = NULL;
        if (atomic_exchange(&g_gpu_noted, 1) == 0)
            fprintf(stderr, "mtgpu: gnn: GPU scoring failed (%s: %s); scoring on the CPU from now on\n", mt_status_str(st), gerr);
    }
    int shares = (int)(((long)n + PREDICT_SHARE - 1) / PREDICT_SHARE);
    int T = m->params.threads < 1 ? 1 : m->params.threads;
    if (T > MAX_THREADS) T = MAX_THREADS;
    if (T > shares) T = shares;
    for (int t = 0; t < T; t++)
        if ((st = predict_slot(c, t, enc, err, errlen)) != MT_OK) return st;
    predict_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    predict_shared sh;
    atomic_init(&sh.next, 0);
    atomic_init(&sh.failed, 0);
    for (int t = 0; t < T; t++)
        jobs[t] = (predict_job){.c = c, .t = t, .sh = &sh, .enc = enc, .q = q, .cfgs = cfgs, .n = n, .fitted = c->fitted, .scores = scores,
                                .st = MT_OK};
    /* Thread 0's shares run on the calling thread. */
    for (int t = 1; t < T; t++) started[t] = pthread_create(&tid[t], NULL, predict_run, &jobs[t]) == 0;
    predict_run(&jobs[0]);
    for (int t = 1; t < T; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else predict_run(&jobs[t]); /* no thread: whatever is left is done here */
    }
    for (int t = 0; t < T; t++)
        if (jobs[t].st != MT_OK) return mt__fail(err, errlen, jobs[t].st, "%s", jobs[t].err);
    return MT_OK;
}

static void gnn_free(mt_costmodel *m) {
    gnn_cm *c = m->context;
    if (!c) return;
    drop_samples_from(c, 0);
    free(c->s);
    free(c->groups);
    for (int i = 0; i < c->nenc; i++) mt_graph_encoder_free(c->enc[i].enc);
    mt_gnn_gpu_scorer_free(c->gsc); /* before the model it reads */
    free(c->gfeats);
    free(c->gindex);
    free(c->gscores);
    for (int t = 0; t < MAX_THREADS; t++) {
        mt_gnn_scorer_free(c->th[t].sc); /* before the model it reads */
        free(c->th[t].feats);
        free(c->th[t].index);
        free(c->th[t].scores);
    }
    mt_gnn_free(c->net);
    mt_gnn_free(c->init);
    for (int g = 0; g < c->gnet_cap; g++) mt_gnn_free(c->gnet[g]);
    free(c->gnet);
    free(c);
    m->context = NULL;
}

const struct mt_costmodel_i mt__costmodel_gnn = {
    /* .kind    = */ "gnn",
    /* .init    = */ gnn_init,
    /* .fit     = */ gnn_fit,
    /* .update  = */ gnn_update,
    /* .predict = */ gnn_predict,
    /* .free    = */ gnn_free,
};

const struct mt_costmodel_i mt__costmodel_gnn_shared = {
    /* .kind    = */ "gnn-shared",
    /* .init    = */ gnn_shared_init,
    /* .fit     = */ gnn_fit,
    /* .update  = */ gnn_update,
    /* .predict = */ gnn_predict,
    /* .free    = */ gnn_free,
};

const struct mt_costmodel_i mt__costmodel_mlp = {
    /* .kind    = */ "mlp",
    /* .init    = */ mlp_init,
    /* .fit     = */ gnn_fit,
    /* .update  = */ gnn_update,
    /* .predict = */ gnn_predict,
    /* .free    = */ gnn_free,
};

const struct mt_costmodel_i mt__costmodel_gnn_transfer = {
    /* .kind    = */ "gnn-transfer",
    /* .init    = */ transfer_init,
    /* .fit     = */ gnn_fit,
    /* .update  = */ gnn_update,
    /* .predict = */ gnn_predict,
    /* .free    = */ gnn_free,
};

const struct mt_costmodel_i mt__costmodel_gnn_meta = {
    /* .kind    = */ "gnn-meta",
    /* .init    = */ meta_init,
    /* .fit     = */ gnn_fit,
    /* .update  = */ gnn_update,
    /* .predict = */ gnn_predict,
    /* .free    = */ gnn_free,
};

static int is_gnn(const mt_costmodel *m) {
    return m && (m->iface == &mt__costmodel_gnn || m->iface == &mt__costmodel_gnn_shared || m->iface == &mt__costmodel_mlp ||
                 m->iface == &mt__costmodel_gnn_transfer || m->iface == &mt__costmodel_gnn_meta);
}

int64_t mt_costmodel_param_count(const mt_costmodel *m) {
    if (!is_gnn(m)) return -1;
    const gnn_cm *c = m->context;
    return mt_gnn_param_count(c->net);
}

mt_status mt_costmodel_save(const mt_costmodel *m, const char *path, char *err, size_t errlen) {
    if (!m || !path) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL argument");
    if (!is_gnn(m)) return mt__fail(err, errlen, MT_UNSUPPORTED, "costmodel: a '%s' model cannot be saved (only the gnn kinds and mlp)", m->iface->kind);
    const gnn_cm *c = m->context;
    if (!c->fitted) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: the model has not been trained");
    /* meta: the initial weights, which adapt to any task */
    return mt_gnn_save(c->mode == MODE_META ? c->init : c->net, path, err, errlen);
}

mt_status mt_costmodel_meta_train(mt_costmodel *m, const mt_cm_sample *samples, int n, const mt_gnn_meta_params *mp, char *err, size_t errlen) {
    if (!m || !mp) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL argument");
    if (!is_gnn(m)) return mt__fail(err, errlen, MT_UNSUPPORTED, "costmodel: a '%s' model cannot be meta-trained", m->iface->kind);
    gnn_cm *c = m->context;
    mt_gnn_meta_params p = *mp;
    if (c->mode == MODE_META) {
        /* start from the initial weights, not from a group's */
        mt_status st = mt_gnn_copy(c->net, c->init, err, errlen);
        if (st != MT_OK) return st;
        c->net_holds = -1;
    }
    /* the stored samples become these (as a fit's do) */
    stored_sample *old = c->s;
    int old_n = c->ns, old_cap = c->cap;
    c->s = NULL;
    c->ns = c->cap = 0;
    mt_status st = n < 1 ? mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: meta-training needs samples") : add_samples(m, c, samples, n, err, errlen);
    mt_gnn_sample *gs = NULL, *sorted = NULL;
    mt_gnn_task *tasks = NULL;
    int ntasks = 0;
    if (st == MT_OK && (!(gs = gnn_samples(c)) || !(sorted = malloc(sizeof *sorted * (size_t)c->ns)) ||
                        !(tasks = malloc(sizeof *tasks * (size_t)(c->ngroups > 0 ? c->ngroups : 1)))))
        st = mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    if (st == MT_OK) {
        /* one task per group, its samples in stored order */
        int k = 0;
        for (int g = 0; g < c->ngroups; g++) {
            int k0 = k;
            for (int i = 0; i < c->ns; i++)
                if (gs[i].group == g) sorted[k++] = gs[i];
            if (k > k0) tasks[ntasks++] = (mt_gnn_task){sorted + k0, k - k0};
        }
        st = mt_gnn_meta_train(c->net, &p, tasks, ntasks, err, errlen);
    }
    mt_gnn *init = NULL;
    if (st == MT_OK) st = mt_gnn_clone(c->net, &init, err, errlen);
    free(gs);
    free(sorted);
    free(tasks);
    if (st != MT_OK) {
        drop_samples_from(c, 0);
        free(c->s);
        c->s = old, c->ns = old_n, c->cap = old_cap;
        return st;
    }
    for (int i = 0; i < old_n; i++) free(old[i].feats);
    free(old);
    /* from now on the model is a gnn-meta model of these initial weights */
    mt_gnn_free(c->init);
    c->init = init;
    for (int g = 0; g < c->gnet_cap; g++) {
        mt_gnn_free(c->gnet[g]);
        c->gnet[g] = NULL;
    }
    c->mode = MODE_META;
    c->net_holds = -1;
    c->fitted = 1;
    m->trained = n;
    return MT_OK;
}
