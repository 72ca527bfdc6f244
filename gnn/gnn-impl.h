/* The GNN model's internals, shared by gnn/model.c (layout, lifetime),
 * gnn/forward.c (plans, forward, backward, scoring), gnn/train.c and
 * gnn/file.c. Private to libmtgpu. */
#ifndef MTGPU_GNN_IMPL_H
#define MTGPU_GNN_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/gnn.h"
#include "tensor.h"

#define MT__GNN_MAX_LAYERS 64
#define MT__GNN_MAX_HIDDEN 4096
#define MT__GNN_MAX_THREADS 16
/* Graphs per scoring chunk: fixed, so a graph's score never depends on how
 * the batch is split over threads. */
#define MT__GNN_CHUNK 64

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
} mt__gnn_plan;

/* Buffers for the forward (and, with keep, the backward) of up to cap
 * graphs of one plan. Allocated once per plan and capacity.
 *
 * Node rows are sorted by module: for b graphs, module t's rows are
 * [b*node_off[t], b*node_off[t+1]), graph by graph, so each node module is
 * one GEMM on a contiguous block with no gather or scatter; rowmap says
 * where node v of graph g lives. */
typedef struct mt__gnn_ws {
    int cap, keep, built_b;  /* built_b: graphs the index lists were built for */
    int *rowmap;             /* [cap*n] row of node v of graph g at g*n + v */
    int *node_start;         /* [nt + 1] node module blocks */
    int *edge_start, *edge_src, *edge_dst;   /* typed index of the edge modules */
    float *X;        /* [cap*n, F] normalised input */
    float *H;        /* keep: [(L+1)][cap*n, H] node states; else one [cap*n, H] */
    float *A;        /* keep: [L][cap*n, H] activations of the updates */
    float *U;        /* [cap*n, H] update pre-activation */
    float *ws_in, *ws_out; /* typed-linear workspaces: [max(n,E)*cap, max(F,H)] */
    float *R;        /* [cap, 2*max(F,H)] readout (mean | max) */
    int *argmax;     /* [cap, max(F,H)] */
    float *Z;        /* keep: [max(L,1)][cap, H] MLP / head hidden; else 2 of them */
    float *s;        /* [cap] scores */
    /* backward only (keep) */
    float *dH, *dU, *dR, *dZ, *dZ2, *ds;
} mt__gnn_ws;

struct mt_gnn {
    mt_gnn_params p;
    mt__gnn_layout lay;
    float *w;             /* [lay.total] weights */
    float *mean, *std;    /* [F] feature normalisation */
    float *istd;          /* [F] 1 / std */
    int64_t trained;
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
/* Forward of the b graphs in ws->X; scores in ws->s. */
void mt__gnn_forward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b);
/* Backward after mt__gnn_forward on a keep workspace: ds[b] is the loss
 * gradient of the scores; adds the weight gradients to grad. */
void mt__gnn_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *ds, float *grad);

/* file.c */
uint64_t mt__gnn_fnv64(const unsigned char *p, size_t n);

#endif
