/* Replay: a tuning run's measurements answered from recorded data.
 *
 * A replay reads, once, the records one device has in a records database for
 * a set of (workload, template) units, and then answers a batch of configs as
 * the measurer would (mt_measurer_measure_batch): each recorded config comes
 * back with its recorded status, median, timed runs, message and compile
 * time. A config that was not recorded is refused, never made up. The
 * recorded configs of a unit (mt__replay_configs) are what a search is
 * restricted to (mt_search_params.only), so that it proposes nothing else.
 *
 * No device is opened and no process started: answering is a binary search
 * per config, so a replayed run costs what its search and cost model cost
 * (what comparing search strategies and cost models over many seeds needs). */
#ifndef MTGPU_REPLAY_H
#define MTGPU_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "measurer.h"
#include "mtgpu/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt__replay mt__replay;

/* Opens the records database at path read-only and loads the records of
 * device_fp for every task of tasks[0..ntasks) and every template of the
 * comma-separated list `templates` (NULL or "": every template) that accepts
 * it. device_fp NULL or "": the device with the most such records; when two
 * devices tie, MT_INVALID_ARG listing them. A device with none of these
 * records, or a database without any: MT_NOT_FOUND listing the devices that
 * have some. *dev receives the device as the database describes it;
 * *described is 0 when the database holds only its fingerprint (then its
 * limits are unknown). Records whose config does not parse in today's space
 * of their template are left out. The database is closed before returning. */
mt_status mt__replay_open(const char *path, const char *device_fp, const mt_task *tasks, int ntasks, const char *templates, mt__replay **out,
                          mt_device_info *dev, int *described, char *err, size_t errlen);
void mt__replay_close(mt__replay *r);

/* The recorded config indices of (wl, t) in the template's space, ascending
 * and distinct, into *idx (owned by the replay; never NULL, also when *n is
 * 0) and *n. A unit the replay was not opened for has none. */
void mt__replay_configs(const mt__replay *r, const mt_workload *wl, const mt_template *t, const uint64_t **idx, size_t *n);

/* Answers cfgs[0..n) of (wl, t) in space sp from the records: results[i]
 * carries cfgs[i]'s recorded outcome (sent_to_worker 1, wall_s 0). MT_OK when
 * every config was recorded; otherwise MT_NOT_FOUND naming the first that was
 * not (in err), with skipped = 1 on the results of those not recorded. */
mt_status mt__replay_measure_batch(mt__replay *r, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs,
                                   int n, mt_measurer_result *results, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
