/* The GNN's scoring forward on the GPU: cuBLAS for the GEMMs, the module's
 * own kernels (gnn_kernels.c) for the rest, on an opened device's primary
 * context and stream (driver.c).
 *
 * cuBLAS is reached through dlopen("libcublas.so.13", then ".so.12"), its
 * functions resolved by name (types from cublas_api.h only), so the module
 * loads and compiles without it. The forward is gnn/forward.c's, on the
 * same node-major layout (place q's b rows at q*b) and the same message
 * schedule (a product per distinct source or destination, pulled sums in
 * the plan's order), for up to `cap` graphs per pass.
 *
 * Thread-safety: a scorer has a mutex (one call at a time), and a call holds
 * the device handle's mutex while it uses the stream, so scorers of one
 * device (several cost models, several threads) never interleave on it.
 * Every CUresult and cublasStatus_t is checked; a failure names the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module-impl.h"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#endif
#include <cublas_api.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#define DEFAULT_GRAPHS 4096
#define BLOCK 256

/* ---- cuBLAS, loaded once ---- */

#define MT__CB_REQUIRED(X) X(cublasCreate_v2) X(cublasDestroy_v2) X(cublasSetStream_v2) X(cublasSgemm_v2)
#define MT__CB_OPTIONAL(X) X(cublasGetStatusString) X(cublasSetMathMode) X(cublasGetVersion_v2)

typedef struct cb_api {
#define MT__CB_MEMBER(f) __typeof__(f) *f;
    MT__CB_REQUIRED(MT__CB_MEMBER)
    MT__CB_OPTIONAL(MT__CB_MEMBER)
#undef MT__CB_MEMBER
    char lib[32];
} cb_api;

static mt__cu_lib g_cb_lib = MT__CU_LIB_INIT;
static cb_api g_cb; /* written once, inside g_cb_lib.once: usable when g_cb_lib.ok */

static void cb_load_once(void) {
    static const char *const libs[] = {"libcublas.so.13", "libcublas.so.12"};
    const char *which = NULL;
    void *lib = mt__cu_lib_open(&g_cb_lib, libs, (int)(sizeof libs / sizeof libs[0]), &which);
    if (!lib) return;
    cb_api a;
    memset(&a, 0, sizeof a);
#define MT__CB_SYM(f) MT__CU_SYM(a, f)
    const mt__cu_sym required[] = {MT__CB_REQUIRED(MT__CB_SYM)}, optional[] = {MT__CB_OPTIONAL(MT__CB_SYM)};
#undef MT__CB_SYM
    int miss = mt__cu_resolve_syms(lib, required, (int)(sizeof required / sizeof required[0]));
    if (miss >= 0) {
        snprintf(g_cb_lib.why, sizeof g_cb_lib.why, "%s has no %s", which, required[miss].name);
        return;
    }
    (void)mt__cu_resolve_syms(lib, optional, (int)(sizeof optional / sizeof optional[0])); /* those it lacks stay NULL */
    snprintf(a.lib, sizeof a.lib, "%s", which);
    g_cb = a;
    g_cb_lib.ok = 1;
}

static const cb_api *cb_get(char *why, size_t whylen) {
    return mt__cu_lib_ready(&g_cb_lib, cb_load_once, "cuBLAS unavailable: ", "not found", why, whylen) ? &g_cb : NULL;
}

int mt__gnn_cuda_available(char *why, size_t whylen) {
    if (why && whylen) why[0] = '\0';
    const cb_api *a = cb_get(why, whylen);
    if (a && why && whylen) snprintf(why, whylen, "cuBLAS (%s)", a->lib);
    return a != NULL;
}

/* cuBLAS's words for status r: "cublasStatus n[: its description]". */
static void cb_status_text(int r, char *buf, size_t len) {
    const char *text = g_cb_lib.ok && g_cb.cublasGetStatusString ? g_cb.cublasGetStatusString((cublasStatus_t)r) : NULL;
    snprintf(buf, len, "cublasStatus %d%s%s", r, text ? ": " : "", text ? text : "");
}

