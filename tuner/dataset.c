/* Tuning records as cost-model samples (tuner/dataset.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "hash.h"
#include "template.h"
#include "fail.h"

/* Interned objects are malloc'd one by one so that the pointers samples hold
 * stay valid while the arrays of pointers grow. */
typedef struct ds_space {
    int workload;
    const mt_template *t;
    mt_space sp;
} ds_space;

typedef struct ds_device {
    char fp[17];
    mt_device_info info;
} ds_device;

struct mt_dataset {
    mt_workload **wl;
    char **wl_text;
    int nwl, wlcap;
    ds_space **sp;
    int nsp, spcap;
    ds_device **dev;
    int ndev, devcap;
    mt_cm_sample *s;
    int *s_wl;
    int ns, scap;
    int skipped;
    int failed_alloc;
    mt_db *db;
};

/* Grows *arr (of elem-sized items) to hold one more; 0 on failure. */
static int grow(void **arr, int n, int *cap, size_t elem) {
    if (n < *cap) return 1;
    int c = *cap ? 2 * *cap : 32;
    void *p = realloc(*arr, elem * (size_t)c);
    if (!p) return 0;
    *arr = p;
    *cap = c;
    return 1;
}

static int intern_workload(mt_dataset *ds, const mt_workload *wl) {
    char text[256];
    mt_workload_format(wl, text, sizeof text);
    for (int i = 0; i < ds->nwl; i++)
        if (strcmp(ds->wl_text[i], text) == 0) return i;
    int cap = ds->wlcap;
    if (!grow((void **)&ds->wl, ds->nwl, &cap, sizeof *ds->wl)) return -1;
    int cap2 = ds->wlcap;
    if (!grow((void **)&ds->wl_text, ds->nwl, &cap2, sizeof *ds->wl_text)) return -1;
    ds->wlcap = cap < cap2 ? cap : cap2;
    mt_workload *w = malloc(sizeof *w);
    char *t = strdup(text);
    if (!w || !t) {
        free(w);
        free(t);
        return -1;
    }
    *w = *wl;
    ds->wl[ds->nwl] = w;
    ds->wl_text[ds->nwl] = t;
    return ds->nwl++;
}

static ds_space *intern_space(mt_dataset *ds, int w, const mt_template *t) {
    for (int i = 0; i < ds->nsp; i++)
        if (ds->sp[i]->workload == w && ds->sp[i]->t == t) return ds->sp[i];
    if (!grow((void **)&ds->sp, ds->nsp, &ds->spcap, sizeof *ds->sp)) return NULL;
    ds_space *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->workload = w;
    s->t = t;
    if (mt_template_space(t, ds->wl[w], &s->sp) != MT_OK) {
        free(s);
        return NULL;
    }
    ds->sp[ds->nsp++] = s;
    return s;
}

static const mt_device_info *intern_device(mt_dataset *ds, const char *fp) {
    for (int i = 0; i < ds->ndev; i++)
        if (strcmp(ds->dev[i]->fp, fp) == 0) return &ds->dev[i]->info;
    if (!grow((void **)&ds->dev, ds->ndev, &ds->devcap, sizeof *ds->dev)) return NULL;
    ds_device *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    snprintf(d->fp, sizeof d->fp, "%s", fp);
    mt_db_device row;
    /* A device the database cannot describe still groups its records; its
     * features are then 0, as for an unknown device. */
    if (mt_db_get_device(ds->db, fp, &row, &d->info, NULL, 0) != MT_OK) memset(&d->info, 0, sizeof d->info);
    snprintf(d->info.fingerprint, sizeof d->info.fingerprint, "%s", fp);
    ds->dev[ds->ndev++] = d;
    return &d->info;
}

static int load_cb(const mt_record *rec, void *user) {
    mt_dataset *ds = user;
    const mt_template *t = mt_template_find(rec->template_name);
    /* A failure of the environment says nothing of the config: no sample. */
    if (!t || strncmp(rec->source, "autotvm:", 8) == 0 || !mt_template_accepts(t, &rec->wl) || mt_record_env_failure(rec)) {
        ds->skipped++;
        return 0;
    }
    int w = intern_workload(ds, &rec->wl);
    if (w < 0) return ds->failed_alloc = 1;
    ds_space *sp = intern_space(ds, w, t);
    if (!sp) return ds->failed_alloc = 1;
    mt_config cfg;
    if (mt_config_parse(&sp->sp, rec->config, &cfg, NULL, 0) != MT_OK) { /* from an older space */
        ds->skipped++;
        return 0;
    }
    const mt_device_info *dev = intern_device(ds, rec->device);
    if (!dev) return ds->failed_alloc = 1;
    int cap = ds->scap;
    if (!grow((void **)&ds->s, ds->ns, &cap, sizeof *ds->s)) return ds->failed_alloc = 1;
    int cap2 = ds->scap;
    if (!grow((void **)&ds->s_wl, ds->ns, &cap2, sizeof *ds->s_wl)) return ds->failed_alloc = 1;
    ds->scap = cap < cap2 ? cap : cap2;
    ds->s[ds->ns] = (mt_cm_sample){.wl = ds->wl[w], .tmpl = t, .space = &sp->sp, .cfg = cfg, .cost_ms = rec->median_ms,
                                   .failed = rec->status != MT_OK || !(rec->median_ms > 0), .dev = dev};
    ds->s_wl[ds->ns++] = w;
    return 0;
}

