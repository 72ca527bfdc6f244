/* The device rows of the tuning-records store (include/mtgpu/records.h):
 * each device is stored by fingerprint with its columns and every field of
 * its mt_device_info as JSON, from which a read rebuilds the info. */
#include "mtgpu/records.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "device-info-json.h"
#include "fail.h"
#include "json.h"
#include "store-impl.h"
#include "strbuf.h"

mt_status mt__db_put_device_row(mt_db *db, const char *fingerprint, const char *backend, const char *platform, const char *name,
                                const char *driver, const char *info_json, char *err, size_t errlen) {
    if (!db) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL handle");
    mt_status st = mt__db_writable(db, err, errlen);
    if (st != MT_OK) return st;
    if (!mt__db_is_fingerprint(fingerprint))
        return mt__fail(err, errlen, MT_INVALID_ARG, "device fingerprint '%.40s' is not 16 hex digits", fingerprint ? fingerprint : "");
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_DEV_PUT, &st, err, errlen);
    if (!s) return st;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, backend ? backend : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, platform ? platform : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, name ? name : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, driver ? driver : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, info_json ? info_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_double(s, 7, mt__now_epoch());
    return mt__db_exec(db, s, "storing a device", err, errlen);
}

mt_status mt_db_put_device(mt_db *db, const mt_device_info *d, char *err, size_t errlen) {
    if (!db || !d) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL device");
    mt_strbuf sb = {0};
    mt__device_info_json(&sb, d);
    if (sb.failed) {
        mt__sb_free(&sb);
        return mt__fail(err, errlen, MT_NOMEM, "db: out of memory");
    }
    char fp[17];
    memcpy(fp, d->fingerprint, 16);
    fp[16] = '\0';
    mt_status st = mt__db_put_device_row(db, fp, mt_backend_name(d->backend), d->platform, d->name, d->driver, sb.data, err, errlen);
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
    mt__db_copy_trunc(d.fingerprint, sizeof d.fingerprint, mt__db_col_text(s, 0));
    mt__db_copy_trunc(d.backend, sizeof d.backend, mt__db_col_text(s, 1));
    mt__db_copy_trunc(d.platform, sizeof d.platform, mt__db_col_text(s, 2));
    mt__db_copy_trunc(d.name, sizeof d.name, mt__db_col_text(s, 3));
    mt__db_copy_trunc(d.driver, sizeof d.driver, mt__db_col_text(s, 4));
    d.first_seen = sqlite3_column_double(s, 6);
    if (dev) *dev = d;
    if (!info) return;
    memset(info, 0, sizeof *info);
    memcpy(info->fingerprint, d.fingerprint, sizeof info->fingerprint);
    mt__db_copy_trunc(info->platform, sizeof info->platform, d.platform);
    mt__db_copy_trunc(info->name, sizeof info->name, d.name);
    mt__db_copy_trunc(info->driver, sizeof info->driver, d.driver);
    info->backend = strcmp(d.backend, "cuda") == 0 ? MT_BACKEND_CUDA : MT_BACKEND_OPENCL;
    if (strcmp(d.backend, "autotvm") == 0) autotvm_target_limits(d.name, info);
    const char *text = mt__db_col_text(s, 5);
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

mt_status mt_db_get_device(mt_db *db, const char *fingerprint, mt_db_device *dev, mt_device_info *info, char *err, size_t errlen) {
    if (!db || !fingerprint) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL fingerprint");
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_DEV_GET, &st, err, errlen);
    if (!s) return st;
    sqlite3_bind_text(s, 1, fingerprint, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        fill_device(s, dev, info);
        st = MT_OK;
    } else if (rc == SQLITE_DONE) {
        st = mt__fail(err, errlen, MT_NOT_FOUND, "no device with fingerprint %.20s in %s", fingerprint, db->path);
    } else {
        st = mt__db_sql_fail(db, rc, "reading a device", err, errlen);
    }
    sqlite3_reset(s);
    return st;
}

mt_status mt_db_for_each_device(mt_db *db, int (*cb)(const mt_db_device *dev, void *user), void *user, char *err, size_t errlen) {
    if (!db || !cb) return mt__fail(err, errlen, MT_INVALID_ARG, "db: NULL callback");
    mt_status st = MT_OK;
    sqlite3_stmt *s = mt__db_stmt(db, MT__DB_DEV_ALL, &st, err, errlen);
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
    st = rc == SQLITE_DONE ? MT_OK : mt__db_sql_fail(db, rc, "listing devices", err, errlen);
    sqlite3_reset(s);
    return st;
}

