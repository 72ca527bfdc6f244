/* The graph encoder (graph_enc/): one shape per template whatever the
 * workload and config, features that are finite and follow the config and
 * the device, zeros for configs the template cannot build (and none at all
 * in the packed form), and a read-only encoder that several threads may
 * share. Builds IR only: no device. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph_enc.h"
#include "template.h"

#define F MT_GRAPH_FEATS
#define NCFG 100 /* buildable configs per workload */

static const char *const direct_wls[] = {
    "n=1,c=32,h=14,w=14,k=32,r=1,s=1",                   /* 1x1 */
    "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",             /* ResNet-50 3x3 */
    "n=1,c=16,h=15,w=15,k=24,r=3,s=3,stride=2,pad=1",    /* stride 2 */
    "n=1,c=3,h=29,w=29,k=16,r=7,s=7,stride=2,pad=3",     /* 7x7 stride 2 pad 3 */
    "n=1,c=12,h=13,w=11,k=20,r=3,s=3,pad=1",             /* sizes that do not divide tiles */
    "n=2,c=8,h=10,w=10,k=16,r=3,s=3,pad=1",              /* batch 2 */
    "n=1,c=16,h=12,w=12,k=16,r=3,s=3,pad=1,groups=4",    /* grouped */
};
/* kvec takes no grouped convolutions: the direct set without its last. */
#define KVEC_NWLS ((int)(sizeof direct_wls / sizeof direct_wls[0]) - 1)
static const char *const depthwise_wls[] = {
    "n=1,c=32,h=14,w=14,k=32,r=3,s=3,pad=1,groups=32",
    "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1,groups=64",
    "n=1,c=24,h=15,w=15,k=24,r=3,s=3,stride=2,pad=1,groups=24",
    "n=1,c=16,h=15,w=15,k=16,r=7,s=7,stride=2,pad=3,groups=16",
    "n=1,c=12,h=13,w=13,k=12,r=5,s=5,pad=2,groups=12",
    "n=2,c=8,h=10,w=10,k=8,r=3,s=3,pad=1,groups=8",
    "n=1,c=8,h=9,w=9,k=8,r=1,s=1,groups=8",
};

typedef struct tcase {
    const char *tmpl;
    const char *const *wls;
    int nwls;
} tcase;

static const tcase cases[] = {
    {"direct", direct_wls, (int)(sizeof direct_wls / sizeof direct_wls[0])},
    {"depthwise", depthwise_wls, (int)(sizeof depthwise_wls / sizeof depthwise_wls[0])},
    {"gemm", direct_wls, (int)(sizeof direct_wls / sizeof direct_wls[0])},
    {"kvec", direct_wls, KVEC_NWLS},
};

static mt_device_info dev_a(void) {
    mt_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "test gpu");
    d.compute_units = 80;
    d.clock_mhz = 1500;
    d.local_mem_bytes = 48 * 1024;
    d.global_mem_bytes = (uint64_t)16 << 30;
    d.max_work_group_size = 1024;
    d.pref_vector_width = 1;
    d.native_vector_width = 1;
    d.peak_gflops = 15000;
    return d;
}

static mt_device_info dev_b(void) {
    mt_device_info d = dev_a();
    snprintf(d.name, sizeof d.name, "test cpu");
    d.is_cpu = 1;
    d.compute_units = 8;
    d.clock_mhz = 3000;
    d.local_mem_bytes = 32 * 1024;
    d.pref_vector_width = 8;
    d.native_vector_width = 8;
    d.peak_gflops = 800;
    return d;
}

static mt_graph_encoder *make(const char *name) {
    const mt_template *t = mt_template_find(name);
    assert_non_null(t);
    mt_graph_encoder *e = NULL;
    char err[256] = "";
    mt_status st = mt_graph_encoder_create(t, &e, err, sizeof err);
    if (st != MT_OK) fail_msg("create %s: %s", name, err);
    assert_non_null(e);
    return e;
}

