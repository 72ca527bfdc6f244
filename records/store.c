/* The tuning-records store: the connection, the schema and the record rows
 * (see include/mtgpu/records.h; devices in devices.c, preferences in
 * preferences.c).
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

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fail.h"
#include "file.h"
#include "json.h"
#include "store-impl.h"
#include "strbuf.h"

#define MT__DB_APPLICATION "mtgpu"
#define MT__DB_DEFAULT_BUSY_MS 10000

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

static const char *const stmt_sql[MT__DB_NSTMT] = {
    [MT__DB_BEGIN] = "BEGIN IMMEDIATE",
    [MT__DB_COMMIT] = "COMMIT",
    [MT__DB_ROLLBACK] = "ROLLBACK",
    [MT__DB_WL_INSERT] = "INSERT INTO workloads (text) VALUES (?1) ON CONFLICT (text) DO NOTHING",
    [MT__DB_WL_ID] = "SELECT id FROM workloads WHERE text = ?1",
    [MT__DB_DEV_ENSURE] = "INSERT INTO devices (fingerprint, backend, platform, name, driver, info, first_seen)"
                     " VALUES (?1, 'unknown', '', '', '', '{}', ?2) ON CONFLICT (fingerprint) DO NOTHING",
    [MT__DB_DEV_PUT] = "INSERT INTO devices (fingerprint, backend, platform, name, driver, info, first_seen)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (fingerprint) DO UPDATE SET"
                  " backend = excluded.backend, platform = excluded.platform, name = excluded.name,"
                  " driver = excluded.driver, info = excluded.info WHERE devices.backend = 'unknown'",
    [MT__DB_DEV_GET] = "SELECT fingerprint, backend, platform, name, driver, info, first_seen FROM devices WHERE fingerprint = ?1",
    [MT__DB_DEV_ALL] = "SELECT fingerprint, backend, platform, name, driver, info, first_seen FROM devices ORDER BY first_seen, rowid",
    /* A key stored twice keeps its first record, unless that one failed
     * because of the environment (mt_record_env_failure; the same test in SQL)
     * or the new one was timed cold and the stored one not (a cold tuning
     * measures the configs of warm records again: see MT_RECORD_SOURCE_COLD). */
    [MT__DB_REC_INSERT] = "INSERT INTO records (workload_id, template, config, config_index, device, costs, median_ms, status, message,"
                     " build_s, timestamp, version, source) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                     " ON CONFLICT (workload_id, template, config, device) DO UPDATE SET config_index = excluded.config_index,"
                     " costs = excluded.costs, median_ms = excluded.median_ms, status = excluded.status, message = excluded.message,"
                     " build_s = excluded.build_s, timestamp = excluded.timestamp, version = excluded.version, source = excluded.source"
                     " WHERE (records.status <> 'ok' AND (substr(records.message, 1, length('" MT_RECORD_ENV_FAILURE_PREFIX "')) = '"
                     MT_RECORD_ENV_FAILURE_PREFIX "' OR records.message IN ('worker crashed (signal 9)',"
                     " 'the compiler process died: worker crashed (signal 9)')))"
                     " OR (excluded.source = '" MT_RECORD_SOURCE_COLD "' AND records.source <> '" MT_RECORD_SOURCE_COLD "')",
    [MT__DB_REC_HAS] = "SELECT 1 FROM records r JOIN workloads w ON w.id = r.workload_id"
                  " WHERE w.text = ?1 AND r.template = ?2 AND r.config = ?3 AND r.device = ?4",
    [MT__DB_PREF_PUT] = "INSERT OR REPLACE INTO preferences (workload_id, device, template, config, in_network_ms, fastest_ms, network,"
                   " timestamp, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [MT__DB_PREF_GET] = "SELECT p.template, p.config, p.in_network_ms, p.fastest_ms, p.network, p.timestamp, p.version"
                   " FROM preferences p JOIN workloads w ON w.id = p.workload_id WHERE w.text = ?1 AND p.device = ?2",
    [MT__DB_PREF_DEL] = "DELETE FROM preferences WHERE device = ?2 AND workload_id = (SELECT id FROM workloads WHERE text = ?1)",
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

