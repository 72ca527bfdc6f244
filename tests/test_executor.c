/* The inference executor against the CPU reference, the weights file, and
 * the embedding API from several threads. Tests that need a device skip when
 * there is none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mtgpu/records.h"
#include "program.h"
#include "select.h"
#include "mtgpu/embed.h"
#include "mtgpu/executor.h"
#include "reference.h"
#include "refine.h"

#include "executor-impl.h"
#include "pass_fuse.h"
#include "measure.h"
#include "memory.h"

/* fp32 on the device against double sums: a whole network stays well under this. */
#define NET_TOL 1e-4

static mt_device *g_dev;
static char g_dev_err[1024];
static char g_dir[256];

#define NEED_DEVICE()                                                  \
    do {                                                               \
        if (!g_dev) {                                                  \
            print_message("skipped: no device: %s\n", g_dev_err);     \
            skip();                                                    \
        }                                                              \
    } while (0)

/* Runs net through the executor (db may be NULL) and the reference with the
 * same random weights and input; returns the normalised max error. */
static double run_against_reference(const mt_network *net, mt_db *db, mt_executor_stats *stats_out) {
    char err[4096];
    mt_weights *w = NULL;
    assert_int_equal(mt_weights_random(net, 7, &w, err, sizeof err), MT_OK);
    mt_executor_params p = mt_executor_default_params();
    p.db = db;
    p.weights = w;
    mt_executor *ex = NULL;
    mt_status st = mt_executor_build(g_dev, net, &p, &ex, err, sizeof err);
    if (st != MT_OK) print_message("build failed: %s\n", err);
    assert_int_equal(st, MT_OK);
    const mt_layer *in = mt_network_layer(net, 0);
    int64_t nin = (int64_t)in->out.n * in->out.c * in->out.h * in->out.w;
    mt_shape os = mt_executor_output_shape(ex);
    int64_t nout = (int64_t)os.n * os.c * os.h * os.w;
    float *x = malloc(sizeof(float) * (size_t)nin), *y = malloc(sizeof(float) * (size_t)nout), *ref = malloc(sizeof(float) * (size_t)nout);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(ref);
    mt_fill_random(x, nin, 3);
    assert_int_equal(mt_executor_set_input(ex, x, nin, err, sizeof err), MT_OK);
    assert_int_equal(mt_executor_set_input(ex, x, nin + 1, err, sizeof err), MT_RANGE);
    /* Two passes: the second must not depend on what the first left in the shared buffers. */
    for (int pass = 0; pass < 2; pass++) {
        st = mt_executor_run(ex, NULL, err, sizeof err);
        if (st != MT_OK) print_message("run failed: %s\n", err);
        assert_int_equal(st, MT_OK);
    }
    assert_int_equal(mt_executor_output(ex, y, nout, err, sizeof err), MT_OK);
    st = mt_network_reference(net, w, x, ref, 2, err, sizeof err);
    if (st != MT_OK) print_message("reference failed: %s\n", err);
    assert_int_equal(st, MT_OK);
    double e = 0;
    int64_t bad = -1;
    assert_int_equal(mt_compare(y, ref, nout, &e, &bad), MT_OK);
    mt_executor_stats s;
    mt_executor_get_stats(ex, &s);
    print_message("%s: max rel err %.3g, %d convs (%d kernels, %d tuned), %d launches, device %.1f MiB = weights %.1f + activations %.2f "
                  "in %d buffers (largest live %.2f, two largest %.2f) + workspace %.3f, build %.1f s\n",
                  mt_network_name(net), e, s.nconvs, s.conv_programs, s.convs_from_db, s.launches, s.device_bytes / 1048576.0,
                  s.weight_bytes / 1048576.0, s.activation_bytes / 1048576.0, s.activation_buffers, s.largest_live_bytes / 1048576.0,
                  s.two_largest_bytes / 1048576.0, s.workspace_bytes / 1048576.0, s.build_s);
    /* Every byte the executor holds is accounted for, and buffers are reused. */
    assert_int_equal(s.device_bytes, s.weight_bytes + s.activation_bytes + s.workspace_bytes);
    assert_true(s.activation_bytes >= s.largest_live_bytes);
    assert_true(s.activation_buffers < mt_network_num_layers(net) / 2 || mt_network_num_layers(net) < 8);
    if (stats_out) *stats_out = s;
    free(x);
    free(y);
    free(ref);
    mt_executor_free(ex);
    mt_weights_free(w);
    return e;
}

static void zoo_case(const char *name, int image_size) {
    NEED_DEVICE();
    char err[1024];
    mt_network *net = NULL;
    assert_int_equal(mt_network_create(name, 1, image_size, &net, err, sizeof err), MT_OK);
    double e = run_against_reference(net, NULL, NULL);
    assert_true(e < NET_TOL);
    mt_network_free(net);
}

/* Without records, the executor runs each convolution's default config, and
 * on a CPU that template depends on the layer's shape (records/select.c):
 * Winograd on a 3x3 layer of 56x56 outputs (weights converted to its layout),
 * gemm on a short 1x1 layer, kvec on a strided one. The network's output
 * must match the reference whichever templates ran. */
static void test_default_templates(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[1024];
    const mt_device_info *di = mt_device_get_info(g_dev);
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("shapes", &net), MT_OK);
    int x = mt_network_add_input(net, "input", 1, 16, 56, 56);
    mt_conv_spec a = mt_conv_spec_default(16, 3, 1, 1);
    a.bias = 1;
    x = mt_network_add_conv(net, "conv3x3", x, &a);
    mt_conv_spec b = mt_conv_spec_default(32, 1, 1, 0);
    x = mt_network_add_conv(net, "conv1x1", x, &b);
    mt_conv_spec c = mt_conv_spec_default(32, 3, 2, 1);
    x = mt_network_add_conv(net, "strided", x, &c);
    mt_network_add_global_avgpool(net, "pool", x);
    assert_int_equal(mt_network_status(net, err, sizeof err), MT_OK);
    const char *want_cpu[] = {"wino", "gemm", "kvec"};
    for (int i = 0, n = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        mt_select_query q = mt_select_query_default(NULL, &l->conv.wl, di);
        mt_select_result sel;
        assert_int_equal(mt_select_config(&q, &sel, err, sizeof err), MT_OK);
        print_message("%s: default %s %s\n", l->name, mt_template_name(sel.t), sel.rec.config);
        if (di->is_cpu) assert_string_equal(mt_template_name(sel.t), want_cpu[n]);
        mt_select_result_free(&sel);
        n++;
    }
    double e = run_against_reference(net, NULL, NULL);
    print_message("default templates by shape: max rel err %.3g\n", e);
    assert_true(e < NET_TOL);
    mt_network_free(net);
}

static void test_resnet18(void **state) {
    (void)state;
    zoo_case("resnet18", 32);
}
static void test_resnet50(void **state) {
    (void)state;
    zoo_case("resnet50", 32);
}
static void test_vgg16(void **state) {
    (void)state;
    zoo_case("vgg16", 32);
}
static void test_mobilenet_v2(void **state) {
    (void)state;
    zoo_case("mobilenet_v2", 32);
}
/* Three kernels with work-groups that read what other work-groups of the
 * kernel before wrote: fill (one item per group, on a 2-D grid, each
 * taking a while, so that the threads run it side by side), shift
 * (groups of 4 work-items, each reading its right neighbour's element) and
 * reverse (one item, through a __local array, i.e. scratch memory). */
static const char *fuse_fill_src = "typedef float4 __attribute__((aligned(4))) mt_float4u;\n"
                                   "__kernel __attribute__((reqd_work_group_size(1, 1, 1)))\n"
                                   "void fill(__global float *restrict out) {\n"
                                   "    const long g = (long)get_group_id(0) + 10L * (long)get_group_id(1);\n"
                                   "    float a = 0.5f;\n"
                                   "    for (int i = 0; i < 20000; i++) a = a * 0.999f + 0.001f;\n"
                                   "    out[g] = (float)g + a * 0.0f;\n"
                                   "}\n";
static const char *fuse_shift_src = "typedef float4 __attribute__((aligned(4))) mt_float4u;\n"
                                    "__kernel __attribute__((reqd_work_group_size(4, 1, 1)))\n"
                                    "void shift(__global const float *restrict in, __global float *restrict out) {\n"
                                    "    const long i = (long)get_group_id(0) * 4L + (long)get_local_id(0);\n"
                                    "    out[i] = in[(i + 1L) % 40L] * 2.0f;\n"
                                    "}\n";
static const char *fuse_reverse_src = "__kernel __attribute__((reqd_work_group_size(1, 1, 1)))\n"
                                      "void reverse(__global const float *restrict in, __global float *restrict out) {\n"
                                      "    __local float t_1[4];\n"
                                      "    const long g = (long)get_group_id(0);\n"
                                      "    for (long j = 0; j < 4; j++) t_1[j] = in[g * 4L + j] + 1.0f;\n"
                                      "    for (long j = 0; j < 4; j++) out[g * 4L + j] = t_1[3L - j];\n"
                                      "}\n";

static const char *fuse_scale_src = "#define THREE 3.0f\n"
                                    "__kernel void other(__global float *o) {\n    o[0] = 0.0f;\n}\n"
                                    "__kernel void scale(__global const int *n, __global const float *in, __global float *out) {\n"
                                    "    int i = get_global_id(0);\n"
                                    "    if (i >= n[0]) return;\n"
                                    "    out[i] = in[i] * THREE;\n"
                                    "}\n";

