/* The CUDA backend: mt_backend_i (device/backend-impl.h) on the CUDA module's
 * driver half (cuda/cuda_module.h), which it wraps one to one.
 *
 * What lives here rather than in the module is what libmtgpu owns: device
 * fingerprints (the same function as OpenCL's, so records stay comparable),
 * the binary cache (device/kernel_cache.c, shared with OpenCL) and the
 * decision which kernels are over a limit. A build prints nothing: the
 * source is the CUDA printer's output (device.c prints it); it is compiled
 * with NVRTC + nvJitLink for the device's own sm_XY, ptxas's report is
 * checked against the limits (a config over one is MT_INVALID_CONFIG before
 * anything is loaded), and the cubin is loaded and cached. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_module.h"
#include "backend-impl.h"
#include "kernel_cache.h"
#include "fail.h"

/* Wall-clock limit on one NVRTC compile inside a build: the template check
 * already rejects kernels that unroll into minutes of compiling; this stops
 * one that slips through from holding a compile thread for longer. */
#define MT__CUDA_BUILD_TIMEOUT_S 120.0

typedef struct cu_dev {
    const mt_cuda_module *m;
    void *h; /* the module's device */
    mt_device_info info;
    mt_cuda_device_props props;
    char toolkit[128]; /* NVRTC and nvJitLink versions: part of the cache key */
    int use_cache;
    char cache_dir[MT_KCACHE_DIR_MAX];
} cu_dev;

/* The process-wide module; only called once mt__backend_cuda handed out the
 * table, so it is loaded. */
static const mt_cuda_module *mod(void) {
    const mt_cuda_module *m = NULL;
    (void)mt__cuda_module(&m, NULL, 0);
    return m;
}

int mt__cuda_module_can_run(const mt_cuda_module *m) {
    return m && MT_CUDA_MODULE_HAS(m, dev_list) && MT_CUDA_MODULE_HAS(m, dev_open) && MT_CUDA_MODULE_HAS(m, dev_close) &&
           MT_CUDA_MODULE_HAS(m, load) && MT_CUDA_MODULE_HAS(m, prog_free) && MT_CUDA_MODULE_HAS(m, alloc) &&
           MT_CUDA_MODULE_HAS(m, write) && MT_CUDA_MODULE_HAS(m, read) && MT_CUDA_MODULE_HAS(m, buf_free) &&
           MT_CUDA_MODULE_HAS(m, run) && MT_CUDA_MODULE_HAS(m, dev_props) && MT_CUDA_MODULE_HAS(m, prog_info) &&
           MT_CUDA_MODULE_HAS(m, cudnn_available) && MT_CUDA_MODULE_HAS(m, cudnn_conv);
}

/* What libmtgpu adds to a description the module filled. */
static void finish_info(mt_device_info *info) {
    double peak = mt__env_peak_gflops();
    if (peak > 0) info->peak_gflops = peak;
    mt__device_fingerprint(info);
}

/* ---------------------------------------------------------- limits */

mt_status mt__cuda_check_resources(const mt_cuda_resources *r, const mt_cuda_device_props *props, char *err, size_t errlen) {
    if (!r || !props) return mt__fail(err, errlen, MT_INVALID_ARG, "NULL resources or device");
    int sm = 10 * props->cc_major + props->cc_minor;
    mt_status st = mt_cuda_check_limits(r, sm, err, errlen);
    if (st != MT_OK) return st;
    if (props->max_shared_per_block > 0 && r->shared_bytes > props->max_shared_per_block)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%d bytes of static shared memory per block, over this device's %d", r->shared_bytes,
                        props->max_shared_per_block);
    return MT_OK;
}

mt_status mt__cuda_build_cubin(const mt_cuda_module *m, const char *src, const char *name, const mt_cuda_device_props *props,
                               double timeout_s, char **cubin, size_t *len, mt_cuda_resources *res, char *log, size_t loglen) {
    mt_cuda_resources scratch;
    if (!res) res = &scratch;
    memset(res, 0, sizeof *res);
    if (log && loglen) log[0] = '\0';
    if (cubin) *cubin = NULL;
    if (len) *len = 0;
    if (!m || !src || !props || !cubin || !len) return mt__fail(log, loglen, MT_INVALID_ARG, "CUDA build: NULL argument");
    mt_cuda_check_params p = mt_cuda_check_default_params();
    p.sm_arch = 10 * props->cc_major + props->cc_minor;
    p.timeout_s = timeout_s;
    char *bin = NULL;
    size_t n = 0;
    mt_status st = m->resources(src, name, &p, res, &bin, &n, log, loglen);
    if (st != MT_OK) {
        m->free_buffer(bin);
        return st;
    }
    /* On success the log holds ptxas's report; keep only a reason. */
    if (log && loglen) log[0] = '\0';
    st = mt__cuda_check_resources(res, props, log, loglen);
    if (st != MT_OK) {
        m->free_buffer(bin);
        return st;
    }
    *cubin = bin;
    *len = n;
    return MT_OK;
}

