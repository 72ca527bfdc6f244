/* The GNN cost model: a relational graph network that scores kernel graphs.
 *
 * Input: a batch of graphs of one shape (graph_enc/graph.h): the shape plus
 * B x n_nodes x MT_GRAPH_FEATS floats. Output: one score per graph, higher =
 * predicted faster. Scores are comparable within one (workload, template).
 *
 * Architectures (a benchmark compares them, so all three are here):
 *   MT_GNN_MODULAR  the design of Sura, Chen & Sung: an input embedding per
 *                   node type; `layers` rounds of typed message passing, each
 *                   with a weight W_t per edge type (message W_t h_src, summed
 *                   at dst) and an update per node type
 *                   h' = h + act(U_type h + sum of messages + b_type);
 *                   readout mean and max over the nodes (the mean is the sum
 *                   over a shape's fixed node count, scaled so that magnitudes
 *                   do not grow with the graph); an MLP head gives the score.
 *   MT_GNN_SHARED   the same network with one module shared by all node types
 *                   and one by all edge types (types reach it only through
 *                   the node features).
 *   MT_GNN_MLP      no message passing: an MLP (`layers` hidden layers) over
 *                   the mean and max of the node features ("flat features").
 * act is leaky ReLU (slope 0.01). Features are normalised per feature with
 * the mean and standard deviation of the training data, computed by
 * mt_gnn_fit and stored in the model (and its file).
 *
 * Everything is float32, on the CPU through CBLAS. Results are deterministic:
 * training for a seed gives bit-identical weights, and scores do not depend
 * on the thread count (batches are cut into fixed chunks of 16 graphs). A
 * graph scored at another place in a batch may differ in the last bits: BLAS
 * kernels treat the edge rows of a block differently. Training and scoring
 * run one forward (on node-major blocks, each edge type's product taken
 * once per distinct source or destination of its edges, which is the same
 * sum of messages in another order: gnn/gnn-impl.h); scoring keeps nothing
 * for a backward. A model is not thread-safe (it caches per-shape plans and
 * workspaces): use one per thread or lock around it, or give each thread a
 * scorer (below).
 *
 * Model files, all integers and floats little-endian. Version 2 (what
 * mt_gnn_save writes):
 *   offset  size    field
 *   0       8       magic "MTGNNMDL"
 *   8       4       u32 version (2)
 *   12      4       u32 architecture (mt_gnn_arch)
 *   16      4       u32 hidden width        (1..4096)
 *   20      4       u32 layers              (0..64; MLP: 1..64)
 *   24      4       u32 features per node   (must equal MT_GRAPH_FEATS)
 *   28      4       u32 node types          (must equal MT_GRAPH_NODE_TYPES)
 *   32      4       u32 edge types          (must equal MT_GRAPH_EDGE_TYPES)
 *   36      4       u32 parameter count P   (must match the shapes above)
 *   40      8       u64 trained samples (informational)
 *   48      4       u32 origin (mt_gnn_origin: 0 pooled, 1 meta-trained, 2 adapted)
 *   52      4       u32 inner algorithm (mt_gnn_meta_algo; 0 when pooled,
 *                       else 1 first-order MAML or 2 Meta-SGD)
 *   56      4       u32 inner steps (0 when pooled, else 1..MT_GNN_MAX_INNER_STEPS)
 *   60      4       u32 inner loss (mt_gnn_loss; 0 when pooled)
 *   64      4       f32 inner rate (0 when pooled, else > 0: first-order
 *                       MAML's rate, Meta-SGD's initial rate)
 *   68      4       u32 reserved, 0
 *   72      4F      f32 feature means
 *   72+4F   4F      f32 feature standard deviations (each > 0)
 *   72+8F   4P      f32 weights, in the order mt_gnn_param_count counts them
 *   72+8F+4P 4R     f32 per-weight inner rates, R = P for Meta-SGD (each >= 0),
 *                       else R = 0
 *   72+8F+4P+4R 8   u64 FNV-1a 64 of every byte before it
 * Version 1 (still read; a model loaded from it is pooled): the same up
 * to offset 48, then the means, standard deviations, weights and checksum
 * (no origin, no inner procedure, no rates).
 * The file is exactly that long. Every float must be finite. A reader
 * rejects (MT_CORRUPT, with a message naming the field) a short or long
 * file, a wrong magic, an unknown version or architecture, shapes out of
 * range or different from this build's, a bad checksum, an unknown origin,
 * algorithm or loss, an inner procedure where there must be none (pooled)
 * or none where there must be one, a non-zero reserved field, and
 * non-finite or out-of-range values. Adam's moments and the training
 * parameters are not stored: a loaded model scores exactly as the saved
 * one, adapts exactly as the saved one, and training it again starts Adam
 * afresh. */
