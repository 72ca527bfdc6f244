/* The tuning loop: units (task x template), the scheduler, resume from the
 * database, and the round: search -> measure (compile in parallel, time in the
 * worker; or, replaying, look up the recording) -> commit each record to the
 * sink -> update the cost model.
 *
 * mt_tune keeps its state in a tune_run: run_init checks the parameters,
 * run_open_device opens the device (or the recording) and the record sink,
 * run_make_units the units, run_resume reads what the sink already holds;
 * then rounds (run_round) until the budget, the time limit, the stop flag
 * or the units run out: scheduler_pick chooses a unit, round_draw its
 * configs, round_measure measures them, round_commit stores their records
 * through the sink, round_update_model feeds the cost model,
 * report_progress tells the caller; run_close fills the summary. */
#include "mtgpu/tuner.h"
#include "program.h"
#include "select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "costmodel.h"
#include "config_search.h"
#include "farm.h"
#include "measurer.h"
#include "replay.h"
#include "tune-impl.h"
#include "fail.h"

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
    /* Replaying: the recorded configs (ascending indices; the replay's),
     * the only ones the unit may measure. NULL measuring on a device. */
    const uint64_t *only;
    size_t nonly;
    int trials;
    int last_improvement; /* trials count when best last improved */
    double best_ms;       /* 0: none */
    double history[MT__WINDOW + 1]; /* best_ms after each of the last rounds (oldest first) */
    int nhistory;
    int done;             /* exhausted or stopped early */
    int rounds;
    /* Configs whose stored record is a failure of the environment (a worker
     * killed from outside): measured first, so that a resumed tune retries them. */
    mt_config *retry;
    int nretry, capretry;
} unit;

typedef struct {
    const mt_template *t;
    mt_costmodel *model;
} template_model;

/* One mt_tune call (a tuning run): its parameters, what it opened, its
 * units, and one round's scratch. */
typedef struct {
    const mt_task *tasks;
    int ntasks;
    mt_tune_params p;             /* with the defaults filled in */
    int use_model;                /* 0: random search */
    double t0;                    /* when mt_tune was called */
    double run_start;             /* when the rounds started */
    mt_device_info dev;
    mt_device_limits limits;
    const mt_device_limits *lim;  /* &limits, or NULL for a replayed device the recording does not describe */
    mt_measurer *meas;            /* measuring on the device */
    const mt__farm *farm;         /* measuring elsewhere (then meas is NULL); farm_started: its stop is due */
    int farm_started;
    mt__replay *replay;           /* replaying a recording (then meas is NULL) */
    mt__sink sink;                /* where every record goes */
    char source[MT_RECORD_SOURCE_LEN]; /* the records' source: "" (measured) or "replay:<fingerprint>" */
    int cold;                          /* measuring cold on a device that can (records MT_RECORD_SOURCE_COLD) */
    unit *units;
    int nunits;
    template_model models[MT__MAX_TEMPLATES];
    int nmodels;
    mt_tune_task_result *tr;      /* per task; becomes the summary's */
    int done_total;               /* trials of these units, resumed ones included */
    int measured_this_run;
    int resumed;
    char note[512];               /* what resuming went past (mt_tune_progress.note) */
    double search_s, measure_s, commit_s, model_s; /* the rounds' time, by part (the summary's) */
    /* A round's scratch: batch entries each (cfgs 2 x batch; samples, see tune_round). */
    mt_config *cfgs;
    mt_measurer_result *results;
    mt_record *records;           /* what the sink got this round */
    mt_cm_sample *samples;
} tune_run;

/* One round of one unit. */
typedef struct {
    unit *u;
    int want;       /* configs to measure at most */
    int n;          /* configs drawn to measure: cfgs[0..n) */
    int ninvalid;   /* draws the template cannot realise here: samples[batch..batch + ninvalid) */
    int exhausted;  /* the search has nothing left to propose */
    int gave_up;    /* too many invalid draws */
    mt_status measured; /* the measurement's status (MT_DEVICE: the worker kept failing) */
    char merr[1024];
    int nrec;       /* records committed: records[0..nrec) */
    int nsamp;      /* samples for the model: samples[0..nsamp) */
} tune_round;

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
    /* Timed as a network runs the kernels where the device can evict (a
     * CPU): see mt_measure_params.cold. */
    p.measurer.measure.cold = 1;
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

