/* The GNN model's internals, shared by gnn/model.c (layout, lifetime),
 * gnn/forward.c (plans, forward, backward, scoring), gnn/train.c and
 * gnn/file.c. Private to libmtgpu. */
#ifndef MTGPU_GNN_IMPL_H
#define MTGPU_GNN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "gnn.h"
#include "tensor.h"

#define MT__GNN_MAX_LAYERS 64
#define MT__GNN_MAX_HIDDEN 4096
#define MT__GNN_MAX_THREADS 16
/* Graphs per scoring chunk: fixed, so a graph's score never depends on how
 * the batch is split over threads (nor on whether a caller scores the first
 * 64 graphs alone or as the start of a bigger batch: it must divide 64).
 * Small, so that one chunk's node states, messages and inputs stay near
 * L2 (about 1.8 MiB for 16 graphs of the 136-node gemm shape): on the
 * development machine 16 scored 5-10% faster than 32 and 15% faster than
 * 64; 8 was no faster. */
#define MT__GNN_CHUNK 16
/* Gradients larger than this (global L2 norm) are scaled down to it, in
 * training and in the inner and outer steps of meta-training: one
 * minibatch of extreme targets must not throw the weights off. */
#define MT__GNN_CLIP 10.0

/* Where each weight lives in the flat parameter array (offsets in floats).
 * The order of the fields is the order in the array and in model files. */
typedef struct mt__gnn_layout {
    int nt, et;                /* node / edge modules: the type counts, or 1 (SHARED) */
    int F, H, L;               /* features, hidden, layers */
    size_t in_w, in_b;         /* [nt][F*H], [nt][H]                    (GNN) */
    size_t msg_w[MT__GNN_MAX_LAYERS];               /* [et][H*H]        (GNN) */
    size_t upd_w[MT__GNN_MAX_LAYERS], upd_b[MT__GNN_MAX_LAYERS]; /* [nt][H*H], [nt][H] (GNN) */
    size_t head_w1, head_b1;   /* [2H*H], [H]                           (GNN) */
    size_t mlp_w[MT__GNN_MAX_LAYERS], mlp_b[MT__GNN_MAX_LAYERS]; /* layer 0: [2F*H], then [H*H]; [H] (MLP) */
    size_t out_w, out_b;       /* [H], [1]                              (both) */
    size_t total;
} mt__gnn_layout;

/* A private copy of one graph shape and its nodes and edges grouped by
 * module (node type or edge type, or all in one for SHARED). */
typedef struct mt__gnn_plan {
    int n, E;
    int nt, et;      /* modules: the layout's counts, at least 1 */
    int *node_type, *edge_src, *edge_dst, *edge_type; /* the shape's arrays */
    uint64_t hash;
    int *node_mod;   /* [n] module of each node */
    int *node_rank;  /* [n] place of each node among its module's */
    int *node_off;   /* [nt + 1] nodes of the modules before each */
    int *node_cnt;   /* [nt] nodes per module */
    int *edge_order; /* [E] edges sorted by module */
    int *edge_cnt;   /* [et] */
    /* The message schedule (gnn/forward.c). Node v's state lives at place
     * pos[v] (its module's block, then its rank), and a batch of b graphs
     * is node-major: place q's b rows are rows [q*b, (q+1)*b), so a node
     * module is one GEMM on a contiguous block and every per-node operation
     * works on one contiguous block of b*H floats.
     *
     * Messages are linear in the source state and summed at the
     * destination, so an edge module's product W_t can be taken once per
     * distinct source (then added onto each destination) or once per
     * distinct destination (on the sum of its sources' states), whichever
     * is fewer: on the encoder's graphs 290 products instead of 804 (gemm),
     * 252 instead of 596 (direct), with the context's 135 edges out and
     * 135 in costing one product each. */
    int *pos;        /* [n] place of node v: node_off[node_mod[v]] + node_rank[v] */
    int *mrow_off;   /* [et + 1] each edge module's rows in mrow_pos */
    int *mside;      /* [et] 0: a row per distinct source, 1: per distinct destination */
    int *mrun;       /* [et] 1 when the module's rows are consecutive places: its
                        products read (side 0) or write (side 1) the node states
                        in place, with no copy */
    int *mrow_pos;   /* [rows] the place of each row's node, ascending within a module */
    int *madj_off;   /* [rows + 1] each row's edges in madj_pos */
    int *madj_pos;   /* [E] the place at the other end of each edge */
    int nrows;       /* rows of all modules: mrow_off[et] */
    int maxrows;     /* most rows of one module */
    /* What each place adds up, pulled in one pass per place (its block
     * stays in L1 while the products stream in) rather than pushed edge by
     * edge. Forward, into the update: the products of side-0 edges into it
     * and of side-1 rows that are it (not side-1 runs: those products land
     * in the update directly). Backward, into the state's gradient: the
     * products of side-0 rows that are it (not side-0 runs, likewise) and
     * of side-1 rows it has an edge into. Entries are product rows,
     * numbered across modules. */
    int *in_off;     /* [n + 1] */
    int *in_row;     /* [in_off[n]] */
    int *out_off;    /* [n + 1] */
    int *out_row;    /* [out_off[n]] */
    int maxsum;      /* most blocks one sum adds up (these lists and the rows' edges) */
} mt__gnn_plan;

