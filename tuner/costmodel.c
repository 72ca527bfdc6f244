/* The cost-model dispatcher: one table of kinds, argument checks and the
 * sample count of each handle. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costmodel-impl.h"
#include "fail.h"

static const struct mt_costmodel_i *const kinds[] = {&mt__costmodel_random, &mt__costmodel_xgb, &mt__costmodel_gnn,
                                                     &mt__costmodel_gnn_shared, &mt__costmodel_mlp, &mt__costmodel_gnn_transfer,
                                                     &mt__costmodel_gnn_meta};

#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

int mt_costmodel_kind_count(void) { return NKINDS; }

const char *mt_costmodel_kind_at(int i) { return i >= 0 && i < NKINDS ? kinds[i]->kind : NULL; }

mt_costmodel_params mt_costmodel_default_params(void) {
    return (mt_costmodel_params){
        .seed = 1,
        .threads = 2,
        .xgb_loss = MT_XGB_LOSS_REG,
        .xgb_rounds = 200,
        .xgb_early_stop = 30,
        .xgb_max_depth = 3,
        .xgb_eta = 0.3,
        .plan_size = 64,
        .gnn_model = NULL,
        .gnn_epochs = 30,
        .gnn_adapt_steps = 5,
        .gnn_adapt_lr = 3e-4,
        .gnn_hidden = 32,
        .gnn_layers = 3,
    };
}

mt_status mt_costmodel_create(const char *kind, const mt_costmodel_params *p, mt_costmodel **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL argument");
    *out = NULL;
    const struct mt_costmodel_i *iface = NULL;
    for (int i = 0; i < NKINDS && kind; i++)
        if (strcmp(kinds[i]->kind, kind) == 0) iface = kinds[i];
    if (!iface) {
        char names[128] = "";
        size_t pos = 0;
        for (int i = 0; i < NKINDS && pos < sizeof names; i++)
            pos += (size_t)snprintf(names + pos, sizeof names - pos, "%s%s", i ? ", " : "", kinds[i]->kind);
        return mt__fail(err, errlen, MT_INVALID_ARG, "unknown cost model '%s' (known: %s)", kind ? kind : "(null)", names);
    }
    mt_costmodel_params params = p ? *p : mt_costmodel_default_params();
    if (params.threads < 1) params.threads = 1;
    if (params.xgb_loss != MT_XGB_LOSS_REG && params.xgb_loss != MT_XGB_LOSS_RANK)
        return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: unknown xgb_loss %d", (int)params.xgb_loss);
    if (params.xgb_rounds < 1 || params.xgb_max_depth < 1 || !(params.xgb_eta > 0) || params.xgb_early_stop < 0 || params.plan_size < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: rounds, depth, eta and plan_size must be positive");
    if (params.gnn_epochs < 1 || params.gnn_adapt_steps < 1 || params.gnn_hidden < 1 || params.gnn_layers < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: gnn epochs, adapt steps, hidden and layers must be positive");
    if (!(params.gnn_adapt_lr > 0) || !isfinite(params.gnn_adapt_lr))
        return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: gnn_adapt_lr must be a positive number");
    mt_costmodel *m = calloc(1, sizeof *m);
    if (!m) return mt__fail(err, errlen, MT_NOMEM, "costmodel: out of memory");
    m->iface = iface;
    m->params = params;
    mt_status st = iface->init(m, err, errlen);
    if (st != MT_OK) {
        free(m);
        return st;
    }
    *out = m;
    return MT_OK;
}

void mt_costmodel_free(mt_costmodel *m) {
    if (!m) return;
    if (m->iface->free) m->iface->free(m);
    free(m);
}

const char *mt_costmodel_kind(const mt_costmodel *m) { return m ? m->iface->kind : "(null)"; }

int64_t mt_costmodel_trained(const mt_costmodel *m) { return m ? m->trained : 0; }

static mt_status check_task(const char *what, int i, const mt_workload *wl, const mt_template *t, const mt_space *sp, char *err,
                            size_t errlen) {
    if (!wl || !t || !sp) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: %s %d has a NULL workload, template or space", what, i);
    if (strcmp(sp->template_name, mt_template_name(t)) != 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: %s %d: space of '%s' given with template '%s'", what, i,
                        sp->template_name, mt_template_name(t));
    return MT_OK;
}

static mt_status check_samples(const mt_cm_sample *s, int n, char *err, size_t errlen) {
    if (n > 0 && !s) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL samples");
    for (int i = 0; i < n; i++) {
        mt_status st = check_task("sample", i, s[i].wl, s[i].tmpl, s[i].space, err, errlen);
        if (st != MT_OK) return st;
        if (mt_space_check(s[i].space, &s[i].cfg) != MT_OK)
            return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: sample %d: config is not in its space", i);
        if (!s[i].failed && !(s[i].cost_ms > 0 && isfinite(s[i].cost_ms)))
            return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: sample %d: cost %g ms (must be > 0 unless failed)", i, s[i].cost_ms);
    }
    return MT_OK;
}

mt_status mt_costmodel_fit(mt_costmodel *m, const mt_cm_sample *samples, int n, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL model");
    if (n < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: fit needs at least one sample (got %d)", n);
    mt_status st = check_samples(samples, n, err, errlen);
    if (st != MT_OK) return st;
    st = m->iface->fit(m, samples, n, err, errlen);
    if (st == MT_OK) m->trained = n;
    return st;
}

mt_status mt_costmodel_update(mt_costmodel *m, const mt_cm_sample *samples, int n, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL model");
    if (n < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: negative sample count");
    if (n == 0) return MT_OK;
    mt_status st = check_samples(samples, n, err, errlen);
    if (st != MT_OK) return st;
    if (m->iface->update) st = m->iface->update(m, samples, n, err, errlen);
    if (st == MT_OK) m->trained += n;
    return st;
}

mt_status mt_costmodel_predict(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err, size_t errlen) {
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL model");
    if (!q || n < 0 || (n > 0 && (!cfgs || !scores))) return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: NULL argument");
    mt_status st = check_task("query", 0, q->wl, q->tmpl, q->space, err, errlen);
    if (st != MT_OK) return st;
    for (int i = 0; i < n; i++)
        if (mt_space_check(q->space, &cfgs[i]) != MT_OK)
            return mt__fail(err, errlen, MT_INVALID_ARG, "costmodel: candidate %d is not in the query's space", i);
    if (n == 0) return MT_OK;
    return m->iface->predict(m, q, cfgs, n, scores, err, errlen);
}