int mt__db_is_fingerprint(const char *fp) {
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

mt_status mt__db_sql_fail(mt_db *db, int rc, const char *what, char *err, size_t errlen) {
    const char *msg = db && db->h ? sqlite3_errmsg(db->h) : sqlite3_errstr(rc);
    mt_status st = map_rc(rc);
    if (st == MT_OK) st = MT_IO;
    /* SQLite's "disk I/O error" does not say why; the system's error does
     * ("No space left on device" on a full disk). */
    int sys = db && db->h ? sqlite3_system_errno(db->h) : 0;
    return mt__fail(err, errlen, st, "tuning database %s: %s (while %s)%s%s", db && db->path ? db->path : "", msg ? msg : sqlite3_errstr(rc),
                    what, sys > 0 ? ": " : "", sys > 0 ? strerror(sys) : "");
}

sqlite3_stmt *mt__db_stmt(mt_db *db, int which, mt_status *st, char *err, size_t errlen) {
    if (!db->stmt[which]) {
        int rc = sqlite3_prepare_v3(db->h, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &db->stmt[which], NULL);
        if (rc != SQLITE_OK) {
            *st = mt__db_sql_fail(db, rc, "preparing a statement", err, errlen);
            db->stmt[which] = NULL;
            return NULL;
        }
    }
    sqlite3_stmt *s = db->stmt[which];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

mt_status mt__db_exec(mt_db *db, sqlite3_stmt *s, const char *what, char *err, size_t errlen) {
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    mt_status st = rc == SQLITE_DONE ? MT_OK : mt__db_sql_fail(db, rc, what, err, errlen);
    sqlite3_reset(s);
    return st;
}

/* Prepares, runs and finalizes one statement of SQL text. */
static mt_status exec_sql(mt_db *db, const char *sql, const char *what, char *err, size_t errlen) {
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
    if (rc != SQLITE_OK) return mt__db_sql_fail(db, rc, what, err, errlen);
    mt_status st = mt__db_exec(db, s, what, err, errlen);
    sqlite3_finalize(s);
    return st;
}

mt_status mt__db_begin(mt_db *db, char *err, size_t errlen) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_BEGIN, &st, err, errlen);
    return s ? mt__db_exec(db, s, "beginning a transaction", err, errlen) : st;
}

mt_status mt__db_commit(mt_db *db, char *err, size_t errlen) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_COMMIT, &st, err, errlen);
    return s ? mt__db_exec(db, s, "committing", err, errlen) : st;
}

void mt__db_rollback(mt_db *db) {
    if (sqlite3_get_autocommit(db->h)) return;
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_ROLLBACK, &st, NULL, 0);
    if (s) mt__db_exec(db, s, "rolling back", NULL, 0);
}

mt_status mt__db_writable(const mt_db *db, char *err, size_t errlen) {
    return db->readonly ? mt__fail(err, errlen, MT_IO, "tuning database %s is open read-only", db->path) : MT_OK;
}

