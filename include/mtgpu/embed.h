/* The embedding API: tuned convolutions for inference servers.
 *
 * An mt_embed handle opens a tuning database read-only and a device, and hands
 * out prepared convolutions: for a workload, the compiled best kernel on that
 * device (its in-network preference, else the fastest usable database
 * record, else the default config) with its launch geometry. Each distinct workload is prepared once
 * and cached in the handle; the returned pointer stays valid until
 * mt_embed_close.
 *
 * Buffers: kernels run on mtgpu device buffers (mt_dbuf) that the caller
 * allocates on mt_embed_device() and fills from its own host data, and on the
 * handle's own queue. Launching on the caller's own OpenCL context and queue
 * is not offered: a cl_program belongs to the context it was built in. A
 * server with its own context can take the kernel's source and geometry
 * (mt_conv_kernel_source, mt_conv_kernel_get_info) and build it there.
 *
 * Threads: every call may be made from any number of threads at once on one
 * handle. Lookups hold the handle's mutex (which also serialises the one
 * database connection, since an mt_db is single-threaded); preparing a new
 * workload compiles under that mutex, so first lookups of distinct workloads
 * queue behind each other while cached lookups stay cheap. Launches of one
 * handle are serialised by a second mutex (an OpenCL kernel's arguments are
 * shared state). There is no global state: handles are independent. */
#ifndef MTGPU_EMBED_H
#define MTGPU_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/device.h"
#include "mtgpu/status.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_embed mt_embed;
typedef struct mt_conv_kernel mt_conv_kernel;

typedef struct mt_embed_params {
    const char *db_path;   /* tuning database, opened read-only; NULL: mt_db_default_path; "": none (default configs only) */
    mt_device *device;     /* a device the caller opened and keeps open past mt_embed_close; NULL: open device_spec */
    const char *device_spec; /* as mt_device_open ("opencl:0", ...); NULL: the first device */
    const char *cache_dir; /* compiled-kernel cache when the handle opens the device; NULL: the default */
    /* Weight layouts the caller can give (a mask of 1 << mt_weight_layout,
     * mtgpu/workload.h); OIHW is always included. With the default 0 only
     * templates that read OIHW weights are used, so weights stay as
     * mtgpu/workload.h describes them; a caller that converts its weights
     * (mt_weights_to_layout, once per layer) to the layout of each kernel
     * (mt_conv_kernel_info.weight_layout) passes MT_WEIGHT_LAYOUTS_ALL and
     * gets the fastest record of any template. */
    unsigned weight_layouts;
} mt_embed_params;

mt_embed_params mt_embed_default_params(void);

/* Opens the database and the device. Errors from mt_db_open (MT_IO for a
 * missing file, MT_CORRUPT) and mt_device_open, MT_NOMEM. */
mt_status mt_embed_open(const mt_embed_params *params, mt_embed **out, char *err, size_t errlen);
/* Frees every prepared kernel, the database connection and (when the handle
 * opened it) the device. No other thread may use the handle meanwhile. */
void mt_embed_close(mt_embed *e);
mt_device *mt_embed_device(mt_embed *e);

/* The prepared convolution for wl on the handle's device: built on the first
 * request, then the same pointer for every request of an equal workload, from
 * any thread. MT_RANGE for an invalid workload, MT_NOT_FOUND when no template
 * accepts it, MT_BUILD with the compiler log in err. */
mt_status mt_embed_get_conv(mt_embed *e, const mt_workload *wl, const mt_conv_kernel **out, char *err, size_t errlen);

typedef struct mt_conv_kernel_info {
    mt_workload wl;
    char template_name[16];
    const char *config;  /* text form; owned by the kernel */
    int from_db;         /* 1: a database record; 0: the default config */
    double tuned_ms;     /* the record's median time (0 for a default) */
    mt_weight_layout weight_layout; /* how the kernel reads its weights (MT_WEIGHTS_OIHW unless the handle accepts others) */
    int64_t grid[3];     /* work-groups per axis */
    int64_t block[3];    /* work-items per work-group per axis */
    const char *kernel_name;
} mt_conv_kernel_info;

void mt_conv_kernel_get_info(const mt_conv_kernel *k, mt_conv_kernel_info *info);
/* The kernel's source in the device's language (OpenCL C or CUDA C); owned by k. */
const char *mt_conv_kernel_source(const mt_conv_kernel *k);

/* Runs k once: output = conv(input, weights) in the layouts of
 * mtgpu/workload.h (NCHW, NKPQ) and the weights in the kernel's weight layout
 * (OIHW unless the handle was opened with other weight_layouts), with
 * buffers of at least mt_workload_input_elems, mt_weight_layout_elems and
 * mt_workload_output_elems floats allocated on
 * mt_embed_device(e). Waits for completion; *ms (may be NULL) gets the
 * device time. MT_INVALID_ARG for NULL or too-small buffers, MT_LAUNCH. */
mt_status mt_conv_kernel_launch(mt_embed *e, const mt_conv_kernel *k, mt_dbuf *input, mt_dbuf *weights, mt_dbuf *output, double *ms,
                                char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
