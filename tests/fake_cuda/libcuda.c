/* A fake libcuda.so.1: see fake_cuda.h. Definitions use cuda.h's names, so
 * that every one is declared, typed and exported exactly as the real
 * driver's (cuMemAlloc is defined as cuMemAlloc_v2). Thread-safe: one mutex
 * around the shared state; the context stack is per thread. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(FAKE_CUDA_ERROR_OUT_OF_MEMORY == CUDA_ERROR_OUT_OF_MEMORY, "CUresult values");
_Static_assert(FAKE_CUDA_ERROR_INVALID_IMAGE == CUDA_ERROR_INVALID_IMAGE, "CUresult values");
_Static_assert(FAKE_CUDA_ERROR_ILLEGAL_ADDRESS == CUDA_ERROR_ILLEGAL_ADDRESS, "CUresult values");
_Static_assert(FAKE_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUresult values");

struct CUctx_st {
    int dev;
};
struct CUstream_st {
    int unused;
};
struct CUevent_st {
    double t_ms;
    int recorded;
};
struct CUmod_st {
    const unsigned char *image;
    size_t len;
};
struct CUfunc_st {
    struct CUmod_st *mod;
    int nparams; /* -1: cuFuncGetParamInfo says CUDA_ERROR_NOT_SUPPORTED */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUctx_st g_ctx = {0};
static fake_cuda_stats g_stats;
static int g_inited, g_mode_count = 1;
static _Thread_local CUcontext t_stack[32];
static _Thread_local int t_depth;

/* Live allocations, for checking copies and launch parameters. */
#define MAX_ALLOCS 65536
static struct {
    uintptr_t p;
    size_t n;
} g_allocs[MAX_ALLOCS];
static int g_nallocs;

/* Fault injection. */
static char g_fail_call[64];
static int g_fail_nth;
static CUresult g_fail_r;

EXPORT void fake_cuda_stats_get(fake_cuda_stats *out) {
    pthread_mutex_lock(&g_mu);
    *out = g_stats;
    pthread_mutex_unlock(&g_mu);
}

EXPORT void fake_cuda_fail(const char *call, int nth, int r) {
    pthread_mutex_lock(&g_mu);
    snprintf(g_fail_call, sizeof g_fail_call, "%s", call ? call : "");
    g_fail_nth = nth;
    g_fail_r = (CUresult)r;
    pthread_mutex_unlock(&g_mu);
}

