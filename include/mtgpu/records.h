/* The tuning-records database.
 *
 * One SQLite file (WAL mode) holds every measurement: which workload, which
 * template and config, on which device (by fingerprint), the individual timed
 * runs, the median, and the outcome. Tuners write to it, one committed
 * transaction per record, so a killed tuner loses nothing; inference servers
 * open it read-only, also while a tuner writes, and ask for the best config.
 *
 * Records are keyed by (workload, template, config text, device fingerprint):
 * storing a key twice keeps the first record, unless the first one failed
 * because of the environment (mt_record_env_failure): then the new one
 * replaces it.
 *
 * Default location: $MTGPU_DB, else $XDG_CACHE_HOME/mtgpu/tuning.db, else
 * ~/.cache/mtgpu/tuning.db.
 *
 * Errors follow the rule of docs/api.md: every call that can fail returns an
 * mt_status and writes its reason to the caller's `char *err, size_t errlen`
 * (NULL or 0: not wanted); the handle keeps no message. A failed write
 * leaves the database as it was (its transaction is rolled back), and a
 * failed read leaves its out-parameters as they were unless its comment says
 * otherwise.
 *
 * Read-only handles (mt_db_params.readonly = 1), for inference servers:
 *   - the file must exist and be an mtgpu database (a missing file is MT_IO,
 *     an empty one MT_CORRUPT); nothing is ever written to it: no schema is
 *     created or upgraded, the journal mode is left as the writer set it;
 *   - every read sees the transactions committed up to its start, including
 *     those a writer commits while the handle is open; in WAL mode the
 *     reader and the writer do not wait for each other;
 *   - SQLite keeps the reader's view in the -wal and -shm files beside the
 *     database: they must exist (a writer has the file open) or the
 *     directory must let the reader create them;
 *   - on read-only media (a database baked into a read-only container image
 *     or mount, or a directory the reader cannot write) where no -shm file
 *     exists, the file is opened as immutable (SQLite's immutable=1): no
 *     locks, no -wal or -shm. This is right only while nothing changes the
 *     file: a writer that can write there (another user with the directory's
 *     permission) must not run while such a handle is open, or the reader
 *     may see a torn or stale file. A -wal or -journal file with contents
 *     but no -shm file in such a directory holds transactions an immutable
 *     reader would miss: the open fails MT_IO, asking for a checkpoint;
 *   - a version 1 file is read as it is, without preferences;
 *   - every write (records, devices, preferences) fails MT_IO.
 *
 * Threads: one mt_db handle must not be used by two threads at once; open one
 * handle per thread (any number of handles and processes may share a file).
 * A walk's callback may read through the handle it was called from, but not
 * write through it (use another handle). */
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
    int create;          /* create the file when missing (default 1; ignored when readonly); its directory must exist,
                            except for the default location (path NULL), whose directories are created */
    int create_dirs;     /* also create the missing directories of an explicit path (default 0) */
    int busy_timeout_ms; /* how long a call waits for another process's lock before MT_IO (default 10000) */
    int durable;         /* 1: fsync every commit (synchronous=FULL), surviving power loss; 0 (default):
                            synchronous=NORMAL, which survives a killed process but may lose the last
                            commits (never consistency) on power loss */
} mt_db_params;

mt_db_params mt_db_default_params(void);

/* Writes the default database path into buf: $MTGPU_DB, else
 * $XDG_CACHE_HOME/mtgpu/tuning.db, else $HOME/.cache/mtgpu/tuning.db.
 * MT_INVALID_ARG without a buffer, MT_UNAVAILABLE when none of those
 * variables is set, MT_RANGE when buf is too small; on an error buf is "".
 * Creates nothing (mt_db_open(NULL, ...) creates the directories). */
mt_status mt_db_default_path(char *buf, size_t len, char *err, size_t errlen);

/* Opens (or creates) the database at path (NULL: mt_db_default_path).
 * params may be NULL (defaults). A new file gets the current schema; an
 * existing one must be an mtgpu database of a schema version this library
 * reads (opened for writing, a version 1 file is upgraded to version 2).
 * A path that exists must be a regular file (a FIFO or a device is refused
 * unread). Errors: MT_CORRUPT (not a SQLite file, truncated or damaged,
 * another application's database, or a newer/unknown schema version: the
 * file is never modified), MT_IO (cannot open or create: permissions, a
 * missing file when readonly, a missing directory of an explicit path
 * without create_dirs, not a regular file, locked past the busy timeout,
 * a disk error with the system's reason), MT_INVALID_ARG (out NULL, an
 * empty path), the errors of mt_db_default_path, MT_NOMEM. On success *out
 * is a handle to free with mt_db_close; on an error *out is NULL. */