/* "<what>: cublasStatus n[: ...]" into err; returns s. */
#define cb_fail(err, errlen, s, r, ...) mt__cu_fail_code(err, errlen, s, cb_status_text, (int)(r), __VA_ARGS__)

/* ---- the kernels: compiled once per sm and process ---- */

enum { K_INPUT, K_BIAS_LRELU_MOD, K_BIAS_LRELU, K_GATHER, K_SUM_ROWS, K_UPDATE, K_READOUT, K_READOUT_FEATS, K_HEAD_OUT, K_COUNT };

#define MAX_SMS 8
static pthread_mutex_t g_bin_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    int sm;
    char *cubin;
    size_t len;
} g_bins[MAX_SMS];
static int g_nbins;

/* The kernels' cubin for sm_<sm> (compiled on first use, kept for the
 * process; the caller does not free it). */
static mt_status kernels_cubin(int sm, const char **cubin, size_t *len, char *err, size_t errlen) {
    pthread_mutex_lock(&g_bin_mu);
    for (int i = 0; i < g_nbins; i++)
        if (g_bins[i].sm == sm) {
            *cubin = g_bins[i].cubin, *len = g_bins[i].len;
            pthread_mutex_unlock(&g_bin_mu);
            return MT_OK;
        }
    mt_cuda_check_params p;
    memset(&p, 0, sizeof p);
    p.sm_arch = sm;
    p.timeout_s = 120;
    char *bin = NULL;
    size_t n = 0;
    mt_status st = mt__cu_compile(mt__gnn_cuda_source(NULL, NULL), NULL, &p, MT_CUDA_OUTPUT_CUBIN, &bin, &n, err, errlen);
    if (st == MT_OK && g_nbins == MAX_SMS) {
        free(bin);
        st = mt__cu_fail(err, errlen, MT_NOMEM, "gnn: kernels for more than %d architectures", MAX_SMS);
    } else if (st == MT_OK) {
        g_bins[g_nbins].sm = sm, g_bins[g_nbins].cubin = bin, g_bins[g_nbins].len = n;
        g_nbins++;
        *cubin = bin, *len = n;
    } else {
        char why[1024];
        snprintf(why, sizeof why, "%s", err && errlen ? err : "");
        st = mt__cu_fail(err, errlen, st, "gnn: compiling the GNN kernels for sm_%d: %s", sm, why);
    }
    pthread_mutex_unlock(&g_bin_mu);
    return st;
}

/* ---- a scorer ---- */

typedef struct gnn_gpu {
    mt__cu_dev *d;
    const cb_api *cb;
    cublasHandle_t h;
    CUmodule mod;
    CUfunction fn[K_COUNT];
    pthread_mutex_t mu;
    int mu_ok;
    /* the desc's scalars, and host copies of what the launches index */
    mt_cuda_gnn_desc desc;
    int *node_off, *mrow_off, *mside, *mrun, *mrow_pos;
    int cap, have_weights;
    /* device memory */
    CUdeviceptr ints;       /* pos | placemod | mrow_pos | madj_off | madj_pos | in_off | in_row */
    size_t o_pos, o_placemod, o_mrow_pos, o_madj_off, o_madj_pos, o_in_off, o_in_row; /* in ints */
    CUdeviceptr feats, X, Hs, U, M, G, R, Z, S, W, mean, istd;
} gnn_gpu;

static const char *const g_kernel_names[K_COUNT] = {
    "mt_gnn_input", "mt_gnn_bias_lrelu_mod", "mt_gnn_bias_lrelu", "mt_gnn_gather", "mt_gnn_sum_rows",
    "mt_gnn_update", "mt_gnn_readout", "mt_gnn_readout_feats", "mt_gnn_head_out",
};

static int *dup_ints(const int *a, int n) {
    int *r = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (r && n > 0) memcpy(r, a, sizeof(int) * (size_t)n);
    return r;
}