/* The text checks of pass_fuse.c: what may run fused and what may not. */
static void test_fuse_can(void **state) {
    (void)state;
    const int64_t one[3] = {1, 1, 1}, four[3] = {4, 1, 1}, eight[3] = {8, 1, 1};
    assert_true(mt__fuse_can(fuse_fill_src, NULL, one));
    assert_true(mt__fuse_can(fuse_shift_src, NULL, four));
    assert_true(mt__fuse_can(fuse_reverse_src, NULL, one));
    assert_true(mt__fuse_can(fuse_scale_src, "scale", eight));
    /* Not fusable: a source of two kernels without a name; a name it lacks;
     * a work-group size other than the kernel asks for; a barrier, an
     * atomic, a query of the launch's size; a __local array shared by
     * several work-items; a helper function asking a work-item query. */
    assert_false(mt__fuse_can(fuse_scale_src, NULL, eight));
    assert_false(mt__fuse_can(fuse_scale_src, "scal", eight));
    assert_false(mt__fuse_can(fuse_shift_src, NULL, one));
    assert_false(mt__fuse_can("__kernel void k(__global float *o) {\n    o[get_local_id(0)] = 1.0f;\n    barrier(CLK_GLOBAL_MEM_FENCE);\n}\n",
                              NULL, four));
    assert_false(mt__fuse_can("__kernel void k(__global int *o) {\n    atomic_inc(o);\n}\n", NULL, one));
    assert_false(mt__fuse_can("__kernel void k(__global float *o) {\n    o[0] = (float)get_num_groups(0);\n}\n", NULL, one));
    assert_false(mt__fuse_can("__kernel void k(__global float *o) {\n    __local float t_1[2];\n    t_1[get_local_id(0)] = 1.0f;\n"
                              "    o[0] = t_1[0];\n}\n",
                              NULL, (const int64_t[3]){2, 1, 1}));
    assert_false(mt__fuse_can("int id(void) { return (int)get_group_id(0); }\n"
                              "__kernel void k(__global float *o) {\n    o[id()] = 1.0f;\n}\n",
                              NULL, one));
    assert_false(mt__fuse_can(NULL, NULL, one));
    char err[256], *src = NULL;
    const int arg0[1] = {0};
    mt__fuse_launch bad = {.src = fuse_shift_src, .nargs = 1, .arg = arg0, .grid = {1, 1, 1}, .block = {1, 1, 1}};
    assert_int_equal(mt__fuse_source(&bad, 1, 1, "f", &src, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_null(src);
}

/* The four kernels fused into one launch give what they give one by one,
 * whatever the number of work-groups of the fused launch: with more than
 * the device has threads, some start after others have finished and must
 * find the work done rather than wait for it. */
static void test_fused_launch(void **state) {
    (void)state;
    NEED_DEVICE();
    const int a0[1] = {0}, a01[2] = {0, 1}, a12[2] = {1, 2}, a423[3] = {4, 2, 3};
    mt__fuse_launch l[4] = {
        {.src = fuse_fill_src, .nargs = 1, .arg = a0, .grid = {10, 4, 1}, .block = {1, 1, 1}, .counters = 0},
        {.src = fuse_shift_src, .nargs = 2, .arg = a01, .grid = {10, 1, 1}, .block = {4, 1, 1}, .counters = 1},
        {.src = fuse_reverse_src, .nargs = 2, .arg = a12, .grid = {10, 1, 1}, .block = {1, 1, 1}, .counters = 2},
        {.src = fuse_scale_src, .kernel = "scale", .nargs = 3, .arg = a423, .grid = {5, 1, 1}, .block = {8, 1, 1}, .counters = 3},
    };
    char err[4096], *src = NULL;
    int64_t scratch = 0;
    assert_int_equal(mt__fuse_source(l, 4, 5, "fused_test", &src, &scratch, err, sizeof err), MT_OK);
    assert_int_equal(scratch, 4);
    mt_program *p = NULL;
    mt_status st = mt_program_build_source(g_dev, src, "fused_test", &p, err, sizeof err);
    if (st != MT_OK) print_message("%s\n%s\n", err, src);
    assert_int_equal(st, MT_OK);
    free(src);
    /* sync, scratch (4 floats per work-group), clock, out1, out2, out3, out4, n */
    mt_dbuf *b[8] = {NULL};
    int zeros[4 * MT__FUSE_COUNTERS] = {0}, n = 38;
    uint64_t stamps[4 * 8 * MT__FUSE_STAMPS];
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof zeros, &b[0]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * 4 * 8, &b[1]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof stamps, &b[2]), MT_OK);
    for (int i = 3; i < 7; i++) assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * 40, &b[i]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof n, &b[7]), MT_OK);
    assert_int_equal(mt_dbuf_write(g_dev, b[7], 0, &n, sizeof n), MT_OK);
    float want[40], got[40];
    for (int i = 0; i < 40; i++) {
        /* scale(reverse(shift(fill))): reversed[4g + j] = shifted[4g + 3 - j] + 1, shifted[i] = 2 * ((i + 1) % 40);
         * scale leaves the last two elements as they were. */
        const int g = i / 4, j = i % 4, s = 4 * g + 3 - j;
        want[i] = i < n ? 3.0f * (2.0f * (float)((s + 1) % 40) + 1.0f) : -1.0f;
    }
    const int64_t groups[] = {1, 2, 3, 8}, one[3] = {1, 1, 1};
    /* Zeroed once: every pass leaves its counters zeroed for the next. */
    assert_int_equal(mt_dbuf_write(g_dev, b[0], 0, zeros, sizeof zeros), MT_OK);
    for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++) {
        const int64_t grid[3] = {groups[k], 1, 1};
        for (int pass = 0; pass < 3; pass++) {
            /* Stale values from the pass before would hide a read that came too early. */
            float junk[40];
            for (int i = 0; i < 40; i++) junk[i] = -1.0f;
            for (int i = 3; i < 7; i++) assert_int_equal(mt_dbuf_write(g_dev, b[i], 0, junk, sizeof junk), MT_OK);
            memset(stamps, 0, sizeof stamps);
            assert_int_equal(mt_dbuf_write(g_dev, b[2], 0, stamps, sizeof stamps), MT_OK);
            assert_int_equal(mt_program_launch(g_dev, p, b, 8, grid, one, err, sizeof err), MT_OK);
            assert_int_equal(mt_device_finish(g_dev, err, sizeof err), MT_OK);
            assert_int_equal(mt_dbuf_read(g_dev, b[6], 0, got, sizeof got), MT_OK);
            for (int i = 0; i < 40; i++)
                if (got[i] != want[i])
                    fail_msg("%lld work-groups, pass %d: element %d is %g, want %g", (long long)groups[k], pass, i, got[i], want[i]);
            int left[4 * MT__FUSE_COUNTERS];
            assert_int_equal(mt_dbuf_read(g_dev, b[0], 0, left, sizeof left), MT_OK);
            for (int i = 0; i < 4 * MT__FUSE_COUNTERS; i++)
                if (left[i] != 0) fail_msg("%lld work-groups, pass %d: counter %d left at %d", (long long)groups[k], pass, i, left[i]);
            /* Each work-group stamps every launch: started <= share done <= wait over,
             * and a launch starts where the one before ended. */
            assert_int_equal(mt_dbuf_read(g_dev, b[2], 0, stamps, sizeof stamps), MT_OK);
            for (int w = 0; w < (int)groups[k]; w++)
                for (int i = 0; i < 4; i++) {
                    const uint64_t *c = stamps + ((size_t)i * (size_t)groups[k] + (size_t)w) * MT__FUSE_STAMPS;
#if defined(__x86_64__)
                    if (c[0] == 0 || c[1] < c[0] || c[2] < c[1] || (i > 0 && c[0] != c[-(ptrdiff_t)groups[k] * MT__FUSE_STAMPS + 2]))
                        fail_msg("%lld work-groups, work-group %d, launch %d: stamps %llu %llu %llu out of order", (long long)groups[k], w, i,
                                 (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2]);
#else
                    assert_true(c[0] == 0 && c[1] == 0 && c[2] == 0); /* no counter to read: zeros */
#endif
                }
        }
    }
    for (int i = 0; i < 8; i++) mt_dbuf_free(b[i]);
    mt_program_free(p);
}

/* The input is written when it is set and read by every pass after: a new
 * input changes the output, the old one set again gives the old output bit
 * for bit, and passes in between change nothing (on a CPU device the input
 * is used in place, not uploaded by each pass). */
static void test_input_between_passes(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[4096];
    mt_network *net = NULL;
    assert_int_equal(mt_network_create("mobilenet_v2", 1, 64, &net, err, sizeof err), MT_OK);
    mt_executor *ex = NULL;
    mt_executor_params p = mt_executor_default_params();
    mt_status st = mt_executor_build(g_dev, net, &p, &ex, err, sizeof err);
    if (st != MT_OK) print_message("build failed: %s\n", err);
    assert_int_equal(st, MT_OK);
    mt_shape is = mt_network_layer(net, 0)->out, os = mt_executor_output_shape(ex);
    const int64_t nin = (int64_t)is.n * is.c * is.h * is.w, nout = (int64_t)os.n * os.c * os.h * os.w;
    float *a = malloc(sizeof(float) * (size_t)nin), *b = malloc(sizeof(float) * (size_t)nin);
    float *ya = malloc(sizeof(float) * (size_t)nout), *yb = malloc(sizeof(float) * (size_t)nout), *y = malloc(sizeof(float) * (size_t)nout);
    assert_true(a && b && ya && yb && y);
    mt_fill_random(a, nin, 11);
    mt_fill_random(b, nin, 12);
    mt_executor_stats stats;
    mt_executor_get_stats(ex, &stats);
    if (mt_device_get_info(g_dev)->is_cpu) assert_int_equal(stats.input_in_place, 1);
    assert_int_equal(mt_executor_set_input(ex, a, nin, err, sizeof err), MT_OK);
    assert_int_equal(mt_executor_run(ex, NULL, err, sizeof err), MT_OK);
    assert_int_equal(mt_executor_output(ex, ya, nout, err, sizeof err), MT_OK);
    assert_int_equal(mt_executor_set_input(ex, b, nin, err, sizeof err), MT_OK);
    for (int pass = 0; pass < 2; pass++) assert_int_equal(mt_executor_run(ex, NULL, err, sizeof err), MT_OK);
    assert_int_equal(mt_executor_output(ex, yb, nout, err, sizeof err), MT_OK);
    assert_true(memcmp(ya, yb, sizeof(float) * (size_t)nout) != 0);
    assert_int_equal(mt_executor_set_input(ex, a, nin, err, sizeof err), MT_OK);
    for (int pass = 0; pass < 3; pass++) {
        assert_int_equal(mt_executor_run(ex, NULL, err, sizeof err), MT_OK);
        assert_int_equal(mt_executor_output(ex, y, nout, err, sizeof err), MT_OK);
        assert_memory_equal(y, ya, sizeof(float) * (size_t)nout);
    }
    free(a);
    free(b);
    free(ya);
    free(yb);
    free(y);
    mt_executor_free(ex);
    mt_network_free(net);
}

/* Launches given views of one allocation take that allocation and offsets
 * into it (mt__fuse_launch.arg_offset): the fused shift reads and writes
 * where its views lie, and nothing before, between or after them. */
static void test_fused_offsets(void **state) {
    (void)state;
    NEED_DEVICE();
    const int both[2] = {0, 0};
    const int64_t off[2] = {1024, 3072}; /* floats: views at 4096 and 12288 bytes */
    mt__fuse_launch l = {.src = fuse_shift_src, .nargs = 2, .arg = both, .arg_offset = off, .grid = {10, 1, 1}, .block = {4, 1, 1}};
    char err[4096], *src = NULL;
    int64_t scratch = 0;
    assert_int_equal(mt__fuse_source(&l, 1, 1, "fused_offsets", &src, &scratch, err, sizeof err), MT_OK);
    assert_non_null(strstr(src, "mt__b0 + 1024L"));
    assert_non_null(strstr(src, "mt__b0 + 3072L"));
    mt_program *p = NULL;
    mt_status st = mt_program_build_source(g_dev, src, "fused_offsets", &p, err, sizeof err);
    if (st != MT_OK) print_message("%s\n%s\n", err, src);
    assert_int_equal(st, MT_OK);
    free(src);
    enum { FLOATS = 4096, GROUPS = 2 };
    int zeros[MT__FUSE_COUNTERS] = {0};
    static float arena[FLOATS], got[FLOATS];
    for (int i = 0; i < FLOATS; i++) arena[i] = i >= 1024 && i < 1064 ? (float)(i - 1024) : -1.0f;
    mt_dbuf *b[4] = {NULL};
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof zeros, &b[0]), MT_OK);
    assert_int_equal(mt_dbuf_write(g_dev, b[0], 0, zeros, sizeof zeros), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * (size_t)(scratch * GROUPS), &b[1]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(uint64_t) * MT__FUSE_STAMPS * GROUPS, &b[2]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof arena, &b[3]), MT_OK);
    assert_int_equal(mt_dbuf_write(g_dev, b[3], 0, arena, sizeof arena), MT_OK);
    const int64_t grid[3] = {GROUPS, 1, 1}, one[3] = {1, 1, 1};
    assert_int_equal(mt_program_launch(g_dev, p, b, 4, grid, one, err, sizeof err), MT_OK);
    assert_int_equal(mt_device_finish(g_dev, err, sizeof err), MT_OK);
    assert_int_equal(mt_dbuf_read(g_dev, b[3], 0, got, sizeof got), MT_OK);
    for (int i = 0; i < FLOATS; i++) {
        const float want = i >= 3072 && i < 3112 ? 2.0f * (float)((i - 3072 + 1) % 40) : arena[i];
        if (got[i] != want) fail_msg("float %d is %g, want %g", i, got[i], want);
    }
    for (int i = 0; i < 4; i++) mt_dbuf_free(b[i]);
    mt_program_free(p);
}

