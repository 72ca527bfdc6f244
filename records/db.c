/* The tuning-records database: see include/mtgpu/records.h.
 *
 * SQLite in WAL mode, so that readers (inference servers) never block the
 * writer (a tuner) and the other way round. Every write is one transaction,
 * begun IMMEDIATE so that two writers queue on the busy timeout instead of
 * failing a read-to-write upgrade. Values always go through bound parameters
 * of prepared statements; the only SQL text assembled at run time is the
 * choice among fixed fragments for a filter.
 *
 * Opening never writes to a file before it has been recognised as an mtgpu
 * database of a readable schema (or as a new, empty file). */
#include "mtgpu/records.h"
#include "program.h"
#include "select.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "db-impl.h"
#include "json.h"
#include "strbuf.h"
#include "device-info-json.h"
#include "fail.h"

#define MT__DB_APPLICATION "mtgpu"
#define MT__DB_DEFAULT_BUSY_MS 10000
/* Most DB records mt_best_config tries before it falls back to a default. */
#define MT__BEST_MAX_CANDIDATES 256
/* Default-config search (see mt_best_config in db.h). */
#define MT__DEFAULT_SCAN 4096
#define MT__DEFAULT_KEEP 64
#define MT__DEFAULT_SEED UINT64_C(0x6d74677075646566) /* "mtgpudef" */

/* The schema, version 1. Costs are a JSON array of milliseconds; median_ms is
 * NULL when nothing was timed; status is an mt_status_name token. */
static const char *const schema_v1[] = {
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE devices ("
    " fingerprint TEXT PRIMARY KEY,"
    " backend TEXT NOT NULL,"
    " platform TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " driver TEXT NOT NULL,"
    " info TEXT NOT NULL,"
    " first_seen REAL NOT NULL)",
    "CREATE TABLE workloads (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE)",
    "CREATE TABLE records ("
    " id INTEGER PRIMARY KEY,"
    " workload_id INTEGER NOT NULL REFERENCES workloads(id),"
    " template TEXT NOT NULL,"
    " config TEXT NOT NULL,"
    " config_index INTEGER,"
    " device TEXT NOT NULL REFERENCES devices(fingerprint),"
    " costs TEXT NOT NULL,"
    " median_ms REAL,"
    " status TEXT NOT NULL,"
    " message TEXT NOT NULL,"
    " build_s REAL NOT NULL,"
    " timestamp REAL NOT NULL,"
    " version TEXT NOT NULL,"
    " source TEXT NOT NULL,"
    " UNIQUE (workload_id, template, config, device))",
    "CREATE INDEX records_lookup ON records (workload_id, device, status, median_ms)",
    "CREATE INDEX records_device ON records (device)",
};

/* Version 2 adds the configs chosen by timing candidates inside a network
 * (mt_db_put_preference): one per workload and device. A version 1 file
 * opened for writing gets the table and becomes version 2; read-only, it
 * has no preferences. */
static const char preferences_sql[] = "CREATE TABLE IF NOT EXISTS preferences ("
                                      " workload_id INTEGER NOT NULL REFERENCES workloads(id),"
                                      " device TEXT NOT NULL REFERENCES devices(fingerprint),"
                                      " template TEXT NOT NULL,"
                                      " config TEXT NOT NULL,"
                                      " in_network_ms REAL NOT NULL,"
                                      " fastest_ms REAL NOT NULL,"
                                      " network TEXT NOT NULL,"
                                      " timestamp REAL NOT NULL,"
                                      " version TEXT NOT NULL,"
                                      " PRIMARY KEY (workload_id, device))";

enum {
    S_BEGIN,
    S_COMMIT,
    S_ROLLBACK,
    S_WL_INSERT,
    S_WL_ID,
    S_DEV_ENSURE,
    S_DEV_PUT,
    S_DEV_GET,
    S_DEV_ALL,
    S_REC_INSERT,
    S_REC_HAS,
    S_PREF_PUT,
    S_PREF_GET,
    S_PREF_DEL,
    S_COUNT
};

static const char *const stmt_sql[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    [S_WL_INSERT] = "INSERT INTO workloads (text) VALUES (?1) ON CONFLICT (text) DO NOTHING",
    [S_WL_ID] = "SELECT id FROM workloads WHERE text = ?1",
    [S_DEV_ENSURE] = "INSERT INTO devices (fingerprint, backend, platform, name, driver, info, first_seen)"
                     " VALUES (?1, 'unknown', '', '', '', '{}', ?2) ON CONFLICT (fingerprint) DO NOTHING",
    [S_DEV_PUT] = "INSERT INTO devices (fingerprint, backend, platform, name, driver, info, first_seen)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (fingerprint) DO UPDATE SET"
                  " backend = excluded.backend, platform = excluded.platform, name = excluded.name,"
                  " driver = excluded.driver, info = excluded.info WHERE devices.backend = 'unknown'",
    [S_DEV_GET] = "SELECT fingerprint, backend, platform, name, driver, info, first_seen FROM devices WHERE fingerprint = ?1",
    [S_DEV_ALL] = "SELECT fingerprint, backend, platform, name, driver, info, first_seen FROM devices ORDER BY first_seen, rowid",
    [S_REC_INSERT] = "INSERT INTO records (workload_id, template, config, config_index, device, costs, median_ms, status, message,"
                     " build_s, timestamp, version, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                     " ON CONFLICT (workload_id, template, config, device) DO NOTHING",
    [S_REC_HAS] = "SELECT 1 FROM records r JOIN workloads w ON w.id = r.workload_id"
                  " WHERE w.text = ?1 AND r.template = ?2 AND r.config = ?3 AND r.device = ?4",
    [S_PREF_PUT] = "INSERT OR REPLACE INTO preferences (workload_id, device, template, config, in_network_ms, fastest_ms, network,"
                   " timestamp, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [S_PREF_GET] = "SELECT p.template, p.config, p.in_network_ms, p.fastest_ms, p.network, p.timestamp, p.version"
                   " FROM preferences p JOIN workloads w ON w.id = p.workload_id WHERE w.text = ?1 AND p.device = ?2",
    [S_PREF_DEL] = "DELETE FROM preferences WHERE device = ?2 AND workload_id = (SELECT id FROM workloads WHERE text = ?1)",
};

struct mt_db {
    sqlite3 *h;
    char *path;
    int readonly;
    int has_preferences;         /* the preferences table exists (schema 2, or a version 1 file opened read-only: 0) */
    sqlite3_stmt *stmt[S_COUNT]; /* prepared on first use */
    char errmsg[512];
};

/* ---- small helpers ---- */

double mt__now_epoch(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (double)time(NULL);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mt__median(const double *v, int n) {
    if (n <= 0) return 0;
    double tmp[MT_RECORD_MAX_COSTS];
    if (n > MT_RECORD_MAX_COSTS) n = MT_RECORD_MAX_COSTS;
    memcpy(tmp, v, sizeof(double) * (size_t)n);
    qsort(tmp, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Copies src into dst[0..len) when it fits; 0 when it does not (dst then "" ). */
static int copy_str(char *dst, size_t len, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= len) {
        if (len) dst[0] = '\0';
        return 0;
    }
    memcpy(dst, src ? src : "", n + 1);
    return 1;
}

/* Copies src into dst[0..len), truncating. */
static void scopy(char *dst, size_t len, const char *src) {
    if (!len) return;
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int is_fingerprint(const char *fp) {
    if (!fp) return 0;
    for (int i = 0; i < 16; i++) {
        char c = fp[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return 0;
    }
    return fp[16] == '\0';
}

static mt_status status_from_token(const char *tok, int *known) {
    *known = 1;
#define MT__TOK_CMP(name, code, token, text) \
    if (strcmp(tok, token) == 0) return MT_##name;
    MT_STATUS_MAP(MT__TOK_CMP)
#undef MT__TOK_CMP
    *known = 0;
    return MT_CORRUPT;
}

/* Records the message for mt_db_errmsg; returns st. */
static mt_status db_fail(mt_db *db, mt_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static mt_status db_fail(mt_db *db, mt_status st, const char *fmt, ...) {
    if (!db) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(db->errmsg, sizeof db->errmsg, fmt, ap);
    va_end(ap);
    return st;
}

/* Maps a SQLite result code to a status. */
static mt_status map_rc(int rc) {
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE: return MT_OK;
    case SQLITE_NOMEM: return MT_NOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT: return MT_CORRUPT;
    case SQLITE_TOOBIG:
    case SQLITE_RANGE: return MT_RANGE;
    default: return MT_IO; /* BUSY, LOCKED, READONLY, IOERR, FULL, CANTOPEN, PERM, ... */
    }
}

static mt_status sql_fail(mt_db *db, int rc, const char *what) {
    const char *msg = db && db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    mt_status st = map_rc(rc);
    if (st == MT_OK) st = MT_IO;
    return db_fail(db, st, "tuning database %s: %s (while %s)", db && db->path ? db->path : "", msg ? msg : sqlite3_errstr(rc), what);
}

static sqlite3_stmt *stmt_get(mt_db *db, int which, mt_status *st) {
    if (!db->stmt[which]) {
        int rc = sqlite3_prepare_v3(db->h, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[which], NULL);
        if (rc != SQLITE_OK) {
            *st = sql_fail(db, rc, "preparing a statement");
            db->stmt[which] = NULL;
            return NULL;
        }
    }
    sqlite3_stmt *s = db->stmt[which];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Runs a statement that returns no rows (or whose rows are ignored). */
static mt_status exec_stmt(mt_db *db, sqlite3_stmt *s, const char *what) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    mt_status st = rc == SQLITE_DONE ? MT_OK : sql_fail(db, rc, what);
    sqlite3_reset(s);
    return st;
}

static mt_status exec_sql(mt_db *db, const char *sql, const char *what) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return sql_fail(db, rc, what);
    mt_status st = exec_stmt(db, s, what);
    sqlite3_finalize(s);
    return st;
}

static mt_status begin(mt_db *db) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_BEGIN, &st);
    return s ? exec_stmt(db, s, "beginning a transaction") : st;
}

static mt_status commit(mt_db *db) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_COMMIT, &st);
    return s ? exec_stmt(db, s, "committing") : st;
}

