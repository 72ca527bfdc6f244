/* The inference executor: build (configs, kernels, weights, buffers) and
 * forward passes. The buffer plan is in executor_plan.c, the op kernels in
 * op_kernels.c, the source of fused launches in pass_fuse.c. */
#include "mtgpu/executor.h"
#include "program.h"
#include "select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "executor-impl.h"
#include "memory.h"
#include "reference.h"
#include "template.h"
#include "op_kernels.h"
#include "pass_fuse.h"
#include "fail.h"

#define EX_MAX_ARGS 5
#define EX_KEY_LEN 2048

/* One compiled program, shared by every launch that needs it. */
typedef struct ex_prog {
    char *key; /* "op:<kernel>" or "conv:<template>|<workload>|<config>" */
    mt_program *prog;
} ex_prog;

typedef struct ex_launch {
    mt_program *prog;
    mt_dbuf *args[EX_MAX_ARGS];
    int nargs;
    int64_t grid[3], block[3];
    int layer;
    char *src;          /* while building, a convolution that can run fused (pass_fuse.h): its kernel's source */
    const char *kernel; /* an op kernel's name in mt__op_kernels_source() */
    int fusable;        /* src, or the op kernel, can run fused */
} ex_launch;

/* Unprofiled passes run steps: a fused launch of launches [first, first + n),
 * or (prog NULL) launches[first] alone. */
#define EX_FUSE_MAX_BUFS 110
typedef struct ex_step {
    int first, n;
    mt_program *prog;
    mt_dbuf *args[3 + EX_FUSE_MAX_BUFS]; /* the counters, the scratch memory, the clock, then the launches' buffers */
    int nargs;
    int64_t grid[3];
} ex_step;

typedef struct ex_conv_choice {
    char template_name[MT_RECORD_TEMPLATE_LEN];
    char *config;
    int from_db;
} ex_conv_choice;

struct mt_executor {
    mt_device *dev;
    const mt_network *net;
    int nlayers;
    uint64_t seed;
    int rank; /* mt_executor_params.rank */
    const mt_conv_pin *pins; /* mt_executor_params.pins, during the build only */
    int npins;
    ex_prog *progs;
    int nprogs, capprogs;
    ex_launch *launches;
    int nlaunches, caplaunches;
    mt_dbuf **owned; /* every device buffer, freed at the end */
    int nowned, capowned;
    mt_dbuf **slots; /* activation buffers */
    mt_dbuf *dense_input; /* strided 1x1 layers' subsampled input (owned), NULL until needed */
    mt__act_plan plan;
    ex_conv_choice *choice; /* per layer */
    int fuse;               /* mt_executor_params.fuse, where the device can */
    ex_step *steps;         /* NULL: every launch alone */
    int nsteps;
    mt_dbuf *counters;      /* the fused launches' counters: allocated zeroed, each pass leaves them zeroed */
    int counters_dirty;     /* a pass failed: zero the counters before the next */
    mt_dbuf *scratch;       /* the fused launches' scratch memory (the largest they need) */
    size_t scratch_bytes;
    mt_dbuf *clock;         /* the fused launches' clock stamps (pass_fuse.h), one set per launch and work-group */
    int clock_groups;       /* work-groups of every fused launch (the device's compute units) */
    uint64_t *stamps;       /* host copy of clock */
    uint64_t tsc0;          /* time-stamp counter and wall time at the end of the build: the counter's rate */
    double tsc0_s;
    uint64_t *queued;       /* per step: the counter when its launch was queued (profiled fused passes) */
    uint64_t host[3];       /* the latest profiled fused pass: before the upload, after it, after the wait */
    mt_pass_time pass;      /* the latest pass's, from those and the stamps */
    int *zeros;             /* MT__FUSE_COUNTERS per launch */
    mt__const_pack consts;  /* while building: the launches' constant data (executor-impl.h) */
    float *input;           /* aligned to MT_DBUF_VIEW_ALIGN: the storage of input_buf where there is one */
    int64_t input_count;
    mt_dbuf *input_buf;     /* the input's slot, using ex->input in place (ex_input_in_place); NULL: every
                               pass uploads ex->input into the slot */
    mt_executor_stats stats;
};