/* The executor's constant data: pieces at multiples of MT_DBUF_VIEW_ALIGN,
 * the padding between them zero, each piece's bytes as given. */
static void test_const_pack(void **state) {
    (void)state;
    mt__const_pack cp = {0};
    float w[300];
    int32_t params[3] = {7, 8, 9};
    for (int i = 0; i < 300; i++) w[i] = (float)i + 0.5f;
    assert_int_equal(mt__const_pack_add(&cp, w, sizeof w, 4, 1, 0), MT_OK);
    assert_int_equal(mt__const_pack_add(&cp, params, sizeof params, 5, 0, 1), MT_OK);
    assert_int_equal(mt__const_pack_add(&cp, w, sizeof w, 6, 3, 0), MT_OK);
    assert_int_equal(mt__const_pack_add(&cp, NULL, 4, 7, 0, 0), MT_INVALID_ARG);
    assert_int_equal(cp.n, 3);
    assert_int_equal(cp.piece[0].offset, 0);
    assert_int_equal(cp.piece[1].offset, MT_DBUF_VIEW_ALIGN);
    assert_int_equal(cp.piece[2].offset, 2 * MT_DBUF_VIEW_ALIGN);
    assert_int_equal(cp.bytes, 2 * MT_DBUF_VIEW_ALIGN + sizeof w);
    assert_int_equal(cp.piece[1].launch, 5);
    assert_int_equal(cp.piece[2].arg, 3);
    assert_memory_equal(cp.data, w, sizeof w);
    assert_memory_equal(cp.data + MT_DBUF_VIEW_ALIGN, params, sizeof params);
    for (size_t i = sizeof w; i < MT_DBUF_VIEW_ALIGN; i++)
        if (cp.data[i] != 0) fail_msg("padding byte %zu is %d", i, cp.data[i]);
    if (g_dev) {
        mt_dbuf *arena = NULL, *bufs[3] = {NULL};
        size_t share[3];
        char err[512];
        assert_int_equal(mt__const_pack_upload(&cp, g_dev, &arena, bufs, share, err, sizeof err), MT_OK);
        /* In one allocation the pieces' shares add up to it, padding included; alone, to their bytes. */
        assert_int_equal(share[0] + share[1] + share[2], arena ? cp.bytes : 2 * sizeof w + sizeof params);
        int32_t back[3];
        assert_int_equal(mt_dbuf_read(g_dev, bufs[1], 0, back, sizeof back), MT_OK);
        assert_memory_equal(back, params, sizeof params);
        if (arena) {
            size_t at = 0;
            assert_ptr_equal(mt__dbuf_root(bufs[2], &at), arena);
            assert_int_equal(at, 2 * MT_DBUF_VIEW_ALIGN);
        }
        for (int i = 0; i < 3; i++) mt_dbuf_free(bufs[i]);
        mt_dbuf_free(arena);
    }
    mt__const_pack_free(&cp);
    assert_null(cp.data);
}

/* A network's fused passes give the output of its unfused ones, and on a
 * CPU device run fewer launches; a profiled pass of the fused executor runs
 * every kernel alone and gives the same output too. */
static void test_fused_network(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[4096];
    mt_network *net = NULL;
    assert_int_equal(mt_network_create("mobilenet_v2", 1, 64, &net, err, sizeof err), MT_OK);
    mt_weights *w = NULL;
    assert_int_equal(mt_weights_random(net, 5, &w, err, sizeof err), MT_OK);
    mt_shape os = mt_network_layer(net, mt_network_num_layers(net) - 1)->out;
    const int64_t nout = (int64_t)os.n * os.c * os.h * os.w;
    float *out[3];
    mt_executor_stats stats[2];
    for (int fuse = 0; fuse < 2; fuse++) {
        mt_executor_params p = mt_executor_default_params();
        p.weights = w;
        p.fuse = fuse;
        mt_executor *ex = NULL;
        mt_status st = mt_executor_build(g_dev, net, &p, &ex, err, sizeof err);
        if (st != MT_OK) print_message("build failed: %s\n", err);
        assert_int_equal(st, MT_OK);
        mt_executor_get_stats(ex, &stats[fuse]);
        for (int k = fuse; k <= 2 * fuse; k++) {
            out[k] = malloc(sizeof(float) * (size_t)nout);
            assert_non_null(out[k]);
            const int nl = mt_network_num_layers(net);
            mt_layer_time *lt = k == 2 ? calloc((size_t)nl, sizeof *lt) : NULL;
            double wall_ms = 0;
            for (int pass = 0; pass < 2; pass++) {
                struct timespec t0, t1;
                clock_gettime(CLOCK_MONOTONIC, &t0);
                assert_int_equal(mt_executor_run(ex, lt, err, sizeof err), MT_OK);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                wall_ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
            }
            assert_int_equal(mt_executor_output(ex, out[k], nout, err, sizeof err), MT_OK);
            if (!lt) {
                mt_pass_time pt;
                mt_executor_pass_time(ex, &pt);
                assert_int_equal(pt.valid, 0); /* only a profiled fused pass has one */
            }
            if (lt) {
                /* A fused pass profiled as it runs: every convolution took time, no
                 * wait is negative, and the layers fit inside the pass's wall time
                 * (the counter's rate comes from the host's clock: a few percent). */
                double sum = 0;
                for (int i = 0; i < nl; i++) {
                    if (mt_network_layer(net, i)->kind == MT_LAYER_CONV2D && !(lt[i].kernel_ms > 0))
                        fail_msg("layer %s: no time in the profile", mt_network_layer(net, i)->name);
                    assert_true(lt[i].wait_ms >= 0);
                    if (!stats[1].profile_in_pass) assert_true(lt[i].wait_ms == 0);
                    sum += lt[i].kernel_ms + lt[i].wait_ms;
                }
                mt_pass_time pt;
                mt_executor_pass_time(ex, &pt);
                assert_int_equal(pt.valid, stats[1].profile_in_pass);
                /* The late starts overlap the layers; the rest lie between them. */
                const double outside = pt.upload_ms + pt.queue_ms + pt.start_ms + pt.return_ms;
                print_message("profiled fused pass: layers %.3f ms, outside them %.3f (upload %.3f, queue %.3f, start %.3f, return %.3f), inside %.3f ms wall\n", sum, outside, pt.upload_ms, pt.queue_ms, pt.start_ms, pt.return_ms, wall_ms);
                assert_true(pt.upload_ms >= 0 && pt.queue_ms >= 0 && pt.start_ms >= 0 && pt.late_ms >= 0 && pt.return_ms >= 0);
                assert_true(sum <= 1.05 * wall_ms);
                assert_true(sum + outside <= 1.05 * wall_ms);
            }
            free(lt);
        }
        mt_executor_free(ex);
    }
    print_message("mobilenet_v2 at 64x64: %d launches, %d fused\n", stats[1].launches, stats[1].launches_fused);
    assert_int_equal(stats[0].launches_fused, stats[0].launches);
    assert_int_equal(stats[0].profile_in_pass, 0);
    /* On a CPU device all of its kernels can run fused, and with its weights in
     * one allocation their buffers fit one launch. */
    if (mt_device_get_info(g_dev)->is_cpu) assert_int_equal(stats[1].launches_fused, 1);
#if defined(__x86_64__)
    if (mt_device_get_info(g_dev)->is_cpu) assert_int_equal(stats[1].profile_in_pass, 1);
#endif
    for (int k = 1; k < 3; k++) {
        double e = 0;
        int64_t bad = -1;
        assert_int_equal(mt_compare(out[k], out[0], nout, &e, &bad), MT_OK);
        assert_true(e < 1e-6);
    }
    for (int k = 0; k < 3; k++) free(out[k]);
    mt_weights_free(w);
    mt_network_free(net);
}

static void test_squeezenet1_1(void **state) {
    (void)state;
    zoo_case("squeezenet1_1", 64);
}

/* Every operation the zoo does not use: average pooling with padding and
 * ceil_mode, adaptive pooling, a separate add with ReLU, a conv with bias and
 * ReLU6, a grouped conv, concat of three, dense with ReLU and without bias,
 * and a batch of 2. */
static mt_network *ops_network(void) {
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("ops", &net), MT_OK);
    int x = mt_network_add_input(net, "input", 2, 4, 13, 11);
    mt_conv_spec a = mt_conv_spec_default(8, 3, 1, 1);
    a.bias = 1;
    a.act = MT_ACT_RELU6;
    int c1 = mt_network_add_conv(net, "c1", x, &a);
    mt_conv_spec g = mt_conv_spec_default(8, 3, 2, 1);
    g.groups = 2;
    g.batch_norm = 1;
    int c2 = mt_network_add_conv(net, "c2", c1, &g);
    int ap = mt_network_add_pool(net, "ap", MT_LAYER_AVGPOOL, c1, 3, 2, 1, 1);
    int ad = mt_network_add_add(net, "add", c2, ap, MT_ACT_RELU);
    mt_conv_spec d = mt_conv_spec_default(8, 3, 1, 1);
    d.groups = 8;
    d.batch_norm = 1;
    d.bn_name = "dw.norm";
    d.act = MT_ACT_RELU;
    int dw = mt_network_add_conv(net, "dw", ad, &d);
    int ins[3] = {ad, dw, c2};
    int cat = mt_network_add_concat(net, "cat", ins, 3);
    int mp = mt_network_add_pool(net, "mp", MT_LAYER_MAXPOOL, cat, 2, 2, 0, 1);
    int aa = mt_network_add_adaptive_avgpool(net, "aap", mp, 3, 2);
    int fl = mt_network_add_flatten(net, "flatten", aa);
    int d1 = mt_network_add_dense(net, "fc1", fl, 10, 0, MT_ACT_RELU);
    int d2 = mt_network_add_dense(net, "fc2", d1, 5, 1, MT_ACT_NONE);
    mt_network_add_softmax(net, "softmax", d2);
    char err[512];
    mt_status st = mt_network_status(net, err, sizeof err);
    if (st != MT_OK) print_message("ops network: %s\n", err);
    assert_int_equal(st, MT_OK);
    return net;
}

/* The activation plans of the zoo at 224x224 (no device needed). Packed:
 * tensors live at the same time never share bytes, and the arena is within
 * the bound of the two largest activations (plus alignment). Whole
 * buffers: tensors live at once never share a buffer, and every buffer holds
 * its tensors. In both, a residual convolution whose residual dies there
 * writes over it (the fused kernel adds it in place). */