/* Rolls back if a transaction is open; keeps the first error's message. */
static void rollback(mt_db *db) {
    if (sqlite3_get_autocommit(db->h)) return;
    char keep[sizeof db->errmsg];
    memcpy(keep, db->errmsg, sizeof keep);
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_ROLLBACK, &st);
    if (s) exec_stmt(db, s, "rolling back");
    memcpy(db->errmsg, keep, sizeof keep);
}

static const char *col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

/* mkdir -p of the directory part of path. 0 on success or when there is none. */
static int make_parent_dirs(const char *path) {
    size_t n = strlen(path);
    char *tmp = malloc(n + 1);
    if (!tmp) return -1;
    memcpy(tmp, path, n + 1);
    char *slash = strrchr(tmp, '/');
    if (!slash || slash == tmp) {
        free(tmp);
        return 0;
    }
    *slash = '\0';
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) {
            free(tmp);
            return -1;
        }
        *p = '/';
    }
    int rc = (mkdir(tmp, 0755) != 0 && errno != EEXIST) ? -1 : 0;
    free(tmp);
    return rc;
}

/* ---- open / close ---- */

mt_db_params mt_db_default_params(void) {
    mt_db_params p;
    memset(&p, 0, sizeof p);
    p.readonly = 0;
    p.create = 1;
    p.busy_timeout_ms = MT__DB_DEFAULT_BUSY_MS;
    p.durable = 0;
    return p;
}

mt_status mt_db_default_path(char *buf, size_t len) {
    if (!buf || len == 0) return MT_INVALID_ARG;
    buf[0] = '\0';
    const char *env = getenv("MTGPU_DB");
    int n;
    if (env && *env) n = snprintf(buf, len, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env) n = snprintf(buf, len, "%s/mtgpu/tuning.db", env);
    else if ((env = getenv("HOME")) && *env) n = snprintf(buf, len, "%s/.cache/mtgpu/tuning.db", env);
    else return MT_UNAVAILABLE;
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return MT_RANGE;
    }
    return MT_OK;
}

/* Reads one text value from meta; *found = 0 when the key is absent. */
static mt_status meta_get(mt_db *db, const char *key, char *out, size_t outlen, int *found) {
    sqlite3_stmt *s = NULL;
    *found = 0;
    int rc = sqlite3_prepare_v2(db->h, "SELECT value FROM meta WHERE key = ?1", -1, &s, NULL);
    if (rc != SQLITE_OK) return sql_fail(db, rc, "reading the schema version");
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    mt_status st = MT_OK;
    if (rc == SQLITE_ROW) {
        *found = 1;
        snprintf(out, outlen, "%s", col_text(s, 0));
    } else if (rc != SQLITE_DONE) {
        st = sql_fail(db, rc, "reading the schema version");
    }
    sqlite3_finalize(s);
    return st;
}

/* Number of entries in sqlite_master and whether a table `meta` is among them.
 * This is the first read of the file: a non-SQLite or truncated file fails here. */
static mt_status probe(mt_db *db, int64_t *nobjects, int *has_meta) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, "SELECT count(*), coalesce(sum(type = 'table' AND name = 'meta'), 0) FROM sqlite_master", -1, &s, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) {
            *nobjects = sqlite3_column_int64(s, 0);
            *has_meta = sqlite3_column_int64(s, 1) > 0;
            rc = SQLITE_OK;
        }
    }
    mt_status st = MT_OK;
    if (rc != SQLITE_OK) {
        st = map_rc(rc) == MT_CORRUPT ? db_fail(db, MT_CORRUPT, "%s is not a usable SQLite database: %s", db->path, sqlite3_errmsg(db->h))
                                      : sql_fail(db, rc, "reading the database header");
    }
    sqlite3_finalize(s);
    return st;
}

/* Checks that an existing file is an mtgpu database this library can read. */
static mt_status check_schema(mt_db *db, int has_meta) {
    if (!has_meta) return db_fail(db, MT_CORRUPT, "%s is a SQLite database but not an mtgpu tuning database (no 'meta' table)", db->path);
    char app[64] = "", ver[64] = "";
    int found = 0;
    mt_status st = meta_get(db, "application", app, sizeof app, &found);
    if (st != MT_OK) return st;
    if (!found || strcmp(app, MT__DB_APPLICATION) != 0)
        return db_fail(db, MT_CORRUPT, "%s is not an mtgpu tuning database (application '%s')", db->path, found ? app : "(none)");
    st = meta_get(db, "schema_version", ver, sizeof ver, &found);
    if (st != MT_OK) return st;
    char *end = NULL;
    long v = found ? strtol(ver, &end, 10) : 0;
    if (!found || !end || *end || end == ver || v < 1)
        return db_fail(db, MT_CORRUPT, "%s: unknown schema version '%s' (this mtgpu reads versions 1..%d)", db->path, found ? ver : "(none)",
                       MT_DB_SCHEMA_VERSION);
    if (v > MT_DB_SCHEMA_VERSION)
        return db_fail(db, MT_CORRUPT, "%s has schema version %ld, newer than this mtgpu reads (%d); upgrade mtgpu", db->path, v,
                       MT_DB_SCHEMA_VERSION);
    return MT_OK;
}

/* A version 1 file opened for writing gets the preferences table and
 * becomes version 2, in one transaction (a concurrent opener may have done it
 * first: both statements are idempotent). Then notes whether the table is there. */