/* 1 when the directory part of path does not exist. */
static int parent_missing(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return 0;
    size_t k = (size_t)(slash - path);
    char *dir = malloc(k + 1);
    if (!dir) return 0;
    memcpy(dir, path, k);
    dir[k] = '\0';
    struct stat st;
    int missing = stat(dir, &st) != 0 && errno == ENOENT;
    free(dir);
    return missing;
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

/* The size of path + suffix: -1 when it does not exist, 0 when it cannot be
 * told (then it counts as present). */
static long long sidecar_size(const char *path, const char *suffix) {
    size_t n = strlen(path) + strlen(suffix) + 1;
    char *p = malloc(n);
    if (!p) return 0;
    snprintf(p, n, "%s%s", path, suffix);
    struct stat st;
    long long r = stat(p, &st) == 0 ? (long long)st.st_size : errno == ENOENT ? -1 : 0;
    free(p);
    return r;
}

/* Why the directory that holds path cannot be written by this process
 * (EACCES, EROFS, EPERM: permissions, a read-only mount); 0 when it can be
 * or it cannot be told. */
static int dir_not_writable(const char *path) {
    const char *slash = strrchr(path, '/');
    size_t k = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
    char *dir = malloc(k + 1);
    if (!dir) return 0;
    if (!slash) memcpy(dir, ".", 2);
    else {
        memcpy(dir, path, k);
        dir[k] = '\0';
    }
    int r = access(dir, W_OK) != 0 && (errno == EACCES || errno == EROFS || errno == EPERM) ? errno : 0;
    free(dir);
    return r;
}

/* How a read-only handle opens path. SQLite keeps a WAL reader's view in the
 * -shm file beside the database; where that file is missing and cannot be
 * created (a database baked into a read-only image or mount) the handle
 * opens the file as immutable: SQLite then takes no locks and reads no WAL,
 * which is right only while nothing changes the file (records.h). A -wal or
 * -journal file with contents in such a place holds transactions that an
 * immutable reader would not see: refused. *immutable is set on MT_OK. */
static mt_status readonly_mode(const char *path, int *immutable, char *err, size_t errlen) {
    *immutable = 0;
    if (sidecar_size(path, "-shm") >= 0 || !dir_not_writable(path)) return MT_OK;
    if (sidecar_size(path, "-wal") > 0 || sidecar_size(path, "-journal") > 0)
        return mt__fail(err, errlen, MT_IO,
                        "cannot open tuning database %s read-only: its directory cannot be written and it has a -wal or -journal file "
                        "with transactions not yet in the database file but no -shm file; checkpoint it where it was written "
                        "(sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)') before copying it here",
                        path);
    *immutable = 1;
    return MT_OK;
}

/* path as a SQLite URI with immutable=1 (characters outside the URI's safe
 * set percent-encoded); NULL when out of memory. */
static char *immutable_uri(const char *path) {
    size_t n = strlen(path);
    char *u = malloc(3 * n + 32);
    if (!u) return NULL;
    size_t o = (size_t)sprintf(u, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        unsigned c = *p;
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' || c == '_' || c == '.' ||
                   c == '~';
        if (safe) u[o++] = (char)c;
        else o += (size_t)sprintf(u + o, "%%%02X", c);
    }
    strcpy(u + o, "?immutable=1");
    return u;
}

mt_db_params mt_db_default_params(void) {
    mt_db_params p;
    memset(&p, 0, sizeof p);
    p.readonly = 0;
    p.create = 1;
    p.busy_timeout_ms = MT__DB_DEFAULT_BUSY_MS;
    p.durable = 0;
    p.create_dirs = 0;
    return p;
}

mt_status mt_db_default_path(char *buf, size_t len, char *err, size_t errlen) {
    if (!buf || len == 0) return mt__fail(err, errlen, MT_INVALID_ARG, "db: no buffer for the default path");
    buf[0] = '\0';
    const char *env = getenv("MTGPU_DB");
    int n;
    if (env && *env) n = snprintf(buf, len, "%s", env);
    else if ((env = getenv("XDG_CACHE_HOME")) && *env) n = snprintf(buf, len, "%s/mtgpu/tuning.db", env);
    else if ((env = getenv("HOME")) && *env) n = snprintf(buf, len, "%s/.cache/mtgpu/tuning.db", env);
    else return mt__fail(err, errlen, MT_UNAVAILABLE, "no tuning database path: set MTGPU_DB, XDG_CACHE_HOME or HOME");
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return mt__fail(err, errlen, MT_RANGE, "the default tuning database path is longer than %zu bytes", len - 1);
    }
    return MT_OK;
}

/* Reads one text value from meta; *found = 0 when the key is absent. */
static mt_status meta_get(mt_db *db, const char *key, char *out, size_t outlen, int *found, char *err, size_t errlen) {
    sqlite3_stmt *s = NULL;
    *found = 0;
    int rc = sqlite3_prepare_v2(db->h, "SELECT value FROM meta WHERE key = ?1", -1, &s, NULL);
    if (rc != SQLITE_OK) return mt__db_sql_fail(db, rc, "reading the schema version", err, errlen);
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    rc = sqlite3_step(s);
    mt_status st = MT_OK;
    if (rc == SQLITE_ROW) {
        *found = 1;
        snprintf(out, outlen, "%s", mt__db_col_text(s, 0));
    } else if (rc != SQLITE_DONE) {
        st = mt__db_sql_fail(db, rc, "reading the schema version", err, errlen);
    }
    sqlite3_finalize(s);
    return st;
}

/* Number of entries in sqlite_master and whether a table `meta` is among them.
 * This is the first read of the file: a non-SQLite or truncated file fails here. */
static mt_status probe(mt_db *db, int64_t *nobjects, int *has_meta, char *err, size_t errlen) {
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
        if (map_rc(rc) == MT_CORRUPT)
            st = mt__fail(err, errlen, MT_CORRUPT, "%s is not a usable SQLite database: %s", db->path, sqlite3_errmsg(db->h));
        else
            st = mt__db_sql_fail(db, rc, "reading the database header", err, errlen);
    }
    sqlite3_finalize(s);
    return st;
}