/* Frees g's device memory, module and handle; d's context current. */
static void release_device(gnn_gpu *g) {
    const mt__cu_api *a = g->d->api;
    CUdeviceptr *bufs[] = {&g->ints, &g->feats, &g->X, &g->Hs, &g->U, &g->M, &g->G, &g->R, &g->Z, &g->S, &g->W, &g->mean, &g->istd};
    if (g->d->stream) (void)a->cuStreamSynchronize(g->d->stream);
    if (g->h) (void)g->cb->cublasDestroy_v2(g->h);
    g->h = NULL;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (*bufs[i]) {
            (void)a->cuMemFree(*bufs[i]);
            *bufs[i] = 0;
        }
    if (g->mod) (void)a->cuModuleUnload(g->mod);
    g->mod = NULL;
}

void mt__gnn_cuda_free(void *gp) {
    gnn_gpu *g = gp;
    if (!g) return;
    if (g->d) {
        if (mt__cu_push(g->d, NULL, 0) == MT_OK) {
            pthread_mutex_lock(&g->d->mu);
            release_device(g);
            pthread_mutex_unlock(&g->d->mu);
            mt__cu_pop(g->d);
        }
        mt__cu_dev_unref(g->d);
    }
    if (g->mu_ok) pthread_mutex_destroy(&g->mu);
    free(g->node_off);
    free(g->mrow_off);
    free(g->mside);
    free(g->mrun);
    free(g->mrow_pos);
    free(g);
}

static mt_status dalloc(gnn_gpu *g, CUdeviceptr *p, size_t bytes, const char *what, char *err, size_t errlen) {
    CUresult r = g->d->api->cuMemAlloc(p, bytes ? bytes : 4);
    if (r != CUDA_SUCCESS) {
        *p = 0;
        return mt__cu_fail_r(err, errlen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_DEVICE, r, "gnn: cuMemAlloc(%zu bytes, %s)", bytes,
                             what);
    }
    return MT_OK;
}

static mt_status check_desc(const mt_cuda_gnn_desc *s, char *err, size_t errlen) {
    if (s->arch < 0 || s->arch > 2 || s->F < 1 || s->H < 1 || s->L < 0 || s->L > MT_CUDA_GNN_MAX_LAYERS || s->n < 1 || s->nt < 1 ||
        s->et < 1 || s->nrows < 0 || s->maxrows < 0 || s->nweights == 0 || !s->pos || !s->node_off)
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn: bad GPU model description");
    if (s->arch != 2 && (!s->mrow_off || !s->mside || !s->mrun || !s->madj_off || !s->in_off || (s->nrows > 0 && (!s->mrow_pos || !s->madj_pos)) ||
                         (!s->in_row && s->in_off[s->n] > 0)))
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn: GPU model description lacks the message schedule");
    return MT_OK;
}

