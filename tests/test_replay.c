/* Replay tuning (mt_tune_params.simulate_db, tuner/replay.h): measurements
 * answered from a recording made here of a device this machine does not
 * have, so no device, worker or compiler is involved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mtgpu/records.h"
#include "mtgpu/tuner.h"
#include "program.h"
#include "replay.h"
#include "select.h"
#include "template.h"

/* Fingerprints of made-up devices: the recorded one (described in the
 * recording), a second one with fewer records (only its fingerprint), and
 * two that tie. */
#define FP_A "feedfacecafe0001"
#define FP_B "feedfacecafe0002"
#define FP_T1 "feedfacecafe0003"
#define FP_T2 "feedfacecafe0004"
#define NREC_A 40
#define NREC_B 12

static char tmpdir[256];
static char rec_db[512];  /* devices A (described) and B (fingerprint only) */
static char tie_db[512];  /* T1 and T2 with as many records each */
static char two_db[512];  /* device A: direct, and gemm 10x slower */
#define NREC_TWO 80
static const char *WL = "n=1,c=8,h=10,w=10,k=8,r=3,s=3,pad=1";

static mt_device_info device_a(void) {
    mt_device_info d;
    memset(&d, 0, sizeof d);
    d.backend = MT_BACKEND_OPENCL;
    snprintf(d.platform, sizeof d.platform, "Recorded Platform");
    snprintf(d.name, sizeof d.name, "Recorded GPU");
    snprintf(d.vendor, sizeof d.vendor, "Recorded Vendor");
    snprintf(d.driver, sizeof d.driver, "1.0");
    d.compute_units = 40;
    d.clock_mhz = 1500;
    d.global_mem_bytes = (uint64_t)8 << 30;
    d.local_mem_bytes = 48 << 10;
    d.max_alloc_bytes = (uint64_t)2 << 30;
    d.max_work_group_size = 1024;
    d.max_work_item_sizes[0] = d.max_work_item_sizes[1] = 1024;
    d.max_work_item_sizes[2] = 64;
    d.pref_vector_width = d.native_vector_width = 1;
    d.peak_gflops = 10000;
    snprintf(d.fingerprint, sizeof d.fingerprint, FP_A);
    return d;
}

/* A recorded time that depends on the config alone. */
static double recorded_ms(uint64_t idx) { return 0.5 + (double)(idx % 997) / 100.0; }

/* Records n distinct valid configs of template tname for WL on device fp
 * (the default config first when with_default), every 7th a build failure,
 * their times recorded_ms x scale. */
