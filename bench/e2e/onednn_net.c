/* bench/onednn_net: the vendor reference for a whole network. Runs a zoo
 * network forward with oneDNN primitives on the CPU (fp32 inference), with
 * the weights `mtgpu run` uses (mt_weights_random with its seed, batch norm
 * folded into the convolution weights and biases on the host by the
 * executor's own mt__conv_affine), and times whole forward passes.
 *
 *   bench_onednn_net NETWORK [--layout any|nchw] [--batch N] [--image-size S] [--repeat N]
 *                    [--warmup N] [--seed S] [--check [--tolerance T]] [--verbose] [--profile] [--json]
 *
 * --layout any (the default) is oneDNN used as a user who wants it fast uses
 * it: every convolution and dense layer is created with format_tag::any so
 * that oneDNN picks its blocked layouts, the residual add is a sum post-op
 * (in place on the residual tensor when it is dead after the convolution),
 * ReLU and ReLU6 are eltwise post-ops (relu, clip 0..6), weights are
 * reordered once at build time, and activations are reordered only where two
 * primitives want different layouts. Pooling, concat and softmax take their
 * input's layout. --layout nchw forces plain NCHW activations and OIHW
 * (GOIHW when grouped) weights everywhere, the layouts mtgpu's kernels use.
 * In both, activations share a few buffers (liveness-based best fit, as the
 * mtgpu executor does) and every primitive uses one shared user scratchpad.
 *
 * A forward pass executes every primitive in order on one stream and waits
 * at the end; the latency is the median wall time of --repeat passes after
 * --warmup passes. --check instead runs one pass at a small size (e.g.
 * --image-size 32), compares the output with mt_network_reference on the
 * same weights and input (mt_compare's normalised max error) and fails above
 * --tolerance, so the benchmark is shown to run the same network as mtgpu.
 *
 * Exit status: 0 success, 1 failure (including a failed check), 2 bad usage.
 * Threads: oneDNN's OpenMP runtime, OMP_NUM_THREADS and OMP_WAIT_POLICY as in
 * the environment. On a machine shared with other jobs, OpenMP's default
 * spin-waiting makes passes several times slower and very uneven (ResNet-50:
 * median 200 ms, min 70 ms on 2 busy cores) where OMP_WAIT_POLICY=passive
 * gives 45 ms; bench/e2e/run.sh sets it.
 * Built only when oneDNN (dnnl.h, libdnnl) is found; bench/common/setup.sh installs it. */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "executor-impl.h" /* mt__conv_affine: batch norm folded exactly as the executor folds it */
#include "mtgpu/executor.h"
#include "mtgpu/net.h"
#include "reference.h"
#include "mtgpu/weights.h"

#include "bench_util.h"

/* The seed of the random weights and input of `mtgpu run` (cli/cmd_run.c). */
#define DEFAULT_SEED 1
#define DEFAULT_REPEAT 20
#define DEFAULT_WARMUP 3
/* The whole-network threshold of tests/test_executor.c. */
#define DEFAULT_TOLERANCE 1e-4
#define MAX_ARGS 16
#define ALIGN 64

/* A memory object's storage: a pooled activation buffer, the shared
 * scratchpad, or its own (weights, the user's input). */
#define BUF_OWN (-1)
#define BUF_SCRATCH (-2)

typedef struct {
    dnnl_memory_t mem;
    int buf;
} mem_ref;

typedef struct {
    size_t bytes;
    int first, last; /* steps that first and last touch it; -1 when none does */
    int block;       /* the pool block it lives in */
} act_buf;

/* A tensor in one layout. */
typedef struct {
    int layer;
    dnnl_memory_desc_t md;
    dnnl_memory_t mem; /* NULL: not materialised (a flatten read only by dense layers) */
} view;

typedef struct {
    dnnl_primitive_t prim;
    int layer;
    const char *kind; /* "conv", "reorder", ... */
    char impl[64];
    char dst_fmt[48];
    int nargs;
    dnnl_exec_arg_t args[MAX_ARGS];
} step;

typedef struct {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    const mt_network *net;
    const mt_weights *w;
    int plain;
    int nl;
    int *last;    /* per layer: the last layer that reads it (through flatten aliases) */
    view *out;    /* per layer: its output */
    view *copies; /* reordered copies of layer outputs, reused by later readers */
    int ncopies, capcopies;
    act_buf *bufs;
    int nbufs, capbufs;
    mem_ref *mems; /* every memory object, destroyed at the end */
    int nmems, capmems;
    step *steps;
    int nsteps, capsteps;
    void **blocks;
    size_t *block_bytes;
    int nblocks;
    void *scratch;
    size_t scratch_bytes;
    int64_t weight_bytes, act_bytes;
    int reorders; /* reorder steps per pass */
    float *input;
    char *err;
    size_t errlen;
} net_ctx;


