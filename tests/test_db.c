/* The tuning-records database: creation, schema checks, damaged files, record
 * round trips, uniqueness, best lookups and defaults, read-only readers, a
 * writer killed mid-run, and two writers at once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mtgpu/records.h"
#include "scratch_dir.h"
#include "select.h"

/* ---- scratch directories ---- */


static int setup_dir(void **state) {
    (void)state;
    return scratch_make("db");
}

static void path_in(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", g_dir, name); }

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* ---- helpers ---- */

static const char *FP1 = "0123456789abcdef";
static const char *FP2 = "fedcba9876543210";

static mt_workload wl_3x3(void) {
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=32,h=28,w=28,k=64,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    return wl;
}

/* A valid `direct` config text for wl, the i-th of its space (mod size). */
static void direct_config(const mt_workload *wl, uint64_t i, char *out, size_t len, int64_t *index) {
    const mt_template *t = mt_template_find("direct");
    assert_non_null(t);
    mt_space sp;
    assert_int_equal(mt_template_space(t, wl, &sp), MT_OK);
    mt_config cfg;
    uint64_t idx = i % mt_space_size(&sp);
    assert_int_equal(mt_space_config_from_index(&sp, idx, &cfg), MT_OK);
    assert_true(mt_config_format(&sp, &cfg, out, len) > 0);
    if (index) *index = (int64_t)idx;
    mt_space_free(&sp);
}

static void make_record(mt_record *r, const mt_workload *wl, const char *fp, uint64_t i, double ms) {
    mt_record_init(r);
    r->wl = *wl;
    snprintf(r->template_name, sizeof r->template_name, "direct");
    direct_config(wl, i, r->config, sizeof r->config, &r->config_index);
    memcpy(r->device, fp, 17);
    r->ncosts = 3;
    r->costs_ms[0] = ms * 1.01;
    r->costs_ms[1] = ms;
    r->costs_ms[2] = ms * 0.99;
    r->median_ms = ms;
    r->status = MT_OK;
    r->build_s = 0.25;
    r->timestamp = 1700000000.5 + (double)i;
}

static mt_db *open_db(const char *name) {
    char path[512];
    path_in(path, sizeof path, name);
    mt_db *db = NULL;
    char err[512];
    mt_status st = mt_db_open(path, NULL, &db, err, sizeof err);
    if (st != MT_OK) fail_msg("mt_db_open(%s): %s", path, err);
    return db;
}

static void integrity_ok(const char *path) {
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "ok");
    sqlite3_finalize(s);
    sqlite3_close(h);
}

static void exec_raw(const char *path, const char *sql) {
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) fail_msg("sqlite3_exec(%s): %s", sql, msg ? msg : "?");
    sqlite3_close(h);
}

/* ---- tests ---- */

static void test_open_create(void **state) {
    (void)state;
    char path[512], err[512];
    path_in(path, sizeof path, "a/b/c/tuning.db");
    mt_db *db = NULL;
    /* An explicit path's directory must exist, unless create_dirs says to make it. */
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_IO);
    print_message("    missing directory: %s\n", err);
    assert_non_null(strstr(err, "directory does not exist"));
    assert_null(db);
    char first[512];
    path_in(first, sizeof first, "a");
    assert_int_equal(access(first, F_OK), -1);
    mt_db_params cp = mt_db_default_params();
    cp.create_dirs = 1;
    assert_int_equal(mt_db_open(path, &cp, &db, err, sizeof err), MT_OK);
    assert_string_equal(mt_db_path(db), path);
    int64_t n = -1;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    mt_db_close(db);
    /* Reopen, and read-only. */
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    mt_db_close(db);
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    assert_int_equal(mt_db_open(path, &p, &db, err, sizeof err), MT_OK);
    mt_db_close(db);
    /* WAL mode is on in the file. */
    sqlite3 *h;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s;
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
    sqlite3_finalize(s);
    sqlite3_close(h);
    /* Read-only open of a missing file: a clean I/O error, nothing created. */
    char missing[512];
    path_in(missing, sizeof missing, "missing.db");
    assert_int_equal(mt_db_open(missing, &p, &db, err, sizeof err), MT_IO);
    assert_null(db);
    assert_int_equal(access(missing, F_OK), -1);
    /* Without create, a missing file is not created either. */
    p = mt_db_default_params();
    p.create = 0;
    assert_int_equal(mt_db_open(missing, &p, &db, err, sizeof err), MT_IO);
    assert_int_equal(access(missing, F_OK), -1);
}

static void test_default_path(void **state) {
    (void)state;
    char buf[512];
    const char *old_db = getenv("MTGPU_DB"), *old_xdg = getenv("XDG_CACHE_HOME"), *old_home = getenv("HOME");
    char *save_db = old_db ? strdup(old_db) : NULL, *save_xdg = old_xdg ? strdup(old_xdg) : NULL, *save_home = old_home ? strdup(old_home) : NULL;
    setenv("MTGPU_DB", "/x/y.db", 1);
    assert_int_equal(mt_db_default_path(buf, sizeof buf, NULL, 0), MT_OK);
    assert_string_equal(buf, "/x/y.db");
    unsetenv("MTGPU_DB");
    setenv("XDG_CACHE_HOME", "/cache", 1);
    assert_int_equal(mt_db_default_path(buf, sizeof buf, NULL, 0), MT_OK);
    assert_string_equal(buf, "/cache/mtgpu/tuning.db");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(mt_db_default_path(buf, sizeof buf, NULL, 0), MT_OK);
    assert_string_equal(buf, "/home/u/.cache/mtgpu/tuning.db");
    assert_int_equal(mt_db_default_path(buf, 5, NULL, 0), MT_RANGE);
    unsetenv("HOME");
    assert_int_equal(mt_db_default_path(buf, sizeof buf, NULL, 0), MT_UNAVAILABLE);
    /* mt_db_open(NULL) uses it and creates the directories. */
    char dbp[512];
    path_in(dbp, sizeof dbp, "env/dir/t.db");
    setenv("MTGPU_DB", dbp, 1);
    mt_db *db = NULL;
    char err[512];
    assert_int_equal(mt_db_open(NULL, NULL, &db, err, sizeof err), MT_OK);
    assert_string_equal(mt_db_path(db), dbp);
    mt_db_close(db);
    assert_int_equal(access(dbp, F_OK), 0);
    if (save_db) setenv("MTGPU_DB", save_db, 1);
    else unsetenv("MTGPU_DB");
    if (save_xdg) setenv("XDG_CACHE_HOME", save_xdg, 1);
    if (save_home) setenv("HOME", save_home, 1);
    free(save_db);
    free(save_xdg);
    free(save_home);
}

/* Opening fails with MT_CORRUPT and leaves the file byte for byte as it was. */
static void expect_corrupt_unchanged(const char *path, int readonly) {
    size_t n0 = 0, n1 = 0;
    char *before = read_file(path, &n0);
    assert_non_null(before);
    mt_db *db = NULL;
    char err[512] = "";
    mt_db_params p = mt_db_default_params();
    p.readonly = readonly;
    mt_status st = mt_db_open(path, &p, &db, err, sizeof err);
    print_message("    %s -> %s: %s\n", strrchr(path, '/') + 1, mt_status_name(st), err);
    assert_int_equal(st, MT_CORRUPT);
    assert_null(db);
    assert_true(strlen(err) > 10);
    char *after = read_file(path, &n1);
    assert_non_null(after);
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    free(before);
    free(after);
}

static void test_schema_version(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "version.db");
    mt_db *db = open_db("version.db");
    mt_record r;
    mt_workload wl = wl_3x3();
    make_record(&r, &wl, FP1, 1, 1.0);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_close(db);
    exec_raw(path, "UPDATE meta SET value = '999' WHERE key = 'schema_version'");
    expect_corrupt_unchanged(path, 0);
    expect_corrupt_unchanged(path, 1);
    exec_raw(path, "UPDATE meta SET value = 'one' WHERE key = 'schema_version'");
    expect_corrupt_unchanged(path, 0);
    exec_raw(path, "DELETE FROM meta WHERE key = 'schema_version'");
    expect_corrupt_unchanged(path, 0);
    exec_raw(path, "INSERT INTO meta VALUES ('schema_version', '1'); UPDATE meta SET value = 'other' WHERE key = 'application'");
    expect_corrupt_unchanged(path, 0);
    exec_raw(path, "UPDATE meta SET value = 'mtgpu' WHERE key = 'application'");
    db = open_db("version.db");
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    mt_db_close(db);
    /* Another application's SQLite database. */
    char other[512];
    path_in(other, sizeof other, "other.db");
    sqlite3 *h;
    assert_int_equal(sqlite3_open(other, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "CREATE TABLE songs (id INTEGER PRIMARY KEY, title TEXT); INSERT INTO songs VALUES (1, 'x')", NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(h);
    expect_corrupt_unchanged(other, 0);
}

static void test_not_sqlite(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "text.db");
    const char text[] = "this is not a database, just some text that is long enough to fill a header............................\n";
    write_file(path, text, sizeof text - 1);
    expect_corrupt_unchanged(path, 0);
    expect_corrupt_unchanged(path, 1);
    /* Random bytes of a page's length. */
    unsigned char junk[4096];
    uint64_t rng = 42;
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(mt_rng_next(&rng) >> 56);
    write_file(path, junk, sizeof junk);
    expect_corrupt_unchanged(path, 0);
    /* An empty file is a new database (as SQLite treats it). */
    write_file(path, "", 0);
    mt_db *db = open_db("text.db");
    mt_db_close(db);
}

