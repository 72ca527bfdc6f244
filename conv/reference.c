/* CPU reference convolution: see conv/reference.h.
 *
 * Work is split into items of (image n, up to KB output channels of one
 * group). An item computes its output planes row by row: for each output row
 * it keeps KB rows of double accumulators and, for every (c, r, s) in that
 * order, adds weight * input-row to them. The innermost loop runs along the
 * output row (contiguous input for stride 1), shares each input load among KB
 * output channels, and vectorises; every output element still receives its
 * terms in (c, r, s) order, so the sum does not depend on blocking or threads. */
#include "reference.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"

#define KB 4            /* output channels per item */
#define MAX_THREADS 256

typedef struct conv_job {
    const float *in, *wt;
    float *out;
    int64_t N, C, H, W, K, R, S, P, Q;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups, cpg, kpg, kblocks; /* kblocks: items per (n, group) */
    int64_t items;
    atomic_llong next;
} conv_job;

typedef struct conv_worker {
    conv_job *job;
    double *acc; /* KB * Q doubles */
} conv_worker;

/* GCC's -O2 does not vectorise loops with a run-time trip count; the rows
 * below are where all the time goes, so ask for -O3 here. */
#if defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

HOT static void row_kernel(double *restrict acc, int64_t Q, int nk, const double *wv, const float *restrict x, int64_t sw,
                           int64_t cnt) {
    if (nk == KB) {
        double *restrict a0 = acc, *restrict a1 = acc + Q, *restrict a2 = acc + 2 * Q, *restrict a3 = acc + 3 * Q;
        const double w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3];
        if (sw == 1) {
            for (int64_t q = 0; q < cnt; q++) {
                const double xv = x[q];
                a0[q] += w0 * xv;
                a1[q] += w1 * xv;
                a2[q] += w2 * xv;
                a3[q] += w3 * xv;
            }
        } else {
            for (int64_t q = 0; q < cnt; q++) {
                const double xv = x[q * sw];
                a0[q] += w0 * xv;
                a1[q] += w1 * xv;
                a2[q] += w2 * xv;
                a3[q] += w3 * xv;
            }
        }
        return;
    }
    for (int j = 0; j < nk; j++) {
        double *restrict a = acc + j * Q;
        const double w = wv[j];
        if (sw == 1)
            for (int64_t q = 0; q < cnt; q++) a[q] += w * (double)x[q];
        else
            for (int64_t q = 0; q < cnt; q++) a[q] += w * (double)x[q * sw];
    }
}

static void conv_item(const conv_job *jb, int64_t item, double *acc) {
    const int64_t per_n = jb->groups * jb->kblocks;
    const int64_t n = item / per_n;
    const int64_t g = (item % per_n) / jb->kblocks;
    const int64_t kb = item % jb->kblocks;
    const int64_t k0 = g * jb->kpg + kb * KB;
    const int nk = (int)(jb->kpg - kb * KB < KB ? jb->kpg - kb * KB : KB);
    const int64_t Q = jb->Q, RS = jb->R * jb->S;

    for (int64_t p = 0; p < jb->P; p++) {
        memset(acc, 0, sizeof(double) * (size_t)(nk * Q));
        for (int64_t ci = 0; ci < jb->cpg; ci++) {
            const int64_t c = g * jb->cpg + ci;
            for (int64_t r = 0; r < jb->R; r++) {
                const int64_t ih = p * jb->sh - jb->ph + r * jb->dh;
                if (ih < 0 || ih >= jb->H) continue;
                const float *inrow = jb->in + ((n * jb->C + c) * jb->H + ih) * jb->W;
                for (int64_t s = 0; s < jb->S; s++) {
                    /* Output columns q with 0 <= q*sw + iw0 < W. */
                    const int64_t iw0 = s * jb->dw - jb->pw;
                    int64_t qlo = iw0 < 0 ? (-iw0 + jb->sw - 1) / jb->sw : 0;
                    int64_t qhi = jb->W - 1 - iw0 < 0 ? 0 : (jb->W - 1 - iw0) / jb->sw + 1;
                    if (qhi > Q) qhi = Q;
                    if (qlo >= qhi) continue;
                    double wv[KB];
                    for (int j = 0; j < nk; j++) wv[j] = jb->wt[((k0 + j) * jb->cpg + ci) * RS + r * jb->S + s];
                    row_kernel(acc + qlo, Q, nk, wv, inrow + qlo * jb->sw + iw0, jb->sw, qhi - qlo);
                }
            }
        }
        for (int j = 0; j < nk; j++) {
            float *orow = jb->out + ((n * jb->K + k0 + j) * jb->P + p) * Q;
            const double *a = acc + j * Q;
            for (int64_t q = 0; q < Q; q++) orow[q] = (float)a[q];
        }
    }
}