static int fail(net_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(net_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Grows *arr (of *cap elements of size sz) to hold n + 1; 0 or -1. */
static int grow(void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return 0;
    int nc = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, (size_t)nc * sz);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

#define DN(call, what)                                                                                                 \
    do {                                                                                                               \
        dnnl_status_t s_ = (call);                                                                                     \
        if (s_ != dnnl_success) {                                                                                      \
            rc = fail(c, "layer '%s': %s: oneDNN status %s", l->name, what, dnnl_status2str(s_));                      \
            goto done;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* oneDNN's notation for a blocked layout, e.g. "aBcd16b" (nChw16c) or "abcd" (nchw). */
static void md_fmt(const dnnl_memory_desc_t *md, char *buf, size_t len) {
    if (md->format_kind != dnnl_blocked) {
        snprintf(buf, len, "%s", dnnl_fmt_kind2str(md->format_kind));
        return;
    }
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    int order[DNNL_MAX_NDIMS], blocked[DNNL_MAX_NDIMS] = {0};
    for (int i = 0; i < md->ndims; i++) order[i] = i;
    for (int i = 1; i < md->ndims; i++) /* outer dims by decreasing stride, ties in index order */
        for (int j = i; j > 0 && b->strides[order[j]] > b->strides[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int j = 0; j < b->inner_nblks; j++) blocked[b->inner_idxs[j]] = 1;
    size_t p = 0;
    for (int i = 0; i < md->ndims && p + 1 < len; i++) buf[p++] = (char)((blocked[order[i]] ? 'A' : 'a') + order[i]);
    buf[p] = '\0';
    for (int j = 0; j < b->inner_nblks && p < len; j++) p += (size_t)snprintf(buf + p, len - p, "%lld%c", (long long)b->inner_blks[j], (int)('a' + b->inner_idxs[j]));
}

/* An attribute with the user scratchpad and these post-ops: the residual sum,
 * then the activation. */
static dnnl_status_t make_attr(int sum, mt_activation act, dnnl_primitive_attr_t *out) {
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_status_t s = dnnl_primitive_attr_create(&attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && (sum || act != MT_ACT_NONE)) {
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success && sum) s = dnnl_post_ops_append_sum(po, 1.0f);
        if (s == dnnl_success && act == MT_ACT_RELU) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        if (s == dnnl_success && act == MT_ACT_RELU6) s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0.0f, 6.0f);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
        if (po) dnnl_post_ops_destroy(po);
    }
    if (s != dnnl_success && attr) {
        dnnl_primitive_attr_destroy(attr);
        attr = NULL;
    }
    *out = attr;
    return s;
}

static int track_mem(net_ctx *c, dnnl_memory_t mem, int buf) {
    if (grow((void **)&c->mems, c->nmems, &c->capmems, sizeof *c->mems)) {
        dnnl_memory_destroy(mem);
        return fail(c, "out of memory");
    }
    c->mems[c->nmems++] = (mem_ref){mem, buf};
    return 0;
}

static int buf_of(const net_ctx *c, dnnl_memory_t mem) {
    for (int i = 0; i < c->nmems; i++)
        if (c->mems[i].mem == mem) return c->mems[i].buf;
    return BUF_OWN;
}

/* A memory object for md on buffer `buf`, or on a new pooled buffer when buf
 * is -1; storage is attached after planning (mem_plan). */
static int act_mem(net_ctx *c, const dnnl_memory_desc_t *md, int buf, dnnl_memory_t *out) {
    if (buf < 0) {
        if (grow((void **)&c->bufs, c->nbufs, &c->capbufs, sizeof *c->bufs)) return fail(c, "out of memory");
        c->bufs[c->nbufs] = (act_buf){.bytes = dnnl_memory_desc_get_size(md), .first = -1, .last = -1, .block = -1};
        buf = c->nbufs++;
    } else if (dnnl_memory_desc_get_size(md) > c->bufs[buf].bytes) {
        c->bufs[buf].bytes = dnnl_memory_desc_get_size(md);
    }
    dnnl_memory_t mem = NULL;
    if (dnnl_memory_create(&mem, md, c->eng, DNNL_MEMORY_NONE) != dnnl_success) return fail(c, "cannot create a memory object");
    if (track_mem(c, mem, buf)) return -1;
    *out = mem;
    return 0;
}

/* Creates the primitive of pd as the next step (the caller keeps pd), with
 * the shared scratchpad added to args when the primitive needs one. */
static int push_step(net_ctx *c, const_dnnl_primitive_desc_t pd, int layer, const char *kind, const dnnl_exec_arg_t *args, int nargs) {
    if (grow((void **)&c->steps, c->nsteps, &c->capsteps, sizeof *c->steps)) return fail(c, "out of memory");
    step *s = &c->steps[c->nsteps];
    memset(s, 0, sizeof *s);
    s->layer = layer;
    s->kind = kind;
    memcpy(s->args, args, sizeof *args * (size_t)nargs);
    s->nargs = nargs;
    const char *impl = NULL;
    snprintf(s->impl, sizeof s->impl, "%s", dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl ? impl : "?");
    const dnnl_memory_desc_t *dmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    if (dmd) md_fmt(dmd, s->dst_fmt, sizeof s->dst_fmt);
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sbytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (sbytes > 0) {
        dnnl_memory_t sm = NULL;
        if (dnnl_memory_create(&sm, smd, c->eng, DNNL_MEMORY_NONE) != dnnl_success) return fail(c, "cannot create a scratchpad memory object");
        if (track_mem(c, sm, BUF_SCRATCH)) return -1;
        s->args[s->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
        if (sbytes > c->scratch_bytes) c->scratch_bytes = sbytes;
    }
    dnnl_status_t st = dnnl_primitive_create(&s->prim, pd);
    if (st != dnnl_success)
        return fail(c, "layer '%s': %s primitive: oneDNN status %s", mt_network_layer(c->net, layer)->name, kind, dnnl_status2str(st));
    c->nsteps++;
    return 0;
}

/* Layer j's output in layout want, for a reader at layer `reader`: the
 * output itself when its layout is want, else a copy made by a reorder step
 * (made once per layout and shared by later readers). */
static int view_as(net_ctx *c, int j, const dnnl_memory_desc_t *want, int reader, dnnl_memory_t *out) {
    const view *v = &c->out[j];
    if (!v->mem) return fail(c, "layer '%s': input '%s' is not materialised", mt_network_layer(c->net, reader)->name, mt_network_layer(c->net, j)->name);
    if (dnnl_memory_desc_equal(&v->md, want)) {
        *out = v->mem;
        return 0;
    }
    for (int i = 0; i < c->ncopies; i++)
        if (c->copies[i].layer == j && dnnl_memory_desc_equal(&c->copies[i].md, want)) {
            *out = c->copies[i].mem;
            return 0;
        }
    const mt_layer *l = mt_network_layer(c->net, reader);
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t dst = NULL;
    DN(make_attr(0, MT_ACT_NONE, &attr), "attributes");
    DN(dnnl_reorder_primitive_desc_create(&pd, &v->md, c->eng, want, c->eng, attr), "reorder");
    if (act_mem(c, want, -1, &dst)) goto done;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, v->mem}, {DNNL_ARG_TO, dst}};
    if (push_step(c, pd, reader, "reorder", args, 2)) goto done;
    c->reorders++;
    if (grow((void **)&c->copies, c->ncopies, &c->capcopies, sizeof *c->copies)) {
        rc = fail(c, "out of memory");
        goto done;
    }
    c->copies[c->ncopies++] = (view){.layer = j, .md = *want, .mem = dst};
    *out = dst;
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Persistent weights in layout want, from host data in plain layout `tag`
 * (reordered once, now). */
static int make_weights(net_ctx *c, const mt_layer *l, const dnnl_memory_desc_t *want, int ndims, const dnnl_dims_t dims, dnnl_format_tag_t tag,
                        const float *data, dnnl_memory_t *out) {
    int rc = -1;
    dnnl_memory_desc_t user_md;
    dnnl_memory_t user = NULL, mem = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    DN(dnnl_memory_desc_init_by_tag(&user_md, ndims, dims, dnnl_f32, tag), "weights desc");
    DN(dnnl_memory_create(&mem, want, c->eng, DNNL_MEMORY_ALLOCATE), "weights memory");
    if (track_mem(c, mem, BUF_OWN)) {
        mem = NULL;
        goto done;
    }
    if (dnnl_memory_desc_equal(&user_md, want)) {
        void *p = NULL;
        DN(dnnl_memory_get_data_handle(mem, &p), "weights handle");
        memcpy(p, data, dnnl_memory_desc_get_size(&user_md));
    } else {
        DN(dnnl_memory_create(&user, &user_md, c->eng, (void *)data), "user weights memory");
        DN(dnnl_reorder_primitive_desc_create(&pd, &user_md, c->eng, want, c->eng, NULL), "weights reorder");
        DN(dnnl_primitive_create(&prim, pd), "weights reorder primitive");
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, mem}};
        DN(dnnl_primitive_execute(prim, c->stream, 2, args), "weights reorder");
        DN(dnnl_stream_wait(c->stream), "weights reorder");
    }
    c->weight_bytes += (int64_t)dnnl_memory_desc_get_size(want);
    *out = mem;
    rc = 0;
done:
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (user) dnnl_memory_destroy(user);
    return rc;
}

static int add_conv(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    const mt_workload *wl = &l->conv.wl;
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float *wf = NULL, *bf = NULL;
    double *scale = NULL, *shift = NULL;
    int g = wl->groups > 0 ? wl->groups : 1, has_bias = l->conv.bias || l->conv.batch_norm, res = l->conv.residual;
    dnnl_dims_t src_dims = {wl->n, wl->c, wl->h, wl->w}, dst_dims = {l->out.n, l->out.c, l->out.h, l->out.w}, wei_dims, bias_dims = {wl->k};
    int wei_ndims = g > 1 ? 5 : 4;
    if (g > 1) {
        dnnl_dims_t d = {g, wl->k / g, wl->c / g, wl->r, wl->s};
        memcpy(wei_dims, d, sizeof d);
    } else {
        dnnl_dims_t d = {wl->k, wl->c, wl->r, wl->s};
        memcpy(wei_dims, d, sizeof d);
    }
    dnnl_format_tag_t wei_tag = g > 1 ? dnnl_goihw : dnnl_oihw;
    dnnl_dims_t strides = {wl->stride_h, wl->stride_w}, dilates = {wl->dil_h - 1, wl->dil_w - 1}, pad = {wl->pad_h, wl->pad_w};
    dnnl_memory_desc_t src_md, wei_md, bias_md, dst_md;
    DN(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, c->plain ? dnnl_nchw : dnnl_format_tag_any), "src desc");
    DN(dnnl_memory_desc_init_by_tag(&wei_md, wei_ndims, wei_dims, dnnl_f32, c->plain ? wei_tag : dnnl_format_tag_any), "weights desc");
    DN(dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x), "bias desc");
    DN(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, c->plain ? dnnl_nchw : dnnl_format_tag_any), "dst desc");
    dnnl_convolution_desc_t cd;
    /* auto: oneDNN picks direct or Winograd, as bench_onednn_convs does. */
    DN(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_auto, &src_md, &wei_md, has_bias ? &bias_md : NULL,
                                                  &dst_md, strides, dilates, pad, pad),
       "convolution desc");
    DN(make_attr(res >= 0, l->act, &attr), "attributes");
    DN(dnnl_primitive_desc_create(&pd, &cd, attr, c->eng, NULL), "convolution primitive desc");
    src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);

    /* Weights with batch norm folded as the executor folds them: w' = w * scale[k], bias' = shift[k]. */
    int64_t nw = mt_workload_weight_elems(wl), per_k = nw / wl->k, have = 0;
    char name[MT_WEIGHT_NAME_MAX + 16];
    snprintf(name, sizeof name, "%s.weight", l->name);
    const float *wsrc = mt_weights_find(c->w, name, &have);
    if (!wsrc || have != nw) {
        rc = fail(c, "layer '%s': weights tensor '%s' is missing or has the wrong size", l->name, name);
        goto done;
    }
    scale = malloc(sizeof(double) * (size_t)wl->k);
    shift = malloc(sizeof(double) * (size_t)wl->k);
    wf = malloc(sizeof(float) * (size_t)nw);
    bf = malloc(sizeof(float) * (size_t)wl->k);
    if (!scale || !shift || !wf || !bf) {
        rc = fail(c, "out of memory");
        goto done;
    }
    if (mt__conv_affine(l, c->w, scale, shift, c->err, c->errlen) != MT_OK) goto done;
    for (int64_t o = 0; o < wl->k; o++) {
        for (int64_t j = 0; j < per_k; j++) wf[o * per_k + j] = (float)((double)wsrc[o * per_k + j] * scale[o]);
        bf[o] = (float)shift[o];
    }
    dnnl_memory_t src = NULL, wei = NULL, bias = NULL, dst = NULL;
    if (make_weights(c, l, &wei_md, wei_ndims, wei_dims, wei_tag, wf, &wei)) goto done;
    if (has_bias && make_weights(c, l, &bias_md, 1, bias_dims, dnnl_x, bf, &bias)) goto done;
    if (view_as(c, l->inputs[0], &src_md, i, &src)) goto done;
    if (res >= 0) {
        /* The sum post-op adds what dst holds: the residual, in dst's layout.
         * In place when nothing reads the residual later. */
        dnnl_memory_t r = NULL;
        if (view_as(c, res, &dst_md, i, &r)) goto done;
        int rbuf = buf_of(c, r);
        if (c->last[res] == i && res != l->inputs[0] && rbuf >= 0) {
            dst = r;
        } else {
            dnnl_primitive_desc_t cpd = NULL;
            dnnl_primitive_attr_t cattr = NULL;
            if (act_mem(c, &dst_md, -1, &dst)) goto done;
            dnnl_status_t s = make_attr(0, MT_ACT_NONE, &cattr);
            if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&cpd, &dst_md, c->eng, &dst_md, c->eng, cattr);
            int prc = -1;
            if (s == dnnl_success) {
                dnnl_exec_arg_t cargs[2] = {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, dst}};
                prc = push_step(c, cpd, i, "copy", cargs, 2);
                c->reorders++;
            } else {
                fail(c, "layer '%s': residual copy: oneDNN status %s", l->name, dnnl_status2str(s));
            }
            if (cpd) dnnl_primitive_desc_destroy(cpd);
            if (cattr) dnnl_primitive_attr_destroy(cattr);
            if (prc) goto done;
        }
    } else if (act_mem(c, &dst_md, -1, &dst)) {
        goto done;
    }
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}, {DNNL_ARG_BIAS, bias}};
    if (push_step(c, pd, i, "conv", args, has_bias ? 4 : 3)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    free(scale);
    free(shift);
    free(wf);
    free(bf);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* A pooling primitive over layer i's input: max, or average with or without
 * the padding in the divisor. The right padding makes oneDNN's output size
 * the network's (PyTorch's ceil_mode included). */