static void record_template_configs(mt_db *db, const char *tname, double scale, const char *fp, int n, int with_default,
                                    uint64_t seed) {
    mt_workload wl;
    assert_int_equal(mt_workload_parse(WL, &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find(tname);
    assert_non_null(t);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_device_info a = device_a();
    mt_device_limits lim = mt_device_info_limits(&a);
    uint64_t rng = seed;
    uint64_t *seen = calloc((size_t)n, sizeof *seen);
    assert_non_null(seen);
    for (int i = 0; i < n;) {
        mt_config cfg;
        if (i == 0 && with_default) assert_int_equal(mt_default_config(t, &wl, &a, &sp, &cfg, NULL, 0), MT_OK);
        else mt_space_random(&sp, &rng, &cfg);
        if (mt_template_check(t, &wl, &sp, &cfg, &lim, NULL, 0) != MT_OK) continue;
        uint64_t idx = mt_space_config_index(&sp, &cfg);
        int dup = 0;
        for (int j = 0; j < i && !dup; j++) dup = seen[j] == idx;
        if (dup) continue;
        seen[i] = idx;
        mt_record r;
        mt_record_init(&r);
        r.wl = wl;
        snprintf(r.template_name, sizeof r.template_name, "%s", tname);
        mt_config_format(&sp, &cfg, r.config, sizeof r.config);
        r.config_index = (int64_t)idx;
        snprintf(r.device, sizeof r.device, "%s", fp);
        if (i % 7 == 3) {
            r.status = MT_BUILD;
            snprintf(r.message, sizeof r.message, "recorded build failure");
        } else {
            double ms = recorded_ms(idx) * scale;
            r.ncosts = 3;
            r.costs_ms[0] = ms * 1.01, r.costs_ms[1] = ms, r.costs_ms[2] = ms * 0.99;
            r.median_ms = ms;
        }
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
        i++;
    }
    free(seen);
    mt_space_free(&sp);
}

static void record_configs(mt_db *db, const char *fp, int n, int with_default, uint64_t seed) {
    record_template_configs(db, "direct", 1, fp, n, with_default, seed);
}

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mtgpu-test-replay-XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    snprintf(rec_db, sizeof rec_db, "%s/recording.db", tmpdir);
    snprintf(tie_db, sizeof tie_db, "%s/tie.db", tmpdir);
    snprintf(two_db, sizeof two_db, "%s/two.db", tmpdir);
    mt_db *db = NULL;
    mt_db_params dp = mt_db_default_params();
    if (mt_db_open(rec_db, &dp, &db, NULL, 0) != MT_OK) return -1;
    mt_device_info a = device_a();
    if (mt_db_put_device(db, &a, NULL, 0) != MT_OK) return -1;
    record_configs(db, FP_A, NREC_A, 1, 11);
    record_configs(db, FP_B, NREC_B, 0, 22);
    mt_db_close(db);
    if (mt_db_open(tie_db, &dp, &db, NULL, 0) != MT_OK) return -1;
    record_configs(db, FP_T1, 5, 0, 33);
    record_configs(db, FP_T2, 5, 0, 44);
    mt_db_close(db);
    if (mt_db_open(two_db, &dp, &db, NULL, 0) != MT_OK) return -1;
    if (mt_db_put_device(db, &a, NULL, 0) != MT_OK) return -1;
    record_template_configs(db, "direct", 1, FP_A, NREC_TWO, 1, 55);
    record_template_configs(db, "gemm", 10, FP_A, NREC_TWO, 1, 66);
    mt_db_close(db);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static mt_task the_task(void) {
    mt_task t = {.count = 1};
    assert_int_equal(mt_workload_parse(WL, &t.wl, NULL, 0), MT_OK);
    t.flops = mt_workload_flops(&t.wl);
    return t;
}

/* What the progress callback saw: every record, in order. */
#define MAX_SEEN 256
typedef struct seen_records {
    mt_record r[MAX_SEEN];
    int n;
} seen_records;

static void collect(const mt_tune_progress *p, void *user) {
    seen_records *s = user;
    for (int i = 0; i < p->nrecords && s->n < MAX_SEEN; i++) s->r[s->n++] = p->records[i];
}

static mt_tune_params replay_params(const char *model, int trials, seen_records *seen) {
    mt_tune_params p = mt_tune_default_params();
    p.simulate_db = rec_db;
    p.no_db = 1;
    p.templates = "direct";
    p.cost_model = model;
    p.trials = trials;
    p.batch = 4;
    p.early_stop = 0;
    p.progress = collect;
    p.user = seen;
    return p;
}

/* Replays `trials` of the task with `model` and `seed` into *s (no
 * database); returns the records seen, to free. */
static seen_records *replay(const char *model, int trials, uint64_t seed, mt_tune_summary *s) {
    seen_records *seen = calloc(1, sizeof *seen);
    assert_non_null(seen);
    mt_task task = the_task();
    mt_tune_params p = replay_params(model, trials, seen);
    p.seed = seed;
    char err[1024] = "";
    mt_status st = mt_tune(&task, 1, &p, s, err, sizeof err);
    if (st != MT_OK) print_message("%s\n", err);
    assert_int_equal(st, MT_OK);
    return seen;
}

typedef struct find_rec {
    const char *config;
    const char *device;
    mt_record found;
    int n;
} find_rec;

static int find_cb(const mt_record *r, void *user) {
    find_rec *f = user;
    if (strcmp(r->config, f->config) == 0 && strcmp(r->device, f->device) == 0) {
        f->found = *r;
        f->n++;
    }
    return 0;
}

/* The recording's record of config on device fp; 0 when there is none. */
static int recorded(const char *config, const char *fp, mt_record *out) {
    mt_db *db = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(rec_db, &dp, &db, NULL, 0), MT_OK);
    find_rec f = {.config = config, .device = fp};
    assert_int_equal(mt_db_for_each(db, NULL, find_cb, &f, NULL, 0), MT_OK);
    mt_db_close(db);
    assert_true(f.n <= 1);
    if (f.n && out) *out = f.found;
    return f.n;
}

/* Every record replayed is a recorded one, with its time and status. */
static void check_replayed(const seen_records *seen, const char *fp) {
    for (int i = 0; i < seen->n; i++) {
        const mt_record *r = &seen->r[i];
        mt_record want;
        assert_true(recorded(r->config, fp, &want));
        assert_string_equal(r->device, fp);
        assert_int_equal(r->status, want.status);
        assert_true(r->median_ms == want.median_ms);
        assert_int_equal(r->ncosts, want.ncosts);
        for (int c = 0; c < r->ncosts; c++) assert_true(r->costs_ms[c] == want.costs_ms[c]);
        assert_string_equal(r->message, want.message);
        char src[64];
        snprintf(src, sizeof src, "replay:%s", fp);
        assert_string_equal(r->source, src);
    }
}

static void test_returns_recorded(void **state) {
    (void)state;
    const char *models[] = {"random", "xgb"};
    for (int m = 0; m < 2; m++) {
        mt_tune_summary s;
        seen_records *seen = replay(models[m], 25, 1, &s);
        mt_task task = the_task();
        /* device A has the most records: the default choice, and no device of this machine */
        assert_string_equal(s.device.fingerprint, FP_A);
        assert_string_equal(s.device.name, "Recorded GPU");
        assert_int_equal(s.measured_this_run, 25);
        assert_int_equal(seen->n, 25);
        check_replayed(seen, FP_A);
        /* the first round starts from the default config, which was recorded */
        mt_space sp;
        const mt_template *t = mt_template_find("direct");
        assert_int_equal(mt_template_space(t, &task.wl, &sp), MT_OK);
        mt_config dc;
        mt_device_info a = device_a();
        assert_int_equal(mt_default_config(t, &task.wl, &a, &sp, &dc, NULL, 0), MT_OK);
        char dtext[1024];
        mt_config_format(&sp, &dc, dtext, sizeof dtext);
        mt_space_free(&sp);
        assert_string_equal(seen->r[0].config, dtext);
        /* the best is the fastest replayed */
        double best = 0;
        for (int i = 0; i < seen->n; i++)
            if (seen->r[i].status == MT_OK && (best == 0 || seen->r[i].median_ms < best)) best = seen->r[i].median_ms;
        assert_true(s.tasks[0].best_ms == best);
        mt_tune_summary_free(&s);
        free(seen);
    }
}

/* A budget beyond the recording ends with the recording: every recorded
 * config once, none twice, nothing else. */
static void test_ends_when_exhausted(void **state) {
    (void)state;
    const char *models[] = {"random", "xgb"};
    for (int m = 0; m < 2; m++) {
        mt_tune_summary s;
        seen_records *seen = replay(models[m], 500, 1, &s);
        assert_int_equal(s.trials_done, NREC_A);
        assert_int_equal(seen->n, NREC_A);
        assert_int_equal(s.tasks[0].errors, (NREC_A + 3) / 7);
        for (int i = 0; i < seen->n; i++)
            for (int j = 0; j < i; j++) assert_string_not_equal(seen->r[i].config, seen->r[j].config);
        check_replayed(seen, FP_A);
        mt_tune_summary_free(&s);
        free(seen);
    }
}

static void same_sequence(const seen_records *a, const seen_records *b, int *same) {
    *same = a->n == b->n;
    for (int i = 0; i < a->n && *same; i++) *same = strcmp(a->r[i].config, b->r[i].config) == 0;
}

/* One seed, one sequence of configs; another seed, another. */
static void test_deterministic(void **state) {
    (void)state;
    mt_tune_summary s;
    seen_records *a = replay("xgb", 20, 1, &s);
    mt_tune_summary_free(&s);
    seen_records *b = replay("xgb", 20, 1, &s);
    mt_tune_summary_free(&s);
    seen_records *c = replay("xgb", 20, 7, &s);
    mt_tune_summary_free(&s);
    int same;
    same_sequence(a, b, &same);
    assert_true(same);
    same_sequence(a, c, &same);
    assert_false(same);
    free(a), free(b), free(c);
}

/* The replay itself: the recorded configs of the unit, their answers, and a
 * config the recording does not hold refused. */
static void test_refuses_unknown(void **state) {
    (void)state;
    mt_task task = the_task();
    mt__replay *r = NULL;
    mt_device_info dev;
    int described = -1;
    char err[1024] = "";
    assert_int_equal(mt__replay_open(rec_db, FP_B, &task, 1, "direct", &r, &dev, &described, err, sizeof err), MT_OK);
    assert_string_equal(dev.fingerprint, FP_B);
    assert_int_equal(described, 0); /* the recording has only B's fingerprint */
    const mt_template *t = mt_template_find("direct");
    const uint64_t *idx;
    size_t n;
    mt__replay_configs(r, &task.wl, t, &idx, &n);
    assert_int_equal(n, NREC_B);
    for (size_t i = 1; i < n; i++) assert_true(idx[i] > idx[i - 1]);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &task.wl, &sp), MT_OK);
    mt_config cfgs[2];
    assert_int_equal(mt_space_config_from_index(&sp, idx[0], &cfgs[0]), MT_OK);
    /* an index next to the recorded ones that is not among them */
    uint64_t other = idx[0] + 1;
    for (size_t i = 0; i < n; i++)
        if (idx[i] == other) other++;
    assert_int_equal(mt_space_config_from_index(&sp, other, &cfgs[1]), MT_OK);
    mt_measurer_result res[2];
    assert_int_equal(mt__replay_measure_batch(r, &task.wl, t, &sp, cfgs, 2, res, err, sizeof err), MT_NOT_FOUND);
    assert_non_null(strstr(err, "not in the recording"));
    assert_false(res[0].skipped);
    assert_int_equal(res[0].sent_to_worker, 1);
    char text[1024];
    mt_config_format(&sp, &cfgs[0], text, sizeof text);
    mt_record want;
    assert_true(recorded(text, FP_B, &want));
    assert_int_equal(res[0].m.status, want.status);
    assert_true(res[0].m.median_ms == want.median_ms);
    assert_true(res[1].skipped);
    /* another template, or another workload: nothing recorded */
    mt__replay_configs(r, &task.wl, mt_template_find("gemm"), &idx, &n);
    assert_int_equal(n, 0);
    assert_non_null(idx);
    assert_int_equal(mt__replay_measure_batch(r, &task.wl, mt_template_find("gemm"), &sp, cfgs, 1, res, err, sizeof err), MT_NOT_FOUND);
    mt_space_free(&sp);
    mt__replay_close(r);

    /* A replay through mt_tune of the undescribed device stays inside its records. */
    seen_records *seen = calloc(1, sizeof *seen);
    assert_non_null(seen);
    mt_tune_params p = replay_params("xgb", 100, seen);
    p.simulate_device = FP_B;
    mt_tune_summary s;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.trials_done, NREC_B);
    check_replayed(seen, FP_B);
    mt_tune_summary_free(&s);
    free(seen);
}