#ifndef MTGPU_GNN_H
#define MTGPU_GNN_H

#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_gnn mt_gnn;

typedef enum mt_gnn_arch {
    MT_GNN_MODULAR = 0, /* one module per node type and per edge type (default) */
    MT_GNN_SHARED = 1,  /* one module for all node types, one for all edge types */
    MT_GNN_MLP = 2      /* MLP on mean and max of node features: no structure */
} mt_gnn_arch;

typedef enum mt_gnn_loss {
    MT_GNN_LOSS_RANK = 0, /* pairwise logistic loss within each group */
    MT_GNN_LOSS_REG = 1,  /* squared error on the caller's normalised target */
    MT_GNN_LOSS_BOTH = 2  /* the sum of both (default) */
} mt_gnn_loss;

typedef struct mt_gnn_params {
    /* architecture: fixed at creation, stored in model files */
    mt_gnn_arch arch; /* default MT_GNN_MODULAR */
    int hidden;       /* width of node states and of the head (default 32; 1..4096) */
    int layers;       /* message-passing rounds (default 3; 0..64), or the MLP's
                         hidden layers (1..64) */
    /* training and scoring: may change between calls (mt_gnn_set_params) */
    uint64_t seed;    /* initial weights and minibatch order (default 1) */
    double lr;        /* Adam's step size (default 3e-3) */
    int epochs;       /* passes over the samples in mt_gnn_fit (default 30) */
    int batch;        /* graphs per minibatch (default 64) */
    mt_gnn_loss loss; /* default MT_GNN_LOSS_BOTH */
    int threads;      /* scoring threads (default 2; <= 0: 1). Training runs on
                         one thread so that it is deterministic. */
} mt_gnn_params;

mt_gnn_params mt_gnn_default_params(void);

/* Creates a model with weights drawn from p->seed (p NULL: default params)
 * and identity normalisation. MT_INVALID_ARG (message in err) for params out
 * of range. */
mt_status mt_gnn_create(const mt_gnn_params *p, mt_gnn **out, char *err, size_t errlen);
void mt_gnn_free(mt_gnn *m);

/* The model's params (after load: the file's architecture, defaults for the
 * rest). */
mt_gnn_params mt_gnn_get_params(const mt_gnn *m);
/* Changes the training and scoring params; the architecture fields of p must
 * equal the model's (MT_INVALID_ARG otherwise, and nothing changes). */
mt_status mt_gnn_set_params(mt_gnn *m, const mt_gnn_params *p, char *err, size_t errlen);

/* Number of trainable float parameters (every node and edge type counts,
 * whether a shape uses it or not). */
int64_t mt_gnn_param_count(const mt_gnn *m);
/* Samples of the last mt_gnn_fit plus those of mt_gnn_train_steps since,
 * or of the tasks of the last mt_gnn_meta_train (0: never trained). */
int64_t mt_gnn_trained(const mt_gnn *m);

/* Scores B graphs of one shape: feats is B x shape->n_nodes x MT_GRAPH_FEATS
 * (graph-major, then node, then feature), scores gets B floats. Uses up to
 * params.threads threads. Allocates per-shape plans and workspaces on the
 * first call for a shape (reused while the shape stays the same), never per
 * graph; peak extra memory is a few MiB regardless of B. MT_INVALID_ARG for
 * a malformed shape (types or node indices out of range), B < 0 or NULL
 * pointers; MT_NOMEM. Non-finite features give non-finite scores. */
mt_status mt_gnn_score(mt_gnn *m, const mt_graph_shape *shape, int B, const float *feats, float *scores, char *err, size_t errlen);

