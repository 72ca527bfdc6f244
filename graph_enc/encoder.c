/* The graph encoder: probe set and shape (the union of structural keys, see
 * genc-impl.h), and encoding of configs into node features.
 *
 * Probe set, fixed and deterministic (seeded), per template: every workload
 * of the list below that the template accepts (batch 2, 1x1, 3x3 pad 1,
 * stride 2, 7x7 stride 2 pad 3, 5x5, dilation 2, grouped, depthwise; sizes
 * chosen so that tiles rarely divide them, which brings out the guards);
 * for each, every knob swept over up to PROBE_OPTS of its options (the first,
 * the last and evenly spaced ones between, so extreme splits are included)
 * with the other knobs random, plus PROBE_RANDOM random configs. Configs the
 * template cannot build are skipped. Structure that only other workloads
 * produce folds into the nearest known node at encode time (never fails). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genc-impl.h"
#include "graph_enc.h"
#include "hash.h"
#include "fail.h"

#define PROBE_OPTS 10
#define PROBE_RANDOM 40

struct mt_graph_encoder {
    const mt_template *t;
    mt_graph_shape shape;
    mt__gindex ix;
    char (*labels)[32];
    const char **label_ptrs;
};

/* ---- probe set ---- */

static const mt_workload probe_workloads[] = {
    /* n  c   h   w   k   r  s  sh sw ph pw dh dw g */
    {2, 12, 15, 13, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 16, 14, 14, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {1, 6, 23, 21, 10, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {1, 8, 9, 11, 12, 3, 3, 1, 1, 0, 0, 1, 1, 2},
    {2, 10, 13, 17, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {1, 12, 11, 11, 12, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {1, 12, 13, 11, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {1, 6, 12, 12, 8, 5, 5, 1, 1, 2, 2, 1, 1, 1},
    {2, 12, 15, 13, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12},
    {1, 16, 14, 14, 16, 3, 3, 2, 2, 1, 1, 1, 1, 16},
    {1, 8, 19, 17, 8, 5, 5, 1, 1, 2, 2, 1, 1, 8},
    {1, 10, 9, 9, 10, 3, 3, 1, 1, 0, 0, 1, 1, 10},
    /* Even output widths, so that vec > 1 divides the inner x tiles of
     * direct and depthwise under every stride and padding. */
    {1, 8, 16, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    {1, 4, 32, 32, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},
    {2, 12, 16, 16, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 12, 16, 16, 20, 1, 1, 2, 2, 0, 0, 1, 1, 1},
    {1, 8, 12, 12, 8, 3, 3, 1, 1, 2, 2, 2, 2, 1},
    {1, 16, 16, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, 16},
    {2, 8, 16, 16, 8, 5, 5, 1, 1, 2, 2, 1, 1, 8},
    {1, 8, 16, 16, 8, 7, 7, 2, 2, 3, 3, 1, 1, 8},
    {1, 8, 9, 9, 8, 1, 1, 1, 1, 0, 0, 1, 1, 8},
};

static mt_status probe_one(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg, mt__gwalk *w,
                           mt__gunion *u) {
    mt_kernel *k = NULL;
    char err[8];
    mt_status bs = mt_template_build(t, wl, sp, cfg, &k, err, sizeof err);
    if (bs == MT_NOMEM) return MT_NOMEM;
    if (bs != MT_OK) return MT_OK; /* not buildable: contributes nothing */
    mt_status st = mt__gwalk_observe(w, k, u);
    mt_kernel_free(k);
    return st;
}

static mt_status probe_workload(const mt_template *t, const mt_workload *wl, uint64_t seed, mt__gwalk *w, mt__gunion *u) {
    mt_space sp;
    if (mt_template_space(t, wl, &sp) != MT_OK) return MT_OK;
    uint64_t rng = seed;
    mt_status st = MT_OK;
    mt_config cfg;
    for (int i = 0; i < sp.nknobs && st == MT_OK; i++) {
        int no = sp.knobs[i].noptions;
        int m = no < PROBE_OPTS ? no : PROBE_OPTS;
        for (int j = 0; j < m && st == MT_OK; j++) {
            int o = m == 1 ? 0 : (int)((int64_t)j * (no - 1) / (m - 1));
            mt_space_random(&sp, &rng, &cfg);
            cfg.choice[i] = o;
            st = probe_one(t, wl, &sp, &cfg, w, u);
        }
    }
    for (int r = 0; r < PROBE_RANDOM && st == MT_OK; r++) {
        mt_space_random(&sp, &rng, &cfg);
        st = probe_one(t, wl, &sp, &cfg, w, u);
    }
    mt_space_free(&sp);
    return st;
}

/* ---- shape from the union ---- */

typedef struct ord {
    int parent; /* union index, -1: root */
    double pos;
    int idx;
} ord;

static int ord_cmp(const void *a, const void *b) {
    const ord *x = a, *y = b;
    if (x->parent != y->parent) return x->parent < y->parent ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int find_union(const mt__gunion *u, uint64_t key) {
    if (!key || !u->tcap) return -1;
    for (int i = (int)(key & (uint64_t)(u->tcap - 1));; i = (i + 1) & (u->tcap - 1)) {
        int64_t v = u->table[i];
        if (!v) return -1;
        if (u->nodes[v - 1].key == key) return (int)(v - 1);
    }
}

/* The hash state h advanced over v's 8 bytes, least significant first, so
 * that a shape hashes the same on every host. */
static uint64_t hash_int(uint64_t h, int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return mt__hash64_update(h, b, sizeof b);
}

typedef struct edges {
    int *src, *dst, *type;
    int n, cap;
    int failed;
} edges;

static void edge(edges *e, int s, int d, int t) {
    if (e->failed) return;
    if (e->n >= e->cap) {
        int cap = e->cap ? 2 * e->cap : 256;
        int *a = realloc(e->src, sizeof(int) * (size_t)cap);
        if (a) e->src = a;
        int *b = realloc(e->dst, sizeof(int) * (size_t)cap);
        if (b) e->dst = b;
        int *c = realloc(e->type, sizeof(int) * (size_t)cap);
        if (c) e->type = c;
        if (!a || !b || !c) {
            e->failed = 1;
            return;
        }
        e->cap = cap;
    }
    e->src[e->n] = s, e->dst[e->n] = d, e->type[e->n] = t;
    e->n++;
}

/* Depth-first preorder of the tree under union node `root` (children sorted in
 * `o`, group start per parent in `first`), writing shape indices. */
static void dfs(int j, const ord *o, const int *first, const int *cnt, int *map, int *order, int *n, int *stack, int cap) {
    int sp = 0;
    stack[sp++] = j;
    while (sp) {
        int x = stack[--sp];
        if (map[x] >= 0) continue;
        map[x] = *n;
        order[(*n)++] = x;
        /* Push children in reverse so the first is visited first. */
        for (int c = cnt[x] - 1; c >= 0; c--)
            if (sp < cap && map[o[first[x] + c].idx] < 0) stack[sp++] = o[first[x] + c].idx;
    }
}

static mt_status build_shape(mt_graph_encoder *enc, const mt__gunion *u) {
    int nu = u->n;
    int *parent = malloc(sizeof(int) * (size_t)(nu + 1));
    int *map = malloc(sizeof(int) * (size_t)(nu + 1));
    int *order = malloc(sizeof(int) * (size_t)(nu + 1));
    int *first = calloc((size_t)(nu + 1), sizeof(int));
    int *cnt = calloc((size_t)(nu + 1), sizeof(int));
    int *stack = malloc(sizeof(int) * (size_t)(nu + 1));
    ord *o = malloc(sizeof(ord) * (size_t)(nu + 1));
    edges e = {0};
    mt_status st = MT_NOMEM;
    if (!parent || !map || !order || !first || !cnt || !stack || !o) goto done;
    for (int j = 0; j < nu; j++) {
        int p = find_union(u, u->nodes[j].parent);
        if (u->nodes[j].type == MT_GNODE_BUFFER || p == j || (p >= 0 && u->nodes[p].type == MT_GNODE_BUFFER)) p = -1;
        parent[j] = p;
    }
    int n = 1; /* shape node 0: context */
    for (;;) {
        /* Children lists from the current parents. */
        int no = 0;
        for (int j = 0; j < nu; j++)
            if (u->nodes[j].type != MT_GNODE_BUFFER) o[no++] = (ord){parent[j], u->nodes[j].pos, j};
        qsort(o, (size_t)no, sizeof *o, ord_cmp);
        memset(cnt, 0, sizeof(int) * (size_t)(nu + 1));
        for (int i = 0; i < no; i++)
            if (o[i].parent >= 0) {
                if (!cnt[o[i].parent]) first[o[i].parent] = i;
                cnt[o[i].parent]++;
            }
        for (int j = 0; j < nu; j++) map[j] = -1;
        n = 1;
        for (int i = 0; i < no && o[i].parent < 0; i++) dfs(o[i].idx, o, first, cnt, map, order, &n, stack, nu + 1);
        /* Nodes on a parent cycle were not reached: cut the earliest one loose and retry. */
        int cut = -1;
        for (int j = 0; j < nu; j++)
            if (u->nodes[j].type != MT_GNODE_BUFFER && map[j] < 0 && (cut < 0 || u->nodes[j].pos < u->nodes[cut].pos)) cut = j;
        if (cut < 0) break;
        parent[cut] = -1;
    }
    /* Buffers last, in order of first sight. */
    {
        int nb = 0;
        for (int j = 0; j < nu; j++)
            if (u->nodes[j].type == MT_GNODE_BUFFER) o[nb++] = (ord){-1, u->nodes[j].pos, j};
        qsort(o, (size_t)nb, sizeof *o, ord_cmp);
        for (int i = 0; i < nb; i++) {
            map[o[i].idx] = n;
            order[n++] = o[i].idx;
        }
    }
    mt_graph_shape *sh = &enc->shape;
    sh->n_nodes = n;
    sh->node_type = malloc(sizeof(int) * (size_t)n);
    enc->labels = calloc((size_t)n, sizeof *enc->labels);
    enc->label_ptrs = malloc(sizeof(char *) * (size_t)n);
    if (!sh->node_type || !enc->labels || !enc->label_ptrs) goto done;
    sh->node_type[0] = MT_GNODE_CONTEXT;
    snprintf(enc->labels[0], sizeof enc->labels[0], "context");
    for (int i = 1; i < n; i++) {
        const mt__gunode *x = &u->nodes[order[i]];
        sh->node_type[i] = x->type;
        memcpy(enc->labels[i], x->label, sizeof enc->labels[i]);
    }
    for (int i = 0; i < n; i++) enc->label_ptrs[i] = enc->labels[i];
    /* Edges: nesting, sibling order, accesses, context. */
    for (int i = 1; i < n; i++) {
        int j = order[i];
        if (u->nodes[j].type == MT_GNODE_BUFFER) continue;
        if (parent[j] >= 0) {
            edge(&e, map[parent[j]], i, MT_GEDGE_CHILD);
            edge(&e, i, map[parent[j]], MT_GEDGE_PARENT);
        }
    }
    {
        /* Siblings: consecutive entries of o with one parent (o sorted by parent, pos). */
        int no = 0;
        for (int j = 0; j < nu; j++)
            if (u->nodes[j].type != MT_GNODE_BUFFER) o[no++] = (ord){parent[j], u->nodes[j].pos, j};
        qsort(o, (size_t)no, sizeof *o, ord_cmp);
        for (int i = 1; i < no; i++)
            if (o[i].parent == o[i - 1].parent) {
                edge(&e, map[o[i - 1].idx], map[o[i].idx], MT_GEDGE_NEXT);
                edge(&e, map[o[i].idx], map[o[i - 1].idx], MT_GEDGE_PREV);
            }
    }
    for (int i = 1; i < n; i++) {
        const mt__gunode *x = &u->nodes[order[i]];
        int b = find_union(u, x->buf);
        if (b < 0 || u->nodes[b].type != MT_GNODE_BUFFER) continue;
        int bi = map[b];
        if (x->type == MT_GNODE_LOAD) edge(&e, i, bi, MT_GEDGE_LOAD_BUF), edge(&e, bi, i, MT_GEDGE_BUF_LOAD);
        if (x->type == MT_GNODE_STORE) edge(&e, i, bi, MT_GEDGE_STORE_BUF), edge(&e, bi, i, MT_GEDGE_BUF_STORE);
        if (x->type == MT_GNODE_ALLOC) edge(&e, i, bi, MT_GEDGE_ALLOC_BUF), edge(&e, bi, i, MT_GEDGE_BUF_ALLOC);
    }
    for (int i = 1; i < n; i++) {
        edge(&e, 0, i, MT_GEDGE_CTX_NODE);
        edge(&e, i, 0, MT_GEDGE_NODE_CTX);
    }
    if (e.failed) goto done;
    sh->n_edges = e.n;
    sh->edge_src = e.src, sh->edge_dst = e.dst, sh->edge_type = e.type;
    e.src = e.dst = e.type = NULL;
    uint64_t h = hash_int(MT__HASH64_INIT, sh->n_nodes);
    for (int i = 0; i < sh->n_nodes; i++) h = hash_int(h, sh->node_type[i]);
    h = hash_int(h, sh->n_edges);
    for (int i = 0; i < sh->n_edges; i++) h = hash_int(hash_int(hash_int(h, sh->edge_src[i]), sh->edge_dst[i]), sh->edge_type[i]);
    sh->hash = h;
    /* Key index. */
    int cap = 16;
    while (cap < 2 * (n + 1)) cap *= 2;
    enc->ix.keys = calloc((size_t)cap, sizeof(uint64_t));
    enc->ix.idx = calloc((size_t)cap, sizeof(int));
    if (!enc->ix.keys || !enc->ix.idx) goto done;
    enc->ix.cap = cap;
    for (int i = 1; i < n; i++) {
        uint64_t key = u->nodes[order[i]].key;
        int s = (int)(key & (uint64_t)(cap - 1));
        while (enc->ix.keys[s]) s = (s + 1) & (cap - 1);
        enc->ix.keys[s] = key;
        enc->ix.idx[s] = i;
    }
    st = MT_OK;
done:
    free(parent);
    free(map);
    free(order);
    free(first);
    free(cnt);
    free(stack);
    free(o);
    free(e.src);
    free(e.dst);
    free(e.type);
    return st;
}

void mt_graph_encoder_free(mt_graph_encoder *enc) {
    if (!enc) return;
    mt_graph_shape_free(&enc->shape);
    free(enc->ix.keys);
    free(enc->ix.idx);
    free(enc->labels);
    free(enc->label_ptrs);
    free(enc);
}

mt_status mt_graph_encoder_create(const mt_template *t, mt_graph_encoder **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "graph encoder: NULL out");
    *out = NULL;
    if (!t) return mt__fail(err, errlen, MT_INVALID_ARG, "graph encoder: NULL template");
    mt_graph_encoder *enc = calloc(1, sizeof *enc);
    mt__gwalk *w = mt__gwalk_new();
    mt__gunion u = {0};
    mt_status st = enc && w ? MT_OK : MT_NOMEM;
    if (enc) enc->t = t;
    int nprobe = 0;
    for (size_t i = 0; i < sizeof probe_workloads / sizeof probe_workloads[0] && st == MT_OK; i++) {
        if (!mt_template_accepts(t, &probe_workloads[i])) continue;
        nprobe++;
        st = probe_workload(t, &probe_workloads[i], 0x5eed0000u + i, w, &u);
    }
    if (st == MT_OK && (nprobe == 0 || u.n == 0)) st = MT_UNSUPPORTED;
    if (st == MT_OK) st = build_shape(enc, &u);
    mt__gwalk_free(w);
    free(u.nodes);
    free(u.table);
    if (st != MT_OK) {
        mt_graph_encoder_free(enc);
        if (st == MT_UNSUPPORTED)
            return mt__fail(err, errlen, st, "graph encoder: template '%s' built no probe kernel", mt_template_name(t));
        return mt__fail(err, errlen, st, "graph encoder: out of memory");
    }
    *out = enc;
    return MT_OK;
}

const mt_template *mt_graph_encoder_template(const mt_graph_encoder *enc) { return enc ? enc->t : NULL; }

const mt_graph_shape *mt_graph_encoder_shape(const mt_graph_encoder *enc) { return enc ? &enc->shape : NULL; }

const char *mt_graph_encoder_node_label(const mt_graph_encoder *enc, int i) {
    if (!enc || i < 0 || i >= enc->shape.n_nodes) return NULL;
    return enc->labels[i];
}

void mt_graph_shape_free(mt_graph_shape *s) {
    if (!s) return;
    free(s->node_type);
    free(s->edge_src);
    free(s->edge_dst);
    free(s->edge_type);
    memset(s, 0, sizeof *s);
}

mt_status mt_graph_encoder_shape_copy(const mt_graph_encoder *enc, mt_graph_shape *out) {
    if (!enc || !out) return MT_INVALID_ARG;
    const mt_graph_shape *s = &enc->shape;
    mt_graph_shape c = *s;
    c.node_type = malloc(sizeof(int) * (size_t)s->n_nodes);
    c.edge_src = malloc(sizeof(int) * (size_t)(s->n_edges ? s->n_edges : 1));
    c.edge_dst = malloc(sizeof(int) * (size_t)(s->n_edges ? s->n_edges : 1));
    c.edge_type = malloc(sizeof(int) * (size_t)(s->n_edges ? s->n_edges : 1));
    if (!c.node_type || !c.edge_src || !c.edge_dst || !c.edge_type) {
        mt_graph_shape_free(&c);
        return MT_NOMEM;
    }
    memcpy(c.node_type, s->node_type, sizeof(int) * (size_t)s->n_nodes);
    memcpy(c.edge_src, s->edge_src, sizeof(int) * (size_t)s->n_edges);
    memcpy(c.edge_dst, s->edge_dst, sizeof(int) * (size_t)s->n_edges);
    memcpy(c.edge_type, s->edge_type, sizeof(int) * (size_t)s->n_edges);
    *out = c;
    return MT_OK;
}

/* ---- features ---- */

/* log2(1 + v) / 8 in single precision (log2f: the double one was a tenth of the encoding time). */
static float lg(double v) { return v > 0 ? log2f((float)(1.0 + v)) * 0.125f : 0.0f; }

static void onehot(float *o, int i, int n) {
    if (i >= 0 && i < n) o[i] = 1.0f;
}

static void context_row(float *o, const mt_workload *wl, const mt_device_info *dev, const mt__gkernel *kin) {
    o[0] = 1.0f;
    const double v[17] = {wl->n,        wl->c,        wl->h,     wl->w,     wl->k,      wl->r,
                          wl->s,        wl->stride_h, wl->stride_w, wl->pad_h, wl->pad_w,  wl->dil_h,
                          wl->dil_w,    wl->groups,   mt_workload_out_h(wl), mt_workload_out_w(wl), mt_workload_flops(wl)};
    for (int i = 0; i < 17; i++) o[1 + i] = lg(v[i]);
    if (dev) {
        o[18] = lg(dev->compute_units);
        o[19] = lg(dev->clock_mhz);
        o[20] = lg((double)dev->local_mem_bytes);
        o[21] = lg((double)dev->global_mem_bytes);
        o[22] = lg((double)dev->max_work_group_size);
        o[23] = lg(dev->pref_vector_width);
        o[24] = lg(dev->native_vector_width);
        o[25] = dev->is_cpu ? 1.0f : 0.0f;
        o[26] = lg(dev->peak_gflops);
        o[27] = lg(dev->max_registers_per_thread);
        /* 28..30: registers, shared memory and spills from a GPU compiler
         * report (nvJitLink); 0 until the encoder is given one. */
        o[39] = 1.0f;
    }
    double tpb = (double)kin->block[0] * (double)kin->block[1] * (double)kin->block[2];
    double grid = (double)kin->grid[0] * (double)kin->grid[1] * (double)kin->grid[2];
    o[31] = lg(tpb);
    o[32] = lg(grid);
    o[33] = lg((double)kin->local_bytes);
    o[34] = lg((double)kin->private_max);
    o[35] = (float)kin->unroll_explicit;
    o[36] = lg(kin->flops_wi);
    double useful = mt_workload_flops(wl);
    o[37] = useful > 0 ? (float)(kin->flops_wi * tpb * grid / useful) : 0.0f; /* 1 when no work is wasted on overhang */
    if (o[37] > 8.0f) o[37] = 8.0f;
    o[38] = lg(kin->stmts);
    o[40] = lg(kin->gbytes_wi);
    o[41] = kin->gbytes_wi > 0 ? lg(kin->flops_wi / kin->gbytes_wi) : 0.0f;
    o[42] = lg(tpb * grid);
}

static void node_row(float *o, int type, const mt__gstat *g) {
    o[5] = lg(g->fold_n);
    o[6] = lg(g->fold_flops);
    o[7] = lg(g->fold_acc);
    if (g->count <= 0) return; /* absent: only folded counts, if any */
    o[0] = 1.0f;
    o[1] = lg(g->count);
    o[2] = lg(g->iters);
    o[3] = lg(g->grid_iters);
    o[4] = (float)g->depth / 16.0f;
    float *x = o + MT_GFEAT_COMMON;
    switch (type) {
    case MT_GNODE_LOOP:
        x[0] = lg((double)g->extent);
        onehot(x + 1, g->kind, 6);
        if (g->kind == MT_LOOP_BLOCK || g->kind == MT_LOOP_THREAD) onehot(x + 7, g->axis, 3);
        x[10] = lg(g->inner);
        x[11] = lg(g->sub_flops);
        x[12] = lg(g->sub_elems);
        x[13] = lg(4.0 * g->sub_touched);
        x[14] = g->sub_touched > 0 ? lg(g->sub_elems / g->sub_touched) : 0.0f;
        x[15] = lg(g->sub_barriers);
        x[16] = lg(4.0 * g->sub_gtouched);
        x[17] = lg(4.0 * g->sub_ltouched);
        x[18] = g->sub_elems > 0 ? lg(g->sub_flops / g->sub_elems) : 0.0f;
        break;
    case MT_GNODE_LOAD:
    case MT_GNODE_STORE:
        x[0] = (float)g->lanes / 16.0f;
        x[1] = (float)g->contig;
        x[2] = (float)g->gather;
        onehot(x + 3, g->scope, 3);
        x[6] = lg(g->s_inner);
        x[7] = (float)g->inner_invariant;
        x[8] = lg(g->s_tx);
        x[9] = lg(g->s_thread);
        x[10] = lg(g->s_vthread);
        x[11] = lg(g->s_block);
        x[12] = (float)g->nonlin;
        x[13] = lg(g->elems_wi);
        x[14] = lg(4.0 * g->touched_wi);
        x[15] = g->touched_wi > 0 ? lg(g->elems_wi / g->touched_wi) : 0.0f;
        x[16] = lg(4.0 * g->touched_wg);
        x[17] = g->touched_wg > 0 ? lg(g->elems_wg / g->touched_wg) : 0.0f;
        x[18] = lg(4.0 * g->touched_inner);
        onehot(x + 19, g->role, 3);
        break;
    case MT_GNODE_BUFFER:
        onehot(x, g->scope, 3);
        x[3] = lg(4.0 * g->size);
        x[4] = (float)g->readonly;
        onehot(x + 5, g->role, 3);
        x[8] = lg(g->b_elems);
        x[9] = lg(4.0 * g->b_touched);
        x[10] = g->b_touched > 0 ? lg(g->b_elems / g->b_touched) : 0.0f;
        x[11] = lg(g->b_naccess);
        break;
    case MT_GNODE_ARITH:
        x[0] = lg(g->flops);
        x[1] = lg(g->fma);
        x[2] = (float)g->arith_lanes / 16.0f;
        x[3] = lg(g->flops * (g->count > 0 ? g->iters / g->count : 0));
        x[4] = lg(g->other);
        break;
    case MT_GNODE_ALLOC:
        onehot(x, g->scope, 3);
        x[3] = lg(4.0 * g->size);
        break;
    case MT_GNODE_GUARD:
        x[0] = lg(g->ncmp);
        x[1] = (float)g->dep_launch;
        x[2] = (float)g->dep_serial;
        x[3] = (float)g->has_else;
        break;
    default: break;
    }
}

int mt_graph_feature_name(int type, int i, char *buf, size_t len) {
    static const char *common[8] = {"present", "copies", "iters_per_item", "iters_grid", "depth", "folded_nodes", "folded_flops", "folded_accesses"};
    static const char *loop[19] = {"extent", "serial", "unrolled", "vectorized", "block", "thread", "vthread", "axis0", "axis1", "axis2",
                                   "inner_extent", "flops_under", "accesses_under", "bytes_under", "reuse_under", "barriers_under",
                                   "global_bytes_under", "local_bytes_under", "flops_per_access_under"};
    static const char *acc[22] = {"lanes", "contiguous", "gather", "global", "local", "private", "stride_inner", "invariant_inner",
                                  "stride_thread_x", "stride_thread_yz", "stride_vthread", "stride_block", "nonlinear", "elems_per_item",
                                  "bytes_per_item", "reuse_per_item", "bytes_per_group", "reuse_per_group", "bytes_inner_loop", "input",
                                  "weight", "output"};
    static const char *bufn[12] = {"global", "local", "private", "bytes", "readonly", "input", "weight", "output", "elems_per_item",
                                   "bytes_per_item", "reuse_per_item", "accesses"};
    static const char *arith[5] = {"flops", "fma_lanes", "lanes", "flops_per_item", "other_ops"};
    static const char *alloc[4] = {"global", "local", "private", "bytes"};
    static const char *guard[4] = {"comparisons", "uses_launch", "uses_serial", "has_else"};
    static const char *ctx[46] = {"present", "n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w",
                                  "groups", "out_h", "out_w", "flops", "dev.compute_units", "dev.clock_mhz", "dev.local_mem",
                                  "dev.global_mem", "dev.max_work_group", "dev.pref_vector", "dev.native_vector", "dev.is_cpu",
                                  "dev.peak_gflops", "dev.max_registers", "cc.registers", "cc.shared_mem", "cc.spills",
                                  "threads_per_block", "blocks", "local_bytes", "private_floats", "unroll_explicit", "flops_per_item",
                                  "work_ratio", "statements", "dev.present", "global_bytes_per_item", "flops_per_global_byte",
                                  "work_items", "folded_nodes", "folded_flops", "folded_accesses"};
    if (type < 0 || type >= MT_GNODE_COUNT || i < 0 || i >= MT_GRAPH_FEATS) return -1;
    if (!buf) len = 0;
    const char *name = "";
    if (type == MT_GNODE_CONTEXT) {
        if (i < 46) name = ctx[i];
        return snprintf(buf, len, "%s", name);
    }
    if (i < MT_GFEAT_COMMON) return snprintf(buf, len, "%s", common[i]);
    int j = i - MT_GFEAT_COMMON;
    switch (type) {
    case MT_GNODE_LOOP: name = j < 19 ? loop[j] : ""; break;
    case MT_GNODE_LOAD:
    case MT_GNODE_STORE: name = j < 22 ? acc[j] : ""; break;
    case MT_GNODE_BUFFER: name = j < 12 ? bufn[j] : ""; break;
    case MT_GNODE_ARITH: name = j < 5 ? arith[j] : ""; break;
    case MT_GNODE_ALLOC: name = j < 4 ? alloc[j] : ""; break;
    case MT_GNODE_GUARD: name = j < 4 ? guard[j] : ""; break;
    default: break;
    }
    return snprintf(buf, len, "%s", name);
}

/* Fills row f (zeroed by the caller) for kernel k; st is the call's
 * statistics array, zeroed once before w's first kernel. */
static mt_status encode_kernel(const mt_graph_encoder *enc, mt__gwalk *w, mt__gstat *st, const mt_workload *wl, const mt_kernel *k,
                               const mt_device_info *dev, float *f) {
    const int nn = enc->shape.n_nodes;
    mt__gkernel kin;
    uint32_t gen = 0;
    mt_status ws = mt__gwalk_stats(w, k, &enc->ix, st, nn, &kin, &gen);
    if (ws != MT_OK) return ws;
    context_row(f, wl, dev, &kin);
    /* Context-folded counts go to the context's own folded slots. */
    if (st[0].gen == gen) f[43] = lg(st[0].fold_n), f[44] = lg(st[0].fold_flops), f[45] = lg(st[0].fold_acc);
    for (int j = 1; j < nn; j++)
        if (st[j].gen == gen) node_row(f + (size_t)j * MT_GRAPH_FEATS, enc->shape.node_type[j], &st[j]);
    return MT_OK;
}

mt_status mt_graph_encode_kernel(const mt_graph_encoder *enc, const mt_workload *wl, const mt_kernel *k, const mt_device_info *dev,
                                 float *feats, char *err, size_t errlen) {
    if (!enc || !wl || !k || !k->body || !feats) return mt__fail(err, errlen, MT_INVALID_ARG, "graph encode: NULL argument or empty kernel");
    const int nn = enc->shape.n_nodes;
    memset(feats, 0, sizeof(float) * (size_t)nn * MT_GRAPH_FEATS);
    mt__gwalk *w = mt__gwalk_new();
    mt__gstat *st = calloc((size_t)nn, sizeof *st);
    mt_status s = w && st ? encode_kernel(enc, w, st, wl, k, dev, feats) : MT_NOMEM;
    mt__gwalk_free(w);
    free(st);
    if (s != MT_OK) {
        memset(feats, 0, sizeof(float) * (size_t)nn * MT_GRAPH_FEATS);
        return mt__fail(err, errlen, s, "graph encode: %s", mt_status_str(s));
    }
    return MT_OK;
}

/* Both batch encoders: row by config (valid[i] says which hold a kernel),
 * or packed (only the kernels, index[j] naming the config of row j). */
static mt_status encode_batch(const mt_graph_encoder *enc, const mt_workload *wl, const mt_space *sp, const mt_config *cfgs, int n,
                              const mt_device_info *dev, float *feats, int *valid, int packed, int *index, int *nvalid, char *err,
                              size_t errlen) {
    if (nvalid) *nvalid = 0;
    if (!enc || !wl || !sp || n < 0 || (n > 0 && (!cfgs || !feats)) || (packed && !nvalid))
        return mt__fail(err, errlen, MT_INVALID_ARG, "graph encode: NULL argument or negative count");
    if (strcmp(sp->template_name, mt_template_name(enc->t)) != 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "graph encode: space of template '%s', encoder of '%s'", sp->template_name,
                        mt_template_name(enc->t));
    if (!mt_template_accepts(enc->t, wl))
        return mt__fail(err, errlen, MT_UNSUPPORTED, "graph encode: template '%s' does not accept the workload", mt_template_name(enc->t));
    for (int i = 0; i < n; i++)
        if (mt_space_check(sp, &cfgs[i]) != MT_OK) return mt__fail(err, errlen, MT_INVALID_ARG, "graph encode: config %d is not in the space", i);
    if (n == 0) return MT_OK;
    const int nn = enc->shape.n_nodes;
    const size_t row = (size_t)nn * MT_GRAPH_FEATS;
    mt__gwalk *w = mt__gwalk_new();
    mt__gstat *st = calloc((size_t)nn, sizeof *st);
    if (!w || !st) {
        mt__gwalk_free(w);
        free(st);
        return mt__fail(err, errlen, MT_NOMEM, "graph encode: out of memory");
    }
    mt_status status = MT_OK;
    int nv = 0;
    for (int i = 0; i < n; i++) {
        /* packed: the next free row, zeroed only once a kernel is there to fill it */
        float *f = feats + (size_t)(packed ? nv : i) * row;
        if (!packed) memset(f, 0, sizeof(float) * row);
        if (valid) valid[i] = 0;
        if (status != MT_OK) continue;
        mt_kernel *k = NULL;
        char berr[8];
        mt_status bs = mt_template_build(enc->t, wl, sp, &cfgs[i], &k, berr, sizeof berr);
        if (bs == MT_NOMEM) status = MT_NOMEM;
        if (bs != MT_OK) continue;
        if (packed) memset(f, 0, sizeof(float) * row);
        mt_status ws = encode_kernel(enc, w, st, wl, k, dev, f);
        mt_kernel_free(k);
        if (ws != MT_OK) {
            memset(f, 0, sizeof(float) * row);
            status = ws;
            continue;
        }
        if (valid) valid[i] = 1;
        if (packed && index) index[nv] = i;
        nv++;
    }
    mt__gwalk_free(w);
    free(st);
    if (nvalid) *nvalid = nv;
    if (status != MT_OK) return mt__fail(err, errlen, status, "graph encode: %s", mt_status_str(status));
    return MT_OK;
}

mt_status mt_graph_encode(const mt_graph_encoder *enc, const mt_workload *wl, const mt_space *sp, const mt_config *cfgs, int n,
                          const mt_device_info *dev, float *feats, int *valid, char *err, size_t errlen) {
    return encode_batch(enc, wl, sp, cfgs, n, dev, feats, valid, 0, NULL, NULL, err, errlen);
}

mt_status mt_graph_encode_packed(const mt_graph_encoder *enc, const mt_workload *wl, const mt_space *sp, const mt_config *cfgs, int n,
                                 const mt_device_info *dev, float *feats, int *index, int *nvalid, char *err, size_t errlen) {
    return encode_batch(enc, wl, sp, cfgs, n, dev, feats, NULL, 1, index, nvalid, err, errlen);
}

mt_status mt_graph_encoder_dump(const mt_graph_encoder *enc, const float *feats, FILE *f) {
    if (!enc) return MT_INVALID_ARG;
    return mt_graph_dump(&enc->shape, enc->label_ptrs, feats, f);
}
