/* CUDA compile checks (NVRTC compilation and nvJitLink's resource report)
 * and the cuDNN reference on CUDA devices.
 *
 * The compile checks need the CUDA module (libmtgpu_cuda.so, loaded with dlopen on
 * first use) and the CUDA toolkit's NVRTC and nvJitLink libraries, but no GPU
 * and no NVIDIA driver: a kernel is compiled for an architecture given by
 * number (90 for sm_90) and ptxas reports what it uses. Where the module
 * cannot be loaded every call returns MT_UNAVAILABLE with the reason; nothing
 * else in libmtgpu is affected.
 *
 * The module is searched for in this order: the file named by the environment
 * variable MTGPU_CUDA_MODULE (when set, only that file); the build directory;
 * <prefix>/lib/mtgpu; then "libmtgpu_cuda.so" on the dynamic loader's path.
 * It is loaded once per process; all calls here are thread-safe. */
#ifndef MTGPU_CUDA_H
#define MTGPU_CUDA_H

#include <stddef.h>

#include "measure.h"
#include "mtgpu/device.h"
#include "ir.h"
#include "mtgpu/status.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What ptxas reports for one kernel, per thread unless said otherwise. */
typedef struct mt_cuda_resources {
    int registers;         /* registers per thread */
    int shared_bytes;      /* static __shared__ bytes per block, as ptxas counts them: without the
                              1 KiB per block that the driver reserves on sm_80 and later */
    int local_bytes;       /* local memory per thread: the stack frame (or ptxas's "lmem" where
                              that is larger): private arrays that live in memory, plus spills */
    int spill_store_bytes; /* bytes written by spill stores (static count over the code) */
    int spill_load_bytes;  /* bytes read by spill loads (static count over the code) */
    size_t cubin_bytes;    /* size of the linked cubin */
    int const_bytes;       /* constant bank 0 (kernel parameters and driver constants); 0 where unreported */
    int barriers;          /* named barriers used */
} mt_cuda_resources;

/* Limits applied by mt_cuda_check_limits. */
#define MT_CUDA_MAX_REGISTERS 255              /* per thread, every architecture NVRTC targets */
#define MT_CUDA_MAX_STATIC_SHARED (48 * 1024)  /* static __shared__ per block, every sm_xx; larger
                                                  needs dynamic shared memory and an opt-in */
#define MT_CUDA_MAX_LOCAL_BYTES (512 * 1024)   /* per-thread local memory, a hardware limit */
/* A tuning policy, not a hardware limit: a schedule whose ptxas spill code
 * (stores + loads) exceeds this many bytes per thread is register-starved and
 * will lose to its neighbours, so it is not worth measuring. A few bytes of
 * spills are common in good kernels and pass. */
#define MT_CUDA_MAX_SPILL_BYTES 1024

/* Options of a compile check (mt_cuda_check_default_params gives the defaults). */
typedef struct mt_cuda_check_params {
    int sm_arch;      /* target architecture, 90 for sm_90; default 90 */
    double timeout_s; /* wall-clock limit on the NVRTC compile, MT_TIMEOUT when it is hit (a
                         template config can unroll into minutes of compiling); <= 0: none.
                         The nvJitLink/ptxas step that follows cannot be interrupted and is
                         not limited. Default 0 */
} mt_cuda_check_params;

mt_cuda_check_params mt_cuda_check_default_params(void);

/* MT_OK when the CUDA module loads (no GPU or driver needed); otherwise
 * MT_UNAVAILABLE with the reason (which module files were tried, the dynamic
 * loader's error) in why. */
mt_status mt_cuda_available(char *why, size_t len);

/* Compiles CUDA C source `src` with NVRTC for sm_<sm_arch> (e.g. 90), links
 * the PTX with nvJitLink and fills *out with what ptxas reports for the
 * kernel named kernel_name (an extern "C" __global__ function; NULL: the
 * first kernel). log receives the compiler's messages (on success the
 * resource report, on failure the errors), always NUL-terminated and
 * truncated to loglen.
 * Returns MT_BUILD when the source does not compile; MT_INVALID_CONFIG when
 * it compiles but exceeds a hardware limit (too much shared or local memory;
 * static shared memory over MT_CUDA_MAX_STATIC_SHARED is seen in the PTX and
 * rejected before linking, with shared_bytes set); MT_NOT_FOUND when there is no such kernel;
 * MT_UNSUPPORTED when NVRTC does not know the architecture; MT_UNAVAILABLE
 * when the module cannot be loaded. *out (may be NULL) is zeroed first and,
 * where ptxas still reported figures for a kernel that failed to link,
 * filled with them. */
mt_status mt_cuda_compile_check(const char *src, const char *kernel_name, int sm_arch, mt_cuda_resources *out, char *log,
                                size_t loglen);

/* Prints k as CUDA C (mt_kernel_print) and runs mt_cuda_compile_check on it. */
mt_status mt_cuda_kernel_check(const mt_kernel *k, int sm_arch, mt_cuda_resources *out, char *log, size_t loglen);

/* The same two checks with options (NULL: the defaults); MT_TIMEOUT when
 * params->timeout_s ran out during the NVRTC compile. */
