/* libFuzzer harness for the GNN model-file reader (mt_gnn_load_mem).
 *
 * Two kinds of input. Raw: the bytes are a model file. Patch (first byte
 * 'P'): the bytes edit a valid model of one of five kinds built here, and
 * can re-seal its checksum, so the fuzzer gets past the checksum to the
 * field checks without a seed corpus:
 *   'P', flags, u16 length (0: the model's own), then 3-byte records
 *   (u16 offset, byte) that overwrite byte offset % length.
 *   flags % 5 picks the model: pooled modular, shared or MLP (format
 *   version 2 with no inner procedure), or meta-trained modular (first-order
 *   MAML) or MLP (Meta-SGD, with per-weight rates); flags & 8 recomputes
 *   the checksum.
 *
 * Any input must load or fail cleanly: MT_CORRUPT with a message and no
 * model. A model that loads must save back to exactly the same bytes (the
 * format has one encoding; a version-1 file saves as version 2, which must
 * then load and save back to itself), score a small batch, and, when it
 * has an inner procedure, adapt on two graphs, all without a sanitizer
 * report (its scores and weights may be anything, even infinite). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gnn-impl.h"
#include "gnn.h"

#define NBASE 5
static unsigned char *base[NBASE];
static size_t base_len[NBASE];
static int ready;

static void build_bases(void) {
    static const struct {
        mt_gnn_arch arch;
        int hidden, layers;
        mt_gnn_meta_algo algo; /* 0: pooled */
    } k[NBASE] = {{MT_GNN_MODULAR, 1, 1, 0}, {MT_GNN_SHARED, 2, 1, 0}, {MT_GNN_MLP, 2, 2, 0}, {MT_GNN_MODULAR, 1, 1, MT_GNN_META_FOMAML},
                  {MT_GNN_MLP, 2, 1, MT_GNN_META_SGD}};
    for (int i = 0; i < NBASE; i++) {
        mt_gnn_params p = mt_gnn_default_params();
        p.arch = k[i].arch, p.hidden = k[i].hidden, p.layers = k[i].layers;
        mt_gnn *m;
        if (mt_gnn_create(&p, &m, NULL, 0) != MT_OK) abort();
        if (k[i].algo) {
            /* what meta-training leaves, set by hand */
            m->origin = MT_GNN_ORIGIN_META;
            m->inner = (mt_gnn_inner){.algorithm = k[i].algo, .steps = 2, .lr = 0.01f, .loss = MT_GNN_LOSS_BOTH};
            if (k[i].algo == MT_GNN_META_SGD) {
                if (!(m->rates = malloc(sizeof(float) * m->lay.total))) abort();
                for (size_t j = 0; j < m->lay.total; j++) m->rates[j] = 0.001f * (float)(j % 7 + 1);
            }
        }
        if (mt_gnn_save_mem(m, &base[i], &base_len[i], NULL, 0) != MT_OK) abort();
        mt_gnn_free(m);
    }
    ready = 1;
}
/* A chain of 4 nodes of 3 types plus a context node. */
static int nt[5] = {0, 0, 1, 2, 11}, src[8] = {0, 1, 2, 1, 4, 4, 4, 4}, dst[8] = {1, 2, 3, 0, 0, 1, 2, 3}, et[8] = {0, 0, 0, 1, 2, 2, 2, 11};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) build_bases();
    size_t len = size;
    unsigned char *buf;
    if (size >= 4 && data[0] == 'P') {
        int a = data[1] % NBASE;
        size_t want = (size_t)data[2] | (size_t)data[3] << 8;
        len = want ? (want < base_len[a] + 64 ? want : base_len[a] + 64) : base_len[a];
        buf = calloc(len ? len : 1, 1);
        if (!buf) return 0;
        memcpy(buf, base[a], len < base_len[a] ? len : base_len[a]);
        for (size_t i = 4; len > 0 && i + 3 <= size; i += 3) buf[((size_t)data[i] | (size_t)data[i + 1] << 8) % len] = data[i + 2];
        if ((data[1] & 8) && len >= 8) {
            uint64_t h = mt__gnn_fnv64(buf, len - 8);
            for (int i = 0; i < 8; i++) buf[len - 8 + i] = (unsigned char)(h >> (8 * i));
        }
    } else {
        buf = malloc(len ? len : 1); /* exactly len bytes: ASan sees any read past them */
        if (!buf) return 0;
        memcpy(buf, data, len);
    }

    mt_gnn *m = (mt_gnn *)&ready;
    char err[256] = "";
    mt_status st = mt_gnn_load_mem(buf, len, &m, err, sizeof err);
    if (st != MT_OK) {
        if (st != MT_CORRUPT || m != NULL || err[0] == '\0') abort();
        free(buf);
        return 0;
    }
    unsigned char *out;
    size_t out_len;
    if (mt_gnn_save_mem(m, &out, &out_len, err, sizeof err) != MT_OK) abort();
    if (buf[8] == 1) {
        /* version 1 saves as version 2: that must be a fixed point */
        mt_gnn *m2 = NULL;
        unsigned char *out2;
        size_t out2_len;
        if (mt_gnn_load_mem(out, out_len, &m2, err, sizeof err) != MT_OK) abort();
        if (mt_gnn_save_mem(m2, &out2, &out2_len, err, sizeof err) != MT_OK) abort();
        if (out2_len != out_len || memcmp(out, out2, out_len) != 0) {
            fprintf(stderr, "a version-1 model saved as version 2 does not save back to the same bytes\n");
            abort();
        }
        free(out2);
        mt_gnn_free(m2);
    } else if (out_len != len || memcmp(out, buf, len) != 0) {
        fprintf(stderr, "a loaded model does not save back to the same bytes\n");
        abort();
    }
    free(out);
    mt_graph_shape s = {5, nt, 8, src, dst, et, 0};
    float feats[2 * 5 * MT_GRAPH_FEATS], scores[2];
    for (size_t i = 0; i < sizeof feats / sizeof *feats; i++) feats[i] = (float)(i % 7) - 3.0f;
    mt_gnn_params p = mt_gnn_get_params(m);
    p.threads = 1;
    if (mt_gnn_set_params(m, &p, err, sizeof err) != MT_OK) abort();
    if (mt_gnn_score(m, &s, 2, feats, scores, err, sizeof err) != MT_OK) abort();
    if (mt_gnn_get_inner(m).steps > 0) {
        mt_gnn_sample smp[2] = {{&s, feats, 0.0f, 0, 0}, {&s, feats + 5 * MT_GRAPH_FEATS, -1.0f, 0, 0}};
        if (mt_gnn_adapt(m, smp, 2, err, sizeof err) != MT_OK) abort();
    }
    mt_gnn_free(m);
    free(buf);
    return 0;
}
