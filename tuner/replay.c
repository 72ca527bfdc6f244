/* Replay: measurements answered from the records of one device (replay.h). */
#include "replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "strbuf.h"
#include "tune-impl.h"

/* One recorded measurement, as much of it as a measurement result carries. */
typedef struct entry {
    uint64_t idx;
    size_t seq;    /* order of reading */
    mt_status status;
    double median_ms;
    double build_s;
    int ncosts;
    double costs_ms[MT_RECORD_MAX_COSTS];
    char *message; /* NULL when empty */
} entry;

/* The records of one (workload, template). */
typedef struct replay_unit {
    mt_workload wl;
    const mt_template *t;
    entry *e;      /* ascending by idx */
    uint64_t *idx; /* the same indices alone: the search's restriction */
    size_t n, cap;
} replay_unit;

struct mt__replay {
    replay_unit *units;
    int nunits;
};

static void unit_free(replay_unit *u) {
    for (size_t i = 0; i < u->n; i++) free(u->e[i].message);
    free(u->e);
    free(u->idx);
}

void mt__replay_close(mt__replay *r) {
    if (!r) return;
    for (int i = 0; i < r->nunits; i++) unit_free(&r->units[i]);
    free(r->units);
    free(r);
}

static const replay_unit *find_unit(const mt__replay *r, const mt_workload *wl, const mt_template *t) {
    for (int i = 0; i < r->nunits; i++)
        if (r->units[i].t == t && memcmp(&r->units[i].wl, wl, sizeof *wl) == 0) return &r->units[i];
    return NULL;
}

static const entry *find_entry(const replay_unit *u, uint64_t idx) {
    size_t lo = 0, hi = u->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->e[mid].idx < idx) lo = mid + 1;
        else hi = mid;
    }
    return lo < u->n && u->e[lo].idx == idx ? &u->e[lo] : NULL;
}

/* ---- choosing the device ---- */

typedef struct device_count {
    char fp[17];
    int64_t n;
} device_count;

typedef struct count_walk {
    mt_db *db;
    const mt_task *tasks;
    int ntasks;
    const char *templates;
    device_count *d;
    int nd, cap;
    mt_status st;
    char msg[1024];  /* the reason of a failed count */
} count_walk;

/* Records of dev for the tasks' accepted and selected templates. */
static int count_device(const mt_db_device *dev, void *user) {
    count_walk *w = user;
    int64_t total = 0;
    for (int i = 0; i < w->ntasks; i++)
        for (int ti = 0; ti < mt_template_count(); ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &w->tasks[i].wl) || !mt__template_selected(w->templates, mt_template_name(t))) continue;
            int64_t n = 0;
            if ((w->st = mt_db_count(w->db, &w->tasks[i].wl, dev->fingerprint, mt_template_name(t), &n, w->msg, sizeof w->msg)) != MT_OK)
                return 1;
            total += n;
        }
    if (total == 0) return 0;
    if (w->nd == w->cap) {
        int cap = w->cap ? 2 * w->cap : 8;
        device_count *d = realloc(w->d, sizeof *d * (size_t)cap);
        if (!d) {
            w->st = MT_NOMEM;
            return 1;
        }
        w->d = d;
        w->cap = cap;
    }
    snprintf(w->d[w->nd].fp, sizeof w->d[w->nd].fp, "%s", dev->fingerprint);
    w->d[w->nd++].n = total;
    return 0;
}

/* "FP (N records), ..." of the devices counted. */
static void list_devices(const count_walk *w, char *buf, size_t len) {
    mt_strbuf sb = {0};
    for (int i = 0; i < w->nd; i++) mt__sb_printf(&sb, "%s%s (%lld records)", i ? ", " : "", w->d[i].fp, (long long)w->d[i].n);
    snprintf(buf, len, "%s", sb.failed || !sb.data ? "" : sb.data);
    mt__sb_free(&sb);
}

/* The fingerprint to replay into fp: device_fp when it has records of the
 * tasks, else the device with the most of them. */
