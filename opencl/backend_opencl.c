/* OpenCL backend: device discovery, program build through the binary cache,
 * buffers, and launches timed with profiling events (OpenCL 1.2 API).
 *
 * Devices are every device of every platform (all device types), numbered in
 * that flattened order. Each opened device owns one context and one in-order
 * queue with profiling enabled. Every CL call is checked; a failure returns an
 * mt_status with the CL error's name and releases whatever the call created. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#ifdef __APPLE__
#include <OpenCL/opencl.h>
#else
#include <CL/cl.h>
#endif

#include "backend-impl.h"
#include "kernel_cache.h"
#include "fail.h"
#include "pocl_affinity.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* -w: PoCL's clang prints "N warnings generated." to the process's stderr for
 * generated kernels (unused lets, etc.), which buries the tuner's progress;
 * errors still come back in the build log. */
#define CL_BUILD_OPTIONS "-cl-std=CL1.2 -cl-mad-enable -w"

/* ------------------------------------------------------------------ errors */

/* The name of a CL error code ("CL_OUT_OF_RESOURCES"); never NULL. */
static const char *cl_err_name(cl_int e) {
    switch (e) {
#define E(x) case x: return #x;
        E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE) E(CL_COMPILER_NOT_AVAILABLE)
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE) E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
        E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP) E(CL_IMAGE_FORMAT_MISMATCH)
        E(CL_IMAGE_FORMAT_NOT_SUPPORTED) E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
        E(CL_MISALIGNED_SUB_BUFFER_OFFSET) E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE) E(CL_LINK_PROGRAM_FAILURE)
        E(CL_DEVICE_PARTITION_FAILED) E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
        E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM) E(CL_INVALID_DEVICE)
        E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES) E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR)
        E(CL_INVALID_MEM_OBJECT) E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE) E(CL_INVALID_SAMPLER)
        E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS) E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
        E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION) E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX)
        E(CL_INVALID_ARG_VALUE) E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS) E(CL_INVALID_WORK_DIMENSION)
        E(CL_INVALID_WORK_GROUP_SIZE) E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET)
        E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION) E(CL_INVALID_GL_OBJECT)
        E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL) E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
        E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS) E(CL_INVALID_LINKER_OPTIONS)
        E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case CL_PLATFORM_NOT_FOUND_KHR: return "CL_PLATFORM_NOT_FOUND_KHR";
    case -70: return "CL_INVALID_PIPE_SIZE";
    case -71: return "CL_INVALID_DEVICE_QUEUE";
    case -72: return "CL_INVALID_SPEC_ID";
    case -73: return "CL_MAX_SIZE_RESTRICTION_EXCEEDED";
    }
    return "CL_UNKNOWN_ERROR";
}

/* Formats "<what>: <CL name> (<code>)" into err and returns s. */
static mt_status cl_fail(char *err, size_t errlen, mt_status s, const char *what, cl_int e) {
    return mt__fail(err, errlen, s, "%s: %s (%d)", what, cl_err_name(e), (int)e);
}

/* Status for a failed allocation-like call: memory errors are MT_NOMEM. */
static mt_status cl_mem_status(cl_int e, mt_status otherwise) {
    return (e == CL_OUT_OF_HOST_MEMORY || e == CL_MEM_OBJECT_ALLOCATION_FAILURE || e == CL_OUT_OF_RESOURCES) ? MT_NOMEM : otherwise;
}

/* ---------------------------------------------------------------- handles */

typedef struct cl_dev {
    cl_platform_id platform;
    cl_device_id device;
    cl_context ctx;
    cl_command_queue queue;
    mt_device_info info;
    int use_cache;                      /* cache_dir resolved and writable */
    int pocl;                           /* the platform is PoCL: see cl_build */
    char cache_dir[MT_KCACHE_DIR_MAX];
    /* Timed launches queued since the last finish: their events and where
     * finish writes their times. */
    cl_event *timed_ev;
    double **timed_ms;
    int ntimed, timed_cap;
} cl_dev;

typedef struct cl_prog {
    cl_program program;
    cl_kernel kernel;
    cl_uint nargs;
    size_t wg_size;     /* CL_KERNEL_WORK_GROUP_SIZE: this kernel's own limit */
    cl_ulong local_mem; /* CL_KERNEL_LOCAL_MEM_SIZE */
    cl_mem *set;        /* nargs: the buffer each argument was last set to (NULL: not set) */
} cl_prog;

typedef struct cl_buf {
    cl_mem mem;
    size_t size;
} cl_buf;

/* ------------------------------------------------------------- discovery */

typedef struct cl_devlist {
    int n;
    cl_platform_id *plat; /* plat[i]: platform of dev[i] */
    cl_device_id *dev;
} cl_devlist;

static void devlist_free(cl_devlist *l) {
    free(l->plat);
    free(l->dev);
    l->plat = NULL;
    l->dev = NULL;
    l->n = 0;
}

/* Lists every device of every platform. A platform whose devices cannot be
 * listed is skipped so that it does not hide the others. MT_UNAVAILABLE when
 * there is no device at all. */
