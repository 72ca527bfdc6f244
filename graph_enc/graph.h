/* Kernel graphs: the contract between the graph encoder (graph_enc/) and the
 * GNN (gnn/).
 *
 * A graph has typed nodes and typed, directed edges. Its *shape* (node types
 * and the edge lists) is fixed per template: every config of every workload of
 * one template encodes to the same shape, and only the node features differ.
 * That lets thousands of candidates batch into dense tensors: a batch is one
 * shape plus B x n_nodes x MT_GRAPH_FEATS floats.
 *
 * Node and edge types are small integers below MT_GRAPH_NODE_TYPES and
 * MT_GRAPH_EDGE_TYPES; their meaning is the encoder's (graph_enc/graph_enc.h
 * names them), the GNN only needs the counts. Every node has the same number
 * of features, MT_GRAPH_FEATS, already normalised to roughly unit scale
 * (log-scaled counts, one-hot kinds); unused features are 0. */
#ifndef MTGPU_GRAPH_H
#define MTGPU_GRAPH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_GRAPH_NODE_TYPES 12
#define MT_GRAPH_EDGE_TYPES 12
#define MT_GRAPH_FEATS 48

/* The shape shared by all graphs of one template. Arrays are owned by
 * whoever made the shape (mt_graph_shape_free releases a shape from the
 * encoder). */
typedef struct mt_graph_shape {
    int n_nodes;
    int *node_type;  /* [n_nodes], each in [0, MT_GRAPH_NODE_TYPES) */
    int n_edges;
    int *edge_src;   /* [n_edges] node indices: a message goes src -> dst */
    int *edge_dst;   /* [n_edges] */
    int *edge_type;  /* [n_edges], each in [0, MT_GRAPH_EDGE_TYPES) */
    uint64_t hash;   /* of everything above: equal shapes have equal hashes */
} mt_graph_shape;

void mt_graph_shape_free(mt_graph_shape *s);

#ifdef __cplusplus
}
#endif
#endif
