/* Devices, programs, buffers and timed launches on the CUDA driver API: the
 * running-kernel half of the module's table (see cuda_module.h).
 *
 * An opened device is its primary context (shared with every other user of
 * the device in this process, the CUDA runtime inside cuDNN included) and
 * one non-blocking stream of its own. Every driver call that needs a context
 * pushes it in the calling thread and pops it before returning, so handles
 * can be used from any thread (the measurer compiles and loads in several).
 * Work on the stream (copies, launches, cuDNN) is serialised per handle: two
 * threads timing on one stream would time each other. Every CUresult is
 * checked; a failure names the call and the driver's text, and releases
 * whatever the failing member created. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module-impl.h"

/* Events created per timing batch: repeats beyond this reuse them. */
#define EVENT_BATCH 64
/* Most kernel parameters a launch passes (as device.c's MT__MAX_RUN_ARGS). */
#define MAX_PARAMS 128

typedef struct mt__cu_prog {
    mt__cu_dev *d;
    CUmodule mod;
    CUfunction fn;
    mt_cuda_prog_info info;
} mt__cu_prog;

/* ------------------------------------------------------------ contexts */

mt_status mt__cu_push(const mt__cu_dev *d, char *err, size_t errlen) {
    CUresult r = d->api->cuCtxPushCurrent(d->ctx);
    if (r != CUDA_SUCCESS) return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "cuCtxPushCurrent (cuda:%d)", d->index);
    return MT_OK;
}

void mt__cu_pop(const mt__cu_dev *d) {
    CUcontext popped = NULL;
    (void)d->api->cuCtxPopCurrent(&popped);
}

/* Drops one reference to d; the last one destroys the stream and the cuDNN
 * handle and releases the primary context. */
static void dev_unref(mt__cu_dev *d) {
    if (!d || atomic_fetch_sub(&d->refs, 1) != 1) return;
    const mt__cu_api *a = d->api;
    if (d->ctx) {
        if (mt__cu_push(d, NULL, 0) == MT_OK) {
            mt__cudnn_dev_release(d);
            if (d->stream) {
                (void)a->cuStreamSynchronize(d->stream);
                (void)a->cuStreamDestroy(d->stream);
            }
            mt__cu_pop(d);
        }
        (void)a->cuDevicePrimaryCtxRelease(d->dev);
    }
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* Frees `handle`, a program or a buffer of d: first its driver object (the
 * module mod, the allocation ptr; 0 for none) in d's context, skipped when
 * the context cannot be made current, then the handle, then its reference
 * to d. */
static void handle_free(mt__cu_dev *d, void *handle, CUmodule mod, CUdeviceptr ptr) {
    if (mt__cu_push(d, NULL, 0) == MT_OK) {
        if (mod) (void)d->api->cuModuleUnload(mod);
        if (ptr) (void)d->api->cuMemFree(ptr);
        mt__cu_pop(d);
    }
    free(handle);
    dev_unref(d);
}

/* ----------------------------------------------------------- discovery */

/* FP32 FMA lanes per multiprocessor of compute capability major.minor (the
 * CUDA C Programming Guide's throughput table). */
static int fp32_lanes_per_sm(int major, int minor) {
    switch (major) {
    case 5: return 128;
    case 6: return minor == 0 ? 64 : 128;
    case 7: return 64;
    case 8: return minor == 0 ? 64 : 128;
    default: return major >= 9 ? 128 : 64;
    }
}

/* The kernel module's version ("580.95.05") from /proc/driver/nvidia/version
 * into buf; "" where it cannot be read (containers without /proc/driver). */
static void kernel_module_version(char *buf, size_t len) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "Kernel Module");
        if (!p) continue;
        p += strlen("Kernel Module");
        while (*p == ' ' || *p == '\t') p++;
        size_t n = 0;
        while (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != '\n' && n + 1 < len) n++;
        memcpy(buf, p, n);
        buf[n] = '\0';
        break;
    }
    fclose(f);
}