static mt_status upgrade_schema(mt_db *db) {
    mt_status st = MT_OK;
    if (!db->readonly) {
        if ((st = begin(db)) != MT_OK) return st;
        st = exec_sql(db, preferences_sql, "upgrading the schema to version 2");
        if (st == MT_OK)
            st = exec_sql(db, "UPDATE meta SET value = '2' WHERE key = 'schema_version' AND value = '1'", "upgrading the schema to version 2");
        if (st == MT_OK) st = commit(db);
        if (st != MT_OK) {
            rollback(db);
            return st;
        }
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'preferences'", -1, &s, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        db->has_preferences = sqlite3_column_int64(s, 0) > 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(s);
    return rc == SQLITE_OK ? MT_OK : sql_fail(db, rc, "reading the schema");
}

/* Creates the schema in one transaction, unless another process did first. */
static mt_status create_schema(mt_db *db) {
    mt_status st = begin(db);
    if (st != MT_OK) return st;
    int64_t nobj = 0;
    int has_meta = 0;
    st = probe(db, &nobj, &has_meta);
    if (st == MT_OK && nobj > 0) {
        rollback(db);
        return check_schema(db, has_meta);
    }
    for (size_t i = 0; st == MT_OK && i < sizeof schema_v1 / sizeof schema_v1[0]; i++) st = exec_sql(db, schema_v1[i], "creating the schema");
    if (st == MT_OK) st = exec_sql(db, preferences_sql, "creating the schema");
    if (st == MT_OK) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(db->h, "INSERT INTO meta (key, value) VALUES (?1, ?2)", -1, &s, NULL);
        if (rc != SQLITE_OK) st = sql_fail(db, rc, "creating the schema");
        char ver[16], now[32];
        snprintf(ver, sizeof ver, "%d", MT_DB_SCHEMA_VERSION);
        snprintf(now, sizeof now, "%.3f", mt__now_epoch());
        const char *kv[][2] = {{"application", MT__DB_APPLICATION}, {"schema_version", ver}, {"created", now}, {"created_by", MT_VERSION_STRING}};
        for (size_t i = 0; st == MT_OK && i < sizeof kv / sizeof kv[0]; i++) {
            sqlite3_reset(s);
            sqlite3_bind_text(s, 1, kv[i][0], -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 2, kv[i][1], -1, SQLITE_TRANSIENT);
            st = exec_stmt(db, s, "creating the schema");
        }
        sqlite3_finalize(s);
    }
    if (st == MT_OK) st = commit(db);
    if (st != MT_OK) rollback(db);
    return st;
}

void mt_db_close(mt_db *db) {
    if (!db) return;
    for (int i = 0; i < S_COUNT; i++) sqlite3_finalize(db->stmt[i]);
    if (db->h) sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

mt_status mt_db_open(const char *path, const mt_db_params *params, mt_db **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    *out = NULL;
    mt_db_params p = params ? *params : mt_db_default_params();
    char defpath[4096];
    if (!path) {
        mt_status st = mt_db_default_path(defpath, sizeof defpath);
        if (st != MT_OK)
            return mt__fail(err, errlen, st, "no tuning database path: set MTGPU_DB or HOME%s", st == MT_RANGE ? " (path too long)" : "");
        path = defpath;
    }
    if (!*path) return mt__fail(err, errlen, MT_INVALID_ARG, "db: empty path");
    if (p.busy_timeout_ms < 0) p.busy_timeout_ms = 0;
    mt_db *db = calloc(1, sizeof *db);
    if (!db) return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    db->path = strdup(path);
    if (!db->path) {
        free(db);
        return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    }
    db->readonly = p.readonly;
    mt_status st = MT_OK;
    if (!p.readonly && p.create && make_parent_dirs(path) != 0) {
        st = db_fail(db, MT_IO, "cannot create the directory of %s: %s", path, strerror(errno));
        goto fail;
    }
    int flags = p.readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (p.create ? SQLITE_OPEN_CREATE : 0));
    int rc = sqlite3_open_v2(path, &db->h, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!db->h) {
            st = db_fail(db, MT_NOMEM, "db: out of memory opening %s", path);
        } else {
            st = db_fail(db, map_rc(rc) == MT_CORRUPT ? MT_CORRUPT : MT_IO, "cannot open tuning database %s: %s", path, sqlite3_errmsg(db->h));
        }
        goto fail;
    }
    sqlite3_busy_timeout(db->h, p.busy_timeout_ms);

    int64_t nobj = 0;
    int has_meta = 0;
    st = probe(db, &nobj, &has_meta);
    if (st != MT_OK) goto fail;
    if (nobj == 0) {
        if (p.readonly) {
            st = db_fail(db, MT_CORRUPT, "%s is empty: not an mtgpu tuning database (yet)", path);
            goto fail;
        }
        st = create_schema(db);
    } else {
        st = check_schema(db, has_meta);
    }
    if (st != MT_OK) goto fail;

    /* Recognised: now the connection settings (journal_mode persists in the file). */
    if (!p.readonly) {
        sqlite3_stmt *s = NULL;
        rc = sqlite3_prepare_v2(db->h, "PRAGMA journal_mode = WAL", -1, &s, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(s);
            rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_OK) {
            st = sql_fail(db, rc, "switching to WAL mode");
            goto fail;
        }
        st = exec_sql(db, p.durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL", "setting synchronous");
        if (st != MT_OK) goto fail;
    }
    st = exec_sql(db, "PRAGMA foreign_keys = ON", "enabling foreign keys");
    if (st != MT_OK) goto fail;
    if ((st = upgrade_schema(db)) != MT_OK) goto fail;
    db->errmsg[0] = '\0';
    *out = db;
    return MT_OK;
fail:
    mt__fail(err, errlen, st, "%s", db->errmsg[0] ? db->errmsg : mt_status_str(st));
    mt_db_close(db);
    return st;
}

const char *mt_db_path(const mt_db *db) { return db ? db->path : ""; }
const char *mt_db_errmsg(const mt_db *db) { return db ? db->errmsg : "no database"; }

/* ---- devices ---- */

mt_status mt__db_put_device_row(mt_db *db, const char *fingerprint, const char *backend, const char *platform, const char *name,
                                const char *driver, const char *info_json) {
    if (!db) return MT_INVALID_ARG;
    if (db->readonly) return db_fail(db, MT_IO, "tuning database %s is open read-only", db->path);
    if (!is_fingerprint(fingerprint)) return db_fail(db, MT_INVALID_ARG, "device fingerprint '%.40s' is not 16 hex digits", fingerprint ? fingerprint : "");
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_DEV_PUT, &st);
    if (!s) return st;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, backend ? backend : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, platform ? platform : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, name ? name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, driver ? driver : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, info_json ? info_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 7, mt__now_epoch());
    return exec_stmt(db, s, "storing a device");
}

/* As mt_backend_name, kept here so that the database (and the fuzz harness
 * that links it) does not depend on the device layer. */

mt_status mt_db_put_device(mt_db *db, const mt_device_info *d) {
    if (!db || !d) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL device") : MT_INVALID_ARG;
    mt_strbuf sb = {0};
    mt__device_info_json(&sb, d);
    if (sb.failed) {
        mt__sb_free(&sb);
        return db_fail(db, MT_NOMEM, "db: out of memory");
    }
    char fp[17];
    memcpy(fp, d->fingerprint, 16);
    fp[16] = '\0';
    mt_status st = mt__db_put_device_row(db, fp, mt_backend_name(d->backend), d->platform, d->name, d->driver, sb.data);
    mt__sb_free(&sb);
    return st;
}

static int64_t json_i64(const mt_json *obj, const char *key) {
    const mt_json *v = mt__json_get(obj, key);
    if (!v || v->type != MT_JSON_NUMBER) return 0;
    if (v->is_int) return v->ival;
    return v->num >= -9e18 && v->num <= 9e18 ? (int64_t)v->num : 0;
}

static void json_str(const mt_json *obj, const char *key, char *dst, size_t len) {
    const mt_json *v = mt__json_get(obj, key);
    if (v && v->type == MT_JSON_STRING) snprintf(dst, len, "%s", v->str);
}

static int clamp_int(int64_t v) { return v < -2147483647 ? -2147483647 : v > 2147483647 ? 2147483647 : (int)v; }

/* Typical limits of the GPUs an AutoTVM target names, for default configs. */
static void autotvm_target_limits(const char *target, mt_device_info *info) {
    int cuda = strncmp(target, "cuda", 4) == 0, rocm = strncmp(target, "rocm", 4) == 0;
    info->backend = cuda ? MT_BACKEND_CUDA : MT_BACKEND_OPENCL;
    info->max_work_group_size = cuda || rocm ? 1024 : 256;
    info->max_work_item_sizes[0] = info->max_work_group_size;
    info->max_work_item_sizes[1] = info->max_work_group_size;
    info->max_work_item_sizes[2] = cuda ? 64 : info->max_work_group_size;
    info->local_mem_bytes = cuda ? 49152 : rocm ? 65536 : 32768;
}