/* Checks that an existing file is an mtgpu database this library can read. */
static mt_status check_schema(mt_db *db, int has_meta, char *err, size_t errlen) {
    if (!has_meta)
        return mt__fail(err, errlen, MT_CORRUPT, "%s is a SQLite database but not an mtgpu tuning database (no 'meta' table)", db->path);
    char app[64] = "", ver[64] = "";
    int found = 0;
    mt_status st = meta_get(db, "application", app, sizeof app, &found, err, errlen);
    if (st != MT_OK) return st;
    if (!found || strcmp(app, MT__DB_APPLICATION) != 0)
        return mt__fail(err, errlen, MT_CORRUPT, "%s is not an mtgpu tuning database (application '%s')", db->path, found ? app : "(none)");
    st = meta_get(db, "schema_version", ver, sizeof ver, &found, err, errlen);
    if (st != MT_OK) return st;
    char *end = NULL;
    long v = found ? strtol(ver, &end, 10) : 0;
    if (!found || !end || *end || end == ver || v < 1)
        return mt__fail(err, errlen, MT_CORRUPT, "%s: unknown schema version '%s' (this mtgpu reads versions 1..%d)", db->path,
                        found ? ver : "(none)", MT_DB_SCHEMA_VERSION);
    if (v > MT_DB_SCHEMA_VERSION)
        return mt__fail(err, errlen, MT_CORRUPT, "%s has schema version %ld, newer than this mtgpu reads (%d); upgrade mtgpu", db->path, v,
                        MT_DB_SCHEMA_VERSION);
    return MT_OK;
}

/* A version 1 file opened for writing gets the preferences table and
 * becomes version 2, in one transaction (a concurrent opener may have done it
 * first: both statements are idempotent). Then notes whether the table is there. */