mt_status mt__gnn_cuda_create(void *dev, const mt_cuda_gnn_desc *desc, void **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn_create: NULL output");
    *out = NULL;
    mt__cu_dev *d = dev;
    if (!d || !desc) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn_create: NULL argument");
    mt_status st = check_desc(desc, err, errlen);
    if (st != MT_OK) return st;
    const cb_api *cb = cb_get(err, errlen);
    if (!cb) return MT_UNAVAILABLE;
    const char *cubin = NULL;
    size_t cubin_len = 0;
    if ((st = kernels_cubin(10 * d->props.cc_major + d->props.cc_minor, &cubin, &cubin_len, err, errlen)) != MT_OK) return st;

    gnn_gpu *g = calloc(1, sizeof *g);
    if (!g) return mt__cu_fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    const mt_cuda_gnn_desc *s = desc;
    int gnn = s->arch != 2, n = s->n, nrows = gnn ? s->nrows : 0;
    int nadj = gnn ? s->madj_off[nrows] : 0, nin = gnn ? s->in_off[n] : 0;
    g->d = d;
    atomic_fetch_add(&d->refs, 1);
    g->cb = cb;
    g->desc = *s;
    g->desc.pos = g->desc.node_off = g->desc.mrow_off = g->desc.mside = g->desc.mrun = NULL;
    g->desc.mrow_pos = g->desc.madj_off = g->desc.madj_pos = g->desc.in_off = g->desc.in_row = NULL;
    g->mu_ok = pthread_mutex_init(&g->mu, NULL) == 0;
    g->node_off = dup_ints(s->node_off, s->nt + 1);
    g->mrow_off = gnn ? dup_ints(s->mrow_off, s->et + 1) : dup_ints(NULL, 0);
    g->mside = gnn ? dup_ints(s->mside, s->et) : dup_ints(NULL, 0);
    g->mrun = gnn ? dup_ints(s->mrun, s->et) : dup_ints(NULL, 0);
    g->mrow_pos = gnn ? dup_ints(s->mrow_pos, nrows) : dup_ints(NULL, 0);
    /* the index arrays, packed into one upload */
    size_t nints = 0;
    g->o_pos = nints, nints += (size_t)n;
    g->o_placemod = nints, nints += (size_t)n;
    g->o_mrow_pos = nints, nints += (size_t)nrows;
    g->o_madj_off = nints, nints += (size_t)nrows + 1;
    g->o_madj_pos = nints, nints += (size_t)nadj;
    g->o_in_off = nints, nints += (size_t)n + 1;
    g->o_in_row = nints, nints += (size_t)nin;
    int *hi = calloc(nints, sizeof(int));
    if (!g->mu_ok || !g->node_off || !g->mrow_off || !g->mside || !g->mrun || !g->mrow_pos || !hi) {
        free(hi);
        mt__gnn_cuda_free(g);
        return mt__cu_fail(err, errlen, MT_NOMEM, "gnn: out of memory");
    }
    memcpy(hi + g->o_pos, s->pos, sizeof(int) * (size_t)n);
    for (int t = 0; t < s->nt; t++)
        for (int q = s->node_off[t]; q < s->node_off[t + 1] && q < n; q++) hi[g->o_placemod + (size_t)q] = t;
    if (gnn) {
        if (nrows) memcpy(hi + g->o_mrow_pos, s->mrow_pos, sizeof(int) * (size_t)nrows);
        memcpy(hi + g->o_madj_off, s->madj_off, sizeof(int) * ((size_t)nrows + 1));
        if (nadj) memcpy(hi + g->o_madj_pos, s->madj_pos, sizeof(int) * (size_t)nadj);
        memcpy(hi + g->o_in_off, s->in_off, sizeof(int) * ((size_t)n + 1));
        if (nin) memcpy(hi + g->o_in_row, s->in_row, sizeof(int) * (size_t)nin);
    }

    const mt__cu_api *a = d->api;
    if ((st = mt__cu_push(d, err, errlen)) != MT_OK) {
        free(hi);
        mt__gnn_cuda_free(g);
        return st;
    }
    pthread_mutex_lock(&d->mu);
    CUresult r = a->cuModuleLoadData(&g->mod, cubin);
    if (r != CUDA_SUCCESS) {
        g->mod = NULL;
        st = mt__cu_fail_r(err, errlen, r == CUDA_ERROR_OUT_OF_MEMORY ? MT_NOMEM : MT_BUILD, r, "gnn: cuModuleLoadData (GNN kernels, sm_%d%d)",
                           d->props.cc_major, d->props.cc_minor);
    }
    for (int k = 0; k < K_COUNT && st == MT_OK; k++)
        if ((r = a->cuModuleGetFunction(&g->fn[k], g->mod, g_kernel_names[k])) != CUDA_SUCCESS)
            st = mt__cu_fail_r(err, errlen, MT_BUILD, r, "gnn: cuModuleGetFunction('%s')", g_kernel_names[k]);
    /* capacity: what fits in a quarter of the free memory, at most max_graphs */
    size_t F = (size_t)s->F, H = (size_t)s->H, wide = F > H ? F : H;
    size_t per = sizeof(float) * ((size_t)n * F                                               /* feats */
                                  + (gnn ? (size_t)n * F + 2 * (size_t)n * H + ((size_t)s->nrows + (size_t)s->maxrows) * H : 0) /* X, Hs, U, M, G */
                                  + 2 * wide + 2 * H + 1);                                     /* R, Z, S */
    if (st == MT_OK) {
        size_t fr = 0, total = 0;
        if ((r = a->cuMemGetInfo(&fr, &total)) != CUDA_SUCCESS) st = mt__cu_fail_r(err, errlen, MT_DEVICE, r, "gnn: cuMemGetInfo");
        long cap = s->max_graphs > 0 ? s->max_graphs : DEFAULT_GRAPHS;
        long fit = (long)(fr / 4 / per);
        if (cap > fit) cap = fit;
        /* row numbers of one module (count * b) are ints on the cuBLAS side */
        while (cap > 1 && (long long)cap * n * (long long)wide > (1LL << 31) - 1) cap /= 2;
        if (st == MT_OK && cap < 1)
            st = mt__cu_fail(err, errlen, MT_NOMEM, "gnn: %zu bytes free on the device, not enough for one graph's %zu", fr / 4, per);
        g->cap = (int)cap;
    }
    size_t c = (size_t)g->cap;
#define ALLOC(ptr, floats, what) \
    if (st == MT_OK) st = dalloc(g, &g->ptr, sizeof(float) * (floats), what, err, errlen)
    if (st == MT_OK) st = dalloc(g, &g->ints, sizeof(int) * nints, "index arrays", err, errlen);
    ALLOC(feats, c * (size_t)n * F, "features");
    if (gnn) {
        ALLOC(X, c * (size_t)n * F, "normalised features");
        ALLOC(Hs, c * (size_t)n * H, "node states");
        ALLOC(U, c * (size_t)n * H, "updates");
        ALLOC(M, c * (size_t)(s->nrows > 0 ? s->nrows : 1) * H, "messages");
        ALLOC(G, c * (size_t)(s->maxrows > 0 ? s->maxrows : 1) * H, "gathered rows");
    }
    ALLOC(R, c * 2 * wide, "readout");
    ALLOC(Z, 2 * c * H, "head");
    ALLOC(S, c, "scores");
    ALLOC(W, s->nweights, "weights");
    ALLOC(mean, F, "feature means");
    ALLOC(istd, F, "feature scales");
#undef ALLOC
    if (st == MT_OK) {
        r = a->cuMemcpyHtoDAsync(g->ints, hi, sizeof(int) * nints, d->stream);
        CUresult r2 = a->cuStreamSynchronize(d->stream);
        if (r == CUDA_SUCCESS) r = r2;
        if (r != CUDA_SUCCESS) st = mt__cu_fail_r(err, errlen, MT_DEVICE, r, "gnn: cuMemcpyHtoDAsync (index arrays)");
    }
    cublasStatus_t cs;
    if (st == MT_OK && (cs = cb->cublasCreate_v2(&g->h)) != CUBLAS_STATUS_SUCCESS) {
        g->h = NULL;
        st = cb_fail(err, errlen, cs == CUBLAS_STATUS_ALLOC_FAILED ? MT_NOMEM : MT_DEVICE, cs, "gnn: cublasCreate_v2");
    }
    if (st == MT_OK && (cs = cb->cublasSetStream_v2(g->h, (cudaStream_t)d->stream)) != CUBLAS_STATUS_SUCCESS)
        st = cb_fail(err, errlen, MT_DEVICE, cs, "gnn: cublasSetStream_v2");
    /* strict fp32 (no TF32 tensor cores): the CPU's arithmetic */
    if (st == MT_OK && cb->cublasSetMathMode && (cs = cb->cublasSetMathMode(g->h, CUBLAS_DEFAULT_MATH)) != CUBLAS_STATUS_SUCCESS)
        st = cb_fail(err, errlen, MT_DEVICE, cs, "gnn: cublasSetMathMode(CUBLAS_DEFAULT_MATH)");
    if (st != MT_OK) release_device(g);
    pthread_mutex_unlock(&d->mu);
    mt__cu_pop(d);
    free(hi);
    if (st != MT_OK) {
        mt__gnn_cuda_free(g);
        return st;
    }
    *out = g;
    return MT_OK;
}

