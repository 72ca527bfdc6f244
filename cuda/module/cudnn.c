/* The vendor reference: one convolution with cuDNN 9, reached through
 * dlopen("libcudnn.so.9") so that neither the module nor libmtgpu needs it.
 *
 * For a workload, cudnnFindConvolutionForwardAlgorithmEx runs every forward
 * algorithm on the caller's device buffers twice: with CUDNN_FMA_MATH
 * (fp32 FMA only: the arithmetic mtgpu's kernels do) and with
 * CUDNN_DEFAULT_MATH (TF32 tensor cores allowed on sm_80 and later). Each
 * winner is then timed on the device's stream like mtgpu's own kernels
 * (warm-up, then event pairs, median), and the strict winner runs last, so
 * that y holds its output for correctness checks.
 *
 * The convolution API used here (descriptors, cudnnFind*) is marked
 * deprecated in cuDNN 9 in favour of the graph API, but it is still shipped
 * and is what frameworks' "benchmark" modes call; its types come from
 * cudnn.h, its functions are resolved by name. */
#include <stdio.h>
#include <string.h>

#include "module-impl.h"

#ifndef MTGPU_HAVE_CUDNN_H

/* Built where cudnn.h was not found (CMakeLists.txt): the rest of the
 * module works; the reference says why it does not. */
int mt__cudnn_available(char *why, size_t whylen) {
    mt__cu_fail(why, whylen, MT_UNAVAILABLE, "this CUDA module was built without cudnn.h");
    return 0;
}

mt_status mt__cudnn_conv(void *dev, const mt_workload *wl, void *x, void *w, void *y, const mt_cudnn_params *p, mt_cudnn_result *res,
                         char *err, size_t errlen) {
    (void)dev, (void)wl, (void)x, (void)w, (void)y, (void)p;
    if (res) memset(res, 0, sizeof *res);
    return mt__cu_fail(err, errlen, MT_UNAVAILABLE, "this CUDA module was built without cudnn.h");
}

void mt__cudnn_dev_release(mt__cu_dev *d) { (void)d; }

#else

#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
#include <cudnn.h>

#define MT__DNN_REQUIRED(X)                                                                                                \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                             \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor)                           \
    X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                           \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)                \
    X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor) X(cudnnGetConvolution2dForwardOutputDim)           \
    X(cudnnGetConvolutionForwardAlgorithmMaxCount) X(cudnnGetConvolutionForwardWorkspaceSize)                              \
    X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnConvolutionForward)
/* cudnnGetLastErrorString adds cuDNN's own explanation to a failure. */
#define MT__DNN_OPTIONAL(X) X(cudnnGetLastErrorString)

typedef struct dnn_api {
#define MT__DNN_MEMBER(f) __typeof__(f) *f;
    MT__DNN_REQUIRED(MT__DNN_MEMBER)
    MT__DNN_OPTIONAL(MT__DNN_MEMBER)
#undef MT__DNN_MEMBER
    char version[32];
} dnn_api;

static mt__cu_lib g_lib = MT__CU_LIB_INIT;
static dnn_api g_dnn; /* written once, inside g_lib.once: usable when g_lib.ok */