static mt_status cl_enumerate(cl_devlist *out, char *err, size_t errlen) {
    out->n = 0;
    out->plat = NULL;
    out->dev = NULL;
    mt_pocl_pin_workers();
    cl_uint np = 0;
    cl_int e = clGetPlatformIDs(0, NULL, &np);
    if (e == CL_PLATFORM_NOT_FOUND_KHR || (e == CL_SUCCESS && np == 0))
        return mt__fail(err, errlen, MT_UNAVAILABLE, "no OpenCL platform found (no ICD installed?)");
    if (e != CL_SUCCESS) return cl_fail(err, errlen, MT_UNAVAILABLE, "clGetPlatformIDs", e);
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats) return mt__fail(err, errlen, MT_NOMEM, "out of memory listing OpenCL platforms");
    e = clGetPlatformIDs(np, plats, NULL);
    if (e != CL_SUCCESS) {
        free(plats);
        return cl_fail(err, errlen, MT_UNAVAILABLE, "clGetPlatformIDs", e);
    }
    for (cl_uint p = 0; p < np; p++) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS || nd == 0) continue;
        cl_device_id *ids = calloc(nd, sizeof *ids);
        if (!ids) goto nomem;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, nd, ids, NULL) != CL_SUCCESS) {
            free(ids);
            continue;
        }
        cl_platform_id *np2 = realloc(out->plat, (size_t)(out->n + (int)nd) * sizeof *np2);
        if (np2) out->plat = np2;
        cl_device_id *nd2 = np2 ? realloc(out->dev, (size_t)(out->n + (int)nd) * sizeof *nd2) : NULL;
        if (!nd2) {
            free(ids);
            goto nomem;
        }
        out->dev = nd2;
        for (cl_uint i = 0; i < nd; i++) {
            out->plat[out->n] = plats[p];
            out->dev[out->n] = ids[i];
            out->n++;
        }
        free(ids);
    }
    free(plats);
    if (out->n == 0) {
        devlist_free(out);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "no OpenCL device found on %u platform(s)", (unsigned)np);
    }
    return MT_OK;
nomem:
    free(plats);
    devlist_free(out);
    return mt__fail(err, errlen, MT_NOMEM, "out of memory listing OpenCL devices");
}

/* Copies a string device/platform property into dst (truncated, always
 * terminated). Returns a malloc'd copy of the whole value when `whole` is
 * non-NULL (the caller frees it; NULL on failure). */
static cl_int cl_info_str(cl_platform_id plat, cl_device_id dev, cl_uint param, char *dst, size_t dstlen, char **whole) {
    size_t n = 0;
    cl_int e = dev ? clGetDeviceInfo(dev, (cl_device_info)param, 0, NULL, &n) : clGetPlatformInfo(plat, (cl_platform_info)param, 0, NULL, &n);
    if (dst && dstlen) dst[0] = '\0';
    if (whole) *whole = NULL;
    if (e != CL_SUCCESS) return e;
    char *buf = malloc(n + 1);
    if (!buf) return CL_OUT_OF_HOST_MEMORY;
    e = dev ? clGetDeviceInfo(dev, (cl_device_info)param, n, buf, NULL) : clGetPlatformInfo(plat, (cl_platform_info)param, n, buf, NULL);
    if (e != CL_SUCCESS) {
        free(buf);
        return e;
    }
    buf[n] = '\0';
    /* Some drivers pad names with spaces. */
    size_t len = strlen(buf);
    while (len > 0 && isspace((unsigned char)buf[len - 1])) buf[--len] = '\0';
    if (dst && dstlen) snprintf(dst, dstlen, "%s", buf);
    if (whole)
        *whole = buf;
    else
        free(buf);
    return CL_SUCCESS;
}

/* Case-insensitive substring search. */
static int has_word(const char *hay, const char *needle) {
    if (!hay) return 0;
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++)
        if (strncasecmp(p, needle, n) == 0) return 1;
    return 0;
}

/* Host CPU facts from /proc/cpuinfo and sysfs; zeros where unknown. */
typedef struct host_cpu {
    double max_mhz;       /* largest "cpu MHz" seen */
    double boost_mhz;     /* cpufreq cpuinfo_max_freq */
    int threads_per_core; /* siblings / cpu cores */
} host_cpu;

static host_cpu read_host_cpu(void) {
    host_cpu h = {0, 0, 1};
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        int siblings = 0, cores = 0;
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            double v = atof(colon + 1);
            if (strncmp(line, "cpu MHz", 7) == 0 && v > h.max_mhz) h.max_mhz = v;
            else if (strncmp(line, "siblings", 8) == 0 && siblings == 0) siblings = (int)v;
            else if (strncmp(line, "cpu cores", 9) == 0 && cores == 0) cores = (int)v;
        }
        fclose(f);
        if (siblings > 0 && cores > 0 && siblings >= cores) h.threads_per_core = siblings / cores;
    }
    f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f) {
        long khz = 0;
        if (fscanf(f, "%ld", &khz) == 1 && khz > 0) h.boost_mhz = (double)khz / 1000.0;
        fclose(f);
    }
    return h;
}

/* FP32 lanes of one FMA unit, from the architecture named by the device
 * (PoCL names its CPU device after the LLVM target, e.g. "pthread-haswell"). */
static int cpu_fma_lanes(const char *name, const char *version, const char *extensions, int native_width) {
    static const char *const avx512[] = {"avx512", "skylake-avx512", "skx", "cascadelake", "cooperlake", "cannonlake", "icelake",
                                         "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4",
                                         "znver5", "knl", "knm"};
    static const char *const avx2[] = {"avx2", "haswell", "broadwell", "skylake", "kabylake", "coffeelake", "cometlake",
                                       "alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake", "gracemont",
                                       "znver1", "znver2", "znver3", "bdver4", "zen"};
    const char *texts[3] = {name, version, extensions};
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
            if (has_word(texts[t], avx512[i])) return 16;
    for (int t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof avx2 / sizeof *avx2; i++)
            if (has_word(texts[t], avx2[i])) return 8;
    return native_width > 0 ? native_width : 1;
}

static uint64_t hash_str(const char *s, uint64_t h) { return mt__hash64(s, strlen(s) + 1, h); }