static void test_truncated(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "trunc.db");
    mt_db *db = open_db("trunc.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; i < 400; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i * 7919, 1.0 + i);
        snprintf(r.message, sizeof r.message, "padding the record so that the file spans many pages %d", i);
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    mt_db_close(db);
    size_t n = 0;
    char *full = read_file(path, &n);
    assert_non_null(full);
    assert_true(n > 8 * 4096);
    /* Cut to a few sizes: every open (or the first query) fails cleanly. */
    const size_t cuts[] = {n / 2, 4096 * 2, 4096, 1000, 100, 50, 16};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        write_file(path, full, cuts[c]);
        char err[512] = "";
        mt_db *d = NULL;
        mt_status st = mt_db_open(path, NULL, &d, err, sizeof err);
        print_message("    truncated to %zu bytes -> %s: %s\n", cuts[c], mt_status_name(st), err);
        if (st == MT_OK) {
            /* SQLite could not tell at open time: queries must fail cleanly. */
            int64_t cnt = 0;
            char qerr[512] = "";
            mt_status q = mt_db_count(d, NULL, NULL, NULL, &cnt, qerr, sizeof qerr);
            print_message("      count -> %s: %s\n", mt_status_name(q), qerr);
            assert_true(q == MT_CORRUPT || q == MT_OK);
            mt_db_close(d);
        } else {
            assert_int_equal(st, MT_CORRUPT);
            assert_null(d);
        }
    }
    /* Half a database (the common case of a copy cut short) fails at open. */
    write_file(path, full, n / 2);
    mt_db *d = NULL;
    assert_int_equal(mt_db_open(path, NULL, &d, NULL, 0), MT_CORRUPT);
    free(full);
}

static void assert_record_equal(const mt_record *a, const mt_record *b) {
    assert_memory_equal(&a->wl, &b->wl, sizeof a->wl);
    assert_string_equal(a->template_name, b->template_name);
    assert_string_equal(a->config, b->config);
    assert_int_equal(a->config_index, b->config_index);
    assert_string_equal(a->device, b->device);
    assert_int_equal(a->ncosts, b->ncosts);
    for (int i = 0; i < a->ncosts; i++) assert_true(a->costs_ms[i] == b->costs_ms[i]);
    assert_true(a->median_ms == b->median_ms);
    assert_int_equal(a->status, b->status);
    assert_string_equal(a->message, b->message);
    assert_true(a->build_s == b->build_s);
    assert_true(a->timestamp == b->timestamp);
}

static int collect(const mt_record *rec, void *user) {
    mt_record *out = user;
    int64_t i = out[0].id++;
    if (i < 16) out[1 + i] = *rec;
    return 0;
}

