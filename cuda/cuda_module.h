/* Private: the ABI between libmtgpu and the CUDA module (libmtgpu_cuda.so).
 *
 * libmtgpu never links against CUDA. The module does (NVRTC, nvJitLink; the
 * driver, libcuda.so.1, only through dlopen inside the module), and exports
 * one symbol, MT_CUDA_MODULE_SYMBOL, of type mt_cuda_module_get_fn. The
 * loader (cuda/cuda_loader.c) dlopens the module, calls it with the ABI
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
 *    module load, buffers, launch, events; cuDNN) was appended in this way
 *    (dev_list .. cudnn_conv below), mirroring mt_backend_i
 *    (device/backend-impl.h) so that the loader (cuda/backend_cuda.c) wraps it
 *    one to one; the loader checks MT_CUDA_MODULE_HAS(m, cudnn_conv) (the
 *    last of them) before using any, and reports an older module as one to
 *    rebuild.
 *  - The driver (libcuda.so.1) and cuDNN (libcudnn.so.9) are dlopen'ed
 *    inside the module, never linked: the module loads, and its compile
 *    members work, on a machine with neither.
 *
 * Conventions for every member: a fallible call returns an mt_status and
 * writes a NUL-terminated message into (log|err, len) when len > 0; memory
 * handed back to the caller is released with free_buffer (the module and
 * libmtgpu need not share an allocator); no member exits or aborts; all
 * members are thread-safe (NVRTC and nvJitLink handles are per call; driver
 * calls push the device's context in the calling thread and pop it before
 * returning, and each device handle serialises the work on its stream).
 * The module uses only the mt_status codes (an enum), not libmtgpu's
 * functions, so it has no undefined symbols to resolve against libmtgpu. */
#ifndef MTGPU_CUDA_MODULE_H
#define MTGPU_CUDA_MODULE_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_backend.h"
#include "mtgpu/device.h"
#include "mtgpu/workload.h"
#include "mtgpu/status.h"

#define MT_CUDA_MODULE_ABI 1
#define MT_CUDA_MODULE_SYMBOL "mt_cuda_module_get"

/* What compile produces. */
typedef enum mt_cuda_output {
    MT_CUDA_OUTPUT_PTX,  /* PTX text for compute_<sm> (NUL-terminated; len counts the NUL) */
    MT_CUDA_OUTPUT_CUBIN /* an sm_<sm> cubin, loadable with cuModuleLoadData */
} mt_cuda_output;

/* What dev_props reports of an opened device: the facts of a CUDA device
 * that mt_device_info has no field for. */
typedef struct mt_cuda_device_props {
    int cc_major, cc_minor;          /* compute capability: the device runs sm_<major><minor> cubins */
    int sm_count;                    /* multiprocessors */
    int warp_size;
    int max_threads_per_block;
    int max_threads_per_sm;
    int max_regs_per_block;          /* 32-bit registers available to one block */
    int max_regs_per_sm;
    int max_shared_per_block;        /* bytes of static __shared__ a block may declare (48 KiB) */
    int max_shared_per_block_optin;  /* with cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) */
    int reserved_shared_per_block;   /* bytes the driver reserves per block (1 KiB on sm_80 and later) */
    int max_shared_per_sm;
    int clock_khz;                   /* peak SM clock */
    int driver_version;              /* cuDriverGetVersion: 13000 for CUDA 13.0 */
} mt_cuda_device_props;

/* What prog_info reports of a loaded kernel (cuFuncGetAttribute): the
 * driver's own figures, authoritative for a cubin that came from the cache
 * without a ptxas report. */
typedef struct mt_cuda_prog_info {
    int registers;             /* per thread */
    int shared_bytes;          /* static __shared__ per block */
    int local_bytes;           /* per thread */
    int const_bytes;
    int max_threads_per_block; /* this kernel's launch limit (registers and __launch_bounds__) */
    int nparams;               /* kernel parameters; -1 where the driver cannot tell (before CUDA 12.4) */
    int binary_version;        /* 10 * major + minor of the cubin's SASS */
} mt_cuda_prog_info;

