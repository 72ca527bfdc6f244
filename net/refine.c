/* In-network choice among each convolution's candidate configs (net/refine.h). */
#include "refine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mtgpu/executor.h"
#include "mtgpu/weights.h"
#include "fail.h"

/* Profiled passes of one set in a row (after one unprofiled pass): with
 * the default four sets a round is 16 passes, short against the machine's
 * slow spells. */
#define MT__REFINE_BLOCK 3

mt_refine_params mt_refine_default_params(void) {
    return (mt_refine_params){.candidates = 3, .defaults = 1, .passes = 15, .min_gain = 0.03, .store = 1, .seed = 1};
}

void mt_refine_result_free(mt_refine_result *r) {
    if (!r) return;
    free(r->choices);
    memset(r, 0, sizeof *r);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void mt_refine_paired_ratios(const double *t, int nsets, int rounds, double *ratio) {
    double r[1000];
    for (int s = 0; s < nsets; s++) {
        int n = 0;
        for (int b = 0; b < rounds && n < (int)(sizeof r / sizeof r[0]); b++)
            if (t[b] > 0 && t[s * rounds + b] > 0) r[n++] = t[s * rounds + b] / t[b];
        ratio[s] = n ? median_of(r, n) : 1.0;
    }
}

mt_refine_outcome mt_refine_verdict(double kept_vs_default, double fastest_vs_default) {
    if (kept_vs_default <= fastest_vs_default && kept_vs_default <= 1.0) return MT_REFINE_KEPT;
    return fastest_vs_default <= 1.0 ? MT_REFINE_FELL_BACK_FASTEST : MT_REFINE_FELL_BACK_DEFAULTS;
}

/* The whole-pass check (refine.h): ex[0] the fastest records, ex[def] the
 * defaults, and the kept configs pinned in an executor of their own (or
 * ex[0] again when every workload kept its fastest record). Sets
 * r->outcome and the check's figures, and each choice's `chosen` to match. */
static mt_status check_whole(mt_device *dev, const mt_network *net, const mt_weights *w, uint64_t seed, mt_executor *const *ex,
                             int def, mt_refine_result *r, char *err, size_t errlen) {
    mt_conv_pin *pins = calloc((size_t)(r->nchoices > 0 ? r->nchoices : 1), sizeof *pins);
    if (!pins) return mt__fail(err, errlen, MT_NOMEM, "refine: out of memory");
    int mixed = 0;
    for (int c = 0; c < r->nchoices; c++) {
        const mt_refine_choice *ch = &r->choices[c];
        pins[c] = (mt_conv_pin){.wl = ch->wl, .template_name = ch->template_name[ch->chosen], .config = ch->config[ch->chosen]};
        mixed |= ch->chosen != 0;
    }
    mt_executor *kept = NULL;
    mt_status st = MT_OK;
    if (mixed) {
        mt_executor_params ep = mt_executor_default_params();
        ep.weights = w;
        ep.seed = seed;
        ep.fuse = 1;
        ep.pins = pins; /* every workload: no database needed */
        ep.npins = r->nchoices;
        char berr[2048];
        if ((st = mt_executor_build(dev, net, &ep, &kept, berr, sizeof berr)) != MT_OK)
            mt__fail(err, errlen, st, "refine: building %s with the kept configs: %s", mt_network_name(net), berr);
    }
    free(pins);
    if (st != MT_OK) return st;
    /* The sides: the defaults first (the reference of the paired ratios),
     * the kept configs, the fastest records where they differ. */
    mt_executor *side[3] = {ex[def], mixed ? kept : ex[0], ex[0]};
    const int nside = mixed ? 3 : 2, rounds = MT_REFINE_CHECK_ROUNDS;
    double t[3 * MT_REFINE_CHECK_ROUNDS], all[3][MT_REFINE_CHECK_ROUNDS * MT__REFINE_BLOCK], blk[MT__REFINE_BLOCK];
    for (int b = 0; b < rounds && st == MT_OK; b++) {
        for (int j = 0; j < nside && st == MT_OK; j++) {
            const int s = (b + j) % nside;
            if ((st = mt_executor_run(side[s], NULL, err, errlen)) != MT_OK) break;
            for (int pass = 0; pass < MT__REFINE_BLOCK; pass++) {
                double t0 = now_s();
                if ((st = mt_executor_run(side[s], NULL, err, errlen)) != MT_OK) break;
                blk[pass] = all[s][b * MT__REFINE_BLOCK + pass] = (now_s() - t0) * 1e3;
            }
            if (st == MT_OK) t[s * rounds + b] = median_of(blk, MT__REFINE_BLOCK);
        }
    }
    mt_executor_free(kept);
    if (st != MT_OK) return st;
    double ratio[3];
    mt_refine_paired_ratios(t, nside, rounds, ratio);
    const int nall = rounds * MT__REFINE_BLOCK;
    r->kept_vs_default = ratio[1];
    r->fastest_vs_default = ratio[nside - 1];
    r->check_rounds = rounds;
    r->default_pass_ms = median_of(all[0], nall);
    r->kept_pass_ms = median_of(all[1], nall);
    r->fastest_pass_ms = median_of(all[nside - 1], nall);
    r->outcome = mt_refine_verdict(r->kept_vs_default, r->fastest_vs_default);
    for (int c = 0; c < r->nchoices; c++) {
        mt_refine_choice *ch = &r->choices[c];
        if (r->outcome == MT_REFINE_FELL_BACK_FASTEST) ch->chosen = 0;
        if (r->outcome == MT_REFINE_FELL_BACK_DEFAULTS) ch->chosen = ch->same_as[def];
    }
    return MT_OK;
}

/* Per conv layer, the index of its workload in r->choices (-1 for other
 * layers); fills r->choices' workloads and layer counts. */
static mt_status group_workloads(const mt_network *net, mt_refine_result *r, int *widx, char *err, size_t errlen) {
    int nl = mt_network_num_layers(net);
    r->choices = calloc((size_t)(nl > 0 ? nl : 1), sizeof *r->choices);
    if (!r->choices) return mt__fail(err, errlen, MT_NOMEM, "refine: out of memory");
    for (int i = 0; i < nl; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        widx[i] = -1;
        if (l->kind != MT_LAYER_CONV2D) continue;
        const mt_workload wl = mt_layer_kernel_workload(l); /* what the executor looks up */
        int w = 0;
        while (w < r->nchoices && !mt_workload_equal(&r->choices[w].wl, &wl)) w++;
        if (w == r->nchoices) r->choices[r->nchoices++].wl = wl;
        r->choices[w].layers++;
        widx[i] = w;
    }
    return MT_OK;
}

/* Which config each set gave each workload, and which sets repeat an earlier one. */
static mt_status note_configs(mt_executor *const *ex, const mt_network *net, const int *widx, mt_refine_result *r, char *err, size_t errlen) {
    int nl = mt_network_num_layers(net);
    for (int s = 0; s < r->nsets; s++) {
        for (int i = 0; i < nl; i++) {
            if (widx[i] < 0) continue;
            mt_refine_choice *c = &r->choices[widx[i]];
            const char *tn = NULL, *cfg = NULL;
            if (mt_executor_conv_choice(ex[s], i, &tn, &cfg, NULL) != MT_OK)
                return mt__fail(err, errlen, MT_INVALID_ARG, "refine: layer '%s' has no config", mt_network_layer(net, i)->name);
            snprintf(c->template_name[s], sizeof c->template_name[s], "%s", tn);
            snprintf(c->config[s], sizeof c->config[s], "%s", cfg);
        }
    }
    for (int w = 0; w < r->nchoices; w++) {
        mt_refine_choice *c = &r->choices[w];
        for (int s = 0; s < r->nsets; s++) {
            c->same_as[s] = s;
            for (int e = 0; e < s; e++)
                if (strcmp(c->template_name[e], c->template_name[s]) == 0 && strcmp(c->config[e], c->config[s]) == 0) {
                    c->same_as[s] = e;
                    break;
                }
        }
    }
    return MT_OK;
}

/* Writes the winners other than set 0 as preferences, and removes the
 * preference of workloads set 0 won (an older refinement's, now beaten). */
static mt_status store_choices(mt_db *db, const mt_network *net, const char *fp, mt_refine_result *r, char *err, size_t errlen) {
    mt_preference *p = calloc(1, sizeof *p);
    if (!p) return mt__fail(err, errlen, MT_NOMEM, "refine: out of memory");
    mt_status st = MT_OK;
    char why[512] = "";
    for (int w = 0; w < r->nchoices && st == MT_OK; w++) {
        const mt_refine_choice *c = &r->choices[w];
        if (c->chosen == 0) {
            int deleted = 0;
            st = mt_db_delete_preference(db, &c->wl, fp, &deleted, why, sizeof why);
            r->removed += deleted;
            continue;
        }
        memset(p, 0, sizeof *p);
        p->wl = c->wl;
        snprintf(p->device, sizeof p->device, "%s", fp);
        snprintf(p->template_name, sizeof p->template_name, "%s", c->template_name[c->chosen]);
        snprintf(p->config, sizeof p->config, "%s", c->config[c->chosen]);
        p->in_network_ms = c->ms[c->chosen];
        p->fastest_ms = c->ms[0];
        snprintf(p->network, sizeof p->network, "%s", mt_network_name(net));
        if ((st = mt_db_put_preference(db, p, why, sizeof why)) == MT_OK) r->stored++;
    }
    if (st != MT_OK) mt__fail(err, errlen, st, "refine: storing the choices: %s", why);
    free(p);
    return st;
}

mt_status mt_network_refine(mt_device *dev, const mt_network *net, mt_db *db, const mt_refine_params *params, mt_refine_result *out,
                            char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (!dev || !net || !db || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "refine: NULL argument");
    mt_refine_params p = params ? *params : mt_refine_default_params();
    if (p.candidates < 1 || p.candidates > MT_REFINE_MAX_SETS - 1 || p.passes < 1 || p.passes > 1000 || !(p.min_gain >= 0 && p.min_gain < 1))
        return mt__fail(err, errlen, MT_RANGE, "refine: candidates %d (1..%d), passes %d (1..1000) or min_gain %g ([0, 1)) out of range",
                        p.candidates, MT_REFINE_MAX_SETS - 1, p.passes, p.min_gain);
    mt_status st = mt_network_status(net, err, errlen);
    if (st != MT_OK) return st;
    double t0 = now_s();
    int nl = mt_network_num_layers(net);
    mt_refine_result r;
    memset(&r, 0, sizeof r);
    r.passes = p.passes;
    r.nsets = p.candidates + (p.defaults != 0);
    for (int s = 0; s < r.nsets; s++) r.set_rank[s] = s < p.candidates ? s + 1 : 0;

    mt_executor *ex[MT_REFINE_MAX_SETS] = {0};
    mt_weights *w = NULL;
    int *widx = malloc(sizeof(int) * (size_t)nl);
    mt_layer_time *lt = calloc((size_t)nl, sizeof *lt);
    /* times[(s * passes + pass) * nl + layer] */
    double *times = calloc((size_t)r.nsets * (size_t)p.passes * (size_t)nl, sizeof *times);
    double *col = malloc(sizeof(double) * (size_t)p.passes);
    const int rounds = (p.passes + MT__REFINE_BLOCK - 1) / MT__REFINE_BLOCK;
    /* per_round[(w * nsets + s) * rounds + b]: workload w's time in set s's block of round b */
    double *per_round = calloc((size_t)nl * MT_REFINE_MAX_SETS * (size_t)rounds, sizeof *per_round);
    if (!widx || !lt || !times || !col || !per_round) {
        st = mt__fail(err, errlen, MT_NOMEM, "refine: out of memory");
        goto done;
    }
    if ((st = group_workloads(net, &r, widx, err, errlen)) != MT_OK) goto done;
    if ((st = mt_weights_random(net, p.seed, &w, err, errlen)) != MT_OK) goto done;
    /* One executor per set, all alive at once so that their passes can take turns. */
    for (int s = 0; s < r.nsets; s++) {
        mt_executor_params ep = mt_executor_default_params();
        ep.db = r.set_rank[s] > 0 ? db : NULL;
        ep.rank = r.set_rank[s];
        ep.weights = w;
        ep.seed = p.seed;
        /* Fused where the device fuses passes, as `mtgpu run` runs them: the
         * profiled passes then time each layer inside the fused pass
         * (mt_layer_time), without the launch each kernel costs alone. */
        ep.fuse = 1;
        char berr[2048];
        if ((st = mt_executor_build(dev, net, &ep, &ex[s], berr, sizeof berr)) != MT_OK) {
            if (r.set_rank[s] > 0) mt__fail(err, errlen, st, "refine: building %s with each convolution's record %d: %s", mt_network_name(net), r.set_rank[s], berr);
            else mt__fail(err, errlen, st, "refine: building %s with the default configs: %s", mt_network_name(net), berr);
            goto done;
        }
    }
    if ((st = note_configs(ex, net, widx, &r, err, errlen)) != MT_OK) goto done;
    /* The sets take turns in rounds of short blocks, the order rotating, so
     * that a slow spell of the machine falls on every set of a round alike.
     * Each block starts with an unprofiled pass: the caches then hold what
     * they hold in a run of that set alone (the last level holds a whole
     * network's weights, not four). */
    for (int b = 0; b < rounds; b++)
        for (int j = 0; j < r.nsets; j++) {
            const int s = (b + j) % r.nsets;
            if ((st = mt_executor_run(ex[s], NULL, err, errlen)) != MT_OK) goto done;
            for (int pass = b * MT__REFINE_BLOCK; pass < p.passes && pass < (b + 1) * MT__REFINE_BLOCK; pass++) {
                if ((st = mt_executor_run(ex[s], lt, err, errlen)) != MT_OK) goto done;
                for (int i = 0; i < nl; i++) times[((size_t)s * p.passes + pass) * nl + i] = lt[i].kernel_ms;
            }
        }
    for (int s = 0; s < r.nsets; s++)
        for (int i = 0; i < nl; i++) {
            if (widx[i] < 0) continue;
            for (int pass = 0; pass < p.passes; pass++) col[pass] = times[((size_t)s * p.passes + pass) * nl + i];
            for (int b = 0; b < rounds; b++) {
                const int first = b * MT__REFINE_BLOCK, n = p.passes - first < MT__REFINE_BLOCK ? p.passes - first : MT__REFINE_BLOCK;
                double blk[MT__REFINE_BLOCK];
                memcpy(blk, col + first, sizeof(double) * (size_t)n);
                per_round[((size_t)widx[i] * MT_REFINE_MAX_SETS + s) * rounds + b] += median_of(blk, n);
            }
            r.choices[widx[i]].ms[s] += median_of(col, p.passes);
        }
    for (int c = 0; c < r.nchoices; c++) {
        mt_refine_choice *ch = &r.choices[c];
        mt_refine_paired_ratios(per_round + (size_t)c * MT_REFINE_MAX_SETS * rounds, r.nsets, rounds, ch->ratio);
        int best = 0;
        for (int s = 1; s < r.nsets; s++)
            if (ch->same_as[s] == s && ch->ratio[s] < ch->ratio[best]) best = s;
        ch->chosen = ch->proposed = ch->ratio[best] < 1.0 - p.min_gain ? best : 0;
    }
    if (p.defaults && (st = check_whole(dev, net, w, p.seed, ex, r.nsets - 1, &r, err, errlen)) != MT_OK) goto done;
    for (int c = 0; c < r.nchoices; c++) {
        r.fastest_ms += r.choices[c].ms[0];
        r.chosen_ms += r.choices[c].ms[r.choices[c].chosen];
    }
    if (p.store) {
        char fp[17];
        memcpy(fp, mt_device_get_info(dev)->fingerprint, 16);
        fp[16] = '\0';
        if ((st = store_choices(db, net, fp, &r, err, errlen)) != MT_OK) goto done;
    }
    r.wall_s = now_s() - t0;
    *out = r;
    r.choices = NULL;
done:
    for (int s = 0; s < MT_REFINE_MAX_SETS; s++) mt_executor_free(ex[s]);
    mt_weights_free(w);
    free(widx);
    free(lt);
    free(times);
    free(col);
    free(per_round);
    free(r.choices);
    return st;
}