/* The driver's figures for a loaded kernel, checked as a fresh report would
 * be (spills are not among them: a cached cubin passed that check when it
 * was compiled). */
static mt_status check_loaded(const cu_dev *d, void *prog, char *log, size_t loglen) {
    mt_cuda_prog_info pi;
    mt_status st = d->m->prog_info(prog, &pi);
    if (st != MT_OK) return mt__fail(log, loglen, st, "prog_info failed");
    mt_cuda_resources r;
    memset(&r, 0, sizeof r);
    r.registers = pi.registers;
    r.shared_bytes = pi.shared_bytes;
    r.local_bytes = pi.local_bytes;
    return mt__cuda_check_resources(&r, &d->props, log, loglen);
}

/* -------------------------------------------------------------- table */

static mt_status cu_list(mt_device_info *out, int max, int *count, char *err, size_t errlen) {
    const mt_cuda_module *m = mod();
    if (!m) return mt__fail(err, errlen, MT_UNAVAILABLE, "CUDA module not loaded");
    mt_status st = m->dev_list(out, max, count, err, errlen);
    if (st != MT_OK) return st;
    for (int i = 0; i < *count && i < max; i++) finish_info(&out[i]);
    return MT_OK;
}

static void cu_close(void *devp) {
    cu_dev *d = devp;
    if (!d) return;
    d->m->dev_close(d->h);
    free(d);
}

static mt_status cu_open(int index, const mt_device_params *params, void **devp, mt_device_info *info, char *err, size_t errlen) {
    if (!devp) return mt__fail(err, errlen, MT_INVALID_ARG, "cu_open: NULL output");
    *devp = NULL;
    const mt_cuda_module *m = mod();
    if (!m) return mt__fail(err, errlen, MT_UNAVAILABLE, "CUDA module not loaded");
    cu_dev *d = calloc(1, sizeof *d);
    if (!d) return mt__fail(err, errlen, MT_NOMEM, "out of memory opening cuda:%d", index);
    d->m = m;
    mt_status st = m->dev_open(index, &d->h, &d->info, err, errlen);
    if (st != MT_OK) {
        free(d);
        return st;
    }
    if ((st = m->dev_props(d->h, &d->props)) != MT_OK) {
        cu_close(d);
        return mt__fail(err, errlen, st, "dev_props of cuda:%d failed", index);
    }
    finish_info(&d->info);
    m->toolkit_version(d->toolkit, sizeof d->toolkit);
    int use_cache = params ? params->use_cache : 1;
    if (use_cache) d->use_cache = mt__kcache_dir(params ? params->cache_dir : NULL, d->cache_dir, sizeof d->cache_dir) == 0;
    if (info) *info = d->info;
    *devp = d;
    return MT_OK;
}

static uint64_t hash_str(const char *s, uint64_t h) { return mt__hash64(s, strlen(s) + 1, h); }

/* The cache key: everything that can change the cubin or whether this
 * driver loads it. The options are those of the module's resources member
 * (NVRTC to PTX for compute_XY, nvJitLink to sm_XY). */
static uint64_t cache_key(const cu_dev *d, const char *src) {
    char opts[160];
    int sm = 10 * d->props.cc_major + d->props.cc_minor;
    snprintf(opts, sizeof opts, "nvrtc --gpu-architecture=compute_%d -default-device --std=c++17; nvJitLink -arch=sm_%d", sm, sm);
    char drv[32];
    snprintf(drv, sizeof drv, "%d", d->props.driver_version);
    uint64_t h = hash_str("MTCUBIN1", 0);
    h = hash_str(src, h);
    h = hash_str(opts, h);
    h = hash_str(d->info.fingerprint, h);
    h = hash_str(d->info.driver, h);
    h = hash_str(drv, h);
    h = hash_str(d->toolkit, h);
    return h;
}