static void test_activation_plans(void **state) {
    (void)state;
    const char *nets[] = {"resnet18", "resnet50", "mobilenet_v2", "vgg16", "squeezenet1_1"};
    for (size_t k = 0; k < sizeof nets / sizeof nets[0]; k++) {
        mt_network *net = NULL;
        char err[512];
        assert_int_equal(mt_network_create(nets[k], 1, 224, &net, err, sizeof err), MT_OK);
        int n = mt_network_num_layers(net);
        /* Last reader of each layer's tensor (the output: past the end). */
        int *last = malloc(sizeof(int) * (size_t)n);
        assert_non_null(last);
        for (int i = 0; i < n; i++) {
            last[i] = i;
            const mt_layer *l = mt_network_layer(net, i);
            for (int j = 0; j < l->ninputs; j++)
                if (last[l->inputs[j]] < i) last[l->inputs[j]] = i;
        }
        last[n - 1] = n;
        for (int packed = 0; packed <= 1; packed++) {
            mt__act_plan plan;
            assert_int_equal(mt__act_plan_make(net, packed, &plan), MT_OK);
            int inplace = 0;
            for (int a = 0; a < n; a++) {
                const mt_layer *la = mt_network_layer(net, a);
                int64_t bytes_a = mt__shape_elems(la->out) * (int64_t)sizeof(float);
                assert_true(plan.slot_bytes[plan.slot[a]] >= bytes_a);
                if (la->kind == MT_LAYER_CONV2D && la->conv.residual >= 0 && plan.slot[a] == plan.slot[la->conv.residual]) {
                    assert_true(last[la->conv.residual] == a); /* nobody reads the residual after it is overwritten */
                    inplace++;
                }
                for (int b = a + 1; b < n; b++) {
                    const mt_layer *lb = mt_network_layer(net, b);
                    if (last[a] < b) continue;                              /* a is dead when b is written */
                    if (lb->kind == MT_LAYER_FLATTEN && lb->inputs[0] == a) continue; /* an alias by design */
                    if (lb->kind == MT_LAYER_CONV2D && lb->conv.residual == a && last[a] == b) continue; /* in place */
                    int sa = plan.slot[a], sb = plan.slot[b];
                    if (!packed) {
                        if (sa == sb) fail_msg("%s: layers %d and %d are live together in buffer %d", nets[k], a, b, sa);
                        continue;
                    }
                    assert_int_not_equal(sa, sb);
                    int64_t a0 = plan.slot_offset[sa], a1 = a0 + plan.slot_bytes[sa];
                    int64_t b0 = plan.slot_offset[sb], b1 = b0 + plan.slot_bytes[sb];
                    if (a0 < b1 && b0 < a1) fail_msg("%s: layers %d and %d are live together and overlap in the arena", nets[k], a, b);
                }
            }
            if (packed) {
                assert_true(plan.arena_bytes <= plan.two_largest + 2 * MT_DBUF_VIEW_ALIGN);
                print_message("%s: packed arena %.2f MiB (largest live %.2f, two largest %.2f), %d residual convs in place\n", nets[k],
                              plan.arena_bytes / 1048576.0, plan.largest_live / 1048576.0, plan.two_largest / 1048576.0, inplace);
            }
            if (strncmp(nets[k], "resnet", 6) == 0) assert_true(inplace > 0);
            mt__act_plan_free(&plan);
        }
        free(last);
        mt_network_free(net);
    }
}

static void test_every_op(void **state) {
    (void)state;
    NEED_DEVICE();
    mt_network *net = ops_network();
    double e = run_against_reference(net, NULL, NULL);
    assert_true(e < NET_TOL);
    mt_network_free(net);
}

/* Max pooling on its own, against the reference: the stride-2 kernel with
 * every window it takes (3/2 pad 1 and 0, 2/2 pad 0 and 1, ceil_mode, rows of
 * one or several 8-output blocks with a partial last one, inputs narrower
 * than twice the output), and the generic kernel for the rest (stride 1 and
 * 3, pad 2). Then dense layers whose inputs are a multiple of 16 and not,
 * with outputs that are a multiple of the dense kernel's four rows and not. */
static void test_pool_and_dense_shapes(void **state) {
    (void)state;
    NEED_DEVICE();
    static const struct {
        int h, w, kernel, stride, pad, ceil;
    } pools[] = {
        {40, 37, 3, 2, 1, 0}, {36, 36, 3, 2, 1, 0}, {35, 35, 3, 2, 0, 1}, {34, 34, 2, 2, 0, 0}, {21, 30, 2, 2, 1, 1},
        {7, 5, 3, 2, 1, 0},   {9, 9, 3, 1, 1, 0},   {13, 20, 5, 2, 2, 0}, {17, 50, 3, 3, 1, 1},
    };
    char err[512];
    for (size_t k = 0; k < sizeof pools / sizeof pools[0]; k++) {
        mt_network *net = NULL;
        assert_int_equal(mt_network_new("pool", &net), MT_OK);
        int x = mt_network_add_input(net, "input", 2, 3, pools[k].h, pools[k].w);
        mt_network_add_pool(net, "mp", MT_LAYER_MAXPOOL, x, pools[k].kernel, pools[k].stride, pools[k].pad, pools[k].ceil);
        assert_int_equal(mt_network_status(net, err, sizeof err), MT_OK);
        double e = run_against_reference(net, NULL, NULL);
        print_message("maxpool %dx%d k%d s%d p%d ceil %d: max rel err %.3g\n", pools[k].h, pools[k].w, pools[k].kernel, pools[k].stride,
                      pools[k].pad, pools[k].ceil, e);
        assert_true(e == 0); /* a max is exact */
        mt_network_free(net);
    }
    /* inputs of 5*h*w: 45, 80, 5, 320; outputs that fill the kernel's blocks
     * of four rows or leave one to three rows of the last; batches of 1-3 */
    static const int dense[][4] = {{3, 3, 37, 2}, {4, 4, 37, 2}, {1, 1, 37, 2}, {8, 8, 1, 3}, {8, 8, 4, 1}, {3, 3, 6, 3}, {4, 4, 7, 1}};
    for (size_t k = 0; k < sizeof dense / sizeof dense[0]; k++) {
        mt_network *net = NULL;
        assert_int_equal(mt_network_new("dense", &net), MT_OK);
        int x = mt_network_add_input(net, "input", dense[k][3], 5, dense[k][0], dense[k][1]);
        int f = mt_network_add_flatten(net, "flatten", x);
        mt_network_add_dense(net, "fc", f, dense[k][2], 1, MT_ACT_RELU);
        assert_int_equal(mt_network_status(net, err, sizeof err), MT_OK);
        double e = run_against_reference(net, NULL, NULL);
        assert_true(e < NET_TOL);
        mt_network_free(net);
    }
}

/* A database with no records: every conv runs its default config. */
static void test_empty_database(void **state) {
    (void)state;
    NEED_DEVICE();
    char path[512], err[1024];
    snprintf(path, sizeof path, "%s/empty.db", g_dir);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    mt_db_close(db);
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    assert_int_equal(mt_db_open(path, &p, &db, err, sizeof err), MT_OK);
    mt_network *net = ops_network();
    mt_executor_stats s;
    double e = run_against_reference(net, db, &s);
    assert_true(e < NET_TOL);
    assert_int_equal(s.convs_from_db, 0);
    assert_int_equal(s.nconvs, 3);
    mt_network_free(net);
    mt_db_close(db);
}

/* ---- enormous but valid work: refused with the figures before any allocation ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The rule on given figures (no device needed). */
static void test_memory_fits(void **state) {
    (void)state;
    mt_device_info gpu;
    memset(&gpu, 0, sizeof gpu);
    snprintf(gpu.name, sizeof gpu.name, "test GPU");
    gpu.global_mem_bytes = (uint64_t)8 << 30;
    gpu.max_alloc_bytes = (uint64_t)2 << 30;
    const uint64_t GiB = (uint64_t)1 << 30;
    char err[512];
    mt_mem_need n = {.host_bytes = GiB, .device_bytes = 4 * GiB, .largest_buffer = GiB};
    assert_int_equal(mt__memory_fits(&gpu, 16 * GiB, "w", &n, err, sizeof err), MT_OK);
    n.largest_buffer = 3 * GiB;
    assert_int_equal(mt__memory_fits(&gpu, 16 * GiB, "w", &n, err, sizeof err), MT_RANGE);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, "device buffer of 3.0 GiB, more than the largest the device allocates (2.0 GiB"));
    n.largest_buffer = GiB;
    n.device_bytes = 9 * GiB;
    assert_int_equal(mt__memory_fits(&gpu, 16 * GiB, "w", &n, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "9.0 GiB of device memory, more than the device has (8.0 GiB"));
    /* The host keeps a tenth of what is available. */
    n.device_bytes = 4 * GiB;
    n.host_bytes = 9 * GiB;
    assert_int_equal(mt__memory_fits(&gpu, 10 * GiB, "w", &n, err, sizeof err), MT_OK);
    n.host_bytes = 9 * GiB + 1;
    assert_int_equal(mt__memory_fits(&gpu, 10 * GiB, "w", &n, err, sizeof err), MT_RANGE);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, "nine tenths of the 10.0 GiB available"));
    /* A CPU device's buffers are the host's memory. */
    mt_device_info cpu = gpu;
    cpu.is_cpu = 1;
    n.host_bytes = 6 * GiB;
    assert_int_equal(mt__memory_fits(&gpu, 10 * GiB, "w", &n, err, sizeof err), MT_OK);
    assert_int_equal(mt__memory_fits(&cpu, 10 * GiB, "w", &n, err, sizeof err), MT_RANGE);
    print_message("  %s\n", err);
    assert_non_null(strstr(err, "which is this host's CPU"));
    /* Unknown limits (0) are not checked. */
    mt_device_info unknown;
    memset(&unknown, 0, sizeof unknown);
    n.host_bytes = n.device_bytes = n.largest_buffer = (uint64_t)1 << 60;
    assert_int_equal(mt__memory_fits(&unknown, 0, "w", &n, err, sizeof err), MT_OK);
}

/* On this device and host: a workload of the largest valid tensors (8 GiB
 * each) and ResNet-18 on 2048x2048 images at batch 31 are refused within a
 * second. Where this machine could hold them after all, the check is
 * skipped (it would then run for hours). */
static void test_enormous_work(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[1024];
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=2047,h=1024,w=1024,k=2047,r=1,s=1", &wl, err, sizeof err), MT_OK);
    const uint64_t f = sizeof(float);
    uint64_t in = f * (uint64_t)mt_workload_input_elems(&wl), out = f * (uint64_t)mt_workload_output_elems(&wl);
    mt_mem_need n = {.host_bytes = in + 3 * out, .device_bytes = in + out, .largest_buffer = in};
    if (mt__check_memory(mt_device_get_info(g_dev), "w", &n, NULL, 0) == MT_OK) {
        print_message("skipped: this device and host could hold 8 GiB tensors; the bench would compute for hours\n");
        skip();
    }
    mt_conv_bench *b = NULL;
    double t0 = now_s();
    mt_status st = mt_conv_bench_new(g_dev, &wl, 1, &b, err, sizeof err);
    double el = now_s() - t0;
    print_message("  bench: %s in %.3f s: %s\n", mt_status_name(st), el, err);
    assert_int_equal(st, MT_RANGE);
    assert_null(b);
    assert_non_null(strstr(err, "GiB"));
    assert_true(el < 1.0);
    mt_network *net = NULL;
    /* Batch 31 (its first activation just within 2^31 elements): about 2x
     * what batch 16 needs, which the packed activation arena brought within
     * nine tenths of a 24 GiB host's free memory. */
    assert_int_equal(mt_network_create("resnet18", 31, 2048, &net, err, sizeof err), MT_OK);
    mt_executor *ex = NULL;
    err[0] = '\0';
    t0 = now_s();
    st = mt_executor_build(g_dev, net, NULL, &ex, err, sizeof err);
    el = now_s() - t0;
    print_message("  executor: %s in %.3f s: %s\n", mt_status_name(st), el, err);
    if (st == MT_OK) {
        mt_executor_free(ex);
        mt_network_free(net);
        print_message("skipped: this host could hold ResNet-18 at batch 31 on 2048x2048 images\n");
        skip();
    }
    assert_int_equal(st, MT_RANGE);
    assert_null(ex);
    assert_non_null(strstr(err, "resnet18 (input 31x3x2048x2048)"));
    assert_true(el < 1.0);
    mt_network_free(net);
}

/* ---- weights files (no device needed) ---- */

