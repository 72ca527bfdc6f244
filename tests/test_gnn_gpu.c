/* GNN scoring on the GPU (gnn/gnn_gpu.h, cuda/module/gnn.c) against the
 * CPU's: real encoded candidates of every template, every architecture,
 * after a short fit (so the normalisation is a real one) and again after
 * adaptation steps (the scorer must upload the new weights), with one and
 * with several device passes per call. The tolerance is the header's:
 * |s_gpu - s_cpu| <= MT_GNN_GPU_RTOL * max|s_cpu| + MT_GNN_GPU_ATOL.
 * Without a usable CUDA device every GPU test skips, saying why. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gnn.h"
#include "gnn_gpu.h"
#include "graph_enc.h"
#include "template.h"
#include "mtgpu/workload.h"

#include "gnn_samples.h"

#define REQUIRE_GPU()                                                  \
    do {                                                               \
        char why_[2048];                                               \
        if (mt_gnn_gpu_available(why_, sizeof why_) != MT_OK) {        \
            printf("SKIP: no CUDA device: %s\n", why_);                \
            fflush(stdout);                                            \
            skip();                                                    \
        }                                                              \
    } while (0)

/* Without a device: creating a scorer fails cleanly, with the reason. */
static void test_unavailable_is_clean(void **state) {
    (void)state;
    char why[2048], err[2048];
    if (mt_gnn_gpu_available(why, sizeof why) == MT_OK) {
        printf("GPU present (%s): nothing to check here\n", why);
        return;
    }
    printf("no GPU path: %s\n", why);
    assert_true(why[0] != '\0');
    mt_gnn *m = NULL;
    assert_int_equal(mt_gnn_create(NULL, &m, err, sizeof err), MT_OK);
    mt_graph_encoder *enc = NULL;
    assert_int_equal(mt_graph_encoder_create(mt_template_at(0), &enc, err, sizeof err), MT_OK);
    mt_gnn_gpu_scorer *s = (mt_gnn_gpu_scorer *)&s;
    err[0] = '\0';
    assert_int_equal(mt_gnn_gpu_scorer_create(m, mt_graph_encoder_shape(enc), &s, err, sizeof err), MT_UNAVAILABLE);
    assert_null(s);
    assert_true(err[0] != '\0');
    assert_int_equal(mt_gnn_gpu_scorer_run(NULL, 1, NULL, NULL, err, sizeof err), MT_INVALID_ARG);
    mt_gnn_gpu_scorer_free(NULL);
    mt_graph_encoder_free(enc);
    mt_gnn_free(m);
}

/* Compares the GPU scorer's scores of x[0..n) with mt_gnn_score's. */
static void compare(mt_gnn *m, const mt_graph_shape *s, int n, const float *x, const char *what) {
    char err[1024];
    float *cpu = malloc(sizeof(float) * (size_t)n), *gpu = malloc(sizeof(float) * (size_t)n);
    assert_non_null(cpu), assert_non_null(gpu);
    assert_int_equal(mt_gnn_score(m, s, n, x, cpu, err, sizeof err), MT_OK);
    mt_gnn_gpu_scorer *g = NULL;
    if (mt_gnn_gpu_scorer_create(m, s, &g, err, sizeof err) != MT_OK) fail_msg("%s: GPU scorer: %s", what, err);
    assert_true(mt_gnn_gpu_scorer_matches(g, s));
    if (mt_gnn_gpu_scorer_run(g, n, x, gpu, err, sizeof err) != MT_OK) fail_msg("%s: GPU run: %s", what, err);
    double mx = 0, worst = 0;
    for (int i = 0; i < n; i++) mx = fmax(mx, fabs(cpu[i]));
    for (int i = 0; i < n; i++) {
        assert_true(isfinite(gpu[i]));
        worst = fmax(worst, fabs((double)gpu[i] - cpu[i]));
    }
    double tol = MT_GNN_GPU_RTOL * mx + MT_GNN_GPU_ATOL;
    printf("%-34s %4d graphs: max|cpu| %.4g, max|gpu-cpu| %.3g (tolerance %.3g)\n", what, n, mx, worst, tol);
    if (worst > tol) fail_msg("%s: GPU scores differ from the CPU's by %g > %g", what, worst, tol);
    mt_gnn_gpu_scorer_free(g);
    free(cpu), free(gpu);
}

static void test_gpu_matches_cpu(void **state) {
    (void)state;
    REQUIRE_GPU();
    enum { B = 300 };
    char err[1024];
    const int F = MT_GRAPH_FEATS;
    for (int ti = 0; ti < mt_template_count(); ti++) {
        const mt_template *t = mt_template_at(ti);
        mt_graph_encoder *enc = NULL;
        assert_int_equal(mt_graph_encoder_create(t, &enc, err, sizeof err), MT_OK);
        const mt_graph_shape *s = mt_graph_encoder_shape(enc);
        size_t per = (size_t)s->n_nodes * F;
        float *x = malloc(sizeof(float) * per * B);
        mt_gnn_sample *smp = calloc(B, sizeof *smp);
        assert_non_null(x), assert_non_null(smp);
        int n = mt_test_encode_samples(t, enc, B, x, smp);
        assert_true(n >= 64);
        for (int arch = 0; arch < 3; arch++) {
            mt_gnn_params p = mt_gnn_default_params();
            p.arch = (mt_gnn_arch)arch, p.epochs = 2;
            mt_gnn *m;
            assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_fit(m, smp, n, err, sizeof err), MT_OK);
            char what[96];
            snprintf(what, sizeof what, "%s, arch %d", mt_template_name(t), arch);
            compare(m, s, n, x, what);
            /* one scorer across an adaptation: it must pick up the new weights */
            float *cpu = malloc(sizeof(float) * (size_t)n), *gpu = malloc(sizeof(float) * (size_t)n);
            assert_non_null(cpu), assert_non_null(gpu);
            mt_gnn_gpu_scorer *g = NULL;
            assert_int_equal(mt_gnn_gpu_scorer_create(m, s, &g, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_gpu_scorer_run(g, n, x, gpu, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_train_steps(m, smp, n, 5, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_score(m, s, n, x, cpu, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_gpu_scorer_run(g, n, x, gpu, err, sizeof err), MT_OK);
            double mx = 0, worst = 0;
            for (int i = 0; i < n; i++) mx = fmax(mx, fabs(cpu[i]));
            for (int i = 0; i < n; i++) worst = fmax(worst, fabs((double)gpu[i] - cpu[i]));
            printf("%-34s after 5 adaptation steps: max|gpu-cpu| %.3g\n", what, worst);
            assert_true(worst <= MT_GNN_GPU_RTOL * mx + MT_GNN_GPU_ATOL);
            mt_gnn_gpu_scorer_free(g);
            free(cpu), free(gpu);
            mt_gnn_free(m);
        }
        free(x), free(smp);
        mt_graph_encoder_free(enc);
    }
}

int main(void) {
    /* several device passes per call in the parity test: 300 graphs in passes of 128 */
    setenv("MTGPU_GNN_GPU_GRAPHS", "128", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unavailable_is_clean),
        cmocka_unit_test(test_gpu_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
