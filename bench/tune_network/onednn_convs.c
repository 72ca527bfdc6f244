/* bench/onednn_convs: the vendor reference on the CPU. Times every unique
 * convolution of a zoo network with oneDNN (fp32, forward inference, no bias,
 * batch 1 unless --batch-size): median of N timed calls after warm-up, on every core oneDNN's
 * OpenMP runtime gives it (OMP_NUM_THREADS unset: all of them).
 *
 *   bench_onednn_convs NETWORK [--repeats N] [--layout any|nchw] [--batch-size N] [--json]
 *
 * --layout any lets oneDNN pick its blocked layouts for src, weights and dst
 * (the reference table's "dnnl any" column: the time of the convolution alone,
 * without reorders); nchw forces plain NCHW / OIHW (GOIHW when grouped) /
 * NCHW, the layouts mtgpu's kernels use ("dnnl nchw").
 *
 * Prints one line per task and the network total (sum of median x count).
 * With --json, prints JSON lines instead: one {"type": "task", ...} per task,
 * its "workload" (the layer's) in mt_workload_format's canonical form and
 * its "kernel_workload" (the task of `mtgpu tune --json` that runs it:
 * mt_layer_kernel_workload), then one {"type": "summary", ...}.
 *
 * Built only when oneDNN (dnnl.h, libdnnl) is found; bench/common/setup.sh installs it. */
#include <dnnl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mtgpu/net.h"
#include "mtgpu/workload.h"

#include "bench_util.h"

/* Warm-up: at least this many untimed calls, and until this much time has passed. */
#define WARMUP_CALLS 3
#define WARMUP_MS 50.0
#define MAX_WARMUP_CALLS 200


typedef struct {
    double median_ms, min_ms, max_ms;
    char impl[128]; /* oneDNN's implementation name, e.g. "jit:avx2" */
} conv_timing;

#define DNNL_TRY(call, what)                                                                                   \
    do {                                                                                                       \
        dnnl_status_t s_ = (call);                                                                             \
        if (s_ != dnnl_success) {                                                                              \
            snprintf(err, errlen, "%s: oneDNN status %d", what, (int)s_);                                      \
            goto done;                                                                                         \
        }                                                                                                      \
    } while (0)

/* Fills a memory object with values in [-1, 1) from a fixed seed (no denormals,
 * no NaNs: the layout does not matter for timing, only the values' range). */
static int fill_memory(dnnl_memory_t mem, uint64_t seed) {
    const dnnl_memory_desc_t *md = NULL;
    void *ptr = NULL;
    if (dnnl_memory_get_memory_desc(mem, &md) != dnnl_success || dnnl_memory_get_data_handle(mem, &ptr) != dnnl_success || !ptr) return -1;
    size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
    float *f = ptr;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f[i] = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return 0;
}

/* Times one convolution: builds the primitive (any or plain layouts), runs
 * warm-up calls, then `repeats` timed calls (each execute + stream wait). */
