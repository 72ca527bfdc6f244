/* The Winograd template `wino` and its transforms:
 *  - the Toom-Cook matrices compute a 1-D correlation exactly (in double);
 *  - the Winograd weight layouts hold G g G^T where the layout says, and
 *    refuse filters they cannot hold;
 *  - on every harness workload wino accepts (tests/conv_workloads.h), each
 *    tile size F(2x2), F(4x4), F(6x6), with configs that cover the tile,
 *    channel and row overhangs and split_k, plain and with each fused
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

/* Normalised error allowed per tile size. F(2x2) keeps fp32 accuracy; the
 * larger tiles' transforms have coefficients up to 5 (F(4x4)) and 10.6
 * (F(6x6)) and lose digits: on these workloads F(4x4) stayed under 1e-5 and
 * F(6x6) under 3e-5 (ResNet-50's 512-channel layers: 1.4e-5 and 2.5e-5). */
static double tolerance_of(int m) { return m == 2 ? 1e-5 : m == 4 ? 5e-5 : 2e-4; }

static mt_device *device;
static char device_err[512];
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

/* The epilogues run: none, then each fused one. */
static const mt_conv_epilogue epilogues[] = {
    {0},
    {.bias = 1, .residual = MT_RESIDUAL_BUFFER, .act = MT_EPILOGUE_RELU},
    {.bias = 1, .residual = MT_RESIDUAL_NONE, .act = MT_EPILOGUE_RELU6},
    {.bias = 0, .residual = MT_RESIDUAL_IN_OUTPUT, .act = MT_EPILOGUE_NONE},
};
#define NEPI (int)(sizeof epilogues / sizeof epilogues[0])

/* Per tile size, configs that between them overhang the output's rows,
 * columns and channels, split the channels over work-groups and use every
 * vector width (a knob value the workload's space lacks falls back to the
 * space's nearest option). */