/* Fills *info for device `dev` of platform `plat`, listed at `index`. */
static mt_status cl_fill_info(cl_platform_id plat, cl_device_id dev, int index, mt_device_info *info, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    info->backend = MT_BACKEND_OPENCL;
    info->index = index;
    char drv[128], ver[128];
    char *extensions = NULL, *version = NULL;
    cl_int e;
    const char *what = "clGetPlatformInfo(CL_PLATFORM_NAME)";
    if ((e = cl_info_str(plat, NULL, CL_PLATFORM_NAME, info->platform, sizeof info->platform, NULL)) != CL_SUCCESS) goto clfail;
    what = "clGetDeviceInfo(CL_DEVICE_NAME)";
    if ((e = cl_info_str(NULL, dev, CL_DEVICE_NAME, info->name, sizeof info->name, NULL)) != CL_SUCCESS) goto clfail;
    what = "clGetDeviceInfo(CL_DEVICE_VENDOR)";
    if ((e = cl_info_str(NULL, dev, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor, NULL)) != CL_SUCCESS) goto clfail;
    what = "clGetDeviceInfo(CL_DRIVER_VERSION)";
    if ((e = cl_info_str(NULL, dev, CL_DRIVER_VERSION, drv, sizeof drv, NULL)) != CL_SUCCESS) goto clfail;
    what = "clGetDeviceInfo(CL_DEVICE_VERSION)";
    if ((e = cl_info_str(NULL, dev, CL_DEVICE_VERSION, ver, sizeof ver, &version)) != CL_SUCCESS) goto clfail;
    what = "clGetDeviceInfo(CL_DEVICE_EXTENSIONS)";
    if ((e = cl_info_str(NULL, dev, CL_DEVICE_EXTENSIONS, NULL, 0, &extensions)) != CL_SUCCESS) goto clfail;
    snprintf(info->driver, sizeof info->driver, "%.60s; %.64s", drv, ver);

    cl_device_type type = 0;
    cl_uint cu = 0, clock = 0, dims = 0, pref = 0, native = 0;
    cl_ulong gmem = 0, lmem = 0, maxalloc = 0;
    size_t wg = 0, items[3] = {1, 1, 1};
#define Q(param, var)                                                                   \
    do {                                                                                \
        what = "clGetDeviceInfo(" #param ")";                                           \
        if ((e = clGetDeviceInfo(dev, param, sizeof(var), &(var), NULL)) != CL_SUCCESS) \
            goto clfail;                                                                \
    } while (0)
    Q(CL_DEVICE_TYPE, type);
    Q(CL_DEVICE_MAX_COMPUTE_UNITS, cu);
    Q(CL_DEVICE_MAX_CLOCK_FREQUENCY, clock);
    Q(CL_DEVICE_GLOBAL_MEM_SIZE, gmem);
    Q(CL_DEVICE_LOCAL_MEM_SIZE, lmem);
    Q(CL_DEVICE_MAX_MEM_ALLOC_SIZE, maxalloc);
    Q(CL_DEVICE_MAX_WORK_GROUP_SIZE, wg);
    Q(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, dims);
    Q(CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, pref);
    Q(CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, native);
#undef Q
    if (dims > 0) {
        size_t *sizes = calloc(dims, sizeof *sizes);
        if (!sizes) {
            free(extensions);
            free(version);
            return mt__fail(err, errlen, MT_NOMEM, "out of memory querying OpenCL device");
        }
        e = clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, dims * sizeof *sizes, sizes, NULL);
        for (cl_uint i = 0; e == CL_SUCCESS && i < dims && i < 3; i++) items[i] = sizes[i];
        free(sizes);
        what = "clGetDeviceInfo(CL_DEVICE_MAX_WORK_ITEM_SIZES)";
        if (e != CL_SUCCESS) goto clfail;
    }

    info->is_cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    info->compute_units = (int)cu;
    host_cpu host = {0, 0, 1};
    if (info->is_cpu) host = read_host_cpu();
    info->clock_mhz = (int)clock;
    if (info->clock_mhz <= 0 && info->is_cpu) info->clock_mhz = (int)(host.max_mhz + 0.5);
    info->global_mem_bytes = gmem;
    info->local_mem_bytes = lmem;
    info->max_alloc_bytes = maxalloc;
    info->max_work_group_size = (int64_t)wg;
    for (int i = 0; i < 3; i++) info->max_work_item_sizes[i] = (int64_t)items[i];
    info->pref_vector_width = (int)pref;
    info->native_vector_width = (int)native;
    info->max_registers_per_thread = 0;

    double peak = mt__env_peak_gflops();
    if (peak <= 0 && info->is_cpu) {
        /* cores x clock x 2 (FMA) x lanes x 2 FMA units. OpenCL CPU drivers
         * count hardware threads as compute units; SMT siblings share the FMA
         * units, so count cores. The boost clock, where the kernel reports one,
         * is the clock a busy core actually runs at. */
        double cores = (double)cu / (host.threads_per_core > 0 ? host.threads_per_core : 1);
        if (cores < 1) cores = 1;
        double mhz = info->clock_mhz > host.boost_mhz ? info->clock_mhz : host.boost_mhz;
        int lanes = cpu_fma_lanes(info->name, version, extensions, info->native_vector_width);
        peak = cores * mhz * 1e-3 * 2.0 * lanes * 2.0;
    } else if (peak <= 0) {
        /* A rough guess for GPUs: 64 FP32 lanes per compute unit. */
        peak = (double)cu * info->clock_mhz * 1e-3 * 2.0 * 64.0;
    }
    info->peak_gflops = peak;

    mt__device_fingerprint(info);
    free(extensions);
    free(version);
    return MT_OK;
clfail:
    free(extensions);
    free(version);
    return cl_fail(err, errlen, MT_DEVICE, what, e);
}

