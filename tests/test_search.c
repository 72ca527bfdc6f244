/* Search: random and model-guided simulated annealing, on a real template's
 * space with a synthetic cost function (no device), and on tiny hand-built
 * spaces for exhaustion and bookkeeping. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "costmodel.h"
#include "ir.h"
#include "config_search.h"
#include "space.h"
#include "template.h"
#include "mtgpu/workload.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static const char *const WL = "n=1,c=32,h=32,w=32,k=32,r=3,s=3,pad=1";

/* The synthetic cost of test_costmodel.c: optimum 1.0 ms at 128 threads per
 * block, 16 accumulators per work-item, an inner reduction split of 8, vec 4
 * (2% per factor of two away), stage_local 1 and auto_unroll 512; -1 for
 * configs that do not build. */
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

/* A set of indices for the tests' own bookkeeping (sorted array; small n). */
typedef struct seen {
    uint64_t *v;
    int n, cap;
} seen;

static int seen_add(seen *s, uint64_t x) {
    for (int i = 0; i < s->n; i++)
        if (s->v[i] == x) return 0;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, sizeof(uint64_t) * (size_t)s->cap);
        assert_non_null(s->v);
    }
    s->v[s->n++] = x;
    return 1;
}

/* Runs a tuning loop of `kind` search with `model` (NULL: none) until a
 * config within 5% of the optimum is measured or max_trials pass; returns
 * the trials used (max_trials + 1 when not found). Checks that no config is
 * ever returned twice. */
static int tune(const task *tk, const char *kind, const char *model_kind, int batch, int max_trials, uint64_t seed, double *best_out,
                int64_t *scored, double *secs) {
    mt_costmodel *m = NULL;
    char err[256];
    if (model_kind) {
        mt_costmodel_params p = mt_costmodel_default_params();
        p.seed = seed;
        p.plan_size = batch;
        assert_int_equal(mt_costmodel_create(model_kind, &p, &m, err, sizeof err), MT_OK);
    }
    mt_search *s;
    assert_int_equal(mt_search_create(kind, &tk->wl, tk->t, &tk->sp, m, seed, &s, err, sizeof err), MT_OK);
    mt_config *cfgs = malloc(sizeof(mt_config) * (size_t)batch);
    mt_cm_sample *smp = malloc(sizeof(mt_cm_sample) * (size_t)batch);
    assert_true(cfgs && smp);
    seen all = {0};
    double best = INFINITY;
    int trials = 0, found = max_trials + 1;
    double t0 = now_s();
    while (trials < max_trials) {
        int n = 0;
        mt_status st = mt_search_next_batch(s, batch, cfgs, &n, err, sizeof err);
        if (st != MT_OK) printf("# next_batch: %s\n", err);
        assert_int_equal(st, MT_OK);
        assert_int_equal(n, batch);
        for (int i = 0; i < n; i++) {
            assert_true(seen_add(&all, mt_space_config_index(&tk->sp, &cfgs[i])));
            double c = synth_cost(tk, &cfgs[i]);
            assert_int_equal(mt_search_mark_measured(s, &cfgs[i], c, NULL, 0), MT_OK);
            smp[i] = (mt_cm_sample){.wl = &tk->wl, .tmpl = tk->t, .space = &tk->sp, .cfg = cfgs[i], .cost_ms = c, .failed = c < 0};
            trials++;
            if (c > 0 && c < best) best = c;
            if (best <= 1.05 && found > max_trials) found = trials;
        }
        if (getenv("MT_TEST_VERBOSE")) {
            int nf = 0;
            double sum = 0;
            for (int i = 0; i < n; i++) {
                if (smp[i].failed) nf++;
                else sum += smp[i].cost_ms;
            }
            printf("#   %s: %d trials, best %.4f; batch: %d failed, mean %.3f\n", kind, trials, best, nf, n > nf ? sum / (n - nf) : 0);
        }
        if (found <= max_trials) break;
        if (m) {
            st = mt_costmodel_update(m, smp, n, err, sizeof err);
            if (st != MT_OK) printf("# update: %s\n", err);
            assert_int_equal(st, MT_OK);
        }
    }
    *secs = now_s() - t0;
    *best_out = best;
    *scored = mt_search_scored(s);
    double bc = 0;
    mt_config bcfg;
    if (best < INFINITY) {
        assert_int_equal(mt_search_best(s, &bcfg, &bc, NULL, 0), MT_OK);
        assert_true(bc == best);
    }
    free(all.v);
    free(cfgs);
    free(smp);
    mt_search_free(s);
    mt_costmodel_free(m);
    return found;
}