static void test_device_choice(void **state) {
    (void)state;
    mt_task task = the_task();
    mt_tune_summary s;
    char err[1024];
    mt_tune_params p = replay_params("random", 4, NULL);
    p.progress = NULL;
    p.simulate_device = "0123456789abcdef";
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_NOT_FOUND);
    assert_non_null(strstr(err, FP_A));
    assert_non_null(strstr(err, FP_B));
    mt_tune_summary_free(&s);
    /* two devices with as many records: the caller must choose, and is told between what */
    p.simulate_device = NULL;
    p.simulate_db = tie_db;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, FP_T1));
    assert_non_null(strstr(err, FP_T2));
    mt_tune_summary_free(&s);
    p.simulate_device = FP_T2;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_string_equal(s.device.fingerprint, FP_T2);
    assert_int_equal(s.trials_done, 4);
    mt_tune_summary_free(&s);
    /* no records of the workload at all */
    mt_task other = task;
    other.wl.k = 16;
    p.simulate_device = NULL;
    assert_int_equal(mt_tune(&other, 1, &p, &s, err, sizeof err), MT_NOT_FOUND);
    mt_tune_summary_free(&s);
}

static int64_t count_source(const char *path, const char *prefix) {
    mt_db *db = NULL;
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    assert_int_equal(mt_db_open(path, &dp, &db, NULL, 0), MT_OK);
    mt_db_filter f = {.source_prefix = prefix};
    int64_t n = -1;
    assert_int_equal(mt_db_count_filter(db, &f, &n, NULL, 0), MT_OK);
    mt_db_close(db);
    return n;
}

