/* Loop-nest features and the random / xgb cost models, on real templates'
 * spaces with a synthetic cost function of the knob values (no device). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <cmocka.h>

#include "costmodel.h"
#include "gnn.h"
#include "ir.h"
#include "loop_features.h"
#include "space.h"
#include "template.h"
#include "mtgpu/workload.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static mt_workload wl_conv(void) {
    mt_workload wl;
    char err[128];
    assert_int_equal(mt_workload_parse("n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1", &wl, err, sizeof err), MT_OK);
    return wl;
}

typedef struct task {
    mt_workload wl;
    const mt_template *t;
    mt_space sp;
} task;

static void task_init(task *tk, const char *tmpl, const char *wl) {
    char err[128];
    assert_int_equal(mt_workload_parse(wl, &tk->wl, err, sizeof err), MT_OK);
    tk->t = mt_template_find(tmpl);
    assert_non_null(tk->t);
    assert_int_equal(mt_template_space(tk->t, &tk->wl, &tk->sp), MT_OK);
}

/* A smooth synthetic cost (ms) of a `direct` config with a known optimum of
 * 1.0: a bowl in log2(threads per block) around 128, in log2(accumulators per
 * work-item) around 16 and in log2(reduction-channel inner split) around 8,
 * times 2% per factor of two that vec is away from 4, and penalties for
 * stage_local = 0 and auto_unroll != 512.
 * Returns -1 for configs the template cannot build. */
static double synth_cost(const task *tk, const mt_config *cfg) {
    mt_kernel *k = NULL;
    char err[256];
    if (mt_template_build(tk->t, &tk->wl, &tk->sp, cfg, &k, err, sizeof err) != MT_OK) return -1;
    mt_kernel_free(k);
    const int *f = mt_config_get(&tk->sp, cfg, "tile_f");
    const int *y = mt_config_get(&tk->sp, cfg, "tile_y");
    const int *x = mt_config_get(&tk->sp, cfg, "tile_x");
    const int *rc = mt_config_get(&tk->sp, cfg, "tile_rc");
    double threads = (double)f[2] * y[2] * x[2];
    double regs = (double)f[1] * f[3] * y[1] * y[3] * x[1] * x[3];
    double a = log2(threads) - 7, b = log2(regs) - 4, c = log2((double)rc[1]) - 3;
    double cost = (1 + 0.3 * a * a) * (1 + 0.2 * b * b) * (1 + 0.1 * c * c);
    cost *= 1 + 0.02 * fabs(log2((double)mt_config_value(&tk->sp, cfg, "vec")) - 2);
    if (!mt_config_value(&tk->sp, cfg, "stage_local")) cost *= 1.3;
    int unroll = mt_config_value(&tk->sp, cfg, "auto_unroll_max_step");
    cost *= unroll == 512 ? 1.0 : unroll == 1500 ? 1.05 : 1.1;
    return cost;
}

/* n random configs with their synthetic costs; valid_only skips unbuildable ones. */
static void draw(const task *tk, uint64_t *rng, int n, int valid_only, mt_config *cfgs, double *cost) {
    for (int i = 0; i < n;) {
        mt_space_random(&tk->sp, rng, &cfgs[i]);
        cost[i] = synth_cost(tk, &cfgs[i]);
        if (valid_only && cost[i] < 0) continue;
        i++;
    }
}

static void to_samples(const task *tk, const mt_config *cfgs, const double *cost, int n, mt_cm_sample *s) {
    for (int i = 0; i < n; i++) {
        s[i] = (mt_cm_sample){.wl = &tk->wl, .tmpl = tk->t, .space = &tk->sp, .cfg = cfgs[i], .cost_ms = cost[i], .failed = cost[i] < 0};
    }
}

/* Fraction of pairs with different costs that the scores order correctly
 * (lower cost = higher score). */
static double pairwise_accuracy(const double *cost, const double *score, int n) {
    long good = 0, total = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            if (cost[i] == cost[j]) continue;
            total++;
            int want = cost[i] < cost[j];
            if (score[i] == score[j]) continue;
            good += (score[i] > score[j]) == want;
        }
    return total ? (double)good / (double)total : 0;
}

/* ---- features ---- */