static void test_sa_xgb_finds_optimum(void **state) {
    (void)state;
    task tk;
    task_init(&tk, "direct", WL);
    uint64_t size = mt_space_size(&tk.sp);
    assert_true(size >= 10000);
    /* the optimum 1.0 exists in this space */
    mt_config opt;
    char err[256];
    assert_int_equal(mt_config_parse(&tk.sp,
                                     "tile_f=1x1x8x4,tile_y=8x1x4x1,tile_x=2x1x4x4,tile_rc=4x8,tile_ry=1x3,tile_rx=1x3,"
                                     "auto_unroll_max_step=512,unroll_explicit=0,vec=4,stage_local=1",
                                     &opt, err, sizeof err),
                     MT_OK);
    assert_float_equal(synth_cost(&tk, &opt), 1.0, 1e-12);

    int64_t scored;
    double best, secs;
    int trials = tune(&tk, "sa", "xgb", 16, 400, 1, &best, &scored, &secs);
    printf("# sa+xgb: %d trials to within 5%% of the optimum (best %.4f) in a space of %llu; %lld candidates scored in %.1f s\n", trials, best,
           (unsigned long long)size, (long long)scored, secs);
    assert_true(trials < 200);

    /* random search with the same budget does much worse */
    double rbest;
    int budget = trials < 200 ? trials : 200;
    int rtrials = tune(&tk, "random", NULL, budget, budget, 1, &rbest, &scored, &secs);
    printf("# random: best %.4f after %d trials%s\n", rbest, budget, rtrials <= budget ? " (within 5%)" : "");
    assert_true(rbest > best);
    mt_space_free(&tk.sp);
}

/* SA with the random model, and random search: never a config twice over
 * many batches of a large space. */
static void test_never_repeats(void **state) {
    (void)state;
    task tk;
    task_init(&tk, "direct", WL);
    const char *kinds[2] = {"random", "sa"};
    for (int k = 0; k < 2; k++) {
        mt_costmodel *m = NULL;
        char err[256];
        assert_int_equal(mt_costmodel_create("random", NULL, &m, err, sizeof err), MT_OK);
        mt_search_params p = mt_search_default_params();
        p.chains = 32;
        p.iterations = 50;
        mt_search *s;
        assert_int_equal(mt_search_create_ex(kinds[k], &tk.wl, tk.t, &tk.sp, m, &p, &s, err, sizeof err), MT_OK);
        assert_string_equal(mt_search_kind(s), kinds[k]);
        seen all = {0};
        mt_config cfgs[64];
        for (int b = 0; b < 20; b++) {
            int n;
            assert_int_equal(mt_search_next_batch(s, 64, cfgs, &n, NULL, 0), MT_OK);
            assert_int_equal(n, 64);
            mt_cm_sample smp[64];
            for (int i = 0; i < n; i++) {
                assert_int_equal(mt_space_check(&tk.sp, &cfgs[i]), MT_OK);
                assert_true(seen_add(&all, mt_space_config_index(&tk.sp, &cfgs[i])));
                /* half of them measured, half just returned */
                if (i % 2 == 0) assert_int_equal(mt_search_mark_measured(s, &cfgs[i], 1.0 + i, NULL, 0), MT_OK);
                smp[i] = (mt_cm_sample){.wl = &tk.wl, .tmpl = tk.t, .space = &tk.sp, .cfg = cfgs[i], .cost_ms = 1.0 + i};
            }
            if (b == 0) assert_int_equal(mt_costmodel_fit(m, smp, n, err, sizeof err), MT_OK); /* from now on SA runs */
        }
        assert_int_equal(mt_search_visited(s), 20 * 64);
        if (k == 1) assert_true(mt_search_scored(s) > 0);
        free(all.v);
        mt_search_free(s);
        mt_costmodel_free(m);
    }
    mt_space_free(&tk.sp);
}

