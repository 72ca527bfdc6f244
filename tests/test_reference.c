/* CPU reference convolution, mt_compare and mt_fill_random. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "reference.h"
#include "mtgpu/workload.h"

#define GUARD 64
#define GUARD_VALUE 12345.0f

static mt_workload wl_of(const char *text) {
    mt_workload wl;
    char err[256];
    mt_status st = mt_workload_parse(text, &wl, err, sizeof err);
    if (st != MT_OK) fail_msg("'%s': %s", text, err);
    return wl;
}

/* An output buffer with GUARD sentinel floats on each side, to catch writes
 * out of bounds (as ggml's test-backend-ops does). */
static float *guarded_alloc(int64_t n) {
    float *b = malloc(sizeof(float) * (size_t)(n + 2 * GUARD));
    assert_non_null(b);
    for (int64_t i = 0; i < n + 2 * GUARD; i++) b[i] = GUARD_VALUE;
    return b + GUARD;
}

static void guarded_check_free(float *p, int64_t n) {
    float *b = p - GUARD;
    for (int i = 0; i < GUARD; i++) {
        assert_true(b[i] == GUARD_VALUE);
        assert_true(p[n + i] == GUARD_VALUE);
    }
    free(b);
}

/* Runs the reference on explicit data and compares with expected values exactly. */
static void run_exact(const char *text, const float *in, const float *wt, const float *expect) {
    mt_workload wl = wl_of(text);
    int64_t no = mt_workload_output_elems(&wl);
    float *out = guarded_alloc(no);
    assert_int_equal(mt_conv_reference(&wl, in, wt, out), MT_OK);
    for (int64_t i = 0; i < no; i++)
        if (out[i] != expect[i]) fail_msg("%s: out[%lld] = %g, expected %g", text, (long long)i, out[i], expect[i]);
    guarded_check_free(out, no);
}

static void test_1x1_is_matmul(void **state) {
    (void)state;
    /* out[k][p] = sum_c W[k][c] * in[c][p], P = 4 pixels. */
    const float in[3 * 4] = {1, 2, 3, 4, /* c0 */ 5, 6, 7, 8, /* c1 */ -1, 0, 1, 2 /* c2 */};
    const float wt[2 * 3] = {1, 0, 2, /* k0 */ -1, 0.5f, 3 /* k1 */};
    const float expect[2 * 4] = {
        1 + 0 - 2, 2 + 0 + 0, 3 + 0 + 2, 4 + 0 + 4,         /* k0 */
        -1 + 2.5f - 3, -2 + 3 + 0, -3 + 3.5f + 3, -4 + 4 + 6 /* k1 */
    };
    run_exact("c=3,h=2,w=2,k=2,r=1,s=1", in, wt, expect);
}

static void test_identity_kernel(void **state) {
    (void)state;
    /* c = k = 2; w[k][c] = delta(k, c) at the centre of a 3x3 kernel, pad 1. */
    mt_workload wl = wl_of("n=2,c=2,h=5,w=7,k=2,r=3,s=3,pad=1");
    int64_t ni = mt_workload_input_elems(&wl), no = mt_workload_output_elems(&wl);
    assert_int_equal(ni, no);
    float *in = malloc(sizeof(float) * (size_t)ni);
    float wt[2 * 2 * 9] = {0};
    wt[(0 * 2 + 0) * 9 + 4] = 1;
    wt[(1 * 2 + 1) * 9 + 4] = 1;
    mt_fill_random(in, ni, 3);
    run_exact("n=2,c=2,h=5,w=7,k=2,r=3,s=3,pad=1", in, wt, in);
    free(in);
}

