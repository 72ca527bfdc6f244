/* Records as cost-model data sets (tuner/dataset.c) and ranking evaluation
 * (tuner/cm_eval.c), on a database of synthetic records: real templates and
 * configs, costs from a known function, so a learning model must rank the
 * held-out workloads well and a random one must not. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "costmodel.h"
#include "dataset.h"
#include "mtgpu/records.h"
#include "template.h"

static char g_dir[256];

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/mtgpu-test-dataset-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *const WLS[] = {
    "n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1", "n=1,c=64,h=14,w=14,k=64,r=3,s=3,pad=1", "n=1,c=16,h=56,w=56,k=32,r=3,s=3,pad=1",
    "n=1,c=32,h=28,w=28,k=64,r=1,s=1",       "n=1,c=64,h=28,w=28,k=32,r=3,s=3,stride=2,pad=1",
};
#define NWL (int)(sizeof WLS / sizeof WLS[0])
#define FP "0123456789abcdef"

/* A smooth cost of a gemm config, known to the test: best with ~12
 * accumulators, vec 8 and one work-item. -1: the template cannot build it. */
static double synth_cost(const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *c) {
    mt_kernel *k = NULL;
    if (mt_template_build(t, wl, sp, c, &k, NULL, 0) != MT_OK) return -1;
    mt_kernel_free(k);
    double acc = (double)mt_config_value(sp, c, "reg_k") * mt_config_value(sp, c, "reg_x");
    double thr = (double)mt_config_value(sp, c, "thread_k") * mt_config_value(sp, c, "thread_x");
    double a = log2(acc) - 6.5, b = log2(thr), v = log2((double)mt_config_value(sp, c, "vec")) - 3;
    return mt_workload_flops(wl) * 1e-9 * (1 + 0.3 * a * a) * (1 + 0.2 * b) * (1 + 0.1 * v * v);
}

/* Writes 60 records (a few failed) per workload; returns the database path in path. */
static void make_db(char *path, size_t len) {
    snprintf(path, len, "%s/records.db", g_dir);
    mt_db *db = NULL;
    char err[512];
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    const mt_template *t = mt_template_find("gemm");
    uint64_t rng = 5;
    for (int w = 0; w < NWL; w++) {
        mt_workload wl;
        assert_int_equal(mt_workload_parse(WLS[w], &wl, err, sizeof err), MT_OK);
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        for (int i = 0; i < 60; i++) {
            mt_config c;
            mt_space_random(&sp, &rng, &c);
            double cost = synth_cost(&wl, t, &sp, &c);
            mt_record r;
            mt_record_init(&r);
            r.wl = wl;
            snprintf(r.template_name, sizeof r.template_name, "gemm");
            mt_config_format(&sp, &c, r.config, sizeof r.config);
            snprintf(r.device, sizeof r.device, FP);
            if (cost > 0 && i % 15 != 7) {
                r.ncosts = 1;
                r.costs_ms[0] = r.median_ms = cost;
            } else {
                r.status = MT_BUILD;
                snprintf(r.message, sizeof r.message, "synthetic failure");
            }
            int inserted;
            assert_int_equal(mt_db_put_record(db, &r, &inserted, NULL, 0), MT_OK);
        }
        mt_space_free(&sp);
    }
    /* Records the data set must skip: an unknown template, an old config. */
    mt_record r;
    mt_record_init(&r);
    assert_int_equal(mt_workload_parse(WLS[0], &r.wl, err, sizeof err), MT_OK);
    snprintf(r.template_name, sizeof r.template_name, "winograd");
    snprintf(r.config, sizeof r.config, "x=1");
    snprintf(r.device, sizeof r.device, FP);
    r.ncosts = 1;
    r.costs_ms[0] = r.median_ms = 1;
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    snprintf(r.template_name, sizeof r.template_name, "gemm");
    snprintf(r.config, sizeof r.config, "reg_k=999");
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_close(db);
}