/* What gnn_create needs of a GNN model and its plan for one graph shape
 * (gnn/gnn-impl.h: mt__gnn_layout and mt__gnn_plan, whose meaning these
 * fields keep): the weights' offsets in the flat array and the message
 * schedule over places (node-major: place q's b rows at q*b). The arrays are
 * copied by gnn_create. */
#define MT_CUDA_GNN_MAX_LAYERS 64
typedef struct mt_cuda_gnn_desc {
    int arch;             /* mt_gnn_arch: 0 modular, 1 shared, 2 MLP */
    int F, H, L;          /* features, hidden width, layers (MLP: hidden layers) */
    int n, nt, et;        /* nodes per graph; node and edge modules (>= 1) */
    int nrows, maxrows;   /* product rows of all edge modules; most of one module */
    const int *pos;       /* [n] place of node v */
    const int *node_off;  /* [nt + 1] first place of each node module */
    const int *mrow_off;  /* [et + 1] each edge module's rows */
    const int *mside;     /* [et] 0: a row per distinct source, 1: per destination */
    const int *mrun;      /* [et] 1: the module's rows are consecutive places */
    const int *mrow_pos;  /* [nrows] the place of each row */
    const int *madj_off;  /* [nrows + 1] each row's edges in madj_pos */
    const int *madj_pos;  /* [madj_off[nrows]] the place at the other end */
    const int *in_off;    /* [n + 1] per place: its product rows in in_row */
    const int *in_row;    /* [in_off[n]] */
    size_t nweights;      /* floats in the weight array */
    size_t in_w, in_b, head_w1, head_b1, out_w, out_b;
    size_t msg_w[MT_CUDA_GNN_MAX_LAYERS], upd_w[MT_CUDA_GNN_MAX_LAYERS], upd_b[MT_CUDA_GNN_MAX_LAYERS];
    size_t mlp_w[MT_CUDA_GNN_MAX_LAYERS], mlp_b[MT_CUDA_GNN_MAX_LAYERS];
    int max_graphs;       /* graphs per device pass (0: the module's default, 4096; bounded by free memory) */
} mt_cuda_gnn_desc;

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
     * Status as in mt_cuda_compile_check (cuda/cuda_backend.h). */
    /* .resources        = */ mt_status (*resources)(const char *src, const char *name, const mt_cuda_check_params *p,
                                                     mt_cuda_resources *res, char **cubin, size_t *cubin_len, char *log,
                                                     size_t loglen);

    /* Releases memory returned by compile and resources; NULL is a no-op. */
    /* .free_buffer      = */ void (*free_buffer)(void *p);

    /* ---- members appended after ABI 1's first release go below; check them with MT_CUDA_MODULE_HAS ---- */

    /* ---- the driver API half (cuda/module/driver.c), mirroring mt_backend_i ----
     * Every member works without a GPU in the sense that it fails cleanly:
     * where libcuda.so.1 is missing, a required entry point is missing,
     * cuInit fails or there is no device, dev_list and dev_open return
     * MT_UNAVAILABLE with the reason (the dynamic loader's text, or the
     * failing call with cuGetErrorName/cuGetErrorString). */

    /* Lists the CUDA devices into out[0..max) (out may be NULL with max 0)
     * and sets *count to the number present (which may exceed max); creates
     * no context. info.fingerprint is left empty for the caller to fill. */
    /* .dev_list         = */ mt_status (*dev_list)(mt_device_info *out, int max, int *count, char *err, size_t errlen);
    /* Opens device `index`: retains its primary context and creates one
     * stream. *dev is released with dev_close; *info (may be NULL) as dev_list. */
    /* .dev_open         = */ mt_status (*dev_open)(int index, void **dev, mt_device_info *info, char *err, size_t errlen);
    /* Releases the opener's reference; the context and stream go when the
     * last program and buffer of the device are freed too. NULL: no-op. */
    /* .dev_close        = */ void (*dev_close)(void *dev);
    /* Loads a cubin (cuModuleLoadData) and finds extern "C" kernel `name` in
     * it; *prog is released with prog_free. MT_BUILD when the driver refuses
     * the image (e.g. a driver older than the compiler) or the kernel is
     * missing, with the reason in log. */
    /* .load             = */ mt_status (*load)(void *dev, const void *cubin, size_t len, const char *name, void **prog, char *log,
                                                size_t loglen);
    /* .prog_free        = */ void (*prog_free)(void *prog);
    /* Device memory (cuMemAlloc): MT_NOMEM when the device has no room. */
    /* .alloc            = */ mt_status (*alloc)(void *dev, size_t bytes, void **buf);
    /* Copies on the device's stream and waits for the copy. */
    /* .write            = */ mt_status (*write)(void *dev, void *buf, size_t offset, const void *src, size_t bytes);
    /* .read             = */ mt_status (*read)(void *dev, void *buf, size_t offset, void *dst, size_t bytes);
    /* .buf_free         = */ void (*buf_free)(void *buf);
    /* Launches prog over grid x block (blocks x threads per block) with the
     * buffers args (kernel parameters, in order): `warmup` untimed launches,
     * then `repeats` launches each between two events on the stream;
     * times_ms[i] is launch i's event time. MT_INVALID_CONFIG for a launch
     * the device or the kernel cannot take (block or grid over a limit,
     * CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); MT_LAUNCH when a kernel faults
     * (the message says whether the context is now unusable). */
    /* .run              = */ mt_status (*run)(void *dev, void *prog, void **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                               int warmup, int repeats, double *times_ms, char *err, size_t errlen);
    /* .dev_props        = */ mt_status (*dev_props)(void *dev, mt_cuda_device_props *out);
    /* .prog_info        = */ mt_status (*prog_info)(void *prog, mt_cuda_prog_info *out);

    /* ---- cuDNN (cuda/module/cudnn.c) ---- */

    /* Non-zero when libcudnn.so.9 loads and has every function the reference
     * uses; otherwise 0 with the reason. Needs no GPU. */
    /* .cudnn_available  = */ int (*cudnn_available)(char *why, size_t whylen);
    /* mt_cudnn_reference_dbuf (cuda/cuda_backend.h) on the module's own
     * handles: x, w, y are buffers of dev (y at least the output's size);
     * p is never NULL. */
    /* .cudnn_conv       = */ mt_status (*cudnn_conv)(void *dev, const mt_workload *wl, void *x, void *w, void *y, const mt_cudnn_params *p,
                                                      mt_cudnn_result *res, char *err, size_t errlen);

    /* ---- the GNN's scoring forward on the GPU (cuda/module/gnn.c, cuda/module/gnn_kernels.c) ----
     * cuBLAS (libcublas.so.13, else .so.12) is dlopen'ed inside the module
     * and runs the GEMMs on the device's primary context and stream; the
     * other operations are the module's own kernels (CUDA C, compiled with
     * NVRTC for the device's sm at the first gnn_create of a device and kept
     * with the device handle). The loader checks
     * MT_CUDA_MODULE_HAS(m, gnn_free) (the last of them) before using any. */

    /* The CUDA C of every GNN kernel and their names (*names[0..*count)),
     * static; for compile checks (no GPU needed). */
    /* .gnn_kernels      = */ const char *(*gnn_kernels)(const char *const **names, int *count);
    /* Non-zero when cuBLAS loads and has every function the forward uses
     * (no GPU needed); otherwise 0 with the reason. */
    /* .gnn_available    = */ int (*gnn_available)(char *why, size_t whylen);
    /* A scorer of one model architecture and graph shape on dev (a
     * dev_open handle, which it references until gnn_free): desc is copied.
     * Weights are set with gnn_set_weights before the first gnn_score.
     * MT_UNAVAILABLE when cuBLAS is missing, MT_BUILD when a kernel does not
     * compile or load, MT_NOMEM, MT_DEVICE with the failing call named. */
    /* .gnn_create       = */ mt_status (*gnn_create)(void *dev, const struct mt_cuda_gnn_desc *desc, void **gnn, char *err, size_t errlen);
    /* Uploads desc->nweights weights and the F-feature normalisation
     * (mean, 1/std); the next gnn_score uses them. */
    /* .gnn_set_weights  = */ mt_status (*gnn_set_weights)(void *gnn, const float *w, const float *mean, const float *istd, char *err,
                                                           size_t errlen);
    /* Scores B graphs (feats: B x n x F floats, graph-major as mt_gnn_score
     * takes them) into scores[B]. Thread-safe: a scorer has a mutex, and the
     * device's stream is held (its mutex) for the whole call. */
    /* .gnn_score        = */ mt_status (*gnn_score)(void *gnn, int B, const float *feats, float *scores, char *err, size_t errlen);
    /* Frees every device and host buffer and the cuBLAS handle; NULL: no-op. */
    /* .gnn_free         = */ void (*gnn_free)(void *gnn);
} mt_cuda_module;