static int add_pooling(net_ctx *c, int i, dnnl_alg_kind_t alg, int kh, int kw, int sh, int sw, int ph, int pw) {
    const mt_layer *l = mt_network_layer(c->net, i);
    const view *in = &c->out[l->inputs[0]];
    mt_shape is = mt_network_layer(c->net, l->inputs[0])->out;
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (!in->mem) return fail(c, "layer '%s': input is not materialised", l->name);
    /* Any right pad in [p0, p0 + stride - 1] gives the same output size; no window reaches past p0. */
    int prh = (l->out.h - 1) * sh + kh - is.h - ph, prw = (l->out.w - 1) * sw + kw - is.w - pw;
    if (prh < 0) prh = prh + sh - 1 >= 0 ? 0 : prh;
    if (prw < 0) prw = prw + sw - 1 >= 0 ? 0 : prw;
    if (prh < 0 || prw < 0) return fail(c, "layer '%s': the output size needs negative padding", l->name);
    if (alg == dnnl_pooling_avg_include_padding && (prh > ph || prw > pw))
        return fail(c, "layer '%s': average pooling with ceil_mode and count_include_pad is not supported (PyTorch's divisor differs)", l->name);
    dnnl_dims_t dst_dims = {l->out.n, l->out.c, l->out.h, l->out.w}, strides = {sh, sw}, kernel = {kh, kw}, dil = {0, 0}, pl = {ph, pw},
                pr = {prh, prw};
    dnnl_memory_desc_t dst_md;
    DN(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, c->plain ? dnnl_nchw : dnnl_format_tag_any), "dst desc");
    dnnl_pooling_v2_desc_t d;
    DN(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_inference, alg, &in->md, &dst_md, strides, kernel, dil, pl, pr), "pooling desc");
    DN(make_attr(0, MT_ACT_NONE, &attr), "attributes");
    DN(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL), "pooling primitive desc");
    dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t dst = NULL;
    if (act_mem(c, &dst_md, -1, &dst)) goto done;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, in->mem}, {DNNL_ARG_DST, dst}};
    if (push_step(c, pd, i, "pool", args, 2)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Adaptive average pooling: the identity when sizes match (no step), an
 * average pool when the input divides evenly, nearest upsampling when the
 * output is a multiple of the input (every bin then covers one pixel). */
static int add_adaptive(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    mt_shape is = mt_network_layer(c->net, l->inputs[0])->out;
    int H = is.h, W = is.w, OH = l->out.h, OW = l->out.w;
    if (H == OH && W == OW) {
        c->out[i] = c->out[l->inputs[0]];
        c->out[i].layer = i;
        return 0;
    }
    if (H % OH == 0 && W % OW == 0) return add_pooling(c, i, dnnl_pooling_avg_exclude_padding, H / OH, W / OW, H / OH, W / OW, 0, 0);
    if (OH % H || OW % W) return fail(c, "layer '%s': adaptive average pooling %dx%d -> %dx%d is not supported", l->name, H, W, OH, OW);
    const view *in = &c->out[l->inputs[0]];
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_dims_t dst_dims = {l->out.n, l->out.c, OH, OW};
    dnnl_memory_desc_t dst_md;
    DN(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, c->plain ? dnnl_nchw : dnnl_format_tag_any), "dst desc");
    dnnl_resampling_desc_t d;
    DN(dnnl_resampling_forward_desc_init(&d, dnnl_forward_inference, dnnl_resampling_nearest, NULL, &in->md, &dst_md), "resampling desc");
    DN(make_attr(0, MT_ACT_NONE, &attr), "attributes");
    DN(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL), "resampling primitive desc");
    dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t dst = NULL;
    if (act_mem(c, &dst_md, -1, &dst)) goto done;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, in->mem}, {DNNL_ARG_DST, dst}};
    if (push_step(c, pd, i, "resample", args, 2)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int add_concat(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t srcs[MT_LAYER_MAX_INPUTS], dst_md;
    dnnl_exec_arg_t args[MT_LAYER_MAX_INPUTS + 1];
    for (int j = 0; j < l->ninputs; j++) {
        const view *v = &c->out[l->inputs[j]];
        if (!v->mem) return fail(c, "layer '%s': input is not materialised", l->name);
        srcs[j] = v->md;
        args[j] = (dnnl_exec_arg_t){DNNL_ARG_MULTIPLE_SRC + j, v->mem};
    }
    dnnl_dims_t dst_dims = {l->out.n, l->out.c, l->out.h, l->out.w};
    DN(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, c->plain ? dnnl_nchw : dnnl_format_tag_any), "dst desc");
    DN(make_attr(0, MT_ACT_NONE, &attr), "attributes");
    DN(dnnl_concat_primitive_desc_create(&pd, &dst_md, l->ninputs, 1, srcs, attr, c->eng), "concat primitive desc");
    dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t dst = NULL;
    if (act_mem(c, &dst_md, -1, &dst)) goto done;
    args[l->ninputs] = (dnnl_exec_arg_t){DNNL_ARG_DST, dst};
    if (push_step(c, pd, i, "concat", args, l->ninputs + 1)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int add_add(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    const view *a = &c->out[l->inputs[0]];
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (!a->mem) return fail(c, "layer '%s': input is not materialised", l->name);
    dnnl_memory_t b = NULL, dst = NULL;
    if (view_as(c, l->inputs[1], &a->md, i, &b)) return -1;
    dnnl_binary_desc_t d;
    DN(dnnl_binary_desc_init(&d, dnnl_binary_add, &a->md, &a->md, &a->md), "binary desc");
    DN(make_attr(0, l->act, &attr), "attributes");
    DN(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL), "binary primitive desc");
    if (act_mem(c, &a->md, -1, &dst)) goto done;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC_0, a->mem}, {DNNL_ARG_SRC_1, b}, {DNNL_ARG_DST, dst}};
    if (push_step(c, pd, i, "add", args, 3)) goto done;
    c->out[i] = (view){.layer = i, .md = a->md, .mem = dst};
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* The layer a flatten chain starts from (j itself when it is no flatten). */
static int unflatten(const net_ctx *c, int j) {
    while (mt_network_layer(c->net, j)->kind == MT_LAYER_FLATTEN) j = mt_network_layer(c->net, j)->inputs[0];
    return j;
}