/* The injected failure for `call`, if this is its turn. */
static CUresult injected(const char *call) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    if (g_fail_nth > 0 && strcmp(g_fail_call, call) == 0 && --g_fail_nth == 0) r = g_fail_r;
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* Every call that works in a context checks that the primary one is current. */
static CUresult need_ctx(void) {
    if (t_depth == 0) {
        pthread_mutex_lock(&g_mu);
        g_stats.no_context++;
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (t_stack[t_depth - 1] != &g_ctx) {
        pthread_mutex_lock(&g_mu);
        g_stats.wrong_context++;
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    return CUDA_SUCCESS;
}

#define CTX()                                \
    do {                                     \
        CUresult ctx_r_ = need_ctx();        \
        if (ctx_r_ != CUDA_SUCCESS) return ctx_r_; \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Non-zero when [p, p + n) lies inside one live allocation. g_mu held. */
static int inside(uintptr_t p, size_t n) {
    for (int i = 0; i < g_nallocs; i++)
        if (p >= g_allocs[i].p && n <= g_allocs[i].n && p - g_allocs[i].p <= g_allocs[i].n - n) return 1;
    return 0;
}

/* ---- errors and versions ---- */

static const char *err_name(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return "CUDA_SUCCESS";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return NULL;
    }
}

EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
    *pStr = err_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
    *pStr = err_name(error) ? "(fake driver's description)" : NULL;
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult CUDAAPI cuInit(unsigned int Flags) {
    if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
    const char *mode = getenv("FAKE_CUDA_MODE");
    if (mode && strcmp(mode, "nodevice") == 0) return CUDA_ERROR_NO_DEVICE;
    pthread_mutex_lock(&g_mu);
    g_inited = 1;
    g_mode_count = mode && strcmp(mode, "zero") == 0 ? 0 : 1;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

/* NVRTC loads libcuda.so.1 too and asks it for an internal table; the
 * fake has none to give (NVRTC then compiles without the driver). */
EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
    (void)pExportTableId;
    if (ppExportTable) *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

/* ---- devices ---- */

EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count) {
    if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED;
    *count = g_mode_count;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
    if (ordinal < 0 || ordinal >= g_mode_count) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
    if (dev != 0 || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "Fake NVIDIA H200");
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *pi = 233472; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)150754820096ULL;
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    g_stats.ctx_refs++;
    pthread_mutex_unlock(&g_mu);
    *pctx = &g_ctx;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    CUresult r = g_stats.ctx_refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (g_stats.ctx_refs > 0) g_stats.ctx_refs--;
    pthread_mutex_unlock(&g_mu);
    return r;
}

EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
    if (ctx != &g_ctx || t_depth >= 32) return CUDA_ERROR_INVALID_CONTEXT;
    t_stack[t_depth++] = ctx;
    pthread_mutex_lock(&g_mu);
    if (t_depth > g_stats.max_depth) g_stats.max_depth = t_depth;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) {
    if (t_depth == 0) {
        pthread_mutex_lock(&g_mu);
        g_stats.pops_without_push++;
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    CUcontext c = t_stack[--t_depth];
    if (pctx) *pctx = c;
    return CUDA_SUCCESS;
}

/* ---- streams and events ---- */

EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    (void)Flags;
    CTX();
    *phStream = calloc(1, sizeof **phStream);
    if (!*phStream) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_mu);
    g_stats.live_streams++;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
    CTX();
    if (!hStream) return CUDA_ERROR_INVALID_HANDLE;
    free(hStream);
    pthread_mutex_lock(&g_mu);
    g_stats.live_streams--;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
    (void)hStream;
    CTX();
    return injected("cuStreamSynchronize");
}

EXPORT CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    (void)Flags;
    CTX();
    *phEvent = calloc(1, sizeof **phEvent);
    if (!*phEvent) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_mu);
    g_stats.live_events++;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
    CTX();
    if (!hEvent) return CUDA_ERROR_INVALID_HANDLE;
    free(hEvent);
    pthread_mutex_lock(&g_mu);
    g_stats.live_events--;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
    (void)hStream;
    CTX();
    hEvent->t_ms = now_ms();
    hEvent->recorded = 1;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
    CTX();
    if (!hEvent->recorded) return CUDA_ERROR_INVALID_HANDLE;
    return injected("cuEventSynchronize");
}

EXPORT CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    CTX();
    if (!hStart->recorded || !hEnd->recorded) return CUDA_ERROR_INVALID_HANDLE;
    *pMilliseconds = (float)(hEnd->t_ms - hStart->t_ms);
    return CUDA_SUCCESS;
}

/* ---- memory ---- */