static mt_status cu_build(void *devp, const char *src, const char *kernel_name, void **progp, int *from_cache, char *log,
                          size_t loglen) {
    cu_dev *d = devp;
    if (log && loglen) log[0] = '\0';
    if (from_cache) *from_cache = 0;
    if (!d || !src || !kernel_name || !*kernel_name || !progp) return mt__fail(log, loglen, MT_INVALID_ARG, "cu_build: bad arguments");
    *progp = NULL;
    const mt_cuda_module *m = d->m;
    uint64_t key = cache_key(d, src);
    void *prog = NULL;
    if (d->use_cache) {
        size_t len = 0;
        unsigned char *bin = mt__kcache_load(d->cache_dir, "cubin", key, &len);
        if (bin) {
            /* A cached cubin the driver refuses is rebuilt (and replaced). */
            mt_status st = m->load(d->h, bin, len, kernel_name, &prog, NULL, 0);
            free(bin);
            if (st == MT_OK && check_loaded(d, prog, NULL, 0) == MT_OK) {
                if (from_cache) *from_cache = 1;
                *progp = prog;
                return MT_OK;
            }
            m->prog_free(prog);
            prog = NULL;
        }
    }
    char *cubin = NULL;
    size_t len = 0;
    mt_status st = mt__cuda_build_cubin(m, src, kernel_name, &d->props, MT__CUDA_BUILD_TIMEOUT_S, &cubin, &len, NULL, log, loglen);
    if (st != MT_OK) return st;
    st = m->load(d->h, cubin, len, kernel_name, &prog, log, loglen);
    if (st == MT_OK && (st = check_loaded(d, prog, log, loglen)) != MT_OK) {
        m->prog_free(prog);
        prog = NULL;
    }
    if (st == MT_OK && d->use_cache) (void)mt__kcache_store(d->cache_dir, "cubin", key, cubin, len);
    m->free_buffer(cubin);
    if (st != MT_OK) return st;
    *progp = prog;
    return MT_OK;
}

static void cu_prog_free(void *prog) {
    if (prog) mod()->prog_free(prog);
}

static mt_status cu_alloc(void *devp, size_t bytes, void **buf) {
    cu_dev *d = devp;
    if (!d) return MT_INVALID_ARG;
    return d->m->alloc(d->h, bytes, buf);
}

static mt_status cu_write(void *devp, void *buf, size_t offset, const void *src, size_t bytes) {
    cu_dev *d = devp;
    if (!d) return MT_INVALID_ARG;
    return d->m->write(d->h, buf, offset, src, bytes);
}

static mt_status cu_read(void *devp, void *buf, size_t offset, void *dst, size_t bytes) {
    cu_dev *d = devp;
    if (!d) return MT_INVALID_ARG;
    return d->m->read(d->h, buf, offset, dst, bytes);
}

static void cu_buf_free(void *buf) {
    if (buf) mod()->buf_free(buf);
}

static mt_status cu_run(void *devp, void *prog, void **args, int nargs, const int64_t grid[3], const int64_t block[3], int warmup,
                        int repeats, double *times_ms, char *err, size_t errlen) {
    cu_dev *d = devp;
    if (!d) return mt__fail(err, errlen, MT_INVALID_ARG, "cu_run: NULL device");
    return d->m->run(d->h, prog, args, nargs, grid, block, warmup, repeats, times_ms, err, errlen);
}

void mt__cuda_backend_module_dev(void *backend_dev, const mt_cuda_module **m, void **module_dev) {
    const cu_dev *d = backend_dev;
    if (m) *m = d ? d->m : NULL;
    if (module_dev) *module_dev = d ? d->h : NULL;
}

static const mt_backend_i cuda_backend = {
    /* .kind      = */ MT_BACKEND_CUDA,
    /* .lang      = */ MT_LANG_CUDA,
    /* .list      = */ cu_list,
    /* .open      = */ cu_open,
    /* .close     = */ cu_close,
    /* .build     = */ cu_build,
    /* .prog_free = */ cu_prog_free,
    /* .alloc     = */ cu_alloc,
    /* .write     = */ cu_write,
    /* .read      = */ cu_read,
    /* .buf_free  = */ cu_buf_free,
    /* .run       = */ cu_run,
    /* .launch    = */ NULL, /* each launch runs to completion (the executor is OpenCL-only for now) */
    /* .finish    = */ NULL,
    /* .view      = */ NULL, /* the executor is OpenCL-only for now */
    /* .evict     = */ NULL,
    /* .alloc_host = */ NULL,
};

const mt_backend_i *mt__backend_cuda(char *err, size_t errlen) {
    const mt_cuda_module *m;
    char why[1536];
    if (mt__cuda_module(&m, why, sizeof why) != MT_OK) {
        mt__fail(err, errlen, MT_UNAVAILABLE, "CUDA module not found: %s", why);
        return NULL;
    }
    if (!mt__cuda_module_can_run(m)) {
        mt__fail(err, errlen, MT_UNAVAILABLE,
                 "the CUDA module predates the driver API (a %zu-byte table): it can compile-check but not run kernels; rebuild it",
                 m->struct_size);
        return NULL;
    }
    if (!m->driver_available(why, sizeof why)) {
        mt__fail(err, errlen, MT_UNAVAILABLE, "no usable CUDA driver: %s", why);
        return NULL;
    }
    if (err && errlen) err[0] = '\0';
    return &cuda_backend;
}