/* A dense layer is an inner product on the tensor before any flatten (4-D,
 * in its own layout, with OIHW weights: torch.flatten's order), so the
 * flatten costs nothing. */
static int add_dense(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    int s = unflatten(c, l->inputs[0]);
    const view *in = &c->out[s];
    mt_shape ss = mt_network_layer(c->net, s)->out;
    int I = l->dense.in_features, O = l->dense.out_features, rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    float *zeros = NULL;
    if (!in->mem) return fail(c, "layer '%s': input is not materialised", l->name);
    int nd = in->md.ndims;
    dnnl_dims_t wdims = {O, ss.c, ss.h, ss.w}, bias_dims = {O}, dst_dims = {l->out.n, O};
    if (nd == 2) wdims[1] = I;
    else if (nd != 4 || (int64_t)ss.c * ss.h * ss.w != I) return fail(c, "layer '%s': unexpected input shape", l->name);
    dnnl_format_tag_t wtag = nd == 4 ? dnnl_oihw : dnnl_oi;
    dnnl_memory_desc_t src_md = in->md, wei_md, bias_md, dst_md;
    DN(dnnl_memory_desc_init_by_tag(&wei_md, nd, wdims, dnnl_f32, c->plain ? wtag : dnnl_format_tag_any), "weights desc");
    DN(dnnl_memory_desc_init_by_tag(&bias_md, 1, bias_dims, dnnl_f32, dnnl_x), "bias desc");
    DN(dnnl_memory_desc_init_by_tag(&dst_md, 2, dst_dims, dnnl_f32, c->plain ? dnnl_nc : dnnl_format_tag_any), "dst desc");
    DN(make_attr(0, l->act, &attr), "attributes");
    dnnl_inner_product_desc_t d;
    /* The input's own layout first; where no implementation takes it, let oneDNN choose (and reorder). */
    DN(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_inference, &src_md, &wei_md, &bias_md, &dst_md), "inner product desc");
    if (dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL) != dnnl_success) {
        pd = NULL;
        dnnl_memory_desc_t any_md;
        dnnl_dims_t sdims;
        memcpy(sdims, in->md.dims, sizeof sdims);
        DN(dnnl_memory_desc_init_by_tag(&any_md, nd, sdims, dnnl_f32, dnnl_format_tag_any), "src desc");
        DN(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_inference, &any_md, &wei_md, &bias_md, &dst_md), "inner product desc");
        DN(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL), "inner product primitive desc");
    }
    src_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    wei_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    char name[MT_WEIGHT_NAME_MAX + 16];
    int64_t have = 0;
    snprintf(name, sizeof name, "%s.weight", l->name);
    const float *wd = mt_weights_find(c->w, name, &have), *bd = NULL;
    if (!wd || have != (int64_t)I * O) {
        rc = fail(c, "layer '%s': weights tensor '%s' is missing or has the wrong size", l->name, name);
        goto done;
    }
    if (l->dense.bias) {
        snprintf(name, sizeof name, "%s.bias", l->name);
        bd = mt_weights_find(c->w, name, &have);
        if (!bd || have != O) {
            rc = fail(c, "layer '%s': weights tensor '%s' is missing or has the wrong size", l->name, name);
            goto done;
        }
    } else if (!(bd = zeros = calloc((size_t)O, sizeof(float)))) {
        rc = fail(c, "out of memory");
        goto done;
    }
    dnnl_memory_t src = NULL, wei = NULL, bias = NULL, dst = NULL;
    if (make_weights(c, l, &wei_md, nd, wdims, wtag, wd, &wei) || make_weights(c, l, &bias_md, 1, bias_dims, dnnl_x, bd, &bias)) goto done;
    if (view_as(c, s, &src_md, i, &src) || act_mem(c, &dst_md, -1, &dst)) goto done;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    if (push_step(c, pd, i, "dense", args, 4)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    free(zeros);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Flatten: nothing when only dense layers read it (they read the tensor
 * before it); else the input in plain NCHW (reordered if needed), viewed as
 * (n, c*h*w, 1, 1) on the same storage. */
static int add_flatten(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    int only_dense = 1, readers = 0;
    for (int j = i + 1; j < c->nl; j++) {
        const mt_layer *r = mt_network_layer(c->net, j);
        for (int k = 0; k < r->ninputs; k++)
            if (r->inputs[k] == i) {
                readers++;
                only_dense &= r->kind == MT_LAYER_DENSE;
            }
    }
    if (readers > 0 && only_dense) {
        c->out[i] = (view){.layer = i, .mem = NULL};
        return 0;
    }
    int s = unflatten(c, l->inputs[0]), rc = -1;
    const view *in = &c->out[s];
    if (!in->mem) return fail(c, "layer '%s': input is not materialised", l->name);
    dnnl_memory_desc_t plain_md, flat_md;
    dnnl_dims_t flat_dims = {l->out.n, l->out.c, 1, 1};
    DN(dnnl_memory_desc_init_by_tag(&plain_md, in->md.ndims, in->md.dims, dnnl_f32, in->md.ndims == 4 ? dnnl_nchw : dnnl_nc), "plain desc");
    DN(dnnl_memory_desc_init_by_tag(&flat_md, 4, flat_dims, dnnl_f32, dnnl_nchw), "flat desc");
    dnnl_memory_t p = NULL, flat = NULL;
    if (view_as(c, s, &plain_md, i, &p)) goto done;
    int pbuf = buf_of(c, p);
    if (pbuf < 0) {
        /* The user's input: a view on its storage. */
        void *h = NULL;
        DN(dnnl_memory_get_data_handle(p, &h), "input handle");
        DN(dnnl_memory_create(&flat, &flat_md, c->eng, h), "flat memory");
        if (track_mem(c, flat, BUF_OWN)) goto done;
    } else if (act_mem(c, &flat_md, pbuf, &flat)) {
        goto done;
    }
    c->out[i] = (view){.layer = i, .md = flat_md, .mem = flat};
    rc = 0;
done:
    return rc;
}

static int add_softmax(net_ctx *c, int i) {
    const mt_layer *l = mt_network_layer(c->net, i);
    const view *in = &c->out[l->inputs[0]];
    int rc = -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (!in->mem) return fail(c, "layer '%s': input is not materialised", l->name);
    dnnl_softmax_desc_t d;
    DN(dnnl_softmax_forward_desc_init(&d, dnnl_forward_inference, &in->md, 1), "softmax desc");
    DN(make_attr(0, MT_ACT_NONE, &attr), "attributes");
    DN(dnnl_primitive_desc_create(&pd, &d, attr, c->eng, NULL), "softmax primitive desc");
    dnnl_memory_desc_t dst_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    dnnl_memory_t dst = NULL;
    if (act_mem(c, &dst_md, -1, &dst)) goto done;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, in->mem}, {DNNL_ARG_DST, dst}};
    if (push_step(c, pd, i, "softmax", args, 2)) goto done;
    c->out[i] = (view){.layer = i, .md = dst_md, .mem = dst};
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return rc;
}