static mt_status cl_list(mt_device_info *out, int max, int *count, char *err, size_t errlen) {
    if (!count || max < 0 || (max > 0 && !out)) return mt__fail(err, errlen, MT_INVALID_ARG, "cl_list: bad arguments");
    *count = 0;
    cl_devlist l;
    mt_status st = cl_enumerate(&l, err, errlen);
    if (st != MT_OK) return st;
    for (int i = 0; i < l.n && i < max; i++) {
        st = cl_fill_info(l.plat[i], l.dev[i], i, &out[i], err, errlen);
        if (st != MT_OK) {
            devlist_free(&l);
            return st;
        }
    }
    *count = l.n;
    devlist_free(&l);
    return MT_OK;
}

/* ------------------------------------------------------------ open/close */

static void cl_release_timed(cl_dev *d) {
    for (int i = 0; i < d->ntimed; i++) clReleaseEvent(d->timed_ev[i]);
    d->ntimed = 0;
}

static void cl_close(void *devp) {
    cl_dev *d = devp;
    if (!d) return;
    if (d->queue) {
        clFinish(d->queue);
        clReleaseCommandQueue(d->queue);
    }
    cl_release_timed(d);
    free(d->timed_ev);
    free(d->timed_ms);
    if (d->ctx) clReleaseContext(d->ctx);
    free(d);
}

static mt_status cl_open(int index, const mt_device_params *params, void **devp, mt_device_info *info, char *err, size_t errlen) {
    if (!devp) return mt__fail(err, errlen, MT_INVALID_ARG, "cl_open: NULL output");
    *devp = NULL;
    cl_devlist l;
    mt_status st = cl_enumerate(&l, err, errlen);
    if (st != MT_OK) return st;
    if (index < 0 || index >= l.n) {
        int n = l.n;
        devlist_free(&l);
        return mt__fail(err, errlen, MT_NOT_FOUND, "no device opencl:%d (%d OpenCL device%s available)", index, n, n == 1 ? "" : "s");
    }
    cl_dev *d = calloc(1, sizeof *d);
    if (!d) {
        devlist_free(&l);
        return mt__fail(err, errlen, MT_NOMEM, "out of memory opening opencl:%d", index);
    }
    d->platform = l.plat[index];
    d->device = l.dev[index];
    devlist_free(&l);
    st = cl_fill_info(d->platform, d->device, index, &d->info, err, errlen);
    if (st != MT_OK) {
        free(d);
        return st;
    }
    cl_int e;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
    d->ctx = clCreateContext(props, 1, &d->device, NULL, NULL, &e);
    if (!d->ctx || e != CL_SUCCESS) {
        d->ctx = NULL;
        cl_close(d);
        return cl_fail(err, errlen, cl_mem_status(e, MT_DEVICE), "clCreateContext", e);
    }
    d->queue = clCreateCommandQueue(d->ctx, d->device, CL_QUEUE_PROFILING_ENABLE, &e);
    if (!d->queue || e != CL_SUCCESS) {
        d->queue = NULL;
        cl_close(d);
        return cl_fail(err, errlen, cl_mem_status(e, MT_DEVICE), "clCreateCommandQueue", e);
    }
    int use_cache = params ? params->use_cache : 1;
    if (use_cache) d->use_cache = mt__kcache_dir(params ? params->cache_dir : NULL, d->cache_dir, sizeof d->cache_dir) == 0;
    d->pocl = strstr(d->info.platform, "Portable Computing Language") != NULL;
    if (info) *info = d->info;
    *devp = d;
    return MT_OK;
}

/* ----------------------------------------------------------------- build */

static void cl_prog_free(void *progp) {
    cl_prog *p = progp;
    if (!p) return;
    if (p->kernel) clReleaseKernel(p->kernel);
    if (p->program) clReleaseProgram(p->program);
    free(p->set);
    free(p);
}

/* Copies the program's build log, after a headline, into log. */
static void copy_build_log(cl_dev *d, cl_program prog, const char *headline, char *log, size_t loglen) {
    if (!log || loglen == 0) return;
    size_t n = 0;
    char *text = NULL;
    if (clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS && n > 0 && (text = malloc(n + 1))) {
        if (clGetProgramBuildInfo(prog, d->device, CL_PROGRAM_BUILD_LOG, n, text, NULL) == CL_SUCCESS)
            text[n] = '\0';
        else
            text[0] = '\0';
    }
    snprintf(log, loglen, "%s%s%s", headline, text && *text ? "\n" : "", text ? text : "");
    free(text);
}

/* Creates the kernel object and reads the kernel's own limits into p.
 * MT_BUILD (with the reason in log) when the program has no such kernel. */
static mt_status finish_kernel(cl_dev *d, cl_prog *p, const char *kernel_name, char *log, size_t loglen) {
    cl_int e;
    p->kernel = clCreateKernel(p->program, kernel_name, &e);
    if (!p->kernel || e != CL_SUCCESS) {
        p->kernel = NULL;
        if (e == CL_INVALID_KERNEL_NAME)
            return mt__fail(log, loglen, MT_BUILD, "no kernel named '%s' in the program (CL_INVALID_KERNEL_NAME)", kernel_name);
        return cl_fail(log, loglen, cl_mem_status(e, MT_BUILD), "clCreateKernel", e);
    }
    if ((e = clGetKernelInfo(p->kernel, CL_KERNEL_NUM_ARGS, sizeof p->nargs, &p->nargs, NULL)) != CL_SUCCESS)
        return cl_fail(log, loglen, MT_BUILD, "clGetKernelInfo(CL_KERNEL_NUM_ARGS)", e);
    free(p->set);
    if (!(p->set = calloc(p->nargs ? p->nargs : 1, sizeof *p->set))) return mt__fail(log, loglen, MT_NOMEM, "out of memory");
    if ((e = clGetKernelWorkGroupInfo(p->kernel, d->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof p->wg_size, &p->wg_size, NULL)) != CL_SUCCESS)
        return cl_fail(log, loglen, MT_BUILD, "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)", e);
    if ((e = clGetKernelWorkGroupInfo(p->kernel, d->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof p->local_mem, &p->local_mem, NULL)) != CL_SUCCESS)
        return cl_fail(log, loglen, MT_BUILD, "clGetKernelWorkGroupInfo(CL_KERNEL_LOCAL_MEM_SIZE)", e);
    return MT_OK;
}

