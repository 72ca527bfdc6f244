/* Best-config selection: which config an inference server runs for a
 * workload on a device, from the records database (in-network preference,
 * then the fastest usable record) or, without one, a default config.
 *
 * The store (include/mtgpu/records.h) only keeps rows; this is the policy
 * that reads them, and it builds kernels to decide: a record is used only
 * while its template still exists, accepts the workload, reads its weights
 * in a layout the caller gives, and still builds the config. */
#ifndef MTGPU_RECORDS_SELECT_H
#define MTGPU_RECORDS_SELECT_H

#include <stddef.h>

#include "mtgpu/records.h"
#include "space.h"
#include "template.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a selected config came from. */
typedef enum mt_select_from {
    MT_SELECT_FROM_DEFAULT,    /* the default config (no usable record, or no database) */
    MT_SELECT_FROM_RECORD,     /* a measured record: the fastest usable one, or the rank-th */
    MT_SELECT_FROM_PREFERENCE, /* the in-network preference (mt_db_put_preference) */
    MT_SELECT_FROM_PIN,        /* the query's pinned template and config */
} mt_select_from;

/* What to select a config for. Make one with mt_select_query_default, then
 * change what differs. */
typedef struct mt_select_query {
    mt_db *db;                 /* the records; NULL: none, the default config */
    const mt_workload *wl;     /* borrowed for the call */
    const mt_device_info *dev; /* records are those of dev->fingerprint; its limits bound default configs */
    unsigned layouts;          /* the weight layouts the caller can give, a mask of 1 << mt_weight_layout that must
                                  include MT_WEIGHTS_OIHW (every default config's); templates reading other layouts
                                  are passed over (default MT_WEIGHT_LAYOUTS_ALL) */
    int rank;                  /* 0 (default): the preference, else the fastest usable record; r >= 1: preferences
                                  ignored, the r-th fastest usable record (1: the fastest), or the slowest usable one
                                  when there are fewer than r, for comparing candidates */
    const char *pin_template;  /* with pin_config (rank 0): this template and config, whatever the database
                                  holds; one the template cannot build for wl, or whose layout the caller
                                  cannot give, is an error (MT_INVALID_CONFIG). NULL: none */
    const char *pin_config;
} mt_select_query;

/* A query for wl on dev from db (may be NULL) with every template's layout
 * accepted and rank 0. */
mt_select_query mt_select_query_default(mt_db *db, const mt_workload *wl, const mt_device_info *dev);

/* The selected config. */
typedef struct mt_select_result {
    const mt_template *t;  /* the template (static, not owned) */
    mt_space space;        /* t's space for the workload; owned: mt_select_result_free frees it */
    mt_config cfg;         /* the config, in space */
    mt_record rec;         /* the database record (source "in-network:NETWORK" for a preference; where the
                              database holds no record of the preferred config, one made from the preference,
                              median_ms 0) or, for a default, a record with workload, template, config and
                              device set, median_ms 0 and source "default" */
    mt_select_from from;
    char db_note[512];     /* why the database could not be read in full (a damaged row, a failed read), which
                              the selection went past with what it had found or the default; "" when none */
} mt_select_result;

/* Selects the config to run q->wl with on q->dev.
 *
 * From the database (q->db not NULL): with rank 0, the in-network preference
 * of (wl, dev->fingerprint) when there is one whose template is usable and
 * whose config still builds; else the fastest MT_OK record for
 * (wl, dev->fingerprint), of the 256 fastest, whose template still exists,
 * accepts wl and reads a layout in q->layouts, whose config text still
 * parses in the template's current space, and which the template still
 * builds. A rank r >= 1 takes the r-th such record instead.
 *
 * Otherwise a default. On a CPU device (dev->is_cpu), by the layer's shape
 * where q->layouts holds the weights: `wino` on 3x3 stride-1 layers with 16
 * input channels or more and 28x28 outputs or more, `gemm` on unpadded 1x1
 * stride-1 layers with at most 160 input channels and 28x28 outputs or more
 * and on depthwise layers with 28x28 outputs or fewer, each only where its
 * CPU-preferred config fits the device. Else `depthwise` for
 * depthwise workloads; on a CPU `kvec` where it accepts wl and q->layouts
 * holds its OIHW16o weights; else `gemm` (falling back to `direct`, then to
 * any usable template). The config is mt_default_config's.
 *
 * On MT_OK *out holds the selection; free it with mt_select_result_free. A
 * database error does not fail the call (an inference server must keep
 * serving): it is described in out->db_note. Errors: MT_INVALID_ARG (NULL
 * query members, a negative rank, layouts without OIHW), the workload's
 * validation error (MT_RANGE), MT_NOT_FOUND when no template accepts wl or
 * no default config qualifies, MT_NOMEM; then *out is left as it was and
 * nothing needs freeing. */
mt_status mt_select_config(const mt_select_query *q, mt_select_result *out, char *err, size_t errlen);

/* Frees what a successful mt_select_config put in r (NULL is fine); r may
 * then be reused. */
void mt_select_result_free(mt_select_result *r);

/* The default config of template t for wl (sp: t's space for wl) on dev: the
 * rule mt_select_config uses for its default, applied to one template. The
 * tuner measures it first for each template, so every task starts from a
 * sound config.
 *
 * On a CPU the template's CPU preferences (knob values that make fast
 * kernels on PoCL) give the config when the workload can take them (where
 * that config passes the device's limits, a narrower second try: wino with
 * one register tile per work-group).
 * Otherwise t's configs are visited in a fixed order: every index in
 * ascending order when the space has at most 4096 configs, else 4096 draws
 * of mt_space_random from a fixed seed. A config qualifies when the template
 * builds it and the kernel passes mt_kernel_check_limits against the limits
 * of dev (max_work_group_size, max_work_item_sizes, local_mem_bytes, and on
 * CUDA GPUs max_registers_per_thread). Of the first 64 qualifying configs
 * the one whose work-group size is closest to 128 work-items (in log2), with
 * the fewest private floats beyond 64 as the tie-break, then the earliest,
 * is chosen. The result depends only on wl, the template's space and dev's
 * limits: the same inputs always give the same config.
 *
 * MT_INVALID_ARG for a NULL argument, MT_NOT_FOUND when no config
 * qualifies; *cfg is written only on MT_OK. */
mt_status mt_default_config(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, mt_config *cfg,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