static void check_shape(const mt_graph_shape *s) {
    assert_true(s->n_nodes > 1);
    assert_int_equal(s->node_type[0], MT_GNODE_CONTEXT);
    for (int i = 0; i < s->n_nodes; i++) {
        assert_true(s->node_type[i] >= 0 && s->node_type[i] < MT_GRAPH_NODE_TYPES);
        assert_true(s->node_type[i] < MT_GNODE_COUNT);
        if (i) assert_int_not_equal(s->node_type[i], MT_GNODE_CONTEXT);
    }
    assert_true(s->n_edges > 0);
    for (int i = 0; i < s->n_edges; i++) {
        assert_true(s->edge_src[i] >= 0 && s->edge_src[i] < s->n_nodes);
        assert_true(s->edge_dst[i] >= 0 && s->edge_dst[i] < s->n_nodes);
        assert_true(s->edge_type[i] >= 0 && s->edge_type[i] < MT_GRAPH_EDGE_TYPES && s->edge_type[i] < MT_GEDGE_COUNT);
    }
}

static int same_shape(const mt_graph_shape *a, const mt_graph_shape *b) {
    return a->n_nodes == b->n_nodes && a->n_edges == b->n_edges && a->hash == b->hash &&
           !memcmp(a->node_type, b->node_type, sizeof(int) * (size_t)a->n_nodes) &&
           !memcmp(a->edge_src, b->edge_src, sizeof(int) * (size_t)a->n_edges) &&
           !memcmp(a->edge_dst, b->edge_dst, sizeof(int) * (size_t)a->n_edges) &&
           !memcmp(a->edge_type, b->edge_type, sizeof(int) * (size_t)a->n_edges);
}

static void test_names(void **state) {
    (void)state;
    for (int t = 0; t < MT_GNODE_COUNT; t++) {
        assert_string_not_equal(mt_graph_node_type_name(t), "unknown");
        char buf[48];
        assert_true(mt_graph_feature_name(t, 0, buf, sizeof buf) > 0);
        assert_string_equal(buf, "present");
    }
    for (int t = 0; t < MT_GEDGE_COUNT; t++) assert_string_not_equal(mt_graph_edge_type_name(t), "unknown");
    assert_string_equal(mt_graph_node_type_name(-1), "unknown");
    assert_int_equal(mt_graph_feature_name(MT_GNODE_COUNT, 0, NULL, 0), -1);
    assert_int_equal(mt_graph_feature_name(MT_GNODE_LOOP, F, NULL, 0), -1);
}

/* Two encoders of one template have identical shapes; shapes are well formed. */
static void test_shape_stable(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mt_graph_encoder *a = make(cases[c].tmpl), *b = make(cases[c].tmpl);
        const mt_graph_shape *sa = mt_graph_encoder_shape(a), *sb = mt_graph_encoder_shape(b);
        check_shape(sa);
        assert_true(same_shape(sa, sb));
        mt_graph_shape cp;
        assert_int_equal(mt_graph_encoder_shape_copy(a, &cp), MT_OK);
        assert_true(same_shape(sa, &cp));
        mt_graph_shape_free(&cp);
        assert_null(cp.node_type);
        mt_graph_shape_free(&cp); /* twice is harmless */
        assert_non_null(mt_graph_encoder_node_label(a, 0));
        assert_null(mt_graph_encoder_node_label(a, sa->n_nodes));
        print_message("%-9s n_nodes %d n_edges %d hash %016llx\n", cases[c].tmpl, sa->n_nodes, sa->n_edges, (unsigned long long)sa->hash);
        mt_graph_encoder_free(a);
        mt_graph_encoder_free(b);
    }
}

static int all_zero(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f) return 0;
    return 1;
}

/* Up to `want` buildable configs, and up to `nbad` that the template refuses. */
static int pick_configs(const mt_template *t, const mt_workload *wl, const mt_space *sp, uint64_t seed, mt_config *good, int want,
                        mt_config *bad, int nbad, int *got_bad) {
    uint64_t rng = seed;
    int ng = 0, nb = 0;
    for (int tries = 0; tries < 50 * want && (ng < want || nb < nbad); tries++) {
        mt_config cfg;
        mt_space_random(sp, &rng, &cfg);
        mt_kernel *k = NULL;
        char err[64];
        mt_status st = mt_template_build(t, wl, sp, &cfg, &k, err, sizeof err);
        mt_kernel_free(k);
        if (st == MT_OK && ng < want) good[ng++] = cfg;
        else if (st != MT_OK && nb < nbad) bad[nb++] = cfg;
    }
    *got_bad = nb;
    return ng;
}

