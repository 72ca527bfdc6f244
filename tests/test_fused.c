/* Fused epilogues (mt_template_build_fused): every template, on the shared
 * convolution workloads, builds kernels that add a bias, add a residual and
 * apply ReLU / ReLU6 in their stores; each output is compared with the CPU
 * reference convolution followed by the same epilogue on the host. The
 * plain kernels are test_conv_harness's; this checks what the fusion adds:
 * the channel each bias is read for (groups, depthwise, tiles that overhang),
 * the residual read at the store's own index (vector and lane-by-lane
 * stores; from its own buffer and in place from the output), the parameter
 * order, and the activations. Fixed kvec configs cover both of its store
 * paths: vectors along a row (in chunks of 4, 2 and 1 columns) and lane by
 * lane where a tile overhangs the row, with channel and row overhang; others
 * its edge tiles (a reduction copy per edge tile, and the shared copy that
 * tests columns at run time when a row has more than four), its tiles
 * over flattened 1x1 images and those run in channel blocks. Fixed gemm
 * configs cover its chunked work-group order (a pixel block derived from its
 * chunk and its place in it, across rows and images). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtgpu/device.h"
#include "program.h"
#include "reference.h"
#include "template.h"

#include "conv_workloads.h"
#include "fused_check.h"
#include "default_device.h"

/* Kernels unrolling to more statements than this are not drawn (compile time). */
#define FUSED_MAX_UNROLLED 400
/* Random draws per (workload, template) to find a valid config. */
#define FUSED_MAX_DRAWS 200


typedef struct {
    const char *workload;
    const mt_template *t;
    int first_variant; /* each case tests two of the variants, in turn across cases */
    const char *config; /* a fixed config (both variants use it); NULL: random draws */
    char name[320];
} fused_case;

/* kvec's store paths, on a 14-wide output with 20 channels (not a multiple
 * of the channel vectors: channel overhang) and 9 rows. */
#define KVEC_STORE_WL "n=1,c=8,h=9,w=14,k=20,r=3,s=3,pad=1"
static const char *const kvec_store_configs[] = {
    /* 7 columns per work-item, 2 per group: rows end exactly, vector chunks 4+2+1 */
    "thread_k=1,vec=4,reg_k=2,thread_y=1,reg_y=2,thread_x=2,reg_x=7,unroll_rs=1,unroll_explicit=1",
    /* 5 columns: tiles overhang the row (vector or lane path per tile), rows overhang too */
    "thread_k=2,vec=8,reg_k=1,thread_y=2,reg_y=4,thread_x=1,reg_x=5,unroll_rs=0,unroll_explicit=0",
    /* 3 columns (chunks 2+1), 4 per group: the second group's tiles start at
     * or past the row's end */
    "thread_k=1,vec=16,reg_k=1,thread_y=1,reg_y=1,thread_x=4,reg_x=3,unroll_rs=2,unroll_explicit=1",
};
#define NKVEC_STORE (int)(sizeof kvec_store_configs / sizeof kvec_store_configs[0])

/* Workloads of kvec's channel-block cases (below and test_kvec_channel_block_grid). */
#define KVEC_BLOCK_WL_A "n=2,c=256,h=7,w=7,k=520,r=1,s=1"
#define KVEC_BLOCK_WL_B "n=1,c=128,h=5,w=9,k=100,r=1,s=1"

/* kvec's edge tiles: each gets a copy of the reduction with its first
 * column constant (up to 4 per row), more share one copy that tests columns
 * at run time. */