mt_status mt_cuda_compile_check_ex(const char *src, const char *kernel_name, const mt_cuda_check_params *params,
                                   mt_cuda_resources *out, char *log, size_t loglen);
mt_status mt_cuda_kernel_check_ex(const mt_kernel *k, const mt_cuda_check_params *params, mt_cuda_resources *out, char *log,
                                  size_t loglen);

/* MT_INVALID_CONFIG, with the limit named in err, when r exceeds one of the
 * MT_CUDA_MAX_* limits above for sm_<sm_arch>; MT_OK otherwise. */
mt_status mt_cuda_check_limits(const mt_cuda_resources *r, int sm_arch, char *err, size_t errlen);

/* ---- the vendor reference: cuDNN on a CUDA device ----
 *
 * cuDNN 9 (libcudnn.so.9) is loaded with dlopen inside the CUDA module on
 * first use; it is never needed to build or run anything else. */

typedef struct mt_cudnn_params {
    int warmup;             /* untimed runs of each chosen algorithm before timing (default 3) */
    int repeats;            /* timed runs of each chosen algorithm; the median is reported (default 20) */
    size_t workspace_limit; /* largest workspace an algorithm may use, bytes; 0: the largest any
                               algorithm asks for, up to 1 GiB and half the free device memory (default 0) */
} mt_cudnn_params;

mt_cudnn_params mt_cudnn_default_params(void);

/* One workload's cuDNN timings. "strict" is CUDNN_FMA_MATH: fp32 FMA only, no
 * TF32 tensor cores, the same arithmetic as mtgpu's kernels; "default" is
 * CUDNN_DEFAULT_MATH, which lets cuDNN use TF32 tensor cores on sm_80 and
 * later (about 10 mantissa bits: faster, and not comparable in accuracy). */
typedef struct mt_cudnn_result {
    double strict_ms;         /* median time of the fastest strict algorithm (cudnnFind's pick, re-timed on the stream) */
    double default_ms;        /* likewise with default math */
    double strict_find_ms;    /* the times cudnnFindConvolutionForwardAlgorithmEx reported for them */
    double default_find_ms;
    char strict_algo[40];     /* e.g. "implicit_precomp_gemm" */
    char default_algo[40];
    char default_math[32];    /* math type the default winner runs with: "fma", "tensor_op", "tensor_op_allow_conversion", "default" */
    size_t strict_workspace;  /* bytes of workspace the chosen algorithms use */
    size_t default_workspace;
    int strict_algos_tried;   /* algorithms cudnnFind ran successfully, per math type */
    int default_algos_tried;
    int repeats;              /* timed runs behind each median */
    char version[32];         /* the loaded cuDNN, e.g. "9.19.0" */
} mt_cudnn_result;

/* Non-zero when libcudnn.so.9 loads in this process (no GPU needed to
 * check); otherwise 0 with the reason (module or library missing) in why. */
int mt_cudnn_available(char *why, size_t whylen);

/* Runs workload wl (fp32, NCHW input `in`, OIHW weights `wt`, as in
 * mtgpu/workload.h) with cuDNN on dev: cudnnFindConvolutionForwardAlgorithmEx
 * once with strict math and once with default math, each winner then timed
 * (params: NULL for the defaults), times into *res. When out is not NULL it
 * receives the output of the strict winner (NKPQ, mt_workload_output_elems
 * floats), for correctness checks. MT_UNAVAILABLE with the reason when dev
 * is not a CUDA device or cuDNN cannot be loaded; MT_UNSUPPORTED when cuDNN
 * has no algorithm for the workload; MT_DEVICE / MT_NOMEM for device errors.
 * Serialised with every other use of dev's stream; thread-safe. */
mt_status mt_cudnn_reference(mt_device *dev, const mt_workload *wl, const mt_cudnn_params *params, const float *in, const float *wt,
                             float *out, mt_cudnn_result *res, char *err, size_t errlen);

/* The same on buffers already on dev: in and wt hold the input and weights,
 * out (at least mt_workload_output_elems floats) receives the strict
 * winner's output. */
mt_status mt_cudnn_reference_dbuf(mt_device *dev, const mt_workload *wl, const mt_cudnn_params *params, mt_dbuf *in, mt_dbuf *wt,
                                  mt_dbuf *out, mt_cudnn_result *res, char *err, size_t errlen);

/* Runs cuDNN on a measurement bench's input and weights (device/measure.h)
 * and compares its strict-math output with the bench's CPU reference: *res
 * gets cuDNN's times and algorithms, *max_rel_err (may be NULL) the
 * normalised error of that output. MT_UNAVAILABLE with the reason on a
 * device without a vendor reference (any non-CUDA device) or where cuDNN
 * cannot be loaded; MT_WRONG_RESULT when cuDNN's output is NaN/Inf or over
 * params' tolerance (NULL: the default measure params). */
mt_status mt_conv_bench_cudnn(mt_conv_bench *b, const mt_cudnn_params *cp, const mt_measure_params *params, mt_cudnn_result *res,
                              double *max_rel_err, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
