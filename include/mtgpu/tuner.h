/* Tuning a set of convolution tasks (a network's, or one workload) on one device.
 *
 * Each task is tuned with every template that accepts it; a (task, template)
 * pair is a unit with its own search. Rounds of `batch` configs go to the unit
 * the scheduler picks (see mt_tune), are compiled in parallel and timed one at
 * a time in a worker process (mt_measurer), and every result is committed to
 * the records database as soon as it is measured. A rerun with the same
 * database resumes: measured configs are not measured again and count towards
 * the trial budget. */
#ifndef MTGPU_TUNER_H
#define MTGPU_TUNER_H

#include <signal.h>

#include "mtgpu/db.h"
#include "mtgpu/measurer.h"
#include "mtgpu/net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_tune_task_result {
    mt_workload wl;
    int count;                 /* occurrences in the network */
    double flops;              /* of one occurrence */
    int trials;                /* measurements of this task in the database, this run's included */
    int errors;                /* of which failed (build, launch, wrong result, timeout, ...) */
    double best_ms;            /* 0 when no valid config is known */
    char best_template[16];
    char best_config[1024];
} mt_tune_task_result;

typedef struct mt_tune_progress {
    int task;                  /* index of the task just measured */
    const char *template_name;
    int trials_done;           /* across all tasks, counting what the database already had */
    int trials_total;          /* the budget */
    int measured_this_run;
    double elapsed_s;
    double eta_s;              /* estimate of the time left; < 0 unknown */
    double network_ms;         /* sum over tasks of best_ms x count; 0 until every task has a valid config */
    const mt_tune_task_result *tasks;
    int ntasks;
    /* The batch just measured (NULL in the first call, made after resuming). */
    const mt_record *records;
    int nrecords;
} mt_tune_progress;

typedef struct mt_tune_params {
    int trials;                /* total measurements across all tasks, records already in the database included */
    const char *cost_model;    /* a kind of mtgpu/costmodel.h guiding simulated annealing ("xgb", the default;
                                  "gnn", "gnn-shared", "mlp", "gnn-transfer", "gnn-meta"), or "random"
                                  (random search) */
    const char *cost_model_file; /* a model file (`mtgpu train`): meta-trained for "gnn-meta", pooled for
                                    "gnn-transfer" (or the other gnn kinds) to fine-tune; NULL: none */
    int gnn_adapt_steps;       /* gnn-transfer: Adam steps per update (<= 0: the cost model's default) */
    double gnn_adapt_lr;       /* gnn-transfer: their step size (<= 0: the cost model's default) */
    int batch;                 /* configs per round (default 8) */
    int early_stop;            /* a unit stops after this many trials without improving its best (default 64; <= 0: never) */
    const char *templates;     /* comma-separated template names to tune (e.g. "direct,gemm"); NULL or "": every
                                  template that accepts a task */
    int start_from_default;    /* 1 (default): a unit's first round measures its template's default config
                                  (mt_default_config); 0: the search alone picks every config (as for
                                  search-efficiency curves) */
    double time_limit_s;       /* stop starting rounds after this many seconds (<= 0: none) */
    uint64_t seed;             /* search and model seed (default 1) */
    const char *db_path;       /* NULL: mt_db_default_path */
    mt_measurer_params measurer; /* device, timeouts, compile threads, measurement repeats */
    const volatile sig_atomic_t *stop; /* when set: finish the measurement in flight, then return */
    void (*progress)(const mt_tune_progress *p, void *user);
    void *user;
} mt_tune_params;

mt_tune_params mt_tune_default_params(void);

/* MT_OK when every name of a comma-separated template list (mt_tune_params.templates;
 * NULL or "" is every template) names a template; MT_INVALID_ARG naming the first that does not. */
mt_status mt_tune_check_templates(const char *list, char *err, size_t errlen);

typedef struct mt_tune_summary {
    int ntasks;
    mt_tune_task_result *tasks; /* owned; mt_tune_summary_free */
    int trials_done;            /* in the database for these tasks on this device, after the run */
    int measured_this_run;
    int resumed;                /* records found in the database at the start */
    double wall_s;
    double network_ms;          /* sum of best_ms x count; 0 if a task has no valid config */
    int interrupted;            /* 1: stopped by the stop flag */
    int timed_out;              /* 1: stopped by the time limit */
    mt_device_info device;
} mt_tune_summary;

/* Tunes tasks[0..ntasks). Scheduling: every unit first gets one round; after
 * that each round goes to the task with the largest expected gain in weighted
 * time (Ansor's gradient rule: count x (0.2 x the recent rate of improvement +
 * 0.8 x best_ms / trials_so_far)), and within the task to its template unit
 * with the largest such gain; units that exhausted their space or stopped
 * early are skipped. Returns MT_OK also when interrupted or out of time (see
 * the summary); errors are for what prevents tuning (database, device,
 * worker). On success and on error *out holds what was measured; free it
 * with mt_tune_summary_free. */
mt_status mt_tune(const mt_task *tasks, int ntasks, const mt_tune_params *p, mt_tune_summary *out, char *err, size_t errlen);
void mt_tune_summary_free(mt_tune_summary *s);

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

#ifdef __cplusplus
}
#endif
#endif
