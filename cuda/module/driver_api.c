/* The NVIDIA driver API, reached through dlopen("libcuda.so.1").
 *
 * The module never links libcuda: it must load, and compile kernels, on
 * machines without the driver. The first caller loads the library, resolves
 * every entry point of MT__CU_REQUIRED under the name cuda.h maps it to
 * (cuMemAlloc -> "cuMemAlloc_v2") and runs cuInit(0); the outcome, a table
 * or the reason there is none, is kept for the life of the process (the
 * library is never closed: contexts and their threads live inside it). */
#include <stdio.h>
#include <string.h>

#include "module-impl.h"

/* The symbol name of an entry point after cuda.h's macros (two levels, so
 * that the argument is expanded before it is stringified). */
#define MT__CU_STR2(f) #f
#define MT__CU_STR(f) MT__CU_STR2(f)

static mt__cu_lib g_lib = MT__CU_LIB_INIT;
static mt__cu_api g_api; /* written once, inside g_lib.once: usable when g_lib.ok */

static void load_once(void) {
    static const char *const names[] = {"libcuda.so.1"};
    void *lib = mt__cu_lib_open(&g_lib, names, 1, NULL);
    if (!lib) return;
    mt__cu_api a;
    memset(&a, 0, sizeof a);
    /* Through a second macro, f is expanded before MT__CU_SYM stringifies it. */
#define MT__CU_DRV_SYM(f) MT__CU_SYM(a, f)
    const mt__cu_sym required[] = {MT__CU_REQUIRED(MT__CU_DRV_SYM)}, optional[] = {MT__CU_OPTIONAL(MT__CU_DRV_SYM)};
#undef MT__CU_DRV_SYM
    int miss = mt__cu_resolve_syms(lib, required, (int)(sizeof required / sizeof required[0]));
    const char *missing = miss >= 0 ? required[miss].name : NULL;
    if (missing && strcmp(missing, MT__CU_STR(cuEventElapsedTime)) == 0 && strcmp(missing, "cuEventElapsedTime") != 0) {
        /* cuEventElapsedTime_v2 came with CUDA 12.8 and has the signature
         * of the original, which older drivers export under its own name. */
        missing = mt__cu_resolve(lib, "cuEventElapsedTime", (void *)&a.cuEventElapsedTime, sizeof a.cuEventElapsedTime) == 0 ? NULL
                                                                                                                       : missing;
    }
    if (missing) {
        snprintf(g_lib.why, sizeof g_lib.why, "libcuda.so.1 has no %s (a driver older than this module's CUDA %d.%d headers?)", missing,
                 CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
        return; /* lib stays loaded: harmless, and dlclose of a half-used driver is not */
    }
    (void)mt__cu_resolve_syms(lib, optional, (int)(sizeof optional / sizeof optional[0])); /* those it lacks stay NULL */

    CUresult r = a.cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL, *text = NULL;
        if (a.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
        if (a.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
        snprintf(g_lib.why, sizeof g_lib.why, "cuInit: %s (%d): %s", name ? name : "CUDA_ERROR_UNKNOWN", (int)r, text ? text : "no description");
        return;
    }
    int ver = 0;
    if (a.cuDriverGetVersion(&ver) != CUDA_SUCCESS) ver = 0;
    a.driver_version = ver;
    g_api = a;
    g_lib.ok = 1;
}

const mt__cu_api *mt__cu_api_get(char *why, size_t whylen) {
    if (!mt__cu_lib_ready(&g_lib, load_once, "", "the CUDA driver is not usable", why, whylen)) return NULL;
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

void mt__cu_result_text(int code, char *buf, size_t len) {
    const CUresult r = (CUresult)code;
    const char *name = NULL, *text = NULL;
    /* The table may not be loaded when the failure is in loading it. */
    const mt__cu_api *a = g_lib.ok ? &g_api : NULL;
    if (a && a->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (a && a->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    snprintf(buf, len, "%s (%d): %s%s", name ? name : "CUDA error", code, text ? text : "no description",
             mt__cu_sticky(r) ? " (the context is now unusable: every later call in this process fails; reopen the device in a new process)"
                              : "");
}