/* Releases the program and kernel of p, leaving it empty for another try. */
static void prog_reset(cl_prog *p) {
    if (p->kernel) clReleaseKernel(p->kernel);
    if (p->program) clReleaseProgram(p->program);
    free(p->set);
    memset(p, 0, sizeof *p);
}

/* Builds from a cached binary; any failure leaves p empty and returns non-OK. */
static mt_status build_from_binary(cl_dev *d, const unsigned char *bin, size_t len, const char *kernel_name, cl_prog *p) {
    cl_int e, binst = CL_SUCCESS;
    p->program = clCreateProgramWithBinary(d->ctx, 1, &d->device, &len, &bin, &binst, &e);
    if (!p->program || e != CL_SUCCESS || binst != CL_SUCCESS) {
        if (e != CL_SUCCESS) p->program = NULL;
        prog_reset(p);
        return MT_BUILD;
    }
    if (clBuildProgram(p->program, 1, &d->device, CL_BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS ||
        finish_kernel(d, p, kernel_name, NULL, 0) != MT_OK) {
        prog_reset(p);
        return MT_BUILD;
    }
    return MT_OK;
}

static mt_status build_from_source(cl_dev *d, const char *src, const char *kernel_name, cl_prog *p, char *log, size_t loglen) {
    cl_int e;
    p->program = clCreateProgramWithSource(d->ctx, 1, &src, NULL, &e);
    if (!p->program || e != CL_SUCCESS) {
        p->program = NULL;
        return cl_fail(log, loglen, cl_mem_status(e, MT_BUILD), "clCreateProgramWithSource", e);
    }
    e = clBuildProgram(p->program, 1, &d->device, CL_BUILD_OPTIONS, NULL, NULL);
    if (e != CL_SUCCESS) {
        char head[96];
        snprintf(head, sizeof head, "clBuildProgram: %s (%d)", cl_err_name(e), (int)e);
        copy_build_log(d, p->program, head, log, loglen);
        prog_reset(p);
        return e == CL_OUT_OF_HOST_MEMORY ? MT_NOMEM : MT_BUILD;
    }
    mt_status st = finish_kernel(d, p, kernel_name, log, loglen);
    if (st != MT_OK) prog_reset(p);
    return st;
}

/* Stores the program's binary under key; failures are ignored (no cache entry). */
static void store_binary(cl_dev *d, cl_program prog, uint64_t key) {
    cl_uint ndev = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof ndev, &ndev, NULL) != CL_SUCCESS || ndev != 1) return;
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || size == 0) return;
    unsigned char *bin = malloc(size);
    if (!bin) return;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        (void)mt__kcache_store(d->cache_dir, "clbin", key, bin, size);
    free(bin);
}

/* The cache key: everything that can change the compiled binary. */
static uint64_t cache_key(const cl_dev *d, const char *src) {
    uint64_t h = hash_str("MTCLBIN1", 0);
    h = hash_str(src, h);
    h = hash_str(CL_BUILD_OPTIONS, h);
    h = hash_str(d->info.platform, h);
    h = hash_str(d->info.name, h);
    h = hash_str(d->info.driver, h);
    return h;
}

/* On PoCL: the cache holds the source that was built ("clsrc"), not a binary.
 * PoCL keeps its own on-disk cache (POCL_CACHE_DIR) of each program's bitcode
 * and of the code it generates for each work-group size at a kernel's first
 * launch. Asking it for the program binary (CL_PROGRAM_BINARIES) makes it also
 * generate code for a generic work-group size, which no launch of ours uses
 * (every kernel has reqd_work_group_size): for a large kernel that took 5.5 s
 * against 0.7 s for the build itself. A source found here was built before on
 * this device, so PoCL answers its rebuild from its cache; from_cache is set. */
static mt_status pocl_build(cl_dev *d, const char *src, const char *kernel_name, uint64_t key, cl_prog *p, int *from_cache, char *log,
                            size_t loglen) {
    size_t len = 0, srclen = strlen(src);
    unsigned char *seen = mt__kcache_load(d->cache_dir, "clsrc", key, &len);
    int hit = seen && len == srclen && memcmp(seen, src, len) == 0;
    free(seen);
    mt_status st = build_from_source(d, src, kernel_name, p, log, loglen);
    if (st != MT_OK) return st;
    if (hit) {
        if (from_cache) *from_cache = 1;
    } else {
        (void)mt__kcache_store(d->cache_dir, "clsrc", key, src, srclen);
    }
    return MT_OK;
}