static mt_network *tiny_net(int k, int extra) {
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("tiny", &net), MT_OK);
    int x = mt_network_add_input(net, "input", 1, 3, 8, 8);
    mt_conv_spec s = mt_conv_spec_default(k, 3, 1, 1);
    s.batch_norm = 1;
    s.bn_name = "bn1";
    x = mt_network_add_conv(net, "conv1", x, &s);
    if (extra) x = mt_network_add_conv(net, "conv2", x, &s);
    x = mt_network_add_global_avgpool(net, "pool", x);
    x = mt_network_add_flatten(net, "flatten", x);
    mt_network_add_dense(net, "fc", x, 4, 1, MT_ACT_NONE);
    assert_int_equal(mt_network_status(net, NULL, 0), MT_OK);
    return net;
}

static unsigned char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void write_file(const char *path, const unsigned char *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void expect_refused(const char *path, const mt_network *net, mt_status want, const char *needle) {
    char err[1024] = "";
    mt_weights *w = (mt_weights *)0x1;
    mt_status st = mt_weights_load(path, net, &w, err, sizeof err);
    print_message("  refused (%s): %s\n", mt_status_name(st), err);
    assert_int_equal(st, want);
    assert_ptr_equal(w, (mt_weights *)0x1); /* untouched */
    assert_non_null(strstr(err, needle));
}

static void test_weights_file(void **state) {
    (void)state;
    char err[1024], path[512], bad[512];
    snprintf(path, sizeof path, "%s/tiny.mtw", g_dir);
    snprintf(bad, sizeof bad, "%s/bad.mtw", g_dir);
    mt_network *net = tiny_net(8, 0);
    mt_weights *w = NULL, *r = NULL;
    assert_int_equal(mt_weights_random(net, 5, &w, err, sizeof err), MT_OK);
    assert_int_equal(mt_weights_count(w), 7); /* conv1.weight, bn1 x4, fc.weight, fc.bias */
    assert_int_equal(mt_weights_save(w, path, err, sizeof err), MT_OK);
    assert_int_equal(mt_weights_load(path, net, &r, err, sizeof err), MT_OK);
    assert_int_equal(mt_weights_count(r), mt_weights_count(w));
    for (int i = 0; i < mt_weights_count(w); i++) {
        const char *name;
        const float *a, *b;
        int64_t n = 0;
        assert_int_equal(mt_weights_tensor(w, i, &name, NULL, NULL, &a), MT_OK);
        b = mt_weights_find(r, name, &n);
        assert_non_null(b);
        assert_memory_equal(a, b, sizeof(float) * (size_t)n);
    }
    mt_weights_free(r);

    size_t len;
    unsigned char *good = read_file(path, &len);
    /* truncated, at several places */
    size_t cuts[3] = {len - 1, len / 2, 10};
    for (int i = 0; i < 3; i++) {
        write_file(bad, good, cuts[i]);
        expect_refused(bad, net, MT_CORRUPT, i == 2 ? "not an mtgpu weights file" : "truncated");
    }
    /* one flipped bit in the data */
    unsigned char *copy = malloc(len);
    memcpy(copy, good, len);
    copy[len - 20] ^= 0x10;
    write_file(bad, copy, len);
    expect_refused(bad, net, MT_CORRUPT, "checksum mismatch");
    /* bad magic, future version */
    memcpy(copy, good, len);
    copy[0] = 'X';
    write_file(bad, copy, len);
    expect_refused(bad, net, MT_CORRUPT, "not an mtgpu weights file");
    memcpy(copy, good, len);
    copy[8] = 99;
    write_file(bad, copy, len);
    expect_refused(bad, net, MT_CORRUPT, "version 99");
    free(copy);
    unsigned char *good_copy = good; /* kept for the checks below */
    /* wrong shape: the same names with 16 channels */
    mt_network *wide = tiny_net(16, 0);
    expect_refused(path, wide, MT_CORRUPT, "has shape 8x3x3x3, the network needs 16x3x3x3");
    /* missing: a network with one more conv */
    mt_network *deeper = tiny_net(8, 1);
    expect_refused(path, deeper, MT_NOT_FOUND, "conv2.weight");
    /* missing file */
    snprintf(bad, sizeof bad, "%s/none.mtw", g_dir);
    expect_refused(bad, net, MT_IO, "cannot open");
    /* files that never end or are far too long: refused before any read */
    expect_refused("/dev/zero", net, MT_IO, "character device");
    snprintf(bad, sizeof bad, "%s/fifo.mtw", g_dir);
    assert_int_equal(mkfifo(bad, 0600), 0);
    expect_refused(bad, net, MT_IO, "FIFO");
    unlink(bad);
    snprintf(bad, sizeof bad, "%s/sparse.mtw", g_dir);
    write_file(bad, good_copy, 16);
    assert_int_equal(truncate(bad, (off_t)30 << 30), 0);
    expect_refused(bad, net, MT_CORRUPT, "32212254720 bytes");
    /* one byte too many: longer than this network's weights file can be */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, good_copy, len);
    longer[len] = 0;
    write_file(bad, longer, len + 1);
    expect_refused(bad, net, MT_CORRUPT, "tiny");
    /* a dimension of 2^31 that makes too many elements: the message says so,
     * naming no innocent dimension (conv1.weight's dims start at byte 36) */
    memcpy(longer, good_copy, len);
    for (int i = 0; i < 8; i++) longer[36 + i] = (unsigned char)((UINT64_C(1) << 31) >> (8 * i));
    write_file(bad, longer, len);
    expect_refused(bad, net, MT_CORRUPT, "more than 2^34 elements (dimensions 0..2 multiply to 19327352832)");
    /* 2^31 x 8 = 2^34 elements, then a third dimension of 2^31: the product
     * passes 64 bits (the fuzzer's find), and the check must not wrap */
    for (int i = 0; i < 8; i++) {
        longer[44 + i] = (unsigned char)(UINT64_C(8) >> (8 * i));
        longer[52 + i] = (unsigned char)((UINT64_C(1) << 31) >> (8 * i));
    }
    write_file(bad, longer, len);
    expect_refused(bad, net, MT_CORRUPT, "more than 2^34 elements (dimensions 0..2 multiply to more than 2^64)");
    memcpy(longer, good_copy, len);
    for (int i = 0; i < 8; i++) longer[36 + i] = (unsigned char)(((UINT64_C(1) << 31) + 1) >> (8 * i));
    write_file(bad, longer, len);
    expect_refused(bad, net, MT_CORRUPT, "dimension 0 of size 2147483649 (1..2^31 allowed)");
    free(longer);
    free(good_copy);
    unlink(bad);
    /* the executor refuses weights of another network */
    if (g_dev) {
        mt_executor *ex = NULL;
        mt_executor_params p = mt_executor_default_params();
        p.weights = w;
        assert_int_not_equal(mt_executor_build(g_dev, wide, &p, &ex, err, sizeof err), MT_OK);
        print_message("  executor refused: %s\n", err);
        assert_null(ex);
        assert_non_null(strstr(err, "conv1"));
    }
    mt_network_free(wide);
    mt_network_free(deeper);
    mt_weights_free(w);
    mt_network_free(net);
}

/* ---- seeds of fuzz/fuzz_weights.c, written by this test ---- */

/* The network fuzz/fuzz_weights.c loads every input against (the same
 * definition: keep the two in step). */
static mt_network *fuzz_weights_net(void) {
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("fuzz", &net), MT_OK);
    int x = mt_network_add_input(net, "input", 1, 2, 6, 6);
    mt_conv_spec s = mt_conv_spec_default(4, 3, 1, 1);
    s.batch_norm = 1;
    s.bn_name = "bn1";
    x = mt_network_add_conv(net, "conv1", x, &s);
    x = mt_network_add_global_avgpool(net, "pool", x);
    x = mt_network_add_flatten(net, "flatten", x);
    mt_network_add_dense(net, "fc", x, 3, 1, MT_ACT_NONE);
    assert_int_equal(mt_network_status(net, NULL, 0), MT_OK);
    return net;
}

/* fuzz/corpus/weights/valid is a weights file of the harness's network
 * (seeded random values): what this test writes, byte for byte, and what
 * mt_weights_load accepts, so that the fuzzer starts inside the format.
 * MTGPU_WRITE_FUZZ_SEEDS=DIR writes the seeds into DIR instead (to refresh
 * the corpus after a format change). */
static void test_fuzz_weights_seeds(void **state) {
    (void)state;
    mt_network *net = fuzz_weights_net();
    mt_weights *w = NULL;
    char err[1024], path[600], corpus[1024];
    assert_int_equal(mt_weights_random(net, 7, &w, err, sizeof err), MT_OK);
    const char *out = getenv("MTGPU_WRITE_FUZZ_SEEDS");
    snprintf(path, sizeof path, "%s/%s", out && *out ? out : g_dir, out && *out ? "valid" : "fuzz-seed.mtw");
    assert_int_equal(mt_weights_save(w, path, err, sizeof err), MT_OK);
    mt_weights *back = NULL;
    assert_int_equal(mt_weights_load(path, net, &back, err, sizeof err), MT_OK);
    mt_weights_free(back);
    size_t len = 0;
    unsigned char *made = read_file(path, &len);
    print_message("  seed: %zu bytes (the fuzzer's -max_len must be at least this)\n", len);
    assert_true(len <= 8192); /* fuzz/run.sh's -max_len */
    if (out && *out) {
        snprintf(path, sizeof path, "%s/truncated", out);
        write_file(path, made, len / 2);
        print_message("  seeds written to %s\n", out);
    } else {
        /* CMake compiles with absolute source paths: the corpus sits beside this file's folder. */
        snprintf(corpus, sizeof corpus, "%s", __FILE__);
        char *slash = strrchr(corpus, '/');
        if (slash) snprintf(slash, sizeof corpus - (size_t)(slash - corpus), "/../fuzz/corpus/weights/valid");
        FILE *f = fopen(corpus, "rb");
        if (!f) {
            print_message("skipped: the corpus is not beside this source (%s)\n", corpus);
            free(made);
            mt_weights_free(w);
            mt_network_free(net);
            skip();
        }
        fclose(f);
        size_t clen = 0;
        unsigned char *committed = read_file(corpus, &clen);
        assert_int_equal(clen, len);
        assert_memory_equal(committed, made, len);
        free(committed);
        assert_int_equal(mt_weights_load(corpus, net, &back, err, sizeof err), MT_OK);
        mt_weights_free(back);
    }
    free(made);
    mt_weights_free(w);
    mt_network_free(net);
}

/* ---- the embedding API from several threads ---- */

#define EMBED_THREADS 4
#define EMBED_WORKLOADS 3
static const char *const g_embed_wl[EMBED_WORKLOADS] = {
    "n=1,c=16,h=12,w=12,k=16,r=3,s=3,pad=1",
    "n=1,c=8,h=10,w=10,k=24,r=1,s=1",
    "n=1,c=16,h=9,w=9,k=16,r=3,s=3,pad=1,stride=2,groups=16",
};

typedef struct {
    mt_embed *e;
    int id;
    const mt_conv_kernel *got[EMBED_WORKLOADS];
    double err[EMBED_WORKLOADS];
    mt_status st;
    char msg[1024];
} embed_job;