static int time_conv(dnnl_engine_t eng, dnnl_stream_t stream, const mt_workload *wl, int plain, int repeats, conv_timing *out, char *err,
                     size_t errlen) {
    int rc = -1;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, wei = NULL, dst = NULL;
    double *t = calloc((size_t)repeats, sizeof *t);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int g = wl->groups > 0 ? wl->groups : 1;
    dnnl_dims_t src_dims = {wl->n, wl->c, wl->h, wl->w};
    dnnl_dims_t dst_dims = {wl->n, wl->k, mt_workload_out_h(wl), mt_workload_out_w(wl)};
    dnnl_dims_t wei_dims;
    int wei_ndims;
    if (g > 1) {
        wei_ndims = 5;
        wei_dims[0] = g;
        wei_dims[1] = wl->k / g;
        wei_dims[2] = wl->c / g;
        wei_dims[3] = wl->r;
        wei_dims[4] = wl->s;
    } else {
        wei_ndims = 4;
        wei_dims[0] = wl->k;
        wei_dims[1] = wl->c;
        wei_dims[2] = wl->r;
        wei_dims[3] = wl->s;
    }
    dnnl_dims_t strides = {wl->stride_h, wl->stride_w};
    dnnl_dims_t dilates = {wl->dil_h - 1, wl->dil_w - 1}; /* oneDNN counts dilation from 0 */
    dnnl_dims_t pad = {wl->pad_h, wl->pad_w};
    dnnl_memory_desc_t src_md, wei_md, dst_md;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any), "src desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&wei_md, wei_ndims, wei_dims, dnnl_f32,
                                          plain ? (g > 1 ? dnnl_goihw : dnnl_oihw) : dnnl_format_tag_any),
             "weights desc");
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, plain ? dnnl_nchw : dnnl_format_tag_any), "dst desc");
    dnnl_convolution_desc_t cd;
    /* auto: oneDNN picks direct or Winograd (on AVX2 CPUs it has only direct for fp32). */
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_auto, &src_md, &wei_md, NULL, &dst_md,
                                                        strides, dilates, pad, pad),
             "convolution desc");
    DNNL_TRY(dnnl_primitive_desc_create(&pd, &cd, NULL, eng, NULL), "primitive desc");
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(out->impl, sizeof out->impl, "%s", impl);
    else
        snprintf(out->impl, sizeof out->impl, "?");
    DNNL_TRY(dnnl_memory_create(&src, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), eng, DNNL_MEMORY_ALLOCATE), "src memory");
    DNNL_TRY(dnnl_memory_create(&wei, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), eng, DNNL_MEMORY_ALLOCATE), "weights memory");
    DNNL_TRY(dnnl_memory_create(&dst, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), eng, DNNL_MEMORY_ALLOCATE), "dst memory");
    if (fill_memory(src, 1) || fill_memory(wei, 2) || fill_memory(dst, 3)) {
        snprintf(err, errlen, "cannot fill the buffers");
        goto done;
    }
    DNNL_TRY(dnnl_primitive_create(&prim, pd), "primitive");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    double w0 = now_ms();
    for (int i = 0; i < MAX_WARMUP_CALLS && (i < WARMUP_CALLS || now_ms() - w0 < WARMUP_MS); i++) {
        DNNL_TRY(dnnl_primitive_execute(prim, stream, 3, args), "execute");
        DNNL_TRY(dnnl_stream_wait(stream), "stream wait");
    }
    for (int i = 0; i < repeats; i++) {
        double a = now_ms();
        DNNL_TRY(dnnl_primitive_execute(prim, stream, 3, args), "execute");
        DNNL_TRY(dnnl_stream_wait(stream), "stream wait");
        t[i] = now_ms() - a;
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp_double);
    out->median_ms = repeats % 2 ? t[repeats / 2] : 0.5 * (t[repeats / 2 - 1] + t[repeats / 2]);
    out->min_ms = t[0];
    out->max_ms = t[repeats - 1];
    rc = 0;
done:
    free(t);
    if (prim) dnnl_primitive_destroy(prim);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (src) dnnl_memory_destroy(src);
    if (wei) dnnl_memory_destroy(wei);
    if (dst) dnnl_memory_destroy(dst);
    return rc;
}

/* The network's unique convolutions as its layers define them: mtgpu's
 * tasks are what its kernels run (a strided 1x1 layer as the stride-1
 * convolution of its subsampled input), oneDNN runs the layer itself. */
static mt_status layer_convs(const mt_network *net, mt_task **out, int *nout) {
    const int nl = mt_network_num_layers(net);
    mt_task *t = calloc((size_t)(nl > 0 ? nl : 1), sizeof *t);
    if (!t) return MT_NOMEM;
    int n = 0;
    for (int i = 0; i < nl; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        int j = 0;
        while (j < n && memcmp(&t[j].wl, &l->conv.wl, sizeof l->conv.wl) != 0) j++;
        if (j == n) t[n++] = (mt_task){.wl = l->conv.wl, .flops = mt_workload_flops(&l->conv.wl), .first_layer = i};
        t[j].count++;
    }
    *out = t;
    *nout = n;
    return MT_OK;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s NETWORK [--repeats N] [--layout any|nchw] [--batch-size N] [--json]\n"
            "Times every unique convolution of NETWORK with oneDNN (fp32, forward inference, no bias):\n"
            "median of N timed calls (default 15) after warm-up; OMP_NUM_THREADS as in the environment.\n",
            argv0);
}