/* Buffers for the forward (and, with keep, the backward) of up to cap
 * graphs of one plan. Allocated once per plan and capacity. Rows are
 * node-major (see the plan): rowmap says where node v of graph g lives. */
typedef struct mt__gnn_ws {
    int cap, keep, built_b;  /* built_b: graphs the row map was built for */
    int *rowmap;     /* [cap*n] row of node v of graph g at g*n + v */
    float *X;        /* [cap*n, F] normalised input (MLP inference reads its features in place) */
    float *H;        /* GNN, keep: [(L+1)][cap*n, H] node states; else one [cap*n, H] */
    float *A;        /* GNN, keep: [L][cap*n, H] activations of the updates */
    float *U;        /* GNN: [cap*n, H] the node modules' products */
    float *M;        /* GNN: [nrows*cap, H] every edge module's products (forward)
                        and those of the gradients (backward) */
    float *G, *G2;   /* GNN: [maxrows*cap, H] one module's gathered or summed rows */
    const float **ptr; /* GNN: [maxsum + 1] blocks to sum */
    float *xrow;     /* MLP inference: [F] one normalised node */
    float *R;        /* [cap, 2*max(F,H)] readout (mean | max) */
    int *argmax;     /* keep: [cap, max(F,H)] node of each maximum */
    float *Z;        /* keep: [max(L,1)][cap, H] MLP / head hidden; else 2 of them */
    float *s;        /* [cap] scores */
    /* backward only (keep) */
    float *dH, *dU, *dR, *dZ, *dZ2, *ds;
} mt__gnn_ws;

/* The public scorer (gnn/gnn.h): a model, a private plan, a workspace. */
struct mt_gnn_scorer {
    const mt_gnn *m;
    mt__gnn_plan *plan;
    mt__gnn_ws *ws;
};

struct mt_gnn {
    mt_gnn_params p;
    mt__gnn_layout lay;
    float *w;             /* [lay.total] weights */
    float *mean, *std;    /* [F] feature normalisation */
    float *istd;          /* [F] 1 / std */
    int64_t trained;
    /* where the weights came from and, for meta-trained (and adapted)
     * models, the inner procedure that mt_gnn_adapt runs (in files from
     * version 2; inner.steps == 0: none) */
    mt_gnn_origin origin;
    mt_gnn_inner inner;
    float *rates;         /* [lay.total] Meta-SGD's per-weight inner rates; NULL otherwise */
    /* training state (not in files) */
    float *grad, *adam_m, *adam_v;
    int64_t adam_t;
    uint64_t rng;         /* minibatch order for mt_gnn_train_steps */
    /* caches for scoring: one plan, one workspace per thread */
    mt__gnn_plan *plan;
    mt__gnn_ws *ws[MT__GNN_MAX_THREADS];
};