/* The core contract: for every workload and many configs, one shape, finite
 * features, `present` flags that match, zeros for unbuildable configs. */
static void test_encode_many(void **state) {
    (void)state;
    mt_device_info da = dev_a();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const mt_template *t = mt_template_find(cases[c].tmpl);
        mt_graph_encoder *e = make(cases[c].tmpl);
        const mt_graph_shape *s = mt_graph_encoder_shape(e);
        const size_t row = (size_t)s->n_nodes * F;
        int total = 0, folded = 0;
        for (int w = 0; w < cases[c].nwls; w++) {
            mt_workload wl;
            char err[256];
            assert_int_equal(mt_workload_parse(cases[c].wls[w], &wl, err, sizeof err), MT_OK);
            assert_true(mt_template_accepts(t, &wl));
            mt_space sp;
            assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
            mt_config cfgs[NCFG + 20];
            int nbad = 0;
            int ng = pick_configs(t, &wl, &sp, 1000 + (uint64_t)w, cfgs, NCFG, cfgs + NCFG, 20, &nbad);
            assert_int_equal(ng, NCFG);
            /* Bad ones first, then good: the batch mixes both. */
            mt_config batch[NCFG + 20];
            int n = 0;
            for (int i = 0; i < nbad; i++) batch[n++] = cfgs[NCFG + i];
            for (int i = 0; i < ng; i++) batch[n++] = cfgs[i];
            float *feats = malloc(sizeof(float) * row * (size_t)n);
            int *valid = malloc(sizeof(int) * (size_t)n);
            assert_non_null(feats);
            assert_non_null(valid);
            mt_status st = mt_graph_encode(e, &wl, &sp, batch, n, &da, feats, valid, err, sizeof err);
            if (st != MT_OK) fail_msg("%s %s: %s", cases[c].tmpl, cases[c].wls[w], err);
            /* The shape never changes under encoding. */
            assert_true(same_shape(s, mt_graph_encoder_shape(e)));
            for (int i = 0; i < n; i++) {
                const float *x = feats + (size_t)i * row;
                if (i < nbad) {
                    assert_int_equal(valid[i], 0);
                    assert_true(all_zero(x, row));
                    continue;
                }
                assert_int_equal(valid[i], 1);
                for (size_t j = 0; j < row; j++) {
                    if (!isfinite(x[j]) || fabsf(x[j]) > 64.0f)
                        fail_msg("%s %s config %d: feature %zu of node %zu = %g", cases[c].tmpl, cases[c].wls[w], i, j % F, j / F, (double)x[j]);
                }
                assert_true(x[MT_GFEAT_PRESENT] == 1.0f); /* the context */
                int present = 0;
                for (int v = 0; v < s->n_nodes; v++) {
                    float p = x[(size_t)v * F + MT_GFEAT_PRESENT];
                    assert_true(p == 0.0f || p == 1.0f);
                    present += p == 1.0f;
                    /* An absent node carries nothing but folded counts. */
                    if (p == 0.0f) assert_true(all_zero(x + (size_t)v * F + MT_GFEAT_COMMON, F - MT_GFEAT_COMMON));
                }
                assert_true(present > 5);
                folded += x[43] != 0.0f; /* context: folded nodes */
                for (int v = 1; v < s->n_nodes; v++) folded += x[(size_t)v * F + 5] != 0.0f;
                total++;
            }
            free(feats);
            free(valid);
            mt_space_free(&sp);
        }
        /* The probe set covers these workloads: nothing had to be folded. */
        print_message("%-9s %d configs encoded, %d with folded nodes\n", cases[c].tmpl, total, folded);
        assert_int_equal(folded, 0);
        mt_graph_encoder_free(e);
    }
}

