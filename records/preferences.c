/* The preferences of the tuning-records store (include/mtgpu/records.h):
 * per workload and device, the config chosen by timing candidates inside a
 * network. A file of schema version 1 opened read-only has no preferences
 * table: reads find none there and writes are refused. */
#include "mtgpu/records.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"
#include "store-impl.h"
#include "template.h"

mt_status mt_db_put_preference(mt_db *db, const mt_preference *p, char *err, size_t errlen) {
    if (!db || !p) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL preference");
    mt_status st = mt__db_writable(db, err, errlen);
    if (st != MT_OK) return st;
    if (!db->has_preferences) return mt__fail(err, errlen, MT_UNSUPPORTED, "tuning database %s has no preferences table", db->path);
    char why[256];
    if (mt_workload_validate(&p->wl, why, sizeof why) != MT_OK) return mt__fail(err, errlen, MT_INVALID_ARG, "preference: %s", why);
    if (!mt__db_is_fingerprint(p->device)) return mt__fail(err, errlen, MT_INVALID_ARG, "preference: device '%.20s' is not a fingerprint", p->device);
    if (!memchr(p->template_name, '\0', sizeof p->template_name) || !mt_template_find(p->template_name) ||
        !memchr(p->config, '\0', sizeof p->config) || !memchr(p->network, '\0', sizeof p->network))
        return mt__fail(err, errlen, MT_INVALID_ARG, "preference: unknown template or unterminated text");
    if (!(p->in_network_ms > 0) || !(p->fastest_ms > 0))
        return mt__fail(err, errlen, MT_INVALID_ARG, "preference: times must be positive (%g, %g ms)", p->in_network_ms, p->fastest_ms);
    char wltext[256];
    mt_workload_format(&p->wl, wltext, sizeof wltext);
    double now = mt__now_epoch();
    int64_t wl_id = -1;
    sqlite3_stmt *s = NULL;
    st = mt__db_begin(db, err, errlen);
    if (st == MT_OK) st = mt__db_ensure_keys(db, wltext, p->device, now, &wl_id, err, errlen);
    if (st == MT_OK && (s = mt__db_stmt(db, MT__DB_PREF_PUT, &st, err, errlen))) {
        sqlite3_bind_int64(s, 1, wl_id);
        sqlite3_bind_text(s, 2, p->device, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, p->template_name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, p->config, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 5, p->in_network_ms);
        sqlite3_bind_double(s, 6, p->fastest_ms);
        sqlite3_bind_text(s, 7, p->network, -1, SQLITE_STATIC);
        sqlite3_bind_double(s, 8, p->timestamp > 0 ? p->timestamp : now);
        sqlite3_bind_text(s, 9, MT_VERSION_STRING, -1, SQLITE_STATIC);
        st = mt__db_exec(db, s, "storing a preference", err, errlen);
    }
    if (st == MT_OK) st = mt__db_commit(db, err, errlen);
    if (st != MT_OK) mt__db_rollback(db);
    return st;
}

/* Statement `which` with ?1 = wl's text (kept in wltext, which must outlive
 * the step) and ?2 = the device fingerprint. */
static sqlite3_stmt *pref_stmt(mt_db *db, int which, const mt_workload *wl, const char *device_fp, char wltext[256], mt_status *st, char *err,
                               size_t errlen) {
    mt_workload_format(wl, wltext, 256);
    sqlite3_stmt *s = mt__db_stmt(db, which, st, err, errlen);
    if (!s) return NULL;
    sqlite3_bind_text(s, 1, wltext, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, device_fp, -1, SQLITE_STATIC);
    return s;
}

mt_status mt_db_delete_preference(mt_db *db, const mt_workload *wl, const char *device_fp, int *deleted, char *err, size_t errlen) {
    if (deleted) *deleted = 0;
    if (!db || !wl || !device_fp) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    mt_status st = mt__db_writable(db, err, errlen);
    if (st != MT_OK || !db->has_preferences) return st;
    char wltext[256];
    sqlite3_stmt *s = pref_stmt(db, MT__DB_PREF_DEL, wl, device_fp, wltext, &st, err, errlen);
    if (!s) return st;
    st = mt__db_exec(db, s, "removing a preference", err, errlen);
    if (st == MT_OK && deleted) *deleted = sqlite3_changes(db->h) > 0;
    return st;
}

mt_status mt_db_get_preference(mt_db *db, const mt_workload *wl, const char *device_fp, mt_preference *out, char *err, size_t errlen) {
    if (!db || !wl || !device_fp || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL argument");
    char wltext[256];
    if (!db->has_preferences) {
        mt_workload_format(wl, wltext, sizeof wltext);
        return mt__fail(err, errlen, MT_NOT_FOUND, "no preference for %s on device %.16s (%s has no preferences table)", wltext, device_fp,
                        db->path);
    }
    mt_status st = MT_OK;
    sqlite3_stmt *s = pref_stmt(db, MT__DB_PREF_GET, wl, device_fp, wltext, &st, err, errlen);
    if (!s) return st;
    /* Decoded aside, so that a damaged row leaves *out as it was. */
    mt_preference got;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        memset(&got, 0, sizeof got);
        got.wl = *wl;
        snprintf(got.device, sizeof got.device, "%s", device_fp);
        if (!mt__db_copy_fits(got.template_name, sizeof got.template_name, mt__db_col_text(s, 0)) ||
            !mt__db_copy_fits(got.config, sizeof got.config, mt__db_col_text(s, 1)))
            st = mt__fail(err, errlen, MT_CORRUPT, "a preference of %s has an overlong template or config", wltext);
        got.in_network_ms = sqlite3_column_double(s, 2);
        got.fastest_ms = sqlite3_column_double(s, 3);
        mt__db_copy_trunc(got.network, sizeof got.network, mt__db_col_text(s, 4));
        got.timestamp = sqlite3_column_double(s, 5);
        mt__db_copy_trunc(got.version, sizeof got.version, mt__db_col_text(s, 6));
        if (st == MT_OK) *out = got;
    } else if (rc == SQLITE_DONE) {
        st = mt__fail(err, errlen, MT_NOT_FOUND, "no preference for %s on device %.16s", wltext, device_fp);
    } else {
        st = mt__db_sql_fail(db, rc, "reading a preference", err, errlen);
    }
    sqlite3_reset(s);
    return st;
}