/* ---- units ---- */

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

/* Whether the unit may measure cfg: always on a device; replaying, when it was recorded. */
static int unit_allows(const unit *u, const mt_config *cfg) {
    if (!u->only) return 1;
    uint64_t idx = mt_space_config_index(&u->space, cfg);
    size_t lo = 0, hi = u->nonly;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->only[mid] < idx) lo = mid + 1;
        else hi = mid;
    }
    return lo < u->nonly && u->only[lo] == idx;
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
            if (mt_search_best(u->search, &cfg, &ms, NULL, 0) == MT_OK) mt_config_format(&u->space, &cfg, r->best_config, sizeof r->best_config);
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

/* ---- opening ---- */

/* Checks the parameters and fills in their defaults; allocates the task results. */
static mt_status run_init(tune_run *s, const mt_task *tasks, int ntasks, const mt_tune_params *params, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    mt__sink_none(&s->sink);
    s->t0 = now_s();
    s->tasks = tasks;
    s->ntasks = ntasks;
    s->p = *params;
    mt_status st = mt_tune_check_templates(s->p.templates, err, errlen);
    if (st != MT_OK) return st;
    if (s->p.batch <= 0) s->p.batch = 8;
    if (!s->p.cost_model) s->p.cost_model = "xgb";
    if (s->p.simulate_db && !s->p.db_path && !s->p.no_db)
        return mt__fail(err, errlen, MT_INVALID_ARG,
                        "tune: a replay stores its records in db_path (a database of its own) or, with no_db, nowhere; not in the default database");
    s->use_model = strcmp(s->p.cost_model, "random") != 0;
    s->tr = calloc((size_t)ntasks, sizeof *s->tr);
    if (!s->tr) return mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
    for (int i = 0; i < ntasks; i++) {
        s->tr[i].wl = tasks[i].wl;
        s->tr[i].count = tasks[i].count;
        s->tr[i].flops = tasks[i].flops;
    }
    return MT_OK;
}

/* 1 when both paths name one existing file. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The device and the sink. Measuring, the database opens first, so that a
 * bad path fails before a worker starts; replaying, the recording is read
 * first, so that a bad one leaves no database behind. */
static mt_status run_open_device(tune_run *s, mt_tune_summary *out, char *err, size_t errlen) {
    const mt_tune_params *p = &s->p;
    mt_status st;
    if (p->simulate_db) {
        if (same_file(p->simulate_db, p->db_path))
            return mt__fail(err, errlen, MT_INVALID_ARG, "tune: the replay's records cannot go into the recording it replays (%s)", p->db_path);
        int described = 0;
        if ((st = mt__replay_open(p->simulate_db, p->simulate_device, s->tasks, s->ntasks, p->templates, &s->replay, &s->dev, &described, err,
                                  errlen)) != MT_OK)
            return st;
        snprintf(s->source, sizeof s->source, "replay:%s", s->dev.fingerprint);
        s->limits = mt_device_info_limits(&s->dev);
        s->lim = described ? &s->limits : NULL;
        if (!p->no_db && (st = mt__sink_db(p->db_path, &s->sink, err, errlen)) != MT_OK) return st;
    } else {
        if (!p->no_db && (st = mt__sink_db(p->db_path, &s->sink, err, errlen)) != MT_OK) return st;
        mt_measurer_params mp = p->measurer;
        mp.stop = p->stop;
        if (s->farm) {
            if ((st = s->farm->iface->start(s->farm->ctx, &mp, &s->dev, err, errlen)) != MT_OK) return st;
            s->farm_started = 1;
        } else if ((st = mt_measurer_start(&mp, &s->meas, &s->dev, err, errlen)) != MT_OK)
            return st;
        s->limits = mt_device_info_limits(&s->dev);
        s->lim = &s->limits;
        s->cold = p->measurer.measure.cold && mt_device_info_can_evict(&s->dev);
    }
    out->device = s->dev;
    out->cold = s->cold;
    return s->sink.iface->device(s->sink.ctx, &s->dev, err, errlen);
}

