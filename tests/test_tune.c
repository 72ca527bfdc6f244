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
#include <sqlite3.h>
#include <unistd.h>

#include "mtgpu/records.h"
#include "select.h"
#include "mtgpu/device.h"
#include "template.h"
#include "mtgpu/tuner.h"
#include "program.h"

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

static mt_db *open_readonly(const char *path) {
    mt_db *db = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(path, &dp, &db, NULL, 0), MT_OK);
    return db;
}

static int64_t count_records(const char *path) {
    mt_db *db = open_readonly(path);
    int64_t n = -1;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
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

typedef struct {
    int cold, warm;
} source_count;

static int count_source(const mt_record *r, void *user) {
    source_count *c = user;
    if (strcmp(r->source, MT_RECORD_SOURCE_COLD) == 0) c->cold++;
    else if (strcmp(r->source, "measured") == 0) c->warm++;
    return 0;
}

static source_count count_sources(const char *path) {
    mt_db *db = open_readonly(path);
    source_count c = {0, 0};
    assert_int_equal(mt_db_for_each(db, NULL, count_source, &c, NULL, 0), MT_OK);
    mt_db_close(db);
    return c;
}

/* The tuner times cold by default where the device can evict: its records
 * say so, and a cold tuning resumes from cold records only (the warm ones
 * of an earlier warm tuning are measured again, cold, and replaced). */
static void test_cold_resume(void **state) {
    (void)state;
    if (!have_device) {
        print_message("skipped: no device: %s\n", why);
        skip();
    }
    char db[512];
    snprintf(db, sizeof db, "%s/cold.db", tmpdir);
    mt_task task = small_task();
    char err[1024];
    mt_tune_params p = quick_params(db, "random", 4, 2);
    assert_int_equal(p.measurer.measure.cold, 1);
    p.measurer.measure.cold = 0;
    mt_tune_summary s;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    const int can = mt_device_info_can_evict(&s.device);
    assert_int_equal(s.cold, 0);
    mt_tune_summary_free(&s);
    source_count c = count_sources(db);
    assert_int_equal(c.warm, 4);
    assert_int_equal(c.cold, 0);
    if (!can) {
        print_message("skipped: the device cannot evict buffers from its caches (not an OpenCL CPU device on x86)\n");
        skip();
    }
    p = quick_params(db, "random", 4, 2);
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.resumed, 0);
    assert_int_equal(s.measured_this_run, 4);
    assert_int_equal(s.cold, 1);
    mt_tune_summary_free(&s);
    c = count_sources(db);
    assert_int_equal(c.cold, 4);
    assert_int_equal(c.warm + c.cold, (int)count_records(db));
    p = quick_params(db, "random", 4, 2);
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.resumed, 4);
    assert_int_equal(s.measured_this_run, 0);
    mt_tune_summary_free(&s);
}