EXPORT CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total) {
    CTX();
    *free_b = (size_t)140 << 30;
    *total = (size_t)150754820096ULL;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
    CTX();
    CUresult r = injected("cuMemAlloc_v2");
    if (r != CUDA_SUCCESS) return r;
    if (bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (bytesize > ((size_t)1 << 38)) return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = malloc(bytesize);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_mu);
    if (g_nallocs == MAX_ALLOCS) {
        pthread_mutex_unlock(&g_mu);
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g_allocs[g_nallocs].p = (uintptr_t)p;
    g_allocs[g_nallocs].n = bytesize;
    g_nallocs++;
    g_stats.live_allocs++;
    pthread_mutex_unlock(&g_mu);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
    CTX();
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_nallocs; i++) {
        if (g_allocs[i].p != (uintptr_t)dptr) continue;
        g_allocs[i] = g_allocs[--g_nallocs];
        g_stats.live_allocs--;
        pthread_mutex_unlock(&g_mu);
        free((void *)(uintptr_t)dptr);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy(void *dst, const void *src, size_t n, uintptr_t dev, CUstream s) {
    CTX();
    if (!s) return CUDA_ERROR_INVALID_HANDLE; /* the module always names its own stream */
    pthread_mutex_lock(&g_mu);
    int ok = inside(dev, n);
    if (!ok) g_stats.bad_copies++;
    pthread_mutex_unlock(&g_mu);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    memcpy(dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream) {
    return copy((void *)(uintptr_t)dstDevice, srcHost, ByteCount, (uintptr_t)dstDevice, hStream);
}

EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
    return copy(dstHost, (const void *)(uintptr_t)srcDevice, ByteCount, (uintptr_t)srcDevice, hStream);
}

/* ---- modules and kernels ---- */

/* The extent of an ELF64 image: its section header table comes last. */
static size_t elf_size(const unsigned char *p) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3a, 2);
    memcpy(&shnum, p + 0x3c, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
    CTX();
    CUresult r = injected("cuModuleLoadData");
    if (r != CUDA_SUCCESS) return r;
    const unsigned char *p = image;
    if (memcmp(p, "\177ELF", 4) != 0 || p[4] != 2) return CUDA_ERROR_INVALID_IMAGE;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->image = p; /* the caller keeps the image until cuModuleGetFunction: true of the module */
    m->len = elf_size(p);
    pthread_mutex_lock(&g_mu);
    g_stats.live_modules++;
    pthread_mutex_unlock(&g_mu);
    *module = m;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
    CTX();
    if (!hmod) return CUDA_ERROR_INVALID_HANDLE;
    free(hmod);
    pthread_mutex_lock(&g_mu);
    g_stats.live_modules--;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    CTX();
    /* A kernel's name is in the image's string table, NUL-terminated. */
    size_t n = strlen(name);
    int found = 0;
    for (size_t i = 0; i + n + 1 < hmod->len && !found; i++)
        found = hmod->image[i] == (unsigned char)name[0] && memcmp(hmod->image + i, name, n + 1) == 0 && i > 0 && hmod->image[i - 1] == 0;
    if (!found) return CUDA_ERROR_NOT_FOUND;
    struct CUfunc_st *f = calloc(1, sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    f->mod = hmod;
    /* The test kernels: saxpy takes two pointers, "unknown_params" makes the
     * driver unable to say, everything else is a convolution (three). */
    f->nparams = strcmp(name, "saxpy") == 0 ? 2 : strcmp(name, "unknown_params") == 0 ? -1 : 3;
    *hfunc = f; /* leaked with the module, as the real driver owns functions */
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc) {
    CTX();
    (void)hfunc;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 40; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *pi = 0; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize) {
    CTX();
    if (func->nparams < 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (paramIndex >= (size_t)func->nparams) return CUDA_ERROR_INVALID_VALUE;
    *paramOffset = paramIndex * 8;
    *paramSize = 8;
    return CUDA_SUCCESS;
}

EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes,
                                       CUstream hStream, void **kernelParams, void **extra) {
    CTX();
    CUresult r = injected("cuLaunchKernel");
    if (r != CUDA_SUCCESS) return r;
    if (!f || !hStream || extra || sharedMemBytes) return CUDA_ERROR_INVALID_VALUE;
    if (!gridDimX || !gridDimY || !gridDimZ || gridDimY > 65535 || gridDimZ > 65535) return CUDA_ERROR_INVALID_VALUE;
    if (!blockDimX || !blockDimY || !blockDimZ || blockDimZ > 64 || (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    int n = f->nparams < 0 ? 0 : f->nparams;
    pthread_mutex_lock(&g_mu);
    int ok = n == 0 || kernelParams;
    for (int i = 0; ok && i < n; i++) ok = kernelParams[i] && inside((uintptr_t) * (CUdeviceptr *)kernelParams[i], 1);
    if (!ok) g_stats.bad_params++;
    g_stats.launches++;
    pthread_mutex_unlock(&g_mu);
    if (!ok) return CUDA_ERROR_INVALID_VALUE;
    /* Take a little time, so that event pairs measure something. */
    double t0 = now_ms();
    while (now_ms() - t0 < 0.02) {
    }
    return CUDA_SUCCESS;
}