static void *conv_worker_main(void *arg) {
    conv_worker *w = arg;
    conv_job *jb = w->job;
    for (;;) {
        int64_t item = atomic_fetch_add(&jb->next, 1);
        if (item >= jb->items) break;
        conv_item(jb, item, w->acc);
    }
    return NULL;
}

mt_status mt_conv_reference_mt(const mt_workload *wl, const float *input, const float *weights, float *output, int threads) {
    if (!wl || !input || !weights || !output) return MT_INVALID_ARG;
    mt_status st = mt_workload_validate(wl, NULL, 0);
    if (st != MT_OK) return st;

    conv_job jb;
    memset(&jb, 0, sizeof jb);
    jb.in = input;
    jb.wt = weights;
    jb.out = output;
    jb.N = wl->n, jb.C = wl->c, jb.H = wl->h, jb.W = wl->w;
    jb.K = wl->k, jb.R = wl->r, jb.S = wl->s;
    jb.P = mt_workload_out_h(wl), jb.Q = mt_workload_out_w(wl);
    jb.sh = wl->stride_h, jb.sw = wl->stride_w, jb.ph = wl->pad_h, jb.pw = wl->pad_w, jb.dh = wl->dil_h, jb.dw = wl->dil_w;
    jb.groups = wl->groups;
    jb.cpg = wl->c / wl->groups;
    jb.kpg = wl->k / wl->groups;
    jb.kblocks = (jb.kpg + KB - 1) / KB;
    jb.items = jb.N * jb.groups * jb.kblocks;
    atomic_init(&jb.next, 0);

    int64_t nt = threads < 1 ? 1 : threads;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt > jb.items) nt = jb.items;

    /* All scratch is allocated up front so that no failure can leave the
     * output half written. */
    conv_worker *workers = calloc((size_t)nt, sizeof *workers);
    pthread_t *tids = calloc((size_t)nt, sizeof *tids);
    unsigned char *started = calloc((size_t)nt, 1);
    double *acc = malloc(sizeof(double) * (size_t)(nt * KB * jb.Q));
    if (!workers || !tids || !started || !acc) {
        free(workers);
        free(tids);
        free(started);
        free(acc);
        return MT_NOMEM;
    }
    for (int64_t t = 0; t < nt; t++) {
        workers[t].job = &jb;
        workers[t].acc = acc + t * KB * jb.Q;
    }
    /* Worker 0 is the calling thread; a thread that fails to start just
     * leaves its share of items to the others. */
    for (int64_t t = 1; t < nt; t++) started[t] = pthread_create(&tids[t], NULL, conv_worker_main, &workers[t]) == 0;
    conv_worker_main(&workers[0]);
    for (int64_t t = 1; t < nt; t++)
        if (started[t]) pthread_join(tids[t], NULL);
    free(started);
    free(workers);
    free(tids);
    free(acc);
    return MT_OK;
}

mt_status mt_conv_reference(const mt_workload *wl, const float *input, const float *weights, float *output) {
    return mt_conv_reference_mt(wl, input, weights, output, 1);
}

mt_status mt_compare(const float *out, const float *ref, int64_t n, double *max_rel_err, int64_t *first_bad) {
    if (max_rel_err) *max_rel_err = 0.0;
    if (first_bad) *first_bad = -1;
    if (!out || !ref || n < 0) return MT_INVALID_ARG;
    double scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i])) {
            if (first_bad) *first_bad = i;
            return MT_INVALID_ARG;
        }
        double a = fabs((double)ref[i]);
        if (a > scale) scale = a;
    }
    if (scale < 1e-6) scale = 1e-6;
    double worst = 0.0;
    int64_t worst_i = -1;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(out[i])) {
            if (max_rel_err) *max_rel_err = INFINITY;
            if (first_bad) *first_bad = i;
            return MT_WRONG_RESULT;
        }
        double d = fabs((double)out[i] - (double)ref[i]);
        if (d > worst) worst = d, worst_i = i;
    }
    if (max_rel_err) *max_rel_err = worst / scale;
    if (first_bad) *first_bad = worst_i;
    return MT_OK;
}

void mt_fill_random(float *buf, int64_t n, uint64_t seed) {
    if (!buf) return;
    uint64_t state = seed;
    for (int64_t i = 0; i < n; i++) {
        /* 24 random bits k: (k - 2^23) / 2^23 is exact in a float. */
        int32_t k = (int32_t)(mt_rng_next(&state) >> 40);
        buf[i] = (float)(k - (1 << 23)) * (1.0f / 8388608.0f);
    }
}