int main(int argc, char **argv) {
    const char *netname = NULL, *layout = "any";
    int repeats = 15, json = 0, batch = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc) layout = argv[++i];
        else if (!strcmp(argv[i], "--batch-size") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(argv[0]);
            return 0;
        } else if (argv[i][0] != '-' && !netname) netname = argv[i];
        else {
            usage(argv[0]);
            return 2;
        }
    }
    if (!netname || repeats < 1 || batch < 1 || (strcmp(layout, "any") != 0 && strcmp(layout, "nchw") != 0)) {
        usage(argv[0]);
        return 2;
    }
    int plain = !strcmp(layout, "nchw");
    char err[2048];
    mt_network *net = NULL;
    if (mt_network_create(netname, batch, 0, &net, err, sizeof err) != MT_OK) {
        fprintf(stderr, "onednn_convs: %s\n", err);
        return 2;
    }
    mt_task *tasks = NULL;
    int ntasks = 0;
    mt_status st = layer_convs(net, &tasks, &ntasks);
    if (st != MT_OK || ntasks == 0) {
        fprintf(stderr, "onednn_convs: %s has no convolutions (%s)\n", netname, mt_status_str(st));
        mt_network_free(net);
        return 1;
    }

    dnnl_engine_t eng = NULL;
    dnnl_stream_t stream = NULL;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success || dnnl_stream_create(&stream, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "onednn_convs: cannot create a oneDNN CPU engine and stream\n");
        free(tasks);
        mt_network_free(net);
        return 1;
    }
    const dnnl_version_t *ver = dnnl_version();
    char version[64];
    snprintf(version, sizeof version, "%d.%d.%d", ver->major, ver->minor, ver->patch);
    const char *omp = getenv("OMP_NUM_THREADS");

    if (!json) {
        printf("oneDNN %s, layout %s, median of %d calls, OMP_NUM_THREADS=%s\n", version, layout, repeats, omp ? omp : "(unset)");
        printf("%-3s %-48s %5s %9s %10s %9s  %s\n", "id", "workload", "count", "MFLOP", "median ms", "GFLOP/s", "impl");
    }
    double total_ms = 0, total_flops = 0;
    int rc = 0;
    for (int i = 0; i < ntasks; i++) {
        const mt_task *t = &tasks[i];
        char wtext[256];
        mt_workload_format(&t->wl, wtext, sizeof wtext);
        conv_timing ct = {0};
        if (time_conv(eng, stream, &t->wl, plain, repeats, &ct, err, sizeof err) != 0) {
            fprintf(stderr, "onednn_convs: task %d (%s): %s\n", i, wtext, err);
            rc = 1;
            continue;
        }
        double gf = t->flops / (ct.median_ms * 1e6);
        total_ms += ct.median_ms * t->count;
        total_flops += t->flops * t->count;
        if (json) {
            printf("{\"type\": \"task\", \"network\": ");
            json_str(stdout, netname);
            printf(", \"task\": %d, \"workload\": ", i);
            json_str(stdout, wtext);
            char ktext[256];
            const mt_workload kw = mt_layer_kernel_workload(mt_network_layer(net, t->first_layer));
            mt_workload_format(&kw, ktext, sizeof ktext);
            printf(", \"kernel_workload\": ");
            json_str(stdout, ktext);
            printf(", \"count\": %d, \"flops\": %.6g, \"layout\": \"%s\", \"median_ms\": %.6g, \"min_ms\": %.6g, \"max_ms\": %.6g, "
                   "\"gflops\": %.4g, \"impl\": ",
                   t->count, t->flops, layout, ct.median_ms, ct.min_ms, ct.max_ms, gf);
            json_str(stdout, ct.impl);
            printf("}\n");
        } else {
            printf("%-3d %-48s %5d %9.1f %10.4f %9.1f  %s\n", i, wtext, t->count, t->flops / 1e6, ct.median_ms, gf, ct.impl);
        }
        fflush(stdout);
    }
    if (json) {
        printf("{\"type\": \"summary\", \"network\": ");
        json_str(stdout, netname);
        printf(", \"library\": \"oneDNN\", \"version\": \"%s\", \"layout\": \"%s\", \"repeats\": %d, \"omp_num_threads\": ", version, layout,
               repeats);
        if (omp) json_str(stdout, omp);
        else printf("null");
        printf(", \"ntasks\": %d, \"failed\": %s, \"network_ms\": %.6g, \"gflops\": %.4g}\n", ntasks, rc ? "true" : "false",
               rc ? 0.0 : total_ms, total_ms > 0 && !rc ? total_flops / (total_ms * 1e6) : 0.0);
    } else {
        if (rc) printf("total: unknown (a task failed)\n");
        else printf("total (sum of median x count): %.3f ms, %.1f GFLOP/s\n", total_ms, total_flops / (total_ms * 1e6));
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(eng);
    free(tasks);
    mt_network_free(net);
    return rc;
}
