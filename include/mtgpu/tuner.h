/* Tuning a set of convolution tasks (a network's, or one workload) on one device.
 *
 * Each task is tuned with every template that accepts it; a (task, template)
 * pair is a unit with its own search. Rounds of `batch` configs go to the unit
 * the scheduler picks (see mt_tune), are compiled in parallel and timed one at
 * a time in a worker process (mt_measurer), and every result is committed to
 * the records database as soon as it is measured. A rerun with the same
 * database resumes: measured configs are not measured again and count towards
 * the trial budget. A replay (mt_tune_params.simulate_db) runs the same loop
 * with every measurement answered from recorded data instead of a device. */
#ifndef MTGPU_TUNER_H
#define MTGPU_TUNER_H

#include <signal.h>

#include "mtgpu/device.h"
#include "mtgpu/records.h"
#include "mtgpu/net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How candidates are measured: in worker processes (mtgpu-worker), compiled
 * in parallel, timed one at a time (see tuner/measurer.h). */
typedef struct mt_measurer_params {
    const char *device;          /* device spec for mt_device_open; NULL or "": the first device. A comma-separated
                                    list ("opencl:0,opencl:1") times on every device listed at once, one timing
                                    worker each, compiler processes shared; the devices must share one fingerprint */
    const char *worker_path;     /* NULL: $MTGPU_WORKER, else the build tree's, else the installed mtgpu-worker */
    const char *cache_dir;       /* compiled-binary cache shared by tuner and worker; NULL: the device default */
    double timeout_s;            /* per measurement, request to answer (default 20) */
    double prepare_timeout_s;    /* preparing a workload: inputs and CPU reference (default 600) */
    double start_timeout_s;      /* worker start-up until it has opened the device (default 120) */
    int compile_threads;         /* parallel compiles (compiler processes); <= 0: the number of online CPUs (the default) */
    double compile_timeout_s;    /* one compile in a compiler process, past which it is killed (default 600) */
    int compile_in_process;      /* 1: compile in the calling process's threads, no compiler processes (default 0) */
    int max_consecutive_failures;/* worker crashes/timeouts in a row before a batch gives up (default 3) */
    mt_measure_params measure;   /* warm-up, repeats, checking (mt_measure_default_params) */
    uint64_t seed;               /* seed of the random inputs (default 42) */
    /* When non-NULL and set (e.g. by a SIGINT handler), a batch stops after the
     * measurement in flight: the configs not yet sent come back with skipped = 1. */
    const volatile sig_atomic_t *stop;
} mt_measurer_params;

mt_measurer_params mt_measurer_default_params(void);

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
    /* First call only: what resuming went past (damaged records skipped, naming
     * the first; records of failures of the environment, measured again); NULL
     * when nothing. */
    const char *note;
} mt_tune_progress;

typedef struct mt_tune_params {
    int trials;                /* total measurements across all tasks, records already in the database included */
    const char *cost_model;    /* a kind of tuner/costmodel.h guiding simulated annealing ("xgb", the default;
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
    mt_measurer_params measurer; /* device, timeouts, compile threads, measurement repeats; measure.cold 1 (cold where the device can evict) */
    const volatile sig_atomic_t *stop; /* when set: finish the measurement in flight, then return */
    void (*progress)(const mt_tune_progress *p, void *user);
    void *user;
    /* Replay ("simulated" tuning): when simulate_db names a records database,
     * no device is opened and no worker started; each measurement is answered
     * from the records that database holds for one device (simulate_device, a
     * fingerprint; NULL or "": the device with the most records of these
     * tasks and templates, an error naming the candidates when two tie). A
     * unit's search is restricted to the configs recorded for its (workload,
     * template): it proposes nothing else, each answer is the recorded median,
     * runs and status (a recorded failure comes back as that failure), and a
     * unit ends when its recorded configs are used up (its default config is
     * measured first only where it was recorded). The records made carry
     * source "replay:<fingerprint>" and that device's fingerprint; they go to
     * db_path, which a replay must name (never the default database, and not
     * the recording itself), or nowhere with no_db. For comparing search
     * strategies and cost models over many seeds: what a replay costs is the
     * search's and the cost model's own work (200 trials of one workload:
     * 0.03 s of CPU with random search, 1.5 s with xgb). measurer is not used. */
    const char *simulate_db;
    const char *simulate_device;
    int no_db;                 /* 1: store no records and resume from none (default 0) */
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
    int cold;                   /* timed cold: measurer.measure.cold on a device that can evict */
    char note[512];             /* mt_tune_progress.note of the run, or "" */
    /* Where this run's rounds spent their time, in seconds: drawing configs
     * (the search and the cost model's scoring), measuring (waiting for the
     * measurer, or the ranks), committing records, updating the cost model. */
    double search_s, measure_s, commit_s, model_s;
} mt_tune_summary;

/* Tunes tasks[0..ntasks). Scheduling: every unit first gets one round; after
 * that each round goes to the task with the largest expected gain in weighted
 * time (Ansor's gradient rule: count x (0.2 x the recent rate of improvement +
 * 0.8 x best_ms / trials_so_far)), and within the task to its template unit
 * with the largest such gain; units that exhausted their space or stopped
 * early are skipped. Returns MT_OK also when interrupted or out of time (see
 * the summary); errors are for what prevents tuning (database, device,
 * worker). A damaged record in the database does not stop a resume: it is
 * skipped and named in the note (mt_tune_progress.note, the summary's note),
 * and a record of a failure of the environment (mt_record_env_failure) does
 * not count as measured. On success and on error *out holds what was
 * measured; free it with mt_tune_summary_free. */
mt_status mt_tune(const mt_task *tasks, int ntasks, const mt_tune_params *p, mt_tune_summary *out, char *err, size_t errlen);
void mt_tune_summary_free(mt_tune_summary *s);

#ifdef __cplusplus
}
#endif
#endif