/* A config differing in one tile knob gives different features; a
 * different device gives a different context and nothing else. */
static void test_features_follow_config_and_device(void **state) {
    (void)state;
    mt_device_info da = dev_a(), db = dev_b();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const mt_template *t = mt_template_find(cases[c].tmpl);
        mt_graph_encoder *e = make(cases[c].tmpl);
        const size_t row = (size_t)mt_graph_encoder_shape(e)->n_nodes * F;
        mt_workload wl;
        char err[256];
        assert_int_equal(mt_workload_parse(cases[c].wls[1], &wl, err, sizeof err), MT_OK);
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        mt_config good[20];
        int nbad;
        assert_int_equal(pick_configs(t, &wl, &sp, 77, good, 20, NULL, 0, &nbad), 20);
        /* Knob 0 is a tile knob in every template (tile_f, tile_f, thread_k). */
        int checked = 0;
        for (int g = 0; g < 20 && checked < 5; g++) {
            mt_config nb[64];
            int nn = mt_space_neighbours(&sp, &good[g], nb, 64);
            if (nn > 64) nn = 64;
            for (int i = 0; i < nn; i++) {
                if (nb[i].choice[0] == good[g].choice[0]) continue;
                mt_config pair[2] = {good[g], nb[i]};
                float *x = malloc(sizeof(float) * row * 2);
                int valid[2];
                assert_int_equal(mt_graph_encode(e, &wl, &sp, pair, 2, &da, x, valid, err, sizeof err), MT_OK);
                if (valid[0] && valid[1]) {
                    assert_true(memcmp(x, x + row, sizeof(float) * row) != 0);
                    checked++;
                }
                free(x);
                break;
            }
        }
        assert_true(checked > 0);
        /* Device: A, B and none differ in the context row only. */
        float *xa = malloc(sizeof(float) * row), *xb = malloc(sizeof(float) * row), *xn = malloc(sizeof(float) * row);
        int va, vb, vn;
        assert_int_equal(mt_graph_encode(e, &wl, &sp, &good[0], 1, &da, xa, &va, err, sizeof err), MT_OK);
        assert_int_equal(mt_graph_encode(e, &wl, &sp, &good[0], 1, &db, xb, &vb, err, sizeof err), MT_OK);
        assert_int_equal(mt_graph_encode(e, &wl, &sp, &good[0], 1, NULL, xn, &vn, err, sizeof err), MT_OK);
        assert_true(va && vb && vn);
        assert_true(memcmp(xa, xb, sizeof(float) * F) != 0);
        assert_true(memcmp(xa, xn, sizeof(float) * F) != 0);
        assert_memory_equal(xa + F, xb + F, sizeof(float) * (row - F));
        assert_memory_equal(xa + F, xn + F, sizeof(float) * (row - F));
        /* Encoding is deterministic. */
        float *xa2 = malloc(sizeof(float) * row);
        assert_int_equal(mt_graph_encode(e, &wl, &sp, &good[0], 1, &da, xa2, NULL, err, sizeof err), MT_OK);
        assert_memory_equal(xa, xa2, sizeof(float) * row);
        free(xa);
        free(xb);
        free(xn);
        free(xa2);
        mt_space_free(&sp);
        mt_graph_encoder_free(e);
    }
}