/* Gives every pooled buffer storage: a buffer lives from the first step
 * that touches it to the last (the output's to the end); in order of first
 * use, each takes the smallest free block that holds it, else grows the
 * largest free one, else a new block. Then attaches the storage to every
 * memory object. */
static int mem_plan(net_ctx *c, dnnl_memory_t output) {
    for (int s = 0; s < c->nsteps; s++)
        for (int a = 0; a < c->steps[s].nargs; a++) {
            int b = buf_of(c, c->steps[s].args[a].memory);
            if (b < 0) continue;
            if (c->bufs[b].first < 0) c->bufs[b].first = s;
            c->bufs[b].last = s;
        }
    int ob = buf_of(c, output);
    if (ob >= 0) {
        if (c->bufs[ob].first < 0) c->bufs[ob].first = c->nsteps;
        c->bufs[ob].last = c->nsteps;
    }
    int *order = malloc(sizeof(int) * (size_t)(c->nbufs + 1)), *owner = malloc(sizeof(int) * (size_t)(c->nbufs + 1));
    c->blocks = calloc((size_t)c->nbufs + 1, sizeof *c->blocks);
    c->block_bytes = calloc((size_t)c->nbufs + 1, sizeof *c->block_bytes);
    if (!order || !owner || !c->blocks || !c->block_bytes) {
        free(order);
        free(owner);
        return fail(c, "out of memory");
    }
    int n = 0;
    for (int b = 0; b < c->nbufs; b++)
        if (c->bufs[b].first >= 0) order[n++] = b;
    for (int i = 1; i < n; i++) /* by first use, stable */
        for (int j = i; j > 0 && c->bufs[order[j]].first < c->bufs[order[j - 1]].first; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int k = 0; k <= c->nbufs; k++) owner[k] = -1; /* block -> the buffer in it, -1: free */
    for (int i = 0; i < n; i++) {
        act_buf *b = &c->bufs[order[i]];
        for (int k = 0; k < c->nblocks; k++)
            if (owner[k] >= 0 && c->bufs[owner[k]].last < b->first) owner[k] = -1;
        int best = -1, largest = -1;
        for (int k = 0; k < c->nblocks; k++) {
            if (owner[k] >= 0) continue;
            if (c->block_bytes[k] >= b->bytes && (best < 0 || c->block_bytes[k] < c->block_bytes[best])) best = k;
            if (largest < 0 || c->block_bytes[k] > c->block_bytes[largest]) largest = k;
        }
        if (best < 0) best = largest >= 0 ? largest : c->nblocks++;
        if (c->block_bytes[best] < b->bytes) c->block_bytes[best] = b->bytes;
        owner[best] = order[i];
        b->block = best;
    }
    free(order);
    free(owner);
    for (int k = 0; k < c->nblocks; k++) {
        size_t bytes = (c->block_bytes[k] + ALIGN - 1) / ALIGN * ALIGN;
        if (!(c->blocks[k] = aligned_alloc(ALIGN, bytes ? bytes : ALIGN))) return fail(c, "out of memory for activations");
        memset(c->blocks[k], 0, bytes);
        c->act_bytes += (int64_t)bytes;
    }
    if (c->scratch_bytes) {
        size_t bytes = (c->scratch_bytes + ALIGN - 1) / ALIGN * ALIGN;
        if (!(c->scratch = aligned_alloc(ALIGN, bytes))) return fail(c, "out of memory for the scratchpad");
    }
    for (int i = 0; i < c->nmems; i++) {
        void *h = NULL;
        if (c->mems[i].buf == BUF_SCRATCH) h = c->scratch;
        else if (c->mems[i].buf >= 0 && c->bufs[c->mems[i].buf].block >= 0) h = c->blocks[c->bufs[c->mems[i].buf].block];
        else continue;
        if (dnnl_memory_set_data_handle(c->mems[i].mem, h) != dnnl_success) return fail(c, "cannot attach storage to a memory object");
    }
    return 0;
}

