/* Collecting cost-model training data: configs of generated workloads
 * (conv/workload_gen.h), measured and stored like a tune's. */
#ifndef MTGPU_TUNER_COLLECT_H
#define MTGPU_TUNER_COLLECT_H

#include "mtgpu/tuner.h"
#include "workload_gen.h"

/* Collecting training data (mtgpu collect): for each generated workload
 * gen/[first, first+count) and each of its templates, `configs` measurements,
 * the first ceil(random_frac x configs) drawn at random and the rest picked
 * by `guide_model` fitted on the task's records. Resumable like mt_tune:
 * what the database holds counts. */
typedef struct mt_collect_progress {
    int index;                 /* the workload's generator index */
    mt_workload wl;
    const char *template_name;
    const char *phase;         /* "random" or the guide model */
    int records;               /* of this (workload, template) on this device, after the phase */
    int errors;
    double best_ms;
    int measured_this_run;     /* over the whole collection */
    double elapsed_s;
} mt_collect_progress;

typedef struct mt_collect_params {
    mt_workload_gen_params gen;
    int first, count;          /* workload indices (default 0, 100) */
    int configs;               /* per (workload, template) (default 24) */
    double random_frac;        /* default 0.5 */
    const char *guide_model;   /* default "xgb" */
    int one_template;          /* 1: one template per workload, the (index mod n)-th that accepts it */
    const char *templates;     /* NULL: every template */
    int batch;                 /* configs per round (default 8) */
    double time_limit_s;       /* stop starting tasks after this many seconds (<= 0: none) */
    const char *db_path;
    mt_measurer_params measurer;
    const volatile sig_atomic_t *stop;
    void (*progress)(const mt_collect_progress *p, void *user);
    void *user;
} mt_collect_params;

typedef struct mt_collect_summary {
    int workloads, units, measured_this_run;
    double wall_s;
    int interrupted, timed_out;
    mt_device_info device;
} mt_collect_summary;

mt_collect_params mt_collect_default_params(void);
mt_status mt_collect(const mt_collect_params *p, mt_collect_summary *out, char *err, size_t errlen);

#endif