static mt_status cl_build(void *devp, const char *src, const char *kernel_name, void **progp, int *from_cache, char *log, size_t loglen) {
    cl_dev *d = devp;
    if (log && loglen) log[0] = '\0';
    if (from_cache) *from_cache = 0;
    if (!d || !src || !kernel_name || !*kernel_name || !progp) return mt__fail(log, loglen, MT_INVALID_ARG, "cl_build: bad arguments");
    *progp = NULL;
    cl_prog *p = calloc(1, sizeof *p);
    if (!p) return mt__fail(log, loglen, MT_NOMEM, "out of memory building '%s'", kernel_name);
    uint64_t key = cache_key(d, src);
    if (d->use_cache && d->pocl) {
        mt_status st = pocl_build(d, src, kernel_name, key, p, from_cache, log, loglen);
        if (st != MT_OK) {
            free(p);
            return st;
        }
        *progp = p;
        return MT_OK;
    }
    if (d->use_cache) {
        size_t len = 0;
        unsigned char *bin = mt__kcache_load(d->cache_dir, "clbin", key, &len);
        if (bin) {
            mt_status st = build_from_binary(d, bin, len, kernel_name, p);
            free(bin);
            if (st == MT_OK) {
                if (from_cache) *from_cache = 1;
                *progp = p;
                return MT_OK;
            }
        }
    }
    mt_status st = build_from_source(d, src, kernel_name, p, log, loglen);
    if (st != MT_OK) {
        free(p);
        return st;
    }
    if (d->use_cache) store_binary(d, p->program, key);
    *progp = p;
    return MT_OK;
}

/* --------------------------------------------------------------- buffers */

/* A buffer of bytes: the device's own memory (host NULL), or with
 * CL_MEM_USE_HOST_PTR the caller's host memory, which PoCL's CPU device
 * runs kernels on in place when it is aligned (MT_DBUF_VIEW_ALIGN is). */
static mt_status cl_alloc_on(cl_dev *d, void *host, size_t bytes, void **bufp) {
    if (!d || !bufp || bytes == 0) return MT_INVALID_ARG;
    *bufp = NULL;
    if ((uint64_t)bytes > d->info.max_alloc_bytes) return MT_INVALID_ARG;
    cl_buf *b = calloc(1, sizeof *b);
    if (!b) return MT_NOMEM;
    cl_int e;
    b->mem = clCreateBuffer(d->ctx, CL_MEM_READ_WRITE | (host ? CL_MEM_USE_HOST_PTR : 0), bytes, host, &e);
    if (!b->mem || e != CL_SUCCESS) {
        free(b);
        return e == CL_INVALID_BUFFER_SIZE ? MT_INVALID_ARG : cl_mem_status(e, MT_DEVICE);
    }
    b->size = bytes;
    *bufp = b;
    return MT_OK;
}

static mt_status cl_alloc(void *devp, size_t bytes, void **bufp) { return cl_alloc_on(devp, NULL, bytes, bufp); }

static mt_status cl_alloc_host(void *devp, void *host, size_t bytes, void **bufp) {
    return host ? cl_alloc_on(devp, host, bytes, bufp) : MT_INVALID_ARG;
}

static int out_of_bounds(const cl_buf *b, size_t offset, size_t bytes) { return offset > b->size || bytes > b->size - offset; }

static mt_status cl_write(void *devp, void *bufp, size_t offset, const void *src, size_t bytes) {
    cl_dev *d = devp;
    cl_buf *b = bufp;
    if (!d || !b || (bytes > 0 && !src) || out_of_bounds(b, offset, bytes)) return MT_INVALID_ARG;
    if (bytes == 0) return MT_OK;
    cl_int e = clEnqueueWriteBuffer(d->queue, b->mem, CL_TRUE, offset, bytes, src, 0, NULL, NULL);
    return e == CL_SUCCESS ? MT_OK : cl_mem_status(e, MT_DEVICE);
}

static mt_status cl_read(void *devp, void *bufp, size_t offset, void *dst, size_t bytes) {
    cl_dev *d = devp;
    cl_buf *b = bufp;
    if (!d || !b || (bytes > 0 && !dst) || out_of_bounds(b, offset, bytes)) return MT_INVALID_ARG;
    if (bytes == 0) return MT_OK;
    cl_int e = clEnqueueReadBuffer(d->queue, b->mem, CL_TRUE, offset, bytes, dst, 0, NULL, NULL);
    return e == CL_SUCCESS ? MT_OK : cl_mem_status(e, MT_DEVICE);
}

static mt_status cl_view(void *devp, void *parentp, size_t offset, size_t bytes, void **bufp) {
    cl_dev *d = devp;
    cl_buf *parent = parentp;
    if (!d || !parent || !bufp || bytes == 0) return MT_INVALID_ARG;
    *bufp = NULL;
    /* A sub-buffer's origin must be aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN (bits). */
    cl_uint align_bits = 0;
    if (clGetDeviceInfo(d->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL) != CL_SUCCESS || align_bits == 0 ||
        offset % (align_bits / 8 ? align_bits / 8 : 1) != 0)
        return MT_INVALID_ARG;
    cl_buf *b = calloc(1, sizeof *b);
    if (!b) return MT_NOMEM;
    cl_buffer_region region = {.origin = offset, .size = bytes};
    cl_int e;
    b->mem = clCreateSubBuffer(parent->mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &e);
    if (!b->mem || e != CL_SUCCESS) {
        free(b);
        return e == CL_MISALIGNED_SUB_BUFFER_OFFSET || e == CL_INVALID_VALUE ? MT_INVALID_ARG : cl_mem_status(e, MT_DEVICE);
    }
    b->size = bytes;
    *bufp = b;
    return MT_OK;
}

/* A CPU device's buffers are the host's memory, and a pointer from mapping
 * one is that memory (PoCL's CPU devices map in place): flushing its lines
 * takes the buffer out of every cache level, the way a layer's weights
 * arrive in a network's pass after the other layers' data went through the
 * caches. Not on other devices, nor off x86 (no clflush). */