/* One host -> device copy on the stream, waited for (pageable memory). */
static mt_status upload(gnn_gpu *g, CUdeviceptr to, const void *from, size_t bytes, const char *what, char *err, size_t errlen) {
    const mt__cu_api *a = g->d->api;
    CUresult r = a->cuMemcpyHtoDAsync(to, from, bytes, g->d->stream);
    if (r == CUDA_SUCCESS) r = a->cuStreamSynchronize(g->d->stream);
    if (r != CUDA_SUCCESS) return mt__cu_fail_r(err, errlen, MT_DEVICE, r, "gnn: cuMemcpyHtoDAsync (%s, %zu bytes)", what, bytes);
    return MT_OK;
}

mt_status mt__gnn_cuda_set_weights(void *gp, const float *w, const float *mean, const float *istd, char *err, size_t errlen) {
    gnn_gpu *g = gp;
    if (err && errlen) err[0] = '\0';
    if (!g || !w || !mean || !istd) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn_set_weights: NULL argument");
    pthread_mutex_lock(&g->mu);
    mt_status st = mt__cu_push(g->d, err, errlen);
    if (st == MT_OK) {
        pthread_mutex_lock(&g->d->mu);
        size_t F = (size_t)g->desc.F;
        g->have_weights = 0;
        st = upload(g, g->W, w, sizeof(float) * g->desc.nweights, "weights", err, errlen);
        if (st == MT_OK) st = upload(g, g->mean, mean, sizeof(float) * F, "feature means", err, errlen);
        if (st == MT_OK) st = upload(g, g->istd, istd, sizeof(float) * F, "feature scales", err, errlen);
        g->have_weights = st == MT_OK;
        pthread_mutex_unlock(&g->d->mu);
        mt__cu_pop(g->d);
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

/* ---- the forward ---- */

static mt_status launch(gnn_gpu *g, int k, long long total, void **params, char *err, size_t errlen) {
    if (total <= 0) return MT_OK;
    long long blocks = (total + BLOCK - 1) / BLOCK;
    if (blocks > 65536) blocks = 65536; /* grid-stride loops do the rest */
    CUresult r = g->d->api->cuLaunchKernel(g->fn[k], (unsigned)blocks, 1, 1, BLOCK, 1, 1, 0, g->d->stream, params, NULL);
    if (r != CUDA_SUCCESS)
        return mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "gnn: cuLaunchKernel(%s, %lld blocks of %d)", g_kernel_names[k], blocks, BLOCK);
    return MT_OK;
}

static CUdeviceptr fo(CUdeviceptr base, size_t floats) { return base + (CUdeviceptr)(floats * sizeof(float)); }
static CUdeviceptr io(const gnn_gpu *g, size_t ints) { return g->ints + (CUdeviceptr)(ints * sizeof(int)); }

/* Row-major C[m,n] = beta C + A[m,k] B[k,n] (cuBLAS is column-major: C^T = B^T A^T). */
static mt_status mm(gnn_gpu *g, int m, int n, int k, CUdeviceptr A, CUdeviceptr B, float beta, CUdeviceptr C, const char *what, char *err,
                    size_t errlen) {
    if (m <= 0 || n <= 0 || k <= 0) return MT_OK;
    const float one = 1.0f;
    cublasStatus_t cs = g->cb->cublasSgemm_v2(g->h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float *)(uintptr_t)B, n,
                                               (const float *)(uintptr_t)A, k, &beta, (float *)(uintptr_t)C, n);
    if (cs != CUBLAS_STATUS_SUCCESS) return cb_fail(err, errlen, MT_LAUNCH, cs, "gnn: cublasSgemm_v2 (%s: %dx%dx%d)", what, m, n, k);
    return MT_OK;
}