/* model.c */
mt_status mt__gnn_check_params(const mt_gnn_params *p, char *err, size_t errlen);
/* Fills the layout of an architecture; MT_INVALID_ARG when out of range. */
mt_status mt__gnn_layout_make(mt_gnn_arch arch, int F, int H, int L, mt__gnn_layout *lay, char *err, size_t errlen);
/* A model with allocated but unset weights (mt_gnn_create draws them). */
mt_status mt__gnn_alloc(const mt_gnn_params *p, mt_gnn **out, char *err, size_t errlen);
/* Draws the weights from seed (LeCun-uniform, last layer small). */
void mt__gnn_init_weights(mt_gnn *m, uint64_t seed);
void mt__gnn_drop_caches(mt_gnn *m);
void mt__gnn_plan_free(mt__gnn_plan *p);
void mt__gnn_ws_free(mt__gnn_ws *ws);
uint64_t mt__gnn_rand(uint64_t *state);

/* forward.c */
/* Checks a shape (types, indices, sizes): MT_INVALID_ARG with a reason. */
mt_status mt__gnn_check_shape(const mt_graph_shape *s, char *err, size_t errlen);
int mt__gnn_plan_matches(const mt__gnn_plan *p, const mt_graph_shape *s);
mt_status mt__gnn_plan_make(const mt_gnn *m, const mt_graph_shape *s, mt__gnn_plan **out);
mt_status mt__gnn_ws_make(const mt_gnn *m, const mt__gnn_plan *p, int cap, int keep, mt__gnn_ws **out);
/* Normalises b graphs' features (feats[i] is graph i's n x F) into ws->X,
 * in the sorted row order (and builds the index lists for b graphs). */
void mt__gnn_input(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *const *feats);
/* Forward of the b graphs in ws->X; scores in ws->s. The GNN's is
 * mt__gnn_embed, mt__gnn_layer per layer, mt__gnn_readout, mt__gnn_head;
 * the MLP's is mt__gnn_readout of the features, mt__gnn_head. */
void mt__gnn_forward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b);
/* Backward after mt__gnn_forward on a keep workspace: ds[b] is the loss
 * gradient of the scores; adds the weight gradients to grad. The pieces'
 * backwards in reverse order. */
void mt__gnn_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *ds, float *grad);

/* The pieces of the forward, each with its backward (tests/test_gnn.c
 * checks them one by one against finite differences). They work on b
 * graphs' node-major rows ([n*b, H] node states: place q's b rows at
 * q*b) in a workspace; the backwards need a keep workspace, add weight
 * gradients to grad, and overwrite the workspace's scratch (dU, M, G, G2,
 * dZ, dZ2). */
/* h = lrelu(X W_in + b_in), one product per node module over ws->X. */
void mt__gnn_embed(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, float *h);
/* From ws->dH = dL/dh (h: the forward's output): W_in's and b_in's gradients. */
void mt__gnn_embed_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *h, float *grad);
/* Layer l: hn = h + a, a = lrelu(h U_t + b_t + the sum of the messages
 * h_src W_e into each node), the messages as the plan schedules them (a
 * product per distinct source or destination, pulled sums). hn may be h;
 * a may be NULL (not kept). */
void mt__gnn_layer(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, int l, const float *h, float *hn, float *a);
/* Its backward from the forward's h and a (act): ws->dH holds dL/dhn and becomes dL/dh. */
void mt__gnn_layer_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, int l, const float *h, const float *act, float *grad);
/* The readout of x (the GNN's states, c = H; the MLP's features, c = F):
 * ws->R[g] = [mean | max] of graph g's nodes (row stride 2c), summed and
 * compared in node order; with keep, ws->argmax[g*c + j] = the first node
 * of the maximum. */
void mt__gnn_readout(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *x);
/* The GNN's: adds dL/dh from ws->dR onto dh. */
void mt__gnn_readout_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, float *dh);
/* The head on ws->R: hidden layers z = lrelu(in W + b) (the GNN's one,
 * the MLP's L), then ws->s = z w_out + b_out. */
void mt__gnn_head(const mt_gnn *m, mt__gnn_ws *w, int b);
/* From ds[b]: the head's gradients, and for the GNN dL/dR into ws->dR. */
void mt__gnn_head_backward(const mt_gnn *m, mt__gnn_ws *w, int b, const float *ds, float *grad);

/* Inference (scoring): the scores of b <= ws->cap graphs into ws->s, from
 * feats as mt_gnn_score takes them (graph-major, contiguous). ws may lack
 * keep. The same computation as mt__gnn_input + mt__gnn_forward (for the
 * MLP, without storing the normalised input). */