/* Builds every primitive of the network, then plans and attaches the activation storage. */
static int build(net_ctx *c) {
    c->nl = mt_network_num_layers(c->net);
    c->last = calloc((size_t)c->nl, sizeof *c->last);
    c->out = calloc((size_t)c->nl, sizeof *c->out);
    if (!c->last || !c->out) return fail(c, "out of memory");
    for (int i = 0; i < c->nl; i++) {
        const mt_layer *l = mt_network_layer(c->net, i);
        for (int k = 0; k < l->ninputs; k++)
            if (c->last[l->inputs[k]] < i) c->last[l->inputs[k]] = i;
    }
    for (int i = c->nl - 1; i > 0; i--) { /* readers of a flatten or an identity pool read its input too */
        const mt_layer *l = mt_network_layer(c->net, i);
        mt_shape is = l->ninputs > 0 ? mt_network_layer(c->net, l->inputs[0])->out : l->out;
        int alias = l->kind == MT_LAYER_FLATTEN || (l->kind == MT_LAYER_ADAPTIVE_AVGPOOL && is.h == l->out.h && is.w == l->out.w);
        if (alias && c->last[l->inputs[0]] < c->last[i]) c->last[l->inputs[0]] = c->last[i];
    }
    for (int i = 0; i < c->nl; i++) {
        const mt_layer *l = mt_network_layer(c->net, i);
        int rc;
        switch (l->kind) {
        case MT_LAYER_INPUT: {
            if (i != 0) return fail(c, "layer '%s': a second input layer", l->name);
            dnnl_dims_t d = {l->out.n, l->out.c, l->out.h, l->out.w};
            dnnl_memory_t mem = NULL;
            if (dnnl_memory_desc_init_by_tag(&c->out[0].md, 4, d, dnnl_f32, dnnl_nchw) != dnnl_success ||
                dnnl_memory_create(&mem, &c->out[0].md, c->eng, c->input) != dnnl_success || track_mem(c, mem, BUF_OWN))
                return fail(c, "cannot create the input memory");
            c->out[0].mem = mem;
            rc = 0;
            break;
        }
        case MT_LAYER_CONV2D:
            rc = add_conv(c, i);
            break;
        case MT_LAYER_MAXPOOL:
            rc = add_pooling(c, i, dnnl_pooling_max, l->pool.kernel_h, l->pool.kernel_w, l->pool.stride_h, l->pool.stride_w, l->pool.pad_h,
                             l->pool.pad_w);
            break;
        case MT_LAYER_AVGPOOL:
            rc = add_pooling(c, i, l->pool.count_include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding, l->pool.kernel_h,
                             l->pool.kernel_w, l->pool.stride_h, l->pool.stride_w, l->pool.pad_h, l->pool.pad_w);
            break;
        case MT_LAYER_GLOBAL_AVGPOOL: {
            mt_shape is = mt_network_layer(c->net, l->inputs[0])->out;
            rc = add_pooling(c, i, dnnl_pooling_avg_exclude_padding, is.h, is.w, 1, 1, 0, 0);
            break;
        }
        case MT_LAYER_ADAPTIVE_AVGPOOL:
            rc = add_adaptive(c, i);
            break;
        case MT_LAYER_CONCAT:
            rc = add_concat(c, i);
            break;
        case MT_LAYER_ADD:
            rc = add_add(c, i);
            break;
        case MT_LAYER_DENSE:
            rc = add_dense(c, i);
            break;
        case MT_LAYER_FLATTEN:
            rc = add_flatten(c, i);
            break;
        case MT_LAYER_SOFTMAX:
            rc = add_softmax(c, i);
            break;
        default:
            return fail(c, "layer '%s': kind %s is not supported", l->name, mt_layer_kind_name(l->kind));
        }
        if (rc) return rc;
    }
    if (!c->out[c->nl - 1].mem) return fail(c, "the last layer is not materialised");
    return mem_plan(c, c->out[c->nl - 1].mem);
}

/* One forward pass: every step in order, one wait at the end. */
static int run_pass(net_ctx *c) {
    for (int s = 0; s < c->nsteps; s++) {
        dnnl_status_t st = dnnl_primitive_execute(c->steps[s].prim, c->stream, c->steps[s].nargs, c->steps[s].args);
        if (st != dnnl_success)
            return fail(c, "layer '%s': %s: execute: oneDNN status %s", mt_network_layer(c->net, c->steps[s].layer)->name, c->steps[s].kind,
                        dnnl_status2str(st));
    }
    dnnl_status_t st = dnnl_stream_wait(c->stream);
    return st == dnnl_success ? 0 : fail(c, "stream wait: oneDNN status %s", dnnl_status2str(st));
}

/* --profile: `repeat` more passes with each step timed on its own (execute,
 * then wait: oneDNN's CPU primitives run in the calling thread, so the wait
 * adds little), and per layer the sum over its steps of each step's median
 * into layer_ms (reorders count for the layer whose step they are). */
static int profile_passes(net_ctx *c, long long repeat, double *layer_ms) {
    double *t = malloc(sizeof(double) * (size_t)c->nsteps * (size_t)repeat);
    if (!t) return fail(c, "out of memory");
    for (long long r = 0; r < repeat; r++)
        for (int s = 0; s < c->nsteps; s++) {
            const double a = now_ms();
            dnnl_status_t st = dnnl_primitive_execute(c->steps[s].prim, c->stream, c->steps[s].nargs, c->steps[s].args);
            if (st == dnnl_success) st = dnnl_stream_wait(c->stream);
            if (st != dnnl_success) {
                free(t);
                return fail(c, "layer '%s': %s: execute: oneDNN status %s", mt_network_layer(c->net, c->steps[s].layer)->name, c->steps[s].kind,
                            dnnl_status2str(st));
            }
            t[(size_t)s * (size_t)repeat + (size_t)r] = now_ms() - a;
        }
    for (int i = 0; i < c->nl; i++) layer_ms[i] = 0;
    for (int s = 0; s < c->nsteps; s++) {
        double *ts = t + (size_t)s * (size_t)repeat;
        qsort(ts, (size_t)repeat, sizeof *ts, cmp_double);
        layer_ms[c->steps[s].layer] += repeat % 2 ? ts[repeat / 2] : 0.5 * (ts[repeat / 2 - 1] + ts[repeat / 2]);
    }
    free(t);
    return 0;
}

/* The last layer's output in plain layout (NCHW / NC: the network's order) into host. */
static int read_output(net_ctx *c, float *host, int64_t count) {
    const view *v = &c->out[c->nl - 1];
    int rc = -1;
    dnnl_memory_desc_t md;
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    if (dnnl_memory_desc_init_by_tag(&md, v->md.ndims, v->md.dims, dnnl_f32, v->md.ndims == 4 ? dnnl_nchw : dnnl_nc) != dnnl_success ||
        (int64_t)(dnnl_memory_desc_get_size(&md) / sizeof(float)) != count)
        return fail(c, "the output does not have %lld elements", (long long)count);
    if (dnnl_memory_create(&user, &md, c->eng, host) != dnnl_success ||
        dnnl_reorder_primitive_desc_create(&pd, &v->md, c->eng, &md, c->eng, NULL) != dnnl_success || dnnl_primitive_create(&prim, pd) != dnnl_success) {
        fail(c, "cannot reorder the output");
        goto done;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, v->mem}, {DNNL_ARG_TO, user}};
    if (dnnl_primitive_execute(prim, c->stream, 2, args) != dnnl_success || dnnl_stream_wait(c->stream) != dnnl_success) {
        fail(c, "cannot reorder the output");
        goto done;
    }
    rc = 0;
done:
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (user) dnnl_memory_destroy(user);
    return rc;
}

static void ctx_free(net_ctx *c) {
    for (int s = 0; s < c->nsteps; s++) dnnl_primitive_destroy(c->steps[s].prim);
    for (int i = 0; i < c->nmems; i++) dnnl_memory_destroy(c->mems[i].mem);
    for (int k = 0; k < c->nblocks; k++) free(c->blocks[k]);
    free(c->blocks);
    free(c->block_bytes);
    free(c->scratch);
    free(c->steps);
    free(c->mems);
    free(c->bufs);
    free(c->copies);
    free(c->out);
    free(c->last);
}

/* Counts of implementation names over the conv steps, as a JSON object. */
static void print_conv_impls(const net_ctx *c) {
    printf("{");
    int first = 1;
    for (int s = 0; s < c->nsteps; s++) {
        if (strcmp(c->steps[s].kind, "conv") != 0) continue;
        int seen = 0, n = 0;
        for (int t = 0; t < s && !seen; t++) seen = !strcmp(c->steps[t].kind, "conv") && !strcmp(c->steps[t].impl, c->steps[s].impl);
        if (seen) continue;
        for (int t = s; t < c->nsteps; t++) n += !strcmp(c->steps[t].kind, "conv") && !strcmp(c->steps[t].impl, c->steps[s].impl);
        printf("%s", first ? "" : ", ");
        json_str(stdout, c->steps[s].impl);
        printf(": %d", n);
        first = 0;
    }
    printf("}");
}