static const struct {
    const char *workload, *config;
} kvec_edge_cases[] = {
    /* 1-column tiles, 12 per row: edges at columns 0, 1, 10 and 11 (four copies) */
    {"n=1,c=3,h=23,w=23,k=20,r=7,s=7,stride=2,pad=3",
     "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=1,unroll_rs=1,unroll_explicit=1"},
    /* 2-column tiles, 2 per group: edges at columns 0 and 10 */
    {"n=1,c=3,h=23,w=23,k=20,r=7,s=7,stride=2,pad=3",
     "thread_k=1,vec=8,reg_k=1,thread_y=1,reg_y=2,thread_x=2,reg_x=2,unroll_rs=1,unroll_explicit=0"},
    /* six edge tiles (0-2 and 12-14): the shared run-time tested copy */
    {"n=1,c=3,h=15,w=15,k=16,r=7,s=7,stride=1,pad=3",
     "thread_k=1,vec=16,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=1,unroll_rs=1,unroll_explicit=1"},
    /* dilated, 4-column tiles: edges at 0 and 12 (which overhangs the 15 columns); s as a loop */
    {"n=1,c=4,h=17,w=19,k=8,r=3,s=5,pad=2,dilation=2",
     "thread_k=1,vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=4,unroll_rs=0,unroll_explicit=1"},
    /* Not edges: one-row tiles of unpadded stride-1 1x1 layers run over the
     * flattened image. 5-pixel tiles, 2 per group, wrap rows of 7; the last
     * group overhangs the 49 pixels, two images, channels overhang 20 */
    {"n=2,c=24,h=7,w=7,k=20,r=1,s=1",
     "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=2,reg_x=5,unroll_rs=1,unroll_explicit=1"},
    /* 6-pixel tiles on rows of 9 (45 pixels, the last tile 3 past them) */
    {"n=1,c=10,h=5,w=9,k=12,r=1,s=1",
     "thread_k=1,vec=4,reg_k=3,thread_y=1,reg_y=1,thread_x=1,reg_x=6,unroll_rs=0,unroll_explicit=1"},
    /* Channel blocks (kvec_channel_block): each work-item runs its image's
     * ten 5-pixel tiles (the last 1 past the 49 pixels) in 4 blocks of 64
     * channels; two images, channels overhang 520 */
    {KVEC_BLOCK_WL_A, "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,unroll_rs=1,unroll_explicit=1"},
    /* eight 6-pixel tiles of 3 vectors of 4 channels (45 pixels), 2 blocks */
    {KVEC_BLOCK_WL_B, "thread_k=1,vec=4,reg_k=3,thread_y=1,reg_y=1,thread_x=1,reg_x=6,unroll_rs=0,unroll_explicit=1"},
};
#define NKVEC_EDGE (int)(sizeof kvec_edge_cases / sizeof kvec_edge_cases[0])

/* gemm's chunked work-group order (outputs above 2 MiB, short reductions):
 * the pixel block of a work-group comes from its chunk and its place in it;
 * `chunk` is the grid's axis 0 the case must get (the channel blocks where
 * the case is not chunked). */
static const struct {
    const char *workload, *config;
    int64_t chunk;
} gemm_chunk_cases[] = {
    /* flattened 1x1: 288 blocks of 32 pixels in chunks of 16; 11 channel blocks, the last overhanging */
    {"n=1,c=4,h=96,w=96,k=64,r=1,s=1",
     "thread_k=1,reg_k=6,thread_y=1,reg_y=1,thread_x=1,reg_x=32,tile_red=4x1,vec=16,stage_local=0,auto_unroll_max_step=512,unroll_explicit=1", 16},
    /* 3x3 over two images, 2x2x2 work-items: 360 blocks (5 per row, the last
     * overhanging) in chunks of 12 that cross rows */
    {"n=2,c=2,h=72,w=72,k=112,r=3,s=3,pad=1",
     "thread_k=2,reg_k=4,thread_y=2,reg_y=1,thread_x=2,reg_x=8,tile_red=2x1,vec=8,stage_local=0,auto_unroll_max_step=0,unroll_explicit=0", 12},
    /* flattened 1x1: 201 blocks of 48 pixels (the last of 4) have no divisor
     * from 6 to 10, so chunks of 10 with a last chunk of one block; 8
     * channel blocks, the last overhanging */
    {"n=1,c=4,h=98,w=98,k=60,r=1,s=1",
     "thread_k=1,reg_k=8,thread_y=1,reg_y=1,thread_x=1,reg_x=48,tile_red=4x1,vec=16,stage_local=0,auto_unroll_max_step=512,unroll_explicit=1", 10},
    /* the same staged through local memory: no partial chunk (its barriers
     * must not sit under the test), so channel blocks first */
    {"n=1,c=4,h=98,w=98,k=60,r=1,s=1",
     "thread_k=1,reg_k=8,thread_y=1,reg_y=1,thread_x=1,reg_x=48,tile_red=1x4,vec=16,stage_local=1,auto_unroll_max_step=512,unroll_explicit=1", 8},
};
#define NGEMM_CHUNK (int)(sizeof gemm_chunk_cases / sizeof gemm_chunk_cases[0])

static const mt_conv_epilogue variants[] = {
    {.bias = 1, .residual = MT_RESIDUAL_BUFFER, .act = MT_EPILOGUE_RELU},
    {.bias = 1, .residual = MT_RESIDUAL_NONE, .act = MT_EPILOGUE_RELU6},
    {.bias = 1, .residual = MT_RESIDUAL_IN_OUTPUT, .act = MT_EPILOGUE_RELU},
    {.bias = 0, .residual = MT_RESIDUAL_BUFFER, .act = MT_EPILOGUE_NONE},
};
#define NVARIANTS (int)(sizeof variants / sizeof variants[0])

