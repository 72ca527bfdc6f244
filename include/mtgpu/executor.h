/* The inference executor: a network run forward on a device with the tuned
 * (or default) kernel of each convolution, and the CPU reference of the same
 * network.
 *
 * mt_executor_build does all the expensive work once: it picks each
 * convolution's config (its in-network preference, else the database's
 * fastest usable record, else the default), builds every distinct kernel once (through the binary cache),
 * folds batch norm into the convolution weights and biases on the host,
 * uploads the weights and allocates every device buffer. A forward pass then
 * only uploads the input (not even that on a CPU device, which reads it
 * where mt_executor_set_input wrote it) and launches kernels; it allocates
 * nothing.
 *
 * Activations share memory: a layer's output lives from the layer to its
 * last consumer. Where the backend has buffer views, every tensor is a view
 * at an offset in one arena, placed greedily by size over the tensors'
 * lifetimes; elsewhere a buffer whose tensor is dead is reused by later
 * layers (best fit). Flatten aliases its input. Bias, folded batch norm, the
 * residual add and the activation are fused into each convolution kernel's
 * stores (mt_template_build_fused), so there is no second pass over the
 * output.
 *
 * Threads: an executor runs one forward pass at a time (its buffers are
 * shared by every pass); use one executor per thread, or serialise. The
 * network and device must outlive the executor. */
#ifndef MTGPU_EXECUTOR_H
#define MTGPU_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/records.h"
#include "mtgpu/device.h"
#include "mtgpu/net.h"
#include "mtgpu/status.h"
#include "mtgpu/weights.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_executor mt_executor;

/* A convolution's config chosen by the caller: every convolution whose
 * kernel runs workload wl (a strided 1x1 layer's kernel runs at stride 1,
 * mt_layer_kernel_workload) runs this template and config. */
typedef struct mt_conv_pin {
    mt_workload wl;
    const char *template_name;
    const char *config;
} mt_conv_pin;

typedef struct mt_executor_params {
    mt_db *db;                 /* best configs; NULL: the default config for every convolution */
    const mt_weights *weights; /* NULL: mt_weights_random(net, seed); else must match the network */
    uint64_t seed;             /* seed of the random weights (default 1) */
    int rank;                  /* 0 (default): each convolution's best config (preference, fastest record, default);
                                  r >= 1: its r-th fastest usable record, preferences ignored, for comparing
                                  candidates in the network */
    int fuse;                  /* 1 (default): on a CPU device, passes run runs of consecutive
                                  kernels as one launch each (net/pass_fuse.h); 0: every kernel its own launch */
    const mt_conv_pin *pins;   /* npins pinned convolutions, whatever db holds (borrowed for the build); a
                                  pin that does not build for its workload fails the build. NULL: none */
    int npins;
} mt_executor_params;

mt_executor_params mt_executor_default_params(void);

typedef struct mt_executor_stats {
    int nlayers;
    int nconvs;
    int convs_from_db;         /* convolutions running a database record; the rest run defaults */
    int conv_programs;         /* distinct convolution kernels built */
    int programs_from_cache;   /* of all programs, those the binary cache served */
    int launches;              /* kernel launches per forward pass */
    int launches_fused;        /* launches per pass after fusion (launches when nothing is fused) */
    int profile_in_pass;       /* profiled passes run fused, timed by their threads' clock readings
                                  (0: each kernel timed as its own launch) */
    int input_in_place;        /* the device reads the input where mt_executor_set_input wrote it
                                  (a CPU device): passes do not upload it (0: each pass does) */
    double build_s;            /* wall time of mt_executor_build */
    int64_t weight_bytes;      /* device bytes of weights and biases (batch norm folded) */
    int64_t activation_bytes;  /* device bytes of the shared activation buffers */
    int activation_buffers;    /* device allocations holding them: 1 where they are views into one arena */
    int64_t workspace_bytes;   /* parameter blocks of the op kernels, strided 1x1 layers' subsampled input */
    int64_t device_bytes;      /* peak device memory: everything the executor allocated, the sum of the three above */
    int64_t largest_live_bytes; /* largest total size of activations live at one time (a lower bound for activation_bytes) */
    int64_t two_largest_bytes; /* the two largest activations of the network added: the executor's yardstick for activation memory */
} mt_executor_stats;