static void fill_device(sqlite3_stmt *s, mt_db_device *dev, mt_device_info *info) {
    mt_db_device d;
    memset(&d, 0, sizeof d);
    scopy(d.fingerprint, sizeof d.fingerprint, col_text(s, 0));
    scopy(d.backend, sizeof d.backend, col_text(s, 1));
    scopy(d.platform, sizeof d.platform, col_text(s, 2));
    scopy(d.name, sizeof d.name, col_text(s, 3));
    scopy(d.driver, sizeof d.driver, col_text(s, 4));
    d.first_seen = sqlite3_column_double(s, 6);
    if (dev) *dev = d;
    if (!info) return;
    memset(info, 0, sizeof *info);
    memcpy(info->fingerprint, d.fingerprint, sizeof info->fingerprint);
    scopy(info->platform, sizeof info->platform, d.platform);
    scopy(info->name, sizeof info->name, d.name);
    scopy(info->driver, sizeof info->driver, d.driver);
    info->backend = strcmp(d.backend, "cuda") == 0 ? MT_BACKEND_CUDA : MT_BACKEND_OPENCL;
    if (strcmp(d.backend, "autotvm") == 0) autotvm_target_limits(d.name, info);
    const char *text = col_text(s, 5);
    mt_json_doc *doc = NULL;
    if (mt__json_parse(text, strlen(text), NULL, &doc, NULL, 0) != MT_OK) return;
    const mt_json *o = mt__json_root(doc);
    if (o && o->type == MT_JSON_OBJECT) {
        json_str(o, "vendor", info->vendor, sizeof info->vendor);
        if (mt__json_get(o, "index")) info->index = clamp_int(json_i64(o, "index"));
        if (mt__json_get(o, "is_cpu")) info->is_cpu = json_i64(o, "is_cpu") != 0;
        if (mt__json_get(o, "compute_units")) info->compute_units = clamp_int(json_i64(o, "compute_units"));
        if (mt__json_get(o, "clock_mhz")) info->clock_mhz = clamp_int(json_i64(o, "clock_mhz"));
        if (mt__json_get(o, "global_mem_bytes")) info->global_mem_bytes = (uint64_t)json_i64(o, "global_mem_bytes");
        if (mt__json_get(o, "local_mem_bytes")) info->local_mem_bytes = (uint64_t)json_i64(o, "local_mem_bytes");
        if (mt__json_get(o, "max_alloc_bytes")) info->max_alloc_bytes = (uint64_t)json_i64(o, "max_alloc_bytes");
        if (mt__json_get(o, "max_work_group_size")) info->max_work_group_size = json_i64(o, "max_work_group_size");
        const mt_json *wi = mt__json_get(o, "max_work_item_sizes");
        for (int i = 0; i < 3 && mt__json_at(wi, (size_t)i); i++) {
            int64_t v;
            if (mt__json_int(mt__json_at(wi, (size_t)i), 0, INT64_MAX, &v)) info->max_work_item_sizes[i] = v;
        }
        if (mt__json_get(o, "pref_vector_width")) info->pref_vector_width = clamp_int(json_i64(o, "pref_vector_width"));
        if (mt__json_get(o, "native_vector_width")) info->native_vector_width = clamp_int(json_i64(o, "native_vector_width"));
        if (mt__json_get(o, "max_registers_per_thread")) info->max_registers_per_thread = clamp_int(json_i64(o, "max_registers_per_thread"));
        const mt_json *pk = mt__json_get(o, "peak_gflops");
        if (pk && pk->type == MT_JSON_NUMBER) info->peak_gflops = pk->num;
    }
    mt__json_free(doc);
}

mt_status mt_db_get_device(mt_db *db, const char *fingerprint, mt_db_device *dev, mt_device_info *info) {
    if (!db || !fingerprint) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL fingerprint") : MT_INVALID_ARG;
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_DEV_GET, &st);
    if (!s) return st;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        fill_device(s, dev, info);
        st = MT_OK;
    } else if (rc == SQLITE_DONE) {
        st = db_fail(db, MT_NOT_FOUND, "no device with fingerprint %.20s in %s", fingerprint, db->path);
    } else {
        st = sql_fail(db, rc, "reading a device");
    }
    sqlite3_reset(s);
    return st;
}

mt_status mt_db_for_each_device(mt_db *db, int (*cb)(const mt_db_device *dev, void *user), void *user) {
    if (!db || !cb) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL callback") : MT_INVALID_ARG;
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_DEV_ALL, &st);
    if (!s) return st;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        mt_db_device d;
        fill_device(s, &d, NULL);
        if (cb(&d, user)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    st = rc == SQLITE_DONE ? MT_OK : sql_fail(db, rc, "listing devices");
    sqlite3_reset(s);
    return st;
}

/* ---- records ---- */

void mt_record_init(mt_record *rec) {
    if (!rec) return;
    memset(rec, 0, sizeof *rec);
    rec->config_index = -1;
    rec->status = MT_OK;
}

/* Checks a record before a put and fills in derived values. */
static mt_status check_record(mt_db *db, const mt_record *r, double *median) {
    if (mt_workload_validate(&r->wl, NULL, 0) != MT_OK) return db_fail(db, MT_INVALID_ARG, "record: invalid workload");
    if (!memchr(r->template_name, '\0', sizeof r->template_name) || !r->template_name[0])
        return db_fail(db, MT_INVALID_ARG, "record: empty or unterminated template name");
    if (!memchr(r->config, '\0', sizeof r->config) || !r->config[0]) return db_fail(db, MT_INVALID_ARG, "record: empty or unterminated config");
    if (!memchr(r->device, '\0', sizeof r->device) || !is_fingerprint(r->device))
        return db_fail(db, MT_INVALID_ARG, "record: device fingerprint is not 16 hex digits");
    if (!memchr(r->message, '\0', sizeof r->message) || !memchr(r->source, '\0', sizeof r->source) ||
        !memchr(r->version, '\0', sizeof r->version))
        return db_fail(db, MT_INVALID_ARG, "record: unterminated string");
    if (r->ncosts < 0 || r->ncosts > MT_RECORD_MAX_COSTS)
        return db_fail(db, MT_INVALID_ARG, "record: ncosts %d outside 0..%d", r->ncosts, MT_RECORD_MAX_COSTS);
    for (int i = 0; i < r->ncosts; i++)
        if (!isfinite(r->costs_ms[i]) || r->costs_ms[i] < 0) return db_fail(db, MT_INVALID_ARG, "record: cost %d is negative or not finite", i);
    if (!isfinite(r->median_ms) || r->median_ms < 0 || !isfinite(r->build_s) || !isfinite(r->timestamp))
        return db_fail(db, MT_INVALID_ARG, "record: median, build time or timestamp not finite (or negative median)");
    double m = r->median_ms;
    if (m <= 0 && r->ncosts > 0) m = mt__median(r->costs_ms, r->ncosts);
    if (r->status == MT_OK && !(m > 0)) return db_fail(db, MT_INVALID_ARG, "record: status ok needs a positive median or costs");
    *median = m;
    return MT_OK;
}

static void format_costs(mt_strbuf *sb, const double *c, int n) {
    mt__sb_append(sb, "[");
    for (int i = 0; i < n; i++) mt__sb_printf(sb, "%s%.17g", i ? "," : "", c[i]);
    mt__sb_append(sb, "]");
}

/* Inside a transaction: the workload row (made if new) and its id, and a
 * device row (backend 'unknown' until mt_db_put_device fills it in), so that
 * a row may refer to both. */
static mt_status ensure_keys(mt_db *db, const char *wltext, const char *device_fp, double now, int64_t *wl_id) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = NULL;
    if ((s = stmt_get(db, S_WL_INSERT, &st))) {
        sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
        st = exec_stmt(db, s, "storing a workload");
    }
    if (st == MT_OK && (s = stmt_get(db, S_WL_ID, &st))) {
        sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) *wl_id = sqlite3_column_int64(s, 0);
        else st = rc == SQLITE_DONE ? db_fail(db, MT_CORRUPT, "workload vanished while storing a row") : sql_fail(db, rc, "reading a workload");
        sqlite3_reset(s);
    }
    if (st == MT_OK && (s = stmt_get(db, S_DEV_ENSURE, &st))) {
        sqlite3_bind_text(s, 1, device_fp, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 2, now);
        st = exec_stmt(db, s, "storing a device");
    }
    return st;
}