/* Every ABI-1 module's table is at least this long. */
#define MT_CUDA_MODULE_V1_SIZE (offsetof(mt_cuda_module, free_buffer) + sizeof(void (*)(void *)))
#define MT_CUDA_MODULE_HAS(m, member) \
    ((m)->struct_size >= offsetof(mt_cuda_module, member) + sizeof((m)->member) && (m)->member != NULL)

/* The module's one export: the table for abi_version, or NULL when the module
 * cannot provide it. The table is static; the caller never frees it. */
typedef const mt_cuda_module *(*mt_cuda_module_get_fn)(int abi_version);
const mt_cuda_module *mt_cuda_module_get(int abi_version); /* defined in the module only */

/* ---- loader side (cuda/cuda_loader.c, part of libmtgpu) ---- */

/* The process-wide module, loaded on first call (pthread_once) from the paths
 * listed in cuda/cuda_backend.h and kept for the life of the process.
 * MT_OK with *mod set, or MT_UNAVAILABLE with the reason in err. */
mt_status mt__cuda_module(const mt_cuda_module **mod, char *err, size_t errlen);

/* Loads the module at `path` (anything dlopen accepts) without caching:
 * *handle and *mod on MT_OK, to be released with mt__cuda_unload; on
 * failure MT_UNAVAILABLE with dlerror's text (missing file, missing symbol
 * or ABI mismatch) and nothing left loaded. For tests and tools. */