/* A random config of the space that builds, fits the device and is quick to compile. */
static int draw_config(const mt_template *t, const mt_workload *wl, const mt_space *sp, uint64_t *rng, mt_config *cfg) {
    mt_device_limits lim = mt_device_get_limits(device);
    for (int d = 0; d < FUSED_MAX_DRAWS; d++) {
        mt_space_random(sp, rng, cfg);
        if (mt_template_check(t, wl, sp, cfg, &lim, NULL, 0) != MT_OK) continue;
        mt_kernel *k = NULL;
        if (mt_template_build(t, wl, sp, cfg, &k, NULL, 0) != MT_OK) continue;
        int64_t size = mt_kernel_unrolled_size(k);
        mt_kernel_free(k);
        if (size <= FUSED_MAX_UNROLLED) return 1;
    }
    return 0;
}

static void run_case(void **state) {
    const fused_case *fc = *state;
    skip_without_device();
    char err[2048];
    mt_workload wl;
    assert_int_equal(mt_workload_parse(fc->workload, &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(fc->t, &wl, &sp), MT_OK);
    fused_data d;
    fused_data_init(&d, device, &wl, 1);
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)fc->workload;
    int tested = 0;
    for (int j = 0; j < 2; j++) {
        const mt_conv_epilogue *e = &variants[(fc->first_variant + j) % NVARIANTS];
        mt_config cfg;
        if (fc->config) {
            if (mt_config_parse(&sp, fc->config, &cfg, err, sizeof err) != MT_OK) fail_msg("%s: config %s: %s", fc->workload, fc->config, err);
        } else if (!draw_config(fc->t, &wl, &sp, &rng, &cfg)) {
            continue;
        }
        char what[1400];
        int n = snprintf(what, sizeof what, "%s %s ", mt_template_name(fc->t), fc->workload);
        mt_config_format(&sp, &cfg, what + n, sizeof what - (size_t)n);
        fused_run(&d, device, fc->t, &sp, &cfg, e, 1e-4, what);
        tested++;
    }
    if (tested == 0) print_message("note: %s %s: no quick valid config drawn\n", mt_template_name(fc->t), fc->workload);
    fused_data_free(&d);
    mt_space_free(&sp);
}

/* An unknown activation is refused, and an empty epilogue is the plain kernel. */
static void test_epilogue_arguments(void **state) {
    (void)state;
    mt_workload wl;
    char err[512];
    assert_int_equal(mt_workload_parse("n=1,c=8,h=8,w=8,k=8,r=3,s=3,pad=1", &wl, err, sizeof err), MT_OK);
    const mt_template *t = mt_template_find("gemm");
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_config cfg;
    uint64_t rng = 7;
    mt_space_random(&sp, &rng, &cfg);
    mt_kernel *k = NULL;
    mt_conv_epilogue bad = {.act = (mt_epilogue_act)9};
    assert_int_equal(mt_template_build_fused(t, &wl, &sp, &cfg, &bad, &k, err, sizeof err), MT_INVALID_ARG);
    assert_null(k);
    mt_conv_epilogue bad_res = {.residual = (mt_epilogue_residual)7};
    assert_int_equal(mt_template_build_fused(t, &wl, &sp, &cfg, &bad_res, &k, err, sizeof err), MT_INVALID_ARG);
    assert_null(k);
    mt_conv_epilogue none = {0};
    mt_status st = mt_template_build_fused(t, &wl, &sp, &cfg, &none, &k, err, sizeof err);
    if (st == MT_OK) {
        assert_int_equal(k->nparams, 3);
        mt_kernel_free(k);
    } else {
        assert_int_equal(st, MT_INVALID_CONFIG);
    }
    mt_space_free(&sp);
}