/* Layers that have steps, as JSON: ", \"layers\": [{\"name\", \"kind\", \"workload\" (convolutions), \"ms\"}], \"profile_ms\"". */
static void print_profile_json(const net_ctx *c, const double *layer_ms) {
    double sum = 0;
    int first = 1;
    printf(", \"layers\": [");
    for (int i = 0; i < c->nl; i++) {
        int has = 0;
        for (int s = 0; s < c->nsteps && !has; s++) has = c->steps[s].layer == i;
        if (!has) continue;
        const mt_layer *l = mt_network_layer(c->net, i);
        printf("%s{\"name\": ", first ? "" : ", ");
        json_str(stdout, l->name);
        printf(", \"kind\": \"%s\"", mt_layer_kind_name(l->kind));
        if (l->kind == MT_LAYER_CONV2D) {
            char wtext[256];
            mt_workload_format(&l->conv.wl, wtext, sizeof wtext);
            printf(", \"workload\": ");
            json_str(stdout, wtext);
        }
        printf(", \"ms\": %.6g}", layer_ms[i]);
        sum += layer_ms[i];
        first = 0;
    }
    printf("], \"profile_ms\": %.6g", sum);
}

static void print_profile_text(const net_ctx *c, const double *layer_ms) {
    double sum = 0;
    printf("%-28s %-10s %10s\n", "layer", "kind", "ms");
    for (int i = 0; i < c->nl; i++) {
        int has = 0;
        for (int s = 0; s < c->nsteps && !has; s++) has = c->steps[s].layer == i;
        if (!has) continue;
        const mt_layer *l = mt_network_layer(c->net, i);
        printf("%-28s %-10s %10.4f\n", l->name, mt_layer_kind_name(l->kind), layer_ms[i]);
        sum += layer_ms[i];
    }
    printf("profile: %.3f ms, the layers' medians summed\n", sum);
}

static void usage(FILE *f, const char *argv0) {
    int count = 0;
    const char *const *names = mt_network_names(&count);
    fprintf(f,
            "usage: %s NETWORK [--layout any|nchw] [--batch N] [--image-size S] [--repeat N] [--warmup N]\n"
            "       [--seed S] [--check [--tolerance T]] [--verbose] [--profile] [--json]\n"
            "\n"
            "Runs a whole zoo network forward with oneDNN on the CPU (fp32 inference), with the\n"
            "weights of `mtgpu run` (seeded random He weights, batch norm folded into the\n"
            "convolutions), and prints the median wall latency of N passes after the warm-up.\n"
            "\n"
            "NETWORK is one of:",
            argv0);
    for (int i = 0; i < count; i++) fprintf(f, " %s", names[i]);
    fprintf(f,
            "\n\n"
            "  --layout L      any (default): oneDNN's blocked layouts, post-ops, reorders only where\n"
            "                  layouts change; nchw: plain NCHW activations, OIHW weights everywhere\n"
            "  --batch N       images per pass (default 1)\n"
            "  --image-size S  input height and width (default 224)\n"
            "  --repeat N      timed passes (default %d)\n"
            "  --warmup N      untimed passes first (default %d)\n"
            "  --seed S        seed of the weights and input (default %d, as mtgpu run)\n"
            "  --check         instead of timing: one pass compared with mt_network_reference (use a\n"
            "                  small --image-size, e.g. 32); fails above the tolerance\n"
            "  --tolerance T   max normalised error of --check (default %g)\n"
            "  --verbose       list every primitive: layer, kind, implementation, output layout\n"
            "  --profile       then N more passes with every primitive timed alone (executed and\n"
            "                  waited for): each layer's median time, its steps summed (a reorder\n"
            "                  counts for the layer that needs it)\n"
            "  --json          one JSON object with the results\n"
            "\n"
            "Threads: OMP_NUM_THREADS and OMP_WAIT_POLICY as in the environment (passive helps on a busy machine).\n"
            "Exit status: 0 success, 1 failure, 2 bad usage.\n",
            DEFAULT_REPEAT, DEFAULT_WARMUP, DEFAULT_SEED, DEFAULT_TOLERANCE);
}

/* A whole decimal number in [lo, hi], or -1. */
static long long parse_int(const char *s, long long lo, long long hi) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    return (end == s || *end || v < lo || v > hi) ? -1 : v;
}