static void test_load_split_select(void **state) {
    (void)state;
    char path[512], err[512];
    make_db(path, sizeof path);
    mt_db *db = NULL;
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    assert_int_equal(mt_db_open(path, &p, &db, err, sizeof err), MT_OK);
    mt_dataset *ds = NULL;
    assert_int_equal(mt_dataset_load(db, NULL, &ds, err, sizeof err), MT_OK);
    assert_int_equal(mt_dataset_nsamples(ds), NWL * 60);
    assert_int_equal(mt_dataset_nworkloads(ds), NWL);
    assert_int_equal(mt_dataset_skipped(ds), 2);
    int failed = 0;
    for (int i = 0; i < mt_dataset_nsamples(ds); i++) {
        const mt_cm_sample *s = &mt_dataset_samples(ds)[i];
        failed += s->failed;
        assert_non_null(s->dev);
        assert_string_equal(s->dev->fingerprint, FP);
        assert_true(mt_dataset_sample_workload(ds, i) >= 0 && mt_dataset_sample_workload(ds, i) < NWL);
        assert_ptr_equal(s->wl, mt_dataset_workload(ds, mt_dataset_sample_workload(ds, i)));
    }
    assert_true(failed >= NWL * 4);
    /* Splits are deterministic for a seed, keep at least one workload on each side. */
    int h1[NWL], h2[NWL], n1 = 0;
    mt_dataset_split(ds, 0.4, 3, h1);
    mt_dataset_split(ds, 0.4, 3, h2);
    for (int w = 0; w < NWL; w++) {
        assert_int_equal(h1[w], h2[w]);
        n1 += h1[w];
    }
    assert_int_equal(n1, 2);
    mt_dataset_split(ds, 0.0, 3, h2);
    n1 = 0;
    for (int w = 0; w < NWL; w++) n1 += h2[w];
    assert_int_equal(n1, 1);
    mt_cm_sample *test = NULL, *train = NULL, *half = NULL;
    int nt, ntr, nh;
    assert_int_equal(mt_dataset_select(ds, h1, 1, 1.0, 1, &test, &nt), MT_OK);
    assert_int_equal(mt_dataset_select(ds, h1, 0, 1.0, 1, &train, &ntr), MT_OK);
    assert_int_equal(mt_dataset_select(ds, h1, 0, 0.5, 1, &half, &nh), MT_OK);
    assert_int_equal(nt, 2 * 60);
    assert_int_equal(nt + ntr, NWL * 60);
    assert_true(nh > ntr / 4 && nh < 3 * ntr / 4);
    assert_int_equal(mt_dataset_select(ds, h1, 0, 0.0, 1, &half, &nh), MT_INVALID_ARG);
    free(test);
    free(train);
    free(half);
    mt_dataset_free(ds);
    /* Another device has no records. */
    ds = NULL;
    assert_int_equal(mt_dataset_load(db, "fedcba9876543210", &ds, err, sizeof err), MT_NOT_FOUND);
    assert_null(ds);
    mt_db_close(db);
}

/* Fits kind on the training workloads; returns its metrics on the others. */
static mt_cm_eval fit_and_eval(mt_dataset *ds, const int *holdout, const char *kind) {
    mt_cm_sample *test = NULL, *train = NULL;
    int nt, ntr;
    assert_int_equal(mt_dataset_select(ds, holdout, 1, 1.0, 1, &test, &nt), MT_OK);
    assert_int_equal(mt_dataset_select(ds, holdout, 0, 1.0, 1, &train, &ntr), MT_OK);
    mt_costmodel_params p = mt_costmodel_default_params();
    p.gnn_epochs = 15;
    mt_costmodel *m = NULL;
    char err[512];
    assert_int_equal(mt_costmodel_create(kind, &p, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_costmodel_fit(m, train, ntr, err, sizeof err), MT_OK);
    mt_cm_eval ev;
    assert_int_equal(mt_cm_evaluate(m, test, nt, &ev, err, sizeof err), MT_OK);
    printf("# %-6s held out %d samples in %d groups, %lld pairs: pairwise %.3f spearman %.3f top-1 %.3f top-5 %.3f\n", kind, (int)ev.samples,
           ev.groups, (long long)ev.pairs, ev.pairwise_acc, ev.spearman, ev.top1, ev.top5);
    assert_int_equal(ev.samples, nt);
    assert_true(ev.top1 > 0 && ev.top1 <= 1 && ev.top5 >= ev.top1 && ev.top5 <= 1);
    assert_true(ev.spearman >= -1 && ev.spearman <= 1);
    mt_costmodel_free(m);
    free(test);
    free(train);
    return ev;
}

static void test_evaluate(void **state) {
    (void)state;
    char path[512], err[512];
    make_db(path, sizeof path);
    mt_db *db = NULL;
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    mt_dataset *ds = NULL;
    assert_int_equal(mt_dataset_load(db, FP, &ds, err, sizeof err), MT_OK);
    int holdout[NWL];
    mt_dataset_split(ds, 0.4, 1, holdout);
    mt_cm_eval rnd = fit_and_eval(ds, holdout, "random");
    mt_cm_eval xgb = fit_and_eval(ds, holdout, "xgb");
    mt_cm_eval gnn = fit_and_eval(ds, holdout, "gnn");
    assert_int_equal(rnd.groups, 2);
    /* The cost function is smooth in the knobs: models learn it across workloads. */
    assert_true(xgb.pairwise_acc > 0.75);
    assert_true(gnn.pairwise_acc > 0.75);
    assert_true(rnd.pairwise_acc < 0.65);
    /* An empty evaluation is an error, not a division by zero. */
    mt_costmodel *m = NULL;
    assert_int_equal(mt_costmodel_create("random", NULL, &m, err, sizeof err), MT_OK);
    mt_cm_eval ev;
    assert_int_equal(mt_cm_evaluate(m, NULL, 0, &ev, err, sizeof err), MT_INVALID_ARG);
    mt_costmodel_free(m);
    mt_dataset_free(ds);
    mt_db_close(db);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_split_select),
        cmocka_unit_test(test_evaluate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
