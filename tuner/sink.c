/* Record sinks of the tuning loop: the records database, or nothing. */
#include "tune-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"

int mt__template_selected(const char *list, const char *name) {
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

/* ---- the records database ---- */

static mt_status db_device(void *ctx, const mt_device_info *dev, char *err, size_t errlen) {
    mt_db *db = ctx;
    char msg[1024];
    mt_status st = mt_db_put_device(db, dev, msg, sizeof msg);
    if (st != MT_OK) return mt__fail(err, errlen, st, "tune: could not record the device: %s", msg);
    return MT_OK;
}

static mt_status db_put(void *ctx, const mt_record *rec, char *err, size_t errlen) {
    mt_db *db = ctx;
    int inserted = 0;
    char msg[1024];
    mt_status st = mt_db_put_record(db, rec, &inserted, msg, sizeof msg);
    if (st != MT_OK) return mt__fail(err, errlen, st, "tune: could not store a record: %s", msg);
    return MT_OK;
}

static mt_status db_for_each(void *ctx, const mt_db_filter *f, int (*cb)(const mt_record *rec, void *user), void *user, int64_t *damaged,
                             char *err, size_t errlen) {
    mt_db *db = ctx;
    char msg[1024];
    mt_status st = mt_db_for_each_counted(db, f, cb, user, damaged, msg, sizeof msg);
    if (st == MT_CORRUPT && damaged && *damaged > 0) return mt__fail(err, errlen, st, "%s", msg); /* rows passed over: names the first */
    if (st != MT_OK) return mt__fail(err, errlen, st, "tune: reading the database failed: %s", msg);
    return MT_OK;
}

static void db_close(void *ctx) { mt_db_close(ctx); }

static const mt__sink_i db_iface = {
    /* .device = */ db_device,
    /* .put = */ db_put,
    /* .for_each = */ db_for_each,
    /* .close = */ db_close,
};

mt_status mt__sink_db(const char *path, mt__sink *out, char *err, size_t errlen) {
    mt__sink_none(out);
    char dbpath[4096];
    mt_status st;
    if (!path && (st = mt_db_default_path(dbpath, sizeof dbpath, NULL, 0)) != MT_OK)
        return mt__fail(err, errlen, st, "tune: no default database path (set --db or $MTGPU_DB)");
    mt_db_params dbp = mt_db_default_params();
    mt_db *db = NULL;
    /* NULL for the default location, whose directories mt_db_open creates. */
    if ((st = mt_db_open(path, &dbp, &db, err, errlen)) != MT_OK) return st;
    *out = (mt__sink){&db_iface, db};
    return MT_OK;
}

/* ---- nothing ---- */

static mt_status none_device(void *ctx, const mt_device_info *dev, char *err, size_t errlen) {
    (void)ctx, (void)dev, (void)err, (void)errlen;
    return MT_OK;
}

static mt_status none_put(void *ctx, const mt_record *rec, char *err, size_t errlen) {
    (void)ctx, (void)rec, (void)err, (void)errlen;
    return MT_OK;
}

static const mt__sink_i none_iface = {
    /* .device = */ none_device,
    /* .put = */ none_put,
    /* .for_each = */ NULL,
    /* .close = */ NULL,
};

void mt__sink_none(mt__sink *out) { *out = (mt__sink){&none_iface, NULL}; }

void mt__sink_close(mt__sink *s) {
    if (!s || !s->iface) return;
    if (s->iface->close) s->iface->close(s->ctx);
    mt__sink_none(s);
}
