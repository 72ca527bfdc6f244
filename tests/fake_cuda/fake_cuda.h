/* A fake NVIDIA driver (libcuda.so.1) for testing the CUDA module's driver
 * half on machines without a GPU: every entry point the module resolves,
 * host memory for device memory, launches that only take time, and checks
 * of how it is called (a context current in the calling thread, copies
 * inside allocations, balanced retain/release). test_cuda_fake loads it by
 * putting its directory first on LD_LIBRARY_PATH.
 *
 * FAKE_CUDA_MODE (read by cuInit): unset: one H200-like device; "nodevice":
 * cuInit fails with CUDA_ERROR_NO_DEVICE; "zero": no device. */
#ifndef MTGPU_FAKE_CUDA_H
#define MTGPU_FAKE_CUDA_H

typedef struct fake_cuda_stats {
    int ctx_refs;          /* primary context retains minus releases */
    int live_allocs, live_modules, live_streams, live_events;
    int launches;
    int no_context;        /* calls that needed a current context and had none */
    int wrong_context;     /* ... had a context other than the primary one on top */
    int bad_copies;        /* copies outside any allocation */
    int bad_params;        /* launches whose parameters were not live allocations */
    int pops_without_push;
    int max_depth;         /* deepest context stack seen in any thread */
} fake_cuda_stats;

/* Exported by the fake (look them up with dlsym): the counters so far, and
 * fault injection: the `nth` (1-based) next call of `call` (a symbol name,
 * e.g. "cuLaunchKernel", "cuEventSynchronize", "cuMemAlloc_v2",
 * "cuModuleLoadData") returns r; nth 0 clears. */
typedef void (*fake_cuda_stats_fn)(fake_cuda_stats *out);

/* The CUresult codes the tests inject (cuda.h's values; the tests build
 * without the toolkit's headers, the fake checks they agree). */
#define FAKE_CUDA_ERROR_OUT_OF_MEMORY 2
#define FAKE_CUDA_ERROR_INVALID_IMAGE 200
#define FAKE_CUDA_ERROR_ILLEGAL_ADDRESS 700
#define FAKE_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701
typedef void (*fake_cuda_fail_fn)(const char *call, int nth, int r);

#endif
