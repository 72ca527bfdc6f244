/* Private: the ABI between libmtgpu and the CUDA module (libmtgpu_cuda.so).
 *
 * libmtgpu never links against CUDA. The module does (NVRTC, nvJitLink; the
 * driver, libcuda.so.1, only through dlopen inside the module), and exports
 * one symbol, MT_CUDA_MODULE_SYMBOL, of type mt_cuda_module_get_fn. The
 * loader (src/cuda_loader.c) dlopens the module, calls it with the ABI
 * version it was built for and gets back a table of function pointers, or
 * NULL when the module cannot serve that version.
 *
 * Versioning:
 *  - abi_version changes only for incompatible changes (a member's meaning or
 *    signature, the order of members). The loader requires an exact match.
 *  - New members are appended at the end without changing abi_version; the
 *    module sets struct_size to sizeof its table, and the loader checks
 *    MT_CUDA_MODULE_HAS(m, member) before calling a member that came after
 *    the first release of that ABI (MT_CUDA_MODULE_V1_SIZE is what every
 *    ABI-1 module has).
 *  - The running-kernel half of the backend (driver API: devices, contexts,
 *    module load, buffers, launch, events) will be appended in this way,
 *    mirroring mt_backend_i (src/backend-impl.h) so that the loader can wrap
 *    it one to one:
 *        mt_status (*dev_list)(mt_device_info *out, int max, int *count, char *err, size_t);
 *        mt_status (*dev_open)(int index, void **dev, mt_device_info *info, char *err, size_t);
 *        void      (*dev_close)(void *dev);
 *        mt_status (*load)(void *dev, const void *cubin, size_t len, const char *name, void **prog, char *log, size_t);
 *        ... alloc / write / read / buf_free / run ...
 *
 * Conventions for every member: a fallible call returns an mt_status and
 * writes a NUL-terminated message into (log|err, len) when len > 0; memory
 * handed back to the caller is released with free_buffer (the module and
 * libmtgpu need not share an allocator); no member exits or aborts; all
 * members are thread-safe (NVRTC and nvJitLink handles are per call).
 * The module uses only the mt_status codes (an enum), not libmtgpu's
 * functions, so it has no undefined symbols to resolve against libmtgpu. */
#ifndef MTGPU_CUDA_MODULE_H
#define MTGPU_CUDA_MODULE_H

#include <stddef.h>

#include "mtgpu/cuda.h"
#include "mtgpu/status.h"

#define MT_CUDA_MODULE_ABI 1
#define MT_CUDA_MODULE_SYMBOL "mt_cuda_module_get"

/* What compile produces. */
typedef enum mt_cuda_output {
    MT_CUDA_OUTPUT_PTX,  /* PTX text for compute_<sm> (NUL-terminated; len counts the NUL) */
    MT_CUDA_OUTPUT_CUBIN /* an sm_<sm> cubin, loadable with cuModuleLoadData */
} mt_cuda_output;

typedef struct mt_cuda_module {
    /* .abi_version      = */ int abi_version;  /* MT_CUDA_MODULE_ABI the module was built with */
    /* .struct_size      = */ size_t struct_size; /* sizeof(mt_cuda_module) in the module */

    /* Writes the versions of the libraries actually loaded, e.g. "NVRTC 13.0,
     * nvJitLink 13.0" (a compiled kernel depends on them: part of a cache key). */
    /* .toolkit_version  = */ void (*toolkit_version)(char *buf, size_t len);

    /* Non-zero when the NVIDIA driver (libcuda.so.1) can be loaded in this
     * process; otherwise 0 with the loader's reason in why. */
    /* .driver_available = */ int (*driver_available)(char *why, size_t whylen);

    /* Compiles src (CUDA C++, `-default-device --std=c++17`) with NVRTC for
     * sm_<p->sm_arch> (within p->timeout_s: MT_TIMEOUT) and returns the PTX or cubin in *out (release with free_buffer)
     * and its size in *len. name: the extern "C" kernel that must be in the
     * program (NULL: not checked; also names the program "<name>.cu").
     * MT_BUILD with NVRTC's log; MT_INVALID_CONFIG when ptxas (sm_XX) finds
     * the kernel over a hardware limit; MT_NOT_FOUND when the kernel is
     * missing; MT_UNSUPPORTED for an architecture NVRTC does not know. */
    /* .compile          = */ mt_status (*compile)(const char *src, const char *name, const mt_cuda_check_params *p,
                                                   mt_cuda_output kind, char **out, size_t *len, char *log, size_t loglen);

    /* Compiles src to PTX (compute_<sm>, within p->timeout_s), links it
     * with nvJitLink for sm_<sm> (-verbose) and parses ptxas's report for kernel `name` (NULL: the first
     * kernel) into *res (zeroed first; may be filled even on failure). When
     * cubin is not NULL the linked cubin is returned in *cubin / *cubin_len
     * (release with free_buffer), so one call both builds and measures.
     * Status as in mt_cuda_compile_check (include/mtgpu/cuda.h). */
    /* .resources        = */ mt_status (*resources)(const char *src, const char *name, const mt_cuda_check_params *p,
                                                     mt_cuda_resources *res, char **cubin, size_t *cubin_len, char *log,
                                                     size_t loglen);

    /* Releases memory returned by compile and resources; NULL is a no-op. */
    /* .free_buffer      = */ void (*free_buffer)(void *p);

    /* ---- members appended after ABI 1's first release go below; check them with MT_CUDA_MODULE_HAS ---- */
} mt_cuda_module;

/* Every ABI-1 module's table is at least this long. */
#define MT_CUDA_MODULE_V1_SIZE (offsetof(mt_cuda_module, free_buffer) + sizeof(void (*)(void *)))
#define MT_CUDA_MODULE_HAS(m, member) \
    ((m)->struct_size >= offsetof(mt_cuda_module, member) + sizeof((m)->member) && (m)->member != NULL)

/* The module's one export: the table for abi_version, or NULL when the module
 * cannot provide it. The table is static; the caller never frees it. */
typedef const mt_cuda_module *(*mt_cuda_module_get_fn)(int abi_version);
const mt_cuda_module *mt_cuda_module_get(int abi_version); /* defined in the module only */

/* ---- loader side (src/cuda_loader.c, part of libmtgpu) ---- */

/* The process-wide module, loaded on first call (pthread_once) from the paths
 * listed in include/mtgpu/cuda.h and kept for the life of the process.
 * MT_OK with *mod set, or MT_UNAVAILABLE with the reason in err. */
mt_status mt__cuda_module(const mt_cuda_module **mod, char *err, size_t errlen);

/* Loads the module at `path` (anything dlopen accepts) without caching:
 * *handle and *mod on MT_OK, to be released with mt__cuda_unload; on
 * failure MT_UNAVAILABLE with dlerror's text (missing file, missing symbol
 * or ABI mismatch) and nothing left loaded. For tests and tools. */
mt_status mt__cuda_load_from(const char *path, void **handle, const mt_cuda_module **mod, char *err, size_t errlen);
void mt__cuda_unload(void *handle);

#endif
