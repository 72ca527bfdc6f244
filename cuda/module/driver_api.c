/* The NVIDIA driver API, reached through dlopen("libcuda.so.1").
 *
 * The module never links libcuda: it must load, and compile kernels, on
 * machines without the driver. The first caller loads the library, resolves
 * every entry point of MT__CU_REQUIRED under the name cuda.h maps it to
 * (cuMemAlloc -> "cuMemAlloc_v2") and runs cuInit(0); the outcome, a table
 * or the reason there is none, is kept for the life of the process (the
 * library is never closed: contexts and their threads live inside it). */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "module-impl.h"

/* The symbol name of an entry point after cuda.h's macros (two levels, so
 * that the argument is expanded before it is stringified). */
#define MT__CU_STR2(f) #f
#define MT__CU_STR(f) MT__CU_STR2(f)

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static mt__cu_api g_api;    /* written once, inside g_once */
static int g_ok;            /* likewise: g_api is usable */
static char g_why[1024];    /* likewise: why it is not */

/* Resolves `name` into *slot (an object-to-function pointer copy, as POSIX
 * allows). 0 when found. */

static void load_once(void) {
    dlerror();
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s", e ? e : "libcuda.so.1 cannot be loaded");
        return;
    }
    mt__cu_api a;
    memset(&a, 0, sizeof a);
    const char *missing = NULL;
#define MT__CU_RESOLVE(f)                                                                  \
    if (!missing && mt__cu_resolve(lib, MT__CU_STR(f), (void *)&a.f, sizeof a.f) != 0) missing = MT__CU_STR(f);
    MT__CU_REQUIRED(MT__CU_RESOLVE)
#undef MT__CU_RESOLVE
    if (missing && strcmp(missing, MT__CU_STR(cuEventElapsedTime)) == 0 && strcmp(missing, "cuEventElapsedTime") != 0) {
        /* cuEventElapsedTime_v2 came with CUDA 12.8 and has the signature
         * of the original, which older drivers export under its own name. */
        missing = mt__cu_resolve(lib, "cuEventElapsedTime", (void *)&a.cuEventElapsedTime, sizeof a.cuEventElapsedTime) == 0 ? NULL
                                                                                                                       : missing;
    }
    if (missing) {
        snprintf(g_why, sizeof g_why, "libcuda.so.1 has no %s (a driver older than this module's CUDA %d.%d headers?)", missing,
                 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return; /* lib stays loaded: harmless, and dlclose of a half-used driver is not */
    }
#define MT__CU_RESOLVE_OPT(f) \
    if (mt__cu_resolve(lib, MT__CU_STR(f), (void *)&a.f, sizeof a.f) != 0) a.f = NULL;
    MT__CU_OPTIONAL(MT__CU_RESOLVE_OPT)
#undef MT__CU_RESOLVE_OPT

    CUresult r = a.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL, *text = NULL;
        if (a.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
        if (a.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
        snprintf(g_why, sizeof g_why, "cuInit: %s (%d): %s", name ? name : "CUDA_ERROR_UNKNOWN", (int)r, text ? text : "no description");
        return;
    }
    int ver = 0;
    if (a.cuDriverGetVersion(&ver) != CUDA_SUCCESS) ver = 0;
    a.driver_version = ver;
    g_api = a;
    g_ok = 1;
}

const mt__cu_api *mt__cu_api_get(char *why, size_t whylen) {
    if (pthread_once(&g_once, load_once) != 0) {
        mt__cu_fail(why, whylen, MT_UNAVAILABLE, "pthread_once failed");
        return NULL;
    }
    if (!g_ok) {
        mt__cu_fail(why, whylen, MT_UNAVAILABLE, "%s", g_why[0] ? g_why : "the CUDA driver is not usable");
        return NULL;
    }
    if (why && whylen > 0) why[0] = '\0';
    return &g_api;
}

int mt__cu_sticky(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE: return 1;
    default: return 0;
    }
}

mt_status mt__cu_fail_r(char *err, size_t errlen, mt_status s, CUresult r, const char *fmt, ...) {
    if (!err || errlen == 0) return s;
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    /* The table may not be loaded when the failure is in loading it. */
    const mt__cu_api *a = g_ok ? &g_api : NULL;
    if (a && a->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (a && a->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    snprintf(err, errlen, "%s: %s (%d): %s%s", what, name ? name : "CUDA error", (int)r, text ? text : "no description",
             mt__cu_sticky(r) ? " (the context is now unusable: every later call in this process fails; reopen the device in a new process)"
                              : "");
    return s;
}