/* Units and their searches; one cost model per template. */
static mt_status run_make_units(tune_run *s, char *err, size_t errlen) {
    s->units = calloc((size_t)s->ntasks * MT__MAX_TEMPLATES, sizeof *s->units);
    if (!s->units) return mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
    mt_costmodel_params cmp = mt_costmodel_default_params();
    cmp.seed = s->p.seed;
    cmp.plan_size = s->p.batch;
    cmp.gnn_model = s->p.cost_model_file;
    if (s->p.gnn_adapt_steps > 0) cmp.gnn_adapt_steps = s->p.gnn_adapt_steps;
    if (s->p.gnn_adapt_lr > 0) cmp.gnn_adapt_lr = s->p.gnn_adapt_lr;
    mt_status st;
    for (int i = 0; i < s->ntasks; i++) {
        const mt_workload *wl = &s->tasks[i].wl;
        for (int ti = 0; ti < mt_template_count() && ti < MT__MAX_TEMPLATES; ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, wl) || !mt__template_selected(s->p.templates, mt_template_name(t))) continue;
            unit *u = &s->units[s->nunits];
            u->task = i;
            u->t = t;
            if ((st = mt_template_space(t, wl, &u->space)) != MT_OK)
                return mt__fail(err, errlen, st, "tune: the space of '%s' for task %d: %s", mt_template_name(t), i, mt_status_str(st));
            u->have_space = 1;
            s->nunits++;
            if (s->use_model) {
                int m = 0;
                while (m < s->nmodels && s->models[m].t != t) m++;
                if (m == s->nmodels) {
                    s->models[m].t = t;
                    if ((st = mt_costmodel_create(s->p.cost_model, &cmp, &s->models[m].model, err, errlen)) != MT_OK) return st;
                    s->nmodels++;
                }
                u->model = s->models[m].model;
            }
            mt_search_params sp = mt_search_default_params();
            sp.seed = s->p.seed + (uint64_t)s->nunits * 7919;
            sp.dev = &s->dev;
            if (s->replay) {
                mt__replay_configs(s->replay, wl, t, &u->only, &u->nonly);
                sp.only = u->only;
                sp.nonly = u->nonly;
                u->done = u->nonly == 0; /* nothing recorded for this template */
            }
            if ((st = mt_search_create_ex(s->use_model ? "sa" : "random", wl, t, &u->space, u->model, &sp, &u->search, err, errlen)) != MT_OK)
                return st;
        }
        if (s->nunits == 0 || s->units[s->nunits - 1].task != i) return mt__fail(err, errlen, MT_UNSUPPORTED, "tune: no template accepts task %d", i);
    }
    return MT_OK;
}

typedef struct {
    unit *u;
    const mt_workload *wl;
    const mt_device_info *dev;
    mt_cm_sample *samples;
    int nsamples, cap;
    int errors;
    int env_failures; /* records skipped: failures of the environment, to measure again */
    int failed_alloc;
} resume_state;