void mt__gnn_infer(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *feats);

/* train.c */
/* The feature normalisation over every node of samples[0..n) (finite
 * values only; a constant feature gets standard deviation 1), as
 * mt_gnn_fit computes it: sums kept in double by mt__gnn_norm_add, set by
 * mt__gnn_norm_set. */
typedef struct mt__gnn_norm {
    double sum[MT_GRAPH_FEATS], sq[MT_GRAPH_FEATS], cnt;
} mt__gnn_norm;
void mt__gnn_norm_add(mt__gnn_norm *a, int F, const mt_gnn_sample *samples, int n);
void mt__gnn_norm_set(mt_gnn *m, const mt__gnn_norm *a);
/* Forgets a meta-trained model's inner procedure: the weights are then
 * an ordinary (pooled) model's. */
void mt__gnn_clear_inner(mt_gnn *m);

/* maml.c */
/* A loss context: plans and training workspaces per shape, and scratch,
 * for the whole-set losses of one model (its layout fixes the
 * workspaces' sizes). Grows as needed; freed with mt__gnn_lctx_free. */
typedef struct mt__gnn_lctx mt__gnn_lctx;
mt_status mt__gnn_lctx_make(const mt_gnn *m, mt__gnn_lctx **out, char *err, size_t errlen);
void mt__gnn_lctx_free(mt__gnn_lctx *c);
/* The loss of a whole set at weights w (NULL: the model's): ranking over
 * every pair of a group, regression over every sample (as loss says), each
 * group's targets shifted so that the best working one of the group in
 * ref[0..nref) is 0 (ref NULL, or no working sample of the group there:
 * the set's own best), as a tuner knows only the best it measured; and,
 * if grad is not NULL, its gradient (overwritten). Forward and backward
 * run in chunks of at most one workspace's graphs, the gradient exact for
 * the whole set. MT_INVALID_ARG for n < 1 or a malformed sample;
 * MT_NOMEM. */
mt_status mt__gnn_set_loss(mt__gnn_lctx *c, mt_gnn *m, const float *w, mt_gnn_loss loss, const mt_gnn_sample *const *set, int n,
                           const mt_gnn_sample *const *ref, int nref, double *out, float *grad, char *err, size_t errlen);

/* One meta-iteration on explicitly given support and query sets
 * (mt_gnn_meta_train draws them; tests give their own). */
typedef struct mt__gnn_meta mt__gnn_meta;
typedef struct mt__gnn_split {
    const mt_gnn_sample *const *support;
    int ns;
    const mt_gnn_sample *const *query;
    int nq;
} mt__gnn_split;
/* The state of a meta-training run of m with params p (checked): Adam's
 * moments of the weights (and of Meta-SGD's log rates), a loss context.
 * Sets m's inner procedure from p (Meta-SGD: every rate p->inner_lr) and
 * its origin to meta-trained. */
mt_status mt__gnn_meta_make(mt_gnn *m, const mt_gnn_meta_params *p, mt__gnn_meta **out, char *err, size_t errlen);
void mt__gnn_meta_free(mt__gnn_meta *st);
/* One meta-iteration over tasks[0..T): adapts a copy of the weights on each
 * support set with the inner procedure (the code of mt_gnn_adapt), takes
 * the query loss's gradient at the adapted weights, averages over the
 * tasks, and takes one Adam step of the weights (and of Meta-SGD's log
 * rates). *qloss (if not NULL) gets the mean query loss at the adapted
 * weights. Every set must hold at least one sample (MT_INVALID_ARG). */
mt_status mt__gnn_meta_step(mt__gnn_meta *st, const mt__gnn_split *tasks, int T, double *qloss, char *err, size_t errlen);
/* The meta-gradients of the last step, as Adam took them (after clipping):
 * of the weights (rates 0), or of Meta-SGD's log rates (rates 1; NULL for
 * first-order MAML). For tests. */
const float *mt__gnn_meta_grad(const mt__gnn_meta *st, int rates);

/* file.c */
uint64_t mt__gnn_fnv64(const unsigned char *p, size_t n);

#endif