static void test_features_shape(void **state) {
    (void)state;
    task tk;
    tk.wl = wl_conv();
    tk.t = mt_template_find("direct");
    assert_non_null(tk.t);
    assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
    int dim = 0;
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, NULL, 0, NULL, &dim), MT_OK);
    assert_int_equal(dim, MT_FEATURES_DIM);

    enum { N = 64 };
    mt_config cfgs[N];
    double cost[N];
    uint64_t rng = 7;
    draw(&tk, &rng, N, 1, cfgs, cost);
    float *x = malloc(sizeof(float) * N * MT_FEATURES_DIM);
    assert_non_null(x);
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, cfgs, N, x, &dim), MT_OK);
    assert_int_equal(dim, MT_FEATURES_DIM);
    int main_len = -1, pairs = 0, loop_differ = 0;
    for (int i = 0; i < N; i++) {
        const float *r = x + (size_t)i * dim;
        assert_true(r[0] == 1.0f);
        for (int j = 0; j < dim; j++) assert_true(isfinite(r[j]));
        /* the main nest has the same length for every config of a template */
        int len = (int)r[MT_FEATURES_KERNEL_OFF + 19];
        if (main_len < 0) main_len = len;
        assert_int_equal(len, main_len);
        /* threads per block, as mt_kernel_analyze counts them */
        const int *f = mt_config_get(&tk.sp, &cfgs[i], "tile_f"), *y = mt_config_get(&tk.sp, &cfgs[i], "tile_y"),
                  *xx = mt_config_get(&tk.sp, &cfgs[i], "tile_x");
        assert_float_equal(r[MT_FEATURES_KERNEL_OFF], log2(1.0 + (double)f[2] * y[2] * xx[2]), 1e-5);
        /* rows of different configs differ, and nearly always in the loop block too */
        for (int k = 0; k < i; k++) {
            if (mt_space_config_index(&tk.sp, &cfgs[i]) == mt_space_config_index(&tk.sp, &cfgs[k])) continue;
            const float *o = x + (size_t)k * dim;
            int any = 0, loops = 0;
            for (int j = 0; j < dim && !any; j++) any = r[j] != o[j];
            for (int j = MT_FEATURES_LOOP_OFF; j < dim && !loops; j++) loops = r[j] != o[j];
            assert_true(any);
            pairs++;
            loop_differ += loops;
        }
    }
    assert_true(loop_differ >= pairs * 9 / 10);
    printf("# direct: main nest of %d loops, feature length %d\n", main_len, dim);
    assert_true(main_len >= 12 && main_len <= MT_FEATURES_LOOPS);

    /* Changing only tile_x changes the loop features. */
    mt_config a = cfgs[0], b = cfgs[0];
    int kx = -1;
    for (int i = 0; i < tk.sp.nknobs; i++)
        if (strcmp(tk.sp.knobs[i].name, "tile_x") == 0) kx = i;
    assert_true(kx >= 0);
    float ra[MT_FEATURES_DIM], rb[MT_FEATURES_DIM];
    int found = 0;
    for (int o = 0; o < tk.sp.knobs[kx].noptions && !found; o++) {
        b.choice[kx] = o;
        if (o == a.choice[kx]) continue;
        assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &a, 1, ra, &dim), MT_OK);
        assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &b, 1, rb, &dim), MT_OK);
        if (rb[0] != 1.0f) continue;
        int differ = 0;
        for (int j = MT_FEATURES_LOOP_OFF; j < dim; j++) differ += ra[j] != rb[j];
        assert_true(differ > 0);
        found = 1;
    }
    assert_true(found);
    free(x);
    mt_space_free(&tk.sp);
}

/* Strides from the linear-coefficient analysis, independent of the order
 * the template nests its loops in: in `direct`'s main nest the x loop inside
 * the work-item's tile (the only loop of extent 8 here) reads the input and
 * the accumulators with stride 1, and the two kernel-window loops (extent 3)
 * read the weights with strides 1 and 3 and the input with strides 1 and W. */
static void test_features_strides(void **state) {
    (void)state;
    task tk;
    task_init(&tk, "direct", "n=1,c=16,h=16,w=16,k=16,r=3,s=3,pad=1");
    mt_config cfg;
    char err[256];
    assert_int_equal(mt_config_parse(&tk.sp,
                                     "tile_f=2x1x8x1,tile_y=4x1x4x1,tile_x=1x1x2x8,tile_rc=4x4,tile_ry=1x3,tile_rx=1x3,"
                                     "auto_unroll_max_step=0,unroll_explicit=0,vec=1,stage_local=0",
                                     &cfg, err, sizeof err),
                     MT_OK);
    float r[MT_FEATURES_DIM];
    int dim;
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &cfg, 1, r, &dim), MT_OK);
    assert_true(r[0] == 1.0f);
    int n = (int)r[MT_FEATURES_KERNEL_OFF + 19];
    assert_true(n > 0 && n <= MT_FEATURES_LOOPS);
#define LOOP(l, f) r[MT_FEATURES_LOOP_OFF + MT_FEATURES_PER_LOOP * (l) + (f)]
#define STRIDE(l, role) LOOP(l, 11 + 3 * (role))
    const float s1 = (float)log2(2.0), s3 = (float)log2(4.0), s16 = (float)log2(17.0);
    int n8 = 0, n3 = 0, w1 = 0, w3 = 0, i1 = 0, i16 = 0;
    for (int l = 0; l < n; l++) {
        float ext = LOOP(l, 0);
        if (ext == (float)log2(9.0) && LOOP(l, 1 + MT_LOOP_SERIAL) == 1.0f) {
            n8++;
            assert_float_equal(STRIDE(l, 0), s1, 1e-6); /* input */
            assert_float_equal(STRIDE(l, 4), s1, 1e-6); /* private accumulators */
            assert_float_equal(STRIDE(l, 1), 0, 0);     /* weights do not move with x */
        }
        if (ext == (float)log2(4.0) && LOOP(l, 1 + MT_LOOP_SERIAL) == 1.0f) {
            n3++;
            w1 += STRIDE(l, 1) == s1;
            w3 += STRIDE(l, 1) == s3;
            i1 += STRIDE(l, 0) == s1;
            i16 += STRIDE(l, 0) == s16;
        }
    }
    assert_int_equal(n8, 1);
    assert_int_equal(n3, 2);
    assert_int_equal(w1, 1);
    assert_int_equal(w3, 1);
    assert_int_equal(i1, 1);
    assert_int_equal(i16, 1);
    /* the outermost loop is a launch loop, with its axis */
    assert_float_equal(LOOP(0, 1 + MT_LOOP_BLOCK), 1.0, 0);
    assert_true(LOOP(0, 10) >= 1.0f);
