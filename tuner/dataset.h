/* Measured records as a cost-model data set, and how well a model ranks them.
 *
 * A data set is every record of a tuning database (optionally of one device)
 * whose template still exists and whose config still parses, turned into
 * cost-model samples (tuner/costmodel.h). It owns the workloads, spaces and
 * device descriptions the samples point to. Records imported from AutoTVM
 * logs have no timed device of ours behind them and are left out.
 *
 * Evaluation groups samples by (workload, template, device), the unit within
 * which a model's scores are comparable, and reports on the groups of the
 * held-out workloads:
 *   - pairwise accuracy: over pairs of one group with different costs (a
 *     failed config is slower than any working one; pairs of two failed ones
 *     are skipped), the share the model orders correctly (ties count half);
 *   - Spearman correlation between score and -cost over the working configs
 *     of each group, averaged over groups;
 *   - top-k score: for each group, best measured time / best measured time
 *     among the model's k highest-scored configs (1 = the model's picks
 *     contain the best), averaged with each group's workload FLOPs as weight. */
#ifndef MTGPU_DATASET_H
#define MTGPU_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "mtgpu/records.h"
#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_dataset mt_dataset;

/* Loads the records of db (device_fp NULL: every device). MT_NOT_FOUND when
 * no usable record exists; MT_CORRUPT when the database has damaged rows
 * (the message names the first). *out is freed with mt_dataset_free. */
mt_status mt_dataset_load(mt_db *db, const char *device_fp, mt_dataset **out, char *err, size_t errlen);
void mt_dataset_free(mt_dataset *ds);

int mt_dataset_nsamples(const mt_dataset *ds);
const mt_cm_sample *mt_dataset_samples(const mt_dataset *ds);
/* Distinct workloads, in order of first appearance; sample i's is
 * mt_dataset_sample_workload(ds, i). */
int mt_dataset_nworkloads(const mt_dataset *ds);
const mt_workload *mt_dataset_workload(const mt_dataset *ds, int w);
int mt_dataset_sample_workload(const mt_dataset *ds, int i);
/* Records skipped while loading (unknown template, config from an older space, AutoTVM imports). */
int mt_dataset_skipped(const mt_dataset *ds);

/* Marks held-out workloads in holdout[0..nworkloads): a deterministic share
 * `frac` (0..1) of the workloads, picked by a hash of their text form and
 * seed, at least one and at most all but one when there are two or more. */
void mt_dataset_split(const mt_dataset *ds, double frac, uint64_t seed, int *holdout);

/* Samples of the workloads with holdout[w] == want, as a new array of
 * sample copies (pointing into ds) that the caller frees; keep, if not NULL,
 * is a share in (0, 1] of them to keep (by a seeded hash of each sample,
 * so the same seed keeps the same ones). */
mt_status mt_dataset_select(const mt_dataset *ds, const int *holdout, int want, double keep, uint64_t seed, mt_cm_sample **out, int *n);

typedef struct mt_cm_eval {
    int groups;             /* (workload, template, device) groups evaluated */
    int64_t samples;
    int64_t pairs;
    double pairwise_acc;
    double spearman;        /* mean over groups with >= 3 working configs */
    double top1, top5;      /* FLOP-weighted; see above */
    double predict_s;       /* wall time of the predict calls */
} mt_cm_eval;

/* Scores samples[0..n) group by group with model (already fitted) and fills
 * *out. MT_INVALID_ARG when n < 1; the model's errors otherwise. */
mt_status mt_cm_evaluate(mt_costmodel *model, const mt_cm_sample *samples, int n, mt_cm_eval *out, char *err, size_t errlen);

/* Few-shot evaluation: for each group of samples[0..n) with at least k + 2
 * samples, `repeats` times: a fresh model of the kind (params cp, NULL:
 * defaults; seed cp->seed + repeat) fitted on k of the group's samples
 * drawn at random (k 0: not fitted, zero-shot), then scored on the rest as
 * mt_cm_evaluate scores a group. What a fit is depends on the kind: a
 * gnn-meta model adapts its initial weights with its inner procedure, a
 * gnn-transfer model fine-tunes its file's weights, the others learn from
 * the k alone (unfitted, they score every config alike). */
typedef struct mt_cm_fewshot_params {
    int k;          /* measured configs per group to fit on (default 8; >= 0) */
    int repeats;    /* draws of them per group (default 3; >= 1) */
    uint64_t seed;  /* the draws (default 1) */
} mt_cm_fewshot_params;

mt_cm_fewshot_params mt_cm_fewshot_default_params(void);

typedef struct mt_cm_fewshot {
    int groups;          /* groups evaluated */
    int runs;            /* groups x repeats */
    double pairwise_acc; /* mean over runs of each run's pairwise accuracy */
    double spearman;     /* mean over runs with >= 3 working configs left */
    double top1, top5;   /* mean over runs with a working config left */
    double adapt_s, predict_s; /* wall time of the fits and of the predict calls */
} mt_cm_fewshot;

/* MT_INVALID_ARG for bad arguments, MT_NOT_FOUND when no group has k + 2
 * samples; the kind's errors (creating, fitting, predicting) otherwise. */
mt_status mt_cm_evaluate_fewshot(const char *kind, const mt_costmodel_params *cp, const mt_cm_sample *samples, int n,
                                 const mt_cm_fewshot_params *fp, mt_cm_fewshot *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