static void *embed_worker(void *arg) {
    embed_job *j = arg;
    j->st = MT_OK;
    for (int r = 0; r < EMBED_WORKLOADS && j->st == MT_OK; r++) {
        int i = (r + j->id) % EMBED_WORKLOADS; /* threads ask in different orders */
        mt_workload wl;
        if ((j->st = mt_workload_parse(g_embed_wl[i], &wl, j->msg, sizeof j->msg)) != MT_OK) break;
        if ((j->st = mt_embed_get_conv(j->e, &wl, &j->got[i], j->msg, sizeof j->msg)) != MT_OK) break;
        int64_t ni = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), no = mt_workload_output_elems(&wl);
        float *x = malloc(sizeof(float) * (size_t)ni), *w = malloc(sizeof(float) * (size_t)nw);
        float *y = malloc(sizeof(float) * (size_t)no), *ref = malloc(sizeof(float) * (size_t)no);
        mt_dbuf *dx = NULL, *dw = NULL, *dy = NULL;
        mt_device *dev = mt_embed_device(j->e);
        if (!x || !w || !y || !ref) j->st = MT_NOMEM;
        if (j->st == MT_OK) {
            mt_fill_random(x, ni, 100 + (uint64_t)j->id);
            mt_fill_random(w, nw, 200 + (uint64_t)j->id);
            mt_conv_reference(&wl, x, w, ref);
            if ((j->st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)ni, &dx)) == MT_OK &&
                (j->st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)nw, &dw)) == MT_OK &&
                (j->st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)no, &dy)) == MT_OK &&
                (j->st = mt_dbuf_write(dev, dx, 0, x, sizeof(float) * (size_t)ni)) == MT_OK &&
                (j->st = mt_dbuf_write(dev, dw, 0, w, sizeof(float) * (size_t)nw)) == MT_OK)
                j->st = mt_conv_kernel_launch(j->e, j->got[i], dx, dw, dy, NULL, j->msg, sizeof j->msg);
            /* A too-small output buffer is refused before launching. */
            if (j->st == MT_OK && mt_conv_kernel_launch(j->e, j->got[i], dx, dw, dx, NULL, NULL, 0) != MT_INVALID_ARG &&
                ni < no)
                j->st = MT_WRONG_RESULT;
            if (j->st == MT_OK) j->st = mt_dbuf_read(dev, dy, 0, y, sizeof(float) * (size_t)no);
            if (j->st == MT_OK) j->st = mt_compare(y, ref, no, &j->err[i], NULL);
        }
        mt_dbuf_free(dx);
        mt_dbuf_free(dw);
        mt_dbuf_free(dy);
        free(x);
        free(w);
        free(y);
        free(ref);
    }
    return NULL;
}

static void test_embed_threads(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[1024], path[512];
    snprintf(path, sizeof path, "%s/embed.db", g_dir);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK); /* create it */
    mt_db_close(db);
    mt_embed_params p = mt_embed_default_params();
    p.db_path = path;
    p.device = g_dev;
    mt_embed *e = NULL;
    assert_int_equal(mt_embed_open(&p, &e, err, sizeof err), MT_OK);
    embed_job jobs[EMBED_THREADS];
    pthread_t th[EMBED_THREADS];
    memset(jobs, 0, sizeof jobs);
    for (int t = 0; t < EMBED_THREADS; t++) {
        jobs[t].e = e;
        jobs[t].id = t;
        assert_int_equal(pthread_create(&th[t], NULL, embed_worker, &jobs[t]), 0);
    }
    for (int t = 0; t < EMBED_THREADS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < EMBED_THREADS; t++) {
        if (jobs[t].st != MT_OK) print_message("thread %d: %s: %s\n", t, mt_status_name(jobs[t].st), jobs[t].msg);
        assert_int_equal(jobs[t].st, MT_OK);
        for (int i = 0; i < EMBED_WORKLOADS; i++) {
            assert_ptr_equal(jobs[t].got[i], jobs[0].got[i]); /* the same prepared kernel */
            assert_true(jobs[t].err[i] < 1e-5);
        }
    }
    for (int i = 0; i < EMBED_WORKLOADS; i++) {
        mt_conv_kernel_info info;
        mt_conv_kernel_get_info(jobs[0].got[i], &info);
        print_message("%s: %s %s (%s) grid %lldx%lldx%lld block %lldx%lldx%lld\n", g_embed_wl[i], info.template_name, info.config,
                      info.from_db ? "tuned" : "default", (long long)info.grid[0], (long long)info.grid[1], (long long)info.grid[2],
                      (long long)info.block[0], (long long)info.block[1], (long long)info.block[2]);
        assert_int_equal(info.from_db, 0);
        assert_non_null(mt_conv_kernel_source(jobs[0].got[i]));
        assert_non_null(strstr(mt_conv_kernel_source(jobs[0].got[i]), info.kernel_name));
    }
    /* Distinct workloads give distinct kernels. */
    assert_ptr_not_equal(jobs[0].got[0], jobs[0].got[1]);
    mt_embed_close(e);
    /* A missing database is an error, not an empty one. */
    snprintf(path, sizeof path, "%s/missing.db", g_dir);
    p.db_path = path;
    e = NULL;
    assert_int_equal(mt_embed_open(&p, &e, err, sizeof err), MT_IO);
    assert_null(e);
}

/* An inference server's database baked into a read-only image: a WAL-mode
 * file with no -wal or -shm beside it, in a place no one can write (a
 * tmpfs remounted read-only, which stops root too; or, for a user who is
 * not root, a directory of mode 0555). mt_embed_open reads it and serves
 * its record. */
static void test_embed_readonly_media(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[1024], dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ro-embed", g_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    int mounted = 0;
    if (geteuid() == 0) {
        if (mount("tmpfs", dir, "tmpfs", 0, "size=4m") != 0) {
            print_message("skipped: root is stopped only by a read-only mount, and a tmpfs cannot be mounted here: %s\n", strerror(errno));
            rmdir(dir);
            skip();
        }
        mounted = 1;
    }
    snprintf(path, sizeof path, "%s/x.db", dir);
    mt_workload wl;
    assert_int_equal(mt_workload_parse(g_embed_wl[1], &wl, NULL, 0), MT_OK);
    mt_select_query q = mt_select_query_default(NULL, &wl, mt_device_get_info(g_dev));
    q.layouts = 1u << MT_WEIGHTS_OIHW;
    mt_select_result sel;
    assert_int_equal(mt_select_config(&q, &sel, err, sizeof err), MT_OK);
    mt_record rec = sel.rec;
    mt_select_result_free(&sel);
    rec.ncosts = 1;
    rec.costs_ms[0] = rec.median_ms = 0.125;
    snprintf(rec.source, sizeof rec.source, "measured");
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    assert_int_equal(mt_db_put_device(db, mt_device_get_info(g_dev), NULL, 0), MT_OK);
    assert_int_equal(mt_db_put_record(db, &rec, NULL, err, sizeof err), MT_OK);
    mt_db_close(db);
    if (mounted) assert_int_equal(mount(NULL, dir, NULL, MS_REMOUNT | MS_RDONLY, NULL), 0);
    else assert_int_equal(chmod(dir, 0555), 0);
    mt_embed_params p = mt_embed_default_params();
    p.db_path = path;
    p.device = g_dev;
    mt_embed *e = NULL;
    mt_status st = mt_embed_open(&p, &e, err, sizeof err);
    print_message("read-only media (%s): mt_embed_open: %s %s\n", mounted ? "read-only tmpfs" : "mode 0555 directory", mt_status_name(st),
                  st == MT_OK ? "" : err);
    mt_conv_kernel_info info;
    memset(&info, 0, sizeof info);
    const mt_conv_kernel *k = NULL;
    mt_status gst = st == MT_OK ? mt_embed_get_conv(e, &wl, &k, err, sizeof err) : st;
    char config[MT_RECORD_CONFIG_LEN] = "";
    if (gst == MT_OK) {
        mt_conv_kernel_get_info(k, &info);
        snprintf(config, sizeof config, "%s", info.config); /* the kernel owns it */
    }
    mt_embed_close(e);
    char shm[620];
    snprintf(shm, sizeof shm, "%s-shm", path);
    int shm_made = access(shm, F_OK) == 0;
    if (mounted) assert_int_equal(umount(dir), 0);
    else assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(st, MT_OK);
    assert_int_equal(gst, MT_OK);
    assert_int_equal(info.from_db, 1);
    assert_true(info.tuned_ms == 0.125);
    assert_string_equal(config, rec.config);
    assert_false(shm_made);
}

/* A valid kvec config of wl on the test device (the first of a seeded draw). */
/* A valid config of template `name` for wl, in text form, drawn with seed;
 * with tile > 0 (wino) one of that output tile. */
static void valid_config(const char *name, const mt_workload *wl, int tile, uint64_t seed, char *text, size_t textlen) {
    const mt_template *t = mt_template_find(name);
    assert_non_null(t);
    mt_space sp;
    assert_int_equal(mt_template_space(t, wl, &sp), MT_OK);
    mt_device_limits lim = mt_device_get_limits(g_dev);
    uint64_t rng = seed;
    for (int d = 0; d < 4000; d++) {
        mt_config cfg;
        mt_space_random(&sp, &rng, &cfg);
        if ((tile <= 0 || mt_config_value(&sp, &cfg, "tile") == tile) && mt_template_check(t, wl, &sp, &cfg, &lim, NULL, 0) == MT_OK) {
            assert_true(mt_config_format(&sp, &cfg, text, textlen) > 0);
            mt_space_free(&sp);
            return;
        }
    }
    fail_msg("no valid %s config drawn", name);
}

/* Opens (creating) the database g_dir/name with this device's row. */
static mt_db *records_db(const char *name, char *path, size_t pathlen) {
    char err[1024];
    snprintf(path, pathlen, "%s/%s", g_dir, name);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    assert_int_equal(mt_db_put_device(db, mt_device_get_info(g_dev), NULL, 0), MT_OK);
    return db;
}

/* Stores, for every convolution of net, one record of template `tmpl` (a
 * valid config drawn as valid_config does) taking `ms`; returns how many, the
 * last one's workload in *last. */
static int put_conv_records(mt_db *db, const mt_network *net, const char *tmpl, int tile, uint64_t seed, double ms, mt_workload *last) {
    const mt_device_info *di = mt_device_get_info(g_dev);
    int n = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        mt_record rec;
        mt_record_init(&rec);
        rec.wl = mt_layer_kernel_workload(l); /* what the executor looks up */
        snprintf(rec.template_name, sizeof rec.template_name, "%s", tmpl);
        valid_config(tmpl, &rec.wl, tile, seed, rec.config, sizeof rec.config);
        memcpy(rec.device, di->fingerprint, sizeof rec.device);
        rec.ncosts = 1;
        rec.costs_ms[0] = rec.median_ms = ms;
        assert_int_equal(mt_db_put_record(db, &rec, NULL, NULL, 0), MT_OK);
        *last = rec.wl;
        n++;
    }
    return n;
}

/* Strided 1x1 layers run as a copy of every stride-th pixel and a stride-1
 * kernel (mt_layer_kernel_workload): a downsampling on an odd-sized input
 * added as another conv's residual, and one strided along x only, smaller,
 * reusing the shared copy buffer. Both against the reference, with the copy
 * counted in the launches and the workspace, and the database looked up
 * by the stride-1 workload. */
