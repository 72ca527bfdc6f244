/* Building, checking and timing one convolution schedule on a device.
 *
 * An mt_conv_bench holds, for one workload on one device, random inputs, the
 * CPU reference output and device buffers with guard regions after each of
 * them, so that many configs can be measured without recomputing the
 * reference. Each measurement: build the template's kernel, check it against
 * the device's limits, compile (through the binary cache), run once and
 * compare with the reference (normalised error, NaN/Inf, guard regions), then
 * time warm-up runs followed by repeats; the median is the cost. */
#ifndef MTGPU_MEASURE_H
#define MTGPU_MEASURE_H

#include "mtgpu/device.h"
#include "template.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Most individual run times a result keeps (see mt_measure_result.run_ms). */
#define MT_MEASURE_MAX_RUNS 64

typedef struct mt_measure_result {
    mt_status status;      /* MT_OK, MT_INVALID_CONFIG, MT_BUILD, MT_LAUNCH, MT_WRONG_RESULT, ... */
    double median_ms;      /* 0 unless timed */
    double min_ms;
    double gflops;         /* useful FLOPs / median time */
    double max_rel_err;    /* normalised error against the reference; -1 when not checked */
    double build_s;        /* compile seconds (0 when cached) */
    int repeats;
    int cold;              /* the weights were evicted before every timed run */
    char message[1024];    /* the reason for a non-OK status (build log excerpt, limit exceeded, ...) */
    /* Each timed run's time in the order the runs were made (the first
     * MT_MEASURE_MAX_RUNS of them when repeats is larger); 0 runs unless timed. */
    int nruns;
    double run_ms[MT_MEASURE_MAX_RUNS];
} mt_measure_result;

typedef struct mt_conv_bench mt_conv_bench;

/* Prepares inputs (deterministic for a seed), the reference output (computed on
 * the CPU with all cores) and device buffers for wl on dev. Before it
 * allocates anything it checks what that takes against the device's memory
 * and largest allocation and the host's available memory (device/memory.h):
 * MT_RANGE with the figures when the workload does not fit. */
mt_status mt_conv_bench_new(mt_device *dev, const mt_workload *wl, uint64_t seed, mt_conv_bench **out, char *err, size_t errlen);
void mt_conv_bench_free(mt_conv_bench *b);

/* Measures one config; the outcome is in res->status (also returned). Never
 * fails hard on a bad config: build errors, launch errors and wrong results
 * are results. */
mt_status mt_conv_bench_measure(mt_conv_bench *b, const mt_template *t, const mt_space *sp, const mt_config *cfg,
                                const mt_measure_params *params, mt_measure_result *res);

/* The compile half of a measurement, for a compiler process that runs
 * beside the timing one: builds cfg's kernel for wl, checks it against dev's
 * limits and compiles it through the binary cache (res->status and
 * res->message as mt_conv_bench_measure's; res->build_s the compile time).
 * With warm_launch it then runs one work-group of it over scratch buffers, so
 * that a driver that generates code at a kernel's first launch (PoCL: per
 * work-group size, cached on disk) does that here rather than in the timing
 * process; build_s includes that launch. Nothing is timed or checked. */
mt_status mt_conv_compile(mt_device *dev, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfg,
                          int warm_launch, mt_measure_result *res);

/* A vendor library's convolution (cuDNN: cuda/cudnn_ref.c) run on the
 * bench's device buffers: input, weights (OIHW) and output. */
typedef mt_status (*mt_conv_bench_vendor_fn)(mt_device *dev, const mt_workload *wl, mt_dbuf *in, mt_dbuf *w, mt_dbuf *out, void *user,
                                             char *err, size_t errlen);

/* Runs `run` on the bench's input and weights and compares its output with
 * the bench's CPU reference: *max_rel_err (may be NULL) gets the normalised
 * error. Returns run's error as it is; MT_WRONG_RESULT when the output is
 * NaN/Inf, unwritten, or over `tolerance`. */
mt_status mt_conv_bench_check_vendor(mt_conv_bench *b, mt_conv_bench_vendor_fn run, void *user, double tolerance, double *max_rel_err,
                                     char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
