/* The graph encoder: (workload, template, config, device) -> a typed graph
 * (graph_enc/graph.h) for the GNN cost model.
 *
 * An encoder belongs to one template. Creating it builds the template's
 * graph *shape* once (node types and typed edges, identical for every config
 * of every workload of the template); encoding a batch of configs then fills
 * only node features, n_nodes x MT_GRAPH_FEATS floats per config.
 *
 * How one shape fits every config (graph_enc/genc-impl.h has the details):
 * each IR node is named by a structural key that does not depend on sizes:
 * loops by their variable name, stores and loads by their buffer's name,
 * guards by what they guard, plus a context that changes only on the else
 * side of a guard. Statements that a template replicates (register tiles
 * unrolled in C) share a key and become one graph node whose features count
 * the copies; loops of extent 1 that a template leaves out are simply absent
 * (a loop of extent 1 is no loop). The shape is the union of the keys seen
 * over a fixed, deterministic probe set of workloads and configs, each node
 * placed under its deepest observed parent. Nodes absent from a config keep
 * their place in the shape with the feature `present` = 0 and all other
 * features 0. A key met at encode time that the probe set never produced
 * does not change the shape: its counts are folded into its nearest
 * enclosing node that the shape has (features 5..7, "folded").
 *
 * Thread safety: an encoder is read-only once created; any number of
 * threads may call mt_graph_encode on one encoder at once. */
#ifndef MTGPU_GRAPH_ENC_H
#define MTGPU_GRAPH_ENC_H

#include <stddef.h>
#include <stdio.h>

#include "mtgpu/device.h"
#include "graph.h"
#include "space.h"
#include "mtgpu/status.h"
#include "template.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Node types (mt_graph_shape.node_type). */
typedef enum mt_graph_node_type {
    MT_GNODE_CONTEXT, /* node 0: workload, device and kernel-wide features */
    MT_GNODE_LOOP,    /* a FOR loop (any kind; the kind is a feature) */
    MT_GNODE_BUFFER,  /* a buffer, by name: global parameters, local and private arrays */
    MT_GNODE_LOAD,    /* the loads of one buffer inside one statement */
    MT_GNODE_STORE,   /* a store (replicated copies merged) */
    MT_GNODE_ARITH,   /* the floating-point arithmetic of one store's value */
    MT_GNODE_ALLOC,   /* an allocation of a local or private buffer */
    MT_GNODE_BARRIER, /* work-group barriers */
    MT_GNODE_GUARD,   /* an IF: bounds and overhang tests */
    MT_GNODE_COUNT
} mt_graph_node_type;

/* Edge types (mt_graph_shape.edge_type); messages go src -> dst. */
typedef enum mt_graph_edge_type {
    MT_GEDGE_CHILD,     /* parent -> child (loop/guard -> statement, statement -> its loads and arithmetic) */
    MT_GEDGE_PARENT,    /* child -> parent */
    MT_GEDGE_NEXT,      /* sibling -> next sibling (program order) */
    MT_GEDGE_PREV,      /* sibling -> previous sibling */
    MT_GEDGE_LOAD_BUF,  /* load -> buffer */
    MT_GEDGE_BUF_LOAD,  /* buffer -> load */
    MT_GEDGE_STORE_BUF, /* store -> buffer */
    MT_GEDGE_BUF_STORE, /* buffer -> store */
    MT_GEDGE_CTX_NODE,  /* context -> every other node */
    MT_GEDGE_NODE_CTX,  /* every other node -> context */
    MT_GEDGE_ALLOC_BUF, /* allocation -> buffer */
    MT_GEDGE_BUF_ALLOC, /* buffer -> allocation */
    MT_GEDGE_COUNT
} mt_graph_edge_type;

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(MT_GNODE_COUNT <= MT_GRAPH_NODE_TYPES, "node types exceed MT_GRAPH_NODE_TYPES");
_Static_assert(MT_GEDGE_COUNT <= MT_GRAPH_EDGE_TYPES, "edge types exceed MT_GRAPH_EDGE_TYPES");
_Static_assert(MT_GRAPH_FEATS >= 48, "the feature layout below needs 48 features");
#endif

/* Feature layout (index into a node's MT_GRAPH_FEATS floats). Counts are
 * log2(1 + x) / 8, so most lie in [0, 4]; flags and one-hots are 0/1.
 * Every node:   0 present, 1 copies merged, 2 executions per work-item,
 *               3 executions over the whole grid, 4 enclosing loops / 16,
 *               5..7 folded unknown nodes, their flops, their accesses.
 * The rest depends on the node type; mt_graph_feature_name names each. */