static void test_errors_and_dump(void **state) {
    (void)state;
    mt_graph_encoder *e = make("direct");
    mt_graph_encoder *g = make("gemm");
    char err[256];
    mt_workload wl, dw;
    assert_int_equal(mt_workload_parse("n=1,c=16,h=8,w=8,k=16,r=3,s=3,pad=1", &wl, err, sizeof err), MT_OK);
    assert_int_equal(mt_workload_parse("n=1,c=16,h=8,w=8,k=16,r=3,s=3,pad=1,groups=16", &dw, err, sizeof err), MT_OK);
    mt_space sp, gsp;
    assert_int_equal(mt_template_space(mt_template_find("direct"), &wl, &sp), MT_OK);
    assert_int_equal(mt_template_space(mt_template_find("gemm"), &wl, &gsp), MT_OK);
    mt_config cfg;
    uint64_t rng = 5;
    mt_space_random(&sp, &rng, &cfg);
    const size_t row = (size_t)mt_graph_encoder_shape(e)->n_nodes * F;
    float *x = malloc(sizeof(float) * row);
    mt_graph_encoder *none = e;
    assert_int_equal(mt_graph_encoder_create(NULL, &none, err, sizeof err), MT_INVALID_ARG);
    assert_null(none); /* a failed create leaves *out NULL */
    assert_int_equal(mt_graph_encoder_create(mt_template_find("direct"), NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_graph_encode(NULL, &wl, &sp, &cfg, 1, NULL, x, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_graph_encode(e, &wl, &sp, NULL, 1, NULL, x, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_graph_encode(e, &wl, &gsp, &cfg, 1, NULL, x, NULL, err, sizeof err), MT_INVALID_ARG); /* gemm's space */
    assert_int_equal(mt_graph_encode(e, &dw, &sp, &cfg, 1, NULL, x, NULL, err, sizeof err), MT_UNSUPPORTED);  /* depthwise workload */
    mt_config out_of_space = cfg;
    out_of_space.choice[0] = 1 << 20;
    assert_int_equal(mt_graph_encode(e, &wl, &sp, &out_of_space, 1, NULL, x, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_graph_encode(e, &wl, &sp, NULL, 0, NULL, NULL, NULL, err, sizeof err), MT_OK);
    /* Dump: JSON text naming every node. */
    int v = 0;
    assert_int_equal(mt_graph_encode(e, &wl, &sp, &cfg, 1, NULL, x, &v, err, sizeof err), MT_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(mt_graph_encoder_dump(e, v ? x : NULL, f), MT_OK);
    fclose(f);
    assert_true(len > 100);
    assert_true(buf[0] == '{');
    assert_non_null(strstr(buf, "\"context\""));
    assert_non_null(strstr(buf, "\"edges\""));
    free(buf);
    free(x);
    mt_space_free(&sp);
    mt_space_free(&gsp);
    mt_graph_encoder_free(e);
    mt_graph_encoder_free(g);
}

/* The first store to buffer `name` under s. */
static mt_stmt *find_store(mt_stmt *s, const char *name) {
    if (!s) return NULL;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) {
            mt_stmt *r = find_store(s->items[i], name);
            if (r) return r;
        }
        return NULL;
    case MT_STMT_STORE: return strcmp(s->buf->name, name) == 0 ? s : NULL;
    case MT_STMT_IF: {
        mt_stmt *r = find_store(s->body, name);
        return r ? r : find_store(s->else_body, name);
    }
    default: return find_store(s->body, name);
    }
}

/* A kernel with structure the probe set never produced (an extra loop and
 * buffer) encodes into the same shape, the unknown nodes folded into the
 * context; an unmodified kernel encodes as mt_graph_encode does. */
static void test_unknown_structure_folds(void **state) {
    (void)state;
    mt_graph_encoder *e = make("direct");
    const mt_template *t = mt_template_find("direct");
    mt_workload wl;
    char err[256];
    assert_int_equal(mt_workload_parse("n=1,c=16,h=12,w=12,k=16,r=3,s=3,pad=1", &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_config cfg;
    int nbad;
    assert_int_equal(pick_configs(t, &wl, &sp, 3, &cfg, 1, NULL, 0, &nbad), 1);
    const mt_graph_shape before = *mt_graph_encoder_shape(e);
    const size_t row = (size_t)before.n_nodes * F;
    float *x0 = calloc(row, sizeof(float)), *x1 = calloc(row, sizeof(float)), *xe = calloc(row, sizeof(float));
    int v = 0;
    assert_int_equal(mt_graph_encode(e, &wl, &sp, &cfg, 1, NULL, xe, &v, err, sizeof err), MT_OK);
    assert_int_equal(v, 1);
    mt_kernel *k = NULL;
    assert_int_equal(mt_template_build(t, &wl, &sp, &cfg, &k, err, sizeof err), MT_OK);
    assert_int_equal(mt_graph_encode_kernel(e, &wl, k, NULL, x0, err, sizeof err), MT_OK);
    assert_memory_equal(x0, xe, sizeof(float) * row);
    assert_true(x0[43] == 0.0f);
    /* A local change: the output store also reads a buffer the template
     * never has. Its node and its loads fold into the loop around it. */
    mt_buffer *zb = mt_ir_buffer(k, "zbuf", MT_SCOPE_PRIVATE, 4);
    mt_stmt *out_store = find_store(k->body, "output");
    assert_non_null(out_store);
    mt_expr *old_value = out_store->value;
    out_store->value = mt_ir_add(k, old_value, mt_ir_load(k, zb, mt_ir_int(k, 0)));
    assert_non_null(out_store->value);
    assert_int_equal(mt_graph_encode_kernel(e, &wl, k, NULL, x1, err, sizeof err), MT_OK);
    const mt_graph_shape *after = mt_graph_encoder_shape(e);
    assert_int_equal(after->n_nodes, before.n_nodes);
    assert_true(after->hash == before.hash);
    assert_true(x1[43] == 0.0f); /* nothing reached the context */
    int folded_into = -1;
    for (int v = 1; v < before.n_nodes; v++)
        if (x1[(size_t)v * F + 5] > 0.0f) folded_into = v;
    assert_true(folded_into > 0);
    assert_int_equal(before.node_type[folded_into], MT_GNODE_LOOP);
    for (size_t j = 0; j < row; j++) assert_true(isfinite(x1[j]));
    assert_true(memcmp(x0, x1, sizeof(float) * row) != 0);
    /* A change at the top: an extra loop and buffer after the whole kernel.
     * The kernel becomes an item of a new sequence, which moves every key:
     * everything folds into the context, and the shape still holds. */
    out_store->value = old_value;
    mt_var *zz = mt_ir_var(k, "zz", MT_TYPE_INT);
    mt_stmt *st = mt_ir_store(k, zb, mt_ir_v(k, zz), mt_ir_fma(k, mt_ir_load(k, zb, mt_ir_v(k, zz)), mt_ir_float(k, 2.0f), mt_ir_float(k, 1.0f)));
    mt_stmt *extra = mt_ir_alloc(k, zb, mt_ir_for(k, zz, 4, MT_LOOP_SERIAL, 0, st));
    assert_non_null(extra);
    k->body = mt_ir_seq2(k, k->body, extra);
    assert_non_null(k->body);
    assert_int_equal(mt_graph_encode_kernel(e, &wl, k, NULL, x1, err, sizeof err), MT_OK);
    assert_true(mt_graph_encoder_shape(e)->hash == before.hash);
    assert_true(x1[43] > 0.0f); /* folded nodes, counted on the context */
    assert_true(x1[44] > 0.0f); /* and their flops */
    for (size_t j = 0; j < row; j++) assert_true(isfinite(x1[j]));
    assert_int_equal(mt_graph_encode_kernel(e, &wl, NULL, NULL, x1, err, sizeof err), MT_INVALID_ARG);
    mt_kernel_free(k);
    free(x0);
    free(x1);
    free(xe);
    mt_space_free(&sp);
    mt_graph_encoder_free(e);
}

/* Several threads on one encoder get what one thread gets. */
typedef struct job {
    const mt_graph_encoder *e;
    const mt_workload *wl;
    const mt_space *sp;
    const mt_config *cfgs;
    int n;
    float *out;
    int *valid;
    mt_status st;
} job;

static void *run_job(void *p) {
    job *j = p;
    mt_device_info d = dev_a();
    j->st = mt_graph_encode(j->e, j->wl, j->sp, j->cfgs, j->n, &d, j->out, j->valid, NULL, 0);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    mt_graph_encoder *e = make("gemm");
    const mt_template *t = mt_template_find("gemm");
    mt_workload wl;
    char err[256];
    assert_int_equal(mt_workload_parse("n=1,c=12,h=13,w=11,k=20,r=3,s=3,pad=1", &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    enum { N = 24, T = 3 };
    mt_config cfgs[N];
    uint64_t rng = 9;
    for (int i = 0; i < N; i++) mt_space_random(&sp, &rng, &cfgs[i]);
    const size_t row = (size_t)mt_graph_encoder_shape(e)->n_nodes * F;
    float *ref = malloc(sizeof(float) * row * N);
    int vref[N];
    mt_device_info d = dev_a();
    assert_int_equal(mt_graph_encode(e, &wl, &sp, cfgs, N, &d, ref, vref, err, sizeof err), MT_OK);
    job jobs[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        jobs[i] = (job){e, &wl, &sp, cfgs, N, malloc(sizeof(float) * row * N), malloc(sizeof(int) * N), MT_INVALID_ARG};
        assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(jobs[i].st, MT_OK);
        assert_memory_equal(jobs[i].out, ref, sizeof(float) * row * N);
        assert_memory_equal(jobs[i].valid, vref, sizeof(int) * N);
        free(jobs[i].out);
        free(jobs[i].valid);
    }
    free(ref);
    mt_space_free(&sp);
    mt_graph_encoder_free(e);
}

/* The packed form holds exactly the rows of the buildable configs, in
 * order, with their positions; a batch of one config at a time gives the
 * same bits as the whole batch (the walker's caches start afresh for every
 * kernel). */
static void test_encode_packed(void **state) {
    (void)state;
    mt_device_info da = dev_a();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const mt_template *t = mt_template_find(cases[c].tmpl);
        mt_graph_encoder *e = make(cases[c].tmpl);
        const size_t row = (size_t)mt_graph_encoder_shape(e)->n_nodes * F;
        mt_workload wl;
        char err[256];
        assert_int_equal(mt_workload_parse(cases[c].wls[1], &wl, err, sizeof err), MT_OK);
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        enum { N = 150 };
        mt_config cfgs[N];
        uint64_t rng = 4242;
        for (int i = 0; i < N; i++) mt_space_random(&sp, &rng, &cfgs[i]);
        float *full = malloc(sizeof(float) * row * N), *packed = malloc(sizeof(float) * row * N), *one = malloc(sizeof(float) * row);
        int valid[N], index[N], nv = -1;
        assert_true(full && packed && one);
        assert_int_equal(mt_graph_encode(e, &wl, &sp, cfgs, N, &da, full, valid, err, sizeof err), MT_OK);
        assert_int_equal(mt_graph_encode_packed(e, &wl, &sp, cfgs, N, &da, packed, index, &nv, err, sizeof err), MT_OK);
        int j = 0;
        for (int i = 0; i < N; i++) {
            if (!valid[i]) continue;
            assert_true(j < nv);
            assert_int_equal(index[j], i);
            assert_memory_equal(packed + (size_t)j * row, full + (size_t)i * row, sizeof(float) * row);
            int v1 = 0;
            assert_int_equal(mt_graph_encode(e, &wl, &sp, &cfgs[i], 1, &da, one, &v1, err, sizeof err), MT_OK);
            assert_int_equal(v1, 1);
            assert_memory_equal(one, full + (size_t)i * row, sizeof(float) * row);
            j++;
        }
        assert_int_equal(j, nv);
        assert_true(nv > 0 && nv < N); /* random configs: some build, some do not */
        print_message("%-9s %d of %d random configs packed\n", cases[c].tmpl, nv, N);
        /* index may be NULL; nvalid may not */
        assert_int_equal(mt_graph_encode_packed(e, &wl, &sp, cfgs, N, &da, packed, NULL, &nv, err, sizeof err), MT_OK);
        assert_int_equal(j, nv);
        assert_int_equal(mt_graph_encode_packed(e, &wl, &sp, cfgs, N, &da, packed, index, NULL, err, sizeof err), MT_INVALID_ARG);
        free(full), free(packed), free(one);
        mt_space_free(&sp);
        mt_graph_encoder_free(e);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_shape_stable),
        cmocka_unit_test(test_encode_many),
        cmocka_unit_test(test_encode_packed),
        cmocka_unit_test(test_features_follow_config_and_device),
        cmocka_unit_test(test_errors_and_dump),
        cmocka_unit_test(test_unknown_structure_folds),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