/* Fills *info and *props (either may be NULL) for device `index`. */
static mt_status query_device(const mt__cu_api *a, int index, CUdevice *devp, mt_device_info *info, mt_cuda_device_props *props,
                              char *err, size_t errlen) {
    CUdevice dev;
    CUresult r = a->cuDeviceGet(&dev, index);
    if (r != CUDA_SUCCESS) return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "cuDeviceGet(%d)", index);
    mt_cuda_device_props pr;
    memset(&pr, 0, sizeof pr);
    int bx = 0, by = 0, bz = 0;
#define ATTR(var, attr)                                                                                            \
    do {                                                                                                           \
        if ((r = a->cuDeviceGetAttribute(&(var), attr, dev)) != CUDA_SUCCESS)                                      \
            return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "cuDeviceGetAttribute(" #attr ") of cuda:%d", index); \
    } while (0)
    ATTR(pr.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    ATTR(pr.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    ATTR(pr.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    ATTR(pr.warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    ATTR(pr.max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    ATTR(pr.max_shared_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    ATTR(bx, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    ATTR(by, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    ATTR(bz, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
#undef ATTR
    /* Figures that only inform (the peak estimate, the props report): a
     * driver that no longer answers for one leaves it 0 rather than hiding
     * the device. */
#define ATTR_OPT(var, attr)                                                  \
    do {                                                                     \
        if (a->cuDeviceGetAttribute(&(var), attr, dev) != CUDA_SUCCESS) (var) = 0; \
    } while (0)
    ATTR_OPT(pr.max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    ATTR_OPT(pr.max_regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    ATTR_OPT(pr.max_regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    ATTR_OPT(pr.max_shared_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    ATTR_OPT(pr.reserved_shared_per_block, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    ATTR_OPT(pr.max_shared_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    ATTR_OPT(pr.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
#undef ATTR_OPT
    pr.driver_version = a->driver_version;
    size_t total = 0;
    if ((r = a->cuDeviceTotalMem(&total, dev)) != CUDA_SUCCESS)
        return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "cuDeviceTotalMem of cuda:%d", index);

    if (info) {
        memset(info, 0, sizeof *info);
        info->backend = MT_BACKEND_CUDA;
        info->index = index;
        snprintf(info->platform, sizeof info->platform, "CUDA sm_%d%d", pr.cc_major, pr.cc_minor);
        if ((r = a->cuDeviceGetName(info->name, (int)sizeof info->name, dev)) != CUDA_SUCCESS)
            return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "cuDeviceGetName of cuda:%d", index);
        info->name[sizeof info->name - 1] = '\0';
        snprintf(info->vendor, sizeof info->vendor, "NVIDIA Corporation");
        char kmod[64];
        kernel_module_version(kmod, sizeof kmod);
        int maj = a->driver_version / 1000, min = a->driver_version % 1000 / 10;
        if (kmod[0])
            snprintf(info->driver, sizeof info->driver, "%s (CUDA %d.%d)", kmod, maj, min);
        else
            snprintf(info->driver, sizeof info->driver, "CUDA %d.%d", maj, min);
        info->is_cpu = 0;
        info->compute_units = pr.sm_count;
        info->clock_mhz = pr.clock_khz / 1000;
        info->global_mem_bytes = (uint64_t)total;
        /* Templates declare static __shared__ arrays: the static limit is the one that applies. */
        info->local_mem_bytes = (uint64_t)pr.max_shared_per_block;
        info->max_alloc_bytes = (uint64_t)total;
        info->max_work_group_size = pr.max_threads_per_block;
        info->max_work_item_sizes[0] = bx;
        info->max_work_item_sizes[1] = by;
        info->max_work_item_sizes[2] = bz;
        /* CUDA threads are scalar (the printer writes vectors lane by lane). */
        info->pref_vector_width = 1;
        info->native_vector_width = 1;
        info->max_registers_per_thread = MT_CUDA_MAX_REGISTERS;
        info->peak_gflops = (double)pr.sm_count * fp32_lanes_per_sm(pr.cc_major, pr.cc_minor) * 2.0 * (pr.clock_khz * 1e-6);
    }
    if (props) *props = pr;
    if (devp) *devp = dev;
    return MT_OK;
}

/* The device count, or MT_UNAVAILABLE with the reason (the table or the
 * driver unusable, or no device at all). */
static mt_status device_count(const mt__cu_api **ap, int *n, char *err, size_t errlen) {
    char why[1024];
    const mt__cu_api *a = mt__cu_api_get(why, sizeof why);
    if (!a) return mt__cu_fail(err, errlen, MT_UNAVAILABLE, "%s", why);
    CUresult r = a->cuDeviceGetCount(n);
    if (r != CUDA_SUCCESS) return mt__cu_fail_r(err, errlen, MT_UNAVAILABLE, r, "cuDeviceGetCount");
    if (*n <= 0) return mt__cu_fail(err, errlen, MT_UNAVAILABLE, "the CUDA driver reports no device (cuDeviceGetCount: %d)", *n);
    *ap = a;
    return MT_OK;
}

mt_status mt__cu_dev_list(mt_device_info *out, int max, int *count, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!count || max < 0 || (max > 0 && !out)) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "dev_list: bad arguments");
    *count = 0;
    const mt__cu_api *a = NULL;
    int n = 0;
    mt_status st = device_count(&a, &n, err, errlen);
    if (st != MT_OK) return st;
    for (int i = 0; i < n && i < max; i++) {
        st = query_device(a, i, NULL, &out[i], NULL, err, errlen);
        if (st != MT_OK) return st;
    }
    *count = n;
    return MT_OK;
}

/* ----------------------------------------------------------- open/close */

mt_status mt__cu_dev_open(int index, void **devp, mt_device_info *info, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!devp) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "dev_open: NULL output");
    *devp = NULL;
    const mt__cu_api *a = NULL;
    int n = 0;
    mt_status st = device_count(&a, &n, err, errlen);
    if (st != MT_OK) return st;
    if (index < 0 || index >= n)
        return mt__cu_fail(err, errlen, MT_NOT_FOUND, "no device cuda:%d (%d CUDA device%s available)", index, n, n == 1 ? "" : "s");
    mt__cu_dev *d = calloc(1, sizeof *d);
    if (!d) return mt__cu_fail(err, errlen, MT_NOMEM, "out of memory opening cuda:%d", index);
    d->api = a;
    d->index = index;
    st = query_device(a, index, &d->dev, &d->info, &d->props, err, errlen);
    if (st != MT_OK) {
        free(d);
        return st;
    }
    if (pthread_mutex_init(&d->mu, NULL) != 0) {
        free(d);
        return mt__cu_fail(err, errlen, MT_NOMEM, "pthread_mutex_init failed opening cuda:%d", index);
    }
    atomic_init(&d->refs, 1);
    CUresult r = a->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    if (r != CUDA_SUCCESS) {
        d->ctx = NULL;
        st = mt__cu_fail_r(err, errlen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_DEVICE, r, "cuDevicePrimaryCtxRetain(cuda:%d)",
                           index);
        dev_unref(d);
        return st;
    }
    if ((st = mt__cu_push(d, err, errlen)) != MT_OK) {
        dev_unref(d);
        return st;
    }
    /* Non-blocking: the legacy default stream (the CUDA runtime's, in cuDNN)
     * never serialises with this one; all our copies are on it, so ordering
     * between a kernel and the read of its output is kept. */
    r = a->cuStreamCreate(&d->stream, CU_STREAM_NON_BLOCKING);
    mt__cu_pop(d);
    if (r != CUDA_SUCCESS) {
        d->stream = NULL;
        st = mt__cu_fail_r(err, errlen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_DEVICE, r, "cuStreamCreate (cuda:%d)", index);
        dev_unref(d);
        return st;
    }
    if (info) *info = d->info;
    *devp = d;
    return MT_OK;
}

void mt__cu_dev_close(void *devp) { dev_unref(devp); }

void mt__cu_dev_unref(mt__cu_dev *d) { dev_unref(d); }

mt_status mt__cu_dev_props(void *devp, mt_cuda_device_props *out) {
    const mt__cu_dev *d = devp;
    if (!d || !out) return MT_INVALID_ARG;
    *out = d->props;
    return MT_OK;
}

/* ------------------------------------------------------------ programs */

mt_status mt__cu_load(void *devp, const void *cubin, size_t len, const char *name, void **progp, char *log, size_t loglen) {
    mt__cu_dev *d = devp;
    if (log && loglen) log[0] = '\0';
    if (!progp) return mt__cu_fail(log, loglen, MT_INVALID_ARG, "load: NULL output");
    *progp = NULL;
    if (!d || !cubin || len < 4 || !name || !*name) return mt__cu_fail(log, loglen, MT_INVALID_ARG, "load: bad arguments");
    const mt__cu_api *a = d->api;
    mt__cu_prog *p = calloc(1, sizeof *p);
    if (!p) return mt__cu_fail(log, loglen, MT_NOMEM, "out of memory loading '%s'", name);
    mt_status st = mt__cu_push(d, log, loglen);
    if (st != MT_OK) {
        free(p);
        return st;
    }
    CUresult r = a->cuModuleLoadData(&p->mod, cubin);
    if (r != CUDA_SUCCESS) {
        p->mod = NULL;
        st = mt__cu_fail_r(log, loglen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_BUILD, r,
                           "cuModuleLoadData (a %zu-byte image for sm_%d%d; driver supports CUDA %d.%d)", len, d->props.cc_major,
                           d->props.cc_minor, a->driver_version / 1000, a->driver_version % 1000 / 10);
        goto fail;
    }
    r = a->cuModuleGetFunction(&p->fn, p->mod, name);
    if (r == CUDA_ERROR_NOT_FOUND) {
        st = mt__cu_fail(log, loglen, MT_BUILD, "no kernel named '%s' in the program (an extern \"C\" __global__ function)", name);
        goto fail;
    }
    if (r != CUDA_SUCCESS) {
        st = mt__cu_fail_r(log, loglen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_BUILD, r, "cuModuleGetFunction('%s')", name);
        goto fail;
    }
    mt_cuda_prog_info *pi = &p->info;
#define FATTR(var, attr)                                                                           \
    do {                                                                                           \
        if ((r = a->cuFuncGetAttribute(&(var), attr, p->fn)) != CUDA_SUCCESS) {                    \
            st = mt__cu_fail_r(log, loglen, MT_BUILD, r, "cuFuncGetAttribute(" #attr ", '%s')", name); \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)
    FATTR(pi->registers, CU_FUNC_ATTRIBUTE_NUM_REGS);
    FATTR(pi->shared_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    FATTR(pi->local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    FATTR(pi->const_bytes, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES);
    FATTR(pi->max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    FATTR(pi->binary_version, CU_FUNC_ATTRIBUTE_BINARY_VERSION);
#undef FATTR
    pi->nparams = -1;
    if (a->cuFuncGetParamInfo) {
        /* Parameters are numbered from 0; the first index past the last one
         * is CUDA_ERROR_INVALID_VALUE. Any other answer: the count is unknown. */
        int n = 0;
        size_t off = 0, size = 0;
        CUresult pr = CUDA_SUCCESS;
        while (n <= MAX_PARAMS && (pr = a->cuFuncGetParamInfo(p->fn, (size_t)n, &off, &size)) == CUDA_SUCCESS) n++;
        if (n <= MAX_PARAMS && pr == CUDA_ERROR_INVALID_VALUE) pi->nparams = n;
    }
    mt__cu_pop(d);
    p->d = d;
    atomic_fetch_add(&d->refs, 1);
    *progp = p;
    return MT_OK;
fail:
    if (p->mod) (void)a->cuModuleUnload(p->mod);
    mt__cu_pop(d);
    free(p);
    return st;
}

mt_status mt__cu_prog_info(void *progp, mt_cuda_prog_info *out) {
    const mt__cu_prog *p = progp;
    if (!p || !out) return MT_INVALID_ARG;
    *out = p->info;
    return MT_OK;
}

void mt__cu_prog_free(void *progp) {
    mt__cu_prog *p = progp;
    if (p) handle_free(p->d, p, p->mod, 0);
}

/* ------------------------------------------------------------- buffers */

static mt_status mem_status(CUresult r) { return r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_DEVICE; }

mt_status mt__cu_alloc(void *devp, size_t bytes, void **bufp) {
    mt__cu_dev *d = devp;
    if (!bufp) return MT_INVALID_ARG;
    *bufp = NULL;
    if (!d || bytes == 0) return MT_INVALID_ARG;
    mt__cu_buf *b = calloc(1, sizeof *b);
    if (!b) return MT_NOMEM;
    if (mt__cu_push(d, NULL, 0) != MT_OK) {
        free(b);
        return MT_DEVICE;
    }
    CUresult r = d->api->cuMemAlloc(&b->ptr, bytes);
    mt__cu_pop(d);
    if (r != CUDA_SUCCESS) {
        free(b);
        return mem_status(r);
    }
    b->d = d;
    b->size = bytes;
    atomic_fetch_add(&d->refs, 1);
    *bufp = b;
    return MT_OK;
}

static int out_of_bounds(const mt__cu_buf *b, size_t offset, size_t bytes) { return offset > b->size || bytes > b->size - offset; }

/* One copy on d's stream, waited for. to_device: host -> device. */
static mt_status copy(mt__cu_dev *d, mt__cu_buf *b, size_t offset, void *host, size_t bytes, int to_device) {
    if (!d || !b || b->d->ctx != d->ctx || (bytes > 0 && !host) || out_of_bounds(b, offset, bytes)) return MT_INVALID_ARG;
    if (bytes == 0) return MT_OK;
    const mt__cu_api *a = d->api;
    pthread_mutex_lock(&d->mu);
    mt_status st = mt__cu_push(d, NULL, 0);
    if (st == MT_OK) {
        CUdeviceptr at = b->ptr + (CUdeviceptr)offset;
        CUresult r = to_device ? a->cuMemcpyHtoDAsync(at, host, bytes, d->stream) : a->cuMemcpyDtoHAsync(host, at, bytes, d->stream);
        /* Pageable host memory: the copy is staged, so wait for the stream
         * before the caller may touch (or free) its buffer. */
        CUresult s = a->cuStreamSynchronize(d->stream);
        if (r == CUDA_SUCCESS) r = s;
        if (r != CUDA_SUCCESS) st = mem_status(r);
        mt__cu_pop(d);
    }
    pthread_mutex_unlock(&d->mu);
    return st;
}

mt_status mt__cu_write(void *devp, void *bufp, size_t offset, const void *src, size_t bytes) {
    /* The host pointer is only read; the cast is for the shared copy routine. */
    return copy(devp, bufp, offset, (void *)(uintptr_t)src, bytes, 1);
}

mt_status mt__cu_read(void *devp, void *bufp, size_t offset, void *dst, size_t bytes) { return copy(devp, bufp, offset, dst, bytes, 0); }

void mt__cu_buf_free(void *bufp) {
    mt__cu_buf *b = bufp;
    if (b) handle_free(b->d, b, NULL, b->ptr);
}

/* ------------------------------------------------------------- timing */

typedef mt_status (*launch_fn)(void *ctx, char *err, size_t errlen);

/* Waits for d's stream after a failure, so that events and buffers are not
 * released under running work; the result is the failure already reported. */
static void drain(mt__cu_dev *d) { (void)d->api->cuStreamSynchronize(d->stream); }

/* `warmup` untimed launches, then `repeats` launches each between two
 * events; times_ms[i] is launch i's time. d->mu held, context current. */
static mt_status timed_runs(mt__cu_dev *d, launch_fn launch, void *ctx, int warmup, int repeats, double *times_ms, char *err,
                            size_t errlen) {
    const mt__cu_api *a = d->api;
    mt_status st = MT_OK;
    CUresult r;
    for (int w = 0; w < warmup && st == MT_OK; w++) st = launch(ctx, err, errlen);
    if (st != MT_OK) {
        drain(d);
        return st;
    }
    if (warmup > 0 && (r = a->cuStreamSynchronize(d->stream)) != CUDA_SUCCESS)
        return mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "kernel execution (warm-up, cuStreamSynchronize)");

    CUevent start[EVENT_BATCH], end[EVENT_BATCH];
    int nev = repeats < EVENT_BATCH ? repeats : EVENT_BATCH, made = 0;
    for (; made < nev; made++) {
        if ((r = a->cuEventCreate(&start[made], CU_EVENT_DEFAULT)) != CUDA_SUCCESS) break;
        if ((r = a->cuEventCreate(&end[made], CU_EVENT_DEFAULT)) != CUDA_SUCCESS) {
            (void)a->cuEventDestroy(start[made]);
            break;
        }
    }
    if (made < nev) st = mt__cu_fail_r(err, errlen, mem_status(r), r, "cuEventCreate");
    for (int done = 0; st == MT_OK && done < repeats;) {
        int batch = repeats - done < nev ? repeats - done : nev;
        for (int i = 0; i < batch && st == MT_OK; i++) {
            if ((r = a->cuEventRecord(start[i], d->stream)) != CUDA_SUCCESS) {
                st = mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "cuEventRecord (start of run %d)", done + i);
                break;
            }
            st = launch(ctx, err, errlen);
            if (st != MT_OK) break;
            if ((r = a->cuEventRecord(end[i], d->stream)) != CUDA_SUCCESS)
                st = mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "cuEventRecord (end of run %d)", done + i);
        }
        if (st != MT_OK) break;
        /* A fault in any launch of the batch surfaces here. */
        if ((r = a->cuEventSynchronize(end[batch - 1])) != CUDA_SUCCESS) {
            st = mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "kernel execution (cuEventSynchronize after run %d)", done + batch - 1);
            break;
        }
        for (int i = 0; i < batch; i++) {
            float ms = 0;
            if ((r = a->cuEventElapsedTime(&ms, start[i], end[i])) != CUDA_SUCCESS) {
                st = mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "cuEventElapsedTime (run %d)", done + i);
                break;
            }
            times_ms[done + i] = ms;
        }
        done += batch;
    }
    if (st != MT_OK) drain(d);
    for (int i = 0; i < made; i++) {
        (void)a->cuEventDestroy(start[i]);
        (void)a->cuEventDestroy(end[i]);
    }
    return st;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

mt_status mt__cu_time_on_stream(mt__cu_dev *d, launch_fn launch, void *ctx, int warmup, int repeats, double *median_ms, char *err,
                                size_t errlen) {
    if (repeats < 1 || warmup < 0 || !median_ms) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "timing: bad arguments");
    double *t = malloc(sizeof *t * (size_t)repeats);
    if (!t) return mt__cu_fail(err, errlen, MT_NOMEM, "out of memory for %d timings", repeats);
    mt_status st = timed_runs(d, launch, ctx, warmup, repeats, t, err, errlen);
    if (st == MT_OK) {
        qsort(t, (size_t)repeats, sizeof *t, cmp_double);
        *median_ms = repeats % 2 ? t[repeats / 2] : 0.5 * (t[repeats / 2 - 1] + t[repeats / 2]);
    }
    free(t);
    return st;
}

/* ------------------------------------------------------------- launch */

typedef struct kernel_launch {
    mt__cu_dev *d;
    mt__cu_prog *p;
    unsigned grid[3], block[3];
    void **params;
    int n;
} kernel_launch;

static mt_status launch_kernel(void *ctx, char *err, size_t errlen) {
    kernel_launch *k = ctx;
    CUresult r = k->d->api->cuLaunchKernel(k->p->fn, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], 0,
                                           k->d->stream, k->params, NULL);
    if (r == CUDA_SUCCESS) return MT_OK;
    /* Too many registers x threads for the SM, or too much local memory for
     * the device: a config this device cannot run. */
    mt_status st = r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ? MT_INVALID_CONFIG : MT_LAUNCH;
    return mt__cu_fail_r(err, errlen, st, r, "cuLaunchKernel (grid %ux%ux%u, block %ux%ux%u, %d registers/thread)", k->grid[0],
                         k->grid[1], k->grid[2], k->block[0], k->block[1], k->block[2], k->p->info.registers);
}

mt_status mt__cu_run(void *devp, void *progp, void **args, int nargs, const int64_t grid[3], const int64_t block[3], int warmup,
                     int repeats, double *times_ms, char *err, size_t errlen) {
    mt__cu_dev *d = devp;
    mt__cu_prog *p = progp;
    if (err && errlen) err[0] = '\0';
    if (!d || !p || !grid || !block || nargs < 0 || nargs > MAX_PARAMS || (nargs > 0 && !args) || warmup < 0 || repeats < 1 || !times_ms)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "run: bad arguments");
    if (p->d->ctx != d->ctx) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "run: the program was loaded on another device");
    if (p->info.nparams >= 0 && nargs != p->info.nparams)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "kernel takes %d parameter%s, got %d", p->info.nparams,
                           p->info.nparams == 1 ? "" : "s", nargs);
    static const int64_t max_grid[3] = {2147483647, 65535, 65535};
    kernel_launch k = {.d = d, .p = p};
    int64_t threads = 1;
    for (int i = 0; i < 3; i++) {
        if (grid[i] < 1 || block[i] < 1)
            return mt__cu_fail(err, errlen, MT_INVALID_CONFIG, "grid[%d]=%lld and block[%d]=%lld must be positive", i, (long long)grid[i],
                               i, (long long)block[i]);
        if (block[i] > d->info.max_work_item_sizes[i])
            return mt__cu_fail(err, errlen, MT_INVALID_CONFIG, "block[%d]=%lld exceeds the device's maximum block dimension %lld", i,
                               (long long)block[i], (long long)d->info.max_work_item_sizes[i]);
        if (grid[i] > max_grid[i])
            return mt__cu_fail(err, errlen, MT_INVALID_CONFIG, "grid[%d]=%lld exceeds CUDA's maximum grid dimension %lld", i,
                               (long long)grid[i], (long long)max_grid[i]);
        threads *= block[i];
        k.grid[i] = (unsigned)grid[i];
        k.block[i] = (unsigned)block[i];
    }
    if (threads > d->props.max_threads_per_block)
        return mt__cu_fail(err, errlen, MT_INVALID_CONFIG, "a block of %lld threads exceeds the device's %d", (long long)threads,
                           d->props.max_threads_per_block);
    if (threads > p->info.max_threads_per_block)
        return mt__cu_fail(err, errlen, MT_INVALID_CONFIG,
                           "a block of %lld threads exceeds this kernel's limit of %d (%d registers per thread, __launch_bounds__)",
                           (long long)threads, p->info.max_threads_per_block, p->info.registers);

    CUdeviceptr ptrs[MAX_PARAMS];
    void *params[MAX_PARAMS];
    for (int i = 0; i < nargs; i++) {
        const mt__cu_buf *b = args[i];
        if (!b) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "argument %d is NULL", i);
        if (b->d->ctx != d->ctx) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "argument %d belongs to another device", i);
        ptrs[i] = b->ptr;
        params[i] = &ptrs[i];
    }
    k.params = nargs > 0 ? params : NULL;
    k.n = nargs;

    pthread_mutex_lock(&d->mu);
    mt_status st = mt__cu_push(d, err, errlen);
    if (st == MT_OK) {
        st = timed_runs(d, launch_kernel, &k, warmup, repeats, times_ms, err, errlen);
        mt__cu_pop(d);
    }
    pthread_mutex_unlock(&d->mu);
    return st;
}