#define MT_GFEAT_PRESENT 0
#define MT_GFEAT_COMMON 8 /* first type-specific feature */

const char *mt_graph_node_type_name(int type);
const char *mt_graph_edge_type_name(int type);
/* Writes the name of feature i of a node of `type` ("" when unused);
 * returns its length like snprintf, or -1 when type or i is out of range. */
int mt_graph_feature_name(int type, int i, char *buf, size_t len);

typedef struct mt_graph_encoder mt_graph_encoder;

/* Builds the encoder (and the shape) for template t; deterministic: two
 * encoders of one template have identical shapes and hashes. Takes some
 * hundreds of template builds (tens of milliseconds). *out is owned by the
 * caller (mt_graph_encoder_free). On failure *out is NULL. */
mt_status mt_graph_encoder_create(const mt_template *t, mt_graph_encoder **out, char *err, size_t errlen);
void mt_graph_encoder_free(mt_graph_encoder *enc);

const mt_template *mt_graph_encoder_template(const mt_graph_encoder *enc);
/* The shape, owned by the encoder (valid until mt_graph_encoder_free). */
const mt_graph_shape *mt_graph_encoder_shape(const mt_graph_encoder *enc);
/* A copy of the shape whose arrays the caller frees with mt_graph_shape_free. */
mt_status mt_graph_encoder_shape_copy(const mt_graph_encoder *enc, mt_graph_shape *out);
/* A short label of node i for dumps ("loop rco", "store acc", "buffer input"); NULL out of range. */
const char *mt_graph_encoder_node_label(const mt_graph_encoder *enc, int i);

/* Encodes n configs of workload wl (space sp, built by the encoder's
 * template for wl) for device dev (NULL: device features 0).
 * feats: n * n_nodes * MT_GRAPH_FEATS floats, config-major, all written.
 * valid: n ints (may be NULL): 1 where the template built the config, 0
 * where it cannot (MT_INVALID_CONFIG and the like): that config's features
 * are all 0. Returns MT_INVALID_ARG for NULL arguments, a space of another
 * template or configs outside sp; MT_UNSUPPORTED when the template does not
 * accept wl; MT_NOMEM when memory runs out (feats then partly written). */
mt_status mt_graph_encode(const mt_graph_encoder *enc, const mt_workload *wl, const mt_space *sp, const mt_config *cfgs, int n,
                          const mt_device_info *dev, float *feats, int *valid, char *err, size_t errlen);

/* The same for callers that only want the configs the template builds
 * (a cost model gives the others the invalid score without scoring them):
 * feats gets one graph per buildable config, packed in order, *nvalid of
 * them (feats must have room for n); index[j] (n ints, may be NULL) is the
 * position in cfgs of graph j. Nothing is written for the other configs, so
 * a batch that is mostly unbuildable costs little more than its builds.
 * Same errors as mt_graph_encode (nvalid must not be NULL); on MT_NOMEM
 * *nvalid counts the graphs written before it. */
mt_status mt_graph_encode_packed(const mt_graph_encoder *enc, const mt_workload *wl, const mt_space *sp, const mt_config *cfgs, int n,
                                 const mt_device_info *dev, float *feats, int *index, int *nvalid, char *err, size_t errlen);

/* Encodes one kernel that the encoder's template already built for wl (the
 * tuner builds kernels anyway: this saves building them twice) into feats
 * (n_nodes * MT_GRAPH_FEATS floats, all written). Any kernel is accepted:
 * structure the shape does not know folds into the nearest known node. */
mt_status mt_graph_encode_kernel(const mt_graph_encoder *enc, const mt_workload *wl, const mt_kernel *k, const mt_device_info *dev,
                                 float *feats, char *err, size_t errlen);

/* Writes the graph as JSON to f: nodes (index, type, label when labels is
 * given, features when feats is given: n_nodes * MT_GRAPH_FEATS floats of
 * one config, non-zero ones only) and edges. labels may be NULL. */
mt_status mt_graph_dump(const mt_graph_shape *shape, const char *const *labels, const float *feats, FILE *f);
/* The same with the encoder's labels. */
mt_status mt_graph_encoder_dump(const mt_graph_encoder *enc, const float *feats, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