/* A scorer: what scoring one shape with one model needs on one thread (a
 * private copy of the shape's plan and a workspace), for callers that run
 * threads of their own, such as the cost model, which encodes and scores
 * each share of a batch on the thread that holds it. Any number of scorers
 * of one model may run at once, as long as nothing changes or frees the
 * model meanwhile (training, set_params, free): a scorer reads the model's
 * current weights when it runs, and must be freed before the model.
 * mt_gnn_scorer_run scores B graphs on the calling thread in the same fixed
 * chunks as mt_gnn_score, so it gives the same bits. Create: MT_INVALID_ARG
 * for a malformed shape, MT_NOMEM; *out is NULL on failure. */
typedef struct mt_gnn_scorer mt_gnn_scorer;
mt_status mt_gnn_scorer_create(const mt_gnn *m, const mt_graph_shape *shape, mt_gnn_scorer **out, char *err, size_t errlen);
mt_status mt_gnn_scorer_run(mt_gnn_scorer *s, int B, const float *feats, float *scores, char *err, size_t errlen);
/* Non-zero when s was made for a shape equal to shape (same nodes, edges, hash). */
int mt_gnn_scorer_matches(const mt_gnn_scorer *s, const mt_graph_shape *shape);
void mt_gnn_scorer_free(mt_gnn_scorer *s);

/* One training sample. target: higher = better (for example the per-group
 * normalised log throughput); ranking compares targets only within a group.
 * failed != 0 marks a config that did not build, run or verify: it ranks
 * below every working config of its group (pairs of two failed ones are
 * ignored) and its regression target is the group's lowest working target
 * minus 1 (target is ignored). All samples of a group must share a shape.
 * Pointers are borrowed for the duration of the call only. */
typedef struct mt_gnn_sample {
    const mt_graph_shape *shape;
    const float *feats; /* shape->n_nodes x MT_GRAPH_FEATS */
    float target;
    int group;
    int failed;
} mt_gnn_sample;

/* Trains from scratch on samples[0..n): re-draws the weights from the seed,
 * recomputes the feature normalisation from these samples, resets Adam, and
 * runs params.epochs epochs of minibatches (each minibatch holds samples of
 * one shape; groups are kept together so ranking pairs exist). The model is
 * then pooled (mt_gnn_origin): a meta-trained model's inner procedure is
 * dropped. MT_INVALID_ARG when n < 1, a sample is malformed, or a group
 * mixes shapes. On failure the model is left as it was. */
mt_status mt_gnn_fit(mt_gnn *m, const mt_gnn_sample *samples, int n, char *err, size_t errlen);

/* Continues training (fine-tuning): `steps` Adam steps on minibatches drawn
 * from samples[0..n) in the model's own seeded order, keeping the weights,
 * normalisation and Adam state. The model is then pooled, as after
 * mt_gnn_fit (fine-tuned weights are no meta-learned initialisation). Same
 * errors as mt_gnn_fit; on failure the model is left as it was. */
mt_status mt_gnn_train_steps(mt_gnn *m, const mt_gnn_sample *samples, int n, int steps, char *err, size_t errlen);

/* The training loss of the current weights on samples[0..n) (mean over the
 * minibatches of one pass in fixed order), for monitoring and tests. */
mt_status mt_gnn_loss_value(mt_gnn *m, const mt_gnn_sample *samples, int n, double *loss, char *err, size_t errlen);

