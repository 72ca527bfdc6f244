/* The tuning loop: units (task x template), the scheduler, resume from the
 * database, and the round: search -> measure (compile in parallel, time in the
 * worker) -> commit each record -> update the cost model. */
#include "mtgpu/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mtgpu/costmodel.h"
#include "mtgpu/search.h"

#define MT__MAX_TEMPLATES 8
/* Rounds of history the scheduler's backward gradient looks at. */
#define MT__WINDOW 3
/* A round gives up on a unit after this many invalid draws per wanted config. */
#define MT__MAX_DRAWS_PER_CONFIG 64
/* Configs in a unit's first round: its default config and one from the search. */
#define MT__FIRST_ROUND 2
/* Weights of the backward (observed) and forward (optimistic) gradients, as in Ansor. */
#define MT__ALPHA 0.2

typedef struct {
    int task;
    const mt_template *t;
    mt_space space;
    int have_space;
    mt_search *search;
    mt_costmodel *model; /* borrowed: one model per template, shared across tasks */
    int trials;
    int last_improvement; /* trials count when best last improved */
    double best_ms;       /* 0: none */
    double history[MT__WINDOW + 1]; /* best_ms after each of the last rounds (oldest first) */
    int nhistory;
    int done;             /* exhausted or stopped early */
    int rounds;
} unit;

typedef struct {
    const mt_template *t;
    mt_costmodel *model;
} template_model;

/* Whether name is in the comma-separated list (NULL or "": every template). */
static int template_selected(const char *list, const char *name) {
    if (!list || !*list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && strncmp(p, name, n) == 0) return 1;
        p += len;
        if (*p == ',') p++;
    }
    return 0;
}

mt_status mt_tune_check_templates(const char *list, char *err, size_t errlen) {
    if (!list || !*list) return MT_OK;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        char name[32];
        if (len == 0 || len >= sizeof name) return mt__fail(err, errlen, MT_INVALID_ARG, "tune: bad template list '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        if (!mt_template_find(name)) return mt__fail(err, errlen, MT_INVALID_ARG, "tune: unknown template '%s'", name);
        p += len;
        if (*p == ',') p++;
    }
    return MT_OK;
}

mt_tune_params mt_tune_default_params(void) {
    mt_tune_params p = {0};
    p.trials = 0;
    p.cost_model = "xgb";
    p.batch = 8;
    p.early_stop = 64;
    p.start_from_default = 1;
    p.seed = 1;
    p.measurer = mt_measurer_default_params();
    return p;
}