static void test_stride2(void **state) {
    (void)state;
    float in[16];
    for (int i = 0; i < 16; i++) in[i] = (float)i;
    /* 1x1, stride 2: picks every other pixel. */
    const float one = 1;
    const float pick[4] = {0, 2, 8, 10};
    run_exact("c=1,h=4,w=4,k=1,r=1,s=1,stride=2", in, &one, pick);
    /* 2x2 of ones, stride 2: sums of 2x2 blocks. */
    const float ones[4] = {1, 1, 1, 1};
    const float blocks[4] = {0 + 1 + 4 + 5, 2 + 3 + 6 + 7, 8 + 9 + 12 + 13, 10 + 11 + 14 + 15};
    run_exact("c=1,h=4,w=4,k=1,r=2,s=2,stride=2", in, ones, blocks);
    /* 3x3 of ones, stride 2, pad 1: out 2x2; corners see 2x2, 2x3, 3x2, 3x3 windows. */
    const float ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    const float padded[4] = {
        0 + 1 + 4 + 5,                                /* rows 0-1, cols 0-1 */
        1 + 2 + 3 + 5 + 6 + 7,                        /* rows 0-1, cols 1-3 */
        4 + 5 + 8 + 9 + 12 + 13,                      /* rows 1-3, cols 0-1 */
        5 + 6 + 7 + 9 + 10 + 11 + 13 + 14 + 15,       /* rows 1-3, cols 1-3 */
    };
    run_exact("c=1,h=4,w=4,k=1,r=3,s=3,stride=2,pad=1", in, ones9, padded);
    /* Strides per axis: 1 down, 3 across. */
    const float pick13[8] = {0, 3, 4, 7, 8, 11, 12, 15};
    run_exact("c=1,h=4,w=4,k=1,r=1,s=1,stride=1x3", in, &one, pick13);
}

static void test_dilation(void **state) {
    (void)state;
    float in[25];
    for (int i = 0; i < 25; i++) in[i] = (float)i;
    const float ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    /* Dilation 2 on 5x5: one output, taps at rows/cols {0,2,4}: 3*(0+2+4) + 5*3*(0+2+4) = 108. */
    const float d2 = 108;
    run_exact("c=1,h=5,w=5,k=1,r=3,s=3,dilation=2", in, ones9, &d2);
    /* Dilation 2x1: rows {0,2,4}, cols {j, j+1, j+2} for j = 0..2. */
    float e[3];
    for (int j = 0; j < 3; j++) {
        e[j] = 0;
        for (int r = 0; r < 3; r++)
            for (int s = 0; s < 3; s++) e[j] += in[(2 * r) * 5 + j + s];
    }
    run_exact("c=1,h=5,w=5,k=1,r=3,s=3,dilation=2x1", in, ones9, e);
    /* Dilation with padding: 3x3, dilation 2, pad 2 keeps the size; the centre sees the same 9 taps. */
    mt_workload wl = wl_of("c=1,h=5,w=5,k=1,r=3,s=3,dilation=2,pad=2");
    assert_int_equal(mt_workload_out_h(&wl), 5);
    float out[25];
    assert_int_equal(mt_conv_reference(&wl, in, ones9, out), MT_OK);
    assert_true(out[12] == 108);
    assert_true(out[0] == 0 + 2 + 10 + 12); /* taps (0,0),(0,2),(2,0),(2,2) */
}

static void test_depthwise_and_groups(void **state) {
    (void)state;
    /* Depthwise 1x1: per-channel scale. */
    const float in[2 * 4] = {1, 2, 3, 4, -1, -2, 5, 6};
    const float scale[2] = {2, -3};
    const float dw[8] = {2, 4, 6, 8, 3, 6, -15, -18};
    run_exact("c=2,h=2,w=2,k=2,r=1,s=1,groups=2", in, scale, dw);
    /* Depthwise 3x3 of ones with pad 1 on a 2x2 image: every output sums its whole channel. */
    const float ones[18] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const float sums[8] = {10, 10, 10, 10, 8, 8, 8, 8};
    run_exact("c=2,h=2,w=2,k=2,r=3,s=3,pad=1,groups=2", in, ones, sums);
    /* groups = 2, c = 4, k = 2, 1x1: out0 = w0 . in[0:2], out1 = w1 . in[2:4]. */
    const float in4[4 * 1] = {1, 2, 3, 4};
    const float w4[2 * 2] = {10, 1, -1, 100};
    const float g2[2] = {10 + 2, -3 + 400};
    run_exact("c=4,h=1,w=1,k=2,r=1,s=1,groups=2", in4, w4, g2);
    /* Channel multiplier 2 (k = 2c, groups = c). */
    const float in2[2] = {3, 5};
    const float w2[4] = {1, 2, 3, 4};
    const float m2[4] = {3, 6, 15, 20};
    run_exact("c=2,h=1,w=1,k=4,r=1,s=1,groups=2", in2, w2, m2);
}