/* ---- Meta-learning (gnn/maml.c) ----
 *
 * MetaTune's use of MAML (Finn, Abbeel & Levine): a task is one (workload,
 * template, device) group of samples. Meta-training learns initial weights
 * from which the inner procedure, a few plain gradient steps on a task's
 * measured samples, ranks the rest of that task well. Each meta-iteration
 * draws tasks_per_batch tasks and from each `support` and `query` disjoint
 * samples; adapts a copy of the weights on the support set with the inner
 * procedure; takes the query loss's gradient at the adapted weights (the
 * query's targets shifted so that the support set's best is 0, as a
 * tuner's scores are relative to the best it measured);
 * averages it over the tasks and updates the initial weights with Adam at
 * outer_lr (the average scaled down to an L2 norm of at most 10, as in
 * training).
 *
 * The inner procedure (mt_gnn_adapt, and meta-training's inner loop: the
 * same code): `steps` times w -= rate * g, g the gradient of the loss of
 * the whole sample set (ranking over the pairs of each group plus
 * regression, per the inner loss, as in training), each group's targets
 * shifted so that its best working target is 0 (a tuner knows only its
 * best so far), and g scaled down to an L2 norm of at most 10.
 *
 * Algorithms:
 *   MT_GNN_META_FOMAML  first-order MAML: the query gradient at the adapted
 *                       weights stands for the initial weights' (the inner
 *                       steps' Jacobian taken as the identity); one rate
 *                       for every weight.
 *   MT_GNN_META_SGD     Meta-SGD (Li, Zhou, Chen & Li): a rate per weight,
 *                       meta-learned with the weights as exp(log rate), so
 *                       rates stay positive. The rates' gradient is
 *                       -grad_q * (sum of the inner steps' gradients),
 *                       elementwise: exact for one inner step, first-order
 *                       beyond; the weights' as first-order MAML's.
 * Training runs on one thread; the same tasks, params and model give
 * bit-identical weights. */

typedef enum mt_gnn_origin {
    MT_GNN_ORIGIN_POOLED = 0,  /* untrained, or trained on pooled samples (mt_gnn_fit,
                                  mt_gnn_train_steps): no inner procedure */
    MT_GNN_ORIGIN_META = 1,    /* meta-trained (mt_gnn_meta_train): initial weights
                                  for mt_gnn_adapt, with their inner procedure */
    MT_GNN_ORIGIN_ADAPTED = 2  /* a meta-trained model after mt_gnn_adapt */
} mt_gnn_origin;

typedef enum mt_gnn_meta_algo {
    MT_GNN_META_FOMAML = 1, /* first-order MAML: one inner rate */
    MT_GNN_META_SGD = 2     /* Meta-SGD: a meta-learned inner rate per weight */
} mt_gnn_meta_algo;

#define MT_GNN_MAX_INNER_STEPS 100

/* A meta-trained model's inner procedure (stored in its model file). */
typedef struct mt_gnn_inner {
    mt_gnn_meta_algo algorithm;
    int steps;        /* 1..MT_GNN_MAX_INNER_STEPS */
    double lr;        /* first-order MAML: every weight's rate; Meta-SGD: the
                         rates' initial value (the learned ones are the model's) */
    mt_gnn_loss loss; /* the inner (and outer) loss */
} mt_gnn_inner;

/* The defaults were measured by few-shot evaluation (mtgpu eval-model
 * --adapt-k) on ResNet-18's and SqueezeNet 1.1's convolutions held out of
 * data/opencl_dataset.db (37 groups), meta-training on the rest: starting
 * from a pooled model (from_current), Meta-SGD with one inner step at 1e-3
 * ranked pairwise 0.813 / 0.814 / 0.825 at k = 0 / 8 / 32 (the pooled model
 * fine-tuned as gnn-transfer: 0.805 / 0.807 / 0.816), though its top-1 at
 * k = 8 / 32 was lower (0.720 / 0.785 against 0.737 / 0.799); first-order
 * MAML at 2e-3 ranked about the same (0.812 / 0.812 / 0.822); inner rates
 * of 1e-2, three inner steps, support sets of 32 or 600 iterations ranked
 * lower; from drawn weights, 600 iterations reached only 0.74-0.77 / 0.79
 * / 0.80. */
typedef struct mt_gnn_meta_params {
    mt_gnn_meta_algo algorithm; /* default MT_GNN_META_SGD */
    int support;         /* K: samples a task adapts on (default 16; >= 1) */
    int query;           /* Q: samples its adapted weights are scored on (default 32; >= 1).
                            A task of fewer than K + Q samples (at least 2) gives
                            min(K, n - 1) to the support set and the rest, up to Q,
                            to the query set. */
    int inner_steps;     /* 1..MT_GNN_MAX_INNER_STEPS (default 1) */
    double inner_lr;     /* the inner rate, or Meta-SGD's initial rates (default 1e-3) */
    int tasks_per_batch; /* tasks per meta-iteration (default 16; at most the task count
                            is used, each task at most once per iteration) */
    double outer_lr;     /* Adam's step size on the initial weights (default 3e-4) */
    double rate_lr;      /* Meta-SGD: Adam's step size on the log rates (default 1e-2) */
    int iterations;      /* meta-iterations (default 300) */
    uint64_t seed;       /* task and sample draws; the initial weights unless from_current
                            (default 1) */
    int from_current;    /* 0 (default): draw the weights from seed and compute the feature
                            normalisation from the tasks' samples, as mt_gnn_fit does;
                            1: start from the model's weights and normalisation (for
                            example after a pooled mt_gnn_fit) */
    /* called after every meta-iteration (NULL: not called) with the mean query
       loss at the adapted weights */
    void (*progress)(int iteration, double query_loss, void *user);
    void *user;
} mt_gnn_meta_params;