static int resume_cb(const mt_record *rec, void *user) {
    resume_state *rs = user;
    unit *u = rs->u;
    mt_config cfg;
    if (mt_config_parse(&u->space, rec->config, &cfg, NULL, 0) != MT_OK) return 0; /* from an older space: ignore */
    /* A failure of the environment (a worker killed from outside) is not a
     * measurement: the config is measured again, and its new record replaces this one. */
    if (mt_record_env_failure(rec)) {
        rs->env_failures++;
        if (u->nretry == u->capretry) {
            int cap = u->capretry ? 2 * u->capretry : 8;
            mt_config *c = realloc(u->retry, sizeof *c * (size_t)cap);
            if (!c) {
                rs->failed_alloc = 1;
                return 1;
            }
            u->retry = c;
            u->capretry = cap;
        }
        u->retry[u->nretry++] = cfg;
        return 0;
    }
    double cost = rec->status == MT_OK ? rec->median_ms : 0;
    mt_search_mark_measured(u->search, &cfg, rec->status == MT_OK ? cost : -1, NULL, 0);
    u->trials++;
    if (rec->status != MT_OK) rs->errors++;
    unit_record_best(u, cost);
    if (rs->nsamples == rs->cap) {
        int cap = rs->cap ? 2 * rs->cap : 64;
        mt_cm_sample *smp = realloc(rs->samples, sizeof *smp * (size_t)cap);
        if (!smp) {
            rs->failed_alloc = 1;
            return 1;
        }
        rs->samples = smp;
        rs->cap = cap;
    }
    rs->samples[rs->nsamples++] = (mt_cm_sample){.wl = rs->wl, .tmpl = u->t, .space = &u->space, .cfg = cfg, .cost_ms = cost, .failed = rec->status != MT_OK,
                                                    .dev = rs->dev};
    return 0;
}

/* What the sink already holds for these units on this device: marked
 * measured in the searches, counted, and fed to the models. */
static mt_status run_resume(tune_run *s, char *err, size_t errlen) {
    int64_t damaged_total = 0;
    int env_total = 0;
    char first_damaged[400] = "";
    for (int j = 0; j < s->nunits; j++) {
        unit *u = &s->units[j];
        resume_state rs = {.u = u, .wl = &s->tasks[u->task].wl, .dev = &s->dev};
        mt_db_filter f = {.wl = &s->tasks[u->task].wl, .device = s->dev.fingerprint, .template_name = mt_template_name(u->t)};
        /* A cold tuning resumes from cold records only: warm times of the
         * same configs are faster and would stand as the bests to beat (the
         * configs are measured again, cold, and their records replaced). */
        if (s->cold) f.source_prefix = MT_RECORD_SOURCE_COLD;
        char rerr[1024] = "";
        int64_t damaged = 0;
        mt_status st =
            s->sink.iface->for_each ? s->sink.iface->for_each(s->sink.ctx, &f, resume_cb, &rs, &damaged, rerr, sizeof rerr) : MT_OK;
        /* Damaged rows were passed over (the walk went on): resume without them. */
        if (st == MT_CORRUPT && damaged > 0) {
            if (!first_damaged[0]) snprintf(first_damaged, sizeof first_damaged, "%s", rerr);
            damaged_total += damaged;
            st = MT_OK;
        }
        env_total += rs.env_failures;
        if (st == MT_OK && rs.failed_alloc) st = mt__fail(rerr, sizeof rerr, MT_NOMEM, "out of memory");
        char why[512] = "";
        if (st == MT_OK && u->model && rs.nsamples > 0 &&
            (st = mt_costmodel_update(u->model, rs.samples, rs.nsamples, why, sizeof why)) != MT_OK)
            snprintf(rerr, sizeof rerr, "the cost model refused the %d records of %s: %s", rs.nsamples, mt_template_name(u->t), why);
        free(rs.samples);
        if (st != MT_OK) return mt__fail(err, errlen, st, "tune: resuming from the database failed: %s", rerr[0] ? rerr : mt_status_str(st));
        s->tr[u->task].trials += u->trials;
        s->tr[u->task].errors += rs.errors;
        s->resumed += u->trials;
        if (u->trials > 0) unit_push_history(u);
        u->rounds = u->trials > 0;
        if (s->p.early_stop > 0 && u->trials - u->last_improvement >= s->p.early_stop) u->done = 1;
    }
    s->done_total = s->resumed;
    fill_task_results(s->units, s->nunits, s->tr, s->ntasks);
    size_t o = 0;
    if (damaged_total > 0)
        o += (size_t)snprintf(s->note, sizeof s->note, "resumed past %lld damaged record%s (%s)", (long long)damaged_total,
                              damaged_total == 1 ? "" : "s", first_damaged);
    if (env_total > 0 && o < sizeof s->note)
        snprintf(s->note + o, sizeof s->note - o, "%s%d record%s of a worker killed from outside: measured again", o ? "; " : "", env_total,
                 env_total == 1 ? "" : "s");
    return MT_OK;
}

