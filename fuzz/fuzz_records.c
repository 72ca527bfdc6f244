/* libFuzzer harness for records read back from a tuning database that
 * something other than mtgpu wrote (a user with the sqlite3 shell, a damaged
 * copy): the readers `best`, `merge-db` and a resumed `tune` go through.
 *
 * The input is rows, one a line, of tab-separated fields, stored with plain
 * SQLite into a database made by mt_db_open (":memory:", one for the whole
 * run, emptied per input). A row is a record:
 *   workload template config config_index device costs median_ms status message build_s timestamp version source
 * or, after a first field "P", a preference:
 *   workload device template config in_network_ms fastest_ms network timestamp version
 * or, after "D", a device: fingerprint backend platform name driver info first_seen.
 * Missing fields are ''. A field is stored as text (the column's affinity
 * applies, as in the shell: '2.5' becomes a number, 'abc' stays text), or
 * after a first byte \1 as a blob, \2 as NULL, \3 as a real (strtod: inf),
 * \4 as an integer. Workload and device rows a record names are made too.
 *
 * Then the readers, which must return a status and never crash:
 * mt_db_for_each_counted (each record it passes on is one mt_db_put_record
 * takes, and rows it passes over are counted), mt_db_best for the records'
 * workloads on their devices, mt_select_config (the device as stored) where
 * one of them is a valid record best would use, and merge-db's path: the
 * records best would use go into a second database, which must read back
 * with no damaged row. */
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "select.h"
#include "store-impl.h"

#define MAX_ROWS 32
#define MAX_FIELDS 13
/* Lookups per input. A selection builds kernels, and one that finds no usable
 * record searches a default config (tens of ms, whatever the records hold):
 * selections are made only where a usable record exists. */
#define MAX_LOOKUPS 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mt_db *g_db, *g_merged;

static void cleanup(void) {
    mt_db_close(g_db);
    mt_db_close(g_merged);
}

static void setup(void) {
    mt_db_params p = mt_db_default_params();
    if (mt_db_open(":memory:", &p, &g_db, NULL, 0) != MT_OK || mt_db_open(":memory:", &p, &g_merged, NULL, 0) != MT_OK) abort();
    atexit(cleanup);
}

static void empty(mt_db *db) {
    if (sqlite3_exec(db->h, "DELETE FROM preferences; DELETE FROM records; DELETE FROM workloads; DELETE FROM devices", NULL, NULL, NULL) !=
        SQLITE_OK)
        abort();
}

typedef struct field {
    const uint8_t *p;
    size_t n;
} field;

/* Binds field f to parameter i as the tampering user stored it. */
static void bind_field(sqlite3_stmt *s, int i, field f) {
    char num[64];
    size_t k = f.n > 1 && f.n - 1 < sizeof num ? f.n - 1 : 0;
    if (f.n >= 1 && k) memcpy(num, f.p + 1, k);
    num[k] = '\0';
    if (f.n >= 1 && f.p[0] == 1) sqlite3_bind_blob(s, i, f.p + 1, (int)(f.n - 1), SQLITE_TRANSIENT);
    else if (f.n >= 1 && f.p[0] == 2) sqlite3_bind_null(s, i);
    else if (f.n >= 1 && f.p[0] == 3) sqlite3_bind_double(s, i, strtod(num, NULL));
    else if (f.n >= 1 && f.p[0] == 4) sqlite3_bind_int64(s, i, strtoll(num, NULL, 10));
    else sqlite3_bind_text(s, i, (const char *)f.p, (int)f.n, SQLITE_TRANSIENT);
}

/* Runs sql with fields f[0..n) bound to ?1..?n; a constraint the row breaks just leaves it out. */
static void store(const char *sql, const field *f, int n) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(g_db->h, sql, -1, &s, NULL) != SQLITE_OK) abort();
    for (int i = 0; i < n; i++) bind_field(s, i + 1, f[i]);
    (void)sqlite3_step(s);
    sqlite3_finalize(s);
}

/* Stores one row; f has room for MAX_FIELDS + 1 fields. */
static void store_row(field *f, int nf) {
    field none = {(const uint8_t *)"", 0};
    if (nf >= 1 && f[0].n == 1 && f[0].p[0] == 'D') {
        for (int i = nf; i < 8; i++) f[i] = none;
        store("INSERT INTO devices (fingerprint, backend, platform, name, driver, info, first_seen) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
              f + 1, 7);
        return;
    }
    int pref = nf >= 1 && f[0].n == 1 && f[0].p[0] == 'P';
    if (pref) f++, nf--;
    for (int i = nf; i < MAX_FIELDS; i++) f[i] = none;
    int dev = pref ? 1 : 4;
    store("INSERT OR IGNORE INTO workloads (text) VALUES (?1)", &f[0], 1);
    store("INSERT OR IGNORE INTO devices (fingerprint, backend, platform, name, driver, info, first_seen)"
          " VALUES (?1, 'unknown', '', '', '', '{}', 0)",
          &f[dev], 1);
    if (pref)
        store("INSERT INTO preferences (workload_id, device, template, config, in_network_ms, fastest_ms, network, timestamp, version)"
              " VALUES ((SELECT id FROM workloads WHERE text = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
              f, 9);
    else
        store("INSERT INTO records (workload_id, template, config, config_index, device, costs, median_ms, status, message, build_s,"
              " timestamp, version, source) VALUES ((SELECT id FROM workloads WHERE text = ?1), ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
              " ?11, ?12, ?13)",
              f, 13);
}

/* The check merge-db makes before it copies a record (cli/cmd_db.c
 * record_damage): best would use it. */