static void load_once(void) {
    static const char *const names[] = {"libcudnn.so.9"};
    void *lib = mt__cu_lib_open(&g_lib, names, 1, NULL);
    if (!lib) return;
    dnn_api a;
    memset(&a, 0, sizeof a);
#define MT__DNN_SYM(f) MT__CU_SYM(a, f)
    const mt__cu_sym required[] = {MT__DNN_REQUIRED(MT__DNN_SYM)}, optional[] = {MT__DNN_OPTIONAL(MT__DNN_SYM)};
#undef MT__DNN_SYM
    int miss = mt__cu_resolve_syms(lib, required, (int)(sizeof required / sizeof required[0]));
    if (miss >= 0) {
        snprintf(g_lib.why, sizeof g_lib.why, "libcudnn.so.9 has no %s", required[miss].name);
        return;
    }
    (void)mt__cu_resolve_syms(lib, optional, (int)(sizeof optional / sizeof optional[0])); /* those it lacks stay NULL */
    size_t v = a.cudnnGetVersion(); /* 10000 * major + 100 * minor + patch since cuDNN 9 */
    if (v / 10000 != 9) {
        snprintf(g_lib.why, sizeof g_lib.why, "libcudnn.so.9 reports version %zu, not 9.x", v);
        return;
    }
    snprintf(a.version, sizeof a.version, "%zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    g_dnn = a;
    g_lib.ok = 1;
}

static const dnn_api *dnn_get(char *why, size_t whylen) {
    return mt__cu_lib_ready(&g_lib, load_once, "cuDNN unavailable: ", "not found", why, whylen) ? &g_dnn : NULL;
}

int mt__cudnn_available(char *why, size_t whylen) {
    if (why && whylen) why[0] = '\0';
    const dnn_api *a = dnn_get(why, whylen);
    if (a && why && whylen) snprintf(why, whylen, "cuDNN %s", a->version);
    return a != NULL;
}

/* cuDNN's words for status r: "CUDNN_STATUS_X (n)[: cuDNN's last error]". */
static void dnn_status_text(int r, char *buf, size_t len) {
    char last[512] = "";
    const char *name = g_lib.ok ? g_dnn.cudnnGetErrorString((cudnnStatus_t)r) : NULL;
    if (g_lib.ok && g_dnn.cudnnGetLastErrorString) g_dnn.cudnnGetLastErrorString(last, sizeof last);
    snprintf(buf, len, "%s (%d)%s%s", name ? name : "CUDNN_STATUS_UNKNOWN", r, last[0] ? ": " : "", last);
}

/* "<what>: CUDNN_STATUS_X (n)[: cuDNN's last error]" into err; returns s. */
#define dnn_fail(err, errlen, s, r, ...) mt__cu_fail_code(err, errlen, s, dnn_status_text, (int)(r), __VA_ARGS__)

static mt_status dnn_status(cudnnStatus_t r) {
    switch (r) {
    case CUDNN_STATUS_SUCCESS: return MT_OK;
    case CUDNN_STATUS_ALLOC_FAILED: return MT_NOMEM;
    case CUDNN_STATUS_NOT_SUPPORTED: return MT_UNSUPPORTED;
    case CUDNN_STATUS_BAD_PARAM: return MT_INVALID_ARG;
    default: return MT_DEVICE;
    }
}

static const char *algo_name(cudnnConvolutionFwdAlgo_t a) {
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "unknown";
    }
}

static const char *math_name(cudnnMathType_t m) {
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor_op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor_op_allow_conversion";
    case CUDNN_FMA_MATH: return "fma";
    default: return "unknown";
    }
}

void mt__cudnn_dev_release(mt__cu_dev *d) {
    if (!d->cudnn || !g_lib.ok) return;
    (void)g_dnn.cudnnDestroy((cudnnHandle_t)d->cudnn);
    d->cudnn = NULL;
}

/* Everything one reference run owns, released by run_free. */
typedef struct dnn_run {
    const dnn_api *a;
    mt__cu_dev *d;
    cudnnHandle_t h;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    CUdeviceptr ws;
    size_t ws_size;
    const mt__cu_buf *x, *w, *y;
    /* the algorithm being timed */
    cudnnConvolutionFwdAlgo_t algo;
    size_t algo_ws;
} dnn_run;

static void run_free(dnn_run *r) {
    const dnn_api *a = r->a;
    if (r->ws) (void)r->d->api->cuMemFree(r->ws);
    if (r->cd) (void)a->cudnnDestroyConvolutionDescriptor(r->cd);
    if (r->wd) (void)a->cudnnDestroyFilterDescriptor(r->wd);
    if (r->yd) (void)a->cudnnDestroyTensorDescriptor(r->yd);
    if (r->xd) (void)a->cudnnDestroyTensorDescriptor(r->xd);
}

/* One forward convolution with r->algo, for timing. */
static mt_status forward(void *ctx, char *err, size_t errlen) {
    dnn_run *r = ctx;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s = r->a->cudnnConvolutionForward(r->h, &one, r->xd, (const void *)(uintptr_t)r->x->ptr, r->wd,
                                                    (const void *)(uintptr_t)r->w->ptr, r->cd, r->algo,
                                                    r->algo_ws ? (void *)(uintptr_t)r->ws : NULL, r->algo_ws, &zero, r->yd,
                                                    (void *)(uintptr_t)r->y->ptr);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, MT_LAUNCH, s, "cudnnConvolutionForward(%s)", algo_name(r->algo));
    return MT_OK;
}