/* Builds net on dev. Errors: the network's sticky error; MT_NOT_FOUND when
 * no template accepts a convolution; MT_BUILD when a kernel fails to compile
 * (log in err); MT_CORRUPT/MT_NOT_FOUND for weights that do not match;
 * MT_UNSUPPORTED on a non-OpenCL device (the op kernels are OpenCL C for
 * now); MT_RANGE, before anything is allocated, when the network's weights
 * and activations do not fit the device's memory, its largest allocation or
 * nine tenths of the host's available memory (err gives the figures);
 * MT_NOMEM, MT_DEVICE. err names the layer. A database error does not fail the build
 * (the default config is used). On success *out is freed with
 * mt_executor_free; on failure nothing is left allocated. */
mt_status mt_executor_build(mt_device *dev, const mt_network *net, const mt_executor_params *params, mt_executor **out, char *err,
                            size_t errlen);
void mt_executor_free(mt_executor *ex);

/* Sets the input batch (NCHW, count = n*c*h*w of layer 0): on a CPU device
 * written where the kernels read it (stats.input_in_place), elsewhere kept on
 * the host and uploaded at the start of every forward pass. Until it is
 * first set the input is mt_fill_random(.., seed) of the executor's seed.
 * MT_RANGE for a wrong count. */
mt_status mt_executor_set_input(mt_executor *ex, const float *data, int64_t count, char *err, size_t errlen);

/* Device time of one layer's kernels in one pass. */
typedef struct mt_layer_time {
    double kernel_ms; /* the layer's kernel(s): the convolution with its fused bias / batch norm /
                         residual / activation, the pool, ... (0 for flatten); inside a fused
                         pass the longest any of the device's threads took for its share */
    double wait_ms;   /* inside a fused pass: the mean time the device's threads then waited for
                         the others before the next layer (0 otherwise) */
} mt_layer_time;

/* One forward pass: uploads the input (unless the device reads it in place)
 * and runs every layer, queued and
 * waited for once. With times (mt_network_num_layers entries) each layer's
 * time goes to its entry (a profile). A fused pass (mt_executor_params.fuse,
 * stats.profile_in_pass) is profiled as it runs, from time-stamp counter
 * readings its threads take at the start and end of every layer; otherwise
 * each kernel runs as its own launch, back to back as without a profile,
 * and is timed on the device.
 * MT_LAUNCH/MT_DEVICE with the layer named in err (when it can be told). */
mt_status mt_executor_run(mt_executor *ex, mt_layer_time *times, char *err, size_t errlen);

/* Where a profiled fused pass's wall time went outside its layers, from the
 * host's reading of the same time-stamp counter its threads read. */
typedef struct mt_pass_time {
    int valid;        /* 1: the latest mt_executor_run was a profiled fused pass */
    double upload_ms; /* the input's upload, until the write returned (0 where the input is read in place) */
    double queue_ms;  /* queueing the launches up to the first fused one, after the upload
                         (the later ones are queued while the device works) */
    double start_ms;  /* from each fused launch's queueing (or the end of the one before,
                         whichever came later) to its first thread's start, summed, less
                         the device time of the launches run alone in between */
    double late_ms;   /* the other threads' starts after the first, mean over the threads,
                         summed over the fused launches */
    double return_ms; /* from the last thread's end to the host's return from the wait */
} mt_pass_time;

/* The latest pass's mt_pass_time (valid 0 when it was not a profiled fused pass). */
void mt_executor_pass_time(const mt_executor *ex, mt_pass_time *out);

/* Copies the last layer's output of the latest pass (count = its elements). */
mt_status mt_executor_output(mt_executor *ex, float *out, int64_t count, char *err, size_t errlen);
mt_shape mt_executor_output_shape(const mt_executor *ex);

void mt_executor_get_stats(const mt_executor *ex, mt_executor_stats *stats);

/* The kernel chosen for conv layer `layer`: template name, config text and
 * whether it came from the database. MT_INVALID_ARG for a layer that is not a
 * convolution. The strings are owned by the executor. */
mt_status mt_executor_conv_choice(const mt_executor *ex, int layer, const char **template_name, const char **config, int *from_db);

/* ---- the CPU reference (net/reference_net.c) ---- */

/* Runs net forward on the CPU with the same weights: convolutions through
 * mt_conv_reference_mt (double accumulation, `threads` threads), batch norm
 * applied as such (not folded), the other operations in plain C with double
 * sums. input holds layer 0's elements; output receives the last layer's
 * (mt_network_layer(net, last)->out). MT_INVALID_ARG, MT_NOMEM, or the
 * weights' mismatch (MT_NOT_FOUND naming the tensor). */
mt_status mt_network_reference(const mt_network *net, const mt_weights *w, const float *input, float *output, int threads, char *err,
                               size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