static void test_strided_pointwise(void **state) {
    (void)state;
    NEED_DEVICE();
    char err[1024];
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("strided1x1", &net), MT_OK);
    int x = mt_network_add_input(net, "input", 1, 16, 15, 15);
    mt_conv_spec down = mt_conv_spec_default(32, 1, 2, 0);
    down.batch_norm = 1;
    int d = mt_network_add_conv(net, "downsample", x, &down);
    mt_conv_spec main = mt_conv_spec_default(32, 3, 2, 1);
    main.bias = 1;
    main.act = MT_ACT_RELU;
    int m = mt_network_add_conv(net, "main", x, &main);
    mt_conv_spec join = mt_conv_spec_default(32, 1, 1, 0);
    join.residual = d;
    join.act = MT_ACT_RELU;
    int j = mt_network_add_conv(net, "join", m, &join);
    mt_conv_spec narrow = mt_conv_spec_default(8, 1, 1, 0);
    narrow.stride_w = 2;
    narrow.bias = 1;
    int n = mt_network_add_conv(net, "narrow", j, &narrow);
    mt_network_add_global_avgpool(net, "pool", n);
    assert_int_equal(mt_network_status(net, err, sizeof err), MT_OK);
    mt_workload kw = mt_layer_kernel_workload(mt_network_layer(net, d));
    assert_int_equal(kw.h, 8);
    assert_int_equal(kw.w, 8);
    assert_int_equal(kw.stride_h, 1);
    kw = mt_layer_kernel_workload(mt_network_layer(net, n));
    assert_int_equal(kw.h, 8);
    assert_int_equal(kw.w, 4);
    assert_int_equal(kw.stride_w, 1);
    kw = mt_layer_kernel_workload(mt_network_layer(net, m));
    assert_int_equal(kw.stride_h, 2); /* a 3x3 keeps its stride */

    mt_executor_stats s;
    double e = run_against_reference(net, NULL, &s);
    print_message("strided 1x1 layers: max rel err %.3g\n", e);
    assert_true(e < NET_TOL);
    /* 4 convolutions, 2 copies, the pooling. */
    assert_int_equal(s.launches, 7);
    assert_true(s.workspace_bytes >= (int64_t)sizeof(float) * 16 * 8 * 8);

    /* A record of the stride-1 workload is what the executor runs. */
    char path[512];
    mt_db *db = records_db("strided1x1.db", path, sizeof path);
    mt_workload last;
    assert_int_equal(put_conv_records(db, net, "kvec", 0, 3, 1e-6, &last), 4);
    e = run_against_reference(net, db, &s);
    print_message("strided 1x1 layers, from records: max rel err %.3g\n", e);
    assert_true(e < NET_TOL);
    assert_int_equal(s.convs_from_db, 4);
    mt_db_close(db);
    mt_network_free(net);
}

/* Records whose fastest config is a Winograd one: the executor picks it
 * through the database like any template, transforms the weights into the
 * layout of its tile size when it is built, and matches the reference. When
 * a faster record of another tile size arrives, the next build reads the
 * weights in that tile's layout (the transform is redone, never reused from
 * the previous layout). The embedding API hands out a wino kernel only to a
 * caller that accepts its layout. */
static void test_winograd_records(void **state) {
    (void)state;
    NEED_DEVICE();
    char path[512], err[1024];
    mt_db *db = records_db("wino.db", path, sizeof path);
    mt_network *net = tiny_net(20, 1); /* two 3x3 stride-1 convolutions on 8x8, k = 20 */
    static const int tiles[] = {4, 2, 6};
    mt_workload last;
    for (int ti = 0; ti < 3; ti++) {
        const int m = tiles[ti];
        /* each tile size's records beat the previous ones */
        assert_int_equal(put_conv_records(db, net, "wino", m, 5 + (uint64_t)m, 1e-6 / (ti + 1), &last), 2);
        mt_executor_params p = mt_executor_default_params();
        mt_weights *w = NULL;
        assert_int_equal(mt_weights_random(net, 7, &w, err, sizeof err), MT_OK);
        p.db = db;
        p.weights = w;
        mt_executor *ex = NULL;
        assert_int_equal(mt_executor_build(g_dev, net, &p, &ex, err, sizeof err), MT_OK);
        char want[16];
        snprintf(want, sizeof want, "tile=%d,", m);
        for (int i = 0; i < mt_network_num_layers(net); i++) {
            const char *tn, *cfg;
            int from_db;
            if (mt_executor_conv_choice(ex, i, &tn, &cfg, &from_db) != MT_OK) continue;
            assert_string_equal(tn, "wino");
            assert_true(from_db);
            assert_non_null(strstr(cfg, want));
        }
        mt_executor_free(ex);
        mt_weights_free(w);
        mt_executor_stats s;
        double e = run_against_reference(net, db, &s);
        print_message("wino F(%dx%d) records: max rel err %.3g\n", m, m, e);
        assert_true(e < NET_TOL);
        assert_int_equal(s.convs_from_db, 2);
    }
    mt_db_close(db);
    for (int accept = 0; accept < 2; accept++) {
        mt_embed_params p = mt_embed_default_params();
        p.db_path = path;
        p.device = g_dev;
        p.weight_layouts = accept ? MT_WEIGHT_LAYOUTS_ALL : (1u << MT_WEIGHTS_OIHW16O);
        mt_embed *em = NULL;
        assert_int_equal(mt_embed_open(&p, &em, err, sizeof err), MT_OK);
        const mt_conv_kernel *k = NULL;
        assert_int_equal(mt_embed_get_conv(em, &last, &k, err, sizeof err), MT_OK);
        mt_conv_kernel_info info;
        mt_conv_kernel_get_info(k, &info);
        assert_string_equal(info.template_name, accept ? "wino" : "kvec");
        assert_int_equal(info.weight_layout, accept ? MT_WEIGHTS_WINO6 : MT_WEIGHTS_OIHW16O);
        mt_embed_close(em);
    }
    mt_network_free(net);
}

/* Records whose best template reads packed weights (kvec, OIHW16o): the
 * executor converts the weights for them and matches the reference; the
 * embedding API passes them over unless the caller accepts that layout, and
 * then its kernel computes the right result on packed weights. */
static void test_packed_weight_records(void **state) {
    (void)state;
    NEED_DEVICE();
    char path[512], err[1024];
    mt_db *db = records_db("kvec.db", path, sizeof path);
    mt_network *net = tiny_net(20, 1); /* k = 20: a padded last channel block */
    mt_workload last;
    assert_int_equal(put_conv_records(db, net, "kvec", 0, 99, 1e-6 /* faster than anything */, &last), 2);
    mt_executor_stats s;
    double e = run_against_reference(net, db, &s);
    assert_true(e < NET_TOL);
    assert_int_equal(s.convs_from_db, 2);
    mt_db_close(db);

    for (int accept = 0; accept < 2; accept++) {
        mt_embed_params p = mt_embed_default_params();
        p.db_path = path;
        p.device = g_dev;
        p.weight_layouts = accept ? MT_WEIGHT_LAYOUTS_ALL : 0;
        mt_embed *em = NULL;
        assert_int_equal(mt_embed_open(&p, &em, err, sizeof err), MT_OK);
        const mt_conv_kernel *k = NULL;
        assert_int_equal(mt_embed_get_conv(em, &last, &k, err, sizeof err), MT_OK);
        mt_conv_kernel_info info;
        mt_conv_kernel_get_info(k, &info);
        print_message("embed, weight layouts %s: %s %s\n", accept ? "all" : "OIHW only", info.template_name, info.config);
        assert_string_equal(info.template_name, accept ? "kvec" : "gemm");
        assert_int_equal(info.from_db, accept);
        assert_int_equal(info.weight_layout, accept ? MT_WEIGHTS_OIHW16O : MT_WEIGHTS_OIHW);
        int64_t ni = mt_workload_input_elems(&last), nw = mt_workload_weight_elems(&last), no = mt_workload_output_elems(&last);
        int64_t nwl = mt_weight_layout_elems(info.weight_layout, &last);
        float *x = malloc(sizeof(float) * (size_t)ni), *w = malloc(sizeof(float) * (size_t)nw), *wl = malloc(sizeof(float) * (size_t)nwl);
        float *y = malloc(sizeof(float) * (size_t)no), *ref = malloc(sizeof(float) * (size_t)no);
        assert_true(x && w && wl && y && ref);
        mt_fill_random(x, ni, 5);
        mt_fill_random(w, nw, 6);
        assert_int_equal(mt_conv_reference(&last, x, w, ref), MT_OK);
        assert_int_equal(mt_weights_to_layout(info.weight_layout, &last, w, wl), MT_OK);
        mt_dbuf *dx = NULL, *dw = NULL, *dy = NULL;
        assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * (size_t)ni, &dx), MT_OK);
        assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * (size_t)nwl, &dw), MT_OK);
        assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * (size_t)no, &dy), MT_OK);
        assert_int_equal(mt_dbuf_write(g_dev, dx, 0, x, sizeof(float) * (size_t)ni), MT_OK);
        assert_int_equal(mt_dbuf_write(g_dev, dw, 0, wl, sizeof(float) * (size_t)nwl), MT_OK);
        assert_int_equal(mt_conv_kernel_launch(em, k, dx, dw, dy, NULL, err, sizeof err), MT_OK);
        assert_int_equal(mt_dbuf_read(g_dev, dy, 0, y, sizeof(float) * (size_t)no), MT_OK);
        double ce = 1;
        assert_int_equal(mt_compare(y, ref, no, &ce, NULL), MT_OK);
        assert_true(ce < 1e-5);
        mt_dbuf_free(dx);
        mt_dbuf_free(dw);
        mt_dbuf_free(dy);
        free(x);
        free(w);
        free(wl);
        free(y);
        free(ref);
        mt_embed_close(em);
    }
    /* A mask of unknown layouts is refused. */
    mt_embed_params bad = mt_embed_default_params();
    bad.db_path = path;
    bad.device = g_dev;
    bad.weight_layouts = 1u << 30;
    mt_embed *em = NULL;
    assert_int_equal(mt_embed_open(&bad, &em, err, sizeof err), MT_INVALID_ARG);
    mt_network_free(net);
}

/* Stores a kvec record of wl with config text cfg and an isolated time of ms. */
static void put_kvec_record(mt_db *db, const mt_workload *wl, const char *cfg, double ms) {
    const mt_device_info *di = mt_device_get_info(g_dev);
    mt_record rec;
    mt_record_init(&rec);
    rec.wl = *wl;
    snprintf(rec.template_name, sizeof rec.template_name, "kvec");
    snprintf(rec.config, sizeof rec.config, "%s", cfg);
    memcpy(rec.device, di->fingerprint, sizeof rec.device);
    rec.ncosts = 1;
    rec.costs_ms[0] = rec.median_ms = ms;
    assert_int_equal(mt_db_put_record(db, &rec, NULL, NULL, 0), MT_OK);
}

/* The refinement's paired estimate: a slow spell that starts inside round 2
 * (after set 0's block) and covers rounds 3 and 4 doubles every time from
 * there. Set 1 is 10% faster in every round, yet the median over all its
 * blocks (1.8) is above set 0's (1.0); per round it is 0.9x. Rounds with a
 * missing time are left out; with none left the ratio is 1. */
static void test_refine_paired_ratios(void **state) {
    (void)state;
    const double t[] = {1.0, 1.0, 1.0, 2.0, 2.0, /* set 0 */
                        0.9, 0.9, 1.8, 1.8, 1.8, /* set 1 */
                        1.0, 2.0, 2.0, 4.0, 0.0 /* set 2: 1, 2, 2, 2 and a missing round */};
    double ratio[3];
    mt_refine_paired_ratios(t, 3, 5, ratio);
    assert_true(fabs(ratio[0] - 1.0) < 1e-12);
    assert_true(fabs(ratio[1] - 0.9) < 1e-12);
    assert_true(fabs(ratio[2] - 2.0) < 1e-12);
    const double none[] = {0.0, 0.0, 1.0, 2.0};
    mt_refine_paired_ratios(none, 2, 2, ratio);
    assert_true(ratio[1] == 1.0);
}

/* The whole-pass check's verdict: the lowest of the kept configs', the
 * fastest records' and the defaults' (1) ratio, ties to the kept configs
 * and then the fastest records. */