/* The largest workspace any algorithm asks for under the current math type. */
static size_t max_workspace(dnn_run *r) {
    size_t most = 0;
    for (int algo = 0; algo < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; algo++) {
        size_t n = 0;
        if (r->a->cudnnGetConvolutionForwardWorkspaceSize(r->h, r->xd, r->wd, r->cd, r->yd, (cudnnConvolutionFwdAlgo_t)algo, &n) ==
                CUDNN_STATUS_SUCCESS &&
            n > most)
            most = n;
    }
    return most;
}

/* cudnnFind under math type `math`: the fastest successful algorithm into
 * *best, the number that succeeded into *tried. */
static mt_status find_best(dnn_run *r, cudnnMathType_t math, cudnnConvolutionFwdAlgoPerf_t *best, int *tried, char *err,
                           size_t errlen) {
    const dnn_api *a = r->a;
    cudnnStatus_t s = a->cudnnSetConvolutionMathType(r->cd, math);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, dnn_status(s), s, "cudnnSetConvolutionMathType(%s)", math_name(math));
    cudnnConvolutionFwdAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int want = 0, got = 0;
    s = a->cudnnGetConvolutionForwardAlgorithmMaxCount(r->h, &want);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, dnn_status(s), s, "cudnnGetConvolutionForwardAlgorithmMaxCount");
    if (want < 1 || want > (int)(sizeof perf / sizeof perf[0])) want = (int)(sizeof perf / sizeof perf[0]);
    memset(perf, 0, sizeof perf);
    s = a->cudnnFindConvolutionForwardAlgorithmEx(r->h, r->xd, (const void *)(uintptr_t)r->x->ptr, r->wd,
                                                  (const void *)(uintptr_t)r->w->ptr, r->cd, r->yd, (void *)(uintptr_t)r->y->ptr, want,
                                                  &got, perf, r->ws_size ? (void *)(uintptr_t)r->ws : NULL, r->ws_size);
    if (s != CUDNN_STATUS_SUCCESS)
        return dnn_fail(err, errlen, dnn_status(s), s, "cudnnFindConvolutionForwardAlgorithmEx (%s math)", math_name(math));
    *tried = 0;
    int first = -1;
    for (int i = 0; i < got && i < want; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        (*tried)++;
        /* Results come fastest first; under FMA math skip any that reports a
         * tensor-op math type, should cuDNN ever report one. */
        if (first < 0 && (math != CUDNN_FMA_MATH || perf[i].mathType == CUDNN_FMA_MATH || perf[i].mathType == CUDNN_DEFAULT_MATH))
            first = i;
    }
    if (first < 0)
        return mt__cu_fail(err, errlen, MT_UNSUPPORTED, "cuDNN has no forward algorithm for this convolution with %s math (%d tried)",
                           math_name(math), got);
    *best = perf[first];
    return MT_OK;
}

/* Times `perf`'s algorithm under math type `math` into *ms. */
static mt_status time_algo(dnn_run *r, const cudnnConvolutionFwdAlgoPerf_t *perf, cudnnMathType_t math, const mt_cudnn_params *p,
                           double *ms, char *err, size_t errlen) {
    cudnnStatus_t s = r->a->cudnnSetConvolutionMathType(r->cd, math);
    if (s != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, dnn_status(s), s, "cudnnSetConvolutionMathType(%s)", math_name(math));
    if (perf->memory > r->ws_size)
        return mt__cu_fail(err, errlen, MT_DEVICE, "cuDNN picked %s with %zu bytes of workspace, more than the %zu it was given",
                           algo_name(perf->algo), perf->memory, r->ws_size);
    r->algo = perf->algo;
    r->algo_ws = perf->memory;
    return mt__cu_time_on_stream(r->d, forward, r, p->warmup, p->repeats, ms, err, errlen);
}