mt_status mt_db_open(const char *path, const mt_db_params *params, mt_db **out, char *err, size_t errlen);
/* Closes the handle (NULL is fine). */
void mt_db_close(mt_db *db);
/* The path the handle was opened with (owned by the handle; "" for NULL). */
const char *mt_db_path(const mt_db *db);

/* ---- devices ---- */

/* Registers a device (keyed by info->fingerprint) with its backend, platform,
 * name, driver and every field of info as JSON. A device already present is
 * left as it was (fingerprints cover what changes kernel speed), except a
 * placeholder row made by mt_db_put_record, which is filled in. MT_OK in
 * both cases. MT_INVALID_ARG for a NULL argument or a fingerprint that is not
 * 16 hex digits; MT_IO when the handle is read-only or the disk fails;
 * MT_NOMEM. */
mt_status mt_db_put_device(mt_db *db, const mt_device_info *info, char *err, size_t errlen);

/* A device row as stored. */
typedef struct mt_db_device {
    char fingerprint[17];
    char backend[16];    /* "opencl", "cuda", "autotvm", "unknown" (placeholder) */
    char platform[128];
    char name[160];      /* for "autotvm": the AutoTVM target string */
    char driver[128];
    double first_seen;   /* seconds since the epoch */
} mt_db_device;

/* Looks a device up by fingerprint into dev and info (either may be NULL).
 * info is rebuilt from the stored JSON (fields it lacks are zero; for
 * AutoTVM targets, typical limits of that kind of GPU). MT_NOT_FOUND when
 * the database has no such device, MT_INVALID_ARG for a NULL db or
 * fingerprint, MT_IO or MT_CORRUPT when the read fails. */
mt_status mt_db_get_device(mt_db *db, const char *fingerprint, mt_db_device *dev, mt_device_info *info, char *err, size_t errlen);
/* Calls cb for every device in order of first appearance; cb returning
 * non-zero stops the walk (and the call returns MT_OK). MT_INVALID_ARG for a
 * NULL db or cb; a read that fails stops the walk with its error (MT_IO,
 * MT_CORRUPT) after the devices passed so far. */
mt_status mt_db_for_each_device(mt_db *db, int (*cb)(const mt_db_device *dev, void *user), void *user, char *err, size_t errlen);

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
    char source[MT_RECORD_SOURCE_LEN];      /* "measured", MT_RECORD_SOURCE_COLD or "autotvm:<target>"; "" in a put: "measured" */
} mt_record;

/* The source of a record timed cold (mt_measure_params.cold: weights
 * evicted from the caches before every run). Selection ranks such
 * records among themselves where a workload has any (mt_select_config). */
#define MT_RECORD_SOURCE_COLD "measured-cold"

/* A zeroed record with config_index -1 and status MT_OK. */
void mt_record_init(mt_record *rec);

/* A failed record whose message begins with this failed because of the
 * environment, not its config: the measurement worker was killed from
 * outside (the out-of-memory killer, an operator) while measuring it, and
 * again in a fresh worker. Its status is MT_UNAVAILABLE. */
#define MT_RECORD_ENV_FAILURE_PREFIX "environment: "

/* 1 when rec failed because of the environment: its status is not MT_OK and
 * its message begins with MT_RECORD_ENV_FAILURE_PREFIX, or is what earlier
 * versions stored for a worker killed by SIGKILL ("worker crashed (signal
 * 9)", "the compiler process died: worker crashed (signal 9)"). A resumed
 * tune measures such a config again (it does not count as measured), and
 * mt_db_put_record replaces such a record with a new one of the same key. */
int mt_record_env_failure(const mt_record *rec);

/* Inserts rec in one committed transaction, registering its workload and (if
 * unknown) a placeholder row for its device. *inserted (inserted may be
 * NULL) is 1 when the record was stored, and 0 when the key already exists:
 * then the stored record is kept, nothing changes and the call returns MT_OK
 * (except where the stored record failed because of the environment,
 * mt_record_env_failure: rec replaces it and *inserted is 1).
 * A median_ms <= 0 with costs given is computed from the costs.
 * MT_INVALID_ARG for a NULL argument or a record that cannot be stored
 * (invalid workload, empty template or config, a device that is not 16 hex
 * digits, ncosts out of 0..MT_RECORD_MAX_COSTS, negative or non-finite times,
 * status MT_OK without a positive median or costs, unterminated text); MT_IO
 * when the database is read-only or the disk fails; MT_NOMEM. A failed put
 * leaves the database as it was and *inserted 0. */