mt_status mt_db_put_record(mt_db *db, const mt_record *rec, int *inserted) {
    if (inserted) *inserted = 0;
    if (!db || !rec) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL record") : MT_INVALID_ARG;
    if (db->readonly) return db_fail(db, MT_IO, "tuning database %s is open read-only", db->path);
    double median = 0;
    mt_status st = check_record(db, rec, &median);
    if (st != MT_OK) return st;
    char wltext[256];
    mt_workload_format(&rec->wl, wltext, sizeof wltext);
    mt_strbuf costs = {0};
    format_costs(&costs, rec->costs_ms, rec->ncosts);
    if (costs.failed) {
        mt__sb_free(&costs);
        return db_fail(db, MT_NOMEM, "db: out of memory");
    }
    double now = mt__now_epoch();

    st = begin(db);
    sqlite3_stmt *s = NULL;
    int64_t wl_id = -1;
    if (st == MT_OK) st = ensure_keys(db, wltext, rec->device, now, &wl_id);
    if (st == MT_OK && (s = stmt_get(db, S_REC_INSERT, &st))) {
        sqlite3_bind_int64(s, 1, wl_id);
        sqlite3_bind_text(s, 2, rec->template_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, rec->config, -1, SQLITE_STATIC);
        if (rec->config_index >= 0) sqlite3_bind_int64(s, 4, rec->config_index);
        else sqlite3_bind_null(s, 4);
        sqlite3_bind_text(s, 5, rec->device, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 6, costs.data, -1, SQLITE_STATIC);
        if (median > 0) sqlite3_bind_double(s, 7, median);
        else sqlite3_bind_null(s, 7);
        sqlite3_bind_text(s, 8, mt_status_name(rec->status), -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 9, rec->message, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 10, rec->build_s);
        sqlite3_bind_double(s, 11, rec->timestamp > 0 ? rec->timestamp : now);
        sqlite3_bind_text(s, 12, rec->version[0] ? rec->version : MT_VERSION_STRING, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 13, rec->source[0] ? rec->source : "measured", -1, SQLITE_STATIC);
        st = exec_stmt(db, s, "storing a record");
        if (st == MT_OK && inserted) *inserted = sqlite3_changes(db->h) > 0;
    }
    if (st == MT_OK) st = commit(db);
    if (st != MT_OK) {
        rollback(db);
        if (inserted) *inserted = 0;
    }
    mt__sb_free(&costs);
    return st;
}

mt_status mt_db_has_record(mt_db *db, const mt_workload *wl, const char *template_name, const char *config_text, const char *device_fp,
                           int *found) {
    if (found) *found = 0;
    if (!db || !wl || !template_name || !config_text || !device_fp || !found)
        return db ? db_fail(db, MT_INVALID_ARG, "db: NULL argument") : MT_INVALID_ARG;
    char wltext[256];
    mt_workload_format(wl, wltext, sizeof wltext);
    mt_status st = MT_OK;
    sqlite3_stmt *s = stmt_get(db, S_REC_HAS, &st);
    if (!s) return st;
    sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, template_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, config_text, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, device_fp, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *found = 1;
    else if (rc != SQLITE_DONE) st = sql_fail(db, rc, "looking up a record");
    sqlite3_reset(s);
    return st;
}

/* ---- preferences ---- */

mt_status mt_db_put_preference(mt_db *db, const mt_preference *p) {
    if (!db || !p) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL preference") : MT_INVALID_ARG;
    if (db->readonly) return db_fail(db, MT_IO, "tuning database %s is open read-only", db->path);
    if (!db->has_preferences) return db_fail(db, MT_UNSUPPORTED, "tuning database %s has no preferences table", db->path);
    char why[256];
    if (mt_workload_validate(&p->wl, why, sizeof why) != MT_OK) return db_fail(db, MT_INVALID_ARG, "preference: %s", why);
    if (!is_fingerprint(p->device)) return db_fail(db, MT_INVALID_ARG, "preference: device '%.20s' is not a fingerprint", p->device);
    if (!memchr(p->template_name, '\0', sizeof p->template_name) || !mt_template_find(p->template_name) ||
        !memchr(p->config, '\0', sizeof p->config) || !memchr(p->network, '\0', sizeof p->network))
        return db_fail(db, MT_INVALID_ARG, "preference: unknown template or unterminated text");
    if (!(p->in_network_ms > 0) || !(p->fastest_ms > 0))
        return db_fail(db, MT_INVALID_ARG, "preference: times must be positive (%g, %g ms)", p->in_network_ms, p->fastest_ms);
    char wltext[256];
    mt_workload_format(&p->wl, wltext, sizeof wltext);
    double now = mt__now_epoch();
    int64_t wl_id = -1;
    sqlite3_stmt *s = NULL;
    mt_status st = begin(db);
    if (st == MT_OK) st = ensure_keys(db, wltext, p->device, now, &wl_id);
    if (st == MT_OK && (s = stmt_get(db, S_PREF_PUT, &st))) {
        sqlite3_bind_int64(s, 1, wl_id);
        sqlite3_bind_text(s, 2, p->device, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, p->template_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, p->config, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 5, p->in_network_ms);
        sqlite3_bind_double(s, 6, p->fastest_ms);
        sqlite3_bind_text(s, 7, p->network, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 8, p->timestamp > 0 ? p->timestamp : now);
        sqlite3_bind_text(s, 9, MT_VERSION_STRING, -1, SQLITE_STATIC);
        st = exec_stmt(db, s, "storing a preference");
    }
    if (st == MT_OK) st = commit(db);
    if (st != MT_OK) rollback(db);
    return st;
}

/* Statement `which` with ?1 = wl's text (kept in wltext, which must outlive
 * the step) and ?2 = the device fingerprint. */
static sqlite3_stmt *pref_stmt(mt_db *db, int which, const mt_workload *wl, const char *device_fp, char wltext[256], mt_status *st) {
    mt_workload_format(wl, wltext, 256);
    sqlite3_stmt *s = stmt_get(db, which, st);
    if (!s) return NULL;
    sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, device_fp, -1, SQLITE_STATIC);
    return s;
}

mt_status mt_db_delete_preference(mt_db *db, const mt_workload *wl, const char *device_fp, int *deleted) {
    if (deleted) *deleted = 0;
    if (!db || !wl || !device_fp) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL argument") : MT_INVALID_ARG;
    if (db->readonly) return db_fail(db, MT_IO, "tuning database %s is open read-only", db->path);
    if (!db->has_preferences) return MT_OK;
    char wltext[256];
    mt_status st = MT_OK;
    sqlite3_stmt *s = pref_stmt(db, S_PREF_DEL, wl, device_fp, wltext, &st);
    if (!s) return st;
    st = exec_stmt(db, s, "removing a preference");
    if (st == MT_OK && deleted) *deleted = sqlite3_changes(db->h) > 0;
    return st;
}

mt_status mt_db_get_preference(mt_db *db, const mt_workload *wl, const char *device_fp, mt_preference *out) {
    if (!db || !wl || !device_fp || !out) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL argument") : MT_INVALID_ARG;
    if (!db->has_preferences) return MT_NOT_FOUND;
    char wltext[256];
    mt_status st = MT_OK;
    sqlite3_stmt *s = pref_stmt(db, S_PREF_GET, wl, device_fp, wltext, &st);
    if (!s) return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        memset(out, 0, sizeof *out);
        out->wl = *wl;
        snprintf(out->device, sizeof out->device, "%s", device_fp);
        if (!copy_str(out->template_name, sizeof out->template_name, col_text(s, 0)) ||
            !copy_str(out->config, sizeof out->config, col_text(s, 1)))
            st = db_fail(db, MT_CORRUPT, "a preference of %s has an overlong template or config", wltext);
        out->in_network_ms = sqlite3_column_double(s, 2);
        out->fastest_ms = sqlite3_column_double(s, 3);
        scopy(out->network, sizeof out->network, col_text(s, 4));
        out->timestamp = sqlite3_column_double(s, 5);
        scopy(out->version, sizeof out->version, col_text(s, 6));
    } else {
        st = rc == SQLITE_DONE ? MT_NOT_FOUND : sql_fail(db, rc, "reading a preference");
    }
    sqlite3_reset(s);
    return st;
}

