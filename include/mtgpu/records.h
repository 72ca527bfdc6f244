/* The tuning-records database.
 *
 * One SQLite file (WAL mode) holds every measurement: which workload, which
 * template and config, on which device (by fingerprint), the individual timed
 * runs, the median, and the outcome. Tuners write to it, one committed
 * transaction per record, so a killed tuner loses nothing; inference servers
 * open it read-only, also while a tuner writes, and ask for the best config.
 *
 * Records are keyed by (workload, template, config text, device fingerprint):
 * storing a key twice keeps the first record.
 *
 * Default location: $MTGPU_DB, else $XDG_CACHE_HOME/mtgpu/tuning.db, else
 * ~/.cache/mtgpu/tuning.db.
 *
 * Threads: one mt_db handle must not be used by two threads at once; open one
 * handle per thread (any number of handles and processes may share a file). */
#ifndef MTGPU_DB_H
#define MTGPU_DB_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/device.h"
#include "mtgpu/status.h"
#include "mtgpu/version.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The schema this library writes, and the newest it reads. */
#define MT_DB_SCHEMA_VERSION 2 /* 2 added preferences; a version 1 file opened for writing is upgraded */

#define MT_RECORD_MAX_COSTS 32
#define MT_RECORD_TEMPLATE_LEN 16
#define MT_RECORD_CONFIG_LEN 1536
#define MT_RECORD_MESSAGE_LEN 1024
#define MT_RECORD_SOURCE_LEN 160
#define MT_RECORD_VERSION_LEN 32

typedef struct mt_db mt_db;

typedef struct mt_db_params {
    int readonly;        /* open for reading only (inference servers); the file must exist (default 0) */
    int create;          /* create the file and its parent directories when missing (default 1; ignored when readonly) */
    int busy_timeout_ms; /* how long a call waits for another process's lock before MT_IO (default 10000) */
    int durable;         /* 1: fsync every commit (synchronous=FULL), surviving power loss; 0 (default):
                            synchronous=NORMAL, which survives a killed process but may lose the last
                            commits (never consistency) on power loss */
} mt_db_params;

mt_db_params mt_db_default_params(void);

/* Writes the default database path into buf: $MTGPU_DB, else
 * $XDG_CACHE_HOME/mtgpu/tuning.db, else $HOME/.cache/mtgpu/tuning.db.
 * MT_UNAVAILABLE when none of those variables is set, MT_RANGE when buf is
 * too small. Creates nothing (mt_db_open creates the directories). */
mt_status mt_db_default_path(char *buf, size_t len);

/* Opens (or creates) the database at path (NULL: mt_db_default_path).
 * params may be NULL (defaults). A new file gets the current schema; an
 * existing one must be an mtgpu database of a schema version this library
 * reads. Errors: MT_CORRUPT (not a SQLite file, truncated or damaged, another
 * application's database, or a newer/unknown schema version: the file is
 * never modified), MT_IO (cannot open or create: permissions, missing file
 * when readonly, locked past the busy timeout), MT_NOMEM. The message goes to
 * err. On success *out is a handle to free with mt_db_close. */
mt_status mt_db_open(const char *path, const mt_db_params *params, mt_db **out, char *err, size_t errlen);
/* Closes the handle (NULL is fine). */
void mt_db_close(mt_db *db);
/* The path the handle was opened with. */
const char *mt_db_path(const mt_db *db);
/* The message of the last failed call on this handle ("" if none). Owned by
 * the handle, valid until the next call on it. */
const char *mt_db_errmsg(const mt_db *db);

/* ---- devices ---- */

/* Registers a device (keyed by info->fingerprint) with its backend, platform,
 * name, driver and every field of info as JSON. A device already present is
 * left as it was (fingerprints cover what changes kernel speed), except a
 * placeholder row made by mt_db_put_record, which is filled in. */
mt_status mt_db_put_device(mt_db *db, const mt_device_info *info);

/* A device row as stored. */
typedef struct mt_db_device {
    char fingerprint[17];
    char backend[16];    /* "opencl", "cuda", "autotvm", "unknown" (placeholder) */
    char platform[128];
    char name[160];      /* for "autotvm": the AutoTVM target string */
    char driver[128];
    double first_seen;   /* seconds since the epoch */
} mt_db_device;

/* Looks a device up by fingerprint: MT_NOT_FOUND if absent. info may be NULL;
 * otherwise it is rebuilt from the stored JSON (fields it lacks are zero; for
 * AutoTVM targets, typical limits of that kind of GPU). */
mt_status mt_db_get_device(mt_db *db, const char *fingerprint, mt_db_device *dev, mt_device_info *info);
/* Calls cb for every device in order of first appearance; cb returning
 * non-zero stops the walk (and the call returns MT_OK). */
mt_status mt_db_for_each_device(mt_db *db, int (*cb)(const mt_db_device *dev, void *user), void *user);

/* ---- records ---- */