static void test_round_trip(void **state) {
    (void)state;
    mt_db *db = open_db("rt.db");
    mt_workload wl = wl_3x3();
    mt_record *recs = calloc(4, sizeof *recs);
    make_record(&recs[0], &wl, FP1, 3, 0.5);
    make_record(&recs[1], &wl, FP1, 11, 0.25);
    recs[1].costs_ms[0] = 1.0 / 3.0; /* exact double round trip */
    recs[1].median_ms = 0.25;
    make_record(&recs[2], &wl, FP2, 3, 0.75);
    recs[2].status = MT_BUILD;
    recs[2].ncosts = 0;
    recs[2].median_ms = 0;
    snprintf(recs[2].message, sizeof recs[2].message, "error: 'quote\" and \\ and unicode \xc3\xa9' line\nnext");
    for (int i = 0; i < 3; i++) {
        int ins = -1;
        assert_int_equal(mt_db_put_record(db, &recs[i], &ins, NULL, 0), MT_OK);
        assert_int_equal(ins, 1);
    }
    mt_record *got = calloc(17, sizeof *got);
    got[0].id = 0;
    assert_int_equal(mt_db_for_each(db, NULL, collect, got, NULL, 0), MT_OK);
    assert_int_equal(got[0].id, 3);
    for (int i = 0; i < 3; i++) {
        assert_record_equal(&got[1 + i], &recs[i]);
        assert_string_equal(got[1 + i].version, MT_VERSION_STRING);
        assert_string_equal(got[1 + i].source, "measured");
        assert_true(got[1 + i].id > 0);
    }
    /* Filters. */
    int64_t n;
    assert_int_equal(mt_db_count(db, &wl, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 3);
    assert_int_equal(mt_db_count(db, &wl, FP1, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(mt_db_count(db, NULL, FP2, "direct", &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    assert_int_equal(mt_db_count(db, NULL, NULL, "gemm", &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    mt_workload other = wl;
    other.k = 32;
    assert_int_equal(mt_db_count(db, &other, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    mt_db_filter f = {0};
    f.only_ok = 1;
    assert_int_equal(mt_db_count_filter(db, &f, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 2);
    f.source_prefix = "meas";
    assert_int_equal(mt_db_count_filter(db, &f, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 2);
    f.source_prefix = "autotvm:";
    assert_int_equal(mt_db_count_filter(db, &f, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    /* Ordered by median, limited. */
    memset(&f, 0, sizeof f);
    f.order_by_median = 1;
    f.limit = 2;
    memset(got, 0, 17 * sizeof *got);
    assert_int_equal(mt_db_for_each(db, &f, collect, got, NULL, 0), MT_OK);
    assert_int_equal(got[0].id, 2);
    assert_true(got[1].median_ms == 0.25);
    assert_true(got[2].median_ms == 0.5);
    /* has_record */
    int found = -1;
    assert_int_equal(mt_db_has_record(db, &wl, "direct", recs[0].config, FP1, &found, NULL, 0), MT_OK);
    assert_int_equal(found, 1);
    assert_int_equal(mt_db_has_record(db, &wl, "direct", recs[0].config, "1111111111111111", &found, NULL, 0), MT_OK);
    assert_int_equal(found, 0);
    assert_int_equal(mt_db_has_record(db, &wl, "gemm", recs[0].config, FP1, &found, NULL, 0), MT_OK);
    assert_int_equal(found, 0);
    /* Missing costs but a median: the median is computed from costs when absent. */
    mt_record r;
    make_record(&r, &wl, FP1, 99, 2.0);
    r.median_ms = 0;
    r.costs_ms[0] = 5, r.costs_ms[1] = 1, r.costs_ms[2] = 3;
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_filter one = {0};
    one.wl = &wl;
    one.device = FP1;
    one.order_by_median = 0;
    memset(got, 0, 17 * sizeof *got);
    assert_int_equal(mt_db_for_each(db, &one, collect, got, NULL, 0), MT_OK);
    assert_int_equal(got[0].id, 3);
    assert_true(got[3].median_ms == 3.0);
    free(got);
    free(recs);
    mt_db_close(db);
}

static void test_invalid_records(void **state) {
    (void)state;
    mt_db *db = open_db("inv.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    make_record(&r, &wl, FP1, 1, 1.0);
    mt_record bad = r;
    bad.wl.c = 0;
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    bad = r;
    bad.template_name[0] = '\0';
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    bad = r;
    memcpy(bad.device, "not-a-fingerpr!", 16);
    char err[512] = "";
    assert_int_equal(mt_db_put_record(db, &bad, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_true(strlen(err) > 0);
    bad = r;
    bad.ncosts = MT_RECORD_MAX_COSTS + 1;
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    bad = r;
    bad.costs_ms[1] = 0.0 / 0.0;
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    bad = r;
    bad.ncosts = 0;
    bad.median_ms = 0; /* ok without a time */
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    bad = r;
    memset(bad.config, 'x', sizeof bad.config); /* unterminated */
    assert_int_equal(mt_db_put_record(db, &bad, NULL, NULL, 0), MT_INVALID_ARG);
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 0);
    assert_int_equal(mt_db_put_record(NULL, &r, NULL, NULL, 0), MT_INVALID_ARG);
    mt_db_close(db);
}

static void test_unique(void **state) {
    (void)state;
    mt_db *db = open_db("uniq.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    make_record(&r, &wl, FP1, 5, 1.0);
    int ins = -1;
    assert_int_equal(mt_db_put_record(db, &r, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1);
    mt_record again = r;
    again.median_ms = 0.1; /* a different measurement of the same key is not stored */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mt_db_put_record(db, &again, &ins, NULL, 0), MT_OK);
        assert_int_equal(ins, 0);
    }
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    mt_record best;
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 1.0);
    /* Same config on another device, or another template name: new keys. */
    again = r;
    memcpy(again.device, FP2, 17);
    assert_int_equal(mt_db_put_record(db, &again, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1);
    again = r;
    snprintf(again.template_name, sizeof again.template_name, "direct2");
    assert_int_equal(mt_db_put_record(db, &again, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1);
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 3);
    mt_db_close(db);
}

static void test_devices(void **state) {
    (void)state;
    mt_db *db = open_db("dev.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    make_record(&r, &wl, FP1, 5, 1.0);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_device d;
    assert_int_equal(mt_db_get_device(db, FP1, &d, NULL, NULL, 0), MT_OK);
    assert_string_equal(d.backend, "unknown");
    mt_device_info info;
    memset(&info, 0, sizeof info);
    info.backend = MT_BACKEND_CUDA;
    info.index = 1;
    snprintf(info.platform, sizeof info.platform, "CUDA");
    snprintf(info.name, sizeof info.name, "NVIDIA \"Test\" GPU");
    snprintf(info.vendor, sizeof info.vendor, "NVIDIA");
    snprintf(info.driver, sizeof info.driver, "550.1");
    info.compute_units = 132;
    info.clock_mhz = 1980;
    info.global_mem_bytes = (uint64_t)80 << 30;
    info.local_mem_bytes = 49152;
    info.max_alloc_bytes = (uint64_t)20 << 30;
    info.max_work_group_size = 1024;
    info.max_work_item_sizes[0] = 1024, info.max_work_item_sizes[1] = 1024, info.max_work_item_sizes[2] = 64;
    info.pref_vector_width = 1;
    info.native_vector_width = 1;
    info.max_registers_per_thread = 255;
    info.peak_gflops = 66900.5;
    memcpy(info.fingerprint, FP1, 17);
    /* Fills in the placeholder. */
    assert_int_equal(mt_db_put_device(db, &info, NULL, 0), MT_OK);
    mt_device_info back;
    assert_int_equal(mt_db_get_device(db, FP1, &d, &back, NULL, 0), MT_OK);
    assert_string_equal(d.backend, "cuda");
    assert_string_equal(d.name, info.name);
    assert_int_equal(back.backend, MT_BACKEND_CUDA);
    assert_int_equal(back.index, 1);
    assert_string_equal(back.vendor, "NVIDIA");
    assert_int_equal(back.compute_units, 132);
    assert_int_equal(back.global_mem_bytes, info.global_mem_bytes);
    assert_int_equal(back.local_mem_bytes, 49152);
    assert_int_equal(back.max_work_group_size, 1024);
    assert_int_equal(back.max_work_item_sizes[2], 64);
    assert_int_equal(back.max_registers_per_thread, 255);
    assert_true(back.peak_gflops == info.peak_gflops);
    assert_string_equal(back.fingerprint, FP1);
    /* A second put of a known device changes nothing. */
    mt_device_info changed = info;
    snprintf(changed.name, sizeof changed.name, "renamed");
    assert_int_equal(mt_db_put_device(db, &changed, NULL, 0), MT_OK);
    assert_int_equal(mt_db_get_device(db, FP1, &d, NULL, NULL, 0), MT_OK);
    assert_string_equal(d.name, info.name);
    assert_int_equal(mt_db_get_device(db, FP2, &d, NULL, NULL, 0), MT_NOT_FOUND);
    mt_db_close(db);
}

static void test_best(void **state) {
    (void)state;
    mt_db *db = open_db("best.db");
    mt_workload wl = wl_3x3();
    mt_record r, best;
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_NOT_FOUND);
    const double ms[] = {3.0, 1.5, 0.5, 2.0};
    const mt_status stv[] = {MT_OK, MT_OK, MT_WRONG_RESULT, MT_OK};
    for (int i = 0; i < 4; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i * 13, ms[i]);
        r.status = stv[i];
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    /* The wrong result is faster but never the best. */
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 1.5);
    assert_int_equal(best.status, MT_OK);
    assert_int_equal(mt_db_best(db, &wl, FP2, &best, NULL, 0), MT_NOT_FOUND);
    mt_workload other = wl;
    other.stride_h = other.stride_w = 2;
    assert_int_equal(mt_db_best(db, &other, FP1, &best, NULL, 0), MT_NOT_FOUND);
    mt_db_close(db);
}

static mt_device_info test_device(const char *fp, int64_t max_wg, uint64_t local_mem) {
    mt_device_info d;
    memset(&d, 0, sizeof d);
    d.backend = MT_BACKEND_OPENCL;
    snprintf(d.name, sizeof d.name, "test device");
    d.max_work_group_size = max_wg;
    d.max_work_item_sizes[0] = d.max_work_item_sizes[1] = d.max_work_item_sizes[2] = max_wg;
    d.local_mem_bytes = local_mem;
    memcpy(d.fingerprint, fp, 17);
    return d;
}

/* mt_select_config of wl on dev from db (may be NULL) with the given layouts and rank. */
static mt_status select_config(mt_db *db, const mt_workload *wl, const mt_device_info *dev, unsigned layouts, int rank,
                               mt_select_result *out, char *err, size_t errlen) {
    mt_select_query q = mt_select_query_default(db, wl, dev);
    q.layouts = layouts;
    q.rank = rank;
    return mt_select_config(&q, out, err, errlen);
}

/* The config fits the device: it builds and passes the limit check. */
static void assert_fits(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_device_info *dev) {
    mt_kernel *k = NULL;
    char err[512];
    assert_int_equal(mt_template_build(t, wl, sp, cfg, &k, err, sizeof err), MT_OK);
    mt_kernel_resources res;
    assert_int_equal(mt_kernel_analyze(k, &res, err, sizeof err), MT_OK);
    mt_device_limits lim = {0};
    lim.max_threads_per_block = dev->max_work_group_size;
    for (int i = 0; i < 3; i++) lim.max_block_dim[i] = dev->max_work_item_sizes[i];
    lim.local_mem_bytes = (int64_t)dev->local_mem_bytes;
    assert_int_equal(mt_kernel_check_limits(&res, &lim, err, sizeof err), MT_OK);
    mt_kernel_free(k);
}

typedef struct kvec_default_case {
    const char *wl, *has;
} kvec_default_case;

/* kvec's default config for each case on dev (what the tuner measures
 * first, and what runs where the layer's rule names kvec): its text holds
 * the case's `has`. */
static void check_kvec_defaults(const kvec_default_case *cases, size_t n, const mt_device_info *dev) {
    char err[256], text[512];
    const mt_template *kvec = mt_template_find("kvec");
    for (size_t i = 0; i < n; i++) {
        mt_workload rw;
        mt_space sp;
        mt_config cfg;
        assert_int_equal(mt_workload_parse(cases[i].wl, &rw, NULL, 0), MT_OK);
        assert_int_equal(mt_template_space(kvec, &rw, &sp), MT_OK);
        if (mt_default_config(kvec, &rw, dev, &sp, &cfg, err, sizeof err) != MT_OK) fail_msg("%s: no default: %s", cases[i].wl, err);
        assert_true(mt_config_format(&sp, &cfg, text, sizeof text) > 0);
        if (!strstr(text, cases[i].has)) fail_msg("%d-lane %s: default %s, expected %s", dev->native_vector_width, cases[i].wl, text, cases[i].has);
        mt_space_free(&sp);
    }
}

static void test_best_config(void **state) {
    (void)state;
    mt_db *db = open_db("bestcfg.db");
    mt_workload wl = wl_3x3();
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_select_result sel;
    char err[512];

    /* Nothing stored: the default, valid for the device, deterministic. */
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_DEFAULT);
    assert_non_null(sel.t);
    assert_string_equal(sel.rec.source, "default");
    print_message("    default for %s: %s %s\n", "3x3", mt_template_name(sel.t), sel.rec.config);
    assert_fits(sel.t, &wl, &sel.space, &sel.cfg, &dev);
    char first[MT_RECORD_CONFIG_LEN];
    mt_config_format(&sel.space, &sel.cfg, first, sizeof first);
    assert_string_equal(first, sel.rec.config);
    mt_select_result_free(&sel);
    assert_int_equal(select_config(NULL, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    char second[MT_RECORD_CONFIG_LEN];
    mt_config_format(&sel.space, &sel.cfg, second, sizeof second);
    assert_string_equal(first, second);
    mt_select_result_free(&sel);

    /* A small device gets a config within its limits. */
    mt_device_info tiny = test_device(FP2, 32, 4096);
    assert_int_equal(select_config(db, &wl, &tiny, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_fits(sel.t, &wl, &sel.space, &sel.cfg, &tiny);
    print_message("    default on a 32-work-item device: %s %s\n", mt_template_name(sel.t), sel.rec.config);
    mt_select_result_free(&sel);

    /* A CPU takes wino by default (for this shape) when the caller accepts
     * its Winograd weights, kvec when it takes only kvec's packed ones, and
     * gemm (plain OIHW) when it takes neither. */
    mt_device_info cpu = test_device(FP1, 4096, 1 << 20);
    cpu.is_cpu = 1;
    cpu.native_vector_width = 16;
    assert_int_equal(select_config(NULL, &wl, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(mt_template_name(sel.t), "wino");
    assert_fits(sel.t, &wl, &sel.space, &sel.cfg, &cpu);
    print_message("    default on a CPU: %s %s\n", mt_template_name(sel.t), sel.rec.config);
    mt_select_result_free(&sel);
    assert_int_equal(select_config(NULL, &wl, &cpu, (1u << MT_WEIGHTS_OIHW) | (1u << MT_WEIGHTS_OIHW16O), 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(mt_template_name(sel.t), "kvec");
    mt_select_result_free(&sel);
    assert_int_equal(select_config(NULL, &wl, &cpu, 1u << MT_WEIGHTS_OIHW, 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(mt_template_name(sel.t), "gemm");
    assert_int_equal(mt_template_weight_layout(sel.t), MT_WEIGHTS_OIHW);
    mt_select_result_free(&sel);

    /* On a CPU the shapes where another template's default ran faster than
     * kvec's (records/select.c, cpu_default_template): wino on 3x3 stride-1
     * layers with 16 channels or more and 13x13 outputs or more when the
     * caller takes its F(4x4) layout and its preferred block, or else one
     * register tile per work-group, fits the device's local memory (this
     * device's 1 MiB holds 256 channels' block of 16 tiles, 512 channels'
     * only of 8), and in F(2x2) on 7x7 and 8x8 outputs with 16-lane
     * vectors, gemm on unpadded 1x1 stride-1
     * layers of up to 512 input channels with large images (and of up to
     * 64 that widen them, from 14x14 on), stem on layers
     * of at most 4 input channels with kernels over 1x1, dwrow on the
     * depthwise layers it accepts and gemm on other depthwise layers with
     * small images; kvec (depthwise for depthwise layers) for the rest. */
    static const struct {
        const char *wl;
        unsigned layouts;
        const char *want;
    } cpu_rule[] = {
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=1", (1u << MT_WEIGHTS_OIHW) | (1u << MT_WEIGHTS_OIHW16O), "kvec"},
        {"c=3,h=224,w=224,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "stem"},
        {"c=3,h=28,w=28,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "stem"},
        {"c=3,h=224,w=224,k=32,r=3,s=3,stride=2,pad=1", MT_WEIGHT_LAYOUTS_ALL, "stem"},
        {"c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3", MT_WEIGHT_LAYOUTS_ALL, "stem"},
        {"c=4,h=56,w=56,k=64,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=256,h=56,w=56,k=256,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=64,h=28,w=28,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=256,h=28,w=28,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=512,h=28,w=28,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=256,h=14,w=14,k=256,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=512,h=14,w=14,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=2048,h=28,w=28,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"}, /* not even 8 tiles fit */
        {"c=512,h=7,w=7,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"}, /* F(2x2) */
        {"c=512,h=7,w=7,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL & ~(1u << MT_WEIGHTS_WINO2), "kvec"},
        {"c=64,h=8,w=8,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=512,h=10,w=10,k=512,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=8,h=7,w=7,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=13,w=13,k=256,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "wino"},
        {"c=64,h=12,w=12,k=256,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=13,w=12,k=256,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=8,h=56,w=56,k=64,r=3,s=3,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=56,w=56,k=256,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=256,h=56,w=56,k=64,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=512,h=28,w=28,k=128,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=1024,h=28,w=28,k=256,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=14,w=14,k=384,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=96,h=14,w=14,k=576,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=32,h=27,w=27,k=128,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=384,h=14,w=14,k=64,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=160,h=14,w=14,k=960,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=13,w=13,k=384,r=1,s=1", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=64,h=56,w=56,k=128,r=1,s=1,stride=2", MT_WEIGHT_LAYOUTS_ALL, "kvec"},
        {"c=384,h=14,w=14,k=384,r=3,s=3,pad=1,groups=384", MT_WEIGHT_LAYOUTS_ALL, "dwrow"},
        {"c=32,h=112,w=112,k=32,r=3,s=3,pad=1,groups=32", MT_WEIGHT_LAYOUTS_ALL, "dwrow"},
        {"c=96,h=112,w=112,k=96,r=3,s=3,stride=2,pad=1,groups=96", MT_WEIGHT_LAYOUTS_ALL, "dwrow"},
        /* depthwise layers dwrow refuses: gemm on small outputs, else the depthwise template */
        {"c=16,h=14,w=14,k=16,r=3,s=3,stride=3,pad=1,groups=16", MT_WEIGHT_LAYOUTS_ALL, "gemm"},
        {"c=16,h=56,w=56,k=16,r=3,s=3,pad=2,dilation=2,groups=16", MT_WEIGHT_LAYOUTS_ALL, "depthwise"},
    };
    for (size_t i = 0; i < sizeof cpu_rule / sizeof cpu_rule[0]; i++) {
        mt_workload rw;
        assert_int_equal(mt_workload_parse(cpu_rule[i].wl, &rw, NULL, 0), MT_OK);
        if (select_config(NULL, &rw, &cpu, cpu_rule[i].layouts, 0, &sel, err, sizeof err) != MT_OK) fail_msg("%s: no default: %s", cpu_rule[i].wl, err);
        if (strcmp(mt_template_name(sel.t), cpu_rule[i].want) != 0) fail_msg("%s: default %s, expected %s", cpu_rule[i].wl, mt_template_name(sel.t), cpu_rule[i].want);
        assert_true(cpu_rule[i].layouts & (1u << mt_template_config_weight_layout(sel.t, &sel.space, &sel.cfg)));
        assert_fits(sel.t, &rw, &sel.space, &sel.cfg, &cpu);
        mt_select_result_free(&sel);
    }

    /* kvec's default takes a padded row of 8-16 outputs in one tile (its
     * column tests fold away), two channel vectors x 14 columns on unpadded
     * 1x1 layers whose rows are a multiple of 14, on the RGB input with
     * stride 2 all the channel vectors (up to 4) x 16 / vectors columns,
     * and two x 7 elsewhere. */
    static const kvec_default_case kvec_rows[] = {
        {"c=256,h=14,w=14,k=256,r=3,s=3,pad=1", "reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=14,"},
        {"c=256,h=28,w=28,k=256,r=3,s=3,stride=2,pad=1", "reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=14,"},
        {"c=256,h=14,w=14,k=1024,r=1,s=1", "reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,"},
        {"c=256,h=56,w=56,k=512,r=1,s=1,stride=2", "reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,"},
        {"c=2048,h=7,w=7,k=512,r=1,s=1", "reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
        {"c=128,h=28,w=28,k=128,r=3,s=3,pad=1", "reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
        {"c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3", "reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=4,"},
        {"c=3,h=224,w=224,k=32,r=3,s=3,stride=2,pad=1", "reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=8,"},
        {"c=3,h=224,w=224,k=96,r=7,s=7,stride=2", "reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=4,"},
    };
    check_kvec_defaults(kvec_rows, sizeof kvec_rows / sizeof kvec_rows[0], &cpu);

    /* wino's narrower second try: one register tile per work-group where
     * two pass the local memory. On 7x7 outputs F(2x2), all 16 tiles x one
     * channel vector in one register tile. */
    {
        mt_workload rw;
        assert_int_equal(mt_workload_parse("c=512,h=7,w=7,k=512,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        assert_string_equal(sel.rec.config, "tile=2,vec=16,reg_k=1,reg_y=4,reg_x=4,split_k=2,unroll=0,blk_y=1,blk_x=1,k_loop=1");
        assert_int_equal(mt_template_config_weight_layout(sel.t, &sel.space, &sel.cfg), MT_WEIGHTS_WINO2);
        mt_select_result_free(&sel);
        assert_int_equal(mt_workload_parse("c=512,h=28,w=28,k=512,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        if (!strstr(sel.rec.config, "blk_x=1")) fail_msg("512 channels: default %s, expected blk_x=1", sel.rec.config);
        mt_select_result_free(&sel);
        assert_int_equal(mt_workload_parse("c=256,h=28,w=28,k=256,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        if (!strstr(sel.rec.config, "blk_x=2")) fail_msg("256 channels: default %s, expected blk_x=2", sel.rec.config);
        mt_select_result_free(&sel);
        /* Rows of 224 outputs: one row of 4 tiles per register tile; at 112, 2 x 4. */
        assert_int_equal(mt_workload_parse("c=64,h=224,w=224,k=64,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        assert_string_equal(sel.rec.config, "tile=4,vec=16,reg_k=2,reg_y=1,reg_x=4,split_k=1,unroll=0,blk_y=1,blk_x=1,k_loop=1");
        mt_select_result_free(&sel);
        assert_int_equal(mt_workload_parse("c=128,h=112,w=112,k=128,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &cpu, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        assert_string_equal(sel.rec.config, "tile=4,vec=16,reg_k=2,reg_y=2,reg_x=4,split_k=1,unroll=0,blk_y=1,blk_x=1,k_loop=1");
        mt_select_result_free(&sel);
    }

    /* On a device of 8-lane vectors (AVX2's 16 registers) kvec keeps 12-14
     * accumulators: on unpadded stride-1 1x1 layers two channel vectors x 5
     * or 6 pixels of the flattened image (whichever leaves fewer past it),
     * on other 1x1 layers one channel vector x 14 columns, one
     * vector x the row on padded rows of 7 or 8 too, and x half the row on
     * padded rows of 9-16 of kernels wider than a column (kvec's column
     * order holds that kernel row's weight vectors), two vectors x 4 columns
     * on 3-wide kernels whose rows are a multiple of 4; one vector x 2 rows x 7
     * elsewhere (two vectors x 7 spill), and 2 x 7 where one row is all;
     * on the RGB input with stride 2 up to 4 vectors x 8 / vectors
     * columns, and one vector x 8 columns on 3x3 kernels. */
    mt_device_info avx2 = cpu;
    avx2.native_vector_width = 8;
    static const kvec_default_case avx2_rows[] = {
        {"c=1024,h=14,w=14,k=256,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=6,"},
        {"c=64,h=14,w=14,k=384,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=6,"},
        {"c=48,h=13,w=13,k=192,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,"},
        {"c=256,h=56,w=56,k=512,r=1,s=1,stride=2", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=14,"},
        {"c=512,h=7,w=7,k=512,r=3,s=3,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
        {"c=256,h=14,w=14,k=256,r=3,s=3,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
        {"c=256,h=28,w=28,k=256,r=3,s=3,stride=2,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
        {"c=64,h=16,w=16,k=64,r=3,s=3,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=8,"},
        {"c=64,h=14,w=14,k=64,r=3,s=1,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=16,"},
        {"c=2048,h=7,w=7,k=512,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,"},
        {"c=160,h=7,w=7,k=960,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,"},
        {"c=1024,h=14,w=14,k=2048,r=1,s=1,stride=2", "vec=8,reg_k=1,thread_y=1,reg_y=2,thread_x=1,reg_x=7,"},
        {"c=128,h=56,w=56,k=128,r=3,s=3,stride=2,pad=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=4,"},
        {"c=64,h=30,w=30,k=64,r=3,s=3,stride=2,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=2,thread_x=1,reg_x=7,"},
        {"c=64,h=30,w=30,k=64,r=3,s=5,pad=2", "vec=8,reg_k=1,thread_y=1,reg_y=2,thread_x=1,reg_x=7,"},
        {"c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3", "vec=8,reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=2,"},
        {"c=3,h=224,w=224,k=16,r=5,s=5,stride=2,pad=2", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=4,"},
        {"c=3,h=224,w=224,k=64,r=3,s=3,stride=2", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=8,"},
        {"c=3,h=224,w=224,k=32,r=3,s=3,stride=2,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=8,"},
        {"c=3,h=224,w=224,k=16,r=3,s=3,stride=2,pad=1", "vec=8,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=8,"},
        {"c=128,h=28,w=28,k=128,r=3,s=3,pad=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=4,"},
        {"c=64,h=1,w=49,k=64,r=1,s=1", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=5,"},
        {"c=64,h=1,w=49,k=64,r=3,s=1,pad=1x0", "vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,"},
    };
    check_kvec_defaults(avx2_rows, sizeof avx2_rows / sizeof avx2_rows[0], &avx2);
    /* wino's F(2x2) on 7x7 outputs only with 16-lane vectors: its 16
     * accumulators alone would fill AVX2's registers. */
    {
        mt_workload rw;
        assert_int_equal(mt_workload_parse("c=512,h=7,w=7,k=512,r=3,s=3,pad=1", &rw, NULL, 0), MT_OK);
        assert_int_equal(select_config(NULL, &rw, &avx2, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
        assert_string_equal(mt_template_name(sel.t), "kvec");
        mt_select_result_free(&sel);
    }

    /* Depthwise workloads default to the depthwise template. */
    mt_workload dw;
    assert_int_equal(mt_workload_parse("c=32,h=56,w=56,k=32,r=3,s=3,pad=1,groups=32", &dw, NULL, 0), MT_OK);
    assert_int_equal(select_config(db, &dw, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(mt_template_name(sel.t), "depthwise");
    assert_fits(sel.t, &dw, &sel.space, &sel.cfg, &dev);
    mt_select_result_free(&sel);

    /* Stored records: the fastest valid one wins; ones whose config no longer
     * parses, whose template is unknown, or which failed are passed over. */
    mt_record r;
    make_record(&r, &wl, FP1, 21, 0.1);
    snprintf(r.config, sizeof r.config, "tile_f=1x1x1x1,nonsense=3");
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    make_record(&r, &wl, FP1, 22, 0.2);
    snprintf(r.template_name, sizeof r.template_name, "retired");
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    make_record(&r, &wl, FP1, 23, 0.05);
    r.status = MT_LAUNCH;
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_record good;
    make_record(&good, &wl, FP1, 24, 0.3);
    assert_int_equal(mt_db_put_record(db, &good, NULL, NULL, 0), MT_OK);
    make_record(&r, &wl, FP1, 25, 0.4);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_string_equal(mt_template_name(sel.t), "direct");
    assert_string_equal(sel.rec.config, good.config);
    assert_true(sel.rec.median_ms == 0.3);
    char text[MT_RECORD_CONFIG_LEN];
    mt_config_format(&sel.space, &sel.cfg, text, sizeof text);
    assert_string_equal(text, good.config);
    mt_select_result_free(&sel);
    /* Another device's records are not used. */
    assert_int_equal(select_config(db, &wl, &tiny, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_DEFAULT);
    mt_select_result_free(&sel);
    /* Bad arguments. */
    assert_int_equal(select_config(db, NULL, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_INVALID_ARG);
    mt_workload badwl = wl;
    badwl.c = -1;
    assert_int_equal(select_config(db, &badwl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_RANGE);
    assert_int_equal(select_config(db, &wl, &dev, 1u << MT_WEIGHTS_OIHW16O, 0, &sel, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_select_config(NULL, &sel, err, sizeof err), MT_INVALID_ARG);
    mt_db_close(db);
}

/* Preferences (configs chosen inside a network) come before the fastest
 * record; ranks take the records in order; bad preferences are refused or
 * passed over. */
static void test_preferences(void **state) {
    (void)state;
    mt_db *db = open_db("prefs.db");
    mt_workload wl = wl_3x3();
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_record fast, slow, mid;
    make_record(&fast, &wl, FP1, 31, 0.1);
    make_record(&mid, &wl, FP1, 32, 0.2);
    make_record(&slow, &wl, FP1, 33, 0.3);
    assert_int_equal(mt_db_put_record(db, &fast, NULL, NULL, 0), MT_OK);
    assert_int_equal(mt_db_put_record(db, &mid, NULL, NULL, 0), MT_OK);
    assert_int_equal(mt_db_put_record(db, &slow, NULL, NULL, 0), MT_OK);
    mt_select_result sel;
    char err[512];
    /* Ranks 1, 2, 3, and past the end the slowest usable record. */
    const mt_record *order[] = {&fast, &mid, &slow, &slow};
    for (int rank = 1; rank <= 4; rank++) {
        assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, rank, &sel, err, sizeof err), MT_OK);
        assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
        assert_string_equal(sel.rec.config, order[rank - 1]->config);
        mt_select_result_free(&sel);
    }
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, -1, &sel, err, sizeof err), MT_INVALID_ARG);
    mt_preference p, got;
    memset(&p, 0, sizeof p);
    assert_int_equal(mt_db_get_preference(db, &wl, FP1, &got, NULL, 0), MT_NOT_FOUND);
    p.wl = wl;
    snprintf(p.device, sizeof p.device, "%s", FP1);
    snprintf(p.template_name, sizeof p.template_name, "direct");
    snprintf(p.config, sizeof p.config, "%s", slow.config);
    p.in_network_ms = 0.25;
    p.fastest_ms = 0.4;
    snprintf(p.network, sizeof p.network, "testnet");
    assert_int_equal(mt_db_put_preference(db, &p, NULL, 0), MT_OK);
    assert_int_equal(mt_db_get_preference(db, &wl, FP1, &got, NULL, 0), MT_OK);
    assert_string_equal(got.config, slow.config);
    assert_true(got.in_network_ms == 0.25 && got.fastest_ms == 0.4 && got.timestamp > 0);
    assert_string_equal(got.network, "testnet");
    /* The preference wins over the fastest record, with its record's time;
     * rank 1 still gives the fastest; another device is not affected. */
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_PREFERENCE);
    assert_string_equal(sel.rec.config, slow.config);
    assert_true(sel.rec.median_ms == 0.3);
    assert_string_equal(sel.rec.source, "in-network:testnet");
    mt_select_result_free(&sel);
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 1, &sel, err, sizeof err), MT_OK);
    assert_string_equal(sel.rec.config, fast.config);
    mt_select_result_free(&sel);
    mt_device_info other = test_device(FP2, 256, 32768);
    assert_int_equal(select_config(db, &wl, &other, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_DEFAULT);
    mt_select_result_free(&sel);
    /* A preference of a config without a record: a record made from it. */
    char lone[MT_RECORD_CONFIG_LEN];
    direct_config(&wl, 34, lone, sizeof lone, NULL);
    snprintf(p.config, sizeof p.config, "%s", lone);
    assert_int_equal(mt_db_put_preference(db, &p, NULL, 0), MT_OK);
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_PREFERENCE);
    assert_string_equal(sel.rec.config, lone);
    assert_true(sel.rec.median_ms == 0);
    assert_string_equal(sel.rec.source, "in-network:testnet");
    mt_select_result_free(&sel);
    /* One whose config no longer parses is passed over: the fastest record. */
    exec_raw(mt_db_path(db), "UPDATE preferences SET config = 'tile_f=9,nonsense=1'");
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(sel.rec.config, fast.config);
    mt_select_result_free(&sel);
    /* Removed: the fastest record again. */
    int deleted = 0;
    assert_int_equal(mt_db_delete_preference(db, &wl, FP1, &deleted, NULL, 0), MT_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(mt_db_delete_preference(db, &wl, FP1, &deleted, NULL, 0), MT_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(mt_db_get_preference(db, &wl, FP1, &got, NULL, 0), MT_NOT_FOUND);
    /* Refused: an unknown template, times that are not positive, a device that is no fingerprint. */
    mt_preference bad = p;
    snprintf(bad.template_name, sizeof bad.template_name, "retired");
    assert_int_equal(mt_db_put_preference(db, &bad, NULL, 0), MT_INVALID_ARG);
    bad = p;
    bad.in_network_ms = -1;
    assert_int_equal(mt_db_put_preference(db, &bad, NULL, 0), MT_INVALID_ARG);
    bad = p;
    snprintf(bad.device, sizeof bad.device, "not-a-print");
    assert_int_equal(mt_db_put_preference(db, &bad, NULL, 0), MT_INVALID_ARG);
    mt_db_close(db);
    /* Read-only handles read preferences and cannot write them. */
    char path[512];
    path_in(path, sizeof path, "prefs.db");
    mt_db_params rp = mt_db_default_params();
    rp.readonly = 1;
    assert_int_equal(mt_db_open(path, &rp, &db, err, sizeof err), MT_OK);
    assert_int_equal(mt_db_put_preference(db, &p, NULL, 0), MT_IO);
    assert_int_equal(mt_db_delete_preference(db, &wl, FP1, NULL, NULL, 0), MT_IO);
    mt_db_close(db);
    integrity_ok(path);
}

/* Records timed cold rank among themselves where a workload has any: a
 * warm record, faster on paper, is passed over; ranks count cold records
 * only; a workload with warm records alone still gets its fastest. */
static void test_cold_records_first(void **state) {
    (void)state;
    mt_db *db = open_db("cold.db");
    mt_workload wl = wl_3x3();
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_record warm, cold_fast, cold_slow;
    make_record(&warm, &wl, FP1, 41, 0.1);
    make_record(&cold_fast, &wl, FP1, 42, 0.2);
    make_record(&cold_slow, &wl, FP1, 43, 0.3);
    snprintf(cold_fast.source, sizeof cold_fast.source, "%s", MT_RECORD_SOURCE_COLD);
    snprintf(cold_slow.source, sizeof cold_slow.source, "%s", MT_RECORD_SOURCE_COLD);
    char err[512];
    mt_select_result sel;
    assert_int_equal(mt_db_put_record(db, &warm, NULL, err, sizeof err), MT_OK);
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_string_equal(sel.rec.config, warm.config);
    mt_select_result_free(&sel);
    assert_int_equal(mt_db_put_record(db, &cold_slow, NULL, err, sizeof err), MT_OK);
    assert_int_equal(mt_db_put_record(db, &cold_fast, NULL, err, sizeof err), MT_OK);
    const mt_record *order[] = {&cold_fast, &cold_fast, &cold_slow};
    for (int rank = 0; rank <= 2; rank++) {
        assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, rank, &sel, err, sizeof err), MT_OK);
        assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
        assert_string_equal(sel.rec.config, order[rank]->config);
        assert_string_equal(sel.rec.source, MT_RECORD_SOURCE_COLD);
        mt_select_result_free(&sel);
    }
    /* A cold record of the warm one's config replaces it; a warm one then
     * does not replace the cold one. */
    mt_record again = warm;
    again.median_ms = 0.15;
    snprintf(again.source, sizeof again.source, "%s", MT_RECORD_SOURCE_COLD);
    int inserted = -1;
    assert_int_equal(mt_db_put_record(db, &again, &inserted, err, sizeof err), MT_OK);
    assert_int_equal(inserted, 1);
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_string_equal(sel.rec.config, warm.config);
    assert_true(sel.rec.median_ms == 0.15);
    mt_select_result_free(&sel);
    assert_int_equal(mt_db_put_record(db, &warm, &inserted, err, sizeof err), MT_OK);
    assert_int_equal(inserted, 0);
    int64_t n = 0;
    mt_db_filter cf = {.source_prefix = MT_RECORD_SOURCE_COLD};
    assert_int_equal(mt_db_count_filter(db, &cf, &n, err, sizeof err), MT_OK);
    assert_int_equal(n, 3);
    mt_db_close(db);
}

/* A version 1 file (no preferences table): read-only it works without
 * preferences; opened for writing it becomes version 2, records intact. */
static void test_schema_upgrade(void **state) {
    (void)state;
    char path[512], err[512];
    path_in(path, sizeof path, "v1.db");
    mt_db *db = open_db("v1.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    make_record(&r, &wl, FP1, 41, 0.5);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_close(db);
    exec_raw(path, "DROP TABLE preferences; UPDATE meta SET value = '1' WHERE key = 'schema_version'");
    mt_db_params rp = mt_db_default_params();
    rp.readonly = 1;
    assert_int_equal(mt_db_open(path, &rp, &db, err, sizeof err), MT_OK);
    mt_preference got;
    assert_int_equal(mt_db_get_preference(db, &wl, FP1, &got, NULL, 0), MT_NOT_FOUND);
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_select_result sel;
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_string_equal(sel.rec.config, r.config);
    mt_select_result_free(&sel);
    mt_db_close(db);
    db = open_db("v1.db");
    mt_preference p;
    memset(&p, 0, sizeof p);
    p.wl = wl;
    snprintf(p.device, sizeof p.device, "%s", FP1);
    snprintf(p.template_name, sizeof p.template_name, "direct");
    snprintf(p.config, sizeof p.config, "%s", r.config);
    p.in_network_ms = p.fastest_ms = 1;
    assert_int_equal(mt_db_put_preference(db, &p, NULL, 0), MT_OK);
    int64_t n = 0;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    mt_db_close(db);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(s, 0), "2");
    sqlite3_finalize(s);
    sqlite3_close(h);
    integrity_ok(path);
}

static void test_damaged_rows(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "damaged.db");
    mt_db *db = open_db("damaged.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; i < 3; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i, 1.0 + i);
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    mt_db_close(db);
    exec_raw(path, "UPDATE records SET costs = '[1, \"x\"' WHERE id = 1; UPDATE records SET status = 'bogus' WHERE id = 2");
    db = open_db("damaged.db");
    mt_record *got = calloc(17, sizeof *got);
    char err[512] = "";
    assert_int_equal(mt_db_for_each(db, NULL, collect, got, err, sizeof err), MT_CORRUPT);
    print_message("    %s\n", err);
    assert_int_equal(got[0].id, 1);
    assert_true(got[1].median_ms == 3.0);
    mt_record best;
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 3.0);
    /* The selection goes past the damaged row to the good record and says so. */
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_select_result sel;
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_true(sel.rec.median_ms == 3.0);
    assert_non_null(strstr(sel.db_note, "damaged"));
    mt_select_result_free(&sel);
    free(got);
    mt_db_close(db);
}

/* A record's time counts only when it is a finite positive number: 0, NULL
 * or text in a valid record would beat every real measurement. */
static void test_damaged_times(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "times.db");
    mt_db *db = open_db("times.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; i < 5; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i, 0.17 + i);
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    mt_db_close(db);
    exec_raw(path, "UPDATE records SET median_ms = 0 WHERE id = 2; UPDATE records SET median_ms = NULL WHERE id = 3;"
                   " UPDATE records SET median_ms = 'abc' WHERE id = 4; UPDATE records SET median_ms = 'NaN' WHERE id = 5");
    db = open_db("times.db");
    mt_record best;
    char err[512];
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, err, sizeof err), MT_OK);
    assert_int_equal(best.id, 1);
    assert_true(best.median_ms == 0.17);
    mt_device_info dev = test_device(FP1, 256, 32768);
    mt_select_result sel;
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.rec.id, 1);
    print_message("    %s\n", sel.db_note);
    assert_non_null(strstr(sel.db_note, "median"));
    mt_select_result_free(&sel);
    int64_t damaged = -1;
    mt_record *got = calloc(17, sizeof *got);
    assert_int_equal(mt_db_for_each_counted(db, NULL, collect, got, &damaged, err, sizeof err), MT_CORRUPT);
    assert_int_equal(damaged, 4);
    assert_int_equal(got[0].id, 1); /* one record passed to the callback */
    free(got);
    /* A failed record without a time is no damage. */
    exec_raw(path, "UPDATE records SET status = 'launch_error', median_ms = NULL WHERE id = 3");
    assert_int_equal(mt_db_for_each_counted(db, NULL, NULL, NULL, &damaged, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(damaged, 0);
    got = calloc(17, sizeof *got);
    assert_int_equal(mt_db_for_each_counted(db, NULL, collect, got, &damaged, err, sizeof err), MT_CORRUPT);
    assert_int_equal(damaged, 3);
    free(got);
    mt_db_close(db);
    /* A config the template would not generate (a value outside its knob's
     * options) is never selected, however fast its record says it is. */
    exec_raw(path, "UPDATE records SET config = replace(config, 'tile_f=', 'tile_f=999x') WHERE id = 1;"
                   " UPDATE records SET status = 'ok', median_ms = 1.17 WHERE id = 3");
    db = open_db("times.db");
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, err, sizeof err), MT_OK);
    assert_int_equal(best.id, 1); /* the store returns rows as stored */
    assert_int_equal(select_config(db, &wl, &dev, MT_WEIGHT_LAYOUTS_ALL, 0, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_int_equal(sel.rec.id, 3); /* the selection re-validates the config against the space */
    mt_select_result_free(&sel);
    mt_db_close(db);
}

/* A build time or timestamp that is not finite (1e999 in the sqlite3 shell)
 * is damage: mt_db_put_record refuses such a record, so merge-db would stop
 * at it instead of passing it over (found by fuzz/fuzz_records.c). */
static void test_damaged_build_time(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "build_time.db");
    mt_db *db = open_db("build_time.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; i < 3; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i, 0.17 + i);
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    mt_db_close(db);
    exec_raw(path, "UPDATE records SET build_s = 1e999 WHERE id = 1; UPDATE records SET timestamp = -1e999 WHERE id = 2");
    db = open_db("build_time.db");
    int64_t damaged = -1;
    char err[512];
    mt_record *got = calloc(17, sizeof *got);
    assert_int_equal(mt_db_for_each_counted(db, NULL, collect, got, &damaged, err, sizeof err), MT_CORRUPT);
    assert_int_equal(damaged, 2);
    assert_int_equal(got[0].id, 1);
    assert_int_equal(got[1].id, 3);
    assert_int_equal(mt_db_put_record(db, &got[1], NULL, NULL, 0), MT_OK); /* what a walk passes on, a put takes */
    free(got);
    mt_db_close(db);
}

/* A record of a failure of the environment (a worker killed from outside)
 * gives way to a new record of its key; any other record stays. */
static void test_env_failure_replaced(void **state) {
    (void)state;
    mt_db *db = open_db("env.db");
    mt_workload wl = wl_3x3();
    mt_record env, good, crash;
    make_record(&env, &wl, FP1, 7, 0);
    env.status = MT_UNAVAILABLE;
    env.ncosts = 0;
    env.median_ms = 0;
    snprintf(env.message, sizeof env.message, MT_RECORD_ENV_FAILURE_PREFIX "the measurement worker was killed");
    assert_true(mt_record_env_failure(&env));
    int ins = -1;
    assert_int_equal(mt_db_put_record(db, &env, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1);
    make_record(&good, &wl, FP1, 7, 0.5);
    assert_int_equal(mt_db_put_record(db, &good, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1); /* replaced */
    mt_record best;
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 0.5);
    int64_t n = 0;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    /* The good record is not replaced by a later failure of either kind. */
    assert_int_equal(mt_db_put_record(db, &env, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 0);
    /* What earlier versions stored for a SIGKILLed worker counts as one too; a real crash does not. */
    make_record(&crash, &wl, FP1, 8, 0);
    crash.status = MT_LAUNCH;
    crash.ncosts = 0;
    crash.median_ms = 0;
    snprintf(crash.message, sizeof crash.message, "worker crashed (signal 9)");
    assert_true(mt_record_env_failure(&crash));
    assert_int_equal(mt_db_put_record(db, &crash, &ins, NULL, 0), MT_OK);
    make_record(&good, &wl, FP1, 8, 0.25);
    assert_int_equal(mt_db_put_record(db, &good, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 1);
    make_record(&crash, &wl, FP1, 9, 0);
    crash.status = MT_LAUNCH;
    crash.ncosts = 0;
    crash.median_ms = 0;
    snprintf(crash.message, sizeof crash.message, "worker crashed (signal 11)");
    assert_false(mt_record_env_failure(&crash));
    assert_int_equal(mt_db_put_record(db, &crash, &ins, NULL, 0), MT_OK);
    make_record(&good, &wl, FP1, 9, 0.1);
    assert_int_equal(mt_db_put_record(db, &good, &ins, NULL, 0), MT_OK);
    assert_int_equal(ins, 0); /* the crash stays the config's */
    assert_int_equal(mt_db_best(db, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 0.25);
    mt_record ok;
    make_record(&ok, &wl, FP1, 1, 1.0);
    assert_false(mt_record_env_failure(&ok));
    assert_false(mt_record_env_failure(NULL));
    mt_db_close(db);
}

static void test_readonly_reader(void **state) {
    (void)state;
    char path[512], err[512];
    path_in(path, sizeof path, "ro.db");
    mt_db *w = open_db("ro.db");
    mt_workload wl = wl_3x3();
    mt_record r;
    make_record(&r, &wl, FP1, 1, 1.0);
    assert_int_equal(mt_db_put_record(w, &r, NULL, NULL, 0), MT_OK);
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    mt_db *ro = NULL;
    assert_int_equal(mt_db_open(path, &p, &ro, err, sizeof err), MT_OK);
    int64_t n;
    assert_int_equal(mt_db_count(ro, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 1);
    /* The writer goes on while the reader is open; the reader sees it. */
    for (int i = 2; i < 12; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i, 1.0 / i);
        assert_int_equal(mt_db_put_record(w, &r, NULL, NULL, 0), MT_OK);
        assert_int_equal(mt_db_count(ro, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
        assert_int_equal(n, i);
    }
    mt_record best;
    assert_int_equal(mt_db_best(ro, &wl, FP1, &best, NULL, 0), MT_OK);
    assert_true(best.median_ms == 1.0 / 11);
    /* The reader cannot write. */
    make_record(&r, &wl, FP1, 100, 1.0);
    assert_int_equal(mt_db_put_record(ro, &r, NULL, err, sizeof err), MT_IO);
    print_message("    read-only put: %s\n", err);
    assert_int_equal(mt_db_count(w, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 11);
    mt_db_close(ro);
    mt_db_close(w);
}

/* ---- a database on read-only media (an inference server's image) ---- */

/* Copies a file byte for byte; 0 on success. */
static int copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *data = read_file(from, &n);
    if (!data) return -1;
    FILE *f = fopen(to, "wb");
    int rc = f && fwrite(data, 1, n, f) == n ? 0 : -1;
    if (f && fclose(f) != 0) rc = -1;
    free(data);
    return rc;
}

/* What a reader of path must see: the records of make_ro_source, the
 * fastest first, through a read-only handle, and no file made beside the
 * database. Returns 0, or the number of the check that failed (so that a
 * forked child can report it through its exit status). */
static int ro_checks(const char *path, char *err, size_t errlen) {
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    mt_db *db = NULL;
    if (mt_db_open(path, &p, &db, err, errlen) != MT_OK) return 1;
    int64_t n = 0;
    int rc = 0;
    if (mt_db_count(db, NULL, NULL, NULL, &n, err, errlen) != MT_OK || n != 5) rc = 2;
    mt_workload wl = wl_3x3();
    mt_record best;
    if (!rc && (mt_db_best(db, &wl, FP1, &best, err, errlen) != MT_OK || fabs(best.median_ms - 0.2) > 1e-9)) rc = 3;
    mt_record r;
    make_record(&r, &wl, FP1, 99, 1.0);
    if (!rc && mt_db_put_record(db, &r, NULL, NULL, 0) != MT_IO) rc = 4;
    mt_db_close(db);
    char side[600];
    snprintf(side, sizeof side, "%s-shm", path);
    if (!rc && access(side, F_OK) == 0) rc = 5;
    return rc;
}

/* The same in a process that cannot write dir: this one when it is not
 * root; as root (whom file modes do not stop) a child that becomes `nobody`. */
static int ro_checks_unprivileged(const char *path, char *err, size_t errlen) {
    if (geteuid() != 0) return ro_checks(path, err, errlen);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(90);
        _exit(ro_checks(path, NULL, 0));
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws)) return 91;
    if (WEXITSTATUS(ws)) snprintf(err, errlen, "check %d failed in the child running as nobody", WEXITSTATUS(ws));
    return WEXITSTATUS(ws);
}

/* A WAL-mode database of 5 records (the fastest 0.2 ms), closed: no -wal or -shm beside it. */
static void make_ro_source(const char *path) {
    mt_db *db = NULL;
    char err[512];
    assert_int_equal(mt_db_open(path, NULL, &db, err, sizeof err), MT_OK);
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; i < 5; i++) {
        make_record(&r, &wl, FP1, (uint64_t)i, 1.0 - 0.2 * i);
        assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    }
    mt_db_close(db);
    char side[600];
    snprintf(side, sizeof side, "%s-shm", path);
    assert_int_equal(access(side, F_OK), -1);
}

static void test_readonly_media(void **state) {
    (void)state;
    char src[512], dir[512], path[600], wal[620], err[512] = "";
    path_in(src, sizeof src, "ro-source.db");
    make_ro_source(src);
    /* 1. A directory of mode 0555 (the reader cannot create -shm there). */
    path_in(dir, sizeof dir, "ro-dir");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/x.db", dir);
    assert_int_equal(copy_file(src, path), 0);
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(chmod(dir, 0555), 0);
    assert_int_equal(chmod(g_dir, 0755), 0); /* as root the check runs as nobody, who must reach it */
    int rc = ro_checks_unprivileged(path, err, sizeof err);
    print_message("    mode 0555 directory: %s%s\n", rc ? "FAILED: " : "read", rc ? err : "");
    assert_int_equal(rc, 0);
    /* A -wal with transactions but no -shm: an immutable reader would miss them. */
    assert_int_equal(chmod(dir, 0755), 0);
    snprintf(wal, sizeof wal, "%s-wal", path);
    write_file(wal, "not empty", 9);
    assert_int_equal(chmod(dir, 0555), 0);
    rc = ro_checks_unprivileged(path, err, sizeof err);
    print_message("    with a -wal: check %d failed (expected 1: refused)\n", rc);
    assert_int_equal(rc, 1);
    if (geteuid() != 0) {
        mt_db_params p = mt_db_default_params();
        p.readonly = 1;
        mt_db *db = NULL;
        assert_int_equal(mt_db_open(path, &p, &db, err, sizeof err), MT_IO);
        print_message("    %s\n", err);
        assert_non_null(strstr(err, "checkpoint"));
    }
    assert_int_equal(chmod(dir, 0755), 0);
    unlink(wal);
    assert_int_equal(chmod(g_dir, 0700), 0);
    /* 2. A read-only mount, which stops root too: a tmpfs remounted read-only. */
    char mnt[512];
    path_in(mnt, sizeof mnt, "ro-mount");
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=16m") != 0) {
        print_message("    read-only mount: not checked (cannot mount a tmpfs: %s; needs root)\n", strerror(errno));
        rmdir(mnt);
        return;
    }
    snprintf(path, sizeof path, "%s/x.db", mnt);
    int copied = copy_file(src, path);
    int remounted = mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL);
    rc = copied == 0 && remounted == 0 ? ro_checks(path, err, sizeof err) : 100;
    print_message("    read-only mount: %s%s\n", rc ? "FAILED: " : "read", rc ? err : "");
    /* A writer cannot open it, and says why. */
    mt_db *w = NULL;
    char werr[512] = "";
    mt_status wst = mt_db_open(path, NULL, &w, werr, sizeof werr);
    print_message("    writer on the read-only mount: %s: %s\n", mt_status_name(wst), werr);
    mt_db_close(w);
    assert_int_equal(umount(mnt), 0);
    rmdir(mnt);
    assert_int_equal(copied, 0);
    assert_int_equal(remounted, 0);
    assert_int_equal(rc, 0);
    assert_int_equal(wst, MT_IO);
}

/* The child of the kill test: inserts records forever, reporting each index
 * on fd after its put returned (i.e. after the commit). */
static void writer_child(const char *path, int fd, int base, int count) {
    mt_db *db = NULL;
    if (mt_db_open(path, NULL, &db, NULL, 0) != MT_OK) _exit(3);
    mt_workload wl = wl_3x3();
    mt_record r;
    for (int i = 0; count < 0 || i < count; i++) {
        mt_workload w = wl;
        w.k = 1 + (base + i) % 512;
        w.c = 1 + (base + i) / 512;
        mt_record_init(&r);
        r.wl = w;
        snprintf(r.template_name, sizeof r.template_name, "direct");
        snprintf(r.config, sizeof r.config, "i=%d", base + i);
        memcpy(r.device, FP1, 17);
        r.ncosts = 1;
        r.costs_ms[0] = 1.0 + i;
        r.median_ms = 1.0 + i;
        int ins = 0;
        if (mt_db_put_record(db, &r, &ins, NULL, 0) != MT_OK || !ins) _exit(4);
        int32_t v = base + i;
        if (fd >= 0 && write(fd, &v, sizeof v) != sizeof v) _exit(5);
    }
    mt_db_close(db);
    _exit(0);
}

static void test_kill_resume(void **state) {
    (void)state;
    char path[512];
    path_in(path, sizeof path, "kill.db");
    mt_db_close(open_db("kill.db"));
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        writer_child(path, fds[1], 0, -1);
    }
    close(fds[1]);
    int32_t *seen = calloc(1 << 20, sizeof *seen);
    int nseen = 0;
    int32_t v;
    while (nseen < 300 && read(fds[0], &v, sizeof v) == sizeof v) seen[nseen++] = v;
    assert_int_equal(kill(pid, SIGKILL), 0);
    /* Whatever it reported before dying is committed too. */
    while (nseen < (1 << 20) && read(fds[0], &v, sizeof v) == sizeof v) seen[nseen++] = v;
    close(fds[0]);
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
    print_message("    writer killed after %d reported commits\n", nseen);
    assert_true(nseen >= 300);

    integrity_ok(path);
    mt_db *db = open_db("kill.db");
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_true(n >= nseen && n <= nseen + 1); /* at most one committed but not yet reported */
    mt_workload wl = wl_3x3();
    for (int i = 0; i < nseen; i++) {
        mt_workload w = wl;
        w.k = 1 + seen[i] % 512;
        w.c = 1 + seen[i] / 512;
        char cfg[32];
        snprintf(cfg, sizeof cfg, "i=%d", seen[i]);
        int found = 0;
        assert_int_equal(mt_db_has_record(db, &w, "direct", cfg, FP1, &found, NULL, 0), MT_OK);
        assert_int_equal(found, 1);
    }
    /* Resume: a new writer continues in the same file. */
    mt_record r;
    make_record(&r, &wl, FP2, 1, 1.0);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    mt_db_close(db);
    integrity_ok(path);
    free(seen);
}

/* Two processes insert N records each into one file at once: first into a
 * file that exists, then into one that neither finds (both try to create it). */
static void two_writers(const char *name, int precreate) {
    char path[512];
    path_in(path, sizeof path, name);
    if (precreate) mt_db_close(open_db(name));
    const int N = 250;
    fflush(NULL);
    pid_t a = fork();
    assert_true(a >= 0);
    if (a == 0) writer_child(path, -1, 0, N);
    pid_t b = fork();
    assert_true(b >= 0);
    if (b == 0) writer_child(path, -1, 100000, N);
    int sa = 0, sb = 0;
    assert_int_equal(waitpid(a, &sa, 0), a);
    assert_int_equal(waitpid(b, &sb, 0), b);
    assert_true(WIFEXITED(sa) && WEXITSTATUS(sa) == 0);
    assert_true(WIFEXITED(sb) && WEXITSTATUS(sb) == 0);
    integrity_ok(path);
    mt_db *db = open_db(name);
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 2 * N);
    mt_db_close(db);
}

static void test_two_writers(void **state) {
    (void)state;
    two_writers("two.db", 1);
    two_writers("two-fresh.db", 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_create),
        cmocka_unit_test(test_default_path),
        cmocka_unit_test(test_schema_version), cmocka_unit_test(test_schema_upgrade), cmocka_unit_test(test_preferences),
        cmocka_unit_test(test_cold_records_first),
        cmocka_unit_test(test_not_sqlite),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_invalid_records),
        cmocka_unit_test(test_unique),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_best),
        cmocka_unit_test(test_best_config),
        cmocka_unit_test(test_damaged_rows),
        cmocka_unit_test(test_damaged_times),
        cmocka_unit_test(test_damaged_build_time),
        cmocka_unit_test(test_env_failure_replaced),
        cmocka_unit_test(test_readonly_reader),
        cmocka_unit_test(test_readonly_media),
        cmocka_unit_test(test_kill_resume),
        cmocka_unit_test(test_two_writers),
    };
    return cmocka_run_group_tests(tests, setup_dir, scratch_remove);
}