mt_status mt_db_put_record(mt_db *db, const mt_record *rec, int *inserted, char *err, size_t errlen);

/* *found = 1 when a record with that key exists, else 0. MT_INVALID_ARG for
 * a NULL argument; MT_IO or MT_CORRUPT when the read fails (*found 0). */
mt_status mt_db_has_record(mt_db *db, const mt_workload *wl, const char *template_name, const char *config_text, const char *device_fp,
                           int *found, char *err, size_t errlen);

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

/* Counts the records matching (wl, device_fp, template_name) into *n; each
 * may be NULL (matches all). mt_db_count_filter counts those a filter covers
 * (f NULL: all; order and limit do not apply). MT_INVALID_ARG for a NULL db
 * or n; MT_IO or MT_CORRUPT when the read fails (*n 0). */
mt_status mt_db_count(mt_db *db, const mt_workload *wl, const char *device_fp, const char *template_name, int64_t *n, char *err,
                      size_t errlen);
mt_status mt_db_count_filter(mt_db *db, const mt_db_filter *f, int64_t *n, char *err, size_t errlen);

/* Calls cb with each matching record (filter NULL: all), in the filter's
 * order; cb returning non-zero stops the walk. The record passed to cb lives
 * until cb returns; cb may read through db but must not write through it
 * (use another handle). Rows that cannot be decoded (damaged by something
 * other than mtgpu: a workload, config, device or status that does not
 * parse, costs that are not a list of finite non-negative numbers, a median
 * that is not a number, a build time or timestamp that is not finite, or
 * status ok without a finite positive median) are
 * not passed to cb; the walk goes on past them, and the call then returns
 * MT_CORRUPT naming the first such row it met (also when cb stopped the walk
 * later), else MT_OK. A read that fails stops the walk with its error
 * (MT_IO, MT_CORRUPT). MT_INVALID_ARG for a NULL db or cb; MT_NOMEM. */
mt_status mt_db_for_each(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user, char *err,
                         size_t errlen);
/* mt_db_for_each that also counts the damaged rows it passed over into
 * *damaged (may be NULL; set also on an error). */
mt_status mt_db_for_each_counted(mt_db *db, const mt_db_filter *filter, int (*cb)(const mt_record *rec, void *user), void *user,
                                 int64_t *damaged, char *err, size_t errlen);

/* The fastest record with status MT_OK for (wl, device_fp) into *out, as
 * stored: no check that its template still builds it (the best-config
 * selection of an inference server makes those checks). Ties go to the
 * earlier record; damaged rows are passed over. MT_NOT_FOUND when there is
 * none, MT_INVALID_ARG for a NULL argument, MT_IO or MT_CORRUPT when the
 * read fails. */
mt_status mt_db_best(mt_db *db, const mt_workload *wl, const char *device_fp, mt_record *out, char *err, size_t errlen);

/* ---- preferences: configs chosen inside a network ----
 *
 * A record's time is its kernel's alone, run again and again on the same
 * buffers, caches warm. Inside a network the kernel reads weights and
 * inputs other layers have pushed out of cache, and the order of records can
 * change (mtgpu refine times the candidates there). A preference stores the
 * config that won, per workload and device, and the best-config selection
 * (the executor, the embedding API, mtgpu best) takes it before any record. */
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

/* Stores p in one committed transaction, replacing the preference of the
 * same workload and device. MT_INVALID_ARG for a NULL argument, an invalid
 * workload, a device that is not a fingerprint, an unknown template,
 * unterminated text or non-positive times; MT_IO when the handle is
 * read-only or the disk fails; MT_UNSUPPORTED when the file has no
 * preferences table. */
mt_status mt_db_put_preference(mt_db *db, const mt_preference *p, char *err, size_t errlen);
/* Removes the preference of (wl, device_fp), if any: *deleted (may be NULL)
 * is 1 when one was removed, else 0. MT_INVALID_ARG for a NULL argument;
 * MT_IO when the handle is read-only or the disk fails. */
mt_status mt_db_delete_preference(mt_db *db, const mt_workload *wl, const char *device_fp, int *deleted, char *err, size_t errlen);
/* The preference of (wl, device_fp) into *out. MT_NOT_FOUND when there is
 * none (always, for a version 1 file opened read-only); MT_CORRUPT for a
 * damaged row; MT_INVALID_ARG for a NULL argument; MT_IO when the read
 * fails. */
mt_status mt_db_get_preference(mt_db *db, const mt_workload *wl, const char *device_fp, mt_preference *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
