/* End-to-end tuning on the OpenCL device: a small workload, a handful of
 * trials, resume from the database, and a kernel that hangs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mtgpu/db.h"
#include "mtgpu/tuner.h"

static char tmpdir[256];
static int have_device;
static char why[512];

static const char *small = "n=1,c=8,h=10,w=10,k=8,r=3,s=3,pad=1";

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mtgpu-test-tune-XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    mt_device *dev = NULL;
    mt_device_params dp = mt_device_default_params();
    have_device = mt_device_open(NULL, &dp, &dev, why, sizeof why) == MT_OK;
    mt_device_close(dev);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static mt_task small_task(void) {
    mt_task t = {.count = 2};
    assert_int_equal(mt_workload_parse(small, &t.wl, NULL, 0), MT_OK);
    t.flops = mt_workload_flops(&t.wl);
    return t;
}

static mt_tune_params quick_params(const char *db, const char *model, int trials, int batch) {
    mt_tune_params p = mt_tune_default_params();
    p.db_path = db;
    p.cost_model = model;
    p.trials = trials;
    p.batch = batch;
    p.measurer.measure.min_repeats = 1;
    p.measurer.measure.max_repeats = 2;
    p.measurer.measure.min_time_ms = 0;
    return p;
}

static int64_t count_records(const char *path) {
    mt_db *db = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(path, &dp, &db, NULL, 0), MT_OK);
    int64_t n = -1;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n), MT_OK);
    mt_db_close(db);
    return n;
}

typedef struct {
    int timeouts, ok;
} status_count;

static int count_status(const mt_record *r, void *user) {
    status_count *c = user;
    if (r->status == MT_TIMEOUT) c->timeouts++;
    if (r->status == MT_OK) c->ok++;
    return 0;
}

static void test_tune_and_resume(void **state) {
    (void)state;
    if (!have_device) {
        print_message("skipped: no device: %s\n", why);
        skip();
    }
    char db[512];
    snprintf(db, sizeof db, "%s/resume.db", tmpdir);
    mt_task task = small_task();
    char err[1024];
    mt_tune_params p = quick_params(db, "random", 4, 2);
    mt_tune_summary s;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.measured_this_run, 4);
    assert_int_equal(s.trials_done, 4);
    assert_int_equal(s.resumed, 0);
    assert_true(s.tasks[0].best_ms > 0);
    assert_true(s.network_ms > 0);
    /* network_ms counts the task's occurrences */
    assert_true(s.network_ms >= 2 * s.tasks[0].best_ms * 0.999);
    mt_tune_summary_free(&s);
    assert_int_equal(count_records(db), 4);

    /* Resume with a larger budget: what was measured counts, nothing is measured twice. */
    p = quick_params(db, "xgb", 7, 3);
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.resumed, 4);
    assert_int_equal(s.measured_this_run, 3);
    assert_int_equal(s.trials_done, 7);
    mt_tune_summary_free(&s);
    assert_int_equal(count_records(db), 7);

    /* A budget already spent measures nothing. */
    p = quick_params(db, "random", 5, 2);
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.measured_this_run, 0);
    mt_tune_summary_free(&s);
    assert_int_equal(count_records(db), 7);
}

static void test_hang_is_a_timeout(void **state) {
    (void)state;
    if (!have_device) {
        print_message("skipped: no device: %s\n", why);
        skip();
    }
    char db[512];
    snprintf(db, sizeof db, "%s/hang.db", tmpdir);
    mt_task task = small_task();
    /* Test-only hook of mtgpu-worker: every `direct` config (only it has tile_f) hangs. */
    setenv("MTGPU_WORKER_HANG_ON", "tile_f=", 1);
    mt_tune_params p = quick_params(db, "random", 6, 2);
    p.measurer.timeout_s = 10;
    p.early_stop = 4;
    char err[1024];
    mt_tune_summary s;
    mt_status st = mt_tune(&task, 1, &p, &s, err, sizeof err);
    unsetenv("MTGPU_WORKER_HANG_ON");
    assert_int_equal(st, MT_OK);
    assert_int_equal(s.trials_done, 6);
    assert_string_equal(s.tasks[0].best_template, "gemm");
    mt_tune_summary_free(&s);
    mt_db *h = NULL;
    mt_db_params dp = mt_db_default_params();
    assert_int_equal(mt_db_open(db, &dp, &h, NULL, 0), MT_OK);
    status_count c = {0};
    assert_int_equal(mt_db_for_each(h, NULL, count_status, &c), MT_OK);
    mt_db_close(h);
    assert_true(c.timeouts >= 2);
    assert_true(c.ok >= 2);
}

static void test_bad_params(void **state) {
    (void)state;
    mt_tune_summary s;
    char err[256];
    assert_int_equal(mt_tune(NULL, 0, NULL, &s, err, sizeof err), MT_INVALID_ARG);
    if (!have_device) return;
    char db[512];
    snprintf(db, sizeof db, "%s/bad.db", tmpdir);
    mt_task task = small_task();
    mt_tune_params p = quick_params(db, "no-such-model", 2, 2);
    assert_int_not_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_true(strlen(err) > 0);
    mt_tune_summary_free(&s); /* a failed run still reports what it did (nothing here) */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_tune_and_resume),
        cmocka_unit_test(test_hang_is_a_timeout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
