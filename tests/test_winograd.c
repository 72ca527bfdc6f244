/* The Winograd template `wino` and its transforms:
 *  - the Toom-Cook matrices compute a 1-D correlation exactly (in double);
 *  - the Winograd weight layouts hold G g G^T where the layout says, and
 *    refuse filters they cannot hold;
 *  - on every harness workload wino accepts (tests/conv_workloads.h), each
 *    tile size F(2x2), F(4x4), F(6x6), with configs that cover the tile,
 *    channel and row overhangs, split_k, blocks of register tiles and the
 *    channel groups as a loop or as work-items, plain and with each fused
 *    epilogue: the output against the double-accumulating CPU reference,
 *    by normalised error (max |out - ref| / max |ref|) under the tolerance
 *    of its tile size. The errors seen are printed, and the largest per tile
 *    size is what docs/tuning.md states;
 *  - only 3x3 stride-1 undilated dense convolutions are accepted. */
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
#include "winograd.h"

#include "conv_workloads.h"
#include "fused_check.h"
#include "default_device.h"

/* Normalised error allowed per tile size. F(2x2) keeps fp32 accuracy; the
 * larger tiles' transforms have coefficients up to 5 (F(4x4)) and 10.6
 * (F(6x6)) and lose digits: on these workloads F(4x4) stayed under 1e-5 and
 * F(6x6) under 3e-5 (ResNet-50's 512-channel layers: 1.4e-5 and 2.5e-5). */
static double tolerance_of(int m) { return m == 2 ? 1e-5 : m == 4 ? 5e-5 : 2e-4; }

static double worst_seen[7];

static void test_matrices_correlate(void **state) {
    (void)state;
    for (int m = 2; m <= 6; m += 2) {
        mt_winograd w;
        assert_int_equal(mt_winograd_init(&w, m), MT_OK);
        assert_int_equal(w.alpha, m + 2);
        double d[MT_WINO_MAX_ALPHA], g[3] = {0.3, -1.25, 0.7}, v[MT_WINO_MAX_ALPHA], u[MT_WINO_MAX_ALPHA];
        for (int i = 0; i < w.alpha; i++) d[i] = sin(1.3 * i + 0.2);
        for (int j = 0; j < w.alpha; j++) {
            v[j] = u[j] = 0;
            for (int i = 0; i < w.alpha; i++) v[j] += w.bt[j][i] * d[i];
            for (int k = 0; k < 3; k++) u[j] += w.g[j][k] * g[k];
        }
        for (int i = 0; i < m; i++) {
            double y = 0, want = 0;
            for (int j = 0; j < w.alpha; j++) y += w.at[i][j] * u[j] * v[j];
            for (int k = 0; k < 3; k++) want += g[k] * d[i + k];
            assert_true(fabs(y - want) < 1e-12);
        }
    }
    mt_winograd w;
    assert_int_equal(mt_winograd_init(&w, 3), MT_UNSUPPORTED);
    assert_int_equal(mt_winograd_init(&w, 8), MT_UNSUPPORTED);
}

/* Element (k, c, e) of a Winograd layout is (G g G^T)[e] of filter (k, c). */
static void test_weight_layouts(void **state) {
    (void)state;
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=5,h=8,w=8,k=20,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    const mt_weight_layout layouts[3] = {MT_WEIGHTS_WINO2, MT_WEIGHTS_WINO4, MT_WEIGHTS_WINO6};
    float oihw[20 * 5 * 9];
    mt_fill_random(oihw, 20 * 5 * 9, 3);
    for (int li = 0; li < 3; li++) {
        const int m = 2 + 2 * li, a2 = (m + 2) * (m + 2);
        int64_t n = mt_weight_layout_elems(layouts[li], &wl);
        assert_int_equal(n, (int64_t)32 * 5 * a2); /* k padded to 16 */
        float *dst = malloc(sizeof(float) * (size_t)n);
        assert_non_null(dst);
        assert_int_equal(mt_weights_to_layout(layouts[li], &wl, oihw, dst), MT_OK);
        mt_winograd w;
        assert_int_equal(mt_winograd_init(&w, m), MT_OK);
        double u[MT_WINO_MAX_ALPHA * MT_WINO_MAX_ALPHA];
        for (int k = 0; k < 20; k++)
            for (int c = 0; c < 5; c++) {
                mt_winograd_filter(&w, oihw + (k * 5 + c) * 9, u);
                for (int e = 0; e < a2; e++) assert_true(dst[(((k / 16) * a2 + e) * 5 + c) * 16 + k % 16] == (float)u[e]);
            }
        for (int64_t i = 0; i < n; i++) /* channels 20..31 are zero */
            if ((i % 16) >= 4 && i >= (int64_t)16 * 5 * a2) assert_true(dst[i] == 0.0f);
        free(dst);
        assert_string_equal(mt_weight_layout_name(layouts[li]), m == 2 ? "wino2" : m == 4 ? "wino4" : "wino6");
    }
    mt_workload grouped = wl, five = wl;
    grouped.groups = 5, grouped.k = 5;
    five.r = five.s = 5;
    float dst[16];
    assert_int_equal(mt_weight_layout_elems(MT_WEIGHTS_WINO4, &grouped), 0);
    assert_int_equal(mt_weight_layout_elems(MT_WEIGHTS_WINO4, &five), 0);
    assert_int_equal(mt_weights_to_layout(MT_WEIGHTS_WINO4, &five, oihw, dst), MT_UNSUPPORTED);
}