static mt_status run_alloc_round(tune_run *s, char *err, size_t errlen) {
    int b = s->p.batch;
    s->cfgs = calloc((size_t)b * 2, sizeof *s->cfgs);
    s->results = calloc((size_t)b, sizeof *s->results);
    s->records = calloc((size_t)b, sizeof *s->records);
    s->samples = calloc((size_t)b * (2 + MT__MAX_DRAWS_PER_CONFIG), sizeof *s->samples);
    if (!s->cfgs || !s->results || !s->records || !s->samples) return mt__fail(err, errlen, MT_NOMEM, "tune: out of memory");
    return MT_OK;
}

/* ---- a round ---- */

/* The unit of the next round: units with configs to measure again first
 * (a resume promised them; the gain rule might never come back to their
 * unit), then units never tried (in order), then the task with the best
 * gain, and its unit with the best gain; -1 when every unit is exhausted or
 * stopped early. */
static int scheduler_pick(const tune_run *s) {
    for (int j = 0; j < s->nunits; j++)
        if (!s->units[j].done && s->units[j].nretry > 0) return j;
    for (int j = 0; j < s->nunits; j++)
        if (!s->units[j].done && s->units[j].rounds == 0) return j;
    int pick = -1;
    double best_gain = -1;
    for (int i = 0; i < s->ntasks; i++) {
        double task_gain = -1;
        int task_pick = -1;
        double task_best = s->tr[i].best_ms;
        for (int j = 0; j < s->nunits; j++) {
            const unit *u = &s->units[j];
            if (u->task != i || u->done) continue;
            double g = unit_gain(u, s->tasks[i].count);
            /* A template behind the task's best gains the network nothing until it
             * passes the best. Its forward gain (best_ms / trials) grows with how far
             * behind it is, so one factor of best / u->best only cancels that (a
             * template 10x behind got 26 of a task's 64 trials); squared, the
             * trials a unit gets go as how close it is. */
            if (isfinite(g) && task_best > 0 && u->best_ms > task_best) {
                double behind = task_best / u->best_ms;
                g *= behind * behind;
            }
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
    return pick;
}

/* The round's configs into cfgs[0..r->n). Configs the template cannot
 * realise on this device are never measured nor counted: they are marked in
 * the search and kept as failed samples for the model. */
static mt_status round_draw(tune_run *s, tune_round *r, char *err, size_t errlen) {
    unit *u = r->u;
    const mt_workload *wl = &s->tasks[u->task].wl;
    mt_config *cfgs = s->cfgs;
    int want = s->p.batch;
    if (want > s->p.trials - s->done_total) want = s->p.trials - s->done_total;
    int draws = 0, have_default = 0;
    /* A unit's first round starts from the template's default config (a
     * replay only where it was recorded): a sound kernel to compare against,
     * and a data point the model would rarely get from random configs. */
    if (s->p.start_from_default && u->trials == 0 && u->rounds == 0 && want > 0 &&
        mt_default_config(u->t, wl, &s->dev, &u->space, &cfgs[0], NULL, 0) == MT_OK &&
        mt_template_check(u->t, wl, &u->space, &cfgs[0], s->lim, NULL, 0) == MT_OK && unit_allows(u, &cfgs[0])) {
        r->n = have_default = 1;
        /* ...and is short (the default and one random config), so that
         * every task has a valid config, and the network an estimate,
         * after a fraction of the budget; the gain rule then spends the
         * rest where it matters. */
        if (want > MT__FIRST_ROUND) want = MT__FIRST_ROUND;
    }
    /* Then the configs a worker killed from outside left unmeasured (resume). */
    while (u->nretry > 0 && r->n < want) {
        mt_config c = u->retry[--u->nretry];
        if (mt_template_check(u->t, wl, &u->space, &c, s->lim, NULL, 0) == MT_OK && unit_allows(u, &c)) cfgs[r->n++] = c;
    }
    int nfixed = r->n; /* the default and the retried: the search does not know they are taken */
    r->want = want;
    while (r->n < want && draws < MT__MAX_DRAWS_PER_CONFIG * want) {
        int got = 0;
        char serr[512];
        mt_status st = mt_search_next_batch(u->search, want - r->n, cfgs + r->n, &got, serr, sizeof serr);
        if (st != MT_OK) return mt__fail(err, errlen, st, "tune: search failed: %s", serr);
        if (got == 0) {
            r->exhausted = 1;
            break;
        }
        draws += got;
        int end = r->n + got;
        for (int k = r->n; k < end; k++) {
            /* The search does not know the default and the retried are taken: measure each once. */
            uint64_t idx = mt_space_config_index(&u->space, &cfgs[k]);
            int taken = 0;
            for (int f = 0; f < nfixed && !taken; f++) taken = mt_space_config_index(&u->space, &cfgs[f]) == idx;
            if (taken) continue;
            if (mt_template_check(u->t, wl, &u->space, &cfgs[k], s->lim, NULL, 0) == MT_OK) {
                cfgs[r->n++] = cfgs[k];
                continue;
            }
            mt_search_mark_measured(u->search, &cfgs[k], -1, NULL, 0);
            s->samples[s->p.batch + r->ninvalid++] =
                (mt_cm_sample){.wl = wl, .tmpl = u->t, .space = &u->space, .cfg = cfgs[k], .failed = 1, .dev = &s->dev};
        }
    }
    r->gave_up = draws >= MT__MAX_DRAWS_PER_CONFIG * want;
    u->rounds++;
    return MT_OK;
}

/* Measures cfgs[0..r->n) into results: on the device, or from the recording. */
static void round_measure(tune_run *s, tune_round *r) {
    unit *u = r->u;
    const mt_workload *wl = &s->tasks[u->task].wl;
    if (s->replay)
        r->measured = mt__replay_measure_batch(s->replay, wl, u->t, &u->space, s->cfgs, r->n, s->results, r->merr, sizeof r->merr);
    else if (s->farm)
        r->measured = s->farm->iface->measure_batch(s->farm->ctx, wl, u->t, &u->space, s->cfgs, r->n, s->results, r->merr, sizeof r->merr);
    else
        r->measured = mt_measurer_measure_batch(s->meas, wl, u->t, &u->space, s->cfgs, r->n, s->results, r->merr, sizeof r->merr);
}

/* The record of cfg's measurement. */
static void make_record(const tune_run *s, const unit *u, const mt_config *cfg, const mt_measurer_result *res, mt_record *rec) {
    mt_record_init(rec);
    rec->wl = s->tasks[u->task].wl;
    snprintf(rec->template_name, sizeof rec->template_name, "%s", mt_template_name(u->t));
    mt_config_format(&u->space, cfg, rec->config, sizeof rec->config);
    rec->config_index = (int64_t)mt_space_config_index(&u->space, cfg);
    /* The device that timed it: the tuner's, or the one a remote measurement names. */
    snprintf(rec->device, sizeof rec->device, "%s", res->device[0] ? res->device : s->dev.fingerprint);
    rec->ncosts = res->m.nruns < MT_RECORD_MAX_COSTS ? res->m.nruns : MT_RECORD_MAX_COSTS;
    for (int c = 0; c < rec->ncosts; c++) rec->costs_ms[c] = res->m.run_ms[c];
    rec->median_ms = res->m.status == MT_OK ? res->m.median_ms : 0;
    rec->status = res->m.status;
    snprintf(rec->message, sizeof rec->message, "%s", res->m.message);
    rec->build_s = res->m.build_s;
    snprintf(rec->source, sizeof rec->source, "%s", !s->source[0] && res->m.cold ? MT_RECORD_SOURCE_COLD : s->source);
}

/* Each measured config: its record through the sink (committed before the
 * next), then marked in the search, counted, and kept as a sample. */
static mt_status round_commit(tune_run *s, tune_round *r, char *err, size_t errlen) {
    unit *u = r->u;
    const mt_workload *wl = &s->tasks[u->task].wl;
    for (int k = 0; k < r->n; k++) {
        const mt_measurer_result *res = &s->results[k];
        if (res->skipped) continue;
        /* A batch abandoned because the worker keeps failing: keep those configs unrecorded. */
        if (r->measured != MT_OK && !res->sent_to_worker && res->m.status == r->measured) continue;
        mt_record *rec = &s->records[r->nrec];
        make_record(s, u, &s->cfgs[k], res, rec);
        mt_status st = s->sink.iface->put(s->sink.ctx, rec, err, errlen);
        if (st != MT_OK) return st;
        r->nrec++;
        int ok = res->m.status == MT_OK;
        mt_search_mark_measured(u->search, &s->cfgs[k], ok ? res->m.median_ms : -1, NULL, 0);
        s->samples[r->nsamp++] = (mt_cm_sample){.wl = wl, .tmpl = u->t, .space = &u->space, .cfg = s->cfgs[k], .cost_ms = res->m.median_ms,
                                                 .failed = !ok, .dev = &s->dev};
        u->trials++;
        s->tr[u->task].trials++;
        if (!ok) s->tr[u->task].errors++;
        unit_record_best(u, ok ? res->m.median_ms : 0);
        s->done_total++;
        s->measured_this_run++;
    }
    unit_push_history(u);
    return MT_OK;
}

/* Feeds the round's samples to the unit's model: the measured ones, then
 * the invalid draws. */
static mt_status round_update_model(tune_run *s, tune_round *r, char *err, size_t errlen) {
    if (r->ninvalid > 0) memmove(s->samples + r->nsamp, s->samples + s->p.batch, sizeof *s->samples * (size_t)r->ninvalid);
    r->nsamp += r->ninvalid;
    unit *u = r->u;
    mt_status st;
    char why[512] = "";
    if (u->model && r->nsamp > 0 && (st = mt_costmodel_update(u->model, s->samples, r->nsamp, why, sizeof why)) != MT_OK)
        return mt__fail(err, errlen, st, "tune: cost model update failed: %s", why);
    return MT_OK;
}

/* Tells the caller where the run stands; r NULL: after resuming. */
static void report_progress(tune_run *s, const tune_round *r) {
    if (!s->p.progress) return;
    mt_tune_progress pr = {.task = -1, .trials_done = s->done_total, .trials_total = s->p.trials, .eta_s = -1, .tasks = s->tr,
                           .ntasks = s->ntasks, .network_ms = network_ms(s->tr, s->ntasks), .note = !r && s->note[0] ? s->note : NULL};
    if (r) {
        double el = now_s() - s->run_start;
        int left = s->p.trials - s->done_total;
        double eta = s->measured_this_run > 0 ? el / s->measured_this_run * left : -1;
        if (s->p.time_limit_s > 0) {
            double tl = s->p.time_limit_s - (now_s() - s->t0);
            if (eta < 0 || eta > tl) eta = tl > 0 ? tl : 0;
        }
        pr.task = r->u->task;
        pr.template_name = mt_template_name(r->u->t);
        pr.measured_this_run = s->measured_this_run;
        pr.elapsed_s = now_s() - s->t0;
        pr.eta_s = eta;
        pr.records = s->records;
        pr.nrecords = r->nrec;
    }
    s->p.progress(&pr, s->p.user);
}

/* One round of the unit picked: draw, measure, commit, learn, report. */
static mt_status run_round(tune_run *s, unit *u, char *err, size_t errlen) {
    tune_round r = {.u = u};
    double t = now_s();
    mt_status st = round_draw(s, &r, err, errlen);
    s->search_s += now_s() - t;
    if (st != MT_OK) return st;
    if (r.n == 0) {
        /* Nothing to measure: the model still learns the invalid draws. */
        if ((st = round_update_model(s, &r, err, errlen)) != MT_OK) return st;
        if (r.exhausted || r.gave_up) u->done = 1;
        return MT_OK;
    }
    t = now_s();
    round_measure(s, &r);
    s->measure_s += now_s() - t;
    t = now_s();
    st = round_commit(s, &r, err, errlen);
    s->commit_s += now_s() - t;
    if (st != MT_OK) return st;
    t = now_s();
    st = round_update_model(s, &r, err, errlen);
    s->model_s += now_s() - t;
    if (st != MT_OK) return st;
    if (s->p.early_stop > 0 && u->trials - u->last_improvement >= s->p.early_stop) u->done = 1;
    if (r.measured != MT_OK && r.measured != MT_DEVICE) return mt__fail(err, errlen, r.measured, "tune: measurement failed: %s", r.merr);
    fill_task_results(s->units, s->nunits, s->tr, s->ntasks);
    report_progress(s, &r);
    return MT_OK;
}

/* Also on error: the summary holds what was measured (and committed) before it. */
static void run_close(tune_run *s, mt_tune_summary *out) {
    out->wall_s = now_s() - s->t0;
    out->measured_this_run = s->measured_this_run;
    out->trials_done = s->done_total;
    out->resumed = s->resumed;
    out->search_s = s->search_s;
    out->measure_s = s->measure_s;
    out->commit_s = s->commit_s;
    out->model_s = s->model_s;
    snprintf(out->note, sizeof out->note, "%s", s->note);
    if (s->units) fill_task_results(s->units, s->nunits, s->tr, s->ntasks);
    out->tasks = s->tr;
    out->ntasks = s->tr ? s->ntasks : 0;
    out->network_ms = s->tr ? network_ms(s->tr, s->ntasks) : 0;
    for (int j = 0; j < s->nunits; j++) {
        mt_search_free(s->units[j].search);
        free(s->units[j].retry);
        if (s->units[j].have_space) mt_space_free(&s->units[j].space);
    }
    free(s->units);
    for (int m = 0; m < s->nmodels; m++) mt_costmodel_free(s->models[m].model);
    free(s->cfgs);
    free(s->results);
    free(s->records);
    free(s->samples);
    mt_measurer_stop(s->meas);
    if (s->farm_started) s->farm->iface->stop(s->farm->ctx);
    mt__replay_close(s->replay);
    mt__sink_close(&s->sink);
}

mt_status mt_tune(const mt_task *tasks, int ntasks, const mt_tune_params *params, mt_tune_summary *out, char *err, size_t errlen) {
    return mt__tune_farmed(tasks, ntasks, params, NULL, out, err, errlen);
}

mt_status mt__tune_farmed(const mt_task *tasks, int ntasks, const mt_tune_params *params, const mt__farm *farm, mt_tune_summary *out, char *err,
                          size_t errlen) {
    if (out) memset(out, 0, sizeof *out);
    if (!tasks || ntasks <= 0 || !params || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "tune: no tasks");
    if (farm && params->simulate_db) return mt__fail(err, errlen, MT_INVALID_ARG, "tune: a replay measures nothing: no farm");
    tune_run s;
    mt_status st = run_init(&s, tasks, ntasks, params, err, errlen);
    s.farm = farm;
    if (st == MT_OK) st = run_open_device(&s, out, err, errlen);
    if (st == MT_OK) st = run_make_units(&s, err, errlen);
    if (st == MT_OK) st = run_resume(&s, err, errlen);
    if (st == MT_OK) report_progress(&s, NULL);
    if (st == MT_OK) st = run_alloc_round(&s, err, errlen);
    s.run_start = now_s();
    while (st == MT_OK && s.done_total < s.p.trials) {
        if (s.p.stop && *s.p.stop) {
            out->interrupted = 1;
            break;
        }
        if (s.p.time_limit_s > 0 && now_s() - s.t0 >= s.p.time_limit_s) {
            out->timed_out = 1;
            break;
        }
        int pick = scheduler_pick(&s);
        if (pick < 0) break; /* every unit is exhausted or stopped early */
        st = run_round(&s, &s.units[pick], err, errlen);
        if (st == MT_OK && s.p.stop && *s.p.stop) {
            out->interrupted = 1;
            break;
        }
    }
    run_close(&s, out);
    return st;
}