/* Work-groups along grid axis `axis` of template t's kernel for a workload and config. */
static int64_t kernel_grid(const mt_template *t, const char *workload, const char *config, int axis) {
    char err[512];
    mt_workload wl;
    assert_int_equal(mt_workload_parse(workload, &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_config cfg;
    assert_int_equal(mt_config_parse(&sp, config, &cfg, err, sizeof err), MT_OK);
    mt_kernel *k = NULL;
    assert_int_equal(mt_template_build(t, &wl, &sp, &cfg, &k, err, sizeof err), MT_OK);
    mt_kernel_resources res;
    assert_int_equal(mt_kernel_analyze(k, &res, err, sizeof err), MT_OK);
    mt_kernel_free(k);
    mt_space_free(&sp);
    return res.grid[axis];
}

/* The chunk cases get the grid they are meant to test. */
static void test_gemm_chunk_grid(void **state) {
    (void)state;
    const mt_template *t = mt_template_find("gemm");
    for (int i = 0; i < NGEMM_CHUNK; i++) assert_int_equal(kernel_grid(t, gemm_chunk_cases[i].workload, gemm_chunk_cases[i].config, 0), gemm_chunk_cases[i].chunk);
}

/* kvec runs an image's tiles in one work-item, channel block by channel
 * block, only where kvec_channel_block says so: one column block then
 * (grid axis 1), else one per tile. */
static void test_kvec_channel_block_grid(void **state) {
    (void)state;
    static const struct {
        const char *workload, *config;
        int64_t column_blocks;
    } cases[] = {
        {KVEC_BLOCK_WL_A, "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,unroll_rs=1,unroll_explicit=1", 1},
        {KVEC_BLOCK_WL_B, "thread_k=1,vec=4,reg_k=3,thread_y=1,reg_y=1,thread_x=1,reg_x=6,unroll_rs=0,unroll_explicit=1", 1},
        /* one block of 64 channels: nothing to block */
        {"n=2,c=64,h=7,w=7,k=520,r=1,s=1", "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,unroll_rs=1,unroll_explicit=1", 10},
        /* weights (40 KiB) under twice the input (49 KiB): channel blocks first, tile by tile */
        {"n=1,c=256,h=7,w=7,k=40,r=1,s=1", "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,unroll_rs=1,unroll_explicit=1", 10},
        /* a 14x14 image (196 pixels) */
        {"n=1,c=256,h=14,w=14,k=512,r=1,s=1", "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1", 28},
        /* two work-items per work-group */
        {KVEC_BLOCK_WL_A, "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=2,reg_x=5,unroll_rs=1,unroll_explicit=1", 5},
    };
    const mt_template *t = mt_template_find("kvec");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t blocks = kernel_grid(t, cases[i].workload, cases[i].config, 1);
        if (blocks != cases[i].column_blocks)
            fail_msg("%s %s: %lld column blocks, want %lld", cases[i].workload, cases[i].config, (long long)blocks, (long long)cases[i].column_blocks);
    }
}

int main(void) {
    static fused_case cases[MT_TEST_NCONV_WORKLOADS * 4 + NKVEC_STORE + NKVEC_EDGE + NGEMM_CHUNK];
    struct CMUnitTest tests[MT_TEST_NCONV_WORKLOADS * 4 + NKVEC_STORE + NKVEC_EDGE + NGEMM_CHUNK + 3];
    int n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_epilogue_arguments);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_gemm_chunk_grid);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_kvec_channel_block_grid);
    int nc = 0;
    for (int w = 0; w < MT_TEST_NCONV_WORKLOADS; w++) {
        mt_workload wl;
        if (mt_workload_parse(mt_test_conv_workloads[w], &wl, NULL, 0) != MT_OK) continue;
        for (int ti = 0; ti < mt_template_count(); ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &wl)) continue;
            cases[nc] = (fused_case){.workload = mt_test_conv_workloads[w], .t = t, .first_variant = nc % NVARIANTS};
            snprintf(cases[nc].name, sizeof cases[nc].name, "%s %s", mt_template_name(t), mt_test_conv_workloads[w]);
            tests[n++] = (struct CMUnitTest){.name = cases[nc].name, .test_func = run_case, .initial_state = &cases[nc]};
            nc++;
        }
    }
    for (int i = 0; i < NKVEC_STORE; i++) {
        cases[nc] = (fused_case){.workload = KVEC_STORE_WL, .t = mt_template_find("kvec"), .first_variant = i, .config = kvec_store_configs[i]};
        snprintf(cases[nc].name, sizeof cases[nc].name, "kvec stores %s %s", KVEC_STORE_WL, kvec_store_configs[i]);
        tests[n++] = (struct CMUnitTest){.name = cases[nc].name, .test_func = run_case, .initial_state = &cases[nc]};
        nc++;
    }
    for (int i = 0; i < NKVEC_EDGE; i++) {
        cases[nc] = (fused_case){.workload = kvec_edge_cases[i].workload, .t = mt_template_find("kvec"), .first_variant = i % NVARIANTS,
                                 .config = kvec_edge_cases[i].config};
        snprintf(cases[nc].name, sizeof cases[nc].name, "kvec edges %s %s", kvec_edge_cases[i].workload, kvec_edge_cases[i].config);
        tests[n++] = (struct CMUnitTest){.name = cases[nc].name, .test_func = run_case, .initial_state = &cases[nc]};
        nc++;
    }
    for (int i = 0; i < NGEMM_CHUNK; i++) {
        cases[nc] = (fused_case){.workload = gemm_chunk_cases[i].workload, .t = mt_template_find("gemm"), .first_variant = i % NVARIANTS,
                                 .config = gemm_chunk_cases[i].config};
        snprintf(cases[nc].name, sizeof cases[nc].name, "gemm chunks %s %s", gemm_chunk_cases[i].workload, gemm_chunk_cases[i].config);
        tests[n++] = (struct CMUnitTest){.name = cases[nc].name, .test_func = run_case, .initial_state = &cases[nc]};
        nc++;
    }
    return _cmocka_run_group_tests("fused", tests, (size_t)n, default_device_open, default_device_close);
}
