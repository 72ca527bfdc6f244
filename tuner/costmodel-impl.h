/* Private: the table each cost-model kind fills in, and the model handle.
 *
 * A kind is `{ iface, context }`: the dispatcher (tuner/costmodel.c) checks
 * arguments, keeps the sample count and calls the kind's functions, which
 * write their messages into the caller's buffer. `update` may be NULL for
 * kinds that learn nothing ("random"): the dispatcher then only counts the
 * samples.
 */
#ifndef MTGPU_COSTMODEL_IMPL_H
#define MTGPU_COSTMODEL_IMPL_H

#include "costmodel.h"

struct mt_costmodel_i {
    /* .kind    = */ const char *kind;
    /* .init    = */ mt_status (*init)(mt_costmodel *m, char *err, size_t errlen); /* sets m->context */
    /* .fit     = */ mt_status (*fit)(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen);
    /* .update  = */ mt_status (*update)(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen); /* optional */
    /* .predict = */ mt_status (*predict)(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err,
                                          size_t errlen);
    /* .free    = */ void (*free)(mt_costmodel *m); /* frees m->context */
};

struct mt_costmodel {
    const struct mt_costmodel_i *iface;
    void *context;
    mt_costmodel_params params;
    int64_t trained; /* samples behind the current model */
};

extern const struct mt_costmodel_i mt__costmodel_random;
extern const struct mt_costmodel_i mt__costmodel_xgb;
extern const struct mt_costmodel_i mt__costmodel_gnn;
extern const struct mt_costmodel_i mt__costmodel_gnn_shared;
extern const struct mt_costmodel_i mt__costmodel_mlp;
extern const struct mt_costmodel_i mt__costmodel_gnn_transfer;
extern const struct mt_costmodel_i mt__costmodel_gnn_meta;

#endif