int main(int argc, char **argv) {
    const char *netname = NULL, *layout = "any";
    long long batch = 1, size = 0, repeat = DEFAULT_REPEAT, warmup = DEFAULT_WARMUP, seed = DEFAULT_SEED;
    double tol = DEFAULT_TOLERANCE;
    int json = 0, check = 0, verbose = 0, profile = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long *iv = NULL, lo = 1, hi = 100000;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, argv[0]);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--check")) check = 1;
        else if (!strcmp(a, "--verbose")) verbose = 1;
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--layout") || !strcmp(a, "--tolerance") || !strcmp(a, "--batch") || !strcmp(a, "--image-size") ||
                 !strcmp(a, "--repeat") || !strcmp(a, "--warmup") || !strcmp(a, "--seed")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "onednn_net: %s needs a value (see --help)\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--layout")) {
                if (strcmp(v, "any") != 0 && strcmp(v, "nchw") != 0) {
                    fprintf(stderr, "onednn_net: --layout must be any or nchw, not '%s'\n", v);
                    return 2;
                }
                layout = v;
                continue;
            }
            if (!strcmp(a, "--tolerance")) {
                char *end = NULL;
                tol = strtod(v, &end);
                if (end == v || *end || !(tol > 0)) {
                    fprintf(stderr, "onednn_net: --tolerance must be a positive number, not '%s'\n", v);
                    return 2;
                }
                continue;
            }
            if (!strcmp(a, "--batch")) iv = &batch, hi = 4096;
            else if (!strcmp(a, "--image-size")) iv = &size, hi = 8192;
            else if (!strcmp(a, "--repeat")) iv = &repeat;
            else if (!strcmp(a, "--warmup")) iv = &warmup, lo = 0;
            else iv = &seed, lo = 0, hi = (long long)1 << 62;
            if ((*iv = parse_int(v, lo, hi)) < 0) {
                fprintf(stderr, "onednn_net: %s must be a whole number in %lld..%lld, not '%s'\n", a, lo, hi, v);
                return 2;
            }
        } else if (a[0] != '-' && !netname) netname = a;
        else {
            fprintf(stderr, "onednn_net: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!netname) {
        fprintf(stderr, "onednn_net: expected one NETWORK argument (see --help)\n");
        return 2;
    }

    char err[4096];
    mt_network *net = NULL;
    mt_status st = mt_network_create(netname, (int)batch, (int)size, &net, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "onednn_net: %s\n", err);
        return st == MT_NOT_FOUND || st == MT_RANGE ? 2 : 1;
    }
    int rc = 1;
    mt_weights *w = NULL;
    float *host_out = NULL, *ref = NULL;
    double *t = NULL, *layer_ms = NULL;
    net_ctx c = {.net = net, .plain = !strcmp(layout, "nchw"), .err = err, .errlen = sizeof err};
    mt_shape is = mt_network_layer(net, 0)->out, os = mt_network_layer(net, mt_network_num_layers(net) - 1)->out;
    int64_t in_count = (int64_t)is.n * is.c * is.h * is.w, out_count = (int64_t)os.n * os.c * os.h * os.w;
    if (mt_weights_random(net, (uint64_t)seed, &w, err, sizeof err) != MT_OK) {
        fprintf(stderr, "onednn_net: %s\n", err);
        goto out;
    }
    c.w = w;
    if (!(c.input = malloc(sizeof(float) * (size_t)in_count)) || !(t = malloc(sizeof(double) * (size_t)repeat))) {
        fprintf(stderr, "onednn_net: out of memory\n");
        goto out;
    }
    mt_fill_random(c.input, in_count, (uint64_t)seed);
    if (dnnl_engine_create(&c.eng, dnnl_cpu, 0) != dnnl_success || dnnl_stream_create(&c.stream, c.eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "onednn_net: cannot create a oneDNN CPU engine and stream\n");
        goto out;
    }
    const dnnl_version_t *ver = dnnl_version();
    char version[64];
    snprintf(version, sizeof version, "%d.%d.%d", ver->major, ver->minor, ver->patch);
    const char *omp = getenv("OMP_NUM_THREADS"), *wait = getenv("OMP_WAIT_POLICY"), *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());

    double b0 = now_ms();
    if (build(&c)) {
        fprintf(stderr, "onednn_net: %s: %s\n", netname, err);
        goto out;
    }
    double build_s = (now_ms() - b0) / 1e3;
    int nconv = 0;
    for (int s = 0; s < c.nsteps; s++) nconv += !strcmp(c.steps[s].kind, "conv");
    if (verbose) {
        FILE *f = json ? stderr : stdout;
        fprintf(f, "%-4s %-28s %-8s %-10s %s\n", "step", "layer", "kind", "dst", "implementation");
        for (int s = 0; s < c.nsteps; s++)
            fprintf(f, "%-4d %-28s %-8s %-10s %s\n", s, mt_network_layer(net, c.steps[s].layer)->name, c.steps[s].kind, c.steps[s].dst_fmt,
                    c.steps[s].impl);
    }
    if (!json)
        printf("%s: batch %lld, %dx%d, oneDNN %s (%s), layout %s, %d primitives (%d convolutions, %d reorders per pass), built in %.2f s, "
               "OMP_NUM_THREADS=%s, OMP_WAIT_POLICY=%s\n",
               netname, batch, is.h, is.w, version, isa, layout, c.nsteps, nconv, c.reorders, build_s, omp ? omp : "(unset)",
               wait ? wait : "(unset)");

    if (check) {
        if (!(host_out = malloc(sizeof(float) * (size_t)out_count)) || !(ref = malloc(sizeof(float) * (size_t)out_count))) {
            fprintf(stderr, "onednn_net: out of memory\n");
            goto out;
        }
        if (run_pass(&c) || read_output(&c, host_out, out_count)) {
            fprintf(stderr, "onednn_net: %s: %s\n", netname, err);
            goto out;
        }
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if ((st = mt_network_reference(net, w, c.input, ref, ncpu > 0 ? (int)ncpu : 1, err, sizeof err)) != MT_OK) {
            fprintf(stderr, "onednn_net: reference: %s\n", err);
            goto out;
        }
        double max_err = INFINITY;
        int64_t bad = -1;
        mt_status cs = mt_compare(host_out, ref, out_count, &max_err, &bad);
        int passed = cs == MT_OK && max_err <= tol;
        if (json) {
            printf("{\"network\": ");
            json_str(stdout, netname);
            printf(", \"library\": \"oneDNN\", \"version\": \"%s\", \"isa\": \"%s\", \"layout\": \"%s\", \"batch\": %lld, \"image_size\": %d, "
                   "\"seed\": %lld, \"check\": true, \"max_rel_err\": %.3g, \"tolerance\": %g, \"passed\": %s}\n",
                   version, isa, layout, batch, is.h, seed, isfinite(max_err) ? max_err : -1.0, tol, passed ? "true" : "false");
        } else if (cs != MT_OK) {
            printf("check: the output has a NaN or infinity at element %lld\n", (long long)bad);
        } else {
            printf("check against mt_network_reference: max relative error %.3g (tolerance %g, worst element %lld): %s\n", max_err, tol,
                   (long long)bad, passed ? "ok" : "FAILED");
        }
        rc = passed ? 0 : 1;
        goto out;
    }

    for (long long i = 0; i < warmup; i++)
        if (run_pass(&c)) {
            fprintf(stderr, "onednn_net: %s: %s\n", netname, err);
            goto out;
        }
    for (long long r = 0; r < repeat; r++) {
        double a = now_ms();
        if (run_pass(&c)) {
            fprintf(stderr, "onednn_net: %s: %s\n", netname, err);
            goto out;
        }
        t[r] = now_ms() - a;
    }
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    double med = repeat % 2 ? t[repeat / 2] : 0.5 * (t[repeat / 2 - 1] + t[repeat / 2]);
    if (profile) {
        if (!(layer_ms = malloc(sizeof(double) * (size_t)c.nl))) {
            fprintf(stderr, "onednn_net: out of memory\n");
            goto out;
        }
        if (profile_passes(&c, repeat, layer_ms)) {
            fprintf(stderr, "onednn_net: %s: %s\n", netname, err);
            goto out;
        }
    }
    double gflops = mt_network_conv_flops(net) / (med * 1e6);
    if (json) {
        printf("{\"network\": ");
        json_str(stdout, netname);
        printf(", \"library\": \"oneDNN\", \"version\": \"%s\", \"isa\": \"%s\", \"layout\": \"%s\", \"batch\": %lld, \"image_size\": %d, "
               "\"seed\": %lld, \"omp_num_threads\": ",
               version, isa, layout, batch, is.h, seed);
        if (omp) json_str(stdout, omp);
        else printf("null");
        printf(", \"omp_wait_policy\": ");
        if (wait) json_str(stdout, wait);
        else printf("null");
        printf(", \"repeat\": %lld, \"warmup\": %lld, \"median_ms\": %.6g, \"min_ms\": %.6g, \"max_ms\": %.6g, \"gflops\": %.4g, \"build_s\": %.3f"
               ", \"primitives\": %d, \"convs\": %d, \"reorders_per_pass\": %d, \"weight_bytes\": %lld, \"activation_bytes\": %lld"
               ", \"activation_buffers\": %d, \"scratchpad_bytes\": %lld, \"conv_impls\": ",
               repeat, warmup, med, t[0], t[repeat - 1], gflops, build_s, c.nsteps, nconv, c.reorders, (long long)c.weight_bytes, (long long)c.act_bytes,
               c.nblocks, (long long)c.scratch_bytes);
        print_conv_impls(&c);
        if (layer_ms) print_profile_json(&c, layer_ms);
        printf("}\n");
    } else {
        printf("latency: median %.3f ms, min %.3f ms, max %.3f ms over %lld passes after %lld warm-up (%.1f GFLOP/s)\n", med, t[0], t[repeat - 1],
               repeat, warmup, gflops);
        printf("memory: weights %.1f MiB + activations %.1f MiB in %d buffers + scratchpad %.3f MiB\n", (double)c.weight_bytes / 1048576.0,
               (double)c.act_bytes / 1048576.0, c.nblocks, (double)c.scratch_bytes / 1048576.0);
        if (layer_ms) print_profile_text(&c, layer_ms);
    }
    rc = 0;
out:
    ctx_free(&c);
    if (c.stream) dnnl_stream_destroy(c.stream);
    if (c.eng) dnnl_engine_destroy(c.eng);
    free(c.input);
    free(t);
    free(layer_ms);
    free(host_out);
    free(ref);
    mt_weights_free(w);
    mt_network_free(net);
    return rc;
}
