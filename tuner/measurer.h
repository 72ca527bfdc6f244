/* Isolated measurement: kernels are compiled in compiler processes and timed
 * in a worker process (both mtgpu-worker), so that a kernel that hangs or
 * crashes the driver or its compiler costs one result marked as an error, not
 * the tuning run.
 *
 * A measurer owns one timing worker per device it was given (params.device,
 * one spec or a comma-separated list of devices of one fingerprint), up to
 * compile_threads compiler processes (started on first use, shared by every
 * device: the kernel cache is per fingerprint) and the tuner's own handle on
 * the first device.
 * mt_measurer_measure_batch compiles a batch of configs in parallel, one per
 * compiler process (which fills the on-disk binary cache; on OpenCL each
 * compiler also makes the kernel's first launch, over one work-group, where
 * PoCL generates and caches its work-group code), then sends the configs that
 * compiled to the timing workers one at a time each: timing runs one kernel at a
 * time per device, with no compile running, and never includes compile time
 * (the worker's build is a cache hit). With several devices each timing
 * worker takes the batch's next config when it is done with one, so every
 * config is timed once, on one device, and a device that is quicker takes
 * more. Processes, not threads: PoCL compiles one
 * kernel at a time in a process. Where no compiler process can start, the
 * batch is compiled in the calling process instead.
 * A worker that does not answer within the timeout is killed and restarted,
 * and that config gets a timeout result. One that dies while measuring or
 * compiling a config (a kernel that crashes it, or a kill from outside: the
 * out-of-memory killer, an operator) is restarted and the config tried once
 * more in the fresh one: a crash that repeats is the config's (launch_error
 * or build_error, "worker crashed (signal N)"); a death where either was by
 * a signal from outside (SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT) is the
 * environment's, MT_UNAVAILABLE with a message beginning
 * MT_RECORD_ENV_FAILURE_PREFIX, which a resumed tune measures again. Either
 * way the batch goes on. Workers end when the measurer's end of their
 * request pipe closes, so none outlives a tuner that is killed.
 *
 * The worker executable is found at params.worker_path, else $MTGPU_WORKER,
 * else next to the build tree's libmtgpu, else under <prefix>/lib/mtgpu.
 *
 * A measurer is not thread-safe: one thread at a time may call into it. It
 * never changes the process's signal dispositions, and reaps every child it
 * starts. */
#ifndef MTGPU_MEASURER_H
#define MTGPU_MEASURER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "measure.h"
#include "mtgpu/tuner.h"
#include "space.h"
#include "mtgpu/status.h"
#include "template.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most devices one measurer times on. */
#define MT_MEASURER_MAX_DEVICES 64

typedef struct mt_measurer_result {
    /* status, timings, each run's time (m.run_ms[0..m.nruns)), error, message.
     * m.build_s is the compile time in the tuner's process (0 on a cache hit). */
    mt_measure_result m;
    double wall_s;       /* seconds from sending the config to the worker to its answer (0 if never sent) */
    int sent_to_worker;  /* 1 if the config reached the worker */
    int skipped;         /* 1 if not measured because stop was requested; record nothing for it */
    /* The fingerprint of the device that timed it, where it is not the
     * tuner's own (a measurement made on another machine); "": the tuner's. */
    char device[17];
    int timer;           /* which of the measurer's devices timed it (0: the first; also when never sent) */
} mt_measurer_result;

typedef struct mt_measurer mt_measurer;

/* Opens the (first) device in this process and starts a timing worker on
 * each device listed. A listed device whose fingerprint differs from the
 * first's is refused (MT_INVALID_ARG naming both): records of one
 * fingerprint are made by devices of that fingerprint only. *info_out (may
 * be NULL) receives the device's description. MT_UNAVAILABLE when no worker
 * executable is found or it cannot start; the reason is in err. Strings in
 * params are copied. */
mt_status mt_measurer_start(const mt_measurer_params *params, mt_measurer **out, mt_device_info *info_out, char *err, size_t errlen);

/* Measures cfgs[0..n) of template t (space sp) on workload wl; results[i] is
 * cfgs[i]'s outcome, always filled. Configs outside the space or the device's
 * limits are invalid_config, compile failures build_error (with the log; also a
 * compiler process that dies or takes over compile_timeout_s); those never
 * reach the timing worker. A config the worker does not answer in time is
 * `timeout`, one during which the worker died `launch_error` ("worker crashed
 * (signal N)"); the worker is then restarted for the rest.
 *
 * Returns MT_OK when every config got its own result; MT_DEVICE when the
 * worker failed max_consecutive_failures times in a row, and MT_UNAVAILABLE /
 * MT_TIMEOUT / ... when it could not be (re)started or could not prepare the
 * workload: the configs not measured then carry that status, with the reason
 * in their message and in err. */
mt_status mt_measurer_measure_batch(mt_measurer *m, const mt_workload *wl, const mt_template *t, const mt_space *sp,
                                    const mt_config *cfgs, int n, mt_measurer_result *results, char *err, size_t errlen);

/* The process id of the (first device's) timing worker, or -1 when none is running (for tests and logs). */
long mt_measurer_worker_pid(const mt_measurer *m);
/* The number of devices the measurer times on. */
int mt_measurer_device_count(const mt_measurer *m);
/* The process ids of the timing workers, one per device (-1 where none is
 * running), into pids[0..max); returns how many were written. */
int mt_measurer_worker_pids(const mt_measurer *m, long *pids, int max);
/* The number of compiler processes running; the first `max` of their ids go to pids (may be NULL). */
int mt_measurer_compiler_pids(const mt_measurer *m, long *pids, int max);

/* Asks the worker to quit (killing it if it does not within a few seconds),
 * reaps it, and closes the device. NULL is allowed. */
void mt_measurer_stop(mt_measurer *m);

#ifdef __cplusplus
}
#endif
#endif