mt_status mt_dataset_load(mt_db *db, const char *device_fp, mt_dataset **out, char *err, size_t errlen) {
    if (!db || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "dataset: NULL argument");
    *out = NULL;
    mt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return mt__fail(err, errlen, MT_NOMEM, "dataset: out of memory");
    ds->db = db;
    mt_db_filter f = {.device = device_fp};
    char why[512] = "";
    mt_status st = mt_db_for_each(db, &f, load_cb, ds, why, sizeof why);
    ds->db = NULL;
    if (st == MT_OK && ds->failed_alloc) st = mt__fail(err, errlen, MT_NOMEM, "dataset: out of memory");
    else if (st != MT_OK) mt__fail(err, errlen, st, "dataset: reading records: %s", why);
    else if (ds->ns == 0)
        st = mt__fail(err, errlen, MT_NOT_FOUND, "dataset: no usable records%s%s (%d skipped)", device_fp ? " for device " : "",
                      device_fp ? device_fp : "", ds->skipped);
    if (st != MT_OK) {
        mt_dataset_free(ds);
        return st;
    }
    *out = ds;
    return MT_OK;
}

void mt_dataset_free(mt_dataset *ds) {
    if (!ds) return;
    for (int i = 0; i < ds->nwl; i++) {
        free(ds->wl[i]);
        free(ds->wl_text[i]);
    }
    for (int i = 0; i < ds->nsp; i++) {
        mt_space_free(&ds->sp[i]->sp);
        free(ds->sp[i]);
    }
    for (int i = 0; i < ds->ndev; i++) free(ds->dev[i]);
    free(ds->wl);
    free(ds->wl_text);
    free(ds->sp);
    free(ds->dev);
    free(ds->s);
    free(ds->s_wl);
    free(ds);
}

int mt_dataset_nsamples(const mt_dataset *ds) { return ds ? ds->ns : 0; }
const mt_cm_sample *mt_dataset_samples(const mt_dataset *ds) { return ds ? ds->s : NULL; }
int mt_dataset_nworkloads(const mt_dataset *ds) { return ds ? ds->nwl : 0; }
const mt_workload *mt_dataset_workload(const mt_dataset *ds, int w) { return ds && w >= 0 && w < ds->nwl ? ds->wl[w] : NULL; }
int mt_dataset_sample_workload(const mt_dataset *ds, int i) { return ds && i >= 0 && i < ds->ns ? ds->s_wl[i] : -1; }
int mt_dataset_skipped(const mt_dataset *ds) { return ds ? ds->skipped : 0; }

/* splitmix64 finaliser over an FNV-1a of the text: a stable pseudo-random key. */
static uint64_t text_key(const char *s, uint64_t seed) {
    uint64_t h = mt__hash64(s, strlen(s), seed);
    return mt_rng_next(&h);
}

void mt_dataset_split(const mt_dataset *ds, double frac, uint64_t seed, int *holdout) {
    if (!ds || !holdout) return;
    int n = ds->nwl;
    int want = (int)(frac * n + 0.5);
    if (n >= 2) {
        if (want < 1) want = 1;
        if (want > n - 1) want = n - 1;
    } else want = 0;
    /* The `want` workloads with the smallest keys are held out. */
    uint64_t *key = malloc(sizeof *key * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) holdout[i] = 0;
    if (!key) { /* degrade to every other workload rather than fail */
        for (int i = 0; i < n && want > 0; i += 2, want--) holdout[i] = 1;
        return;
    }
    for (int i = 0; i < n; i++) key[i] = text_key(ds->wl_text[i], seed);
    for (int k = 0; k < want; k++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!holdout[i] && (best < 0 || key[i] < key[best])) best = i;
        holdout[best] = 1;
    }
    free(key);
}

mt_status mt_dataset_select(const mt_dataset *ds, const int *holdout, int want, double keep, uint64_t seed, mt_cm_sample **out, int *n) {
    if (!ds || !holdout || !out || !n || !(keep > 0) || keep > 1) return MT_INVALID_ARG;
    mt_cm_sample *s = malloc(sizeof *s * (size_t)(ds->ns ? ds->ns : 1));
    if (!s) return MT_NOMEM;
    int k = 0;
    for (int i = 0; i < ds->ns; i++) {
        if ((holdout[ds->s_wl[i]] != 0) != (want != 0)) continue;
        if (keep < 1) {
            uint64_t h = seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));
            if ((double)(mt_rng_next(&h) >> 11) / 9007199254740992.0 >= keep) continue;
        }
        s[k++] = ds->s[i];
    }
    *out = s;
    *n = k;
    return MT_OK;
}
