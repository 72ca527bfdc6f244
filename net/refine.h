/* Choosing each convolution's config inside its network.
 *
 * The tuner ranks configs by their time alone: one kernel run again and
 * again on the same buffers, with its weights and input warm in cache.
 * Inside a network each kernel reads weights no other layer shares and an
 * input the previous layer just wrote, and the order of the candidates can
 * change: for ResNet-50 at the default budget another config won for 7 of
 * its 23 workloads, and timed afresh its convolutions took 36.5 ms of
 * device time against 37.6 ms with the fastest records (1.03x;
 * bench/refine/results/refine.md).
 *
 * mt_network_refine builds the network once per candidate set (the fastest
 * usable record of every convolution, the second fastest, ..., and the
 * default configs) and runs profiled passes of all of them in rounds: in
 * each round every set runs a short block of passes, the order rotating.
 * Per workload and round, a set's time is the median of its block (summed
 * over the layers of that workload), taken relative to the fastest
 * record's in the same round; the set with the lowest median of those
 * ratios over the rounds is kept when it beats the fastest record by
 * min_gain. Ratios within a round cancel the machine's slow spells, which
 * last longer than a round and on this shared 2-core machine move every
 * kernel by up to 2x: comparing medians over all passes instead, a set
 * whose blocks fell in slow spells lost whatever it ran. A winner other
 * than the fastest record is stored as a preference (mtgpu/records.h), which
 * mt_select_config (records/select.h), the executor and the embedding API
 * then use.
 *
 * A layer's time inside a fused pass depends on its neighbours as well
 * (the threads start it as they finish the layer before, and the layers
 * before leave the caches in their own state), so configs chosen workload
 * by workload, each timed inside a set of others, can lose together:
 * inside VGG-16 on a Zen 4 they made the network's convolutions 1.06x
 * slower than the default configs, its 28x28 512-channel layers 1.10x,
 * which the refinement had measured at 0.96x of the defaults' time
 * (bench/tuning_budget/results/vgg16.md; the refinement's table in
 * bench/vs_onednn/results/fresh_zen4_r18_vgg16_4f460c6/raw/vgg16.tune.log).
 * So the choice is checked whole: the network with the kept configs
 * (pinned, mt_executor_params.pins), with every convolution's
 * fastest record and with the default configs run whole passes in turns,
 * and the fastest of the three, by the median over the rounds of its pass
 * time over the defaults' in the same round, is what is stored. */
#ifndef MTGPU_REFINE_H
#define MTGPU_REFINE_H

#include <stdint.h>

#include "mtgpu/records.h"
#include "mtgpu/device.h"
#include "mtgpu/net.h"
#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Candidate sets at most: ranks 1..8 and the defaults. */
#define MT_REFINE_MAX_SETS 9

typedef struct mt_refine_params {
    int candidates;  /* records per workload, fastest first (default 3; 1..8) */
    int defaults;    /* also the default configs (default 1) */
    int passes;      /* profiled passes of each set, in turns (default 15; 1..1000) */
    double min_gain; /* another set replaces the fastest record only when faster by this
                        fraction (default 0.03: below the pass-to-pass noise it is a coin toss) */
    int store;       /* write preferences, and remove those the fastest record wins back (default 1) */
    uint64_t seed;   /* seed of the random weights (default 1) */
} mt_refine_params;

mt_refine_params mt_refine_default_params(void);

/* What was timed for one workload of the network. */
typedef struct mt_refine_choice {
    mt_workload wl;
    int layers;                                    /* its layers in the network */
    double ms[MT_REFINE_MAX_SETS];                 /* per set: median device time, summed over those layers */
    double ratio[MT_REFINE_MAX_SETS];              /* per set: median over the rounds of its time / set 0's
                                                      in the same round (what the choice compares) */
    int same_as[MT_REFINE_MAX_SETS];               /* the first set with the same template and config */
    char template_name[MT_REFINE_MAX_SETS][MT_RECORD_TEMPLATE_LEN];
    char config[MT_REFINE_MAX_SETS][MT_RECORD_CONFIG_LEN];
    int chosen;                                    /* the set kept (0: the fastest record), after the whole-pass check */
    int proposed;                                  /* the set the workload's own times chose, before that check */
} mt_refine_choice;

/* Which configs the whole-pass check kept (see above). */
typedef enum mt_refine_outcome {
    MT_REFINE_UNCHECKED,          /* no default configs among the sets: nothing to check against */
    MT_REFINE_KEPT,               /* the configs chosen workload by workload */
    MT_REFINE_FELL_BACK_FASTEST,  /* every convolution's fastest record */
    MT_REFINE_FELL_BACK_DEFAULTS, /* every convolution's default config */
} mt_refine_outcome;

/* Rounds of the whole-pass check, each a block of passes of every side. */
#define MT_REFINE_CHECK_ROUNDS 7

/* The outcome of the check from its paired ratios (medians over the rounds
 * of the kept configs' and the fastest records' pass time over the
 * defaults'): the lowest of kept_vs_default, fastest_vs_default and 1 (the
 * defaults), ties going to the kept configs, then the fastest records. */
mt_refine_outcome mt_refine_verdict(double kept_vs_default, double fastest_vs_default);

typedef struct mt_refine_result {
    int nsets;
    int set_rank[MT_REFINE_MAX_SETS]; /* per set: the record rank (1 = fastest), 0 for the defaults */
    int nchoices;
    mt_refine_choice *choices;        /* per workload, in order of first layer */
    double fastest_ms;                /* sum over workloads of set 0's time */
    double chosen_ms;                 /* sum over workloads of the kept set's time, same passes */
    int passes;
    int stored, removed;              /* preferences written, and removed */
    double wall_s;                    /* builds included */
    /* The whole-pass check (outcome MT_REFINE_UNCHECKED: none; then the rest is 0). */
    mt_refine_outcome outcome;
    int check_rounds;
    double kept_pass_ms, fastest_pass_ms, default_pass_ms; /* medians over every pass of the check */
    double kept_vs_default, fastest_vs_default;            /* paired ratios (mt_refine_paired_ratios) */
} mt_refine_result;

/* Times the candidate sets of net on dev with the records of db and keeps
 * the fastest per workload (see above); params may be NULL. db must be
 * writable when params->store. The network must be one the executor runs
 * (OpenCL device). On MT_OK, *out holds the result (free it with
 * mt_refine_result_free); on an error *out is empty and db unchanged or
 * holding the preferences stored before it. */
mt_status mt_network_refine(mt_device *dev, const mt_network *net, mt_db *db, const mt_refine_params *params, mt_refine_result *out,
                            char *err, size_t errlen);

void mt_refine_result_free(mt_refine_result *r);

/* The paired estimate behind the choice: t[s * rounds + b] is set s's time
 * for one workload in round b; ratio[s] receives the median over the
 * rounds of t[s][b] / t[0][b] (rounds where either is not positive are
 * left out; 1 when none is left). */
void mt_refine_paired_ratios(const double *t, int nsets, int rounds, double *ratio);

#ifdef __cplusplus
}
#endif
#endif