/* The scheduler spends a task's trials where they can make it faster: with
 * gemm's recorded configs 10x slower than direct's, most trials go to direct
 * (with a template's gain scaled by how far behind it is, not its square,
 * gemm got 26 of 64). */
static void test_trailing_template_gets_few_trials(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        seen_records *seen = calloc(1, sizeof *seen);
        assert_non_null(seen);
        mt_task task = the_task();
        mt_tune_params p = replay_params("random", 64, seen);
        p.simulate_db = two_db;
        p.templates = "direct,gemm";
        p.seed = seed;
        mt_tune_summary s;
        char err[1024] = "";
        mt_status st = mt_tune(&task, 1, &p, &s, err, sizeof err);
        if (st != MT_OK) print_message("%s\n", err);
        assert_int_equal(st, MT_OK);
        assert_int_equal(seen->n, 64);
        int gemm = 0;
        for (int i = 0; i < seen->n; i++) gemm += strcmp(seen->r[i].template_name, "gemm") == 0;
        print_message("seed %d: %d of %d trials on gemm\n", (int)seed, gemm, seen->n);
        assert_true(gemm >= 2); /* its first round: the default and one more */
        assert_true(gemm <= seen->n / 4);
        mt_tune_summary_free(&s);
        free(seen);
    }
}

