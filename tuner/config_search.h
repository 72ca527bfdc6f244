/* Search over one template's knob space for one workload: which configs to
 * measure next.
 *
 * Kinds:
 *   "random"  uniformly random configs, never one twice.
 *   "sa"      AutoTVM's model-guided search: parallel simulated-annealing
 *             chains walk the space (each move changes one knob: to a random
 *             other option, or for a split, by moving one prime factor
 *             between two of its parts), scored by the cost model in batches;
 *             a heap keeps the best unmeasured configs seen. next_batch
 *             returns the best of them, filtered for diversity (a candidate
 *             that differs in fewer than `min_knob_diff` knobs from one
 *             already picked for the batch waits until the others are used
 *             up), plus a share `epsilon` for exploration that does not
 *             follow the model: half one- or two-knob mutations of the best
 *             measured configs, half uniformly random configs. Exploration
 *             skips configs the model scores as unbuildable
 *             (MT_COSTMODEL_INVALID_SCORE). With no model, or a model not
 *             fitted yet, the whole batch is exploration (uniform).
 *
 * A search never returns a config it has returned before or that was marked
 * measured: it keeps a hash set of config indices (mt_space_config_index).
 * With a candidate restriction (mt_search_params.only) it returns only
 * configs of the restriction, and the space's size is the restriction's.
 * Model updates are the caller's job (mt_costmodel_update between batches);
 * the search only asks the model for scores. Not thread-safe.
 *
 * Errors follow the rule of docs/api.md: a fallible call returns an
 * mt_status and writes its reason to the caller's err (NULL or 0: not
 * wanted); the search keeps no message. */
#ifndef MTGPU_SEARCH_H
#define MTGPU_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "costmodel.h"
#include "mtgpu/device.h"
#include "space.h"
#include "mtgpu/status.h"
#include "template.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_search mt_search;

typedef struct mt_search_params {
    uint64_t seed;          /* default 1 */
    int chains;             /* parallel annealing chains (default 128, as AutoTVM) */
    int iterations;         /* most annealing steps per next_batch (default 500) */
    int early_stop;         /* stop after this many steps without a new heap entry (default 30) */
    double temp_start;      /* temperature, in units of the spread (standard deviation) */
    double temp_end;        /* of the chains' starting scores; linear schedule (defaults 1 and 0) */
    double epsilon;         /* share of each batch for exploration (default 0.2) */
    int min_knob_diff;      /* diversity: picked configs differ pairwise in at least this many knobs (default 2; <= 1: off) */
    int pool_factor;        /* heap size = pool_factor * batch candidates (default 3) */
    double local_share;     /* share of the model's picks taken from the one-knob
                               neighbourhood of the best measured configs, ranked by
                               the model, where it has data close by (default 0.25) */
    const mt_device_info *dev; /* the device measured on, passed to the cost model
                               (borrowed; NULL: unknown, the default) */
    /* A candidate restriction: when `only` is non-NULL the search proposes
     * nothing but the configs of only[0..nonly) (indices in the space,
     * ascending, distinct; borrowed, must outlive the search; nonly may be 0:
     * then there is nothing to propose), e.g. the configs a replay has
     * recorded. Random draws are uniform among them; annealing chains and
     * mutations move from a config to one of its nearest others in the set
     * (fewest knobs different) instead of a one-knob move that would mostly
     * leave the set. NULL (the default): the whole space. */
    const uint64_t *only;
    size_t nonly;
} mt_search_params;

mt_search_params mt_search_default_params(void);

/* Creates a search of kind "random" or "sa" over `space` (the template's
 * space for wl). model may be NULL (then "sa" behaves like "random"); the
 * search borrows wl, t, space and model, which must outlive it. Unknown
 * kinds, and a restriction that is not ascending or leaves the space:
 * MT_INVALID_ARG with the reason in err. */
mt_status mt_search_create(const char *kind, const mt_workload *wl, const mt_template *t, const mt_space *space, mt_costmodel *model,
                           uint64_t seed, mt_search **out, char *err, size_t errlen);
/* The same with every parameter; p NULL: defaults. */
mt_status mt_search_create_ex(const char *kind, const mt_workload *wl, const mt_template *t, const mt_space *space, mt_costmodel *model,
                              const mt_search_params *p, mt_search **out, char *err, size_t errlen);
void mt_search_free(mt_search *s);

/* Records that cfg has been measured (cost_ms <= 0: it failed), so that it
 * is never returned; for resuming from a database too. Measured configs also
 * seed the annealing chains. Marking a config twice is harmless.
 * MT_INVALID_ARG for a NULL argument or a config outside the space,
 * MT_NOMEM; then the search is as it was. */
mt_status mt_search_mark_measured(mt_search *s, const mt_config *cfg, double cost_ms, char *err, size_t errlen);

/* Writes up to `batch` configs to out, none returned or measured before, and
 * their number to *n; *n < batch only when the space is exhausted.
 * MT_INVALID_ARG for a NULL argument or a negative batch; the cost model's
 * errors, MT_NOMEM. On an error *n is 0 and nothing is marked returned. */
mt_status mt_search_next_batch(mt_search *s, int batch, mt_config *out, int *n, char *err, size_t errlen);

/* Configs returned or marked measured so far; the size of the space. */
uint64_t mt_search_visited(const mt_search *s);
uint64_t mt_search_space_size(const mt_search *s);
/* The best measured config so far into cfg and its time into cost_ms
 * (either may be NULL). MT_NOT_FOUND when no measured config succeeded,
 * MT_INVALID_ARG for a NULL search. */
mt_status mt_search_best(const mt_search *s, mt_config *cfg, double *cost_ms, char *err, size_t errlen);
const char *mt_search_kind(const mt_search *s);
/* Candidates the search has had the model score (a cost measure). */
int64_t mt_search_scored(const mt_search *s);

#ifdef __cplusplus
}
#endif
#endif