static mt_status upgrade_schema(mt_db *db, char *err, size_t errlen) {
    mt_status st = MT_OK;
    if (!db->readonly) {
        if ((st = mt__db_begin(db, err, errlen)) != MT_OK) return st;
        st = exec_sql(db, preferences_sql, "upgrading the schema to version 2", err, errlen);
        if (st == MT_OK)
            st = exec_sql(db, "UPDATE meta SET value = '2' WHERE key = 'schema_version' AND value = '1'",
                          "upgrading the schema to version 2", err, errlen);
        if (st == MT_OK) st = mt__db_commit(db, err, errlen);
        if (st != MT_OK) {
            mt__db_rollback(db);
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
    return rc == SQLITE_OK ? MT_OK : mt__db_sql_fail(db, rc, "reading the schema", err, errlen);
}

/* Creates the schema in one transaction, unless another process did first. */
static mt_status create_schema(mt_db *db, char *err, size_t errlen) {
    mt_status st = mt__db_begin(db, err, errlen);
    if (st != MT_OK) return st;
    int64_t nobj = 0;
    int has_meta = 0;
    st = probe(db, &nobj, &has_meta, err, errlen);
    if (st == MT_OK && nobj > 0) {
        mt__db_rollback(db);
        return check_schema(db, has_meta, err, errlen);
    }
    for (size_t i = 0; st == MT_OK && i < sizeof schema_v1 / sizeof schema_v1[0]; i++)
        st = exec_sql(db, schema_v1[i], "creating the schema", err, errlen);
    if (st == MT_OK) st = exec_sql(db, preferences_sql, "creating the schema", err, errlen);
    if (st == MT_OK) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v2(db->h, "INSERT INTO meta (key, value) VALUES (?1, ?2)", -1, &s, NULL);
        if (rc != SQLITE_OK) st = mt__db_sql_fail(db, rc, "creating the schema", err, errlen);
        char ver[16], now[32];
        snprintf(ver, sizeof ver, "%d", MT_DB_SCHEMA_VERSION);
        snprintf(now, sizeof now, "%.3f", mt__now_epoch());
        const char *kv[][2] = {{"application", MT__DB_APPLICATION}, {"schema_version", ver}, {"created", now}, {"created_by", MT_VERSION_STRING}};
        for (size_t i = 0; st == MT_OK && i < sizeof kv / sizeof kv[0]; i++) {
            sqlite3_reset(s);
            sqlite3_bind_text(s, 1, kv[i][0], -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 2, kv[i][1], -1, SQLITE_TRANSIENT);
            st = mt__db_exec(db, s, "creating the schema", err, errlen);
        }
        sqlite3_finalize(s);
    }
    if (st == MT_OK) st = mt__db_commit(db, err, errlen);
    if (st != MT_OK) mt__db_rollback(db);
    return st;
}

void mt_db_close(mt_db *db) {
    if (!db) return;
    for (int i = 0; i < MT__DB_NSTMT; i++) sqlite3_finalize(db->stmt[i]);
    if (db->h) sqlite3_close_v2(db->h);
    free(db->path);
    free(db);
}

mt_status mt_db_open(const char *path, const mt_db_params *params, mt_db **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    *out = NULL;
    mt_db_params p = params ? *params : mt_db_default_params();
    char defpath[4096];
    int explicit_path = path != NULL;
    if (!path) {
        mt_status st = mt_db_default_path(defpath, sizeof defpath, err, errlen);
        if (st != MT_OK) return st;
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
    /* A FIFO or a device is no database: SQLite would block on a FIFO's
     * open, and a writer would put its -wal beside /dev/zero. */
    struct stat fst;
    if (stat(path, &fst) == 0 && !S_ISREG(fst.st_mode)) {
        int fd = -1;
        st = mt__open_regular(path, &fd, NULL, err, errlen);
        if (fd >= 0) close(fd);
        if (st == MT_OK) st = mt__fail(err, errlen, MT_IO, "%s is not a regular file", path);
        else st = MT_IO;
        goto fail;
    }
    int immutable = 0;
    if (p.readonly && (st = readonly_mode(path, &immutable, err, errlen)) != MT_OK) goto fail;
    if (!p.readonly && p.create && (!explicit_path || p.create_dirs) && make_parent_dirs(path) != 0) {
        st = mt__fail(err, errlen, MT_IO, "cannot create the directory of %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!p.readonly && p.create && explicit_path && !p.create_dirs && parent_missing(path)) {
        st = mt__fail(err, errlen, MT_IO,
                      "cannot create tuning database %s: its directory does not exist (mtgpu creates the database file, and the "
                      "directories of the default location only; create the directory first)",
                      path);
        goto fail;
    }
    int flags = p.readonly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | (p.create ? SQLITE_OPEN_CREATE : 0));
    char *uri = immutable ? immutable_uri(path) : NULL;
    if (immutable && !uri) {
        st = mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
        goto fail;
    }
    int rc = sqlite3_open_v2(uri ? uri : path, &db->h, flags | (uri ? SQLITE_OPEN_URI : 0), NULL);
    free(uri);
    db->immutable = immutable;
    if (rc != SQLITE_OK) {
        if (!db->h) {
            st = mt__fail(err, errlen, MT_NOMEM, "db: out of memory opening %s", path);
        } else {
            st = mt__fail(err, errlen, map_rc(rc) == MT_CORRUPT ? MT_CORRUPT : MT_IO, "cannot open tuning database %s: %s", path,
                          sqlite3_errmsg(db->h));
        }
        goto fail;
    }
    sqlite3_busy_timeout(db->h, p.busy_timeout_ms);

    int64_t nobj = 0;
    int has_meta = 0;
    st = probe(db, &nobj, &has_meta, err, errlen);
    int why_dir = st == MT_IO && !p.readonly ? dir_not_writable(path) : 0;
    if (why_dir)
        st = mt__fail(err, errlen, MT_IO,
                      "cannot open tuning database %s for writing: its directory cannot be written (%s); a reader opens it read-only", path,
                      strerror(why_dir));
    if (st != MT_OK) goto fail;
    if (nobj == 0) {
        if (p.readonly) {
            st = mt__fail(err, errlen, MT_CORRUPT, "%s is empty: not an mtgpu tuning database (yet)", path);
            goto fail;
        }
        st = create_schema(db, err, errlen);
    } else {
        st = check_schema(db, has_meta, err, errlen);
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
            st = mt__db_sql_fail(db, rc, "switching to WAL mode", err, errlen);
            goto fail;
        }
        st = exec_sql(db, p.durable ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL", "setting synchronous", err, errlen);
        if (st != MT_OK) goto fail;
    }
    st = exec_sql(db, "PRAGMA foreign_keys = ON", "enabling foreign keys", err, errlen);
    if (st != MT_OK) goto fail;
    if ((st = upgrade_schema(db, err, errlen)) != MT_OK) goto fail;
    *out = db;
    return MT_OK;
fail:
    mt_db_close(db);
    return st;
}

const char *mt_db_path(const mt_db *db) { return db ? db->path : ""; }

/* ---- records ---- */

int mt_record_env_failure(const mt_record *rec) {
    if (!rec || rec->status == MT_OK || !memchr(rec->message, '\0', sizeof rec->message)) return 0;
    return strncmp(rec->message, MT_RECORD_ENV_FAILURE_PREFIX, strlen(MT_RECORD_ENV_FAILURE_PREFIX)) == 0 ||
           strcmp(rec->message, "worker crashed (signal 9)") == 0 || strcmp(rec->message, "the compiler process died: worker crashed (signal 9)") == 0;
}

void mt_record_init(mt_record *rec) {
    if (!rec) return;
    memset(rec, 0, sizeof *rec);
    rec->config_index = -1;
    rec->status = MT_OK;
}

/* Checks a record before a put and fills in derived values. */
static mt_status check_record(const mt_record *r, double *median, char *err, size_t errlen) {
    if (mt_workload_validate(&r->wl, NULL, 0) != MT_OK) return mt__fail(err, errlen, MT_INVALID_ARG, "record: invalid workload");
    if (!memchr(r->template_name, '\0', sizeof r->template_name) || !r->template_name[0])
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: empty or unterminated template name");
    if (!memchr(r->config, '\0', sizeof r->config) || !r->config[0])
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: empty or unterminated config");
    if (!memchr(r->device, '\0', sizeof r->device) || !mt__db_is_fingerprint(r->device))
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: device fingerprint is not 16 hex digits");
    if (!memchr(r->message, '\0', sizeof r->message) || !memchr(r->source, '\0', sizeof r->source) ||
        !memchr(r->version, '\0', sizeof r->version))
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: unterminated string");
    if (r->ncosts < 0 || r->ncosts > MT_RECORD_MAX_COSTS)
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: ncosts %d outside 0..%d", r->ncosts, MT_RECORD_MAX_COSTS);
    for (int i = 0; i < r->ncosts; i++)
        if (!isfinite(r->costs_ms[i]) || r->costs_ms[i] < 0)
            return mt__fail(err, errlen, MT_INVALID_ARG, "record: cost %d is negative or not finite", i);
    if (!isfinite(r->median_ms) || r->median_ms < 0 || !isfinite(r->build_s) || !isfinite(r->timestamp))
        return mt__fail(err, errlen, MT_INVALID_ARG, "record: median, build time or timestamp not finite (or negative median)");
    double m = r->median_ms;
    if (m <= 0 && r->ncosts > 0) m = mt__median(r->costs_ms, r->ncosts);
    if (r->status == MT_OK && !(m > 0)) return mt__fail(err, errlen, MT_INVALID_ARG, "record: status ok needs a positive median or costs");
    *median = m;
    return MT_OK;
}

static void format_costs(mt_strbuf *sb, const double *c, int n) {
    mt__sb_append(sb, "[");
    for (int i = 0; i < n; i++) mt__sb_printf(sb, "%s%.17g", i ? "," : "", c[i]);
    mt__sb_append(sb, "]");
}

mt_status mt__db_ensure_keys(mt_db *db, const char *wltext, const char *device_fp, double now, int64_t *wl_id, char *err, size_t errlen) {
    mt_status st = MT_OK;
    sqlite3_stmt *s = NULL;
    if ((s = mt__db_stmt(db, MT__DB_WL_INSERT, &st, err, errlen))) {
        sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
        st = mt__db_exec(db, s, "storing a workload", err, errlen);
    }
    if (st == MT_OK && (s = mt__db_stmt(db, MT__DB_WL_ID, &st, err, errlen))) {
        sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        if (rc == SQLITE_ROW) *wl_id = sqlite3_column_int64(s, 0);
        else if (rc == SQLITE_DONE) st = mt__fail(err, errlen, MT_CORRUPT, "workload vanished while storing a row");
        else st = mt__db_sql_fail(db, rc, "reading a workload", err, errlen);
        sqlite3_reset(s);
    }
    if (st == MT_OK && (s = mt__db_stmt(db, MT__DB_DEV_ENSURE, &st, err, errlen))) {
        sqlite3_bind_text(s, 1, device_fp, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 2, now);
        st = mt__db_exec(db, s, "storing a device", err, errlen);
    }
    return st;
}

mt_status mt_db_put_record(mt_db *db, const mt_record *rec, int *inserted, char *err, size_t errlen) {
    if (inserted) *inserted = 0;
    if (!db || !rec) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL record");
    double median = 0;
    mt_status st = mt__db_writable(db, err, errlen);
    if (st == MT_OK) st = check_record(rec, &median, err, errlen);
    if (st != MT_OK) return st;
    char wltext[256];
    mt_workload_format(&rec->wl, wltext, sizeof wltext);
    mt_strbuf costs = {0};
    format_costs(&costs, rec->costs_ms, rec->ncosts);
    if (costs.failed) {
        mt__sb_free(&costs);
        return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    }
    double now = mt__now_epoch();

    st = mt__db_begin(db, err, errlen);
    sqlite3_stmt *s = NULL;
    int64_t wl_id = -1;
    if (st == MT_OK) st = mt__db_ensure_keys(db, wltext, rec->device, now, &wl_id, err, errlen);
    if (st == MT_OK && (s = mt__db_stmt(db, MT__DB_REC_INSERT, &st, err, errlen))) {
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
        st = mt__db_exec(db, s, "storing a record", err, errlen);
        if (st == MT_OK && inserted) *inserted = sqlite3_changes(db->h) > 0;
    }
    if (st == MT_OK) st = mt__db_commit(db, err, errlen);
    if (st != MT_OK) {
        mt__db_rollback(db);
        if (inserted) *inserted = 0;
    }
    mt__sb_free(&costs);
    return st;
}

mt_status mt_db_has_record(mt_db *db, const mt_workload *wl, const char *template_name, const char *config_text, const char *device_fp,
                           int *found, char *err, size_t errlen) {
    if (found) *found = 0;
    if (!db || !wl || !template_name || !config_text || !device_fp || !found)
        return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    char wltext[256];
    mt_workload_format(wl, wltext, sizeof wltext);
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_REC_HAS, &st, err, errlen);
    if (!s) return st;
    sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, template_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, config_text, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, device_fp, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *found = 1;
    else if (rc != SQLITE_DONE) st = mt__db_sql_fail(db, rc, "looking up a record", err, errlen);
    sqlite3_reset(s);
    return st;
}

/* Prepares the query for a filter: fixed fragments, values bound by name. */
static mt_status prepare_filter(mt_db *db, const mt_db_filter *f, int count_only, sqlite3_stmt **out, char wltext[256], char *err,
                                size_t errlen) {
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
        return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    }
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db->h, sql.data, -1, &s, NULL);
    mt__sb_free(&sql);
    if (rc != SQLITE_OK) return mt__db_sql_fail(db, rc, "preparing a query", err, errlen);
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