static void test_accepts(void **state) {
    (void)state;
    const mt_template *t = mt_template_find("wino");
    assert_non_null(t);
    static const char *const yes[] = {"n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1", "n=2,c=3,h=5,w=9,k=7,r=3,s=3", "n=1,c=8,h=9,w=9,k=8,r=3,s=3,pad=2"};
    static const char *const no[] = {"n=1,c=8,h=17,w=17,k=16,r=3,s=3,stride=2,pad=1", "n=1,c=8,h=16,w=16,k=8,r=3,s=3,pad=2,dilation=2",
                                     "n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1,groups=16", "n=1,c=6,h=15,w=15,k=10,r=5,s=5,pad=2",
                                     "n=1,c=32,h=14,w=14,k=48,r=1,s=1", "n=1,c=8,h=11,w=13,k=8,r=3,s=3,stride=2x1,pad=1"};
    mt_workload wl;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_int_equal(mt_workload_parse(yes[i], &wl, NULL, 0), MT_OK);
        assert_true(mt_template_accepts(t, &wl));
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_int_equal(mt_workload_parse(no[i], &wl, NULL, 0), MT_OK);
        assert_false(mt_template_accepts(t, &wl));
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_UNSUPPORTED);
    }
}

/* Per tile size, configs that between them overhang the output's rows,
 * columns and channels, split the channels over work-groups, use every
 * vector width, put several register tiles in a work-group and run the
 * channel groups as work-items and as a loop in one work-item (a knob value
 * the workload's space lacks falls back to the space's nearest option). */
static const char *const config_shapes[] = {
    "vec=4,reg_k=1,reg_y=1,reg_x=1,split_k=1,unroll=1,blk_y=2,blk_x=2,k_loop=1",
    "vec=8,reg_k=2,reg_y=2,reg_x=3,split_k=1,unroll=0,blk_y=1,blk_x=1,k_loop=0",
    "vec=16,reg_k=1,reg_y=4,reg_x=2,split_k=2,unroll=0,blk_y=1,blk_x=2,k_loop=1",
    "vec=4,reg_k=2,reg_y=1,reg_x=4,split_k=2,unroll=1,blk_y=2,blk_x=1,k_loop=0",
};
#define NSHAPES (int)(sizeof config_shapes / sizeof config_shapes[0])

/* The space's option of knob `name` nearest to value (its first at a tie). */
static int nearest_option(const mt_space *sp, const char *name, int value) {
    for (int k = 0; k < sp->nknobs; k++) {
        if (strcmp(sp->knobs[k].name, name) != 0) continue;
        int best = 0;
        for (int o = 1; o < sp->knobs[k].noptions; o++)
            if (abs(sp->knobs[k].values[o] - value) < abs(sp->knobs[k].values[best] - value)) best = o;
        return best;
    }
    return -1;
}

static int config_of(const mt_space *sp, int m, const char *shape, mt_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->nknobs = sp->nknobs;
    char buf[160];
    snprintf(buf, sizeof buf, "tile=%d,%s", m, shape);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        *eq = '\0';
        int o = nearest_option(sp, tok, atoi(eq + 1)), k = 0;
        while (strcmp(sp->knobs[k].name, tok) != 0) k++;
        cfg->choice[k] = o;
    }
    return mt_config_value(sp, cfg, "tile") == m;
}