/* Records to a database of the replay's own, marked as replayed, resumed by a
 * rerun; never into the default database or the recording. */
static void test_records_to_db(void **state) {
    (void)state;
    mt_task task = the_task();
    mt_tune_summary s;
    char err[1024], out_db[512];
    snprintf(out_db, sizeof out_db, "%s/replayed.db", tmpdir);
    mt_tune_params p = replay_params("xgb", 10, NULL);
    p.progress = NULL;
    p.no_db = 0;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_INVALID_ARG); /* no db_path */
    mt_tune_summary_free(&s);
    p.db_path = rec_db;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "recording"));
    mt_tune_summary_free(&s);
    assert_int_equal(count_source(rec_db, "replay:"), 0);

    p.db_path = out_db;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.measured_this_run, 10);
    mt_tune_summary_free(&s);
    assert_int_equal(count_source(out_db, "replay:" FP_A), 10);
    assert_int_equal(count_source(out_db, ""), 10);
    p.trials = 16;
    assert_int_equal(mt_tune(&task, 1, &p, &s, err, sizeof err), MT_OK);
    assert_int_equal(s.resumed, 10);
    assert_int_equal(s.measured_this_run, 6);
    mt_tune_summary_free(&s);
    assert_int_equal(count_source(out_db, "replay:" FP_A), 16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_returns_recorded),
        cmocka_unit_test(test_ends_when_exhausted),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_refuses_unknown),
        cmocka_unit_test(test_device_choice),
        cmocka_unit_test(test_records_to_db),
        cmocka_unit_test(test_trailing_template_gets_few_trials),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