/* The textbook definition: seven loops, bounds checks, double accumulation in
 * (c, r, s) order. The reference must agree with it bit for bit. */
static void naive_conv(const mt_workload *wl, const float *in, const float *wt, float *out) {
    int P = mt_workload_out_h(wl), Q = mt_workload_out_w(wl);
    int cpg = wl->c / wl->groups, kpg = wl->k / wl->groups;
    for (int n = 0; n < wl->n; n++)
        for (int k = 0; k < wl->k; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    double acc = 0;
                    int g = k / kpg;
                    for (int ci = 0; ci < cpg; ci++)
                        for (int r = 0; r < wl->r; r++)
                            for (int s = 0; s < wl->s; s++) {
                                int ih = p * wl->stride_h - wl->pad_h + r * wl->dil_h;
                                int iw = q * wl->stride_w - wl->pad_w + s * wl->dil_w;
                                if (ih < 0 || ih >= wl->h || iw < 0 || iw >= wl->w) continue;
                                int c = g * cpg + ci;
                                acc += (double)in[(((size_t)n * wl->c + c) * wl->h + ih) * wl->w + iw] *
                                       (double)wt[(((size_t)k * cpg + ci) * wl->r + r) * wl->s + s];
                            }
                    out[(((size_t)n * wl->k + k) * P + p) * Q + q] = (float)acc;
                }
}

static const char *const random_cases[] = {
    "c=3,h=11,w=13,k=5,r=3,s=3",
    "n=3,c=4,h=9,w=10,k=6,r=3,s=3,pad=1",
    "n=2,c=8,h=12,w=12,k=8,r=5,s=3,stride=2,pad=2x1",
    "c=6,h=15,w=14,k=9,r=3,s=3,stride=3x2,pad=1,dilation=2x3,groups=3",
    "n=2,c=16,h=8,w=8,k=16,r=3,s=3,pad=1,groups=16",
    "c=8,h=7,w=9,k=16,r=3,s=3,stride=2,pad=1,groups=8",
    "c=3,h=32,w=32,k=7,r=7,s=7,stride=2,pad=3",
    "c=5,h=6,w=6,k=3,r=1,s=1,pad=4",
    "c=2,h=4,w=40,k=13,r=1,s=9,stride=1x4,pad=0x3,dilation=1x2",
    "c=4,h=3,w=3,k=4,r=3,s=3,pad=10,stride=7",
    "c=1,h=1,w=1,k=1,r=1,s=1",
};

static void test_against_naive(void **state) {
    (void)state;
    for (size_t t = 0; t < sizeof random_cases / sizeof random_cases[0]; t++) {
        mt_workload wl = wl_of(random_cases[t]);
        int64_t ni = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), no = mt_workload_output_elems(&wl);
        float *in = malloc(sizeof(float) * (size_t)ni), *wt = malloc(sizeof(float) * (size_t)nw);
        float *want = malloc(sizeof(float) * (size_t)no), *out = guarded_alloc(no);
        assert_non_null(in);
        assert_non_null(wt);
        assert_non_null(want);
        mt_fill_random(in, ni, 100 + t);
        mt_fill_random(wt, nw, 200 + t);
        naive_conv(&wl, in, wt, want);
        assert_int_equal(mt_conv_reference(&wl, in, wt, out), MT_OK);
        for (int64_t i = 0; i < no; i++)
            if (out[i] != want[i]) fail_msg("%s: out[%lld] = %.9g, naive %.9g", random_cases[t], (long long)i, out[i], want[i]);
        double err;
        int64_t bad;
        assert_int_equal(mt_compare(out, want, no, &err, &bad), MT_OK);
        assert_true(err == 0.0);
        assert_int_equal(bad, -1);
        guarded_check_free(out, no);
        free(in);
        free(wt);
        free(want);
    }
}