mt_gnn_meta_params mt_gnn_meta_default_params(void);

/* One task: samples of one (workload, template, device) group, one shape;
 * their group fields are ignored. Borrowed for the duration of the call. */
typedef struct mt_gnn_task {
    const mt_gnn_sample *samples;
    int n;
} mt_gnn_task;

/* Meta-trains m on tasks[0..ntasks) (tasks of fewer than 2 samples are
 * skipped). On success m holds the meta-learned initial weights, its
 * origin is MT_GNN_ORIGIN_META and its inner procedure is p's (Meta-SGD:
 * with the learned rates); the model's loss param is the inner and outer
 * loss. MT_INVALID_ARG for params out of range, no usable task, a
 * malformed sample or a task that mixes shapes; MT_NOMEM. On failure the
 * model is left as it was. */
mt_status mt_gnn_meta_train(mt_gnn *m, const mt_gnn_meta_params *p, const mt_gnn_task *tasks, int ntasks, char *err, size_t errlen);

/* Adapts m in place on samples[0..n) with its inner procedure (the file's,
 * for a loaded model): exactly meta-training's inner loop, on every sample
 * given. The origin becomes MT_GNN_ORIGIN_ADAPTED; the inner procedure
 * stays. MT_INVALID_ARG when m has no inner procedure (a pooled model),
 * n < 1 or a sample is malformed; MT_NOMEM; on failure m is unchanged. */
mt_status mt_gnn_adapt(mt_gnn *m, const mt_gnn_sample *samples, int n, char *err, size_t errlen);

/* Where m's weights came from; its inner procedure into *out (steps 0 and
 * algorithm 0 when it has none). */
mt_gnn_origin mt_gnn_get_origin(const mt_gnn *m);
mt_gnn_inner mt_gnn_get_inner(const mt_gnn *m);

/* A copy of m (params, weights, normalisation, origin, inner procedure,
 * trained count; no caches, Adam afresh). MT_NOMEM; *out NULL on failure. */
mt_status mt_gnn_clone(const mt_gnn *m, mt_gnn **out, char *err, size_t errlen);
/* Copies src's weights, normalisation, origin, inner procedure and trained
 * count into dst, which keeps its own training and scoring params; dst's
 * Adam state and minibatch order start afresh (from its seed). Scorers of
 * dst stay valid. MT_INVALID_ARG when the architectures differ; MT_NOMEM. */
mt_status mt_gnn_copy(mt_gnn *dst, const mt_gnn *src, char *err, size_t errlen);

/* Writes the model file (format above) to path through a temporary file in
 * the same directory and a rename, so path holds either the old file or
 * the complete new one. MT_IO with the reason in err. */
mt_status mt_gnn_save(const mt_gnn *m, const char *path, char *err, size_t errlen);
/* Reads a model file. MT_IO / MT_NOT_FOUND when it cannot be read,
 * MT_CORRUPT (reason in err) when it is not a valid model for this build. */
mt_status mt_gnn_load(const char *path, mt_gnn **out, char *err, size_t errlen);
/* The same from and to memory. mt_gnn_save_mem hands back a malloc'd
 * buffer (*buf, *len) that the caller frees with free(). mt_gnn_load_mem
 * never reads outside buf[0..len). */
mt_status mt_gnn_save_mem(const mt_gnn *m, unsigned char **buf, size_t *len, char *err, size_t errlen);
mt_status mt_gnn_load_mem(const void *buf, size_t len, mt_gnn **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