static mt_status choose_device(mt_db *db, const char *path, const char *device_fp, const mt_task *tasks, int ntasks, const char *templates,
                               char fp[17], char *err, size_t errlen) {
    count_walk w = {.db = db, .tasks = tasks, .ntasks = ntasks, .templates = templates};
    mt_status st = mt_db_for_each_device(db, count_device, &w, w.msg, sizeof w.msg);
    if (st == MT_OK) st = w.st;
    char list[2048];
    list_devices(&w, list, sizeof list);
    if (st != MT_OK) {
        mt__fail(err, errlen, st, "replay: counting the records of %s failed: %s", path, st == MT_NOMEM ? "out of memory" : w.msg);
    } else if (w.nd == 0) {
        st = mt__fail(err, errlen, MT_NOT_FOUND, "replay: %s has no records of these tasks%s", path,
                      templates && *templates ? " and templates" : "");
    } else if (device_fp && *device_fp) {
        int found = 0;
        for (int i = 0; i < w.nd && !found; i++) found = strcmp(w.d[i].fp, device_fp) == 0;
        if (found) snprintf(fp, 17, "%s", device_fp);
        else
            st = mt__fail(err, errlen, MT_NOT_FOUND, "replay: %s has no records of these tasks on device %s (devices with some: %s)", path,
                          device_fp, list);
    } else {
        int best = 0, ties = 0;
        for (int i = 1; i < w.nd; i++)
            if (w.d[i].n > w.d[best].n) best = i, ties = 0;
            else if (w.d[i].n == w.d[best].n) ties++;
        if (ties)
            st = mt__fail(err, errlen, MT_INVALID_ARG, "replay: several devices have the most records of these tasks in %s; choose one: %s",
                          path, list);
        else snprintf(fp, 17, "%s", w.d[best].fp);
    }
    free(w.d);
    return st;
}

/* ---- loading ---- */

typedef struct load_walk {
    replay_unit *u;
    const mt_space *sp;
    int failed_alloc;
} load_walk;

static int load_record(const mt_record *rec, void *user) {
    load_walk *w = user;
    replay_unit *u = w->u;
    mt_config cfg;
    if (mt_config_parse(w->sp, rec->config, &cfg, NULL, 0) != MT_OK) return 0; /* from an older space */
    if (mt_record_env_failure(rec)) return 0; /* the recording's machine failed, not the config: nothing to replay */
    if (u->n == u->cap) {
        size_t cap = u->cap ? 2 * u->cap : 64;
        entry *e = realloc(u->e, sizeof *e * cap);
        if (!e) {
            w->failed_alloc = 1;
            return 1;
        }
        u->e = e;
        u->cap = cap;
    }
    entry *e = &u->e[u->n];
    memset(e, 0, sizeof *e);
    e->idx = mt_space_config_index(w->sp, &cfg);
    e->seq = u->n;
    e->status = rec->status;
    e->median_ms = rec->status == MT_OK ? rec->median_ms : 0;
    e->build_s = rec->build_s;
    e->ncosts = rec->ncosts < 0 ? 0 : rec->ncosts > MT_RECORD_MAX_COSTS ? MT_RECORD_MAX_COSTS : rec->ncosts;
    memcpy(e->costs_ms, rec->costs_ms, sizeof(double) * (size_t)e->ncosts);
    if (rec->message[0] && !(e->message = strdup(rec->message))) {
        w->failed_alloc = 1;
        return 1;
    }
    u->n++;
    return 0;
}

static int by_idx(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->idx != y->idx) return x->idx < y->idx ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts u's entries, keeps the first recorded of any index met twice (two
 * config texts of one config), and fills the index array. */
static mt_status unit_index(replay_unit *u) {
    if (u->n > 1) qsort(u->e, u->n, sizeof *u->e, by_idx);
    size_t k = 0;
    for (size_t i = 0; i < u->n; i++) {
        if (k > 0 && u->e[k - 1].idx == u->e[i].idx) {
            free(u->e[i].message);
            continue;
        }
        u->e[k++] = u->e[i];
    }
    u->n = k;
    u->idx = malloc(sizeof *u->idx * (u->n ? u->n : 1));
    if (!u->idx) return MT_NOMEM;
    for (size_t i = 0; i < u->n; i++) u->idx[i] = u->e[i].idx;
    return MT_OK;
}