void mt_tune_summary_free(mt_tune_summary *s) {
    if (!s) return;
    free(s->tasks);
    s->tasks = NULL;
    s->ntasks = 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void unit_record_best(unit *u, double ms) {
    if (ms > 0 && (u->best_ms <= 0 || ms < u->best_ms)) {
        u->best_ms = ms;
        u->last_improvement = u->trials;
    }
}

static void unit_push_history(unit *u) {
    if (u->nhistory == MT__WINDOW + 1) {
        memmove(u->history, u->history + 1, sizeof(double) * MT__WINDOW);
        u->nhistory--;
    }
    u->history[u->nhistory++] = u->best_ms;
}

/* Expected reduction of weighted time per trial (Ansor's task gradient, without
 * its similarity term): weight x (alpha x observed slope + (1-alpha) x best/trials). */
static double unit_gain(const unit *u, double weight) {
    if (u->done) return -1;
    if (u->best_ms <= 0) return INFINITY; /* no valid config yet: nothing is known */
    double backward = 0;
    if (u->nhistory >= 2 && u->history[0] > 0) backward = (u->history[0] - u->best_ms) / (double)((u->nhistory - 1) > 0 ? u->nhistory - 1 : 1);
    double forward = u->best_ms / (u->trials > 0 ? u->trials : 1);
    return weight * (MT__ALPHA * backward + (1 - MT__ALPHA) * forward);
}

typedef struct {
    unit *u;
    const mt_workload *wl;
    const mt_device_info *dev;
    mt_cm_sample *samples;
    int nsamples, cap;
    int errors;
    int failed_alloc;
} resume_state;

static int resume_cb(const mt_record *rec, void *user) {
    resume_state *rs = user;
    unit *u = rs->u;
    mt_config cfg;
    if (mt_config_parse(&u->space, rec->config, &cfg, NULL, 0) != MT_OK) return 0; /* from an older space: ignore */
    double cost = rec->status == MT_OK ? rec->median_ms : 0;
    mt_search_mark_measured(u->search, &cfg, rec->status == MT_OK ? cost : -1);
    u->trials++;
    if (rec->status != MT_OK) rs->errors++;
    unit_record_best(u, cost);
    if (rs->nsamples == rs->cap) {
        int cap = rs->cap ? 2 * rs->cap : 64;
        mt_cm_sample *s = realloc(rs->samples, sizeof *s * (size_t)cap);
        if (!s) {
            rs->failed_alloc = 1;
            return 1;
        }
        rs->samples = s;
        rs->cap = cap;
    }
    rs->samples[rs->nsamples++] = (mt_cm_sample){.wl = rs->wl, .tmpl = u->t, .space = &u->space, .cfg = cfg, .cost_ms = cost, .failed = rec->status != MT_OK,
                                                    .dev = rs->dev};
    return 0;
}

static void fill_task_results(const unit *units, int nunits, mt_tune_task_result *tr, int ntasks) {
    for (int i = 0; i < ntasks; i++) {
        tr[i].best_ms = 0;
        tr[i].best_template[0] = tr[i].best_config[0] = '\0';
    }
    for (int j = 0; j < nunits; j++) {
        const unit *u = &units[j];
        mt_tune_task_result *r = &tr[u->task];
        if (u->best_ms > 0 && (r->best_ms <= 0 || u->best_ms < r->best_ms)) {
            r->best_ms = u->best_ms;
            snprintf(r->best_template, sizeof r->best_template, "%s", mt_template_name(u->t));
            mt_config cfg;
            double ms;
            if (mt_search_best(u->search, &cfg, &ms) == MT_OK) mt_config_format(&u->space, &cfg, r->best_config, sizeof r->best_config);
        }
    }
}

static double network_ms(const mt_tune_task_result *tr, int ntasks) {
    double sum = 0;
    for (int i = 0; i < ntasks; i++) {
        if (tr[i].best_ms <= 0) return 0;
        sum += tr[i].best_ms * tr[i].count;
    }
    return sum;
}

mt_status mt_tune(const mt_task *tasks, int ntasks, const mt_tune_params *params, mt_tune_summary *out, char *err, size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (!tasks || ntasks <= 0 || !params || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "tune: no tasks");
    mt_tune_params p = *params;
    mt_status lst = mt_tune_check_templates(p.templates, err, errlen);
    if (lst != MT_OK) return lst;
    if (p.batch <= 0) p.batch = 8;
    if (!p.cost_model) p.cost_model = "xgb";
    int use_model = strcmp(p.cost_model, "random") != 0;
    double t0 = now_s();

    mt_status st = MT_OK;
    mt_db *db = NULL;
    mt_measurer *meas = NULL;
    unit *units = NULL;
    int nunits = 0;
    template_model models[MT__MAX_TEMPLATES];
    int nmodels = 0;
    mt_config *cfgs = NULL;
    mt_measurer_result *results = NULL;
    mt_record *records = NULL;
    mt_cm_sample *samples = NULL;
    int done_total = 0, measured_this_run = 0;
    mt_tune_task_result *tr = calloc((size_t)ntasks, sizeof *tr);
    if (!tr) return mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
    for (int i = 0; i < ntasks; i++) {
        tr[i].wl = tasks[i].wl;
        tr[i].count = tasks[i].count;
        tr[i].flops = tasks[i].flops;
    }

    /* Database and device. */
    char dbpath[1024];
    if (p.db_path) snprintf(dbpath, sizeof dbpath, "%s", p.db_path);
    else if ((st = mt_db_default_path(dbpath, sizeof dbpath)) != MT_OK) {
        mt__fail(err, errlen, st, "tune: no default database path (set --db or $MTGPU_DB)");
        goto done;
    }
    mt_db_params dbp = mt_db_default_params();
    if ((st = mt_db_open(dbpath, &dbp, &db, err, errlen)) != MT_OK) goto done;
    mt_measurer_params mp = p.measurer;
    mp.stop = p.stop;
    mt_device_info dev;
    if ((st = mt_measurer_start(&mp, &meas, &dev, err, errlen)) != MT_OK) goto done;
    out->device = dev;
    mt_device_limits limits = mt_device_info_limits(&dev);
    if ((st = mt_db_put_device(db, &dev)) != MT_OK) {
        mt__fail(err, errlen, st, "tune: could not record the device: %s", mt_db_errmsg(db));
        goto done;
    }

    /* Units and their searches; one cost model per template. */
    units = calloc((size_t)ntasks * MT__MAX_TEMPLATES, sizeof *units);
    if (!units) {
        st = mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
        goto done;
    }
    mt_costmodel_params cmp = mt_costmodel_default_params();
    cmp.seed = p.seed;
    cmp.plan_size = p.batch;
    cmp.gnn_model = p.cost_model_file;
    if (p.gnn_adapt_steps > 0) cmp.gnn_adapt_steps = p.gnn_adapt_steps;
    if (p.gnn_adapt_lr > 0) cmp.gnn_adapt_lr = p.gnn_adapt_lr;
    for (int i = 0; i < ntasks; i++) {
        for (int ti = 0; ti < mt_template_count() && ti < MT__MAX_TEMPLATES; ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &tasks[i].wl) || !template_selected(p.templates, mt_template_name(t))) continue;
            unit *u = &units[nunits];
            u->task = i;
            u->t = t;
            if ((st = mt_template_space(t, &tasks[i].wl, &u->space)) != MT_OK) {
                mt__fail(err, errlen, st, "tune: the space of '%s' for task %d: %s", mt_template_name(t), i, mt_status_str(st));
                goto done;
            }
            u->have_space = 1;
            nunits++;
            if (use_model) {
                int m = 0;
                while (m < nmodels && models[m].t != t) m++;
                if (m == nmodels) {
                    models[m].t = t;
                    if ((st = mt_costmodel_create(p.cost_model, &cmp, &models[m].model, err, errlen)) != MT_OK) goto done;
                    nmodels++;
                }
                u->model = models[m].model;
            }
            mt_search_params sp = mt_search_default_params();
            sp.seed = p.seed + (uint64_t)nunits * 7919;
            sp.dev = &dev;
            if ((st = mt_search_create_ex(use_model ? "sa" : "random", &tasks[i].wl, t, &u->space, u->model, &sp, &u->search, err, errlen)) !=
                MT_OK)
                goto done;
        }
        if (nunits == 0 || units[nunits - 1].task != i) {
            st = mt__fail(err, errlen, MT_UNSUPPORTED, "tune: no template accepts task %d", i);
            goto done;
        }
    }

    /* Resume: what the database already has for these units on this device. */
    for (int j = 0; j < nunits; j++) {
        unit *u = &units[j];
        resume_state rs = {.u = u, .wl = &tasks[u->task].wl, .dev = &dev};
        mt_db_filter f = {.wl = &tasks[u->task].wl, .device = dev.fingerprint, .template_name = mt_template_name(u->t)};
        st = mt_db_for_each(db, &f, resume_cb, &rs);
        if (st == MT_OK && rs.failed_alloc) st = MT_NOMEM;
        if (st == MT_OK && u->model && rs.nsamples > 0) st = mt_costmodel_update(u->model, rs.samples, rs.nsamples);
        free(rs.samples);
        if (st != MT_OK) {
            mt__fail(err, errlen, st, "tune: resuming from the database failed: %s", mt_status_str(st));
            goto done;
        }
        tr[u->task].trials += u->trials;
        tr[u->task].errors += rs.errors;
        out->resumed += u->trials;
        if (u->trials > 0) unit_push_history(u);
        u->rounds = u->trials > 0;
        if (p.early_stop > 0 && u->trials - u->last_improvement >= p.early_stop) u->done = 1;
    }
    done_total = out->resumed;
    fill_task_results(units, nunits, tr, ntasks);
    if (p.progress) {
        mt_tune_progress pr = {.task = -1, .trials_done = done_total, .trials_total = p.trials, .eta_s = -1, .tasks = tr, .ntasks = ntasks,
                               .network_ms = network_ms(tr, ntasks)};
        p.progress(&pr, p.user);
    }

    cfgs = calloc((size_t)p.batch * 2, sizeof *cfgs);
    results = calloc((size_t)p.batch, sizeof *results);
    records = calloc((size_t)p.batch, sizeof *records);
    samples = calloc((size_t)p.batch * (2 + MT__MAX_DRAWS_PER_CONFIG), sizeof *samples);
    if (!cfgs || !results || !records || !samples) {
        st = mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
        goto done;
    }
    double run_start = now_s();
    while (done_total < p.trials) {
        if (p.stop && *p.stop) {
            out->interrupted = 1;
            break;
        }
        if (p.time_limit_s > 0 && now_s() - t0 >= p.time_limit_s) {
            out->timed_out = 1;
            break;
        }
        /* Pick: units never tried first (in order), then the best gain per task, then per unit. */
        int pick = -1;
        for (int j = 0; j < nunits && pick < 0; j++)
            if (!units[j].done && units[j].rounds == 0) pick = j;
        if (pick < 0) {
            double best_gain = -1;
            for (int i = 0; i < ntasks; i++) {
                double task_gain = -1;
                int task_pick = -1;
                double task_best = tr[i].best_ms;
                for (int j = 0; j < nunits; j++) {
                    if (units[j].task != i || units[j].done) continue;
                    double g = unit_gain(&units[j], tasks[i].count);
                    /* A template far behind the task's best gains less for the network. */
                    if (isfinite(g) && task_best > 0 && units[j].best_ms > task_best) g *= task_best / units[j].best_ms;
                    if (g > task_gain) {
                        task_gain = g;
                        task_pick = j;
                    }
                }
                if (task_pick >= 0 && task_gain > best_gain) {
                    best_gain = task_gain;
                    pick = task_pick;
                }
            }
        }
        if (pick < 0) break; /* every unit is exhausted or stopped early */
        unit *u = &units[pick];
        const mt_workload *wl = &tasks[u->task].wl;
        int want = p.batch;
        if (want > p.trials - done_total) want = p.trials - done_total;
        /* Configs the template cannot realise on this device are never measured
         * nor counted: the search and the model learn them as failures. */
        int n = 0, draws = 0, ninvalid = 0, exhausted = 0;
        /* A unit's first round starts from the template's default config:
         * a sound kernel to compare against, and a data point the model
         * would rarely get from random configs. */
        if (p.start_from_default && u->trials == 0 && u->rounds == 0 && want > 0 && mt_default_config(u->t, wl, &dev, &u->space, &cfgs[0], NULL, 0) == MT_OK &&
            mt_template_check(u->t, wl, &u->space, &cfgs[0], &limits, NULL, 0) == MT_OK) {
            n = 1;
            /* ...and is short (the default and one random config), so that
             * every task has a valid config, and the network an estimate,
             * after a fraction of the budget; the gain rule then spends the
             * rest where it matters. */
            if (want > MT__FIRST_ROUND) want = MT__FIRST_ROUND;
        }
        while (n < want && draws < MT__MAX_DRAWS_PER_CONFIG * want) {
            int got = 0;
            if ((st = mt_search_next_batch(u->search, want - n, cfgs + n, &got)) != MT_OK) {
                mt__fail(err, errlen, st, "tune: search failed: %s", mt_search_last_error(u->search));
                goto done;
            }
            if (got == 0) {
                exhausted = 1;
                break;
            }
            draws += got;
            int end = n + got;
            for (int k = n; k < end; k++) {
                if (mt_template_check(u->t, wl, &u->space, &cfgs[k], &limits, NULL, 0) == MT_OK) {
                    cfgs[n++] = cfgs[k];
                    continue;
                }
                mt_search_mark_measured(u->search, &cfgs[k], -1);
                samples[p.batch + ninvalid++] =
                    (mt_cm_sample){.wl = wl, .tmpl = u->t, .space = &u->space, .cfg = cfgs[k], .failed = 1, .dev = &dev};
            }
        }
        u->rounds++;
        if (n == 0) {
            if (u->model && ninvalid > 0 && (st = mt_costmodel_update(u->model, samples + p.batch, ninvalid)) != MT_OK) {
                mt__fail(err, errlen, st, "tune: cost model update failed: %s", mt_costmodel_last_error(u->model));
                goto done;
            }
            if (exhausted || draws >= MT__MAX_DRAWS_PER_CONFIG * want) u->done = 1;
            continue;
        }
        char merr[1024] = "";
        mt_status ms = mt_measurer_measure_batch(meas, wl, u->t, &u->space, cfgs, n, results, merr, sizeof merr);
        int nrec = 0, nsamp = 0;
        for (int k = 0; k < n; k++) {
            mt_measurer_result *r = &results[k];
            if (r->skipped) continue;
            /* A batch abandoned because the worker keeps failing: keep those configs unrecorded. */
            if (ms != MT_OK && !r->sent_to_worker && r->m.status == ms) continue;
            mt_record *rec = &records[nrec++];
            mt_record_init(rec);
            rec->wl = *wl;
            snprintf(rec->template_name, sizeof rec->template_name, "%s", mt_template_name(u->t));
            mt_config_format(&u->space, &cfgs[k], rec->config, sizeof rec->config);
            rec->config_index = (int64_t)mt_space_config_index(&u->space, &cfgs[k]);
            snprintf(rec->device, sizeof rec->device, "%s", dev.fingerprint);
            rec->ncosts = r->m.nruns < MT_RECORD_MAX_COSTS ? r->m.nruns : MT_RECORD_MAX_COSTS;
            for (int c = 0; c < rec->ncosts; c++) rec->costs_ms[c] = r->m.run_ms[c];
            rec->median_ms = r->m.status == MT_OK ? r->m.median_ms : 0;
            rec->status = r->m.status;
            snprintf(rec->message, sizeof rec->message, "%s", r->m.message);
            rec->build_s = r->m.build_s;
            int inserted = 0;
            if ((st = mt_db_put_record(db, rec, &inserted)) != MT_OK) {
                mt__fail(err, errlen, st, "tune: could not store a record: %s", mt_db_errmsg(db));
                goto done;
            }
            mt_search_mark_measured(u->search, &cfgs[k], r->m.status == MT_OK ? r->m.median_ms : -1);
            samples[nsamp++] = (mt_cm_sample){.wl = wl, .tmpl = u->t, .space = &u->space, .cfg = cfgs[k], .cost_ms = r->m.median_ms,
                                              .failed = r->m.status != MT_OK, .dev = &dev};
            u->trials++;
            tr[u->task].trials++;
            if (r->m.status != MT_OK) tr[u->task].errors++;
            unit_record_best(u, r->m.status == MT_OK ? r->m.median_ms : 0);
            done_total++;
            measured_this_run++;
        }
        unit_push_history(u);
        /* The invalid configs of this round follow the measured ones. */
        if (ninvalid > 0) memmove(samples + nsamp, samples + p.batch, sizeof *samples * (size_t)ninvalid);
        nsamp += ninvalid;
        if (u->model && nsamp > 0 && (st = mt_costmodel_update(u->model, samples, nsamp)) != MT_OK) {
            mt__fail(err, errlen, st, "tune: cost model update failed: %s", mt_costmodel_last_error(u->model));
            goto done;
        }
        if (p.early_stop > 0 && u->trials - u->last_improvement >= p.early_stop) u->done = 1;
        if (ms != MT_OK && ms != MT_DEVICE) {
            st = mt__fail(err, errlen, ms, "tune: measurement failed: %s", merr);
            goto done;
        }
        fill_task_results(units, nunits, tr, ntasks);
        if (p.progress) {
            double el = now_s() - run_start;
            int left = p.trials - done_total;
            double eta = measured_this_run > 0 ? el / measured_this_run * left : -1;
            if (p.time_limit_s > 0) {
                double tl = p.time_limit_s - (now_s() - t0);
                if (eta < 0 || eta > tl) eta = tl > 0 ? tl : 0;
            }
            mt_tune_progress pr = {.task = u->task, .template_name = mt_template_name(u->t), .trials_done = done_total, .trials_total = p.trials,
                                   .measured_this_run = measured_this_run, .elapsed_s = now_s() - t0, .eta_s = eta,
                                   .network_ms = network_ms(tr, ntasks), .tasks = tr, .ntasks = ntasks, .records = records, .nrecords = nrec};
            p.progress(&pr, p.user);
        }
        if (p.stop && *p.stop) {
            out->interrupted = 1;
            break;
        }
    }
    st = MT_OK;
done:
    /* Also on error: the summary holds what was measured (and committed) before it. */
    out->wall_s = now_s() - t0;
    out->measured_this_run = measured_this_run;
    out->trials_done = done_total;
    if (units) fill_task_results(units, nunits, tr, ntasks);
    out->tasks = tr;
    out->ntasks = ntasks;
    out->network_ms = network_ms(tr, ntasks);
    for (int j = 0; j < nunits; j++) {
        mt_search_free(units[j].search);
        if (units[j].have_space) mt_space_free(&units[j].space);
    }
    free(units);
    for (int m = 0; m < nmodels; m++) mt_costmodel_free(models[m].model);
    free(cfgs);
    free(results);
    free(records);
    free(samples);
    mt_measurer_stop(meas);
    mt_db_close(db);
    return st;
}