#undef STRIDE
#undef LOOP
    /* names */
    char name[64];
    assert_true(mt_features_name(0, name, sizeof name) > 0);
    assert_string_equal(name, "valid");
    assert_true(mt_features_name(MT_FEATURES_LOOP_OFF + 11, name, sizeof name) > 0);
    assert_string_equal(name, "loop0.input.stride");
    assert_int_equal(mt_features_name(MT_FEATURES_DIM, name, sizeof name), -1);
    for (int i = 0; i < MT_FEATURES_DIM; i++) assert_true(mt_features_name(i, name, sizeof name) > 0);
    mt_space_free(&tk.sp);
}

static void test_features_invalid_and_other_templates(void **state) {
    (void)state;
    task tk;
    tk.wl = wl_conv();
    tk.t = mt_template_find("direct");
    assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
    /* a config the template rejects: vec 8 with an inner x tile of 1 */
    mt_config cfg;
    char err[256];
    assert_int_equal(mt_config_parse(&tk.sp,
                                     "tile_f=4x1x8x1,tile_y=7x1x4x1,tile_x=7x1x4x1,tile_rc=4x8,tile_ry=1x3,tile_rx=1x3,"
                                     "auto_unroll_max_step=512,unroll_explicit=0,vec=8,stage_local=1",
                                     &cfg, err, sizeof err),
                     MT_OK);
    float r[MT_FEATURES_DIM];
    int dim;
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &cfg, 1, r, &dim), MT_OK);
    for (int j = 0; j < dim; j++) assert_true(r[j] == 0.0f);
    /* wrong template for the space, config outside the space, NULLs */
    assert_int_equal(mt_features_extract(&tk.wl, mt_template_find("gemm"), &tk.sp, &cfg, 1, r, &dim), MT_INVALID_ARG);
    mt_config bad = cfg;
    bad.choice[0] = 1 << 20;
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &bad, 1, r, &dim), MT_INVALID_ARG);
    assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, &cfg, 1, r, NULL), MT_INVALID_ARG);
    mt_space_free(&tk.sp);

    /* every template gives rows of the same length; most random configs build */
    static const char *const tasks[][2] = {
        {"direct", "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"},
        {"depthwise", "n=1,c=32,h=112,w=112,k=32,r=3,s=3,pad=1,groups=32"},
        {"gemm", "n=1,c=64,h=56,w=56,k=64,r=1,s=1"},
        {"gemm", "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"},
    };
    for (size_t t = 0; t < sizeof tasks / sizeof tasks[0]; t++) {
        task_init(&tk, tasks[t][0], tasks[t][1]);
        enum { N = 200 };
        mt_config cfgs[N];
        uint64_t rng = 3;
        for (int i = 0; i < N; i++) mt_space_random(&tk.sp, &rng, &cfgs[i]);
        float *x = malloc(sizeof(float) * N * MT_FEATURES_DIM);
        assert_non_null(x);
        double t0 = now_s();
        assert_int_equal(mt_features_extract(&tk.wl, tk.t, &tk.sp, cfgs, N, x, &dim), MT_OK);
        double dt = now_s() - t0;
        assert_int_equal(dim, MT_FEATURES_DIM);
        int valid = 0, len = -1, same = 1;
        for (int i = 0; i < N; i++) {
            const float *row = x + (size_t)i * dim;
            if (row[0] != 1.0f) continue;
            valid++;
            int l = (int)row[MT_FEATURES_KERNEL_OFF + 19];
            if (len < 0) len = l;
            same &= l == len;
        }
        printf("# %-9s %s: %d/%d configs build, main nest %d loops, %.0f configs/s\n", tasks[t][0], tasks[t][1], valid, N, len, N / dt);
        assert_true(valid > 0);
        /* direct and depthwise keep one loop structure for all configs; gemm's
         * depends on the config (staging, hoisted edge tests) */
        if (strcmp(tasks[t][0], "gemm") != 0) assert_true(same);
        free(x);
        mt_space_free(&tk.sp);
    }
}

/* ---- models ---- */