static void test_refine_verdict(void **state) {
    (void)state;
    assert_int_equal(mt_refine_verdict(0.95, 0.97), MT_REFINE_KEPT);
    assert_int_equal(mt_refine_verdict(1.0, 1.0), MT_REFINE_KEPT);
    assert_int_equal(mt_refine_verdict(0.97, 0.97), MT_REFINE_KEPT);
    assert_int_equal(mt_refine_verdict(0.98, 0.97), MT_REFINE_FELL_BACK_FASTEST);
    assert_int_equal(mt_refine_verdict(1.02, 0.99), MT_REFINE_FELL_BACK_FASTEST);
    assert_int_equal(mt_refine_verdict(1.02, 1.05), MT_REFINE_FELL_BACK_DEFAULTS);
    assert_int_equal(mt_refine_verdict(1.001, 1.0), MT_REFINE_FELL_BACK_FASTEST);
}

/* In-network refinement on a network whose fastest records (by their stored
 * times) are in truth much slower kernels: one scalar output per work-item,
 * against the default config as the second record. The refinement must keep
 * the second, store it as a preference that the executor then runs (output
 * still right), store nothing on a dry run, and remove the preference once
 * the records say the good config is the fastest. */
static void test_refine(void **state) {
    (void)state;
    NEED_DEVICE();
    char path[512], err[2048];
    snprintf(path, sizeof path, "%s/refine.db", g_dir);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    const mt_device_info *di = mt_device_get_info(g_dev);
    assert_int_equal(mt_db_put_device(db, di, NULL, 0), MT_OK);
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("refinenet", &net), MT_OK);
    /* 12x12: the CPU default template of both layers is kvec (records/select.c). */
    int x = mt_network_add_input(net, "input", 1, 32, 12, 12);
    mt_conv_spec a = mt_conv_spec_default(64, 3, 1, 1);
    a.batch_norm = 1;
    x = mt_network_add_conv(net, "conv1", x, &a);
    mt_conv_spec b = mt_conv_spec_default(64, 1, 1, 0);
    b.bias = 1;
    x = mt_network_add_conv(net, "conv2", x, &b);
    mt_network_add_global_avgpool(net, "pool", x);
    assert_int_equal(mt_network_status(net, err, sizeof err), MT_OK);
    const char *slow = "thread_k=1,vec=4,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=1,unroll_rs=0,unroll_explicit=0";
    char good[2][MT_RECORD_CONFIG_LEN];
    mt_workload wls[2];
    for (int i = 0, c = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        wls[c] = l->conv.wl;
        const mt_template *t = mt_template_find("kvec");
        mt_space sp;
        mt_config cfg;
        assert_int_equal(mt_template_space(t, &l->conv.wl, &sp), MT_OK);
        assert_int_equal(mt_default_config(t, &l->conv.wl, di, &sp, &cfg, err, sizeof err), MT_OK);
        assert_true(mt_config_format(&sp, &cfg, good[c], sizeof good[c]) > 0);
        mt_space_free(&sp);
        assert_string_not_equal(good[c], slow);
        put_kvec_record(db, &l->conv.wl, slow, 0.001);
        put_kvec_record(db, &l->conv.wl, good[c], 0.002);
        c++;
    }
    mt_refine_params rp = mt_refine_default_params();
    rp.candidates = 2;
    rp.passes = 5;
    rp.store = 0;
    mt_refine_result r;
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_OK);
    assert_int_equal(r.nsets, 3);
    assert_int_equal(r.nchoices, 2);
    assert_int_equal(r.stored, 0);
    for (int c = 0; c < 2; c++) {
        const mt_refine_choice *ch = &r.choices[c];
        print_message("refine %d: rec1 %.3f ms, rec2 %.3f, default %.3f (same as %d), kept set %d\n", c, ch->ms[0], ch->ms[1], ch->ms[2],
                      ch->same_as[2], ch->chosen);
        assert_string_equal(ch->config[0], slow);
        assert_string_equal(ch->config[1], good[c]);
        assert_int_equal(ch->same_as[2], 1); /* the default is the second record */
        assert_int_equal(ch->chosen, 1);
        assert_true(ch->ms[1] < ch->ms[0]);
        assert_true(ch->ratio[0] == 1.0 && ch->ratio[1] < 1.0);
    }
    assert_true(r.chosen_ms < r.fastest_ms);
    /* The whole-pass check: the fastest records (scalar kernels) lose to
     * the defaults, which the kept configs are; whichever of those two wins
     * by noise, each workload keeps the good config. */
    print_message("refine check: kept / defaults %.3f, fastest / defaults %.3f, outcome %d\n", r.kept_vs_default, r.fastest_vs_default,
                  (int)r.outcome);
    assert_int_equal(r.check_rounds, MT_REFINE_CHECK_ROUNDS);
    assert_true(r.fastest_vs_default > 1.05 && r.kept_vs_default > 0.0);
    assert_int_equal(r.outcome, mt_refine_verdict(r.kept_vs_default, r.fastest_vs_default));
    assert_true(r.outcome == MT_REFINE_KEPT || r.outcome == MT_REFINE_FELL_BACK_DEFAULTS);
    assert_true(r.kept_pass_ms > 0 && r.fastest_pass_ms > r.kept_pass_ms && r.default_pass_ms > 0);
    for (int c = 0; c < 2; c++) assert_int_equal(r.choices[c].proposed, 1);
    mt_refine_result_free(&r);
    /* Without the defaults there is nothing to check against. */
    rp.defaults = 0;
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_OK);
    assert_int_equal(r.outcome, MT_REFINE_UNCHECKED);
    for (int c = 0; c < 2; c++) assert_int_equal(r.choices[c].chosen, r.choices[c].proposed);
    mt_refine_result_free(&r);
    rp.defaults = 1;
    mt_preference pref;
    assert_int_equal(mt_db_get_preference(db, &wls[0], di->fingerprint, &pref, NULL, 0), MT_NOT_FOUND); /* dry run */

    rp.store = 1;
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_OK);
    assert_int_equal(r.stored, 2);
    mt_refine_result_free(&r);
    for (int c = 0; c < 2; c++) {
        assert_int_equal(mt_db_get_preference(db, &wls[c], di->fingerprint, &pref, NULL, 0), MT_OK);
        assert_string_equal(pref.config, good[c]);
        assert_string_equal(pref.network, "refinenet");
        assert_true(pref.in_network_ms < pref.fastest_ms);
    }
    /* The executor now runs the preferred configs, and the output is right. */
    mt_executor_stats st;
    double e = run_against_reference(net, db, &st);
    assert_true(e < NET_TOL);
    assert_int_equal(st.convs_from_db, 2);
    mt_executor_params ep = mt_executor_default_params();
    ep.db = db;
    mt_executor *ex = NULL;
    assert_int_equal(mt_executor_build(g_dev, net, &ep, &ex, err, sizeof err), MT_OK);
    for (int i = 0, c = 0; i < mt_network_num_layers(net); i++) {
        if (mt_network_layer(net, i)->kind != MT_LAYER_CONV2D) continue;
        const char *tn = NULL, *cfg = NULL;
        int from_db = 0;
        assert_int_equal(mt_executor_conv_choice(ex, i, &tn, &cfg, &from_db), MT_OK);
        assert_string_equal(cfg, good[c++]);
    }
    mt_executor_free(ex);
    /* A pin runs its config whatever the database prefers; one that does
     * not build, or has no config, fails the build. */
    mt_conv_pin pin = {.wl = wls[0], .template_name = "kvec", .config = slow};
    ep.pins = &pin;
    ep.npins = 1;
    assert_int_equal(mt_executor_build(g_dev, net, &ep, &ex, err, sizeof err), MT_OK);
    for (int i = 0, c = 0; i < mt_network_num_layers(net); i++) {
        if (mt_network_layer(net, i)->kind != MT_LAYER_CONV2D) continue;
        const char *tn = NULL, *cfg = NULL;
        assert_int_equal(mt_executor_conv_choice(ex, i, &tn, &cfg, NULL), MT_OK);
        assert_string_equal(cfg, c == 0 ? slow : good[c]);
        c++;
    }
    assert_int_equal(mt_executor_run(ex, NULL, err, sizeof err), MT_OK);
    mt_executor_free(ex);
    pin.config = "thread_k=1,vec=4,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=99,unroll_rs=0,unroll_explicit=0";
    assert_int_equal(mt_executor_build(g_dev, net, &ep, &ex, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "pinned"));
    pin.config = NULL;
    assert_int_equal(mt_executor_build(g_dev, net, &ep, &ex, err, sizeof err), MT_INVALID_ARG);
    ep.pins = NULL;
    ep.npins = 0;
    ep.rank = -1;
    assert_int_equal(mt_executor_build(g_dev, net, &ep, &ex, err, sizeof err), MT_INVALID_ARG);

    /* New records make the good config the fastest: the next refinement
     * keeps the fastest record and removes the preferences. */
    mt_db_close(db);
    char sql[4096];
    snprintf(sql, sizeof sql, "UPDATE records SET median_ms = 1.0 WHERE config = '%s'", slow);
    {
        sqlite3 *h = NULL;
        assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(h);
    }
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_OK);
    for (int c = 0; c < 2; c++) {
        assert_string_equal(r.choices[c].config[0], good[c]);
        assert_int_equal(r.choices[c].chosen, 0);
    }
    assert_int_equal(r.removed, 2);
    assert_int_equal(r.stored, 0);
    mt_refine_result_free(&r);
    assert_int_equal(mt_db_get_preference(db, &wls[0], di->fingerprint, &pref, NULL, 0), MT_NOT_FOUND);
    /* Bad parameters. */
    rp.candidates = 0;
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_RANGE);
    rp.candidates = 2;
    rp.min_gain = 1.5;
    assert_int_equal(mt_network_refine(g_dev, net, db, &rp, &r, err, sizeof err), MT_RANGE);
    assert_int_equal(mt_network_refine(g_dev, net, NULL, NULL, &r, err, sizeof err), MT_INVALID_ARG);
    mt_db_close(db);
    mt_network_free(net);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/mtgpu-test-exec-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(NULL, &dp, &g_dev, g_dev_err, sizeof g_dev_err) != MT_OK) g_dev = NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_fits), cmocka_unit_test(test_enormous_work),
        cmocka_unit_test(test_activation_plans), cmocka_unit_test(test_weights_file), cmocka_unit_test(test_fuzz_weights_seeds),  cmocka_unit_test(test_every_op), cmocka_unit_test(test_pool_and_dense_shapes),     cmocka_unit_test(test_empty_database),
        cmocka_unit_test(test_embed_threads), cmocka_unit_test(test_embed_readonly_media), cmocka_unit_test(test_packed_weight_records),
        cmocka_unit_test(test_winograd_records), cmocka_unit_test(test_refine_paired_ratios), cmocka_unit_test(test_refine_verdict), cmocka_unit_test(test_refine), cmocka_unit_test(test_default_templates), cmocka_unit_test(test_strided_pointwise), cmocka_unit_test(test_resnet18),     cmocka_unit_test(test_squeezenet1_1),
        cmocka_unit_test(test_fuse_can), cmocka_unit_test(test_fused_launch), cmocka_unit_test(test_fused_offsets), cmocka_unit_test(test_input_between_passes), cmocka_unit_test(test_const_pack),
        cmocka_unit_test(test_fused_network),
        cmocka_unit_test(test_mobilenet_v2),  cmocka_unit_test(test_resnet50),     cmocka_unit_test(test_vgg16),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mt_device_close(g_dev);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return rc;
}