mt_status mt__replay_open(const char *path, const char *device_fp, const mt_task *tasks, int ntasks, const char *templates, mt__replay **out,
                          mt_device_info *dev, int *described, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!path || !tasks || ntasks <= 0 || !out || !dev || !described) return mt__fail(err, errlen, MT_INVALID_ARG, "replay: bad arguments");
    mt_db_params dbp = mt_db_default_params();
    dbp.readonly = 1;
    mt_db *db = NULL;
    mt_status st = mt_db_open(path, &dbp, &db, err, errlen);
    if (st != MT_OK) return st;
    mt__replay *r = calloc(1, sizeof *r);
    char fp[17] = "";
    mt_db_device row;
    if (!r || !(r->units = calloc((size_t)ntasks * (size_t)mt_template_count(), sizeof *r->units))) {
        st = mt__fail(err, errlen, MT_NOMEM, "replay: out of memory");
        goto fail;
    }
    if ((st = choose_device(db, path, device_fp, tasks, ntasks, templates, fp, err, errlen)) != MT_OK) goto fail;
    char msg[1024];
    if ((st = mt_db_get_device(db, fp, &row, dev, msg, sizeof msg)) != MT_OK) {
        mt__fail(err, errlen, st, "replay: reading device %s: %s", fp, msg);
        goto fail;
    }
    snprintf(dev->fingerprint, sizeof dev->fingerprint, "%s", fp);
    *described = strcmp(row.backend, "unknown") != 0 && dev->max_work_group_size > 0;
    for (int i = 0; i < ntasks; i++)
        for (int ti = 0; ti < mt_template_count(); ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &tasks[i].wl) || !mt__template_selected(templates, mt_template_name(t))) continue;
            if (find_unit(r, &tasks[i].wl, t)) continue; /* a task listed twice */
            replay_unit *u = &r->units[r->nunits++];
            u->wl = tasks[i].wl;
            u->t = t;
            mt_space sp;
            if ((st = mt_template_space(t, &tasks[i].wl, &sp)) != MT_OK) {
                mt__fail(err, errlen, st, "replay: the space of '%s' for task %d: %s", mt_template_name(t), i, mt_status_str(st));
                goto fail;
            }
            load_walk w = {.u = u, .sp = &sp};
            mt_db_filter f = {.wl = &tasks[i].wl, .device = fp, .template_name = mt_template_name(t)};
            st = mt_db_for_each(db, &f, load_record, &w, msg, sizeof msg);
            mt_space_free(&sp);
            if (st == MT_OK && (w.failed_alloc || unit_index(u) != MT_OK)) st = MT_NOMEM;
            if (st != MT_OK) {
                mt__fail(err, errlen, st, "replay: reading the records of %s: %s", path, st == MT_NOMEM ? "out of memory" : msg);
                goto fail;
            }
        }
    mt_db_close(db);
    *out = r;
    return MT_OK;
fail:
    mt_db_close(db);
    mt__replay_close(r);
    return st;
}

void mt__replay_configs(const mt__replay *r, const mt_workload *wl, const mt_template *t, const uint64_t **idx, size_t *n) {
    static const uint64_t none[1] = {0};
    const replay_unit *u = r ? find_unit(r, wl, t) : NULL;
    *idx = u ? u->idx : none;
    *n = u ? u->n : 0;
}

mt_status mt__replay_measure_batch(mt__replay *r, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs,
                                   int n, mt_measurer_result *results, char *err, size_t errlen) {
    const replay_unit *u = find_unit(r, wl, t);
    mt_status st = MT_OK;
    for (int i = 0; i < n; i++) {
        mt_measurer_result *res = &results[i];
        memset(res, 0, sizeof *res);
        const entry *e = u ? find_entry(u, mt_space_config_index(sp, &cfgs[i])) : NULL;
        if (!e) {
            res->skipped = 1;
            res->m.status = MT_NOT_FOUND;
            if (st == MT_OK) {
                char text[1024];
                mt_config_format(sp, &cfgs[i], text, sizeof text);
                st = mt__fail(err, errlen, MT_NOT_FOUND, "replay: %s config %s is not in the recording", mt_template_name(t), text);
            }
            continue;
        }
        res->sent_to_worker = 1;
        res->m.status = e->status;
        res->m.median_ms = e->median_ms;
        res->m.build_s = e->build_s;
        res->m.max_rel_err = -1;
        int nr = e->ncosts < MT_MEASURE_MAX_RUNS ? e->ncosts : MT_MEASURE_MAX_RUNS;
        res->m.nruns = res->m.repeats = nr;
        double min = 0;
        for (int k = 0; k < nr; k++) {
            res->m.run_ms[k] = e->costs_ms[k];
            if (k == 0 || e->costs_ms[k] < min) min = e->costs_ms[k];
        }
        res->m.min_ms = e->status == MT_OK ? (nr ? min : e->median_ms) : 0;
        res->m.gflops = e->median_ms > 0 ? mt_workload_flops(wl) / (e->median_ms * 1e6) : 0;
        if (e->message) snprintf(res->m.message, sizeof res->m.message, "%s", e->message);
    }
    return st;
}
