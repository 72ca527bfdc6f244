/* Private: the table a backend fills in. Handles returned through `void **`
 * are the backend's own; device/device.c wraps them in mt_device / mt_program /
 * mt_dbuf. Optional members may be NULL. */
#ifndef MTGPU_BACKEND_IMPL_H
#define MTGPU_BACKEND_IMPL_H

#include "hash.h"
#include "program.h"

typedef struct mt_backend_i {
    /* .kind       = */ mt_backend_kind kind;
    /* .lang       = */ mt_lang lang;
    /* .list       = */ mt_status (*list)(mt_device_info *out, int max, int *count, char *err, size_t errlen);
    /* .open       = */ mt_status (*open)(int index, const mt_device_params *params, void **dev, mt_device_info *info, char *err, size_t errlen);
    /* .close      = */ void (*close)(void *dev);
    /* .build      = */ mt_status (*build)(void *dev, const char *src, const char *kernel_name, void **prog, int *from_cache, char *log,
                                           size_t loglen);
    /* .prog_free  = */ void (*prog_free)(void *prog);
    /* .alloc      = */ mt_status (*alloc)(void *dev, size_t bytes, void **buf);
    /* .write      = */ mt_status (*write)(void *dev, void *buf, size_t offset, const void *src, size_t bytes);
    /* .read       = */ mt_status (*read)(void *dev, void *buf, size_t offset, void *dst, size_t bytes);
    /* .buf_free   = */ void (*buf_free)(void *buf);
    /* .run        = */ mt_status (*run)(void *dev, void *prog, void **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                         int warmup, int repeats, double *times_ms, char *err, size_t errlen);
    /* Optional, together: one launch queued without waiting, and a wait for
     * everything queued. With ms non-NULL the launch is timed on the device
     * and finish writes its time there (the caller keeps *ms alive until
     * then). NULL: the dispatcher runs each launch to completion (run,
     * repeats 1) and finish has nothing to wait for. */
    /* .launch     = */ mt_status (*launch)(void *dev, void *prog, void **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                            double *ms, char *err, size_t errlen);
    /* .finish     = */ mt_status (*finish)(void *dev, char *err, size_t errlen);
    /* Optional: a buffer aliasing bytes [offset, offset + bytes) of parent, freed with
     * buf_free (the memory lives until parent and every view are freed); offset is a
     * multiple of MT_DBUF_VIEW_ALIGN and the range lies inside parent (the
     * dispatcher checks). NULL: no views (mt_dbuf_view says MT_UNSUPPORTED). */
    /* .view       = */ mt_status (*view)(void *dev, void *parent, size_t offset, size_t bytes, void **buf);
    /* Optional: takes the buffer's bytes out of the caches its next reader
     * would find them in (the host's, for a CPU device), so that the next
     * launch reads it from memory; MT_UNSUPPORTED where the device cannot.
     * NULL: MT_UNSUPPORTED. */
    /* .evict      = */ mt_status (*evict)(void *dev, void *buf, char *err, size_t errlen);
    /* Optional: a buffer of `bytes` whose storage is host memory the caller
     * owns (aligned to MT_DBUF_VIEW_ALIGN, outliving the buffer), used in
     * place where the device can (a CPU device). NULL: MT_UNSUPPORTED. */
    /* .alloc_host = */ mt_status (*alloc_host)(void *dev, void *host, size_t bytes, void **buf);
} mt_backend_i;

/* Returns the OpenCL backend table, or NULL when built without OpenCL. */
const mt_backend_i *mt__backend_opencl(void);
/* Returns the CUDA backend table when its module loads, else NULL with the reason in err. */
const mt_backend_i *mt__backend_cuda(char *err, size_t errlen);


/* Writes info->fingerprint from the fields that change kernel speed (backend,
 * platform, name, vendor, driver, compute units, local memory, work-group
 * size), the same way for every backend (device/device_info.c). */
void mt__device_fingerprint(mt_device_info *info);

/* MTGPU_PEAK_GFLOPS when set to a positive number (a user's override of a
 * backend's peak estimate), else 0. */
double mt__env_peak_gflops(void);

/* The backend's own handles behind a device and a buffer (device/device.c), for
 * backend-specific calls such as the cuDNN reference; NULL for NULL. */
void *mt__device_backend_handle(const mt_device *dev);
void *mt__dbuf_backend_handle(const mt_dbuf *b);
/* The device a buffer was allocated on; NULL for NULL. */
const mt_device *mt__dbuf_device(const mt_dbuf *b);

#endif