static void test_threads_bitwise(void **state) {
    (void)state;
    static const char *const cases[] = {
        "n=2,c=16,h=14,w=14,k=24,r=3,s=3,pad=1",
        "n=3,c=12,h=10,w=9,k=6,r=3,s=3,stride=2,pad=1,groups=3",
        "c=32,h=16,w=16,k=32,r=3,s=3,pad=1,groups=32",
        "c=8,h=5,w=5,k=1,r=1,s=1",
    };
    static const int threads[] = {0, 1, 2, 3, 7, 64, 1000};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        mt_workload wl = wl_of(cases[t]);
        int64_t ni = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), no = mt_workload_output_elems(&wl);
        float *in = malloc(sizeof(float) * (size_t)ni), *wt = malloc(sizeof(float) * (size_t)nw);
        float *one = malloc(sizeof(float) * (size_t)no);
        assert_non_null(in);
        assert_non_null(wt);
        assert_non_null(one);
        mt_fill_random(in, ni, 7);
        mt_fill_random(wt, nw, 8);
        assert_int_equal(mt_conv_reference(&wl, in, wt, one), MT_OK);
        for (size_t j = 0; j < sizeof threads / sizeof threads[0]; j++) {
            float *many = guarded_alloc(no);
            assert_int_equal(mt_conv_reference_mt(&wl, in, wt, many, threads[j]), MT_OK);
            assert_memory_equal(one, many, sizeof(float) * (size_t)no);
            guarded_check_free(many, no);
        }
        free(in);
        free(wt);
        free(one);
    }
}

static void test_reference_errors(void **state) {
    (void)state;
    mt_workload wl = wl_of("c=2,h=4,w=4,k=2,r=3,s=3");
    float in[32] = {0}, wt[36] = {0}, out[8];
    for (int i = 0; i < 8; i++) out[i] = 7;
    assert_int_equal(mt_conv_reference(NULL, in, wt, out), MT_INVALID_ARG);
    assert_int_equal(mt_conv_reference(&wl, NULL, wt, out), MT_INVALID_ARG);
    assert_int_equal(mt_conv_reference(&wl, in, NULL, out), MT_INVALID_ARG);
    assert_int_equal(mt_conv_reference(&wl, in, wt, NULL), MT_INVALID_ARG);
    mt_workload bad = wl;
    bad.groups = 3;
    assert_int_equal(mt_conv_reference(&bad, in, wt, out), MT_RANGE);
    bad = wl;
    bad.r = 9;
    assert_int_equal(mt_conv_reference_mt(&bad, in, wt, out, 4), MT_RANGE);
    for (int i = 0; i < 8; i++) assert_true(out[i] == 7); /* untouched */
}

static void test_compare(void **state) {
    (void)state;
    float ref[6] = {1, -2, 0.5f, 0, 4, -3};
    float out[6];
    double err;
    int64_t bad;
    memcpy(out, ref, sizeof ref);
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_OK);
    assert_true(err == 0.0);
    assert_int_equal(bad, -1);
    /* One element off by 1: error 1 / max|ref| = 0.25, at index 3. */
    out[3] = 1;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_OK);
    assert_true(fabs(err - 0.25) < 1e-12);
    assert_int_equal(bad, 3);
    /* The largest error wins, the first of equals is reported. */
    out[1] = -4;
    out[5] = -1;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_OK);
    assert_true(fabs(err - 0.5) < 1e-12);
    assert_int_equal(bad, 1);
    /* Small errors stay small even where ref is 0 (normalised by the tensor's scale). */
    memcpy(out, ref, sizeof ref);
    out[3] = 1e-6f;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_OK);
    assert_true(err < 1e-6);
    /* NaN and infinities are wrong results, reported at their first index. */
    memcpy(out, ref, sizeof ref);
    out[4] = NAN;
    out[5] = INFINITY;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_WRONG_RESULT);
    assert_int_equal(bad, 4);
    assert_true(isinf(err));
    out[4] = ref[4];
    out[5] = -INFINITY;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_WRONG_RESULT);
    assert_int_equal(bad, 5);
    out[5] = ref[5];
    out[0] = NAN;
    assert_int_equal(mt_compare(out, ref, 6, NULL, NULL), MT_WRONG_RESULT);
    /* A non-finite reference is a caller error. */
    memcpy(out, ref, sizeof ref);
    ref[2] = NAN;
    assert_int_equal(mt_compare(out, ref, 6, &err, &bad), MT_INVALID_ARG);
    assert_int_equal(bad, 2);
    ref[2] = 0.5f;
    /* All-zero reference: the scale floor of 1e-6 applies. */
    float z[3] = {0, 0, 0}, o[3] = {0, 1e-7f, 0};
    assert_int_equal(mt_compare(o, z, 3, &err, &bad), MT_OK);
    assert_true(fabs(err - 0.1) < 1e-6);
    assert_int_equal(bad, 1);
    /* Edge arguments. */
    assert_int_equal(mt_compare(out, ref, 0, &err, &bad), MT_OK);
    assert_true(err == 0.0);
    assert_int_equal(mt_compare(out, ref, -1, &err, &bad), MT_INVALID_ARG);
    assert_int_equal(mt_compare(NULL, ref, 6, &err, &bad), MT_INVALID_ARG);
    assert_int_equal(mt_compare(out, NULL, 6, &err, &bad), MT_INVALID_ARG);
    assert_int_equal(mt_compare(out, ref, 6, NULL, NULL), MT_OK);
}

