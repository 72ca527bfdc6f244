/* Few-shot evaluation of a cost-model kind (mt_cm_evaluate_fewshot in
 * tuner/dataset.h): per group, a fresh model fitted on k of its measured
 * configs, scored on the rest. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dataset.h"
#include "fail.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int same_group(const mt_cm_sample *a, const mt_cm_sample *b) {
    return a->wl == b->wl && a->tmpl == b->tmpl && a->space == b->space && a->dev == b->dev;
}

mt_cm_fewshot_params mt_cm_fewshot_default_params(void) { return (mt_cm_fewshot_params){.k = 8, .repeats = 3, .seed = 1}; }

mt_status mt_cm_evaluate_fewshot(const char *kind, const mt_costmodel_params *cp, const mt_cm_sample *samples, int n,
                                 const mt_cm_fewshot_params *fp, mt_cm_fewshot *out, char *err, size_t errlen) {
    if (!kind || !samples || !out || !fp || n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "few-shot: no samples");
    memset(out, 0, sizeof *out);
    if (fp->k < 0 || fp->repeats < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "few-shot: k %d and repeats %d (need k >= 0, repeats >= 1)", fp->k, fp->repeats);
    mt_costmodel_params base = cp ? *cp : mt_costmodel_default_params();
    int *done = calloc((size_t)n, sizeof *done), *idx = malloc(sizeof(int) * (size_t)n);
    mt_cm_sample *g = malloc(sizeof *g * (size_t)n), *shot = malloc(sizeof *shot * (size_t)n), *rest = malloc(sizeof *rest * (size_t)n);
    mt_status st = MT_OK;
    if (!done || !idx || !g || !shot || !rest) {
        st = mt__fail(err, errlen, MT_NOMEM, "few-shot: out of memory");
        goto out;
    }
    double acc = 0, rho = 0, t1 = 0, t5 = 0;
    int nrho = 0, ntop = 0;
    for (int i = 0, gi = 0; i < n; i++) {
        if (done[i]) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_group(&samples[i], &samples[j])) done[j] = 1, g[m++] = samples[j];
        /* k to fit on, and at least two left to rank */
        if (m < fp->k + 2) continue;
        out->groups++;
        for (int r = 0; r < fp->repeats; r++) {
            /* the k drawn by a partial shuffle, seeded per group and repeat */
            uint64_t rng = fp->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(gi + 1)) ^ (0xBF58476D1CE4E5B9ull * (uint64_t)(r + 1));
            for (int x = 0; x < m; x++) idx[x] = x;
            for (int x = 0; x < fp->k; x++) {
                int y = x + (int)(mt_rng_next(&rng) % (uint64_t)(m - x)), t = idx[x];
                idx[x] = idx[y], idx[y] = t;
            }
            for (int x = 0; x < fp->k; x++) shot[x] = g[idx[x]];
            int nr = 0, working = 0;
            for (int x = fp->k; x < m; x++) {
                rest[nr] = g[idx[x]];
                working += !rest[nr].failed;
                nr++;
            }
            mt_costmodel_params p = base;
            p.seed = base.seed + (uint64_t)r;
            mt_costmodel *model = NULL;
            if ((st = mt_costmodel_create(kind, &p, &model, err, errlen)) != MT_OK) goto out;
            char why[512] = "";
            double t0 = now_s();
            if (fp->k > 0 && (st = mt_costmodel_fit(model, shot, fp->k, why, sizeof why)) != MT_OK) {
                mt__fail(err, errlen, st, "few-shot: %s", why);
                mt_costmodel_free(model);
                goto out;
            }
            out->adapt_s += now_s() - t0;
            mt_cm_eval ev;
            st = mt_cm_evaluate(model, rest, nr, &ev, err, errlen);
            mt_costmodel_free(model);
            if (st != MT_OK) goto out;
            out->predict_s += ev.predict_s;
            out->runs++;
            acc += ev.pairwise_acc;
            if (working >= 3) rho += ev.spearman, nrho++;
            if (working >= 1) t1 += ev.top1, t5 += ev.top5, ntop++;
        }
        gi++;
    }
    if (out->runs == 0) {
        st = mt__fail(err, errlen, MT_NOT_FOUND, "few-shot: no group has more than %d samples", fp->k + 1);
        goto out;
    }
    out->pairwise_acc = acc / out->runs;
    out->spearman = nrho ? rho / nrho : 0;
    out->top1 = ntop ? t1 / ntop : 0;
    out->top5 = ntop ? t5 / ntop : 0;
out:
    free(done);
    free(idx);
    free(g);
    free(shot);
    free(rest);
    return st;
}