/* The part of mt__cudnn_conv that runs with d->mu held and d's context current. */
static mt_status conv_locked(dnn_run *r, const mt_workload *wl, const mt_cudnn_params *p, mt_cudnn_result *res, char *err,
                             size_t errlen) {
    const dnn_api *a = r->a;
    mt__cu_dev *d = r->d;
    cudnnStatus_t s;
    if (!d->cudnn) {
        cudnnHandle_t h = NULL;
        if ((s = a->cudnnCreate(&h)) != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, dnn_status(s), s, "cudnnCreate (cuda:%d)", d->index);
        if ((s = a->cudnnSetStream(h, (cudaStream_t)d->stream)) != CUDNN_STATUS_SUCCESS) {
            (void)a->cudnnDestroy(h);
            return dnn_fail(err, errlen, dnn_status(s), s, "cudnnSetStream");
        }
        d->cudnn = h;
    }
    r->h = (cudnnHandle_t)d->cudnn;

    int out_h = (wl->h + 2 * wl->pad_h - wl->dil_h * (wl->r - 1) - 1) / wl->stride_h + 1;
    int out_w = (wl->w + 2 * wl->pad_w - wl->dil_w * (wl->s - 1) - 1) / wl->stride_w + 1;
#define DNN(call, what)                                                                     \
    do {                                                                                    \
        if ((s = (call)) != CUDNN_STATUS_SUCCESS) return dnn_fail(err, errlen, dnn_status(s), s, "%s", what); \
    } while (0)
    DNN(a->cudnnCreateTensorDescriptor(&r->xd), "cudnnCreateTensorDescriptor");
    DNN(a->cudnnCreateTensorDescriptor(&r->yd), "cudnnCreateTensorDescriptor");
    DNN(a->cudnnCreateFilterDescriptor(&r->wd), "cudnnCreateFilterDescriptor");
    DNN(a->cudnnCreateConvolutionDescriptor(&r->cd), "cudnnCreateConvolutionDescriptor");
    DNN(a->cudnnSetTensor4dDescriptor(r->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, wl->n, wl->c, wl->h, wl->w),
        "cudnnSetTensor4dDescriptor (input)");
    DNN(a->cudnnSetFilter4dDescriptor(r->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, wl->k, wl->c / wl->groups, wl->r, wl->s),
        "cudnnSetFilter4dDescriptor");
    /* mtgpu's convolution, like every framework's, is a cross-correlation (no kernel flip). */
    DNN(a->cudnnSetConvolution2dDescriptor(r->cd, wl->pad_h, wl->pad_w, wl->stride_h, wl->stride_w, wl->dil_h, wl->dil_w,
                                           CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
    DNN(a->cudnnSetConvolutionGroupCount(r->cd, wl->groups), "cudnnSetConvolutionGroupCount");
    int on = 0, ok = 0, oh = 0, ow = 0;
    DNN(a->cudnnGetConvolution2dForwardOutputDim(r->cd, r->xd, r->wd, &on, &ok, &oh, &ow), "cudnnGetConvolution2dForwardOutputDim");
    if (on != wl->n || ok != wl->k || oh != out_h || ow != out_w)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cuDNN's output would be %dx%dx%dx%d, mtgpu's is %dx%dx%dx%d", on, ok, oh, ow,
                           wl->n, wl->k, out_h, out_w);
    DNN(a->cudnnSetTensor4dDescriptor(r->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, wl->n, wl->k, out_h, out_w),
        "cudnnSetTensor4dDescriptor (output)");
#undef DNN

    /* Workspace: what the hungriest algorithm asks for under either math
     * type, within the limit; one that needs more is skipped by cudnnFind. */
    size_t want = 0, n;
    if ((s = a->cudnnSetConvolutionMathType(r->cd, CUDNN_FMA_MATH)) == CUDNN_STATUS_SUCCESS && (n = max_workspace(r)) > want) want = n;
    if ((s = a->cudnnSetConvolutionMathType(r->cd, CUDNN_DEFAULT_MATH)) == CUDNN_STATUS_SUCCESS && (n = max_workspace(r)) > want)
        want = n;
    size_t limit = p->workspace_limit;
    if (limit == 0) {
        size_t free_b = 0, total_b = 0;
        limit = (size_t)1 << 30;
        if (d->api->cuMemGetInfo(&free_b, &total_b) == CUDA_SUCCESS && free_b / 2 < limit) limit = free_b / 2;
    }
    r->ws_size = want < limit ? want : limit;
    while (r->ws_size > 0) {
        CUresult cr = d->api->cuMemAlloc(&r->ws, r->ws_size);
        if (cr == CUDA_SUCCESS) break;
        r->ws = 0;
        if (cr != CUDA_ERROR_OUT_OF_MEMORY) return mt__cu_fail_r(err, errlen, MT_DEVICE, cr, "cuMemAlloc (%zu-byte cuDNN workspace)", r->ws_size);
        r->ws_size /= 2; /* less workspace: fewer algorithms, still a reference */
        if (r->ws_size < ((size_t)1 << 20)) r->ws_size = 0;
    }

    cudnnConvolutionFwdAlgoPerf_t strict, deflt;
    mt_status st = find_best(r, CUDNN_FMA_MATH, &strict, &res->strict_algos_tried, err, errlen);
    if (st == MT_OK) st = find_best(r, CUDNN_DEFAULT_MATH, &deflt, &res->default_algos_tried, err, errlen);
    /* The strict winner runs last: y ends up holding its output. */
    /* The default winner runs with the math type it was found with (as cuDNN
     * asks); the strict one with FMA math whatever cudnnFind reported, so
     * that tensor cores stay off. */
    if (st == MT_OK) st = time_algo(r, &deflt, deflt.mathType, p, &res->default_ms, err, errlen);
    if (st == MT_OK) st = time_algo(r, &strict, CUDNN_FMA_MATH, p, &res->strict_ms, err, errlen);
    if (st != MT_OK) return st;
    res->strict_find_ms = strict.time;
    res->default_find_ms = deflt.time;
    snprintf(res->strict_algo, sizeof res->strict_algo, "%s", algo_name(strict.algo));
    snprintf(res->default_algo, sizeof res->default_algo, "%s", algo_name(deflt.algo));
    snprintf(res->default_math, sizeof res->default_math, "%s", math_name(deflt.mathType));
    res->strict_workspace = strict.memory;
    res->default_workspace = deflt.memory;
    res->repeats = p->repeats;
    return MT_OK;
}

mt_status mt__cudnn_conv(void *devp, const mt_workload *wl, void *x, void *w, void *y, const mt_cudnn_params *p, mt_cudnn_result *res,
                         char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (res) memset(res, 0, sizeof *res);
    mt__cu_dev *d = devp;
    const mt__cu_buf *bx = x, *bw = w, *by = y;
    if (!d || !wl || !bx || !bw || !by || !p || !res || p->repeats < 1 || p->warmup < 0)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cudnn_conv: bad arguments");
    if (bx->d->ctx != d->ctx || bw->d->ctx != d->ctx || by->d->ctx != d->ctx)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cudnn_conv: a buffer belongs to another device");
    /* The caller validated wl (mt_workload_validate): sizes positive, counts below 2^31. */
    if (wl->groups < 1 || wl->c % wl->groups || wl->k % wl->groups || wl->stride_h < 1 || wl->stride_w < 1 || wl->dil_h < 1 ||
        wl->dil_w < 1)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cudnn_conv: invalid workload");
    int out_h = (wl->h + 2 * wl->pad_h - wl->dil_h * (wl->r - 1) - 1) / wl->stride_h + 1;
    int out_w = (wl->w + 2 * wl->pad_w - wl->dil_w * (wl->s - 1) - 1) / wl->stride_w + 1;
    if (out_h < 1 || out_w < 1) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cudnn_conv: empty output");
    size_t nx = (size_t)wl->n * wl->c * wl->h * wl->w, nw = (size_t)wl->k * (wl->c / wl->groups) * wl->r * wl->s,
           ny = (size_t)wl->n * wl->k * out_h * out_w;
    if (bx->size < nx * sizeof(float) || bw->size < nw * sizeof(float) || by->size < ny * sizeof(float))
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "cudnn_conv: a buffer is smaller than its tensor");
    char why[1024];
    const dnn_api *a = dnn_get(why, sizeof why);
    if (!a) return mt__cu_fail(err, errlen, MT_UNAVAILABLE, "%s", why);
    snprintf(res->version, sizeof res->version, "%s", a->version);

    dnn_run r;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.d = d;
    r.x = bx;
    r.w = bw;
    r.y = by;
    pthread_mutex_lock(&d->mu);
    mt_status st = mt__cu_push(d, err, errlen);
    if (st == MT_OK) {
        st = conv_locked(&r, wl, p, res, err, errlen);
        /* Nothing may still run on a workspace that is about to be freed. */
        (void)d->api->cuStreamSynchronize(d->stream);
        run_free(&r);
        mt__cu_pop(d);
    }
    pthread_mutex_unlock(&d->mu);
    if (st != MT_OK) {
        char version[sizeof res->version];
        memcpy(version, res->version, sizeof version);
        memset(res, 0, sizeof *res);
        memcpy(res->version, version, sizeof version);
    }
    return st;
}

#endif /* MTGPU_HAVE_CUDNN_H */
