/* Cost models: learn from measured schedules, score unmeasured ones.
 *
 * A cost model is fitted on measured samples and asked for scores of
 * candidate configs; a higher score means "predicted faster". Scores are only
 * comparable within one call's candidates of one (workload, template): a
 * ranking model (like "xgb") gives margins, not times.
 *
 * Kinds (one dispatch table in tuner/costmodel.c; later kinds join it):
 *   "random"  uniformly random scores in [0, 1), seeded; learns nothing.
 *   "xgb"     AutoTVM's baseline: gradient-boosted trees (XGBoost) over
 *             loop-nest features of the kernel IR (tuner/loop_features.h), with
 *             AutoTVM's two losses: regression on normalised throughput
 *             (loss_type="reg", the default here as in TVM's current
 *             tutorials) or pairwise ranking (loss_type="rank",
 *             rank:pairwise). Samples of several workloads and templates may
 *             be mixed: it trains one model on all of them; throughputs are
 *             normalised per (workload, template), which is also the ranking
 *             group.
 *   "gnn"     the structured model of docs/design.md: each config's
 *             kernel IR becomes a typed graph (graph_enc/graph_enc.h) scored by a
 *             relational GNN with one module per node and edge type
 *             (gnn/gnn.h), trained with pairwise ranking plus regression on
 *             per-(workload, template) normalised log throughput. It learns
 *             from the task's own records, refitted from scratch on every
 *             update, like "xgb". (Given gnn_model it behaves as
 *             "gnn-transfer", as it did before that kind existed.)
 *   "gnn-shared"  the same GNN with one module for all node and edge types.
 *   "mlp"     an MLP over the mean and max of the same node features: the
 *             "flat features" baseline for the GNN.
 *   "gnn-transfer"  transfer learning: starts from the model file gnn_model
 *             (pooled-trained by `mtgpu train`, any architecture) and
 *             fine-tunes it on the records: a fit starts again from the
 *             file's weights, an update continues from the current ones, each
 *             with gnn_adapt_steps Adam steps at gnn_adapt_lr.
 *   "gnn-meta"  MetaTune: starts from a meta-trained model file gnn_model
 *             (`mtgpu train --meta`; any other file is refused). A (workload,
 *             template, device) group with no records is scored by the
 *             file's initial weights (zero-shot); once it has records, by
 *             weights adapted from the initial ones on all of them with the
 *             file's inner procedure (mt_gnn_adapt), redone from the initial
 *             weights on every fit and update, so that tuning adapts exactly
 *             as meta-training did. gnn_adapt_steps and gnn_adapt_lr do not
 *             apply.
 *
 * Samples are copied (as features) when given: the model keeps no pointer to
 * a caller's workload, template, space or config. A model is not thread-safe;
 * use one per thread or lock around it. */
#ifndef MTGPU_COSTMODEL_H
#define MTGPU_COSTMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/device.h"
#include "gnn.h"
#include "space.h"
#include "mtgpu/status.h"
#include "template.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_costmodel mt_costmodel;

typedef enum mt_xgb_loss {
    MT_XGB_LOSS_REG,  /* reg:squarederror on min cost / cost per group (failed: 0) */
    MT_XGB_LOSS_RANK  /* rank:pairwise, one group per (workload, template) */
} mt_xgb_loss;

typedef struct mt_costmodel_params {
    uint64_t seed;      /* random scores, XGBoost's seed and row order (default 1) */
    int threads;        /* most worker threads for features and XGBoost (default 2;
                           <= 0: 1); XGBoost gets one per 2000 rows, up to this */
    /* xgb */
    mt_xgb_loss xgb_loss; /* default MT_XGB_LOSS_REG: in model-guided search it
                           reaches near-optimal configs in 2-4x fewer trials than
                           rank:pairwise, which weighs every pair of bad configs
                           as much as the pairs near the top */
    int xgb_rounds;     /* most boosting rounds per fit (default 200) */
    int xgb_early_stop; /* stop after this many rounds without a better training
                           recall curve, checked every 5 rounds; 0: always run
                           xgb_rounds (default 30) */
    int xgb_max_depth;  /* tree depth (default 3) */
    double xgb_eta;     /* learning rate (default 0.3) */
    int plan_size;      /* the recall@k that early stopping watches, like AutoTVM's
                           plan size: the tuner's batch (default 64) */
    /* the gnn kinds and mlp */
    const char *gnn_model; /* model file to start from (`mtgpu train`; needed by gnn-transfer
                           and gnn-meta; NULL: learn from the task's records only);
                           borrowed: must outlive the model. Its architecture wins over
                           the kind's. */
    int gnn_epochs;     /* passes over the samples per fit from scratch (default 30) */
    int gnn_adapt_steps; /* gnn-transfer: Adam steps per fit or update (default 5) */
    double gnn_adapt_lr; /* gnn-transfer: their step size (default 3e-4). Measured by
                           few-shot evaluation (mtgpu eval-model --adapt-k) of a pooled
                           model on ResNet-18's and SqueezeNet 1.1's convolutions held
                           out of data/opencl_dataset.db: 5 steps at 3e-4 ranked best
                           at k = 8 and 32 (pairwise 0.807 and 0.815); 20 or 60 steps,
                           or rates of 1e-3 and 3e-3, ranked worse at k = 8 (0.753 at
                           60 steps and 3e-3, the former default) */
    int gnn_hidden;     /* width (default 32) */
    int gnn_layers;     /* message-passing rounds, or the MLP's hidden layers (default 3) */
} mt_costmodel_params;

