/* The "random" cost model: uniformly random scores, reproducible for a seed.
 * It learns nothing; it is the baseline every other model must beat, and
 * model-guided search with it degenerates to random search. */
#include <stdlib.h>

#include "costmodel-impl.h"
#include "fail.h"

typedef struct random_cm {
    uint64_t rng;
} random_cm;

static mt_status random_init(mt_costmodel *m, char *err, size_t errlen) {
    random_cm *r = calloc(1, sizeof *r);
    if (!r) return mt__fail(err, errlen, MT_NOMEM, "random: out of memory");
    r->rng = m->params.seed;
    m->context = r;
    return MT_OK;
}

static mt_status random_fit(mt_costmodel *m, const mt_cm_sample *s, int n, char *err, size_t errlen) {
    (void)m, (void)s, (void)n, (void)err, (void)errlen;
    return MT_OK;
}

static mt_status random_predict(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err,
                                size_t errlen) {
    (void)q, (void)cfgs, (void)err, (void)errlen;
    random_cm *r = m->context;
    for (int i = 0; i < n; i++) scores[i] = (double)(mt_rng_next(&r->rng) >> 11) * 0x1.0p-53;
    return MT_OK;
}

static void random_free(mt_costmodel *m) { free(m->context); }

const struct mt_costmodel_i mt__costmodel_random = {
    /* .kind    = */ "random",
    /* .init    = */ random_init,
    /* .fit     = */ random_fit,
    /* .update  = */ NULL,
    /* .predict = */ random_predict,
    /* .free    = */ random_free,
};
