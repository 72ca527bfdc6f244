/* Private: the store's handle and the helpers its files share (store.c: the
 * connection, schema and record rows; devices.c; preferences.c), and the
 * calls records/autotvm.c makes below the public API.
 *
 * Every helper that can fail writes its message to the caller's err (NULL
 * or 0: not wanted), as the public calls do. */
#ifndef MTGPU_RECORDS_STORE_IMPL_H
#define MTGPU_RECORDS_STORE_IMPL_H

#include <sqlite3.h>
#include <stddef.h>
#include <string.h>

#include "mtgpu/records.h"

/* The statements the handle prepares on first use and keeps (their SQL is
 * in store.c, next to the schema). */
enum {
    MT__DB_BEGIN,
    MT__DB_COMMIT,
    MT__DB_ROLLBACK,
    MT__DB_WL_INSERT,
    MT__DB_WL_ID,
    MT__DB_DEV_ENSURE,
    MT__DB_DEV_PUT,
    MT__DB_DEV_GET,
    MT__DB_DEV_ALL,
    MT__DB_REC_INSERT,
    MT__DB_REC_HAS,
    MT__DB_PREF_PUT,
    MT__DB_PREF_GET,
    MT__DB_PREF_DEL,
    MT__DB_NSTMT
};

struct mt_db {
    sqlite3 *h;
    char *path;
    int readonly;
    int immutable;                    /* read-only on unwritable media: opened with SQLite's immutable=1 (store.c) */
    int has_preferences;              /* the preferences table exists (schema 2, or a version 1 file opened read-only: 0) */
    sqlite3_stmt *stmt[MT__DB_NSTMT]; /* prepared on first use */
};

/* Statement `which`, reset and with its bindings cleared; NULL with *st set
 * and the message in err when it cannot be prepared. Owned by db. */
sqlite3_stmt *mt__db_stmt(mt_db *db, int which, mt_status *st, char *err, size_t errlen);

/* Steps s to its end (rows are ignored) and resets it. `what` names the
 * operation in the message. */
mt_status mt__db_exec(mt_db *db, sqlite3_stmt *s, const char *what, char *err, size_t errlen);

/* The status of SQLite result code rc (never MT_OK), with the connection's
 * message and `what` in err. */
mt_status mt__db_sql_fail(mt_db *db, int rc, const char *what, char *err, size_t errlen);

/* BEGIN IMMEDIATE and COMMIT. mt__db_rollback rolls back the open
 * transaction, if any, and writes no message (the first error's stays). */
mt_status mt__db_begin(mt_db *db, char *err, size_t errlen);
mt_status mt__db_commit(mt_db *db, char *err, size_t errlen);
void mt__db_rollback(mt_db *db);

/* MT_IO when db is open read-only. */
mt_status mt__db_writable(const mt_db *db, char *err, size_t errlen);

/* Inside a transaction: the workload row (made if new) and its id, and a
 * device row (backend 'unknown' until mt_db_put_device fills it in), so that
 * a row may refer to both. */
mt_status mt__db_ensure_keys(mt_db *db, const char *wltext, const char *device_fp, double now, int64_t *wl_id, char *err, size_t errlen);

/* fp is 16 hex digits and a terminating NUL. */
int mt__db_is_fingerprint(const char *fp);

/* Registers a device row given its columns (info_json must be a JSON object).
 * Like mt_db_put_device: an existing non-placeholder row is kept. */
mt_status mt__db_put_device_row(mt_db *db, const char *fingerprint, const char *backend, const char *platform, const char *name,
                                const char *driver, const char *info_json, char *err, size_t errlen);

/* Median of v[0..n) (n >= 1); v is not modified. */
double mt__median(const double *v, int n);

/* Seconds since the epoch, with sub-second precision. */
double mt__now_epoch(void);

/* Column i of the current row as text ("" for NULL). */
static inline const char *mt__db_col_text(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? (const char *)t : "";
}

/* Copies src into dst[0..len) when it fits; 0 when it does not (dst then ""). */
static inline int mt__db_copy_fits(char *dst, size_t len, const char *src) {
    size_t n = src ? strlen(src) : 0;
    if (n >= len) {
        if (len) dst[0] = '\0';
        return 0;
    }
    memcpy(dst, src ? src : "", n + 1);
    return 1;
}

/* Copies src into dst[0..len), truncating. */
static inline void mt__db_copy_trunc(char *dst, size_t len, const char *src) {
    if (!len) return;
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

#endif