#define TRY(x)                        \
    do {                              \
        mt_status st_ = (x);          \
        if (st_ != MT_OK) return st_; \
    } while (0)

/* The forward of b graphs whose features are in g->feats; scores in g->S. */
static mt_status forward(gnn_gpu *g, int b, char *err, size_t errlen) {
    const mt_cuda_gnn_desc *s = &g->desc;
    int n = s->n, F = s->F, H = s->H;
    long long bH = (long long)b * H, NH = (long long)n * bH;
    float scale = 1.0f / (float)n;
    CUdeviceptr pos = io(g, g->o_pos), placemod = io(g, g->o_placemod);
    if (s->arch == 2) {
        void *p[] = {&g->feats, &g->mean, &g->istd, &n, &b, &F, &scale, &g->R};
        TRY(launch(g, K_READOUT_FEATS, (long long)b * F, p, err, errlen));
    } else {
        {
            void *p[] = {&g->feats, &g->mean, &g->istd, &pos, &g->X, &b, &n, &F};
            TRY(launch(g, K_INPUT, (long long)b * n * F, p, err, errlen));
        }
        for (int t = 0; t < s->nt; t++) {
            int r0 = g->node_off[t] * b, r = (g->node_off[t + 1] - g->node_off[t]) * b;
            TRY(mm(g, r, H, F, fo(g->X, (size_t)r0 * F), fo(g->W, s->in_w + (size_t)t * F * H), 0.0f, fo(g->Hs, (size_t)r0 * H), "embedding",
                   err, errlen));
        }
        {
            CUdeviceptr bias = fo(g->W, s->in_b);
            void *p[] = {&g->Hs, &bias, &placemod, &bH, &H, &NH};
            TRY(launch(g, K_BIAS_LRELU_MOD, NH, p, err, errlen));
        }
        for (int l = 0; l < s->L; l++) {
            for (int t = 0; t < s->nt; t++) {
                int r0 = g->node_off[t] * b, r = (g->node_off[t + 1] - g->node_off[t]) * b;
                TRY(mm(g, r, H, H, fo(g->Hs, (size_t)r0 * H), fo(g->W, s->upd_w[l] + (size_t)t * H * H), 0.0f, fo(g->U, (size_t)r0 * H),
                       "node update", err, errlen));
            }
            for (int t = 0; t < s->et; t++) {
                int a = g->mrow_off[t], rows = g->mrow_off[t + 1] - a;
                if (rows == 0) continue;
                const int *rp = g->mrow_pos + a;
                CUdeviceptr Wt = fo(g->W, s->msg_w[l] + (size_t)t * H * H), Ma = fo(g->M, (size_t)a * (size_t)bH);
                long long tot = (long long)rows * bH;
                if (g->mside[t] == 0) {
                    CUdeviceptr in = fo(g->Hs, (size_t)rp[0] * (size_t)bH);
                    if (!g->mrun[t]) {
                        CUdeviceptr rpd = io(g, g->o_mrow_pos + (size_t)a);
                        void *p[] = {&g->Hs, &rpd, &g->G, &bH, &tot};
                        TRY(launch(g, K_GATHER, tot, p, err, errlen));
                        in = g->G;
                    }
                    TRY(mm(g, rows * b, H, H, in, Wt, 0.0f, Ma, "messages per source", err, errlen));
                } else {
                    CUdeviceptr off = io(g, g->o_madj_off + (size_t)a), adj = io(g, g->o_madj_pos);
                    void *p[] = {&g->Hs, &off, &adj, &g->G, &bH, &tot};
                    TRY(launch(g, K_SUM_ROWS, tot, p, err, errlen));
                    if (g->mrun[t])
                        TRY(mm(g, rows * b, H, H, g->G, Wt, 1.0f, fo(g->U, (size_t)rp[0] * (size_t)bH), "messages per destination", err, errlen));
                    else
                        TRY(mm(g, rows * b, H, H, g->G, Wt, 0.0f, Ma, "messages per destination", err, errlen));
                }
            }
            CUdeviceptr bias = fo(g->W, s->upd_b[l]), in_off = io(g, g->o_in_off), in_row = io(g, g->o_in_row);
            void *p[] = {&g->Hs, &g->Hs, &g->U, &bias, &placemod, &in_off, &in_row, &g->M, &bH, &H, &NH};
            TRY(launch(g, K_UPDATE, NH, p, err, errlen));
        }
        void *p[] = {&g->Hs, &pos, &n, &b, &H, &scale, &g->R};
        TRY(launch(g, K_READOUT, (long long)b * H, p, err, errlen));
    }
    /* the head */
    int layers = s->arch == 2 ? s->L : 1, in_dim = 2 * (s->arch == 2 ? F : H);
    CUdeviceptr in = g->R;
    for (int l = 0; l < layers; l++) {
        CUdeviceptr z = fo(g->Z, (size_t)(l % 2) * (size_t)g->cap * H);
        size_t w = s->arch == 2 ? s->mlp_w[l] : s->head_w1, bo = s->arch == 2 ? s->mlp_b[l] : s->head_b1;
        TRY(mm(g, b, H, in_dim, in, fo(g->W, w), 0.0f, z, "head", err, errlen));
        CUdeviceptr bias = fo(g->W, bo);
        long long tot = (long long)b * H;
        void *p[] = {&z, &bias, &H, &tot};
        TRY(launch(g, K_BIAS_LRELU, tot, p, err, errlen));
        in = z, in_dim = H;
    }
    CUdeviceptr wo = fo(g->W, s->out_w), bo = fo(g->W, s->out_b);
    void *p[] = {&in, &wo, &bo, &H, &b, &g->S};
    return launch(g, K_HEAD_OUT, b, p, err, errlen);
}