mt_executor_params mt_executor_default_params(void) {
    return (mt_executor_params){.db = NULL, .weights = NULL, .seed = 1, .rank = 0, .fuse = 1};
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The time-stamp counter the fused launches stamp (pass_fuse.h): the same
 * counter on the host where the device is its CPU; 0 where there is none. */
static uint64_t host_clock(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;
#endif
}

void mt_executor_free(mt_executor *ex) {
    if (!ex) return;
    for (int i = 0; i < ex->nprogs; i++) {
        mt_program_free(ex->progs[i].prog);
        free(ex->progs[i].key);
    }
    free(ex->progs);
    for (int i = 0; i < ex->nlaunches; i++) free(ex->launches[i].src);
    free(ex->launches);
    free(ex->steps);
    free(ex->zeros);
    free(ex->stamps);
    free(ex->queued);
    for (int i = 0; i < ex->nowned; i++) mt_dbuf_free(ex->owned[i]);
    free(ex->owned);
    free(ex->slots);
    mt__act_plan_free(&ex->plan);
    if (ex->choice)
        for (int i = 0; i < ex->nlayers; i++) free(ex->choice[i].config);
    free(ex->choice);
    free(ex->input);
    mt__const_pack_free(&ex->consts);
    free(ex);
}

/* Grows an array of `size`-byte items to hold one more; -1 when out of memory. */
static int grow(void **arr, int n, int *cap, size_t size) {
    if (n < *cap) return 0;
    int nc = *cap ? 2 * *cap : 32;
    void *p = realloc(*arr, size * (size_t)nc);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

/* Allocates a device buffer the executor owns and fills it from data (may be NULL). */
static mt_status ex_alloc(mt_executor *ex, size_t bytes, const void *data, mt_dbuf **out, int64_t *account, char *err, size_t errlen) {
    if (grow((void **)&ex->owned, ex->nowned, &ex->capowned, sizeof *ex->owned)) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    mt_dbuf *b = NULL;
    mt_status st = mt_dbuf_alloc(ex->dev, bytes, &b);
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: cannot allocate %zu device bytes: %s", bytes, mt_status_str(st));
    ex->owned[ex->nowned++] = b;
    if (data && (st = mt_dbuf_write(ex->dev, b, 0, data, bytes)) != MT_OK)
        return mt__fail(err, errlen, st, "executor: upload of %zu bytes failed: %s", bytes, mt_status_str(st));
    *account += (int64_t)bytes;
    *out = b;
    return MT_OK;
}

/* The activation buffers: views into one arena where the backend has views
 * (the packed plan), else whole buffers reused across layers. */
static mt_status ex_activations(mt_executor *ex, const mt_network *net, char *err, size_t errlen) {
    for (int packed = 1; packed >= 0; packed--) {
        mt_status st = mt__act_plan_make(net, packed, &ex->plan);
        if (st != MT_OK) return mt__fail(err, errlen, st, "executor: cannot plan the activation buffers: %s", mt_status_str(st));
        ex->slots = calloc((size_t)ex->plan.nslots, sizeof *ex->slots);
        if (!ex->slots) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
        if (!packed) {
            for (int s = 0; s < ex->plan.nslots; s++)
                if ((st = ex_alloc(ex, (size_t)ex->plan.slot_bytes[s], NULL, &ex->slots[s], &ex->stats.activation_bytes, err, errlen)) != MT_OK)
                    return st;
            ex->stats.activation_buffers = ex->plan.nslots;
            return MT_OK;
        }
        mt_dbuf *arena = NULL;
        if ((st = ex_alloc(ex, (size_t)ex->plan.arena_bytes, NULL, &arena, &ex->stats.activation_bytes, err, errlen)) != MT_OK) return st;
        int s = 0;
        for (; s < ex->plan.nslots; s++) {
            if (grow((void **)&ex->owned, ex->nowned, &ex->capowned, sizeof *ex->owned)) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
            if ((st = mt_dbuf_view(arena, (size_t)ex->plan.slot_offset[s], (size_t)ex->plan.slot_bytes[s], &ex->slots[s])) != MT_OK) break;
            ex->owned[ex->nowned++] = ex->slots[s];
        }
        if (s == ex->plan.nslots) {
            ex->stats.activation_buffers = 1;
            return MT_OK;
        }
        if (st != MT_UNSUPPORTED) return mt__fail(err, errlen, st, "executor: cannot place an activation in the arena: %s", mt_status_str(st));
        /* No views on this backend: give the arena back and use whole buffers. */
        while (ex->nowned > 0 && ex->owned[ex->nowned - 1] != arena) mt_dbuf_free(ex->owned[--ex->nowned]);
        mt_dbuf_free(ex->owned[--ex->nowned]);
        ex->stats.activation_bytes = 0;
        free(ex->slots);
        ex->slots = NULL;
        mt__act_plan_free(&ex->plan);
    }
    return MT_OK;
}

/* On a CPU device the input's slot becomes ex->input itself, used in place
 * (mt__dbuf_alloc_host): mt_executor_set_input writes it once and the passes
 * read it without an upload of their own, as oneDNN's passes read their
 * input memory. A blocking upload at the start of every pass had cost
 * MobileNetV2 a round trip through a sleeping PoCL worker (the pass 1.03x
 * as fast without it, docs/executor.md). Only where no other tensor lives
 * in the input's slot (packed plans: flattens of the input alias it, and an
 * in-place residual never writes over it); else every pass uploads. */
static mt_status ex_input_in_place(mt_executor *ex, char *err, size_t errlen) {
    if (!mt_device_get_info(ex->dev)->is_cpu || !ex->plan.slot_offset) return MT_OK;
    const int s0 = ex->plan.slot[0];
    for (int i = 1; i < ex->nlayers; i++)
        if (ex->plan.slot[i] == s0 && mt_network_layer(ex->net, i)->kind != MT_LAYER_FLATTEN) return MT_OK;
    if (grow((void **)&ex->owned, ex->nowned, &ex->capowned, sizeof *ex->owned)) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    mt_dbuf *b = NULL;
    mt_status st = mt__dbuf_alloc_host(ex->dev, ex->input, sizeof(float) * (size_t)ex->input_count, &b);
    if (st == MT_UNSUPPORTED) return MT_OK;
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: cannot place the input on the device: %s", mt_status_str(st));
    ex->owned[ex->nowned++] = b;
    ex->input_buf = ex->slots[s0] = b;
    ex->stats.input_in_place = 1;
    return MT_OK;
}

/* What a constant piece counts toward. */
enum { EX_CONST_WEIGHTS, EX_CONST_WORKSPACE };

/* Constant data for argument `arg` of the launch pushed next, placed on the
 * device with the others once every layer is built (ex_place_consts). */
static mt_status ex_const(mt_executor *ex, const void *data, size_t bytes, int arg, int kind, char *err, size_t errlen) {
    mt_status st = mt__const_pack_add(&ex->consts, data, bytes, ex->nlaunches, arg, kind);
    return st == MT_OK ? MT_OK : mt__fail(err, errlen, st, "executor: out of memory for %zu bytes of weights", bytes);
}

/* The constant data on the device: one allocation where it can be, its
 * pieces the launches' arguments. */
static mt_status ex_place_consts(mt_executor *ex, char *err, size_t errlen) {
    const mt__const_pack *cp = &ex->consts;
    if (cp->n == 0) return MT_OK;
    mt_dbuf **bufs = calloc((size_t)cp->n, sizeof *bufs);
    size_t *share = calloc((size_t)cp->n, sizeof *share);
    mt_dbuf *arena = NULL;
    mt_status st = bufs && share ? MT_OK : mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    for (int i = 0; st == MT_OK && i <= cp->n; i++) /* room for the arena and every piece */
        if (grow((void **)&ex->owned, ex->nowned + i, &ex->capowned, sizeof *ex->owned)) st = mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    if (st == MT_OK) st = mt__const_pack_upload(cp, ex->dev, &arena, bufs, share, err, errlen);
    if (st == MT_OK) {
        if (arena) ex->owned[ex->nowned++] = arena;
        for (int i = 0; i < cp->n; i++) {
            const mt__const_piece *p = &cp->piece[i];
            ex->owned[ex->nowned++] = bufs[i];
            ex->launches[p->launch].args[p->arg] = bufs[i];
            *(p->kind == EX_CONST_WEIGHTS ? &ex->stats.weight_bytes : &ex->stats.workspace_bytes) += (int64_t)share[i];
        }
    }
    free(bufs);
    free(share);
    mt__const_pack_free(&ex->consts);
    return st;
}

/* The program of key, or NULL. */
static mt_program *ex_find_prog(mt_executor *ex, const char *key) {
    for (int i = 0; i < ex->nprogs; i++)
        if (strcmp(ex->progs[i].key, key) == 0) return ex->progs[i].prog;
    return NULL;
}

static mt_status ex_add_prog(mt_executor *ex, const char *key, mt_program *p, char *err, size_t errlen) {
    char *k = strdup(key);
    if (!k || grow((void **)&ex->progs, ex->nprogs, &ex->capprogs, sizeof *ex->progs)) {
        free(k);
        mt_program_free(p);
        return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    }
    ex->progs[ex->nprogs++] = (ex_prog){.key = k, .prog = p};
    if (mt_program_from_cache(p)) ex->stats.programs_from_cache++;
    return MT_OK;
}

/* The op kernel `name`, built on first use. */
static mt_status ex_op_prog(mt_executor *ex, const char *name, mt_program **out, char *err, size_t errlen) {
    char key[128];
    snprintf(key, sizeof key, "op:%s", name);
    if ((*out = ex_find_prog(ex, key))) return MT_OK;
    mt_program *p = NULL;
    mt_status st = mt_program_build_source(ex->dev, mt__op_kernels_source(), name, &p, err, errlen);
    if (st != MT_OK) return st;
    if ((st = ex_add_prog(ex, key, p, err, errlen)) != MT_OK) return st;
    *out = p;
    return MT_OK;
}

static mt_status ex_push(mt_executor *ex, const ex_launch *l, char *err, size_t errlen) {
    if (grow((void **)&ex->launches, ex->nlaunches, &ex->caplaunches, sizeof *ex->launches))
        return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    ex->launches[ex->nlaunches++] = *l;
    return MT_OK;
}

/* Queues an elementwise op kernel over `total` work-items. */
static mt_status ex_op(mt_executor *ex, int layer, const char *kernel, const int32_t *p, int np, mt_dbuf **bufs, int nbufs,
                       int64_t groups, char *err, size_t errlen) {
    ex_launch l = {.layer = layer, .nargs = 1 + nbufs, .grid = {groups, 1, 1}, .block = {MT_OP_GROUP, 1, 1}, .kernel = kernel};
    mt_status st = ex_op_prog(ex, kernel, &l.prog, err, errlen);
    if (st == MT_OK) st = ex_const(ex, p, sizeof(int32_t) * (size_t)np, 0, EX_CONST_WORKSPACE, err, errlen);
    if (st != MT_OK) return st;
    for (int i = 0; i < nbufs; i++) l.args[1 + i] = bufs[i];
    l.fusable = ex->fuse && mt__fuse_can(mt__op_kernels_source(), kernel, l.block);
    return ex_push(ex, &l, err, errlen);
}

static int64_t groups_for(int64_t total) { return (total + MT_OP_GROUP - 1) / MT_OP_GROUP; }

static int same_shape(const mt_workload *a, const mt_workload *b) {
    return a->h == b->h && a->w == b->w && a->stride_h == b->stride_h && a->stride_w == b->stride_w;
}

/* Elements of the largest input a strided 1x1 layer's kernel reads from the
 * subsampled copy (0 when net has none). */
static int64_t max_dense_input(const mt_network *net) {
    int64_t most = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        const mt_workload wl = mt_layer_kernel_workload(l);
        if (!same_shape(&wl, &l->conv.wl) && mt_workload_input_elems(&wl) > most) most = mt_workload_input_elems(&wl);
    }
    return most;
}

mt_status mt__weights_need(const mt_weights *w, const char *prefix, const char *suffix, int64_t count, const float **out, char *err,
                           size_t errlen) {
    char name[MT_WEIGHT_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s%s", prefix, suffix);
    int64_t have = 0;
    const float *d = mt_weights_find(w, name, &have);
    if (!d) return mt__fail(err, errlen, MT_NOT_FOUND, "weights: tensor '%s' is missing", name);
    if (have != count)
        return mt__fail(err, errlen, MT_CORRUPT, "weights: tensor '%s' has %lld elements, the layer needs %lld", name, (long long)have,
                        (long long)count);
    *out = d;
    return MT_OK;
}

mt_status mt__conv_affine(const mt_layer *l, const mt_weights *w, double *scale, double *shift, char *err, size_t errlen) {
    int k = l->conv.wl.k;
    const float *bias = NULL;
    mt_status st;
    if (l->conv.bias && (st = mt__weights_need(w, l->name, ".bias", k, &bias, err, errlen)) != MT_OK) return st;
    for (int i = 0; i < k; i++) {
        scale[i] = 1.0;
        shift[i] = bias ? bias[i] : 0.0;
    }
    if (!l->conv.batch_norm) return MT_OK;
    char bn[MT_WEIGHT_NAME_MAX];
    mt_weights_bn_prefix(l, bn, sizeof bn);
    const float *g, *b, *m, *v;
    if ((st = mt__weights_need(w, bn, ".weight", k, &g, err, errlen)) != MT_OK ||
        (st = mt__weights_need(w, bn, ".bias", k, &b, err, errlen)) != MT_OK ||
        (st = mt__weights_need(w, bn, ".running_mean", k, &m, err, errlen)) != MT_OK ||
        (st = mt__weights_need(w, bn, ".running_var", k, &v, err, errlen)) != MT_OK)
        return st;
    for (int i = 0; i < k; i++) {
        double s = (double)g[i] / sqrt((double)v[i] + MT_BN_EPS);
        scale[i] = s;
        shift[i] = (shift[i] - (double)m[i]) * s + (double)b[i];
    }
    return MT_OK;
}

/* The convolution of layer i: config, fused kernel, folded weights and launch. */
static mt_status ex_conv(mt_executor *ex, mt_db *db, const mt_weights *w, int i, char *err, size_t errlen) {
    const mt_layer *l = mt_network_layer(ex->net, i);
    const mt_workload run_wl = mt_layer_kernel_workload(l), *wl = &run_wl;
    mt_dbuf *conv_in = ex->slots[ex->plan.slot[l->inputs[0]]];
    if (!same_shape(wl, &l->conv.wl)) {
        /* A strided 1x1 layer: its kernel runs at stride 1 on every stride-th
         * pixel, copied into one buffer that all such layers share (the
         * launches run in order). */
        mt_status st = MT_OK;
        if (!ex->dense_input) {
            const int64_t bytes = (int64_t)sizeof(float) * max_dense_input(ex->net);
            st = ex_alloc(ex, (size_t)bytes, NULL, &ex->dense_input, &ex->stats.workspace_bytes, err, errlen);
        }
        const int64_t rows = (int64_t)wl->n * wl->c * wl->h;
        const int32_t p[7] = {(int32_t)rows, l->conv.wl.h, l->conv.wl.w, wl->h, wl->w, l->conv.wl.stride_h, l->conv.wl.stride_w};
        mt_dbuf *bufs[2] = {conv_in, ex->dense_input};
        if (st == MT_OK) st = ex_op(ex, i, MT_OPK_SUBSAMPLE, p, 7, bufs, 2, groups_for(rows), err, errlen);
        if (st != MT_OK) return st;
        conv_in = ex->dense_input;
    }
    const mt_device_info *di = mt_device_get_info(ex->dev);
    mt_select_query q = mt_select_query_default(db, wl, di);
    q.rank = ex->rank;
    for (int j = 0; j < ex->npins; j++)
        if (mt_workload_equal(&ex->pins[j].wl, wl)) {
            q.pin_template = ex->pins[j].template_name;
            q.pin_config = ex->pins[j].config;
            q.rank = 0;
            break;
        }
    mt_select_result sel;
    char why[512] = "";
    mt_status st = mt_select_config(&q, &sel, why, sizeof why);
    if (st != MT_OK) return mt__fail(err, errlen, st, "layer '%s': no config: %s", l->name, why);
    const mt_template *t = sel.t;
    int from_db = sel.from != MT_SELECT_FROM_DEFAULT;
    char cfgtext[MT_RECORD_CONFIG_LEN];
    mt_config_format(&sel.space, &sel.cfg, cfgtext, sizeof cfgtext);
    ex_conv_choice *c = &ex->choice[i];
    snprintf(c->template_name, sizeof c->template_name, "%s", mt_template_name(t));
    c->config = strdup(cfgtext);
    c->from_db = from_db;
    ex->stats.convs_from_db += from_db;
    char *key = malloc(EX_KEY_LEN);
    if (!c->config || !key) {
        mt_select_result_free(&sel);
        free(key);
        return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    }
    /* Bias (or folded batch norm), residual add and activation run in the
     * convolution's own stores: no second pass over the output. */
    /* Where the plan gives the output the residual's own buffer (the residual
     * dies here), the kernel adds it in place. */
    mt_epilogue_residual res = l->conv.residual < 0                                     ? MT_RESIDUAL_NONE
                               : ex->plan.slot[i] == ex->plan.slot[l->conv.residual] ? MT_RESIDUAL_IN_OUTPUT
                                                                                      : MT_RESIDUAL_BUFFER;
    mt_conv_epilogue epi = {.bias = l->conv.bias || l->conv.batch_norm,
                            .residual = res,
                            .act = l->act == MT_ACT_RELU ? MT_EPILOGUE_RELU : l->act == MT_ACT_RELU6 ? MT_EPILOGUE_RELU6 : MT_EPILOGUE_NONE};
    char wtext[256];
    mt_workload_format(wl, wtext, sizeof wtext);
    snprintf(key, EX_KEY_LEN, "conv:%s|%s|%s|epi=%d%d%d", c->template_name, wtext, cfgtext, epi.bias, epi.residual, (int)epi.act);

    mt_kernel *k = NULL;
    mt_kernel_resources kr;
    ex_launch launch = {.layer = i, .nargs = 3 + epi.bias + (epi.residual == MT_RESIDUAL_BUFFER)};
    st = mt_template_build_fused(t, wl, &sel.space, &sel.cfg, &epi, &k, err, errlen);
    /* The layout the chosen kernel reads (OIHW16o for kvec, wino's by its tile). */
    const mt_weight_layout layout = mt_template_config_weight_layout(t, &sel.space, &sel.cfg);
    mt_select_result_free(&sel);
    if (st == MT_OK) st = mt_kernel_analyze(k, &kr, err, errlen);
    if (st != MT_OK) {
        mt_kernel_free(k);
        free(key);
        return st;
    }
    memcpy(launch.grid, kr.grid, sizeof kr.grid);
    memcpy(launch.block, kr.block, sizeof kr.block);
    launch.prog = ex_find_prog(ex, key);
    if (!launch.prog) {
        mt_program *p = NULL;
        char log[2048];
        st = mt_program_build(ex->dev, k, &p, log, sizeof log);
        if (st != MT_OK) {
            mt_kernel_free(k);
            free(key);
            return mt__fail(err, errlen, st, "layer '%s': building %s %s failed: %s", l->name, c->template_name, cfgtext, log);
        }
        st = ex_add_prog(ex, key, p, err, errlen);
        if (st == MT_OK) ex->stats.conv_programs++;
        launch.prog = p;
    }
    if (st == MT_OK && ex->fuse) {
        char perr[256];
        if (mt_kernel_print(k, MT_LANG_OPENCL, &launch.src, perr, sizeof perr) != MT_OK || !mt__fuse_can(launch.src, NULL, launch.block)) {
            free(launch.src);
            launch.src = NULL;
        }
        launch.fusable = launch.src != NULL;
    }
    mt_kernel_free(k);
    free(key);
    if (st != MT_OK) return st;

    /* Weights with batch norm folded: w' = w * scale[k], bias' = shift[k]. */
    int64_t nw = mt_workload_weight_elems(wl), per_k = nw / wl->k;
    const float *wsrc;
    if ((st = mt__weights_need(w, l->name, ".weight", nw, &wsrc, err, errlen)) != MT_OK) {
        free(launch.src);
        return st;
    }
    double *scale = malloc(sizeof(double) * (size_t)wl->k), *shift = malloc(sizeof(double) * (size_t)wl->k);
    float *wf = malloc(sizeof(float) * (size_t)nw), *bf = malloc(sizeof(float) * (size_t)wl->k), *wl_packed = NULL;
    if (!scale || !shift || !wf || !bf) {
        st = mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
        goto done;
    }
    if ((st = mt__conv_affine(l, w, scale, shift, err, errlen)) != MT_OK) goto done;
    for (int64_t o = 0; o < wl->k; o++) {
        for (int64_t j = 0; j < per_k; j++) wf[o * per_k + j] = (float)((double)wsrc[o * per_k + j] * scale[o]);
        bf[o] = (float)shift[o];
    }
    /* In the layout the chosen kernel reads, converted once here. */
    int64_t nwl = mt_weight_layout_elems(layout, wl);
    if (layout != MT_WEIGHTS_OIHW) {
        if (nwl <= 0 || !(wl_packed = malloc(sizeof(float) * (size_t)nwl))) {
            st = mt__fail(err, errlen, nwl <= 0 ? MT_UNSUPPORTED : MT_NOMEM, "layer '%s': no %s weights", l->name, mt_weight_layout_name(layout));
            goto done;
        }
        if ((st = mt_weights_to_layout(layout, wl, wf, wl_packed)) != MT_OK) {
            mt__fail(err, errlen, st, "layer '%s': converting the weights to %s failed", l->name, mt_weight_layout_name(layout));
            goto done;
        }
    }
    /* The weights (argument 1) and bias (3) are placed with the others' at the end. */
    if ((st = ex_const(ex, wl_packed ? wl_packed : wf, sizeof(float) * (size_t)nwl, 1, EX_CONST_WEIGHTS, err, errlen)) != MT_OK) goto done;
    int na = 0;
    launch.args[na++] = conv_in;
    launch.args[na++] = NULL;
    launch.args[na++] = ex->slots[ex->plan.slot[i]];
    if (epi.bias) {
        if ((st = ex_const(ex, bf, sizeof(float) * (size_t)wl->k, na, EX_CONST_WEIGHTS, err, errlen)) != MT_OK) goto done;
        launch.args[na++] = NULL;
    }
    if (epi.residual == MT_RESIDUAL_BUFFER) launch.args[na++] = ex->slots[ex->plan.slot[l->conv.residual]];
    st = ex_push(ex, &launch, err, errlen);
    if (st == MT_OK) launch.src = NULL; /* the executor's now */
done:
    free(launch.src);
    free(scale);
    free(shift);
    free(wf);
    free(wl_packed);
    free(bf);
    return st;
}

static mt_status ex_dense(mt_executor *ex, const mt_weights *w, int i, char *err, size_t errlen) {
    const mt_layer *l = mt_network_layer(ex->net, i);
    int I = l->dense.in_features, O = l->dense.out_features;
    const float *wd, *bd = NULL;
    mt_status st;
    if ((st = mt__weights_need(w, l->name, ".weight", (int64_t)I * O, &wd, err, errlen)) != MT_OK) return st;
    if (l->dense.bias && (st = mt__weights_need(w, l->name, ".bias", O, &bd, err, errlen)) != MT_OK) return st;
    float *zeros = bd ? NULL : calloc((size_t)O, sizeof(float));
    if (!bd && !zeros) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    mt_dbuf *dw = NULL, *dbias = NULL;
    st = ex_alloc(ex, sizeof(float) * (size_t)I * (size_t)O, wd, &dw, &ex->stats.weight_bytes, err, errlen);
    if (st == MT_OK) st = ex_alloc(ex, sizeof(float) * (size_t)O, bd ? bd : zeros, &dbias, &ex->stats.weight_bytes, err, errlen);
    free(zeros);
    if (st != MT_OK) return st;
    int64_t items = (O + 3) / 4;
    int32_t p[5] = {(int32_t)items, I, O, (int32_t)l->act, (int32_t)l->out.n};
    mt_dbuf *bufs[4] = {ex->slots[ex->plan.slot[l->inputs[0]]], dw, dbias, ex->slots[ex->plan.slot[i]]};
    return ex_op(ex, i, MT_OPK_DENSE, p, 5, bufs, 4, groups_for(items), err, errlen);
}

/* The windows mt_op_maxpool_s2 covers: columns 2j-pw .. 2j-pw+kw-1 must lie
 * within 2j-1 .. 2j+2, the odd column before to the even one after. */
static int maxpool_s2_fits(const mt_layer *l) {
    int reach = l->pool.kernel_w - l->pool.pad_w;
    return l->pool.stride_w == 2 && l->pool.pad_w <= 1 && reach >= 1 && reach <= 3;
}

/* The launches of layer i (none for the input and flatten). */
static mt_status ex_layer(mt_executor *ex, mt_db *db, const mt_weights *w, int i, char *err, size_t errlen) {
    const mt_layer *l = mt_network_layer(ex->net, i);
    mt_dbuf *y = ex->slots[ex->plan.slot[i]];
    mt_dbuf *x = l->ninputs > 0 ? ex->slots[ex->plan.slot[l->inputs[0]]] : NULL;
    mt_shape in = l->ninputs > 0 ? mt_network_layer(ex->net, l->inputs[0])->out : l->out;
    int64_t total = mt__shape_elems(l->out);
    switch (l->kind) {
    case MT_LAYER_INPUT:
    case MT_LAYER_FLATTEN:
        return MT_OK;
    case MT_LAYER_CONV2D:
        return ex_conv(ex, db, w, i, err, errlen);
    case MT_LAYER_DENSE:
        return ex_dense(ex, w, i, err, errlen);
    case MT_LAYER_MAXPOOL:
    case MT_LAYER_AVGPOOL: {
        int32_t p[12] = {(int32_t)total, in.h, in.w, l->out.h, l->out.w, l->pool.kernel_h, l->pool.kernel_w,
                         l->pool.stride_h, l->pool.stride_w, l->pool.pad_h, l->pool.pad_w, l->pool.count_include_pad};
        mt_dbuf *bufs[2] = {x, y};
        if (l->kind == MT_LAYER_MAXPOOL && maxpool_s2_fits(l)) {
            p[0] = (int32_t)((int64_t)l->out.n * l->out.c * l->out.h);
            return ex_op(ex, i, MT_OPK_MAXPOOL_S2, p, 12, bufs, 2, groups_for(p[0]), err, errlen);
        }
        return ex_op(ex, i, l->kind == MT_LAYER_MAXPOOL ? MT_OPK_MAXPOOL : MT_OPK_AVGPOOL, p, 12, bufs, 2, groups_for(total), err, errlen);
    }
    case MT_LAYER_GLOBAL_AVGPOOL: {
        int32_t p[2] = {(int32_t)total, in.h * in.w};
        mt_dbuf *bufs[2] = {x, y};
        return ex_op(ex, i, MT_OPK_GLOBAL_AVGPOOL, p, 2, bufs, 2, groups_for(total), err, errlen);
    }
    case MT_LAYER_ADAPTIVE_AVGPOOL: {
        int32_t p[5] = {(int32_t)total, in.h, in.w, l->out.h, l->out.w};
        mt_dbuf *bufs[2] = {x, y};
        return ex_op(ex, i, MT_OPK_ADAPTIVE_AVGPOOL, p, 5, bufs, 2, groups_for(total), err, errlen);
    }
    case MT_LAYER_CONCAT: {
        int off = 0;
        for (int j = 0; j < l->ninputs; j++) {
            mt_shape s = mt_network_layer(ex->net, l->inputs[j])->out;
            const int64_t hw = (int64_t)s.h * s.w, block = s.c * hw, chunks = (block + MT_OP_CONCAT_CHUNK - 1) / MT_OP_CONCAT_CHUNK;
            int32_t p[5] = {(int32_t)(s.n * chunks), (int32_t)block, (int32_t)(l->out.c * hw), (int32_t)(off * hw), (int32_t)chunks};
            mt_dbuf *bufs[2] = {ex->slots[ex->plan.slot[l->inputs[j]]], y};
            mt_status st = ex_op(ex, i, MT_OPK_CONCAT, p, 5, bufs, 2, groups_for(s.n * chunks), err, errlen);
            if (st != MT_OK) return st;
            off += s.c;
        }
        return MT_OK;
    }
    case MT_LAYER_ADD: {
        int32_t p[2] = {(int32_t)total, (int32_t)l->act};
        mt_dbuf *bufs[3] = {x, ex->slots[ex->plan.slot[l->inputs[1]]], y};
        return ex_op(ex, i, MT_OPK_ADD, p, 2, bufs, 3, groups_for(total), err, errlen);
    }
    case MT_LAYER_SOFTMAX: {
        int64_t rows = (int64_t)l->out.n * l->out.h * l->out.w;
        int32_t p[3] = {(int32_t)rows, l->out.c, l->out.h * l->out.w};
        mt_dbuf *bufs[2] = {x, y};
        return ex_op(ex, i, MT_OPK_SOFTMAX, p, 3, bufs, 2, groups_for(rows), err, errlen);
    }
    default:
        return mt__fail(err, errlen, MT_UNSUPPORTED, "layer '%s': kind %s is not supported by the executor", l->name, mt_layer_kind_name(l->kind));
    }
}

/* What building net takes, checked before anything is allocated: the
 * parameters on the device (and on the host when the executor makes random
 * ones), the activation arena, the input, one layer's weights converted at
 * a time and the convolutions' converted weights gathered on the host until
 * they are uploaded together (ex_place_consts). A network too large for the
 * device or the host (a huge batch or image size) is refused with the
 * figures (MT_RANGE). */
static mt_status ex_check_memory(mt_device *dev, const mt_network *net, int own_weights, char *err, size_t errlen) {
    uint64_t params = 0, largest = 0, staged = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        uint64_t t = 0, extra = 0;
        if (l->kind == MT_LAYER_CONV2D) {
            t = (uint64_t)mt_workload_weight_elems(&l->conv.wl);
            extra = (uint64_t)l->conv.wl.k * ((l->conv.bias ? 1 : 0) + (l->conv.batch_norm ? 4 : 0));
            staged += t + (uint64_t)l->conv.wl.k;
        } else if (l->kind == MT_LAYER_DENSE) {
            t = (uint64_t)l->dense.in_features * (uint64_t)l->dense.out_features;
            extra = l->dense.bias ? (uint64_t)l->dense.out_features : 0;
        }
        params += t + extra;
        if (t > largest) largest = t;
    }
    mt__act_plan plan;
    mt_status st = mt__act_plan_make(net, 1, &plan);
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: cannot plan the activation buffers: %s", mt_status_str(st));
    uint64_t arena = (uint64_t)plan.arena_bytes;
    mt__act_plan_free(&plan);
    const uint64_t f = sizeof(float);
    uint64_t input = (uint64_t)mt__shape_elems(mt_network_layer(net, 0)->out);
    mt_mem_need need = {.host_bytes = f * ((own_weights ? params : 0) + staged + 2 * largest + input),
                        .device_bytes = f * (params + (uint64_t)max_dense_input(net)) + arena};
    need.largest_buffer = arena > f * largest ? arena : f * largest;
    char what[160];
    snprintf(what, sizeof what, "the network %s (input %dx%dx%dx%d)", mt_network_name(net), mt_network_layer(net, 0)->out.n,
             mt_network_layer(net, 0)->out.c, mt_network_layer(net, 0)->out.h, mt_network_layer(net, 0)->out.w);
    char why[1024];
    if ((st = mt__check_memory(mt_device_get_info(dev), what, &need, why, sizeof why)) != MT_OK)
        return mt__fail(err, errlen, st, "executor: %s", why);
    return MT_OK;
}

#define EX_FUSE_MAX_LAUNCHES 64

/* Index of b's allocation (a view's is the one it was cut from) among
 * bufs[0..n), or -1: a fused launch takes allocations and offsets. */
static int fuse_buffer_index(mt_dbuf *const *bufs, int n, mt_dbuf *b) {
    const mt_dbuf *root = mt__dbuf_root(b, NULL);
    for (int i = 0; i < n; i++)
        if (bufs[i] == root) return i;
    return -1;
}

/* Adds the allocations of launch l's buffers to bufs[0..*n) when they all
 * fit in EX_FUSE_MAX_BUFS: 1, else 0 (bufs unchanged). */
static int fuse_take_buffers(mt_dbuf **bufs, int *n, const ex_launch *l) {
    int add = 0;
    for (int a = 0; a < l->nargs; a++) {
        const mt_dbuf *root = mt__dbuf_root(l->args[a], NULL);
        int seen = fuse_buffer_index(bufs, *n, l->args[a]) >= 0;
        for (int b = 0; b < a && !seen; b++) seen = mt__dbuf_root(l->args[b], NULL) == root;
        add += !seen;
    }
    if (*n + add > EX_FUSE_MAX_BUFS) return 0;
    for (int a = 0; a < l->nargs; a++)
        if (fuse_buffer_index(bufs, *n, l->args[a]) < 0) bufs[(*n)++] = mt__dbuf_root(l->args[a], NULL);
    return 1;
}

/* Builds the fused launch of step s (launches [s->first, s->first + s->n)). */
static mt_status fuse_step(mt_executor *ex, ex_step *s, char *err, size_t errlen) {
    mt__fuse_launch fl[EX_FUSE_MAX_LAUNCHES];
    int argidx[EX_FUSE_MAX_LAUNCHES][EX_MAX_ARGS];
    int64_t argoff[EX_FUSE_MAX_LAUNCHES][EX_MAX_ARGS];
    mt_dbuf *bufs[EX_FUSE_MAX_BUFS];
    int nbufs = 0;
    for (int j = 0; j < s->n; j++) {
        const ex_launch *l = &ex->launches[s->first + j];
        fuse_take_buffers(bufs, &nbufs, l); /* fits: ex_fuse checked */
        for (int a = 0; a < l->nargs; a++) {
            size_t off = 0;
            mt__dbuf_root(l->args[a], &off);
            argidx[j][a] = fuse_buffer_index(bufs, nbufs, l->args[a]);
            argoff[j][a] = (int64_t)(off / sizeof(float)); /* views start MT_DBUF_VIEW_ALIGN apart */
        }
        fl[j] = (mt__fuse_launch){.src = l->src ? l->src : mt__op_kernels_source(), .kernel = l->kernel, .nargs = l->nargs,
                                  .arg = argidx[j], .arg_offset = argoff[j], .counters = s->first + j};
        memcpy(fl[j].grid, l->grid, sizeof l->grid);
        memcpy(fl[j].block, l->block, sizeof l->block);
    }
    char name[64], *src = NULL;
    snprintf(name, sizeof name, "mt_fused_%d_%d", s->first, s->n);
    int64_t scratch = 0;
    mt_status st = mt__fuse_source(fl, s->n, nbufs, name, &src, &scratch, err, errlen);
    const int cu = ex->clock_groups;
    const size_t need = sizeof(float) * (size_t)scratch * (size_t)cu;
    if (st == MT_OK && need > ex->scratch_bytes) {
        /* Grown when a later step needs more (the smaller one stays with the steps before). */
        st = ex_alloc(ex, need, NULL, &ex->scratch, &ex->stats.workspace_bytes, err, errlen);
        if (st == MT_OK) ex->scratch_bytes = need;
    }
    mt_program *p = NULL;
    if (st == MT_OK) st = mt_program_build_source(ex->dev, src, name, &p, err, errlen);
    free(src);
    if (st == MT_OK) st = ex_add_prog(ex, name, p, err, errlen);
    if (st != MT_OK) return st;
    s->prog = p;
    s->args[0] = ex->counters;
    s->args[1] = ex->scratch;
    s->args[2] = ex->clock;
    memcpy(s->args + 3, bufs, sizeof(mt_dbuf *) * (size_t)nbufs);
    s->nargs = 3 + nbufs;
    s->grid[0] = cu;
    s->grid[1] = s->grid[2] = 1;
    return MT_OK;
}

/* Groups the launches into steps: each run of consecutive launches whose
 * kernels can run fused (up to EX_FUSE_MAX_LAUNCHES, with up to
 * EX_FUSE_MAX_BUFS buffers among them) becomes one launch. A run whose
 * fused kernel fails to build stays as it was: the pass stays correct,
 * only slower. With nothing fused, no steps. */
static mt_status ex_fuse(mt_executor *ex, char *err, size_t errlen) {
    ex->steps = calloc((size_t)ex->nlaunches, sizeof *ex->steps);
    ex->zeros = calloc((size_t)ex->nlaunches * MT__FUSE_COUNTERS, sizeof *ex->zeros);
    if (!ex->steps || !ex->zeros) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    mt_status st = ex_alloc(ex, sizeof(int) * MT__FUSE_COUNTERS * (size_t)ex->nlaunches, ex->zeros, &ex->counters, &ex->stats.workspace_bytes, err, errlen);
    if (st != MT_OK) return st;
    const int units = mt_device_get_info(ex->dev)->compute_units;
    ex->clock_groups = units > 0 ? units : 1;
    const size_t stamps = (size_t)MT__FUSE_STAMPS * (size_t)ex->clock_groups * (size_t)ex->nlaunches;
    ex->stamps = calloc(stamps, sizeof *ex->stamps);
    ex->queued = calloc((size_t)ex->nlaunches, sizeof *ex->queued);
    if (!ex->stamps || !ex->queued) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    if ((st = ex_alloc(ex, sizeof *ex->stamps * stamps, ex->stamps, &ex->clock, &ex->stats.workspace_bytes, err, errlen)) != MT_OK) return st;
    int fused = 0;
    for (int i = 0; i < ex->nlaunches;) {
        int n = 0;
        mt_dbuf *bufs[EX_FUSE_MAX_BUFS];
        int nbufs = 0;
        while (i + n < ex->nlaunches && n < EX_FUSE_MAX_LAUNCHES && ex->launches[i + n].fusable &&
               fuse_take_buffers(bufs, &nbufs, &ex->launches[i + n]))
            n++;
        ex_step *s = &ex->steps[ex->nsteps++];
        *s = (ex_step){.first = i, .n = n > 1 ? n : 1};
        char ferr[1024];
        if (s->n > 1 && fuse_step(ex, s, ferr, sizeof ferr) != MT_OK) {
            ex->nsteps--;
            for (int j = 0; j < n; j++) ex->steps[ex->nsteps++] = (ex_step){.first = i + j, .n = 1};
        } else if (s->n > 1) {
            fused++;
        }
        i += n > 1 ? n : 1;
    }
    for (int i = 0; i < ex->nlaunches; i++) {
        free(ex->launches[i].src);
        ex->launches[i].src = NULL;
        ex->launches[i].fusable = 0;
    }
    if (!fused) {
        free(ex->steps);
        ex->steps = NULL;
        ex->nsteps = 0;
    }
    ex->stats.launches_fused = fused ? ex->nsteps : ex->nlaunches;
    ex->stats.profile_in_pass = fused && host_clock() != 0;
    return MT_OK;
}

mt_status mt_executor_build(mt_device *dev, const mt_network *net, const mt_executor_params *params, mt_executor **out, char *err,
                            size_t errlen) {
    if (!dev || !net || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: NULL argument");
    mt_status st = mt_network_status(net, err, errlen);
    if (st != MT_OK) return st;
    if (mt_network_num_layers(net) < 2 || mt_network_layer(net, 0)->kind != MT_LAYER_INPUT)
        return mt__fail(err, errlen, MT_INVALID_ARG, "executor: network %s has no layers after its input", mt_network_name(net));
    /* The op kernels (op_kernels.c) are OpenCL C; CUDA versions come with the CUDA executor. */
    if (mt_device_get_info(dev)->backend != MT_BACKEND_OPENCL)
        return mt__fail(err, errlen, MT_UNSUPPORTED, "executor: only OpenCL devices are supported so far (the op kernels are OpenCL C)");
    double t0 = now_s();
    mt_executor_params p = params ? *params : mt_executor_default_params();
    if (p.rank < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: rank %d is negative", p.rank);
    if (p.npins < 0 || (p.npins > 0 && !p.pins)) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: %d pins at %p", p.npins, (const void *)p.pins);
    for (int j = 0; j < p.npins; j++)
        if (!p.pins[j].template_name || !p.pins[j].config) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: pin %d has no template or config", j);
    if ((st = ex_check_memory(dev, net, p.weights == NULL, err, errlen)) != MT_OK) return st;
    mt_executor *ex = calloc(1, sizeof *ex);
    if (!ex) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
    ex->dev = dev;
    ex->net = net;
    ex->seed = p.seed;
    ex->rank = p.rank;
    ex->pins = p.pins;
    ex->npins = p.npins;
    /* Fused passes on CPU devices only: their work-groups wait for each
     * other, which needs every work-group of a launch resident at once. */
    ex->fuse = p.fuse && mt_device_get_info(dev)->is_cpu;
    ex->nlayers = mt_network_num_layers(net);
    ex->stats.nlayers = ex->nlayers;
    mt_weights *own = NULL;
    const mt_weights *w = p.weights;
    if (!w) {
        if ((st = mt_weights_random(net, p.seed, &own, err, errlen)) != MT_OK) goto fail;
        w = own;
    }
    ex->choice = calloc((size_t)ex->nlayers, sizeof *ex->choice);
    ex->input_count = mt__shape_elems(mt_network_layer(net, 0)->out);
    const size_t input_bytes = sizeof(float) * (size_t)ex->input_count;
    ex->input = aligned_alloc(MT_DBUF_VIEW_ALIGN, (input_bytes + MT_DBUF_VIEW_ALIGN - 1) / MT_DBUF_VIEW_ALIGN * MT_DBUF_VIEW_ALIGN);
    if (!ex->choice || !ex->input) {
        st = mt__fail(err, errlen, MT_NOMEM, "executor: out of memory");
        goto fail;
    }
    mt_fill_random(ex->input, ex->input_count, p.seed);
    if ((st = ex_activations(ex, net, err, errlen)) != MT_OK) goto fail;
    if ((st = ex_input_in_place(ex, err, errlen)) != MT_OK) goto fail;
    for (int i = 0; i < ex->nlayers; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind == MT_LAYER_CONV2D) ex->stats.nconvs++;
        char lerr[2048];
        if ((st = ex_layer(ex, p.db, w, i, lerr, sizeof lerr)) != MT_OK) {
            if (strncmp(lerr, "layer '", 7) == 0)
                mt__fail(err, errlen, st, "%s", lerr);
            else
                mt__fail(err, errlen, st, "layer '%s': %s", l->name, lerr);
            goto fail;
        }
    }
    mt_weights_free(own);
    own = NULL;
    ex->pins = NULL; /* borrowed for the build */
    ex->npins = 0;
    if ((st = ex_place_consts(ex, err, errlen)) != MT_OK) goto fail;
    ex->stats.launches = ex->stats.launches_fused = ex->nlaunches;
    if (ex->fuse && (st = ex_fuse(ex, err, errlen)) != MT_OK) {
        mt_executor_free(ex);
        return st;
    }
    ex->stats.largest_live_bytes = ex->plan.largest_live;
    ex->stats.two_largest_bytes = ex->plan.two_largest;
    ex->stats.device_bytes = ex->stats.weight_bytes + ex->stats.activation_bytes + ex->stats.workspace_bytes;
    ex->stats.build_s = now_s() - t0;
    ex->tsc0 = host_clock();
    ex->tsc0_s = now_s();
    *out = ex;
    return MT_OK;
fail:
    mt_weights_free(own);
    mt_executor_free(ex);
    return st;
}

mt_status mt_executor_set_input(mt_executor *ex, const float *data, int64_t count, char *err, size_t errlen) {
    if (!ex || !data) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: NULL argument");
    if (count != ex->input_count)
        return mt__fail(err, errlen, MT_RANGE, "executor: input has %lld elements, the network takes %lld", (long long)count,
                        (long long)ex->input_count);
    if (!ex->input_buf) {
        memcpy(ex->input, data, sizeof(float) * (size_t)count);
        return MT_OK;
    }
    /* ex->input is the device's copy: written through the device. */
    mt_status st = mt_dbuf_write(ex->dev, ex->input_buf, 0, data, sizeof(float) * (size_t)count);
    return st == MT_OK ? MT_OK : mt__fail(err, errlen, st, "executor: input upload failed: %s", mt_status_str(st));
}

/* Queues the steps of a fused pass and waits for them. The fused launches
 * leave their counters zeroed for the next pass; after a failure the host
 * zeroes them. With ms, the launches that run alone are timed on the
 * device into ms[launch]. */
static mt_status ex_run_steps(mt_executor *ex, double *ms, char *err, size_t errlen) {
    char lerr[1024];
    mt_status st = MT_OK;
    if (ex->counters_dirty) {
        st = mt_dbuf_write(ex->dev, ex->counters, 0, ex->zeros, sizeof(int) * MT__FUSE_COUNTERS * (size_t)ex->nlaunches);
        if (st != MT_OK) return mt__fail(err, errlen, st, "executor: zeroing the fused launches' counters failed: %s", mt_status_str(st));
        ex->counters_dirty = 0;
    }
    ex->counters_dirty = 1; /* until the pass completes */
    static const int64_t one[3] = {1, 1, 1};
    for (int i = 0; i < ex->nsteps; i++) {
        const ex_step *s = &ex->steps[i];
        ex_launch *l = &ex->launches[s->first];
        if (s->prog) {
            st = mt_program_launch(ex->dev, s->prog, (mt_dbuf **)s->args, s->nargs, s->grid, one, lerr, sizeof lerr);
            ex->queued[i] = host_clock();
        } else if (ms)
            st = mt_program_launch_timed(ex->dev, l->prog, l->args, l->nargs, l->grid, l->block, &ms[s->first], lerr, sizeof lerr);
        else
            st = mt_program_launch(ex->dev, l->prog, l->args, l->nargs, l->grid, l->block, lerr, sizeof lerr);
        if (st != MT_OK) {
            mt_device_finish(ex->dev, NULL, 0);
            return mt__fail(err, errlen, st, "layer '%s'%s: %s", mt_network_layer(ex->net, l->layer)->name, s->prog ? " (fused)" : "", lerr);
        }
    }
    st = mt_device_finish(ex->dev, lerr, sizeof lerr);
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: a kernel of the pass failed: %s", lerr);
    ex->counters_dirty = 0;
    return MT_OK;
}

/* ex->pass from the host's readings and the fused launches' stamps (checked
 * by ex_clock_times). Queueing counts until the first fused launch is
 * queued or starts, whichever is first (launches alone before it with it);
 * the launches queued after it overlap the device's work. The launches
 * that run alone between fused ones (ms: their device times) are layers,
 * not time outside them. */
static void ex_pass_time(mt_executor *ex, const double *ms, double ms_per_tick) {
    const int g = ex->clock_groups;
    mt_pass_time *p = &ex->pass;
    memset(p, 0, sizeof *p);
    uint64_t end = ex->host[1], queued = 0;
    double alone = 0; /* device time of the launches run alone since the last fused one */
    for (int k = 0; k < ex->nsteps; k++) {
        const ex_step *s = &ex->steps[k];
        if (!s->prog) {
            alone += ms[s->first];
            continue;
        }
        uint64_t first = UINT64_MAX, stop = 0;
        for (int w = 0; w < g; w++) {
            const uint64_t *c = ex->stamps + ((size_t)s->first * (size_t)g + (size_t)w) * MT__FUSE_STAMPS;
            const uint64_t *d = ex->stamps + ((size_t)(s->first + s->n - 1) * (size_t)g + (size_t)w) * MT__FUSE_STAMPS;
            if (c[0] < first) first = c[0];
            if (d[2] > stop) stop = d[2];
        }
        double late = 0;
        for (int w = 0; w < g; w++) late += (double)(ex->stamps[((size_t)s->first * (size_t)g + (size_t)w) * MT__FUSE_STAMPS] - first);
        const uint64_t from = ex->queued[k] > end ? ex->queued[k] : end;
        if (first > from && (double)(first - from) * ms_per_tick > alone) p->start_ms += (double)(first - from) * ms_per_tick - alone;
        alone = 0;
        p->late_ms += late / (g > 1 ? g - 1 : 1) * ms_per_tick;
        /* The host may return from queueing after the launch started. */
        if (!queued) queued = ex->queued[k] < first ? ex->queued[k] : first;
        end = stop;
    }
    p->upload_ms = (double)(ex->host[1] - ex->host[0]) * ms_per_tick;
    p->queue_ms = queued > ex->host[1] ? (double)(queued - ex->host[1]) * ms_per_tick : 0;
    p->return_ms = ex->host[2] > end && (double)(ex->host[2] - end) * ms_per_tick > alone ? (double)(ex->host[2] - end) * ms_per_tick - alone : 0;
    p->valid = 1;
}

void mt_executor_pass_time(const mt_executor *ex, mt_pass_time *out) {
    if (!out) return;
    if (!ex) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = ex->pass;
}

/* The profile of a fused pass from its clock stamps: a fused launch's time
 * is the longest a work-group took from starting it to finishing its
 * share (the layer's critical path), its wait the mean time the
 * work-groups then spent waiting for the others. The counter's rate comes
 * from the host's wall clock since the build. */
static mt_status ex_clock_times(mt_executor *ex, const double *ms, mt_layer_time *times, char *err, size_t errlen) {
    const int g = ex->clock_groups;
    const size_t n = (size_t)MT__FUSE_STAMPS * (size_t)g * (size_t)ex->nlaunches;
    mt_status st = mt_dbuf_read(ex->dev, ex->clock, 0, ex->stamps, sizeof *ex->stamps * n);
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: reading the fused launches' clock failed: %s", mt_status_str(st));
    const double secs = now_s() - ex->tsc0_s, ticks = (double)(host_clock() - ex->tsc0);
    if (!(secs > 0) || !(ticks > 0)) return mt__fail(err, errlen, MT_DEVICE, "executor: the time-stamp counter did not advance");
    const double ms_per_tick = 1e3 * secs / ticks;
    for (int k = 0; k < ex->nsteps; k++) {
        const ex_step *s = &ex->steps[k];
        for (int i = s->first; i < s->first + s->n; i++) {
            mt_layer_time *t = &times[ex->launches[i].layer];
            if (!s->prog) {
                t->kernel_ms += ms[i];
                continue;
            }
            uint64_t work = 0;
            double wait = 0;
            for (int w = 0; w < g; w++) {
                const uint64_t *c = ex->stamps + ((size_t)i * (size_t)g + (size_t)w) * MT__FUSE_STAMPS;
                if (c[0] == 0 || c[1] < c[0] || c[2] < c[1])
                    return mt__fail(err, errlen, MT_DEVICE, "layer '%s': the fused launch's clock stamps are out of order (%llu, %llu, %llu)",
                                    mt_network_layer(ex->net, ex->launches[i].layer)->name, (unsigned long long)c[0],
                                    (unsigned long long)c[1], (unsigned long long)c[2]);
                if (c[1] - c[0] > work) work = c[1] - c[0];
                wait += (double)(c[2] - c[1]);
            }
            t->kernel_ms += (double)work * ms_per_tick;
            t->wait_ms += wait / g * ms_per_tick;
        }
    }
    ex_pass_time(ex, ms, ms_per_tick);
    return MT_OK;
}

mt_status mt_executor_run(mt_executor *ex, mt_layer_time *times, char *err, size_t errlen) {
    if (!ex) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: NULL argument");
    if (times) memset(times, 0, sizeof *times * (size_t)ex->nlayers);
    ex->pass.valid = 0;
    ex->host[0] = host_clock();
    mt_status st = ex->input_buf ? MT_OK : mt_dbuf_write(ex->dev, ex->slots[ex->plan.slot[0]], 0, ex->input, sizeof(float) * (size_t)ex->input_count);
    ex->host[1] = host_clock();
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: input upload failed: %s", mt_status_str(st));
    char lerr[1024];
    if (!times && ex->steps) return ex_run_steps(ex, NULL, err, errlen);
    if (times && ex->stats.profile_in_pass) {
        /* Profiled as it runs: the fused pass reads the clock anyway. */
        double *ms = calloc((size_t)ex->nlaunches, sizeof *ms);
        if (!ms) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory for the launch times");
        st = ex_run_steps(ex, ms, err, errlen);
        ex->host[2] = host_clock();
        if (st == MT_OK) st = ex_clock_times(ex, ms, times, err, errlen);
        free(ms);
        return st;
    }
    if (!times) {
        /* Queue the whole pass and wait once: no round trip to the host per kernel. */
        for (int i = 0; i < ex->nlaunches; i++) {
            ex_launch *l = &ex->launches[i];
            st = mt_program_launch(ex->dev, l->prog, l->args, l->nargs, l->grid, l->block, lerr, sizeof lerr);
            if (st != MT_OK) {
                mt_device_finish(ex->dev, NULL, 0);
                return mt__fail(err, errlen, st, "layer '%s': %s", mt_network_layer(ex->net, l->layer)->name, lerr);
            }
        }
        st = mt_device_finish(ex->dev, lerr, sizeof lerr);
        return st == MT_OK ? MT_OK : mt__fail(err, errlen, st, "executor: a kernel of the pass failed: %s", lerr);
    }
    /* Profiled: the pass queued the same way, each launch timed on the device,
     * so that the layers run as in an unprofiled pass; waiting for each
     * kernel instead lets the device's threads fall asleep between kernels.
     * On the 2-core CPU, ResNet-50's layers then summed to 0.96-0.99 of the
     * profiled passes' wall time (0.95-0.96 waiting for each kernel; four
     * runs of each, 2026-12-02). */
    double *ms = calloc((size_t)(ex->nlaunches > 0 ? ex->nlaunches : 1), sizeof *ms);
    if (!ms) return mt__fail(err, errlen, MT_NOMEM, "executor: out of memory for the launch times");
    for (int i = 0; i < ex->nlaunches && st == MT_OK; i++) {
        ex_launch *l = &ex->launches[i];
        st = mt_program_launch_timed(ex->dev, l->prog, l->args, l->nargs, l->grid, l->block, &ms[i], lerr, sizeof lerr);
        if (st != MT_OK) mt__fail(err, errlen, st, "layer '%s': %s", mt_network_layer(ex->net, l->layer)->name, lerr);
    }
    /* Always waited for: the queued launches write into ms. */
    mt_status fst = mt_device_finish(ex->dev, lerr, sizeof lerr);
    if (st == MT_OK && fst != MT_OK) st = mt__fail(err, errlen, fst, "executor: a kernel of the profiled pass failed: %s", lerr);
    for (int i = 0; i < ex->nlaunches && st == MT_OK; i++) times[ex->launches[i].layer].kernel_ms += ms[i];
    free(ms);
    return st;
}

mt_shape mt_executor_output_shape(const mt_executor *ex) {
    mt_shape none = {0, 0, 0, 0};
    return ex ? mt_network_layer(ex->net, ex->nlayers - 1)->out : none;
}

mt_status mt_executor_output(mt_executor *ex, float *out, int64_t count, char *err, size_t errlen) {
    if (!ex || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "executor: NULL argument");
    int64_t n = mt__shape_elems(mt_executor_output_shape(ex));
    if (count != n) return mt__fail(err, errlen, MT_RANGE, "executor: output has %lld elements, not %lld", (long long)n, (long long)count);
    mt_status st = mt_dbuf_read(ex->dev, ex->slots[ex->plan.slot[ex->nlayers - 1]], 0, out, sizeof(float) * (size_t)n);
    if (st != MT_OK) return mt__fail(err, errlen, st, "executor: output read-back failed: %s", mt_status_str(st));
    return MT_OK;
}

void mt_executor_get_stats(const mt_executor *ex, mt_executor_stats *stats) {
    if (!stats) return;
    if (!ex) {
        memset(stats, 0, sizeof *stats);
        return;
    }
    *stats = ex->stats;
}

mt_status mt_executor_conv_choice(const mt_executor *ex, int layer, const char **template_name, const char **config, int *from_db) {
    if (!ex || layer < 0 || layer >= ex->nlayers || !ex->choice[layer].config) return MT_INVALID_ARG;
    if (template_name) *template_name = ex->choice[layer].template_name;
    if (config) *config = ex->choice[layer].config;
    if (from_db) *from_db = ex->choice[layer].from_db;
    return MT_OK;
}