/* Prepares the query for a filter: fixed fragments, values bound by name. */
static mt_status prepare_filter(mt_db *db, const mt_db_filter *f, int count_only, sqlite3_stmt **out, char wltext[256]) {
    mt_strbuf sql = {0};
    mt__sb_append(&sql, count_only ? "SELECT count(*)"
                                   : "SELECT r.id, w.text, r.template, r.config, r.config_index, r.device, r.costs, r.median_ms,"
                                     " r.status, r.message, r.build_s, r.timestamp, r.version, r.source");
    mt__sb_append(&sql, " FROM records r JOIN workloads w ON w.id = r.workload_id WHERE 1");
    if (f && f->wl) mt__sb_append(&sql, " AND w.text = :wl");
    if (f && f->device) mt__sb_append(&sql, " AND r.device = :dev");
    if (f && f->template_name) mt__sb_append(&sql, " AND r.template = :tmpl");
    if (f && f->source_prefix) mt__sb_append(&sql, " AND substr(r.source, 1, length(:src)) = :src");
    if (f && f->only_ok) mt__sb_append(&sql, " AND r.status = 'ok'");
    if (!count_only) {
        if (f && f->order_by_median) mt__sb_append(&sql, " ORDER BY r.median_ms IS NULL, r.median_ms, r.id");
        else mt__sb_append(&sql, " ORDER BY r.id");
        if (f && f->limit > 0) mt__sb_append(&sql, " LIMIT :lim");
    }
    if (sql.failed) {
        mt__sb_free(&sql);
        return db_fail(db, MT_NOMEM, "db: out of memory");
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, sql.data, -1, &s, NULL);
    mt__sb_free(&sql);
    if (rc != SQLITE_OK) return sql_fail(db, rc, "preparing a query");
    if (f && f->wl) {
        mt_workload_format(f->wl, wltext, 256);
        sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":wl"), wltext, -1, SQLITE_STATIC);
    }
    if (f && f->device) sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":dev"), f->device, -1, SQLITE_STATIC);
    if (f && f->template_name) sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":tmpl"), f->template_name, -1, SQLITE_STATIC);
    if (f && f->source_prefix) sqlite3_bind_text(s, sqlite3_bind_parameter_index(s, ":src"), f->source_prefix, -1, SQLITE_STATIC);
    if (f && f->limit > 0 && !count_only) sqlite3_bind_int64(s, sqlite3_bind_parameter_index(s, ":lim"), f->limit);
    *out = s;
    return MT_OK;
}