static void test_create_errors(void **state) {
    (void)state;
    mt_costmodel *m = (mt_costmodel *)1;
    char err[256] = "";
    assert_int_equal(mt_costmodel_create("nope", NULL, &m, err, sizeof err), MT_INVALID_ARG);
    assert_null(m);
    assert_non_null(strstr(err, "random"));
    assert_non_null(strstr(err, "xgb"));
    assert_int_equal(mt_costmodel_create(NULL, NULL, &m, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_costmodel_create("xgb", NULL, NULL, err, sizeof err), MT_INVALID_ARG);
    mt_costmodel_params p = mt_costmodel_default_params();
    p.xgb_rounds = 0;
    assert_int_equal(mt_costmodel_create("xgb", &p, &m, err, sizeof err), MT_INVALID_ARG);
    p = mt_costmodel_default_params();
    p.xgb_loss = (mt_xgb_loss)7;
    assert_int_equal(mt_costmodel_create("xgb", &p, &m, err, sizeof err), MT_INVALID_ARG);
    assert_true(mt_costmodel_kind_count() >= 2);
    assert_string_equal(mt_costmodel_kind_at(0), "random");
    assert_null(mt_costmodel_kind_at(-1));

    for (int k = 0; k < mt_costmodel_kind_count(); k++) {
        const char *kind = mt_costmodel_kind_at(k);
        if (strcmp(kind, "gnn-meta") == 0 || strcmp(kind, "gnn-transfer") == 0) {
            /* these start from a model file: refused without one */
            m = (mt_costmodel *)1;
            assert_int_equal(mt_costmodel_create(kind, NULL, &m, err, sizeof err), MT_INVALID_ARG);
            assert_null(m);
            assert_non_null(strstr(err, "model file"));
            continue;
        }
        assert_int_equal(mt_costmodel_create(mt_costmodel_kind_at(k), NULL, &m, err, sizeof err), MT_OK);
        assert_string_equal(mt_costmodel_kind(m), mt_costmodel_kind_at(k));
        err[0] = '\0';
        assert_int_equal(mt_costmodel_fit(m, NULL, 0, err, sizeof err), MT_INVALID_ARG);
        assert_true(strlen(err) > 0);
        assert_int_equal(mt_costmodel_fit(m, NULL, 0, NULL, 0), MT_INVALID_ARG);
        assert_int_equal(mt_costmodel_update(m, NULL, 0, err, sizeof err), MT_OK);
        assert_int_equal(mt_costmodel_trained(m), 0);
        task tk;
        tk.wl = wl_conv();
        tk.t = mt_template_find("direct");
        assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
        mt_config c;
        double cc;
        uint64_t rng = 1;
        draw(&tk, &rng, 1, 1, &c, &cc);
        /* malformed samples and queries */
        mt_cm_sample s = {.wl = &tk.wl, .tmpl = tk.t, .space = &tk.sp, .cfg = c, .cost_ms = -1, .failed = 0};
        assert_int_equal(mt_costmodel_fit(m, &s, 1, err, sizeof err), MT_INVALID_ARG);
        s.cost_ms = 1;
        s.tmpl = mt_template_find("gemm");
        assert_int_equal(mt_costmodel_fit(m, &s, 1, err, sizeof err), MT_INVALID_ARG);
        s.tmpl = NULL;
        assert_int_equal(mt_costmodel_update(m, &s, 1, err, sizeof err), MT_INVALID_ARG);
        assert_int_equal(mt_costmodel_trained(m), 0);
        double sc = 5;
        mt_cm_query q = {&tk.wl, tk.t, &tk.sp, NULL};
        /* not fitted: xgb scores 0 */
        assert_int_equal(mt_costmodel_predict(m, &q, &c, 1, &sc, err, sizeof err), MT_OK);
        if (strcmp(mt_costmodel_kind(m), "xgb") == 0) assert_true(sc == 0); /* c builds */
        mt_config bad = c;
        bad.choice[1] = -1;
        assert_int_equal(mt_costmodel_predict(m, &q, &bad, 1, &sc, err, sizeof err), MT_INVALID_ARG);
        assert_int_equal(mt_costmodel_predict(m, NULL, &c, 1, &sc, err, sizeof err), MT_INVALID_ARG);
        assert_int_equal(mt_costmodel_predict(m, &q, &c, 0, NULL, err, sizeof err), MT_OK);
        mt_space_free(&tk.sp);
        mt_costmodel_free(m);
    }
    mt_costmodel_free(NULL);
}

static void test_random_model(void **state) {
    (void)state;
    task tk;
    tk.wl = wl_conv();
    tk.t = mt_template_find("direct");
    assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
    enum { N = 100 };
    mt_config cfgs[N];
    double cost[N], s1[N], s2[N];
    uint64_t rng = 9;
    draw(&tk, &rng, N, 1, cfgs, cost);
    mt_costmodel_params p = mt_costmodel_default_params();
    p.seed = 42;
    mt_costmodel *a, *b;
    char err[256];
    assert_int_equal(mt_costmodel_create("random", &p, &a, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_create("random", &p, &b, err, sizeof err), MT_OK);
    mt_cm_query q = {&tk.wl, tk.t, &tk.sp, NULL};
    assert_int_equal(mt_costmodel_predict(a, &q, cfgs, N, s1, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(b, &q, cfgs, N, s2, err, sizeof err), MT_OK);
    int distinct = 0;
    for (int i = 0; i < N; i++) {
        assert_true(s1[i] == s2[i]); /* same seed, same scores */
        assert_true(s1[i] >= 0 && s1[i] < 1);
        distinct += i > 0 && s1[i] != s1[i - 1];
    }
    assert_true(distinct > N / 2);
    mt_cm_sample smp[N];
    to_samples(&tk, cfgs, cost, N, smp);
    assert_int_equal(mt_costmodel_fit(a, smp, N, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_trained(a), N);
    assert_int_equal(mt_costmodel_update(a, smp, 10, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_trained(a), N + 10);
    mt_costmodel_free(a);
    mt_costmodel_free(b);
    mt_space_free(&tk.sp);
}

/* A learning model (kind) learns the synthetic ranking from 200 samples to
 * at least min_acc pairwise accuracy; shuffled labels do not. */
static void model_ranking(const char *kind, mt_costmodel_params params, const char *lname, double min_acc) {
    task tk;
    tk.wl = wl_conv();
    tk.t = mt_template_find("direct");
    assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
    printf("# direct space on %s: %llu configs\n", "c=32,h=28,w=28,k=32,r=3,s=3,pad=1", (unsigned long long)mt_space_size(&tk.sp));
    enum { NTRAIN = 200, NTEST = 400, NPRED = 1000 };
    mt_config *train = malloc(sizeof(mt_config) * NTRAIN), *test = malloc(sizeof(mt_config) * NPRED);
    double *ctrain = malloc(sizeof(double) * NTRAIN), *ctest = malloc(sizeof(double) * NPRED), *score = malloc(sizeof(double) * NPRED);
    mt_cm_sample *smp = malloc(sizeof(mt_cm_sample) * NTRAIN);
    assert_true(train && test && ctrain && ctest && score && smp);
    uint64_t rng = 12345;
    draw(&tk, &rng, NTRAIN, 1, train, ctrain);
    draw(&tk, &rng, NPRED, 1, test, ctest);
    to_samples(&tk, train, ctrain, NTRAIN, smp);

    mt_costmodel *m;
    char err[256];
    assert_int_equal(mt_costmodel_create(kind, &params, &m, err, sizeof err), MT_OK);
    double t0 = now_s();
    mt_status fst = mt_costmodel_fit(m, smp, NTRAIN, err, sizeof err);
    if (fst != MT_OK) printf("# fit: %s\n", err);
    assert_int_equal(fst, MT_OK);
    double t_fit = now_s() - t0;
    assert_int_equal(mt_costmodel_trained(m), NTRAIN);
    mt_cm_query q = {&tk.wl, tk.t, &tk.sp, NULL};
    t0 = now_s();
    mt_status pst = mt_costmodel_predict(m, &q, test, NPRED, score, err, sizeof err);
    if (pst != MT_OK) fprintf(stderr, "# predict: %s\n", err);
    assert_int_equal(pst, MT_OK);
    double t_pred = now_s() - t0;
    double acc = pairwise_accuracy(ctest, score, NTEST);
    printf("# %s: fit on %d samples %.2f s; pairwise accuracy on %d held-out configs %.3f; "
           "predict %d candidates %.3f s (%.0f/s)\n",
           lname, NTRAIN, t_fit, NTEST, acc, NPRED, t_pred, NPRED / t_pred);
    assert_true(acc > min_acc); /* speed is bench/cm_speed's to measure, not a test's */

    /* Failed configs score lowest-ish: an unbuildable candidate gets the invalid score. */
    mt_config bad;
    assert_int_equal(mt_config_parse(&tk.sp,
                                     "tile_f=4x1x8x1,tile_y=7x1x4x1,tile_x=7x1x4x1,tile_rc=4x8,tile_ry=1x3,tile_rx=1x3,"
                                     "auto_unroll_max_step=512,unroll_explicit=0,vec=8,stage_local=1",
                                     &bad, err, sizeof err),
                     MT_OK);
    double sb;
    assert_int_equal(mt_costmodel_predict(m, &q, &bad, 1, &sb, err, sizeof err), MT_OK);
    assert_true(sb <= MT_COSTMODEL_INVALID_SCORE);

    /* update with more samples, failures included as a tuner sees them */
    mt_config more[100];
    double cmore[100];
    mt_cm_sample smore[100];
    draw(&tk, &rng, 100, 0, more, cmore);
    to_samples(&tk, more, cmore, 100, smore);
    assert_int_equal(mt_costmodel_update(m, smore, 100, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_trained(m), NTRAIN + 100);
    assert_int_equal(mt_costmodel_predict(m, &q, test, NTEST, score, err, sizeof err), MT_OK);
    double acc2 = pairwise_accuracy(ctest, score, NTEST);
    printf("# %s: after update to %d samples: accuracy %.3f\n", lname, NTRAIN + 100, acc2);
    assert_true(acc2 > min_acc);
    mt_costmodel_free(m);

    /* The same samples with the costs shuffled carry no signal. */
    uint64_t r2 = 99;
    for (int i = NTRAIN - 1; i > 0; i--) {
        int j = (int)mt_rng_below(&r2, (uint64_t)i + 1);
        double t = ctrain[i];
        ctrain[i] = ctrain[j];
        ctrain[j] = t;
    }
    to_samples(&tk, train, ctrain, NTRAIN, smp);
    assert_int_equal(mt_costmodel_create(kind, &params, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(m, smp, NTRAIN, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(m, &q, test, NTEST, score, err, sizeof err), MT_OK);
    double acc_shuf = pairwise_accuracy(ctest, score, NTEST);
    printf("# %s: shuffled labels: accuracy %.3f\n", lname, acc_shuf);
    assert_true(acc_shuf < 0.65);
    mt_costmodel_free(m);

    free(train), free(test), free(ctrain), free(ctest), free(score), free(smp);
    mt_space_free(&tk.sp);
}

static void xgb_ranking(mt_xgb_loss loss) {
    mt_costmodel_params params = mt_costmodel_default_params();
    params.xgb_loss = loss;
    model_ranking("xgb", params, loss == MT_XGB_LOSS_RANK ? "xgb/rank" : "xgb/reg", 0.75);
}

static void test_xgb_ranking_reg(void **state) {
    (void)state;
    xgb_ranking(MT_XGB_LOSS_REG);
}

static void test_xgb_ranking_rank(void **state) {
    (void)state;
    xgb_ranking(MT_XGB_LOSS_RANK);
}

/* Samples of two workloads and two templates in one model: ranking groups per
 * (workload, template), still ranks each. All failed: fits, no crash. */
static void xgb_mixed(mt_xgb_loss loss) {
    mt_costmodel_params params = mt_costmodel_default_params();
    params.xgb_loss = loss;
    task a, b;
    a.wl = wl_conv();
    a.t = mt_template_find("direct");
    assert_int_equal(mt_template_space(a.t, &a.wl, &a.sp), MT_OK);
    task_init(&b, "direct", "n=1,c=32,h=14,w=14,k=64,r=3,s=3,pad=1");
    enum { N = 150, T = 200 };
    mt_config ca[N + T], cb[N + T];
    double ka[N + T], kb[N + T], sc[T];
    uint64_t rng = 5;
    draw(&a, &rng, N, 0, ca, ka);
    draw(&b, &rng, N, 0, cb, kb);
    draw(&a, &rng, T, 1, ca + N, ka + N);
    draw(&b, &rng, T, 1, cb + N, kb + N);
    mt_cm_sample s[2 * N];
    to_samples(&a, ca, ka, N, s);
    to_samples(&b, cb, kb, N, s + N);
    for (int i = 0; i < N; i++) s[N + i].cost_ms *= 7.0; /* another scale entirely */
    mt_costmodel *m;
    char err[256];
    assert_int_equal(mt_costmodel_create("xgb", &params, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(m, s, 2 * N, err, sizeof err), MT_OK);
    mt_cm_query qa = {&a.wl, a.t, &a.sp, NULL}, qb = {&b.wl, b.t, &b.sp, NULL};
    assert_int_equal(mt_costmodel_predict(m, &qa, ca + N, T, sc, err, sizeof err), MT_OK);
    double acc_a = pairwise_accuracy(ka + N, sc, T);
    assert_int_equal(mt_costmodel_predict(m, &qb, cb + N, T, sc, err, sizeof err), MT_OK);
    double acc_b = pairwise_accuracy(kb + N, sc, T);
    printf("# xgb/%s mixed workloads: accuracy %.3f / %.3f\n", loss == MT_XGB_LOSS_RANK ? "rank" : "reg", acc_a, acc_b);
    assert_true(acc_a > 0.7 && acc_b > 0.7);

    /* all failed */
    for (int i = 0; i < 20; i++) s[i].failed = 1;
    assert_int_equal(mt_costmodel_fit(m, s, 20, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(m, &qa, ca + N, 10, sc, err, sizeof err), MT_OK);
    mt_costmodel_free(m);
    mt_space_free(&a.sp);
    mt_space_free(&b.sp);
}

static void test_xgb_mixed(void **state) {
    (void)state;
    xgb_mixed(MT_XGB_LOSS_REG);
    xgb_mixed(MT_XGB_LOSS_RANK);
}

/* The GNN cost model learns the same synthetic ranking from graphs. */
static void test_gnn_ranking(void **state) {
    (void)state;
    model_ranking("gnn", mt_costmodel_default_params(), "gnn", 0.7);
}

/* A trained gnn model saved to a file and loaded as gnn_model scores like
 * the original; adapting it to new samples keeps it working; a corrupt file
 * is refused when the model is created. */
static void test_gnn_model_file(void **state) {
    (void)state;
    task tk;
    tk.wl = wl_conv();
    tk.t = mt_template_find("direct");
    assert_int_equal(mt_template_space(tk.t, &tk.wl, &tk.sp), MT_OK);
    enum { N = 120, NT = 200 };
    mt_config cfgs[N], test[NT];
    double cost[N], ctest[NT], s1[NT], s2[NT];
    mt_cm_sample smp[N];
    uint64_t rng = 77;
    draw(&tk, &rng, N, 1, cfgs, cost);
    draw(&tk, &rng, NT, 1, test, ctest);
    to_samples(&tk, cfgs, cost, N, smp);
    mt_costmodel_params p = mt_costmodel_default_params();
    p.gnn_epochs = 10;
    mt_costmodel *a = NULL, *b = NULL, *x = NULL;
    char err[512], path[] = "/tmp/mtgpu-test-gnn-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mt_costmodel_create("gnn", &p, &a, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_save(a, path, err, sizeof err), MT_INVALID_ARG); /* not trained yet */
    assert_int_equal(mt_costmodel_create("xgb", &p, &x, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_save(x, path, err, sizeof err), MT_UNSUPPORTED);
    assert_int_equal(mt_costmodel_param_count(x), -1);
    mt_costmodel_free(x);
    assert_int_equal(mt_costmodel_fit(a, smp, N, err, sizeof err), MT_OK);
    assert_true(mt_costmodel_param_count(a) > 1000);
    assert_int_equal(mt_costmodel_save(a, path, err, sizeof err), MT_OK);
    p.gnn_model = path;
    assert_int_equal(mt_costmodel_create("gnn", &p, &b, err, sizeof err), MT_OK);
    mt_cm_query q = {&tk.wl, tk.t, &tk.sp, NULL};
    assert_int_equal(mt_costmodel_predict(a, &q, test, NT, s1, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(b, &q, test, NT, s2, err, sizeof err), MT_OK);
    for (int i = 0; i < NT; i++) assert_true(fabs(s1[i] - s2[i]) <= 1e-4 * (1 + fabs(s1[i])));
    double acc0 = pairwise_accuracy(ctest, s2, NT);
    /* Adaptation: a few steps on the same kind of data keep the ranking. */
    assert_int_equal(mt_costmodel_update(b, smp, 40, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(b, &q, test, NT, s2, err, sizeof err), MT_OK);
    double acc1 = pairwise_accuracy(ctest, s2, NT);
    printf("# gnn model file: loaded accuracy %.3f, after adaptation %.3f\n", acc0, acc1);
    assert_true(acc0 > 0.65 && acc1 > 0.65);
    mt_costmodel_free(b);
    /* A truncated file is refused at creation, with the reason. */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 100), 0);
    fclose(f);
    b = NULL;
    assert_int_equal(mt_costmodel_create("gnn", &p, &b, err, sizeof err), MT_CORRUPT);
    assert_null(b);
    assert_true(strlen(err) > 0);
    unlink(path);
    mt_costmodel_free(a);
    mt_space_free(&tk.sp);
}


/* gnn-meta and gnn-transfer on model files made here: a file of the wrong
 * kind or none is refused; gnn-meta scores a group without records from the
 * initial weights (non-constant scores), re-adapts from them on all of a
 * group's records at every update (two updates give what one update with
 * the same records gives, and a fit too), and leaves other groups at the
 * initial weights; gnn-transfer starts each fit from the file again. */
static void test_gnn_meta_and_transfer(void **state) {
    (void)state;
    static const char *wls[4] = {"n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1", "n=1,c=64,h=14,w=14,k=64,r=3,s=3,pad=1", "n=1,c=48,h=20,w=20,k=32,r=3,s=3,pad=1",
                                 "n=1,c=16,h=30,w=30,k=48,r=3,s=3,pad=1"};
    enum { N = 40 };
    task tk[4];
    mt_config cfg[4][N];
    double cost[4][N];
    mt_cm_sample smp[4][N];
    uint64_t rng = 99;
    for (int w = 0; w < 4; w++) {
        task_init(&tk[w], "direct", wls[w]);
        draw(&tk[w], &rng, N, 1, cfg[w], cost[w]);
        to_samples(&tk[w], cfg[w], cost[w], N, smp[w]);
    }
    mt_cm_sample trainset[2 * N];
    memcpy(trainset, smp[0], sizeof smp[0]);
    memcpy(trainset + N, smp[1], sizeof smp[1]);
    mt_costmodel_params p = mt_costmodel_default_params();
    p.gnn_hidden = 8, p.gnn_layers = 2, p.gnn_epochs = 5, p.threads = 1;
    char err[512], meta_path[] = "/tmp/mtgpu-test-meta-XXXXXX", pooled_path[] = "/tmp/mtgpu-test-pooled-XXXXXX";
    int fd = mkstemp(meta_path);
    assert_true(fd >= 0);
    close(fd);
    fd = mkstemp(pooled_path);
    assert_true(fd >= 0);
    close(fd);
    /* a pooled file and a meta-trained one */
    mt_costmodel *a = NULL;
    assert_int_equal(mt_costmodel_create("gnn", &p, &a, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(a, trainset, 2 * N, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_save(a, pooled_path, err, sizeof err), MT_OK);
    mt_costmodel_free(a);
    assert_int_equal(mt_costmodel_create("gnn", &p, &a, err, sizeof err), MT_OK);
    mt_gnn_meta_params mp = mt_gnn_meta_default_params();
    mp.support = 8, mp.query = 16, mp.tasks_per_batch = 2, mp.iterations = 20, mp.inner_lr = 0.01, mp.inner_steps = 2;
    assert_int_equal(mt_costmodel_meta_train(a, trainset, 2 * N, &mp, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_save(a, meta_path, err, sizeof err), MT_OK);
    mt_costmodel_free(a);
    mt_gnn *g = NULL;
    assert_int_equal(mt_gnn_load(meta_path, &g, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_get_origin(g), MT_GNN_ORIGIN_META);
    assert_int_equal(mt_gnn_get_inner(g).steps, 2);
    mt_gnn_free(g);

    /* refusals: a pooled file, no file, a missing file */
    mt_costmodel *m = (mt_costmodel *)1;
    p.gnn_model = pooled_path;
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &m, err, sizeof err), MT_INVALID_ARG);
    assert_null(m);
    assert_non_null(strstr(err, "not meta-trained"));
    p.gnn_model = NULL;
    assert_int_equal(mt_costmodel_create("gnn-transfer", &p, &m, err, sizeof err), MT_INVALID_ARG);
    p.gnn_model = "/tmp/mtgpu-test-no-such-model";
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &m, err, sizeof err), MT_NOT_FOUND);
    p.gnn_model = meta_path;
    p.gnn_adapt_lr = 0;
    assert_int_equal(mt_costmodel_create("gnn-transfer", &p, &m, err, sizeof err), MT_INVALID_ARG);
    p.gnn_adapt_lr = mt_costmodel_default_params().gnn_adapt_lr;

    /* gnn-meta: zero-shot, then adapted per group */
    mt_costmodel *x, *y, *z;
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &x, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &y, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &z, err, sizeof err), MT_OK);
    mt_cm_query q2 = {&tk[2].wl, tk[2].t, &tk[2].sp, NULL}, q3 = {&tk[3].wl, tk[3].t, &tk[3].sp, NULL};
    double s0[N], s3[N], sx[N], sy[N], sz[N], sx3[N];
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, s0, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(x, &q3, cfg[3], N, s3, err, sizeof err), MT_OK);
    int distinct = 0;
    for (int i = 1; i < N; i++) distinct += s0[i] != s0[0];
    assert_true(distinct > N / 2);
    printf("# gnn-meta zero-shot accuracy on an unseen workload %.3f\n", pairwise_accuracy(cost[2], s0, N));
    assert_int_equal(mt_costmodel_update(x, smp[2], 10, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_update(x, smp[2] + 10, 10, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_update(y, smp[2], 20, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(z, smp[2], 20, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, sx, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(y, &q2, cfg[2], N, sy, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(z, &q2, cfg[2], N, sz, err, sizeof err), MT_OK);
    assert_memory_equal(sx, sy, sizeof sx);
    assert_memory_equal(sx, sz, sizeof sx);
    assert_true(memcmp(sx, s0, sizeof sx) != 0);
    printf("# gnn-meta after adapting on 20 records %.3f\n", pairwise_accuracy(cost[2], sx, N));
    /* another group is still scored by the initial weights, and back */
    assert_int_equal(mt_costmodel_predict(x, &q3, cfg[3], N, sx3, err, sizeof err), MT_OK);
    assert_memory_equal(sx3, s3, sizeof s3);
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, sy, err, sizeof err), MT_OK);
    assert_memory_equal(sx, sy, sizeof sx);
    /* saving writes the initial weights: a model from that file scores zero-shot alike */
    char again[] = "/tmp/mtgpu-test-meta2-XXXXXX";
    fd = mkstemp(again);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(mt_costmodel_save(x, again, err, sizeof err), MT_OK);
    mt_costmodel_free(y);
    p.gnn_model = again;
    assert_int_equal(mt_costmodel_create("gnn-meta", &p, &y, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(y, &q2, cfg[2], N, sy, err, sizeof err), MT_OK);
    assert_memory_equal(sy, s0, sizeof s0);
    unlink(again);
    mt_costmodel_free(x), mt_costmodel_free(y), mt_costmodel_free(z);

    /* gnn-transfer: the file's scores, then each fit from the file again */
    p.gnn_model = pooled_path;
    p.gnn_adapt_steps = 5;
    assert_int_equal(mt_costmodel_create("gnn-transfer", &p, &x, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_create("gnn", &p, &y, err, sizeof err), MT_OK); /* gnn with a file: the same */
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, sx, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(y, &q2, cfg[2], N, sy, err, sizeof err), MT_OK);
    assert_memory_equal(sx, sy, sizeof sx);
    assert_int_equal(mt_costmodel_fit(x, smp[2], 20, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, sx, err, sizeof err), MT_OK);
    assert_true(memcmp(sx, sy, sizeof sx) != 0);
    assert_int_equal(mt_costmodel_update(x, smp[2] + 20, 10, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(x, smp[2], 20, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_predict(x, &q2, cfg[2], N, sz, err, sizeof err), MT_OK);
    assert_memory_equal(sx, sz, sizeof sx);
    mt_costmodel_free(x), mt_costmodel_free(y);
    unlink(meta_path);
    unlink(pooled_path);
    for (int w = 0; w < 4; w++) mt_space_free(&tk[w].sp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_shape),
        cmocka_unit_test(test_features_strides),
        cmocka_unit_test(test_features_invalid_and_other_templates),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_random_model),
        cmocka_unit_test(test_xgb_ranking_reg),
        cmocka_unit_test(test_xgb_ranking_rank),
        cmocka_unit_test(test_xgb_mixed),
        cmocka_unit_test(test_gnn_ranking),
        cmocka_unit_test(test_gnn_model_file),
        cmocka_unit_test(test_gnn_meta_and_transfer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