mt_status mt__gnn_cuda_score(void *gp, int B, const float *feats, float *scores, char *err, size_t errlen) {
    gnn_gpu *g = gp;
    if (err && errlen) err[0] = '\0';
    if (!g || B < 0 || (B > 0 && (!feats || !scores))) return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn_score: bad arguments");
    if (B == 0) return MT_OK;
    pthread_mutex_lock(&g->mu);
    if (!g->have_weights) {
        pthread_mutex_unlock(&g->mu);
        return mt__cu_fail(err, errlen, MT_INVALID_ARG, "gnn_score: no weights uploaded (gnn_set_weights)");
    }
    mt_status st = mt__cu_push(g->d, err, errlen);
    if (st != MT_OK) {
        pthread_mutex_unlock(&g->mu);
        return st;
    }
    const mt__cu_api *a = g->d->api;
    pthread_mutex_lock(&g->d->mu);
    size_t per = (size_t)g->desc.n * (size_t)g->desc.F;
    for (int lo = 0; lo < B && st == MT_OK; lo += g->cap) {
        int b = B - lo < g->cap ? B - lo : g->cap;
        CUresult r = a->cuMemcpyHtoDAsync(g->feats, feats + (size_t)lo * per, sizeof(float) * per * (size_t)b, g->d->stream);
        if (r != CUDA_SUCCESS) {
            st = mt__cu_fail_r(err, errlen, MT_DEVICE, r, "gnn: cuMemcpyHtoDAsync (features of %d graphs)", b);
            break;
        }
        if ((st = forward(g, b, err, errlen)) != MT_OK) break;
        if ((r = a->cuMemcpyDtoHAsync(scores + lo, g->S, sizeof(float) * (size_t)b, g->d->stream)) != CUDA_SUCCESS) {
            st = mt__cu_fail_r(err, errlen, MT_DEVICE, r, "gnn: cuMemcpyDtoHAsync (scores of %d graphs)", b);
            break;
        }
        /* a fault in any kernel of the pass surfaces here */
        if ((r = a->cuStreamSynchronize(g->d->stream)) != CUDA_SUCCESS)
            st = mt__cu_fail_r(err, errlen, MT_LAUNCH, r, "gnn: forward of %d graphs (cuStreamSynchronize)", b);
    }
    if (st != MT_OK) (void)a->cuStreamSynchronize(g->d->stream);
    pthread_mutex_unlock(&g->d->mu);
    mt__cu_pop(g->d);
    pthread_mutex_unlock(&g->mu);
    return st;
}
