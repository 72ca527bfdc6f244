/* Private to the CUDA module (the files of cuda/module/): what they share.
 * Its internal symbols are hidden (MT__CUDA_HIDDEN, module-hidden.h). */
#ifndef MTGPU_CUDA_MODULE_IMPL_H
#define MTGPU_CUDA_MODULE_IMPL_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "cuda_module.h"
#include "module-hidden.h"

/* ---- messages (msg.c) ---- */

/* Formats into msg (when len > 0; always NUL-terminated) and returns s. */
MT__CUDA_HIDDEN mt_status mt__cu_fail(char *msg, size_t len, mt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The text for status `code` of a library's call, written into buf (len
 * bytes, NUL-terminated). */
typedef void (*mt__cu_code_text)(int code, char *buf, size_t len);

/* Formats "<what>: <text(code)>" into msg (when len > 0; always
 * NUL-terminated) and returns s: a failed library call, in the library's
 * words for its status code. `what` is printf-style. */
MT__CUDA_HIDDEN mt_status mt__cu_fail_code(char *msg, size_t len, mt_status s, mt__cu_code_text text, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;

/* Appends text to a NUL-terminated log, truncating at loglen. */
MT__CUDA_HIDDEN void mt__cu_log_append(char *log, size_t loglen, const char *text);

/* Looks name up in the dlopen'ed lib and stores the function pointer into
 * slot (slot_size bytes: the member's own type); 0, or -1 when lib lacks it.
 * Shared by the driver, cuDNN and cuBLAS loaders. */
MT__CUDA_HIDDEN int mt__cu_resolve(void *lib, const char *name, void *slot, size_t slot_size);

/* An entry point to resolve: its symbol name and its table member, as
 * MT__CU_SYM(table, f) writes them for member f of table. */
typedef struct mt__cu_sym {
    const char *name;
    void *slot;
    size_t size;
} mt__cu_sym;
#define MT__CU_SYM(table, f) {#f, (void *)&(table).f, sizeof(table).f},
/* mt__cu_resolve for each of syms[0..n): the index of the first that lib
 * lacks, or -1 when it has them all (the slots of those it lacks are left
 * as they are). */
MT__CUDA_HIDDEN int mt__cu_resolve_syms(void *lib, const mt__cu_sym *syms, int n);

/* A library the module dlopens on first use and keeps for the life of the
 * process (the driver's contexts and threads live inside it; dlclose of a
 * half-used library is not safe): its loader runs once (pthread_once) and
 * leaves either ok = 1 or the reason in why. */
typedef struct mt__cu_lib {
    pthread_once_t once;
    int ok;         /* written once, inside `once`: the loader's table is usable */
    char why[1024]; /* likewise: why it is not */
} mt__cu_lib;
#define MT__CU_LIB_INIT {PTHREAD_ONCE_INIT, 0, ""}

/* For a loader: dlopen (RTLD_NOW | RTLD_LOCAL) of the first of names[0..n)
 * that loads, its name in *which (which may be NULL); NULL when none does,
 * with dlerror's words for each ("; "-separated) in lib->why. */
MT__CUDA_HIDDEN void *mt__cu_lib_open(mt__cu_lib *lib, const char *const *names, int n, const char **which);

/* Runs load for lib once in the process; 1 when it left lib usable, else 0
 * with "<prefix><lib->why>" (fallback where the loader gave no reason) in
 * why (when whylen > 0). Thread-safe. */
MT__CUDA_HIDDEN int mt__cu_lib_ready(mt__cu_lib *lib, void (*load)(void), const char *prefix, const char *fallback, char *why, size_t whylen);

/* ---- the driver API, resolved from libcuda.so.1 (driver_api.c) ---- */

/* Every entry point the module calls. The names are macros in cuda.h for
 * the versioned symbols (cuMemAlloc is cuMemAlloc_v2), so a member declared
 * as X(cuMemAlloc) is named, typed and looked up as cuMemAlloc_v2: exactly
 * what a program linked against libcuda would bind to. */
#define MT__CU_REQUIRED(X)                                                                                          \
    X(cuGetErrorName) X(cuGetErrorString) X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet)        \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                      \
    X(cuDevicePrimaryCtxRelease) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuStreamCreate) X(cuStreamDestroy)        \
    X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) \
    X(cuMemGetInfo) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute)              \
    X(cuLaunchKernel) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                     \
    X(cuEventElapsedTime)