static void exec_sql(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

typedef struct {
    int64_t id;
    mt_record rec;
} record_by_id;

static int find_id(const mt_record *r, void *user) {
    record_by_id *f = user;
    if (r->id == f->id) f->rec = *r;
    return 0;
}

/* A resume goes past a damaged record, naming it, and measures again the
 * config whose worker was killed from outside (its record replaced). */
static void test_resume_past_damage(void **state) {
    (void)state;
    if (!have_device) {
        print_message("skipped: no device: %s\n", why);
        skip();
    }
    char db[512], err[1024];
    snprintf(db, sizeof db, "%s/damaged.db", tmpdir);
    mt_task task = small_task();
    mt_tune_params p = quick_params(db, "random", 4, 2);
    mt_tune_summary s;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.measured_this_run, 4);
    mt_tune_summary_free(&s);
    /* Record 2: its worker was killed from outside, twice; record 3: a time
     * that is no number (it read as 0 ms, faster than any real one). */
    exec_sql(db, "UPDATE records SET status = 'unavailable', median_ms = NULL, costs = '[]', message = '" MT_RECORD_ENV_FAILURE_PREFIX
                 "killed' WHERE id = 2; UPDATE records SET median_ms = 'abc' WHERE id = 3");
    record_by_id before = {.id = 2};
    mt_db *h = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(db, &dp, &h, NULL, 0), MT_OK);
    assert_int_equal(mt_db_for_each(h, NULL, find_id, &before, NULL, 0), MT_CORRUPT); /* record 3 */
    mt_db_close(h);
    assert_true(mt_record_env_failure(&before.rec));
    p = quick_params(db, "random", 6, 2);
    mt_status st = mt_tune(&task, 1, &p, &s, err, sizeof err);
    print_message("resume: %s %s; note: %s\n", mt_status_name(st), st == MT_OK ? "" : err, s.note);
    assert_int_equal(st, MT_OK);
    assert_int_equal(s.resumed, 2); /* of 4: one damaged, one to measure again */
    assert_int_equal(s.measured_this_run, 4);
    assert_non_null(strstr(s.note, "record 3 has a damaged median"));
    assert_non_null(strstr(s.note, "1 record of a worker killed from outside"));
    mt_tune_summary_free(&s);
    record_by_id after = {.id = 2};
    assert_int_equal(mt_db_open(db, &dp, &h, NULL, 0), MT_OK);
    assert_int_equal(mt_db_for_each(h, NULL, find_id, &after, NULL, 0), MT_CORRUPT);
    mt_db_close(h);
    assert_string_equal(after.rec.config, before.rec.config);
    print_message("record 2 measured again: %s, %.4f ms, %s\n", mt_status_name(after.rec.status), after.rec.median_ms, after.rec.message);
    assert_false(mt_record_env_failure(&after.rec)); /* measured again: replaced */
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
    p.templates = "direct,gemm"; /* the hanging one and one that works */
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
    assert_int_equal(mt_db_for_each(h, NULL, count_status, &c, NULL, 0), MT_OK);
    mt_db_close(h);
    assert_true(c.timeouts >= 2);
    assert_true(c.ok >= 2);
}

typedef struct {
    const char *config; /* the text looked for */
    int found;
} config_find;

static int find_config(const mt_record *r, void *user) {
    config_find *f = user;
    if (!strcmp(r->config, f->config)) f->found++;
    return 0;
}

/* Whether the records of db hold the default config of the first template that accepts the task. */
static int has_default_record(const char *db, const mt_task *task) {
    mt_device *dev = NULL;
    mt_device_params dvp = mt_device_default_params();
    assert_int_equal(mt_device_open(NULL, &dvp, &dev, NULL, 0), MT_OK);
    const mt_template *t = NULL;
    for (int i = 0; i < mt_template_count() && !t; i++)
        if (mt_template_accepts(mt_template_at(i), &task->wl)) t = mt_template_at(i);
    assert_non_null(t);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &task->wl, &sp), MT_OK);
    mt_config cfg;
    assert_int_equal(mt_default_config(t, &task->wl, mt_device_get_info(dev), &sp, &cfg, NULL, 0), MT_OK);
    char text[1024];
    assert_true(mt_config_format(&sp, &cfg, text, sizeof text) > 0);
    mt_space_free(&sp);
    mt_device_close(dev);
    mt_db *h = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(db, &dp, &h, NULL, 0), MT_OK);
    config_find f = {text, 0};
    assert_int_equal(mt_db_for_each(h, NULL, find_config, &f, NULL, 0), MT_OK);
    mt_db_close(h);
    return f.found;
}

/* The first round measures each template's default config unless
 * start_from_default is 0 (search-efficiency curves). */
static void test_start_from_default(void **state) {
    (void)state;
    if (!have_device) {
        print_message("skipped: no device: %s\n", why);
        skip();
    }
    mt_task task = small_task();
    char db[512], err[1024];
    mt_tune_summary s;
    snprintf(db, sizeof db, "%s/default-on.db", tmpdir);
    mt_tune_params p = quick_params(db, "random", 2, 2);
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    mt_tune_summary_free(&s);
    assert_int_equal(has_default_record(db, &task), 1);

    snprintf(db, sizeof db, "%s/default-off.db", tmpdir);
    p = quick_params(db, "random", 4, 4);
    p.start_from_default = 0;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.measured_this_run, 4);
    mt_tune_summary_free(&s);
    /* Four random draws from a space of thousands miss the default. */
    assert_int_equal(has_default_record(db, &task), 0);
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
        cmocka_unit_test(test_cold_resume),
        cmocka_unit_test(test_resume_past_damage),
        cmocka_unit_test(test_hang_is_a_timeout),
        cmocka_unit_test(test_start_from_default),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
