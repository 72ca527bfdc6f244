/* Names of node and edge types, and a JSON dump of a graph for debugging. */
#include <stdio.h>

#include "graph_enc.h"

const char *mt_graph_node_type_name(int type) {
    static const char *names[MT_GNODE_COUNT] = {"context", "loop", "buffer", "load", "store", "arith", "alloc", "barrier", "guard"};
    return type >= 0 && type < MT_GNODE_COUNT ? names[type] : "unknown";
}

const char *mt_graph_edge_type_name(int type) {
    static const char *names[MT_GEDGE_COUNT] = {"child",     "parent",    "next",     "prev",     "load_buf",  "buf_load",
                                                "store_buf", "buf_store", "ctx_node", "node_ctx", "alloc_buf", "buf_alloc"};
    return type >= 0 && type < MT_GEDGE_COUNT ? names[type] : "unknown";
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s < 0x20) continue;
        fputc(*s, f);
    }
    fputc('"', f);
}

mt_status mt_graph_dump(const mt_graph_shape *shape, const char *const *labels, const float *feats, FILE *f) {
    if (!shape || !f) return MT_INVALID_ARG;
    fprintf(f, "{\"n_nodes\": %d, \"n_edges\": %d, \"hash\": \"%016llx\",\n \"nodes\": [\n", shape->n_nodes, shape->n_edges,
            (unsigned long long)shape->hash);
    for (int i = 0; i < shape->n_nodes; i++) {
        int t = shape->node_type[i];
        fprintf(f, "  {\"id\": %d, \"type\": \"%s\"", i, mt_graph_node_type_name(t));
        if (labels && labels[i]) {
            fputs(", \"label\": ", f);
            json_str(f, labels[i]);
        }
        if (feats) {
            const float *x = feats + (size_t)i * MT_GRAPH_FEATS;
            fputs(", \"feats\": {", f);
            int first = 1;
            for (int j = 0; j < MT_GRAPH_FEATS; j++) {
                if (x[j] == 0.0f) continue;
                char name[40];
                if (mt_graph_feature_name(t, j, name, sizeof name) <= 0) snprintf(name, sizeof name, "f%d", j);
                fprintf(f, "%s\"%s\": %.4g", first ? "" : ", ", name, (double)x[j]);
                first = 0;
            }
            fputc('}', f);
        }
        fprintf(f, "}%s\n", i + 1 < shape->n_nodes ? "," : "");
    }
    fputs(" ],\n \"edges\": [\n", f);
    for (int i = 0; i < shape->n_edges; i++)
        fprintf(f, "  [%d, %d, \"%s\"]%s\n", shape->edge_src[i], shape->edge_dst[i], mt_graph_edge_type_name(shape->edge_type[i]),
                i + 1 < shape->n_edges ? "," : "");
    fputs(" ]}\n", f);
    return ferror(f) ? MT_IO : MT_OK;
}
