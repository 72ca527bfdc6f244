/* Collecting tuning data for cost-model training: N configs of each of M
 * generated workloads, per template, the first share drawn at random and the
 * rest picked by a model fitted on them (so that a task's records hold both
 * the spread of its space and its fast corner). Each (workload, template) is
 * tuned by mt_tune, so records are committed as measured and a rerun resumes. */
#include "collect.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "template.h"
#include "tune-impl.h"
#include "fail.h"

mt_collect_params mt_collect_default_params(void) {
    mt_collect_params p = {0};
    p.gen = mt_workload_gen_default_params();
    p.count = 100;
    p.configs = 24;
    p.random_frac = 0.5;
    p.guide_model = "xgb";
    p.batch = 8;
    p.measurer = mt_measurer_default_params();
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The templates tuned for workload `index`: every accepted and selected one,
 * or with one_template the (index mod n)-th of them. Returns how many. */
static int unit_templates(const mt_collect_params *p, const mt_workload *wl, int index, const mt_template **out, int cap) {
    int n = 0;
    for (int i = 0; i < mt_template_count() && n < cap; i++) {
        const mt_template *t = mt_template_at(i);
        if (mt_template_accepts(t, wl) && mt__template_selected(p->templates, mt_template_name(t))) out[n++] = t;
    }
    if (p->one_template && n > 1) {
        out[0] = out[index % n];
        n = 1;
    }
    return n;
}

mt_status mt_collect(const mt_collect_params *params, mt_collect_summary *out, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (!params || !out || params->count < 0 || params->first < 0 || params->configs <= 0 || !(params->random_frac >= 0 && params->random_frac <= 1))
        return mt__fail(err, errlen, MT_INVALID_ARG, "collect: bad parameters");
    mt_status st = mt_tune_check_templates(params->templates, err, errlen);
    if (st != MT_OK) return st;
    double t0 = now_s();
    int nrandom = (int)ceil(params->random_frac * params->configs);
    for (int i = params->first; i < params->first + params->count; i++) {
        if (params->stop && *params->stop) {
            out->interrupted = 1;
            break;
        }
        if (params->time_limit_s > 0 && now_s() - t0 >= params->time_limit_s) {
            out->timed_out = 1;
            break;
        }
        mt_workload wl;
        if ((st = mt_workload_generate(&params->gen, i, &wl, err, errlen)) != MT_OK) return st;
        const mt_template *ts[8];
        int nt = unit_templates(params, &wl, i, ts, 8);
        for (int j = 0; j < nt; j++) {
            if (params->stop && *params->stop) break;
            mt_task task = {.wl = wl, .count = 1, .flops = mt_workload_flops(&wl)};
            mt_tune_params tp = mt_tune_default_params();
            tp.templates = mt_template_name(ts[j]);
            tp.start_from_default = 0;
            tp.early_stop = 0;
            tp.batch = params->batch;
            tp.seed = params->gen.seed * 1000003u + (uint64_t)i;
            tp.db_path = params->db_path;
            tp.measurer = params->measurer;
            tp.stop = params->stop;
            mt_tune_summary sum;
            /* The random share first; then the guide, fitted on what the
             * database holds for the task, picks the rest. */
            int phases = nrandom < params->configs ? 2 : 1;
            for (int ph = 0; ph < phases && st == MT_OK; ph++) {
                tp.cost_model = ph == 0 && nrandom > 0 ? "random" : params->guide_model;
                tp.trials = ph == 0 && nrandom > 0 ? nrandom : params->configs;
                st = mt_tune(&task, 1, &tp, &sum, err, errlen);
                if (st == MT_OK || sum.tasks) {
                    out->measured_this_run += sum.measured_this_run;
                    out->device = sum.device;
                }
                if (st == MT_OK && params->progress) {
                    mt_collect_progress pr = {.index = i, .wl = wl, .template_name = mt_template_name(ts[j]), .phase = tp.cost_model,
                                              .records = sum.trials_done, .errors = sum.ntasks ? sum.tasks[0].errors : 0,
                                              .best_ms = sum.ntasks ? sum.tasks[0].best_ms : 0, .measured_this_run = out->measured_this_run,
                                              .elapsed_s = now_s() - t0};
                    params->progress(&pr, params->user);
                }
                mt_tune_summary_free(&sum);
            }
            if (st != MT_OK) return st;
            out->units++;
        }
        out->workloads++;
    }
    if (params->stop && *params->stop) out->interrupted = 1;
    out->wall_s = now_s() - t0;
    return MT_OK;
}
