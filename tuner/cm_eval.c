/* Ranking quality of a cost model on measured samples (mt_cm_evaluate in
 * tuner/dataset.h). */
#include <math.h>
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

typedef struct ranked {
    double v;
    int i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
    return x < y ? -1 : x > y;
}

/* Average ranks (ties share the mean rank) of v[0..n) into rank. */
static void ranks(const double *v, int n, ranked *tmp, double *rank) {
    for (int i = 0; i < n; i++) tmp[i] = (ranked){v[i], i};
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_ranked);
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && tmp[j + 1].v == tmp[i].v) j++;
        for (int k = i; k <= j; k++) rank[tmp[k].i] = 0.5 * (i + j);
        i = j + 1;
    }
}

static double spearman(const double *a, const double *b, int n, ranked *tmp, double *ra, double *rb) {
    ranks(a, n, tmp, ra);
    ranks(b, n, tmp, rb);
    double ma = 0, mb = 0;
    for (int i = 0; i < n; i++) ma += ra[i], mb += rb[i];
    ma /= n;
    mb /= n;
    double sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

/* Best measured time among the k highest-scored samples of the group
 * (0 when all of them failed). */
static double best_in_topk(const mt_cm_sample *g, const double *score, int n, int k, ranked *tmp) {
    for (int i = 0; i < n; i++) tmp[i] = (ranked){-score[i], i};
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_ranked); /* stable enough: ties keep no particular order */
    double best = 0;
    for (int j = 0; j < k && j < n; j++) {
        const mt_cm_sample *s = &g[tmp[j].i];
        if (!s->failed && (best == 0 || s->cost_ms < best)) best = s->cost_ms;
    }
    return best;
}

static int same_group(const mt_cm_sample *a, const mt_cm_sample *b) {
    return a->wl == b->wl && a->tmpl == b->tmpl && a->space == b->space && a->dev == b->dev;
}

mt_status mt_cm_evaluate(mt_costmodel *model, const mt_cm_sample *samples, int n, mt_cm_eval *out, char *err, size_t errlen) {
    if (!model || !samples || !out || n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "evaluate: no samples");
    memset(out, 0, sizeof *out);
    int *done = calloc((size_t)n, sizeof *done);
    mt_cm_sample *g = malloc(sizeof *g * (size_t)n);
    mt_config *cfg = malloc(sizeof *cfg * (size_t)n);
    double *score = malloc(sizeof *score * (size_t)n), *a = malloc(sizeof *a * (size_t)n), *b = malloc(sizeof *b * (size_t)n);
    double *ra = malloc(sizeof *ra * (size_t)n), *rb = malloc(sizeof *rb * (size_t)n);
    ranked *tmp = malloc(sizeof *tmp * (size_t)n);
    mt_status st = MT_OK;
    if (!done || !g || !cfg || !score || !a || !b || !ra || !rb || !tmp) {
        st = mt__fail(err, errlen, MT_NOMEM, "evaluate: out of memory");
        goto out;
    }
    double correct = 0, rho_sum = 0, w_sum = 0, top1 = 0, top5 = 0;
    int64_t pairs = 0;
    int rho_groups = 0;
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_group(&samples[i], &samples[j])) {
                done[j] = 1;
                g[m] = samples[j];
                cfg[m++] = samples[j].cfg;
            }
        mt_cm_query q = {g[0].wl, g[0].tmpl, g[0].space, g[0].dev};
        char why[512] = "";
        double t0 = now_s();
        st = mt_costmodel_predict(model, &q, cfg, m, score, why, sizeof why);
        out->predict_s += now_s() - t0;
        if (st != MT_OK) {
            mt__fail(err, errlen, st, "evaluate: %s", why);
            goto out;
        }
        out->groups++;
        out->samples += m;
        /* Pairs: a failed config is slower than any working one. */
        for (int x = 0; x < m; x++)
            for (int y = x + 1; y < m; y++) {
                if (g[x].failed && g[y].failed) continue;
                int x_faster;
                if (g[x].failed != g[y].failed) x_faster = g[y].failed;
                else if (g[x].cost_ms == g[y].cost_ms) continue;
                else x_faster = g[x].cost_ms < g[y].cost_ms;
                pairs++;
                if (score[x] == score[y]) correct += 0.5;
                else if ((score[x] > score[y]) == x_faster) correct += 1;
            }
        int k = 0;
        double best = 0;
        for (int x = 0; x < m; x++)
            if (!g[x].failed) {
                a[k] = score[x];
                b[k++] = -g[x].cost_ms;
                if (best == 0 || g[x].cost_ms < best) best = g[x].cost_ms;
            }
        if (k >= 3) {
            rho_sum += spearman(a, b, k, tmp, ra, rb);
            rho_groups++;
        }
        if (best > 0) {
            double w = mt_workload_flops(g[0].wl);
            double b1 = best_in_topk(g, score, m, 1, tmp), b5 = best_in_topk(g, score, m, 5, tmp);
            top1 += w * (b1 > 0 ? best / b1 : 0);
            top5 += w * (b5 > 0 ? best / b5 : 0);
            w_sum += w;
        }
    }
    out->pairs = pairs;
    out->pairwise_acc = pairs ? correct / (double)pairs : 0;
    out->spearman = rho_groups ? rho_sum / rho_groups : 0;
    out->top1 = w_sum > 0 ? top1 / w_sum : 0;
    out->top5 = w_sum > 0 ? top5 / w_sum : 0;
out:
    free(done);
    free(g);
    free(cfg);
    free(score);
    free(a);
    free(b);
    free(ra);
    free(rb);
    free(tmp);
    return st;
}