static void run_workload(void **state) {
    const char *text = *state;
    skip_without_device();
    fused_case_data c;
    fused_case_open(&c, device, "wino", text, 11);
    char err[2048];
    int tested = 0;
    for (int m = 2; m <= 6; m += 2) {
        int tested_m = 0;
        mt_config cfg;
        for (int sh = 0; sh < NSHAPES; sh++) {
            if (!config_of(&c.sp, m, config_shapes[sh], &cfg)) break; /* the space lacks this tile (output smaller than it) */
            char what[512];
            int n = snprintf(what, sizeof what, "%s ", text);
            mt_config_format(&c.sp, &cfg, what + n, sizeof what - (size_t)n);
            if (mt_template_check(c.t, &c.wl, &c.sp, &cfg, &c.lim, err, sizeof err) != MT_OK) {
                print_message("  %s: not valid here: %s\n", what, err);
                continue;
            }
            assert_int_equal(mt_template_config_weight_layout(c.t, &c.sp, &cfg), m == 2 ? MT_WEIGHTS_WINO2 : m == 4 ? MT_WEIGHTS_WINO4 : MT_WEIGHTS_WINO6);
            /* Two epilogues per config, in turn, so every config meets the plain kernel or a fused one. */
            for (int j = 0; j < 2; j++) {
                const mt_conv_epilogue *e = &fused_epilogues[(sh + j * 2) % FUSED_NEPI];
                double max_err = fused_run(&c.d, device, c.t, &c.sp, &cfg, e, tolerance_of(m), what);
                print_message("  %s epilogue(bias %d residual %d act %d): error %.2g\n", what, e->bias, e->residual, (int)e->act, max_err);
                if (max_err > worst_seen[m]) worst_seen[m] = max_err;
                tested++, tested_m++;
            }
        }
        if (tested_m == 0) print_message("  %s: no F(%dx%d) config (output %dx%d)\n", text, m, m, mt_workload_out_h(&c.wl), mt_workload_out_w(&c.wl));
    }
    assert_true(tested > 0);
    fused_case_close(&c);
}

/* Blocks whose tiles overhang the image's last tile by whole register tiles
 * (skipped) and by part of one, and phase 2 in chunks of channels
 * (products_chunk: here 2 chunks of 48), as work-items and as a loop:
 * against the reference, and the chunk loop is in the kernel. */
static void test_chunks_and_overhang(void **state) {
    (void)state;
    skip_without_device();
    static const char *const shapes[] = {
        "vec=16,reg_k=2,reg_y=2,reg_x=4,split_k=1,unroll=0,blk_y=4,blk_x=2,k_loop=1", /* 49 tiles in 8 register tiles of 8 */
        "vec=16,reg_k=2,reg_y=1,reg_x=3,split_k=1,unroll=0,blk_y=4,blk_x=4,k_loop=0", /* 49 tiles in 2 blocks of 48 */
    };
    const mt_template *t = mt_template_find("wino");
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=96,h=14,w=14,k=40,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    fused_data d;
    fused_data_init(&d, device, &wl, 5);
    for (int sh = 0; sh < 2; sh++) {
        mt_config cfg;
        assert_true(config_of(&sp, 2, shapes[sh], &cfg));
        char what[256], err[256];
        mt_config_format(&sp, &cfg, what, sizeof what);
        mt_kernel *k = NULL;
        assert_int_equal(mt_template_build(t, &wl, &sp, &cfg, &k, err, sizeof err), MT_OK);
        char *text = NULL;
        assert_int_equal(mt_kernel_print(k, MT_LANG_OPENCL, &text, err, sizeof err), MT_OK);
        mt_kernel_free(k);
        if (!strstr(text, "cch")) fail_msg("%s: no loop over channel chunks", what);
        free(text);
        for (int j = 0; j < 2; j++) fused_run(&d, device, t, &sp, &cfg, &fused_epilogues[(sh + j) % FUSED_NEPI], tolerance_of(2), what);
    }
    fused_data_free(&d);
    mt_space_free(&sp);
}

static int group_teardown(void **state) {
    if (device) print_message("largest normalised error seen: F(2x2) %.2g, F(4x4) %.2g, F(6x6) %.2g\n", worst_seen[2], worst_seen[4], worst_seen[6]);
    return default_device_close(state);
}

int main(void) {
    static struct CMUnitTest tests[MT_TEST_NCONV_WORKLOADS + 5];
    static char names[MT_TEST_NCONV_WORKLOADS][160];
    int n = 0;
    tests[n++] = (struct CMUnitTest){.name = "matrices_correlate", .test_func = test_matrices_correlate};
    tests[n++] = (struct CMUnitTest){.name = "weight_layouts", .test_func = test_weight_layouts};
    tests[n++] = (struct CMUnitTest){.name = "accepts", .test_func = test_accepts};
    tests[n++] = (struct CMUnitTest){.name = "chunks_and_overhang", .test_func = test_chunks_and_overhang};
    const mt_template *t = mt_template_find("wino");
    for (int w = 0; w < MT_TEST_NCONV_WORKLOADS; w++) {
        mt_workload wl;
        if (mt_workload_parse(mt_test_conv_workloads[w], &wl, NULL, 0) != MT_OK || !mt_template_accepts(t, &wl)) continue;
        snprintf(names[w], sizeof names[w], "wino/%s", mt_test_conv_workloads[w]);
        tests[n++] = (struct CMUnitTest){.name = names[w], .test_func = run_workload, .initial_state = (void *)mt_test_conv_workloads[w]};
    }
    return _cmocka_run_group_tests("winograd", tests, (size_t)n, default_device_open, group_teardown);
}