/* A tiny space built by hand: 6 x 4 = 24 configs. */
static void tiny_space(mt_space *sp) {
    static const int e[4] = {1, 2, 4, 8};
    mt_space_init(sp, "direct");
    assert_int_equal(mt_space_add_split(sp, "tile", 12, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_enum(sp, "vec", e, 4), MT_OK);
    assert_int_equal(mt_space_size(sp), 24);
}

/* Pre-loaded measured configs (a resumed run) are never returned; the space
 * runs out with n < batch; then batches are empty. */
static void test_measured_and_exhaustion(void **state) {
    (void)state;
    mt_space sp;
    tiny_space(&sp);
    mt_workload wl;
    char err[256];
    assert_int_equal(mt_workload_parse(WL, &wl, err, sizeof err), MT_OK);
    const mt_template *t = mt_template_find("direct");
    const char *kinds[2] = {"random", "sa"};
    const char *models[2] = {"random", "xgb"};
    for (int k = 0; k < 2; k++) {
        for (int mk = 0; mk < 2; mk++) {
            mt_costmodel *m = NULL;
            assert_int_equal(mt_costmodel_create(models[mk], NULL, &m, err, sizeof err), MT_OK);
            mt_search *s;
            assert_int_equal(mt_search_create(kinds[k], &wl, t, &sp, m, 7, &s, err, sizeof err), MT_OK);
            assert_int_equal(mt_search_space_size(s), 24);
            int measured[24] = {0};
            mt_cm_sample smp[24];
            int ns = 0;
            for (uint64_t i = 0; i < 24; i += 3) {
                mt_config c;
                assert_int_equal(mt_space_config_from_index(&sp, i, &c), MT_OK);
                assert_int_equal(mt_search_mark_measured(s, &c, i == 6 ? -1 : 1.0 + (double)i, NULL, 0), MT_OK);
                assert_int_equal(mt_search_mark_measured(s, &c, 2.0, NULL, 0), MT_OK); /* twice is harmless */
                measured[i] = 1;
                smp[ns++] = (mt_cm_sample){.wl = &wl, .tmpl = t, .space = &sp, .cfg = c, .cost_ms = 1.0 + (double)i, .failed = i == 6};
            }
            /* a model fitted on them: the SA path runs (xgb cannot build these
             * hand-made configs: every candidate invalid, random fills in) */
            assert_int_equal(mt_costmodel_fit(m, smp, ns, err, sizeof err), MT_OK);
            assert_int_equal(mt_search_visited(s), 8);
            mt_config best;
            double bc;
            assert_int_equal(mt_search_best(s, &best, &bc, NULL, 0), MT_OK);
            assert_true(bc == 1.0);
            mt_config out[32];
            int n, total = 0;
            assert_int_equal(mt_search_next_batch(s, 5, out, &n, NULL, 0), MT_OK);
            assert_int_equal(n, 5);
            for (int i = 0; i < n; i++) {
                uint64_t idx = mt_space_config_index(&sp, &out[i]);
                assert_false(measured[idx]);
                measured[idx] = 1;
            }
            total += n;
            assert_int_equal(mt_search_next_batch(s, 32, out, &n, NULL, 0), MT_OK);
            assert_int_equal(n, 24 - 8 - 5); /* n < batch: exhausted */
            for (int i = 0; i < n; i++) {
                uint64_t idx = mt_space_config_index(&sp, &out[i]);
                assert_false(measured[idx]);
                measured[idx] = 1;
            }
            total += n;
            assert_int_equal(total, 16);
            for (int i = 0; i < 24; i++) assert_true(measured[i]);
            assert_int_equal(mt_search_next_batch(s, 4, out, &n, NULL, 0), MT_OK);
            assert_int_equal(n, 0);
            assert_int_equal(mt_search_next_batch(s, 0, out, &n, NULL, 0), MT_OK);
            assert_int_equal(n, 0);
            mt_search_free(s);
            mt_costmodel_free(m);
        }
    }
    mt_space_free(&sp);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A candidate restriction (a replay's recorded configs): random search and
 * SA guided by a fitted model return only configs of it, each once, until
 * it is used up; configs marked measured, inside it or not, never come back. */
static void test_restricted(void **state) {
    (void)state;
    task tk;
    task_init(&tk, "direct", WL);
    enum { N = 300 };
    uint64_t only[N];
    uint64_t rng = 5;
    for (int i = 0; i < N;) {
        mt_config c;
        mt_space_random(&tk.sp, &rng, &c);
        uint64_t idx = mt_space_config_index(&tk.sp, &c);
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) dup = only[j] == idx;
        if (!dup) only[i++] = idx;
    }
    qsort(only, N, sizeof only[0], cmp_u64);
    const char *kinds[2] = {"random", "sa"};
    for (int k = 0; k < 2; k++) {
        mt_costmodel *m = NULL;
        char err[256];
        if (k == 1) assert_int_equal(mt_costmodel_create("xgb", NULL, &m, err, sizeof err), MT_OK);
        mt_search_params p = mt_search_default_params();
        p.only = only;
        p.nonly = N;
        mt_search *s;
        assert_int_equal(mt_search_create_ex(kinds[k], &tk.wl, tk.t, &tk.sp, m, &p, &s, err, sizeof err), MT_OK);
        assert_int_equal(mt_search_space_size(s), N);
        /* two of the restriction measured already, and one config outside it (a resumed record) */
        mt_config c;
        assert_int_equal(mt_space_config_from_index(&tk.sp, only[0], &c), MT_OK);
        assert_int_equal(mt_search_mark_measured(s, &c, synth_cost(&tk, &c), NULL, 0), MT_OK);
        assert_int_equal(mt_space_config_from_index(&tk.sp, only[N - 1], &c), MT_OK);
        assert_int_equal(mt_search_mark_measured(s, &c, synth_cost(&tk, &c), NULL, 0), MT_OK);
        uint64_t outside = only[10] + 1;
        while (bsearch(&outside, only, N, sizeof only[0], cmp_u64)) outside++;
        assert_int_equal(mt_space_config_from_index(&tk.sp, outside, &c), MT_OK);
        assert_int_equal(mt_search_mark_measured(s, &c, 0.5, NULL, 0), MT_OK); /* the best so far: chains restart there */
        int returned[N] = {0};
        returned[0] = returned[N - 1] = 1;
        int total = 2;
        mt_config cfgs[16];
        mt_cm_sample smp[16];
        for (int b = 0; b < 100; b++) {
            int n;
            assert_int_equal(mt_search_next_batch(s, 16, cfgs, &n, NULL, 0), MT_OK);
            for (int i = 0; i < n; i++) {
                uint64_t idx = mt_space_config_index(&tk.sp, &cfgs[i]);
                uint64_t *at = bsearch(&idx, only, N, sizeof only[0], cmp_u64);
                assert_non_null(at);
                assert_false(returned[at - only]);
                returned[at - only] = 1;
                double cost = synth_cost(&tk, &cfgs[i]);
                assert_int_equal(mt_search_mark_measured(s, &cfgs[i], cost, NULL, 0), MT_OK);
                smp[i] = (mt_cm_sample){.wl = &tk.wl, .tmpl = tk.t, .space = &tk.sp, .cfg = cfgs[i], .cost_ms = cost, .failed = cost < 0};
            }
            total += n;
            if (n < 16) break; /* used up */
            if (m) assert_int_equal(mt_costmodel_update(m, smp, n, err, sizeof err), MT_OK);
        }
        assert_int_equal(total, N);
        if (k == 1) assert_true(mt_search_scored(s) > 0); /* the model guided it */
        int n;
        assert_int_equal(mt_search_next_batch(s, 4, cfgs, &n, NULL, 0), MT_OK);
        assert_int_equal(n, 0);
        mt_search_free(s);
        mt_costmodel_free(m);
    }
    /* not ascending, or outside the space */
    mt_search_params p = mt_search_default_params();
    uint64_t bad[2] = {only[1], only[0]};
    p.only = bad;
    p.nonly = 2;
    mt_search *s = NULL;
    char err[256] = "";
    assert_int_equal(mt_search_create_ex("sa", &tk.wl, tk.t, &tk.sp, NULL, &p, &s, err, sizeof err), MT_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(err, "ascending"));
    bad[0] = only[0], bad[1] = mt_space_size(&tk.sp);
    assert_int_equal(mt_search_create_ex("random", &tk.wl, tk.t, &tk.sp, NULL, &p, &s, err, sizeof err), MT_INVALID_ARG);
    /* an empty restriction proposes nothing */
    p.nonly = 0;
    assert_int_equal(mt_search_create_ex("random", &tk.wl, tk.t, &tk.sp, NULL, &p, &s, err, sizeof err), MT_OK);
    int n = -1;
    mt_config out[4];
    assert_int_equal(mt_search_next_batch(s, 4, out, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    mt_search_free(s);
    mt_space_free(&tk.sp);
}

static void test_errors(void **state) {
    (void)state;
    mt_space sp;
    tiny_space(&sp);
    mt_workload wl;
    char err[256] = "";
    assert_int_equal(mt_workload_parse(WL, &wl, err, sizeof err), MT_OK);
    const mt_template *t = mt_template_find("direct");
    mt_search *s = (mt_search *)1;
    assert_int_equal(mt_search_create("nope", &wl, t, &sp, NULL, 1, &s, err, sizeof err), MT_INVALID_ARG);
    assert_null(s);
    assert_non_null(strstr(err, "sa"));
    assert_int_equal(mt_search_create("sa", &wl, mt_template_find("gemm"), &sp, NULL, 1, &s, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_search_create("sa", NULL, t, &sp, NULL, 1, &s, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_search_create("sa", &wl, t, &sp, NULL, 1, NULL, err, sizeof err), MT_INVALID_ARG);
    mt_search_params p = mt_search_default_params();
    p.chains = 0;
    assert_int_equal(mt_search_create_ex("sa", &wl, t, &sp, NULL, &p, &s, err, sizeof err), MT_INVALID_ARG);
    p = mt_search_default_params();
    p.epsilon = 2;
    assert_int_equal(mt_search_create_ex("sa", &wl, t, &sp, NULL, &p, &s, err, sizeof err), MT_INVALID_ARG);

    /* "sa" without a model: random configs */
    assert_int_equal(mt_search_create("sa", &wl, t, &sp, NULL, 1, &s, err, sizeof err), MT_OK);
    mt_config c = {0};
    c.nknobs = 2;
    c.choice[0] = 99;
    err[0] = '\0';
    assert_int_equal(mt_search_mark_measured(s, &c, 1.0, err, sizeof err), MT_INVALID_ARG);
    assert_true(strlen(err) > 0);
    assert_int_equal(mt_search_mark_measured(s, NULL, 1.0, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(mt_search_best(s, &c, NULL, NULL, 0), MT_NOT_FOUND);
    mt_config out[24];
    int n;
    assert_int_equal(mt_search_next_batch(s, -1, out, &n, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(mt_search_next_batch(s, 4, NULL, &n, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(mt_search_next_batch(s, 24, out, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 24);
    mt_search_free(s);
    mt_search_free(NULL);
    mt_space_free(&sp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_measured_and_exhaustion),
        cmocka_unit_test(test_never_repeats),
        cmocka_unit_test(test_restricted),
        cmocka_unit_test(test_sa_xgb_finds_optimum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