typedef struct mt_record {
    int64_t id;                             /* row id (set by reads; ignored by mt_db_put_record) */
    mt_workload wl;
    char template_name[MT_RECORD_TEMPLATE_LEN];
    char config[MT_RECORD_CONFIG_LEN];      /* mt_config_format text */
    int64_t config_index;                   /* index in the template's space; -1 unknown */
    char device[17];                        /* device fingerprint */
    int ncosts;
    double costs_ms[MT_RECORD_MAX_COSTS];   /* the individual timed runs */
    double median_ms;                       /* 0 when not timed */
    mt_status status;                       /* MT_OK for a valid measurement */
    char message[MT_RECORD_MESSAGE_LEN];    /* why status is not OK */
    double build_s;                         /* compile seconds (0 when cached or unknown) */
    double timestamp;                       /* seconds since the epoch; <= 0 in a put: now */
    char version[MT_RECORD_VERSION_LEN];    /* mtgpu version that measured it; "" in a put: this one */
    char source[MT_RECORD_SOURCE_LEN];      /* "measured" or "autotvm:<target>"; "" in a put: "measured" */
} mt_record;

/* A zeroed record with config_index -1 and status MT_OK. */
void mt_record_init(mt_record *rec);

/* Inserts rec in one committed transaction, registering its workload and (if
 * unknown) a placeholder row for its device. When the key already exists the
 * stored record is kept, nothing changes and the call returns MT_OK with
 * *inserted = 0 (inserted may be NULL). MT_INVALID_ARG for a record that
 * cannot be stored (invalid workload, empty template or config, a device that
 * is not 16 hex digits, ncosts out of 0..MT_RECORD_MAX_COSTS, negative or
 * non-finite times, status MT_OK without a positive median or costs). A
 * median_ms <= 0 with costs given is computed from the costs. MT_IO when the database is read-only or the disk fails; a failed
 * put leaves the database as it was. */
mt_status mt_db_put_record(mt_db *db, const mt_record *rec, int *inserted);

/* *found = 1 when a record with that key exists. */
mt_status mt_db_has_record(mt_db *db, const mt_workload *wl, const char *template_name, const char *config_text, const char *device_fp,
                           int *found);

/* Which records a query covers; NULL members match everything. */
typedef struct mt_db_filter {
    const mt_workload *wl;
    const char *device;        /* fingerprint */
    const char *template_name;
    const char *source_prefix; /* e.g. "autotvm:" */
    int only_ok;               /* only records with status MT_OK */
    int order_by_median;       /* 0: insertion order; 1: fastest first (untimed last), ties by insertion */
    int64_t limit;             /* at most this many (<= 0: all) */
} mt_db_filter;

/* Counts records matching (wl, device_fp, template_name); each may be NULL. */
mt_status mt_db_count(mt_db *db, const mt_workload *wl, const char *device_fp, const char *template_name, int64_t *n);
mt_status mt_db_count_filter(mt_db *db, const mt_db_filter *f, int64_t *n);

/* Calls cb with each matching record (filter NULL: all), in the filter's
 * order; cb returning non-zero stops the walk. The record passed to cb lives
 * until cb returns; cb may read through db but must not write through it
 * (use another handle). Rows that cannot be decoded (damaged by something other
 * than mtgpu) are not passed to cb; the walk goes on and finally returns
 * MT_CORRUPT naming the first such row. */
mt_status mt_db_for_each(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user);

/* The fastest record with status MT_OK for (wl, device_fp) into *out;
 * MT_NOT_FOUND when there is none. Ties go to the earlier record. */
mt_status mt_db_best(mt_db *db, const mt_workload *wl, const char *device_fp, mt_record *out);

/* ---- preferences: configs chosen inside a network ----
 *
 * A record's time is its kernel's alone, run again and again on the same
 * buffers, caches warm. Inside a network the kernel reads weights and
 * inputs other layers have pushed out of cache, and the order of records can
 * change (mt_network_refine in net/refine.h times the candidates there). A
 * preference stores the config that won, per workload and device, and
 * mt_best_config returns it before any record. */
#define MT_PREFERENCE_NETWORK_LEN 64

typedef struct mt_preference {
    mt_workload wl;
    char device[17];                          /* device fingerprint */
    char template_name[MT_RECORD_TEMPLATE_LEN];
    char config[MT_RECORD_CONFIG_LEN];        /* mt_config_format text */
    double in_network_ms;                     /* the chosen config's time inside the network (all its layers) */
    double fastest_ms;                        /* in the same passes, the time of the fastest record (rank 1) */
    char network[MT_PREFERENCE_NETWORK_LEN];  /* where it was measured */
    double timestamp;                         /* seconds since the epoch (0 when storing: now) */
    char version[MT_RECORD_VERSION_LEN];      /* set by reads */
} mt_preference;

/* Stores p, replacing the preference of the same workload and device.
 * MT_INVALID_ARG for an invalid workload, a device that is not a
 * fingerprint, an unknown template, unterminated text or non-positive times;
 * MT_IO when the handle is read-only. */
mt_status mt_db_put_preference(mt_db *db, const mt_preference *p);
/* Removes the preference of (wl, device_fp), if any (*deleted, may be NULL, says). */
mt_status mt_db_delete_preference(mt_db *db, const mt_workload *wl, const char *device_fp, int *deleted);
/* The preference of (wl, device_fp): MT_NOT_FOUND when there is none. */
mt_status mt_db_get_preference(mt_db *db, const mt_workload *wl, const char *device_fp, mt_preference *out);

#ifdef __cplusplus
}
#endif
#endif