static void test_compare_catches_wrong_conv(void **state) {
    (void)state;
    /* A realistic check: perturbing one output element of a conv by 1% of
     * the tensor's scale is visible through the normalised error. */
    mt_workload wl = wl_of("c=16,h=12,w=12,k=8,r=3,s=3,pad=1");
    int64_t ni = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), no = mt_workload_output_elems(&wl);
    float *in = malloc(sizeof(float) * (size_t)ni), *wt = malloc(sizeof(float) * (size_t)nw);
    float *ref = malloc(sizeof(float) * (size_t)no), *out = malloc(sizeof(float) * (size_t)no);
    mt_fill_random(in, ni, 1);
    mt_fill_random(wt, nw, 2);
    assert_int_equal(mt_conv_reference(&wl, in, wt, ref), MT_OK);
    /* The naive sum is bit-identical; then one element is perturbed. */
    naive_conv(&wl, in, wt, out);
    double scale = 0;
    for (int64_t i = 0; i < no; i++) scale = fmax(scale, fabs(ref[i]));
    out[no / 2] += (float)(0.01 * scale);
    double err;
    int64_t bad;
    assert_int_equal(mt_compare(out, ref, no, &err, &bad), MT_OK);
    assert_true(err > 0.009 && err < 0.011);
    assert_int_equal(bad, no / 2);
    free(in);
    free(wt);
    free(ref);
    free(out);
}

static void test_fill_random(void **state) {
    (void)state;
    enum { N = 100000 };
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N), *c = malloc(sizeof(float) * N);
    mt_fill_random(a, N, 42);
    mt_fill_random(b, N, 42);
    mt_fill_random(c, N, 43);
    assert_memory_equal(a, b, sizeof(float) * N);
    assert_memory_not_equal(a, c, sizeof(float) * N);
    double sum = 0, lo = 1, hi = -1;
    for (int i = 0; i < N; i++) {
        assert_true(a[i] >= -1.0f && a[i] < 1.0f);
        sum += a[i];
        lo = fmin(lo, a[i]);
        hi = fmax(hi, a[i]);
    }
    assert_true(fabs(sum / N) < 0.01); /* sd of the mean ~ 0.0018 */
    assert_true(lo < -0.99 && hi > 0.99);
    mt_fill_random(NULL, 10, 1); /* harmless */
    mt_fill_random(a, 0, 1);
    free(a);
    free(b);
    free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1x1_is_matmul),     cmocka_unit_test(test_identity_kernel), cmocka_unit_test(test_stride2),
        cmocka_unit_test(test_dilation),          cmocka_unit_test(test_depthwise_and_groups), cmocka_unit_test(test_against_naive),
        cmocka_unit_test(test_threads_bitwise),   cmocka_unit_test(test_reference_errors), cmocka_unit_test(test_compare),
        cmocka_unit_test(test_compare_catches_wrong_conv), cmocka_unit_test(test_fill_random),
    };
    return cmocka_run_group_tests_name("reference", tests, NULL, NULL);
}