static mt_status cl_evict(void *devp, void *bufp, char *err, size_t errlen) {
    cl_dev *d = devp;
    cl_buf *b = bufp;
    if (!d || !b) return mt__fail(err, errlen, MT_INVALID_ARG, "evict: NULL argument");
#if defined(__x86_64__) || defined(__i386__)
    if (!d->info.is_cpu) return mt__fail(err, errlen, MT_UNSUPPORTED, "evict: %s is not a CPU device: its caches are not the host's", d->info.name);
    if (b->size == 0) return MT_OK;
    cl_int e;
    unsigned char *p = clEnqueueMapBuffer(d->queue, b->mem, CL_TRUE, CL_MAP_READ, 0, b->size, 0, NULL, NULL, &e);
    if (!p || e != CL_SUCCESS) return mt__fail(err, errlen, cl_mem_status(e, MT_DEVICE), "evict: mapping the buffer failed (OpenCL error %d)", (int)e);
    for (size_t off = 0; off < b->size; off += 64) _mm_clflush(p + off);
    _mm_clflush(p + b->size - 1);
    _mm_mfence();
    e = clEnqueueUnmapMemObject(d->queue, b->mem, p, 0, NULL, NULL);
    if (e == CL_SUCCESS) e = clFinish(d->queue);
    if (e != CL_SUCCESS) return mt__fail(err, errlen, cl_mem_status(e, MT_DEVICE), "evict: unmapping the buffer failed (OpenCL error %d)", (int)e);
    return MT_OK;
#else
    (void)b;
    return mt__fail(err, errlen, MT_UNSUPPORTED, "evict: needs x86's clflush (%s)", d->info.name);
#endif
}

static void cl_buf_free(void *bufp) {
    cl_buf *b = bufp;
    if (!b) return;
    if (b->mem) clReleaseMemObject(b->mem);
    free(b);
}

/* ------------------------------------------------------------------- run */

/* Checks a launch against the device's and the kernel's limits, sets the
 * kernel's arguments and gives the NDRange (global, local). */
static mt_status cl_prepare(cl_dev *d, cl_prog *p, void **args, int nargs, const int64_t grid[3], const int64_t block[3], size_t global[3],
                            size_t local[3], char *err, size_t errlen) {
    if ((cl_uint)nargs != p->nargs)
        return mt__fail(err, errlen, MT_INVALID_ARG, "kernel takes %u argument%s, got %d", (unsigned)p->nargs, p->nargs == 1 ? "" : "s", nargs);

    int64_t threads = 1;
    for (int i = 0; i < 3; i++) {
        if (block[i] < 1 || grid[i] < 1)
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "grid[%d]=%lld and block[%d]=%lld must be positive", i, (long long)grid[i], i,
                            (long long)block[i]);
        if (block[i] > d->info.max_work_item_sizes[i])
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "block[%d]=%lld exceeds the device's max work-item size %lld", i,
                            (long long)block[i], (long long)d->info.max_work_item_sizes[i]);
        if ((uint64_t)grid[i] > SIZE_MAX / (uint64_t)block[i])
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "grid[%d]*block[%d] overflows the global size", i, i);
        threads *= block[i]; /* each factor <= max item size, which fits */
        local[i] = (size_t)block[i];
        global[i] = (size_t)grid[i] * (size_t)block[i];
    }
    if (threads > d->info.max_work_group_size)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "work-group of %lld work-items exceeds the device's max work-group size %lld",
                        (long long)threads, (long long)d->info.max_work_group_size);
    if ((uint64_t)threads > (uint64_t)p->wg_size)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "work-group of %lld work-items exceeds this kernel's max work-group size %zu",
                        (long long)threads, p->wg_size);
    if (p->local_mem > d->info.local_mem_bytes)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "kernel uses %llu bytes of local memory, the device has %llu",
                        (unsigned long long)p->local_mem, (unsigned long long)d->info.local_mem_bytes);

    /* An argument already set to the same buffer is left as it is: a fused
     * pass's launch passes over a hundred buffers, the same every pass. */
    cl_int e;
    for (int i = 0; i < nargs; i++) {
        cl_buf *b = args[i];
        if (!b) return mt__fail(err, errlen, MT_INVALID_ARG, "argument %d is NULL", i);
        if (p->set && p->set[i] == b->mem) continue;
        if ((e = clSetKernelArg(p->kernel, (cl_uint)i, sizeof(cl_mem), &b->mem)) != CL_SUCCESS) {
            if (p->set) p->set[i] = NULL;
            char what[48];
            snprintf(what, sizeof what, "clSetKernelArg(%d)", i);
            return cl_fail(err, errlen, MT_LAUNCH, what, e);
        }
        if (p->set) p->set[i] = b->mem;
    }
    return MT_OK;
}

/* The device time of the finished command of ev, in ms; MT_LAUNCH when it
 * failed or did not complete. */
static mt_status cl_event_ms(cl_event ev, double *ms, char *err, size_t errlen) {
    cl_int e, status = CL_COMPLETE;
    if ((e = clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL)) != CL_SUCCESS)
        return cl_fail(err, errlen, MT_LAUNCH, "clGetEventInfo", e);
    if (status != CL_COMPLETE)
        return status < 0 ? cl_fail(err, errlen, MT_LAUNCH, "kernel execution", status)
                          : mt__fail(err, errlen, MT_LAUNCH, "kernel execution did not complete (status %d)", (int)status);
    cl_ulong t0 = 0, t1 = 0;
    if ((e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL)) != CL_SUCCESS ||
        (e = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL)) != CL_SUCCESS)
        return cl_fail(err, errlen, MT_LAUNCH, "clGetEventProfilingInfo", e);
    if (t1 < t0)
        return mt__fail(err, errlen, MT_LAUNCH, "profiling: command ended before it started (%llu < %llu)", (unsigned long long)t1,
                        (unsigned long long)t0);
    *ms = (double)(t1 - t0) * 1e-6;
    return MT_OK;
}

