/* Private: database calls shared by records/db.c and records/autotvm.c. */
#ifndef MTGPU_DB_IMPL_H
#define MTGPU_DB_IMPL_H

#include "mtgpu/records.h"

/* Registers a device row given its columns (info_json must be a JSON object).
 * Like mt_db_put_device: an existing non-placeholder row is kept. */
mt_status mt__db_put_device_row(mt_db *db, const char *fingerprint, const char *backend, const char *platform, const char *name,
                                const char *driver, const char *info_json);

/* Median of v[0..n) (n >= 1); v is not modified. */
double mt__median(const double *v, int n);

/* Seconds since the epoch, with sub-second precision. */
double mt__now_epoch(void);

#endif