mt_status mt_db_count_filter(mt_db *db, const mt_db_filter *f, int64_t *n) {
    if (n) *n = 0;
    if (!db || !n) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL argument") : MT_INVALID_ARG;
    char wltext[256];
    sqlite3_stmt *s = NULL;
    mt_status st = prepare_filter(db, f, 1, &s, wltext);
    if (st != MT_OK) return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(s, 0);
    else st = sql_fail(db, rc, "counting records");
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db_count(mt_db *db, const mt_workload *wl, const char *device_fp, const char *template_name, int64_t *n) {
    mt_db_filter f;
    memset(&f, 0, sizeof f);
    f.wl = wl;
    f.device = device_fp;
    f.template_name = template_name;
    return mt_db_count_filter(db, &f, n);
}

/* Parses a stored cost list; 0 when it is not a JSON array of at most
 * MT_RECORD_MAX_COSTS non-negative finite numbers. */
static int parse_costs(const char *text, double *out, int *n) {
    mt_json_limits lim = mt__json_default_limits();
    lim.max_depth = 2;
    lim.max_nodes = MT_RECORD_MAX_COSTS + 1;
    lim.max_bytes = 4096;
    mt_json_doc *doc = NULL;
    if (mt__json_parse(text, strlen(text), &lim, &doc, NULL, 0) != MT_OK) return 0;
    const mt_json *a = mt__json_root(doc);
    int ok = a && a->type == MT_JSON_ARRAY && a->count <= MT_RECORD_MAX_COSTS;
    int k = 0;
    for (const mt_json *c = ok ? a->child : NULL; c; c = c->next) {
        if (c->type != MT_JSON_NUMBER || c->num < 0) {
            ok = 0;
            break;
        }
        out[k++] = c->num;
    }
    *n = k;
    mt__json_free(doc);
    return ok;
}

/* Decodes the current row of a filter query; 0 with *why set when the row is damaged. */
static int decode_row(sqlite3_stmt *s, mt_record *r, const char **why) {
    mt_record_init(r);
    r->id = sqlite3_column_int64(s, 0);
    if (mt_workload_parse(col_text(s, 1), &r->wl, NULL, 0) != MT_OK) return *why = "workload text", 0;
    if (!copy_str(r->template_name, sizeof r->template_name, col_text(s, 2)) || !r->template_name[0]) return *why = "template", 0;
    if (!copy_str(r->config, sizeof r->config, col_text(s, 3)) || !r->config[0]) return *why = "config", 0;
    r->config_index = sqlite3_column_type(s, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 4);
    if (!copy_str(r->device, sizeof r->device, col_text(s, 5)) || !is_fingerprint(r->device)) return *why = "device", 0;
    if (!parse_costs(col_text(s, 6), r->costs_ms, &r->ncosts)) return *why = "costs", 0;
    r->median_ms = sqlite3_column_type(s, 7) == SQLITE_NULL ? 0 : sqlite3_column_double(s, 7);
    if (!isfinite(r->median_ms) || r->median_ms < 0) return *why = "median", 0;
    int known;
    r->status = status_from_token(col_text(s, 8), &known);
    if (!known) return *why = "status", 0;
    snprintf(r->message, sizeof r->message, "%s", col_text(s, 9));
    r->build_s = sqlite3_column_double(s, 10);
    r->timestamp = sqlite3_column_double(s, 11);
    snprintf(r->version, sizeof r->version, "%s", col_text(s, 12));
    snprintf(r->source, sizeof r->source, "%s", col_text(s, 13));
    return 1;
}

mt_status mt_db_for_each(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user) {
    if (!db || !cb) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL callback") : MT_INVALID_ARG;
    char wltext[256];
    sqlite3_stmt *s = NULL;
    mt_status st = prepare_filter(db, filter, 0, &s, wltext);
    if (st != MT_OK) return st;
    mt_record *r = malloc(sizeof *r);
    if (!r) {
        sqlite3_finalize(s);
        return db_fail(db, MT_NOMEM, "db: out of memory");
    }
    int64_t bad_id = -1;
    const char *bad_why = NULL;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *why = NULL;
        if (!decode_row(s, r, &why)) {
            if (bad_id < 0) bad_id = sqlite3_column_int64(s, 0), bad_why = why;
            continue;
        }
        if (cb(r, user)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) st = sql_fail(db, rc, "reading records");
    else if (bad_id >= 0) st = db_fail(db, MT_CORRUPT, "%s: record %lld has a damaged %s and was skipped", db->path, (long long)bad_id, bad_why);
    sqlite3_finalize(s);
    free(r);
    return st;
}

static int take_first(const mt_record *rec, void *user) {
    *(mt_record *)user = *rec;
    return 1;
}

mt_status mt_db_best(mt_db *db, const mt_workload *wl, const char *device_fp, mt_record *out) {
    if (!db || !wl || !device_fp || !out) return db ? db_fail(db, MT_INVALID_ARG, "db: NULL argument") : MT_INVALID_ARG;
    mt_db_filter f;
    memset(&f, 0, sizeof f);
    f.wl = wl;
    f.device = device_fp;
    f.only_ok = 1;
    f.order_by_median = 1;
    mt_record *tmp = malloc(sizeof *tmp);
    if (!tmp) return db_fail(db, MT_NOMEM, "db: out of memory");
    tmp->id = -1;
    mt_status st = mt_db_for_each(db, &f, take_first, tmp);
    if (tmp->id >= 0 && (st == MT_OK || st == MT_CORRUPT)) {
        *out = *tmp;
        st = MT_OK;
    } else if (st == MT_OK) {
        char wltext[256];
        mt_workload_format(wl, wltext, sizeof wltext);
        st = db_fail(db, MT_NOT_FOUND, "no valid record for %s on device %.16s", wltext, device_fp);
    }
    free(tmp);
    return st;
}

/* ---- best config ---- */


typedef struct best_ctx {
    const mt_workload *wl;
    unsigned layouts; /* MT_WEIGHT_LAYOUTS_ALL, or the layouts the caller can give */
    const mt_template *t;
    mt_space space;
    mt_config cfg;
    mt_record rec;
    int found;
    int want;       /* take the want-th usable record (1: the fastest) */
    int seen;       /* usable records so far */
    const char *match_template, *match_config; /* or only the record of this template and config */
} best_ctx;

/* t exists, accepts wl, and reads its weights in a layout the caller gives. */
static int template_usable(const mt_template *t, const mt_workload *wl, unsigned layouts) {
    return t && mt_template_accepts(t, wl) && (layouts & (1u << mt_template_weight_layout(t)));
}

/* Keeps rec when its template is usable and its config still builds, and
 * stops the walk at the want-th such record (an earlier one kept is
 * replaced: with fewer usable records than want, the last one stays). */
static int try_record(const mt_record *rec, void *user) {
    best_ctx *c = user;
    if (c->match_template && (strcmp(rec->template_name, c->match_template) != 0 || strcmp(rec->config, c->match_config) != 0)) return 0;
    const mt_template *t = mt_template_find(rec->template_name);
    if (!template_usable(t, c->wl, c->layouts)) return 0;
    mt_space sp;
    if (mt_template_space(t, c->wl, &sp) != MT_OK) return 0;
    mt_config cfg;
    mt_kernel *k = NULL;
    if (mt_config_parse(&sp, rec->config, &cfg, NULL, 0) == MT_OK && mt_template_build(t, c->wl, &sp, &cfg, &k, NULL, 0) == MT_OK) {
        mt_kernel_free(k);
        if (c->found) mt_space_free(&c->space);
        c->t = t;
        c->space = sp;
        c->cfg = cfg;
        c->rec = *rec;
        c->found = 1;
        return ++c->seen >= c->want;
    }
    mt_space_free(&sp);
    return 0;
}

/* The in-network preference of wl on device fp, when there is one, its
 * template is usable and its config builds. c->rec is then the record of that
 * config (median_ms its isolated time) or, where the database holds none,
 * a record made from the preference; either way source says "in-network". */
static int try_preference(mt_db *db, best_ctx *c, const char *fp) {
    mt_preference *pref = malloc(sizeof *pref);
    if (!pref) return 0;
    int ok = 0;
    if (mt_db_get_preference(db, c->wl, fp, pref) == MT_OK) {
        mt_db_filter f;
        memset(&f, 0, sizeof f);
        f.wl = c->wl;
        f.device = fp;
        f.only_ok = 1;
        c->want = 1;
        c->match_template = pref->template_name;
        c->match_config = pref->config;
        /* A damaged row stops the walk: then the record made below serves. */
        (void)mt_db_for_each(db, &f, try_record, c);
        if (!c->found) {
            mt_record made;
            mt_record_init(&made);
            made.wl = *c->wl;
            snprintf(made.template_name, sizeof made.template_name, "%s", pref->template_name);
            snprintf(made.config, sizeof made.config, "%s", pref->config);
            memcpy(made.device, fp, sizeof made.device);
            snprintf(made.version, sizeof made.version, "%s", pref->version);
            try_record(&made, c);
        }
        if (c->found) {
            snprintf(c->rec.source, sizeof c->rec.source, "in-network:%s", pref->network);
            ok = 1;
        }
        c->match_template = c->match_config = NULL;
        c->seen = 0;
    }
    free(pref);
    return ok;
}

/* |floor(log2(x)) - target|, in a form that needs no libm. */
static int64_t log2_distance(int64_t x, int target) {
    int l = 0;
    while (l < 62 && ((int64_t)1 << (l + 1)) <= x) l++;
    return l > target ? l - target : target - l;
}

/* Knob values that make fast kernels on CPUs (PoCL), from the best configs
 * directed searches found there (bench/common/known_configs.txt): one work-item per
 * group, a register tile of about 12 AVX2 registers, 8-wide vectors, no
 * local-memory staging. A split knob gives a value per part (0: any). The
 * generic rule below suits GPUs and picks 128-work-item groups, which on
 * PoCL run 100x slower than these. */
typedef struct cpu_pref {
    const char *tmpl, *knob;
    int part[MT_MAX_SPLIT_PARTS];
} cpu_pref;

static const cpu_pref cpu_prefs[] = {
    {"gemm", "thread_k", {1}}, {"gemm", "reg_k", {4}}, {"gemm", "thread_y", {1}}, {"gemm", "reg_y", {1}},
    {"gemm", "thread_x", {1}}, {"gemm", "reg_x", {24}}, {"gemm", "tile_red", {0, 1}}, {"gemm", "vec", {8}},
    {"gemm", "stage_local", {0}}, {"gemm", "auto_unroll_max_step", {512}}, {"gemm", "unroll_explicit", {1}},
    {"direct", "tile_f", {0, 1, 1, 8}}, {"direct", "tile_y", {0, 1, 0, 1}}, {"direct", "tile_x", {0, 1, 1, 8}},
    {"direct", "tile_rc", {0, 1}}, {"direct", "auto_unroll_max_step", {512}}, {"direct", "unroll_explicit", {0}},
    {"direct", "vec", {8}}, {"direct", "stage_local", {0}},
    {"depthwise", "tile_f", {0, 1, 1, 1}}, {"depthwise", "tile_y", {0, 1, 1, 2}}, {"depthwise", "tile_x", {0, 1, 1, 8}},
    {"depthwise", "auto_unroll_max_step", {512}}, {"depthwise", "unroll_explicit", {1}}, {"depthwise", "vec", {8}},
    {"depthwise", "stage_local", {0}},
    /* kvec: two channel vectors x 7 pixels of a row (14 accumulators; vec is
     * the device's native float width, see cpu_preferred_config), the s taps
     * unrolled and replicated (with pragmas PoCL kept the tile in memory:
     * 2.2x slower on the 14x14 3x3 of ResNet-50). */
    {"kvec", "thread_k", {1}}, {"kvec", "vec", {16}}, {"kvec", "reg_k", {2}}, {"kvec", "thread_y", {1}}, {"kvec", "reg_y", {1}},
    {"kvec", "thread_x", {1}}, {"kvec", "reg_x", {7}}, {"kvec", "unroll_rs", {1}}, {"kvec", "unroll_explicit", {1}},
};

/* The config of sp closest to the CPU preferences of template t: per knob,
 * the option with the smallest sum of |log2(value / preferred)| over the
 * parts that have a preference (ties: the earlier option); knobs without a
 * preference take option 0. Returns 0 when t has no preferences. */
static int cpu_preferred_config(const mt_template *t, const mt_device_info *dev, const mt_space *sp, mt_config *cfg) {
    int any = 0;
    memset(cfg, 0, sizeof *cfg);
    cfg->nknobs = sp->nknobs;
    for (int k = 0; k < sp->nknobs; k++) {
        const mt_knob *kn = &sp->knobs[k];
        const cpu_pref *pref = NULL;
        for (size_t i = 0; i < sizeof cpu_prefs / sizeof cpu_prefs[0]; i++)
            if (strcmp(cpu_prefs[i].tmpl, mt_template_name(t)) == 0 && strcmp(cpu_prefs[i].knob, kn->name) == 0) pref = &cpu_prefs[i];
        if (!pref) continue;
        any = 1;
        cpu_pref own = *pref;
        /* Channel vectors as wide as the device's registers (AVX2 8, AVX-512 16). */
        if (!strcmp(own.tmpl, "kvec") && !strcmp(own.knob, "vec") && dev->native_vector_width >= 4) own.part[0] = dev->native_vector_width;
        pref = &own;
        int64_t best = -1;
        for (int o = 0; o < kn->noptions; o++) {
            int64_t d = 0;
            for (int j = 0; j < kn->nparts && j < MT_MAX_SPLIT_PARTS; j++) {
                int want = pref->part[j], v = kn->values[o * kn->nparts + j];
                if (want <= 0) continue;
                /* values 0 and 1 (off, none) both count as 2^0 */
                d += log2_distance(v > 0 ? v : 1, (int)log2_distance(want, 0));
                if (v != want) d++; /* the exact value beats a neighbour of the same log2 */
            }
            if (best < 0 || d < best) {
                best = d;
                cfg->choice[k] = o;
            }
        }
    }
    return any;
}

mt_status mt_default_config(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, mt_config *cfg,
                            char *err, size_t errlen) {
    if (!t || !wl || !dev || !sp || !cfg) return mt__fail(err, errlen, MT_INVALID_ARG, "default config: NULL argument");
    mt_device_limits lim = mt_device_info_limits(dev);
    if (dev->is_cpu && cpu_preferred_config(t, dev, sp, cfg)) {
        mt_kernel *k = NULL;
        mt_kernel_resources res;
        mt_status st = mt_template_build(t, wl, sp, cfg, &k, NULL, 0);
        if (st == MT_OK) st = mt_kernel_analyze(k, &res, NULL, 0);
        if (st == MT_OK) st = mt_kernel_check_limits(&res, &lim, NULL, 0);
        mt_kernel_free(k);
        if (st == MT_OK) return MT_OK;
    }
    /* GPUs (and CPU preferences the workload cannot take): ~128 work-items. */
    int wg_target = dev->is_cpu ? 0 : 7;
    uint64_t size = mt_space_size(sp);
    int enumerate = size <= MT__DEFAULT_SCAN;
    uint64_t rng = MT__DEFAULT_SEED;
    int kept = 0, have = 0;
    int64_t best_d = 0, best_p = 0;
    mt_config best;
    memset(&best, 0, sizeof best);
    char why[256] = "";
    for (uint64_t i = 0; i < (enumerate ? size : MT__DEFAULT_SCAN) && kept < MT__DEFAULT_KEEP; i++) {
        mt_config c;
        if (enumerate) {
            if (mt_space_config_from_index(sp, i, &c) != MT_OK) break;
        } else {
            mt_space_random(sp, &rng, &c);
        }
        mt_kernel *k = NULL;
        if (mt_template_build(t, wl, sp, &c, &k, why, sizeof why) != MT_OK) continue;
        mt_kernel_resources res;
        mt_status st = mt_kernel_analyze(k, &res, why, sizeof why);
        if (st == MT_OK) st = mt_kernel_check_limits(&res, &lim, why, sizeof why);
        mt_kernel_free(k);
        if (st != MT_OK) continue;
        kept++;
        int64_t d = log2_distance(res.threads_per_block, wg_target);
        int64_t p = res.private_floats > 64 ? res.private_floats - 64 : 0;
        if (!have || d < best_d || (d == best_d && p < best_p)) {
            best = c;
            best_d = d;
            best_p = p;
            have = 1;
        }
    }
    if (!have)
        return mt__fail(err, errlen, MT_NOT_FOUND, "template '%s': no config fits the device's limits (last reason: %s)", mt_template_name(t),
                        why[0] ? why : "none tried");
    *cfg = best;
    return MT_OK;
}

/* The default template and config (see mt_best_config in db.h). On a CPU
 * whose caller takes packed weights, kvec: ResNet-50 with every convolution
 * at its default config took 115.5 ms with gemm's defaults and 48.8 ms with
 * kvec's (the `default` row of bench/e2e/results/e2e.md, before and after this
 * choice; 45.2 ms since kvec stores vectors).
 * Elsewhere gemm, whose weights are plain OIHW. */
static mt_status default_config(const mt_workload *wl, const mt_device_info *dev, unsigned layouts, const mt_template **tout, mt_space *sp,
                                mt_config *cfg, char *err, size_t errlen) {
    const mt_template *t = NULL;
    if (mt_workload_is_depthwise(wl)) t = mt_template_find("depthwise");
    if (!template_usable(t, wl, layouts) && dev->is_cpu) t = mt_template_find("kvec");
    if (!template_usable(t, wl, layouts)) t = mt_template_find("gemm");
    if (!template_usable(t, wl, layouts)) t = mt_template_find("direct");
    if (!template_usable(t, wl, layouts)) {
        t = NULL;
        for (int i = 0; i < mt_template_count() && !t; i++)
            if (template_usable(mt_template_at(i), wl, layouts)) t = mt_template_at(i);
    }
    if (!t) return mt__fail(err, errlen, MT_NOT_FOUND, "no template accepts this workload");
    mt_status st = mt_template_space(t, wl, sp);
    if (st != MT_OK) return mt__fail(err, errlen, st, "template '%s': cannot build its space for this workload", mt_template_name(t));
    if ((st = mt_default_config(t, wl, dev, sp, cfg, err, errlen)) != MT_OK) {
        mt_space_free(sp);
        return st;
    }
    *tout = t;
    return MT_OK;
}

mt_status mt_best_config(mt_db *db, const mt_workload *wl, const mt_device_info *dev, const mt_template **t, mt_space *space, mt_config *cfg,
                         mt_record *rec, int *from_db, char *err, size_t errlen) {
    return mt_best_config_layouts(db, wl, dev, MT_WEIGHT_LAYOUTS_ALL, t, space, cfg, rec, from_db, err, errlen);
}

mt_status mt_best_config_layouts(mt_db *db, const mt_workload *wl, const mt_device_info *dev, unsigned layouts, const mt_template **t,
                                 mt_space *space, mt_config *cfg, mt_record *rec, int *from_db, char *err, size_t errlen) {
    return mt_best_config_ranked(db, wl, dev, layouts, 0, t, space, cfg, rec, from_db, err, errlen);
}

mt_status mt_best_config_ranked(mt_db *db, const mt_workload *wl, const mt_device_info *dev, unsigned layouts, int rank, const mt_template **t,
                                mt_space *space, mt_config *cfg, mt_record *rec, int *from_db, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (rank < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "best config: rank %d is negative", rank);
    if (!(layouts & (1u << MT_WEIGHTS_OIHW)))
        return mt__fail(err, errlen, MT_INVALID_ARG, "best config: the accepted weight layouts must include OIHW (every default config's)");
    if (!wl || !dev || !t || !space || !cfg) return mt__fail(err, errlen, MT_INVALID_ARG, "best config: NULL argument");
    mt_status st = mt_workload_validate(wl, err, errlen);
    if (st != MT_OK) return st;
    char fp[17];
    memcpy(fp, dev->fingerprint, 16);
    fp[16] = '\0';
    best_ctx *c = calloc(1, sizeof *c);
    if (!c) return mt__fail(err, errlen, MT_NOMEM, "best config: out of memory");
    c->wl = wl;
    c->layouts = layouts;
    c->want = rank > 0 ? rank : 1;
    if (db && is_fingerprint(fp) && !(rank == 0 && try_preference(db, c, fp))) {
        mt_db_filter f;
        memset(&f, 0, sizeof f);
        f.wl = wl;
        f.device = fp;
        f.only_ok = 1;
        f.order_by_median = 1;
        f.limit = MT__BEST_MAX_CANDIDATES;
        st = mt_db_for_each(db, &f, try_record, c);
        /* A damaged row or a failed read must not stop an inference server:
         * note it and go on with what was found, or the default. */
        if (st != MT_OK) mt__fail(err, errlen, st, "%s", mt_db_errmsg(db));
    }
    if (c->found) {
        *t = c->t;
        *space = c->space;
        *cfg = c->cfg;
        if (rec) *rec = c->rec;
        if (from_db) *from_db = 1;
        free(c);
        return MT_OK;
    }
    char derr[512] = "";
    st = default_config(wl, dev, layouts, t, space, cfg, derr, sizeof derr);
    if (st != MT_OK) {
        free(c);
        return mt__fail(err, errlen, st, "%s", derr);
    }
    if (rec) {
        mt_record_init(rec);
        rec->wl = *wl;
        snprintf(rec->template_name, sizeof rec->template_name, "%s", mt_template_name(*t));
        mt_config_format(space, cfg, rec->config, sizeof rec->config);
        uint64_t idx = mt_space_config_index(space, cfg);
        rec->config_index = idx > (uint64_t)INT64_MAX ? -1 : (int64_t)idx;
        memcpy(rec->device, fp, sizeof rec->device);
        snprintf(rec->version, sizeof rec->version, "%s", MT_VERSION_STRING);
        snprintf(rec->source, sizeof rec->source, "default");
    }
    if (from_db) *from_db = 0;
    free(c);
    return MT_OK;
}