/* Entry points the module can do without (NULL when the driver lacks them):
 * cuFuncGetParamInfo (CUDA 12.4) lets a launch check its argument count. */
#define MT__CU_OPTIONAL(X) X(cuFuncGetParamInfo)

typedef struct mt__cu_api {
#define MT__CU_MEMBER(f) __typeof__(f) *f;
    MT__CU_REQUIRED(MT__CU_MEMBER)
    MT__CU_OPTIONAL(MT__CU_MEMBER)
#undef MT__CU_MEMBER
    int driver_version; /* cuDriverGetVersion: 1000 * major + 10 * minor */
} mt__cu_api;

/* The process-wide driver table: libcuda.so.1 loaded, every required entry
 * point resolved and cuInit(0) successful, done once (pthread_once) and
 * kept for the life of the process. NULL with the reason in why when any
 * step failed: the library is missing, a symbol is missing (a driver older
 * than the toolkit), or cuInit failed (no device, driver/kernel-module
 * mismatch, ...). Thread-safe. */
MT__CUDA_HIDDEN const mt__cu_api *mt__cu_api_get(char *why, size_t whylen);

/* The driver's words for CUresult r: "CUDA_ERROR_X (n): <cuGetErrorString
 * text>", and a note when the error leaves the context unusable. */
MT__CUDA_HIDDEN void mt__cu_result_text(int r, char *buf, size_t len);
/* mt__cu_fail_code for a CUresult r: "<what>: CUDA_ERROR_X (n): ..." into
 * err, returning s; `what` is printf-style. */
#define mt__cu_fail_r(err, errlen, s, r, ...) mt__cu_fail_code(err, errlen, s, mt__cu_result_text, (int)(r), __VA_ARGS__)

/* Non-zero for the errors after which the context is unusable (an illegal
 * address, a trap, a launch timeout): every later call in it fails too. */
MT__CUDA_HIDDEN int mt__cu_sticky(CUresult r);

/* ---- devices, programs, buffers (driver.c) ---- */

/* An opened device. One per dev_open; several may share a device (and its
 * primary context). Programs and buffers hold a reference, so the context
 * and stream outlive dev_close until the last of them is freed. */
typedef struct mt__cu_dev {
    const mt__cu_api *api;
    CUdevice dev;
    CUcontext ctx;          /* the device's primary context, retained */
    CUstream stream;        /* every copy, launch and cuDNN call of this handle */
    int index;
    mt_cuda_device_props props;
    mt_device_info info;
    pthread_mutex_t mu;     /* serialises the stream: runs, copies, cuDNN (their timings and results would interleave) */
    atomic_int refs;        /* 1 for the opener + one per live program and buffer */
    void *cudnn;            /* cudnnHandle_t, created on first use under mu (cudnn.c) */
} mt__cu_dev;

typedef struct mt__cu_buf {
    mt__cu_dev *d;
    CUdeviceptr ptr;
    size_t size;
} mt__cu_buf;

/* Makes d's context current in this thread (cuCtxPushCurrent), or returns
 * MT_DEVICE with the reason. Every driver call that needs a context sits
 * between mt__cu_push and mt__cu_pop, so any thread may use any handle. */
MT__CUDA_HIDDEN mt_status mt__cu_push(const mt__cu_dev *d, char *err, size_t errlen);
MT__CUDA_HIDDEN void mt__cu_pop(const mt__cu_dev *d);