mt_costmodel_params mt_costmodel_default_params(void);

/* One measured config. cost_ms is the median time; failed != 0 marks a config
 * that did not build, launch or verify (AutoTVM gives those throughput 0, so
 * a ranking model learns to put them last). */
typedef struct mt_cm_sample {
    const mt_workload *wl;
    const mt_template *tmpl;
    const mt_space *space;   /* the template's space for wl */
    mt_config cfg;
    double cost_ms;          /* ignored when failed */
    int failed;
    const mt_device_info *dev; /* the device it was measured on (NULL: unknown);
                                  models that read the device ("gnn") use it */
} mt_cm_sample;

/* What the candidates of one predict call belong to. */
typedef struct mt_cm_query {
    const mt_workload *wl;
    const mt_template *tmpl;
    const mt_space *space;
    const mt_device_info *dev; /* the device to predict for (NULL: unknown) */
} mt_cm_query;

/* Creates a model of the given kind. MT_INVALID_ARG, with the known kinds
 * listed in err, for an unknown kind; p NULL: default params. */
mt_status mt_costmodel_create(const char *kind, const mt_costmodel_params *p, mt_costmodel **out, char *err, size_t errlen);
void mt_costmodel_free(mt_costmodel *m);
const char *mt_costmodel_kind(const mt_costmodel *m);

/* Number of kinds and their names, for help texts. */
int mt_costmodel_kind_count(void);
const char *mt_costmodel_kind_at(int i);

/* Trains from scratch on samples[0..n), forgetting earlier samples.
 * MT_INVALID_ARG when n < 1 or a sample is malformed. On failure the model
 * is left as it was before the call. */
mt_status mt_costmodel_fit(mt_costmodel *m, const mt_cm_sample *samples, int n, char *err, size_t errlen);
/* Adds newly measured samples to everything seen since the last fit and
 * retrains ("xgb" refits on all of them, like AutoTVM). n == 0 is a no-op.
 * On failure the samples are not added and the previous model stays. */
mt_status mt_costmodel_update(mt_costmodel *m, const mt_cm_sample *samples, int n, char *err, size_t errlen);
/* Scores cfgs[0..n) (configs of q->space): scores[i] higher = predicted
 * faster. Configs the template cannot build get MT_COSTMODEL_INVALID_SCORE
 * (finite) from models that look at the kernel ("xgb"), fitted or not. A
 * model never fitted scores every other candidate 0 ("random": still
 * random). */
mt_status mt_costmodel_predict(mt_costmodel *m, const mt_cm_query *q, const mt_config *cfgs, int n, double *scores, char *err, size_t errlen);

/* Samples the current model was trained on (0: not fitted). */
int64_t mt_costmodel_trained(const mt_costmodel *m);

/* Writes a trained model of the gnn kinds or mlp to a model file
 * (gnn/gnn.h) that params.gnn_model can load (gnn-meta: its initial
 * weights); MT_UNSUPPORTED for other kinds, MT_INVALID_ARG when it was
 * never trained, MT_IO. */
mt_status mt_costmodel_save(const mt_costmodel *m, const char *path, char *err, size_t errlen);

/* Meta-trains a model of the gnn kinds or mlp on samples[0..n) (MAML,
 * gnn/gnn.h: one task per (workload, template, device) group, targets as
 * for a fit), forgetting earlier samples. With mp->from_current the
 * model's current weights are the start (a file's, or a fit's). Afterwards
 * the model is a gnn-meta model of the meta-learned weights: it scores
 * new groups zero-shot, adapts per group, and mt_costmodel_save writes a
 * meta-trained file. MT_UNSUPPORTED for other kinds; mt_gnn_meta_train's
 * errors; on failure the model is left as it was. */
mt_status mt_costmodel_meta_train(mt_costmodel *m, const mt_cm_sample *samples, int n, const mt_gnn_meta_params *mp, char *err, size_t errlen);

/* Trainable parameters of a model of the gnn kinds or mlp; -1 for other kinds. */
int64_t mt_costmodel_param_count(const mt_costmodel *m);

/* The score given to configs that cannot be built. */
#define MT_COSTMODEL_INVALID_SCORE (-1e9)

#ifdef __cplusplus
}
#endif
#endif