static mt_status cl_run(void *devp, void *progp, void **args, int nargs, const int64_t grid[3], const int64_t block[3], int warmup,
                        int repeats, double *times_ms, char *err, size_t errlen) {
    cl_dev *d = devp;
    cl_prog *p = progp;
    if (!d || !p || !grid || !block || nargs < 0 || (nargs > 0 && !args) || warmup < 0 || repeats < 1 || !times_ms)
        return mt__fail(err, errlen, MT_INVALID_ARG, "cl_run: bad arguments");
    size_t global[3], local[3];
    mt_status pst = cl_prepare(d, p, args, nargs, grid, block, global, local, err, errlen);
    if (pst != MT_OK) return pst;
    cl_int e;
    for (int w = 0; w < warmup; w++) {
        if ((e = clEnqueueNDRangeKernel(d->queue, p->kernel, 3, NULL, global, local, 0, NULL, NULL)) != CL_SUCCESS) {
            clFinish(d->queue);
            return cl_fail(err, errlen, MT_LAUNCH, "clEnqueueNDRangeKernel (warmup)", e);
        }
    }
    if (warmup > 0 && (e = clFinish(d->queue)) != CL_SUCCESS) return cl_fail(err, errlen, MT_LAUNCH, "clFinish (warmup)", e);

    cl_event *ev = calloc((size_t)repeats, sizeof *ev);
    if (!ev) return mt__fail(err, errlen, MT_NOMEM, "out of memory for %d timing events", repeats);
    mt_status st = MT_OK;
    int nev = 0;
    for (; nev < repeats; nev++) {
        if ((e = clEnqueueNDRangeKernel(d->queue, p->kernel, 3, NULL, global, local, 0, NULL, &ev[nev])) != CL_SUCCESS) {
            st = cl_fail(err, errlen, MT_LAUNCH, "clEnqueueNDRangeKernel", e);
            break;
        }
    }
    /* Wait on the queue, not the events: an event of a failed command makes
     * clWaitForEvents fail without saying which. */
    cl_int fe = clFinish(d->queue);
    if (st == MT_OK && fe != CL_SUCCESS) st = cl_fail(err, errlen, MT_LAUNCH, "clFinish", fe);
    for (int i = 0; st == MT_OK && i < nev; i++) st = cl_event_ms(ev[i], &times_ms[i], err, errlen);
    for (int i = 0; i < nev; i++) clReleaseEvent(ev[i]);
    free(ev);
    return st;
}

static mt_status cl_launch(void *devp, void *progp, void **args, int nargs, const int64_t grid[3], const int64_t block[3], double *ms,
                           char *err, size_t errlen) {
    cl_dev *d = devp;
    cl_prog *p = progp;
    if (!d || !p || !grid || !block || nargs < 0 || (nargs > 0 && !args)) return mt__fail(err, errlen, MT_INVALID_ARG, "cl_launch: bad arguments");
    size_t global[3], local[3];
    mt_status st = cl_prepare(d, p, args, nargs, grid, block, global, local, err, errlen);
    if (st != MT_OK) return st;
    if (ms && d->ntimed == d->timed_cap) {
        int cap = d->timed_cap ? 2 * d->timed_cap : 64;
        cl_event *ev = realloc(d->timed_ev, sizeof *ev * (size_t)cap);
        if (ev) d->timed_ev = ev;
        double **out = ev ? realloc(d->timed_ms, sizeof *out * (size_t)cap) : NULL;
        if (out) d->timed_ms = out;
        if (!ev || !out) return mt__fail(err, errlen, MT_NOMEM, "out of memory for %d timing events", cap);
        d->timed_cap = cap;
    }
    cl_event ev = NULL;
    cl_int e = clEnqueueNDRangeKernel(d->queue, p->kernel, 3, NULL, global, local, 0, NULL, ms ? &ev : NULL);
    if (e != CL_SUCCESS) return cl_fail(err, errlen, MT_LAUNCH, "clEnqueueNDRangeKernel", e);
    if (ms) {
        d->timed_ev[d->ntimed] = ev;
        d->timed_ms[d->ntimed++] = ms;
    }
    return MT_OK;
}

/* Waits for the queue, then writes each timed launch's time (up to the
 * first failure, which is reported); the events are released either way. */
static mt_status cl_finish(void *devp, char *err, size_t errlen) {
    cl_dev *d = devp;
    if (!d) return mt__fail(err, errlen, MT_INVALID_ARG, "cl_finish: NULL device");
    cl_int e = clFinish(d->queue);
    mt_status st = e == CL_SUCCESS ? MT_OK : cl_fail(err, errlen, MT_LAUNCH, "clFinish", e);
    for (int i = 0; st == MT_OK && i < d->ntimed; i++) st = cl_event_ms(d->timed_ev[i], d->timed_ms[i], err, errlen);
    cl_release_timed(d);
    return st;
}

/* ----------------------------------------------------------------- table */

static const mt_backend_i cl_backend = {
    /* .kind      = */ MT_BACKEND_OPENCL,
    /* .lang      = */ MT_LANG_OPENCL,
    /* .list      = */ cl_list,
    /* .open      = */ cl_open,
    /* .close     = */ cl_close,
    /* .build     = */ cl_build,
    /* .prog_free = */ cl_prog_free,
    /* .alloc     = */ cl_alloc,
    /* .write     = */ cl_write,
    /* .read      = */ cl_read,
    /* .buf_free  = */ cl_buf_free,
    /* .run       = */ cl_run,
    /* .launch    = */ cl_launch,
    /* .finish    = */ cl_finish,
    /* .view      = */ cl_view,
    /* .evict     = */ cl_evict,
    /* .alloc_host = */ cl_alloc_host,
};

const mt_backend_i *mt__backend_opencl(void) { return &cl_backend; }