mt_status mt__cuda_load_from(const char *path, void **handle, const mt_cuda_module **mod, char *err, size_t errlen);
void mt__cuda_unload(void *handle);

/* ---- the backend on top of the module (cuda/backend_cuda.c) ---- */

/* Non-zero when m has every member of the driver half (dev_list ..
 * cudnn_conv); older modules can compile-check but not run. */
int mt__cuda_module_can_run(const mt_cuda_module *m);

/* The first half of a CUDA build, which needs no GPU: compiles src with
 * NVRTC for sm_<10*cc_major+cc_minor> of props, links it with nvJitLink
 * (within timeout_s; <= 0: none) and checks ptxas's report against the
 * MT_CUDA_MAX_* limits (mt_cuda_check_limits: registers, static shared
 * memory, local memory, spills) and the device's own shared memory per
 * block (mt__cuda_check_resources). On MT_OK
 * *cubin (release with m->free_buffer) and *len hold the cubin, *res (may be
 * NULL) the report. MT_INVALID_CONFIG, naming the limit, for a kernel over
 * one: rejected before anything is loaded or launched; MT_BUILD (with the
 * compiler's log), MT_TIMEOUT, MT_UNSUPPORTED as mt_cuda_compile_check. */
mt_status mt__cuda_build_cubin(const mt_cuda_module *m, const char *src, const char *name, const mt_cuda_device_props *props,
                               double timeout_s, char **cubin, size_t *len, mt_cuda_resources *res, char *log, size_t loglen);

/* MT_INVALID_CONFIG when a kernel with resources r exceeds a limit of the
 * device described by props (the MT_CUDA_MAX_* limits included); MT_OK
 * otherwise. For the report of a fresh compile and, with spills unknown
 * (0), for the driver's figures of a cubin loaded from the cache. */
mt_status mt__cuda_check_resources(const mt_cuda_resources *r, const mt_cuda_device_props *props, char *err, size_t errlen);

/* The module and the module's device handle behind a CUDA backend device
 * handle (what mt__device_backend_handle returns for a CUDA device). */
void mt__cuda_backend_module_dev(void *backend_dev, const mt_cuda_module **m, void **module_dev);

#endif
