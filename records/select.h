/* Best-config selection: which config an inference server runs for a
 * workload on a device, from the records database (in-network preference,
 * then the fastest usable record) or, without one, a default config. */
#ifndef MTGPU_RECORDS_SELECT_H
#define MTGPU_RECORDS_SELECT_H

#include "mtgpu/records.h"
#include "space.h"
#include "template.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The config to run wl with on dev.
 *
 * From the database (db may be NULL to skip it): the in-network preference
 * of (wl, dev->fingerprint) (mt_db_put_preference) when there is one whose
 * template is usable and whose config still builds, with rec its record
 * (source "in-network:NETWORK"); else the fastest MT_OK record for
 * (wl, dev->fingerprint) whose template still exists and accepts wl, whose
 * config text still parses in the template's current space, and which the
 * template still builds; *from_db = 1 either way.
 *
 * Otherwise a default, *from_db = 0: the template is `depthwise` for
 * depthwise workloads; on a CPU device (dev->is_cpu) `kvec` where it accepts
 * wl (mt_best_config_layouts: and the caller takes its OIHW16o weights); else
 * `gemm` (falling back to `direct`, then to any template that accepts wl).
 * On a CPU the template's CPU preferences give the config (mt_default_config)
 * when the workload can take them. Otherwise its configs are visited in a fixed order: every
 * index in ascending order when the space has at most 4096 configs, else 4096
 * draws of mt_space_random from a fixed seed. A config qualifies when the
 * template builds it and the kernel passes mt_kernel_check_limits against the
 * limits of dev (max_work_group_size, max_work_item_sizes, local_mem_bytes,
 * and on CUDA GPUs max_registers_per_thread). Of the first 64 qualifying
 * configs the one whose work-group size is closest to 128 work-items (in
 * log2), with the fewest private floats beyond 64 as the tie-break, then the
 * earliest, is chosen. The result depends only on wl, the template's space
 * and dev's limits: the same inputs always give the same config.
 *
 * On MT_OK: *t is the template, *space its space for wl (free it with
 * mt_space_free), *cfg the config; rec (may be NULL) gets the database record
 * or, for a default, a record with template, config, workload and device set,
 * median_ms 0 and source "default". MT_NOT_FOUND when no template accepts wl
 * or no default config qualifies; on an error nothing needs freeing. A
 * database error does not fail the call: the default is used and the error is
 * reported in err with MT_OK returned. */
mt_status mt_best_config(mt_db *db, const mt_workload *wl, const mt_device_info *dev, const mt_template **t, mt_space *space, mt_config *cfg,
                         mt_record *rec, int *from_db, char *err, size_t errlen);

/* mt_best_config among the templates whose weight layout
 * (mt_template_weight_layout) is in `layouts`, a mask of 1 << mt_weight_layout
 * that must include MT_WEIGHTS_OIHW (the default configs' layout): for a
 * caller that gives its weights in OIHW only, layouts = 1 << MT_WEIGHTS_OIHW.
 * Records of other templates are passed over. */
mt_status mt_best_config_layouts(mt_db *db, const mt_workload *wl, const mt_device_info *dev, unsigned layouts, const mt_template **t,
                                 mt_space *space, mt_config *cfg, mt_record *rec, int *from_db, char *err, size_t errlen);

/* mt_best_config_layouts by rank, for comparing candidates: rank 0 is
 * mt_best_config_layouts itself; rank r >= 1 ignores preferences and takes
 * the r-th fastest usable record (1: the fastest), or the slowest usable one
 * when there are fewer than r, or the default when there is none. */
mt_status mt_best_config_ranked(mt_db *db, const mt_workload *wl, const mt_device_info *dev, unsigned layouts, int rank, const mt_template **t,
                                mt_space *space, mt_config *cfg, mt_record *rec, int *from_db, char *err, size_t errlen);

/* The default config of template t for wl (sp: t's space for wl) on dev: the
 * rule mt_best_config uses for its default, applied to one template. The
 * tuner measures it first for each template, so every task starts from a
 * sound config. MT_NOT_FOUND when no config qualifies. */
mt_status mt_default_config(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, mt_config *cfg,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