/* Members of the table (see cuda_module.h for their contracts). */
MT__CUDA_HIDDEN mt_status mt__cu_dev_list(mt_device_info *out, int max, int *count, char *err, size_t errlen);
MT__CUDA_HIDDEN mt_status mt__cu_dev_open(int index, void **dev, mt_device_info *info, char *err, size_t errlen);
MT__CUDA_HIDDEN void mt__cu_dev_close(void *dev);
MT__CUDA_HIDDEN mt_status mt__cu_dev_props(void *dev, mt_cuda_device_props *out);
MT__CUDA_HIDDEN mt_status mt__cu_load(void *dev, const void *cubin, size_t len, const char *name, void **prog, char *log,
                                      size_t loglen);
MT__CUDA_HIDDEN mt_status mt__cu_prog_info(void *prog, mt_cuda_prog_info *out);
MT__CUDA_HIDDEN void mt__cu_prog_free(void *prog);
MT__CUDA_HIDDEN mt_status mt__cu_alloc(void *dev, size_t bytes, void **buf);
MT__CUDA_HIDDEN mt_status mt__cu_write(void *dev, void *buf, size_t offset, const void *src, size_t bytes);
MT__CUDA_HIDDEN mt_status mt__cu_read(void *dev, void *buf, size_t offset, void *dst, size_t bytes);
MT__CUDA_HIDDEN void mt__cu_buf_free(void *buf);
MT__CUDA_HIDDEN mt_status mt__cu_run(void *dev, void *prog, void **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                     int warmup, int repeats, double *times_ms, char *err, size_t errlen);

/* Median (ms) of `repeats` runs of launch(ctx) on d's stream, each bracketed
 * by an event pair, after `warmup` untimed runs; d->mu held and d's context
 * current. For cudnn.c's timing of the algorithms it found. */
MT__CUDA_HIDDEN mt_status mt__cu_time_on_stream(mt__cu_dev *d, mt_status (*launch)(void *ctx, char *err, size_t errlen), void *ctx,
                                                int warmup, int repeats, double *median_ms, char *err, size_t errlen);

/* ---- the cuDNN reference (cudnn.c) ---- */

MT__CUDA_HIDDEN int mt__cudnn_available(char *why, size_t whylen);
MT__CUDA_HIDDEN mt_status mt__cudnn_conv(void *dev, const mt_workload *wl, void *x, void *w, void *y, const mt_cudnn_params *p,
                                         mt_cudnn_result *res, char *err, size_t errlen);
/* Destroys d's cuDNN handle, if any; d's context current. Called by the
 * last release of d. */
MT__CUDA_HIDDEN void mt__cudnn_dev_release(mt__cu_dev *d);

/* ---- the GNN on the GPU (gnn.c, gnn_kernels.c) ---- */

/* Drops a reference taken with atomic_fetch_add(&d->refs, 1) (driver.c). */
MT__CUDA_HIDDEN void mt__cu_dev_unref(mt__cu_dev *d);
/* The table's compile member (module.c), for the module's own kernels. */
MT__CUDA_HIDDEN mt_status mt__cu_compile(const char *src, const char *name, const mt_cuda_check_params *p, mt_cuda_output kind,
                                         char **out, size_t *len, char *log, size_t loglen);
MT__CUDA_HIDDEN const char *mt__gnn_cuda_source(const char *const **names, int *count);
MT__CUDA_HIDDEN int mt__gnn_cuda_available(char *why, size_t whylen);
MT__CUDA_HIDDEN mt_status mt__gnn_cuda_create(void *dev, const mt_cuda_gnn_desc *desc, void **gnn, char *err, size_t errlen);
MT__CUDA_HIDDEN mt_status mt__gnn_cuda_set_weights(void *gnn, const float *w, const float *mean, const float *istd, char *err,
                                                   size_t errlen);
MT__CUDA_HIDDEN mt_status mt__gnn_cuda_score(void *gnn, int B, const float *feats, float *scores, char *err, size_t errlen);
MT__CUDA_HIDDEN void mt__gnn_cuda_free(void *gnn);

#endif