static int usable(const mt_record *rec) {
    const mt_template *t = mt_template_find(rec->template_name);
    if (!t || !mt_template_accepts(t, &rec->wl)) return 0;
    mt_space sp;
    if (mt_template_space(t, &rec->wl, &sp) != MT_OK) return 0;
    mt_config cfg;
    mt_status st = mt_config_parse(&sp, rec->config, &cfg, NULL, 0);
    mt_space_free(&sp);
    return st == MT_OK;
}

typedef struct walk {
    int64_t decoded, merged;
    int nfirst, nusable;
    mt_record first[MAX_LOOKUPS];  /* for mt_db_best */
    mt_record usable[MAX_LOOKUPS]; /* valid measurements best would use, for the selection */
} walk;

static int visit(const mt_record *r, void *user) {
    walk *w = user;
    /* A decoded record is sound: what a put would accept. */
    if (mt_workload_validate(&r->wl, NULL, 0) != MT_OK || !r->template_name[0] || !r->config[0] || !mt__db_is_fingerprint(r->device) ||
        r->ncosts < 0 || r->ncosts > MT_RECORD_MAX_COSTS || !isfinite(r->median_ms) || r->median_ms < 0 ||
        (r->status == MT_OK && !(r->median_ms > 0)) || !memchr(r->message, '\0', sizeof r->message) ||
        !memchr(r->version, '\0', sizeof r->version) || !memchr(r->source, '\0', sizeof r->source))
        abort();
    for (int i = 0; i < r->ncosts; i++)
        if (!isfinite(r->costs_ms[i]) || r->costs_ms[i] < 0) abort();
    w->decoded++;
    if (w->nfirst < MAX_LOOKUPS) w->first[w->nfirst++] = *r;
    if (usable(r)) {
        if (r->status == MT_OK && w->nusable < MAX_LOOKUPS) w->usable[w->nusable++] = *r;
        /* merge-db copies it: the destination must take it. */
        int inserted = 0;
        char err[512];
        if (mt_db_put_record(g_merged, r, &inserted, err, sizeof err) != MT_OK) {
            fprintf(stderr, "fuzz_records: merging record %lld: %s\n", (long long)r->id, err);
            abort();
        }
        w->merged += inserted;
    }
    return 0;
}

static int count_one(const mt_record *r, void *user) {
    (void)r;
    ++*(int64_t *)user;
    return 0;
}

static void best_for(const mt_record *r) {
    mt_record best;
    mt_status st = mt_db_best(g_db, &r->wl, r->device, &best, NULL, 0);
    if (st != MT_OK && st != MT_NOT_FOUND && st != MT_CORRUPT) abort();
    if (st == MT_OK && (best.status != MT_OK || !(best.median_ms > 0))) abort();
}

static void select_for(const mt_record *r) {
    mt_device_info info;
    memset(&info, 0, sizeof info);
    /* As `mtgpu best --device FP`: the device as stored, else a bare one. */
    if (mt_db_get_device(g_db, r->device, NULL, &info, NULL, 0) != MT_OK) memset(&info, 0, sizeof info);
    memcpy(info.fingerprint, r->device, sizeof info.fingerprint);
    for (int rank = 0; rank <= 1; rank++) {
        mt_select_query q = mt_select_query_default(g_db, &r->wl, &info);
        q.rank = rank;
        mt_select_result res;
        char err[512];
        mt_status st = mt_select_config(&q, &res, err, sizeof err);
        if (st == MT_NOT_FOUND) continue;
        if (st != MT_OK) abort();
        /* What it selected is a config of its space. */
        mt_config cfg;
        if (mt_config_parse(&res.space, res.rec.config, &cfg, NULL, 0) != MT_OK) abort();
        if (res.from == MT_SELECT_FROM_RECORD && (res.rec.status != MT_OK || !(res.rec.median_ms > 0))) abort();
        mt_select_result_free(&res);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_db) setup();
    empty(g_db);
    empty(g_merged);
    /* Fields point into a copy of exactly the input's size, so that ASan flags reads past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    int rows = 0;
    for (size_t at = 0; at < size && rows < MAX_ROWS; rows++) {
        const uint8_t *nl = memchr(buf + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - buf) : size;
        field f[MAX_FIELDS + 1];
        int nf = 0;
        for (size_t i = at; nf < MAX_FIELDS + 1;) {
            const uint8_t *tab = memchr(buf + i, '\t', end - i);
            size_t e = tab ? (size_t)(tab - buf) : end;
            f[nf++] = (field){buf + i, e - i};
            if (!tab) break;
            i = e + 1;
        }
        store_row(f, nf);
        at = end + 1;
    }

    walk w;
    memset(&w, 0, sizeof w);
    int64_t damaged = -1, total = -1;
    char err[512];
    mt_status st = mt_db_for_each_counted(g_db, NULL, visit, &w, &damaged, err, sizeof err);
    if (st != (damaged ? MT_CORRUPT : MT_OK)) abort();
    if (mt_db_count_filter(g_db, NULL, &total, NULL, 0) != MT_OK || total != w.decoded + damaged) abort();
    /* What merge-db stored reads back whole. */
    int64_t back = 0, back_damaged = -1;
    if (mt_db_for_each_counted(g_merged, NULL, count_one, &back, &back_damaged, NULL, 0) != MT_OK || back_damaged != 0 || back > w.merged)
        abort();
    for (int i = 0; i < w.nfirst; i++) best_for(&w.first[i]);
    for (int i = 0; i < w.nusable; i++) select_for(&w.usable[i]);
    free(buf);
    return 0;
}