mt_status mt_db_count_filter(mt_db *db, const mt_db_filter *f, int64_t *n, char *err, size_t errlen) {
    if (n) *n = 0;
    if (!db || !n) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    char wltext[256];
    sqlite3_stmt *s = NULL;
    mt_status st = prepare_filter(db, f, 1, &s, wltext, err, errlen);
    if (st != MT_OK) return st;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) *n = sqlite3_column_int64(s, 0);
    else st = mt__db_sql_fail(db, rc, "counting records", err, errlen);
    sqlite3_finalize(s);
    return st;
}

mt_status mt_db_count(mt_db *db, const mt_workload *wl, const char *device_fp, const char *template_name, int64_t *n, char *err,
                      size_t errlen) {
    mt_db_filter f = {.wl = wl, .device = device_fp, .template_name = template_name};
    return mt_db_count_filter(db, &f, n, err, errlen);
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
        if (c->type != MT_JSON_NUMBER || !isfinite(c->num) || c->num < 0) {
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
    if (mt_workload_parse(mt__db_col_text(s, 1), &r->wl, NULL, 0) != MT_OK) return *why = "workload text", 0;
    if (!mt__db_copy_fits(r->template_name, sizeof r->template_name, mt__db_col_text(s, 2)) || !r->template_name[0])
        return *why = "template", 0;
    if (!mt__db_copy_fits(r->config, sizeof r->config, mt__db_col_text(s, 3)) || !r->config[0]) return *why = "config", 0;
    r->config_index = sqlite3_column_type(s, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 4);
    if (!mt__db_copy_fits(r->device, sizeof r->device, mt__db_col_text(s, 5)) || !mt__db_is_fingerprint(r->device))
        return *why = "device", 0;
    if (!parse_costs(mt__db_col_text(s, 6), r->costs_ms, &r->ncosts)) return *why = "costs", 0;
    /* A time is a number: text ('abc', 'NaN') reads as 0 through
     * sqlite3_column_double and would pass for the fastest record. */
    int mtype = sqlite3_column_type(s, 7);
    if (mtype != SQLITE_NULL && mtype != SQLITE_FLOAT && mtype != SQLITE_INTEGER) return *why = "median (not a number)", 0;
    r->median_ms = mtype == SQLITE_NULL ? 0 : sqlite3_column_double(s, 7);
    if (!isfinite(r->median_ms) || r->median_ms < 0) return *why = "median", 0;
    int known;
    r->status = status_from_token(mt__db_col_text(s, 8), &known);
    if (!known) return *why = "status", 0;
    /* A valid measurement has a finite, positive time; 0 or NULL would beat every real one. */
    if (r->status == MT_OK && !(r->median_ms > 0)) return *why = "median (a valid record without a positive time)", 0;
    snprintf(r->message, sizeof r->message, "%s", mt__db_col_text(s, 9));
    r->build_s = sqlite3_column_double(s, 10);
    r->timestamp = sqlite3_column_double(s, 11);
    /* Infinite ones (1e999 in the sqlite3 shell) mt_db_put_record refuses: merge-db would stop at the row. */
    if (!isfinite(r->build_s) || !isfinite(r->timestamp)) return *why = "build time or timestamp (not finite)", 0;
    snprintf(r->version, sizeof r->version, "%s", mt__db_col_text(s, 12));
    snprintf(r->source, sizeof r->source, "%s", mt__db_col_text(s, 13));
    return 1;
}

mt_status mt_db_for_each(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user, char *err,
                         size_t errlen) {
    return mt_db_for_each_counted(db, filter, cb, user, NULL, err, errlen);
}

mt_status mt_db_for_each_counted(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user,
                                 int64_t *damaged, char *err, size_t errlen) {
    if (damaged) *damaged = 0;
    if (!db || !cb) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL callback");
    char wltext[256];
    sqlite3_stmt *s = NULL;
    mt_status st = prepare_filter(db, filter, 0, &s, wltext, err, errlen);
    if (st != MT_OK) return st;
    mt_record *r = malloc(sizeof *r);
    if (!r) {
        sqlite3_finalize(s);
        return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    }
    int64_t bad_id = -1;
    const char *bad_why = NULL;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        const char *why = NULL;
        if (!decode_row(s, r, &why)) {
            if (bad_id < 0) bad_id = sqlite3_column_int64(s, 0), bad_why = why;
            if (damaged) (*damaged)++;
            continue;
        }
        if (cb(r, user)) {
            rc = SQLITE_DONE;
            break;
        }
    }
    if (rc != SQLITE_DONE) st = mt__db_sql_fail(db, rc, "reading records", err, errlen);
    else if (bad_id >= 0)
        st = mt__fail(err, errlen, MT_CORRUPT, "%s: record %lld has a damaged %s and was skipped", db->path, (long long)bad_id, bad_why);
    sqlite3_finalize(s);
    free(r);
    return st;
}

static int take_first(const mt_record *rec, void *user) {
    *(mt_record *)user = *rec;
    return 1;
}

mt_status mt_db_best(mt_db *db, const mt_workload *wl, const char *device_fp, mt_record *out, char *err, size_t errlen) {
    if (!db || !wl || !device_fp || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    mt_db_filter f = {.wl = wl, .device = device_fp, .only_ok = 1, .order_by_median = 1};
    mt_record *tmp = malloc(sizeof *tmp);
    if (!tmp) return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    tmp->id = -1;
    /* A damaged row before the fastest good one does not fail the call:
     * its message is kept only if nothing was found. */
    char why[512] = "";
    mt_status st = mt_db_for_each(db, &f, take_first, tmp, why, sizeof why);
    if (tmp->id >= 0 && (st == MT_OK || st == MT_CORRUPT)) {
        *out = *tmp;
        st = MT_OK;
    } else if (st != MT_OK) {
        mt__fail(err, errlen, st, "%s", why);
    } else {
        char wltext[256];
        mt_workload_format(wl, wltext, sizeof wltext);
        st = mt__fail(err, errlen, MT_NOT_FOUND, "no valid record for %s on device %.16s", wltext, device_fp);
    }
    free(tmp);
    return st;
}