static const char *const config_shapes[] = {
    "vec=4,reg_k=1,reg_y=1,reg_x=1,split_k=1,unroll=1",
    "vec=8,reg_k=2,reg_y=2,reg_x=3,split_k=1,unroll=0",
    "vec=16,reg_k=1,reg_y=4,reg_x=2,split_k=2,unroll=0",
    "vec=4,reg_k=2,reg_y=1,reg_x=4,split_k=2,unroll=1",
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
    char buf[128];
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

static float host_epilogue(const mt_conv_epilogue *e, double v, float bias, float res) {
    if (e->bias) v += bias;
    if (e->residual != MT_RESIDUAL_NONE) v += res;
    if (e->act != MT_EPILOGUE_NONE && v < 0) v = 0;
    if (e->act == MT_EPILOGUE_RELU6 && v > 6) v = 6;
    return (float)v;
}

static void run_workload(void **state) {
    const char *text = *state;
    if (!device) {
        print_message("skipped: no device: %s\n", device_err);
        skip();
    }
    const mt_template *t = mt_template_find("wino");
    char err[2048];
    mt_workload wl;
    assert_int_equal(mt_workload_parse(text, &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    const int64_t nin = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), nout = mt_workload_output_elems(&wl);
    const int64_t plane = (int64_t)mt_workload_out_h(&wl) * mt_workload_out_w(&wl);
    float *in = malloc(sizeof(float) * (size_t)nin), *wt = malloc(sizeof(float) * (size_t)nw), *bias = malloc(sizeof(float) * (size_t)wl.k);
    float *res = malloc(sizeof(float) * (size_t)nout), *conv = malloc(sizeof(float) * (size_t)nout), *want = malloc(sizeof(float) * (size_t)nout);
    float *got = malloc(sizeof(float) * (size_t)nout);
    assert_true(in && wt && bias && res && conv && want && got);
    mt_fill_random(in, nin, 11);
    mt_fill_random(wt, nw, 12);
    mt_fill_random(bias, wl.k, 13);
    mt_fill_random(res, nout, 14);
    assert_int_equal(mt_conv_reference(&wl, in, wt, conv), MT_OK);
    mt_dbuf *b_in = NULL, *b_wt = NULL, *b_out = NULL, *b_bias = NULL, *b_res = NULL;
    assert_int_equal(mt_dbuf_alloc(device, sizeof(float) * (size_t)nin, &b_in), MT_OK);
    assert_int_equal(mt_dbuf_alloc(device, sizeof(float) * (size_t)nout, &b_out), MT_OK);
    assert_int_equal(mt_dbuf_alloc(device, sizeof(float) * (size_t)wl.k, &b_bias), MT_OK);
    assert_int_equal(mt_dbuf_alloc(device, sizeof(float) * (size_t)nout, &b_res), MT_OK);
    assert_int_equal(mt_dbuf_write(device, b_in, 0, in, sizeof(float) * (size_t)nin), MT_OK);
    assert_int_equal(mt_dbuf_write(device, b_bias, 0, bias, sizeof(float) * (size_t)wl.k), MT_OK);
    assert_int_equal(mt_dbuf_write(device, b_res, 0, res, sizeof(float) * (size_t)nout), MT_OK);
    mt_device_limits lim = mt_device_get_limits(device);
    int tested = 0;
    for (int m = 2; m <= 6; m += 2) {
        int tested_m = 0;
        /* The weights in this tile size's layout, converted once for its configs. */
        mt_config cfg;
        for (int sh = 0; sh < NSHAPES; sh++) {
            if (!config_of(&sp, m, config_shapes[sh], &cfg)) break; /* the space lacks this tile (output smaller than it) */
            char cfgtext[256];
            mt_config_format(&sp, &cfg, cfgtext, sizeof cfgtext);
            if (mt_template_check(t, &wl, &sp, &cfg, &lim, err, sizeof err) != MT_OK) {
                print_message("  %s %s: not valid here: %s\n", text, cfgtext, err);
                continue;
            }
            const mt_weight_layout layout = mt_template_config_weight_layout(t, &sp, &cfg);
            assert_int_equal(layout, m == 2 ? MT_WEIGHTS_WINO2 : m == 4 ? MT_WEIGHTS_WINO4 : MT_WEIGHTS_WINO6);
            if (!b_wt) {
                const int64_t nwl = mt_weight_layout_elems(layout, &wl);
                float *wtl = malloc(sizeof(float) * (size_t)nwl);
                assert_non_null(wtl);
                assert_int_equal(mt_weights_to_layout(layout, &wl, wt, wtl), MT_OK);
                assert_int_equal(mt_dbuf_alloc(device, sizeof(float) * (size_t)nwl, &b_wt), MT_OK);
                assert_int_equal(mt_dbuf_write(device, b_wt, 0, wtl, sizeof(float) * (size_t)nwl), MT_OK);
                free(wtl);
            }
            /* Two epilogues per config, in turn, so every config meets the plain kernel or a fused one. */
            for (int j = 0; j < 2; j++) {
                const mt_conv_epilogue *e = &epilogues[(sh + j * 2) % NEPI];
                mt_kernel *k = NULL;
                mt_status st = mt_template_build_fused(t, &wl, &sp, &cfg, e, &k, err, sizeof err);
                if (st != MT_OK) fail_msg("%s %s: build failed: %s", text, cfgtext, err);
                mt_kernel_resources kr;
                assert_int_equal(mt_kernel_analyze(k, &kr, err, sizeof err), MT_OK);
                mt_program *prog = NULL;
                st = mt_program_build(device, k, &prog, err, sizeof err);
                mt_kernel_free(k);
                if (st != MT_OK) fail_msg("%s %s: compile failed: %s", text, cfgtext, err);
                for (int64_t i = 0; i < nout; i++) got[i] = e->residual == MT_RESIDUAL_IN_OUTPUT ? res[i] : NAN;
                assert_int_equal(mt_dbuf_write(device, b_out, 0, got, sizeof(float) * (size_t)nout), MT_OK);
                mt_dbuf *args[5] = {b_in, b_wt, b_out};
                int na = 3;
                if (e->bias) args[na++] = b_bias;
                if (e->residual == MT_RESIDUAL_BUFFER) args[na++] = b_res;
                double ms = 0;
                st = mt_program_run(device, prog, args, na, kr.grid, kr.block, 0, 1, &ms, err, sizeof err);
                mt_program_free(prog);
                if (st != MT_OK) fail_msg("%s %s: launch failed: %s", text, cfgtext, err);
                assert_int_equal(mt_dbuf_read(device, b_out, 0, got, sizeof(float) * (size_t)nout), MT_OK);
                for (int64_t i = 0; i < nout; i++) want[i] = host_epilogue(e, conv[i], bias[(i / plane) % wl.k], res[i]);
                double max_err = 0;
                int64_t bad = -1;
                st = mt_compare(got, want, nout, &max_err, &bad);
                print_message("  %s %s epilogue(bias %d residual %d act %d): error %.2g\n", text, cfgtext, e->bias, e->residual, (int)e->act, max_err);
                if (st != MT_OK || !(max_err <= tolerance_of(m)))
                    fail_msg("%s %s (bias %d residual %d act %d): normalised error %.3g over %.1g (first bad element %lld: %g, want %g)", text,
                             cfgtext, e->bias, e->residual, (int)e->act, max_err, tolerance_of(m), (long long)bad, bad >= 0 ? got[bad] : 0.0,
                             bad >= 0 ? want[bad] : 0.0);
                if (max_err > worst_seen[m]) worst_seen[m] = max_err;
                tested++, tested_m++;
            }
        }
        mt_dbuf_free(b_wt);
        b_wt = NULL;
        if (tested_m == 0) print_message("  %s: no F(%dx%d) config (output %dx%d)\n", text, m, m, mt_workload_out_h(&wl), mt_workload_out_w(&wl));
    }
    assert_true(tested > 0);
    mt_dbuf_free(b_in);
    mt_dbuf_free(b_out);
    mt_dbuf_free(b_bias);
    mt_dbuf_free(b_res);
    free(in);
    free(wt);
    free(bias);
    free(res);
    free(conv);
    free(want);
    free(got);
    mt_space_free(&sp);
}

static void test_report(void **state) {
    (void)state;
    print_message("largest normalised error seen: F(2x2) %.2g, F(4x4) %.2g, F(6x6) %.2g\n", worst_seen[2], worst_seen[4], worst_seen[6]);
}

static int group_setup(void **state) {
    (void)state;
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(NULL, &dp, &device, device_err, sizeof device_err) != MT_OK) device = NULL;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    mt_device_close(device);
    return 0;
}

int main(void) {
    static struct CMUnitTest tests[MT_TEST_NCONV_WORKLOADS + 4];
    static char names[MT_TEST_NCONV_WORKLOADS][160];
    int n = 0;
    tests[n++] = (struct CMUnitTest){.name = "matrices_correlate", .test_func = test_matrices_correlate};
    tests[n++] = (struct CMUnitTest){.name = "weight_layouts", .test_func = test_weight_layouts};
    tests[n++] = (struct CMUnitTest){.name = "accepts", .test_func = test_accepts};
    const mt_template *t = mt_template_find("wino");
    for (int w = 0; w < MT_TEST_NCONV_WORKLOADS; w++) {
        mt_workload wl;
        if (mt_workload_parse(mt_test_conv_workloads[w], &wl, NULL, 0) != MT_OK || !mt_template_accepts(t, &wl)) continue;
        snprintf(names[w], sizeof names[w], "wino/%s", mt_test_conv_workloads[w]);
        tests[n++] = (struct CMUnitTest){.name = names[w], .test_func = run_workload, .initial_state = (void *)mt_test_conv_workloads[w]};
    }
    tests[n++] = (struct CMUnitTest){.name = "report", .test_func = test_report};
    return _cmocka_run_group_tests("winograd", tests, (size_t)n, group_setup, group_teardown);
}
