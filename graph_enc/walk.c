/* The IR walk behind the graph encoder: structural keys (genc-impl.h) and,
 * in encode mode, per-node statistics.
 *
 * Two passes per kernel. A post-order pre-pass computes tag(subtree) for
 * every FOR, IF and SEQ item (and the largest loop-extent product below
 * each), stored by preorder number with the number of records inside, so
 * the main pass can skip a subtree it does not enter. The main pass walks in
 * the same preorder, computes keys and either records them in a union
 * (shape mode) or resolves them to shape nodes and accumulates statistics
 * (encode mode). Neither pass allocates per node: the workspace (variable
 * table, LET forms, tag records, the caches below) grows once and is reused
 * across kernels.
 *
 * Most of a kernel is copies of a few statements (register tiles that a
 * template unrolls in C), and the copies of one statement merge into one
 * graph node with the same keys and the same loop statistics. The walker
 * remembers the last inputs of each key and what the last access of each
 * node added to its loops, so a copy neither mixes its keys again nor walks
 * its loop stack again (acache: the features come out the same to the bit).
 *
 * Index analysis follows tuner/loop_features.c: each index is turned into a
 * linear form over the enclosing loop variables (coefficient per loop depth,
 * bit masks of the depths it uses at all and non-linearly), LET bindings
 * substituted. Bytes touched under a loop are AutoTVM's estimate: the
 * product of the extents of the loops at or inside it that the index uses,
 * times the elements one access reads, capped by the buffer size. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "genc-impl.h"
#include "hash.h"
#include "linear.h"

#define MAXD MT__GENC_MAXD
#define MAXNEST MT__GENC_MAXNEST

enum { K_LOOP = 1, K_GUARD, K_STORE, K_LOAD, K_ARITH, K_ALLOC, K_BARRIER, K_BUFFER, K_ELSE, K_UNIQ };

uint64_t mt__genc_mix(uint64_t h, uint64_t v) {
    uint64_t z = (h * 0x9E3779B97F4A7C15ull) ^ (v + 0x632BE59BD9B4E019ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return z ? z : 1;
}

uint64_t mt__genc_hname(const char *s) { return mt__hash64(s, s ? strlen(s) : 0, 0); }

#define MIX mt__genc_mix

/* ---- linear forms (as in tuner/loop_features.c) ---- */

typedef mt__lin lin; /* ir/linear.h */

enum { VAR_NONE = MT__LIN_VAR_NONE, VAR_LOOP = MT__LIN_VAR_LOOP, VAR_LET = MT__LIN_VAR_LET };
typedef mt__lin_var varinfo; /* ir/linear.h */

typedef struct tagrec {
    uint64_t tag;
    double inner;
    int span; /* FOR and IF statements inside: the main walk skips them together */
} tagrec;

typedef struct tagacc {
    uint64_t last_store, loads_np;
    int has_store, fma;
    double inner; /* largest product of loop extents below */
} tagacc;

typedef struct nframe {
    uint64_t key;
    int slot; /* shape node receiving this node's statistics (or its fold target) */
    int own;  /* slot is this node's own node */
} nframe;

typedef struct lframe {
    const mt_stmt *s;
    int slot, own;
    uint64_t serial; /* this visit of the loop: names the whole stack up to it */
} lframe;

/* What one access added to the loops around it, for the copies that
 * follow it: a replicated access (a register tile unrolled in C) has the
 * same dependence masks, buffer, width and loop stack in every copy, so
 * each copy adds the same values to the same loops. The copies are only
 * counted, and their share is added once (count x increment) when the entry
 * is replaced or the kernel ends. That is exact: every statistic summed
 * over the loops is a count (a product of extents and lanes, capped by a
 * buffer size), an integer that a double holds exactly below 2^53, so no
 * order of the additions rounds. Statistics of this size stay far below
 * 2^53 (a whole grid's accesses are some 1e10). */
typedef struct acache {
    uint64_t stack;  /* serial of the loop stack (0: empty entry) */
    const mt_buffer *buf;
    uint32_t uses;
    int opaque;
    double elems, tt, tg, tin; /* tt, tg capped; tin: what touched_inner gets */
    int nl;          /* depth of the stack */
    double pending;  /* copies counted since, not yet added to the loops */
    double *inc;     /* [2 * MAXNEST]: per depth, sub_elems and sub_touched */
    int *slot;       /* [MAXNEST]: per depth, the own loop's slot, or -1 */
} acache;

struct mt__gwalk {
    /* mode */
    mt__gunion *u;          /* shape mode */
    const mt__gindex *ix;   /* encode mode */
    mt__gstat *st;
    int n_nodes;
    mt__gkernel *kin;
    /* workspace */
    varinfo *vars;
    int capvars;
    lin *lets;
    int caplets, nlets;
    uint64_t *hcache; /* name hash by buffer id (0: not yet), capvars entries */
    int *bslot;       /* encode mode: buffer node by buffer id + 2 (0: not yet, 1: none), capvars entries */
    acache *ac;       /* encode mode: by node slot, cap_ac entries */
    double *ac_inc;
    int *ac_slot;
    int cap_ac;
    uint64_t serial;  /* last loop-stack serial handed out (never reset) */
    uint64_t kstack;  /* serial of this kernel's empty stack */
    /* per_loop's last increments, counted again for copies like an access's */
    uint64_t pl_stack;
    size_t pl_field;
    double pl_v, pl_pending;
    int pl_nl;
    double pl_inc[MAXNEST];
    int pl_slot[MAXNEST];
    /* Keys are pure functions of their inputs, and the copies of a
     * replicated statement mix the same inputs one after the other: the
     * last inputs and result of each kind of key, so copies mix nothing. */
    uint64_t sk_in[4], sk_key;   /* a store's key (before uniq) */
    uint64_t tk_in[4], tk_key;   /* tag_hash */
    uint64_t ck_in[2], ck_key;   /* the context a SEQ item opens */
    uint64_t lk_in[2], lk_key;   /* a load's key (before uniq) */
    int sk_valid, tk_valid, ck_valid, lk_valid;
    tagrec *tags;
    int captags, ntags, tagi;
    nframe nodes[MAXNEST];
    int nn;
    lframe loops[MAXNEST];
    int nl;
    uint32_t gen;     /* generation of the statistics being written (encode mode) */
    double tmult;     /* product of enclosing non-launch extents */
    double gmult;     /* product of enclosing launch extents */
    double tpb;       /* product of enclosing THREAD extents */
    int64_t private_live;
    double order;     /* preorder counter (shape mode) */
    int first_new;    /* first union node added by this kernel */
    int failed;
};

mt__gwalk *mt__gwalk_new(void) { return calloc(1, sizeof(mt__gwalk)); }

void mt__gwalk_free(mt__gwalk *w) {
    if (!w) return;
    free(w->vars);
    free(w->hcache);
    free(w->bslot);
    free(w->ac);
    free(w->ac_inc);
    free(w->ac_slot);
    free(w->lets);
    free(w->tags);
    free(w);
}

static void lin_eval(const mt__gwalk *w, const mt_expr *e, lin *o) {
    mt__lin_scope scope = {w->vars, w->capvars, w->lets};
    mt__lin_eval(e, mt__lin_scope_var, &scope, o);
}

/* ---- pre-pass: tags ---- */

/* The name hash of a buffer, cached by id. */
static uint64_t bh(mt__gwalk *w, const mt_buffer *b) {
    if (b->id < 0 || b->id >= w->capvars) return mt__genc_hname(b->name);
    uint64_t *h = &w->hcache[b->id];
    if (!*h) *h = mt__genc_hname(b->name);
    return *h;
}

static uint64_t bufbit(mt__gwalk *w, const mt_buffer *b) { return 1ull << (bh(w, b) % 61); }

/* Loads and FMAs of a float value. Integer and boolean parts (indices,
 * select conditions) are not walked: loads are looked for in float values
 * only, which is where the templates put them, and skipping the index
 * arithmetic is most of the speed of the walk. */
static void tag_expr(mt__gwalk *w, const mt_expr *e, tagacc *t, uint64_t *all_loads) {
    for (; e && e->type == MT_TYPE_FLOAT; e = e->a) {
        if (e->kind == MT_EXPR_LOAD) {
            if (e->buf) {
                if (e->buf->scope != MT_SCOPE_PRIVATE) t->loads_np |= bufbit(w, e->buf);
                if (all_loads) *all_loads |= bufbit(w, e->buf);
            }
            return;
        }
        if (e->kind == MT_EXPR_FMA) t->fma = 1;
        if (e->b) tag_expr(w, e->b, t, all_loads);
        if (e->c) tag_expr(w, e->c, t, all_loads);
    }
}

static uint64_t tag_hash(mt__gwalk *w, const tagacc *t) {
    uint64_t in[4] = {t->last_store, t->loads_np, (uint64_t)t->fma, (uint64_t)t->has_store};
    if (!w->tk_valid || memcmp(in, w->tk_in, sizeof in) != 0) {
        memcpy(w->tk_in, in, sizeof in);
        w->tk_key = MIX(MIX(MIX(in[0], in[1]), in[2]), in[3]);
        w->tk_valid = 1;
    }
    return w->tk_key;
}

static void tag_merge(tagacc *into, const tagacc *sub) {
    if (sub->has_store) {
        into->has_store = 1;
        into->last_store = sub->last_store;
    }
    into->loads_np |= sub->loads_np;
    into->fma |= sub->fma;
    if (sub->inner > into->inner) into->inner = sub->inner;
}

static int tag_slot(mt__gwalk *w) {
    if (w->ntags >= w->captags) {
        int cap = w->captags ? 2 * w->captags : 256;
        tagrec *t = realloc(w->tags, sizeof *t * (size_t)cap);
        if (!t) {
            w->failed = 1;
            return -1;
        }
        w->tags = t;
        w->captags = cap;
    }
    return w->ntags++;
}

/* The prefetches into the outer caches that s holds, or -1 when it holds
 * anything else (under guards or in sequences). */
static int outer_hints(const mt_stmt *s) {
    if (!s) return 0;
    switch (s->kind) {
    case MT_STMT_PREFETCH: return s->outer ? 1 : -1;
    case MT_STMT_IF: {
        const int a = outer_hints(s->body), b = outer_hints(s->else_body);
        return a < 0 || b < 0 ? -1 : a + b;
    }
    case MT_STMT_SEQ: {
        int n = 0;
        for (int i = 0; i < s->nitems; i++) {
            const int m = outer_hints(s->items[i]);
            if (m < 0) return -1;
            n += m;
        }
        return n;
    }
    default: return -1;
    }
}

/* Whether s is a guard holding prefetches into the outer caches and
 * nothing else: hints for later work, without results, which the graph
 * leaves out like a bare prefetch, so that the guard (kvec's prefetch of
 * the next channel group's weights) adds no node. Only those: the graphs of
 * kernels without them stay what the shipped models were trained on. */
static int hint_only(const mt_stmt *s) { return s->kind == MT_STMT_IF && outer_hints(s) > 0; }

static void pre(mt__gwalk *w, const mt_stmt *s, tagacc *acc) {
    if (!s || w->failed) return;
    if (hint_only(s)) return;
    switch (s->kind) {
    case MT_STMT_SEQ:
        /* Each item has a slot too: the main walk gives it a context. */
        for (int i = 0; i < s->nitems; i++) {
            int idx = tag_slot(w);
            if (idx < 0) return;
            tagacc sub = {0};
            pre(w, s->items[i], &sub);
            if (w->failed) return;
            w->tags[idx].tag = tag_hash(w, &sub);
            w->tags[idx].span = w->ntags - idx - 1;
            w->tags[idx].inner = sub.inner;
            tag_merge(acc, &sub);
        }
        return;
    case MT_STMT_FOR:
    case MT_STMT_IF: {
        int idx = tag_slot(w);
        if (idx < 0) return;
        tagacc sub = {0};
        pre(w, s->body, &sub);
        if (s->kind == MT_STMT_IF) pre(w, s->else_body, &sub);
        if (w->failed) return;
        w->tags[idx].tag = tag_hash(w, &sub);
        w->tags[idx].span = w->ntags - idx - 1;
        w->tags[idx].inner = sub.inner > 1 ? sub.inner : 1;
        if (s->kind == MT_STMT_FOR) sub.inner = (sub.inner > 1 ? sub.inner : 1) * (double)s->extent;
        tag_merge(acc, &sub);
        return;
    }
    case MT_STMT_ALLOC: pre(w, s->body, acc); return;
    case MT_STMT_LET: pre(w, s->body, acc); return;
    case MT_STMT_STORE:
        if (s->buf) { /* the last store wins: the subtree's result, stable when guards add temporaries before it */
            acc->has_store = 1;
            acc->last_store = mt__genc_hname(s->buf->name);
        }
        tag_expr(w, s->value, acc, NULL);
        return;
    default: return;
    }
}

/* ---- union (shape mode) ---- */

static int union_find(const mt__gunion *u, uint64_t key) {
    if (!u->tcap) return -1;
    for (int i = (int)(key & (uint64_t)(u->tcap - 1));; i = (i + 1) & (u->tcap - 1)) {
        int64_t v = u->table[i];
        if (!v) return -1;
        if (u->nodes[v - 1].key == key) return (int)(v - 1);
    }
}

static int union_grow(mt__gunion *u) {
    if (u->n >= u->cap) {
        int cap = u->cap ? 2 * u->cap : 256;
        mt__gunode *n = realloc(u->nodes, sizeof *n * (size_t)cap);
        if (!n) return -1;
        u->nodes = n;
        u->cap = cap;
    }
    if (2 * (u->n + 1) > u->tcap) {
        int tcap = u->tcap ? 2 * u->tcap : 1024;
        int64_t *t = calloc((size_t)tcap, sizeof *t);
        if (!t) return -1;
        for (int j = 0; j < u->n; j++) {
            int i = (int)(u->nodes[j].key & (uint64_t)(tcap - 1));
            while (t[i]) i = (i + 1) & (tcap - 1);
            t[i] = j + 1;
        }
        free(u->table);
        u->table = t;
        u->tcap = tcap;
    }
    return 0;
}

static void copy_label(char *dst, const char *a, const char *b) {
    size_t i = 0;
    for (; a && *a && i < 31; a++) dst[i++] = *a;
    if (b && *b && i < 31) dst[i++] = ' ';
    for (; b && *b && i < 31; b++) dst[i++] = *b;
    dst[i] = 0;
}

static void union_observe(mt__gwalk *w, uint64_t key, int type, uint64_t parent, int depth, uint64_t buf, const char *name) {
    mt__gunion *u = w->u;
    int j = union_find(u, key);
    if (j >= 0) {
        mt__gunode *n = &u->nodes[j];
        if (depth > n->depth) {
            n->depth = depth;
            n->parent = parent;
        }
        return;
    }
    if (union_grow(u) < 0) {
        u->failed = w->failed = 1;
        return;
    }
    mt__gunode *n = &u->nodes[u->n];
    memset(n, 0, sizeof *n);
    n->key = key;
    n->type = type;
    n->parent = parent;
    n->depth = depth;
    n->buf = buf;
    n->pos = w->order;
    copy_label(n->label, mt_graph_node_type_name(type), name);
    int i = (int)(key & (uint64_t)(u->tcap - 1));
    while (u->table[i]) i = (i + 1) & (u->tcap - 1);
    u->table[i] = u->n + 1;
    u->n++;
}

int mt__gindex_find(const mt__gindex *ix, uint64_t key) {
    if (!ix || !ix->cap) return -1;
    for (int i = (int)(key & (uint64_t)(ix->cap - 1));; i = (i + 1) & (ix->cap - 1)) {
        if (!ix->keys[i]) return -1;
        if (ix->keys[i] == key) return ix->idx[i];
    }
}

/* ---- main walk ---- */

/* The statistics of a node in this kernel, zeroed on first use: zeroing all
 * of them per kernel cost a tenth of the encoding time. */
static mt__gstat *S(mt__gwalk *w, int slot) {
    mt__gstat *g = &w->st[slot];
    if (g->gen != w->gen) {
        memset(g, 0, sizeof *g);
        g->gen = w->gen;
    }
    return g;
}

/* Makes key unique on the current path of nodes. */
static uint64_t uniq(const mt__gwalk *w, uint64_t key) {
    for (int again = 1; again;) {
        again = 0;
        for (int i = 0; i < w->nn; i++)
            if (w->nodes[i].key == key) {
                key = MIX(key, K_UNIQ);
                again = 1;
                break;
            }
    }
    return key;
}

/* Resolves a node: shape mode records it; encode mode finds its shape node,
 * or folds it into the nearest enclosing one (context when none). Returns
 * the slot, *own tells which. */
static int resolve(mt__gwalk *w, uint64_t key, int type, const mt_buffer *buf, const char *name, int *own) {
    uint64_t parent = w->nn ? w->nodes[w->nn - 1].key : 0;
    if (w->u) {
        union_observe(w, key, type, parent, w->nn, buf ? MIX(K_BUFFER, bh(w, buf)) : 0, name);
        w->order += 1;
        *own = 1;
        return -1;
    }
    int s = mt__gindex_find(w->ix, key);
    if (s >= 0 && s < w->n_nodes) {
        *own = 1;
        mt__gstat *g = S(w, s);
        if (g->count == 0) g->depth = w->nl;
        g->count += 1;
        g->iters += w->tmult;
        g->grid_iters += w->tmult * w->gmult;
        return s;
    }
    *own = 0;
    s = w->nn ? w->nodes[w->nn - 1].slot : 0;
    S(w, s)->fold_n += 1;
    return s;
}

static int push_node(mt__gwalk *w, uint64_t key, int slot, int own) {
    if (w->nn >= MAXNEST) return 0;
    w->nodes[w->nn++] = (nframe){key, slot, own};
    return 1;
}

static int role_of(const mt_buffer *b) {
    if (b->scope != MT_SCOPE_GLOBAL) return -1;
    return b->param_index >= 0 && b->param_index <= 2 ? b->param_index : -1;
}

static void buffer_node(mt__gwalk *w, const mt_buffer *b, int *slot) {
    uint64_t key = 0;
    if (w->u || b->id < 0 || b->id >= w->capvars || !w->bslot[b->id]) key = MIX(K_BUFFER, bh(w, b));
    if (w->u) {
        /* Buffers are not in the nest: observed with no parent. */
        union_observe(w, key, MT_GNODE_BUFFER, 0, 0, 0, b->name);
        *slot = -1;
        return;
    }
    int *c = b->id >= 0 && b->id < w->capvars ? &w->bslot[b->id] : NULL;
    if (c && *c) {
        *slot = *c - 2;
    } else {
        int s = mt__gindex_find(w->ix, key);
        *slot = s >= 0 && s < w->n_nodes ? s : -1;
        if (c) *c = *slot + 2;
    }
    if (*slot < 0) return;
    mt__gstat *g = S(w, *slot);
    if (g->count == 0) {
        g->count = 1;
        g->size = (double)b->size;
        g->scope = b->scope;
        g->readonly = b->readonly;
        g->role = role_of(b);
    }
}

static int is_launch(const mt_stmt *s) { return s->loop == MT_LOOP_BLOCK || s->loop == MT_LOOP_THREAD; }

static double capd(double v, double cap) { return v < cap ? v : cap; }

/* The serial of the current loop stack. */
static uint64_t stack_id(const mt__gwalk *w) { return w->nl ? w->loops[w->nl - 1].serial : w->kstack; }

/* Adds an own loop's share of accesses of buf (e: to its sub_elems, t: to sub_touched). */
static void loop_access(mt__gwalk *w, int slot, const mt_buffer *buf, double e, double t) {
    mt__gstat *g = S(w, slot);
    g->sub_elems += e;
    g->sub_touched += t;
    if (buf->scope == MT_SCOPE_GLOBAL) g->sub_gtouched += t;
    if (buf->scope == MT_SCOPE_LOCAL) g->sub_ltouched += t;
}

/* Adds the loops' share of the copies an entry has counted. */
static void acache_flush(mt__gwalk *w, acache *c) {
    if (c->pending == 0) return;
    for (int d = c->nl - 1; d >= 0; d--)
        if (c->slot[d] >= 0) loop_access(w, c->slot[d], c->buf, c->pending * c->inc[2 * d], c->pending * c->inc[2 * d + 1]);
    c->pending = 0;
}

/* Statistics of one access (load or store) of buf at index, node slot (own or folded). */
static void access(mt__gwalk *w, const mt_buffer *buf, const mt_expr *index, int slot, int own) {
    if (!w->st || !buf || !index) return;
    lin f;
    mt__gstat *g0 = own ? S(w, slot) : NULL;
    if (g0 && g0->have_stride && g0->l_depth == w->nl) {
        /* A copy of a replicated access: copies differ in constant offsets
         * only, so the first copy's dependence masks stand for it. */
        f.uses = g0->l_uses, f.nl = g0->l_nl, f.opaque = g0->l_opaque;
    } else {
        lin_eval(w, index, &f);
    }
    double elems = (index->kind == MT_EXPR_RAMP && index->stride != 0) ? index->lanes : 1;
    double cap = buf->size > 0 ? (double)buf->size : 1e300;
    double tt = elems, tg = elems, suf = 1, tsuf = elems, tin = -1;
    int inner_d = -1;
    acache *c = own && slot < w->cap_ac ? &w->ac[slot] : NULL;
    uint64_t stack = stack_id(w);
    if (c && c->stack == stack && c->buf == buf && c->elems == elems && c->uses == f.uses && c->opaque == f.opaque) {
        c->pending += 1;
        tt = c->tt, tg = c->tg, tin = c->tin;
    } else {
        if (c) acache_flush(w, c);
        for (int d = w->nl - 1; d >= 0; d--) {
            const mt_stmt *l = w->loops[d].s;
            int dep = d >= MAXD || f.opaque || (f.uses >> d & 1);
            double ext = (double)l->extent;
            if (!is_launch(l)) {
                if (dep) tt *= ext;
                if (inner_d < 0 && l->extent > 1) inner_d = d;
            }
            if (l->loop != MT_LOOP_BLOCK && dep) tg *= ext;
            suf *= ext;
            if (dep) tsuf *= ext;
            if (tin < 0 && !is_launch(l)) tin = capd(tsuf, cap);
            if (w->loops[d].own) loop_access(w, w->loops[d].slot, buf, suf * elems, capd(tsuf, cap));
            if (c) c->inc[2 * d] = suf * elems, c->inc[2 * d + 1] = capd(tsuf, cap), c->slot[d] = w->loops[d].own ? w->loops[d].slot : -1;
        }
        tt = capd(tt, cap), tg = capd(tg, cap), tin = tin < 0 ? elems : tin;
        if (c) *c = (acache){stack, buf, f.uses, f.opaque, elems, tt, tg, tin, w->nl, 0, c->inc, c->slot};
    }
    if (!own) {
        S(w, slot)->fold_acc += w->tmult * elems;
        return;
    }
    mt__gstat *g = S(w, slot);
    g->elems_wi += w->tmult * elems;
    g->elems_wg += w->tmult * w->tpb * elems;
    g->touched_wi += tt;
    g->touched_wg += tg;
    g->touched_inner += tin;
    if (index->lanes > g->lanes) g->lanes = index->lanes;
    if (index->lanes > 1 && index->kind == MT_EXPR_RAMP && index->stride == 1) g->contig = 1;
    if (index->lanes > 1 && !(index->kind == MT_EXPR_RAMP && index->stride == 1)) g->gather = 1;
    if (f.opaque || f.nl) g->nonlin = 1;
    g->scope = buf->scope;
    g->role = role_of(buf);
    if (!g->have_stride) {
        g->have_stride = 1;
        g->l_uses = f.uses, g->l_nl = f.nl, g->l_opaque = f.opaque, g->l_depth = w->nl;
        for (int d = 0; d < w->nl && d < MAXD; d++) {
            const mt_stmt *l = w->loops[d].s;
            double c = ((f.uses >> d & 1) && !(f.nl >> d & 1)) ? fabs((double)f.c[d]) : 0;
            if (f.opaque || (f.nl >> d & 1)) c = 0;
            if (d == inner_d) {
                g->s_inner = c;
                g->inner_invariant = !f.opaque && !(f.uses >> d & 1);
            }
            if (l->loop == MT_LOOP_THREAD && l->axis == 0) g->s_tx = c;
            else if (l->loop == MT_LOOP_THREAD && c > g->s_thread) g->s_thread = c;
            if (l->loop == MT_LOOP_VTHREAD && c > g->s_vthread) g->s_vthread = c;
            if (l->loop == MT_LOOP_BLOCK && c > g->s_block) g->s_block = c;
        }
    }
    int bs;
    buffer_node(w, buf, &bs);
    if (bs >= 0) {
        mt__gstat *b = S(w, bs);
        b->b_naccess += 1;
        b->b_elems += w->tmult * elems;
        b->b_touched += tt;
    }
    if (buf->scope == MT_SCOPE_GLOBAL && w->kin) w->kin->gbytes_wi += 4.0 * tt;
}

static void per_loop_flush(mt__gwalk *w) {
    if (w->pl_pending == 0) return;
    for (int d = w->pl_nl - 1; d >= 0; d--)
        if (w->pl_slot[d] >= 0) *(double *)((char *)S(w, w->pl_slot[d]) + w->pl_field) += w->pl_pending * w->pl_inc[d];
    w->pl_pending = 0;
}

/* Adds v per execution to every own enclosing loop's `field` (flops,
 * barriers). Copies (same stack, field and v as the last call) are counted
 * and added later, exactly, as an access's are (these are counts too). */
static void per_loop(mt__gwalk *w, size_t field_off, double v) {
    uint64_t stack = stack_id(w);
    if (w->pl_stack == stack && w->pl_field == field_off && w->pl_v == v) {
        w->pl_pending += 1;
        return;
    }
    per_loop_flush(w);
    double suf = v;
    for (int d = w->nl - 1; d >= 0; d--) {
        w->pl_inc[d] = suf *= (double)w->loops[d].s->extent;
        w->pl_slot[d] = w->loops[d].own ? w->loops[d].slot : -1;
        if (w->loops[d].own) *(double *)((char *)S(w, w->loops[d].slot) + field_off) += suf;
    }
    w->pl_stack = stack, w->pl_field = field_off, w->pl_v = v, w->pl_nl = w->nl;
}

/* Loads inside float value e become LOAD children of node owner_key (see
 * tag_expr: integer and boolean parts are not searched). */
static void loads_of(mt__gwalk *w, const mt_expr *e, uint64_t owner_key) {
    for (; e && !w->failed && e->type == MT_TYPE_FLOAT; e = e->a) {
        if (e->kind == MT_EXPR_LOAD) {
            if (!e->buf) return;
            int own;
            uint64_t hb = bh(w, e->buf);
            if (!w->lk_valid || w->lk_in[0] != owner_key || w->lk_in[1] != hb) {
                w->lk_in[0] = owner_key, w->lk_in[1] = hb;
                w->lk_key = MIX(MIX(owner_key, K_LOAD), hb);
                w->lk_valid = 1;
            }
            uint64_t key = uniq(w, w->lk_key);
            int s = resolve(w, key, MT_GNODE_LOAD, e->buf, e->buf->name, &own);
            if (w->u) {
                int bs;
                buffer_node(w, e->buf, &bs);
            } else {
                access(w, e->buf, e->a, s, own);
            }
            return;
        }
        if (e->b) loads_of(w, e->b, owner_key);
        if (e->c) loads_of(w, e->c, owner_key);
    }
}

/* Float operations of a value: flops (FMA counts 2 per lane), FMA lanes, other ops. */
static void arith_of(const mt_expr *e, double *flops, double *fma, double *other, int *lanes) {
    for (; e && e->type == MT_TYPE_FLOAT; e = e->a) {
        {
            if (e->kind == MT_EXPR_FMA) {
                *flops += 2.0 * e->lanes;
                *fma += e->lanes;
            } else if (e->kind == MT_EXPR_BINARY || e->kind == MT_EXPR_SELECT) {
                *flops += e->lanes;
                *other += 1;
            }
            if ((e->kind == MT_EXPR_FMA || e->kind == MT_EXPR_BINARY || e->kind == MT_EXPR_SELECT) && e->lanes > *lanes) *lanes = e->lanes;
        }
        if (e->kind == MT_EXPR_LOAD) return; /* indices are integer arithmetic */
        if (e->b) arith_of(e->b, flops, fma, other, lanes);
        if (e->c) arith_of(e->c, flops, fma, other, lanes);
    }
}

static int count_cmp(const mt_expr *e) {
    int n = 0;
    for (; e; e = e->a) {
        if (e->kind == MT_EXPR_BINARY && e->op >= MT_OP_LT && e->op <= MT_OP_NE) n++;
        if (e->b) n += count_cmp(e->b);
        if (e->c) n += count_cmp(e->c);
    }
    return n;
}

static void walk(mt__gwalk *w, const mt_stmt *s, uint64_t ctx, uint64_t last);

static void walk_store(mt__gwalk *w, const mt_stmt *s, uint64_t ctx) {
    if (!s->buf || !s->value || !s->index) return;
    tagacc t = {0};
    uint64_t all = 0;
    tag_expr(w, s->value, &t, &all);
    uint64_t hb = bh(w, s->buf);
    /* copies of a replicated store have the same inputs: mixed once */
    if (!w->sk_valid || w->sk_in[0] != ctx || w->sk_in[1] != hb || w->sk_in[2] != all || w->sk_in[3] != (uint64_t)t.fma) {
        w->sk_in[0] = ctx, w->sk_in[1] = hb, w->sk_in[2] = all, w->sk_in[3] = (uint64_t)t.fma;
        w->sk_key = MIX(MIX(MIX(MIX(ctx, K_STORE), hb), all), (uint64_t)t.fma);
        w->sk_valid = 1;
    }
    uint64_t key = uniq(w, w->sk_key);
    int own;
    int slot = resolve(w, key, MT_GNODE_STORE, s->buf, s->buf->name, &own);
    if (w->u) {
        int bs;
        buffer_node(w, s->buf, &bs);
    } else {
        access(w, s->buf, s->index, slot, own);
    }
    if (!push_node(w, key, slot, own)) return;
    loads_of(w, s->value, key);
    double flops = 0, fma = 0, other = 0;
    int lanes = 0;
    arith_of(s->value, &flops, &fma, &other, &lanes);
    if (flops > 0) {
        int aown;
        int as = resolve(w, uniq(w, MIX(key, K_ARITH)), MT_GNODE_ARITH, NULL, s->buf->name, &aown);
        if (w->st) {
            if (aown) {
                mt__gstat *g = S(w, as);
                g->flops += flops;
                g->fma += fma;
                g->other += other;
                if (lanes > g->arith_lanes) g->arith_lanes = lanes;
            } else {
                S(w, as)->fold_flops += w->tmult * flops;
            }
            per_loop(w, offsetof(mt__gstat, sub_flops), flops);
            if (w->kin) w->kin->flops_wi += w->tmult * flops;
        }
    }
    w->nn--;
}

static void walk(mt__gwalk *w, const mt_stmt *s, uint64_t ctx, uint64_t last) {
    if (!s || w->failed) return;
    if (w->kin) w->kin->stmts += 1;
    if (hint_only(s)) return; /* as in pre: no tag record, no node */
    switch (s->kind) {
    case MT_STMT_SEQ:
        /* An item whose tag differs from the enclosing group's opens a
         * context, as a loop does: the statements of a reduction step get
         * one context whether the loops around them are there or not. */
        for (int i = 0; i < s->nitems && !w->failed; i++) {
            int ti = w->tagi++;
            if (ti >= w->ntags) {
                w->failed = 1;
                return;
            }
            tagrec r = w->tags[ti];
            uint64_t ictx = ctx;
            if (r.tag != last) {
                if (!w->ck_valid || w->ck_in[0] != ctx || w->ck_in[1] != r.tag) {
                    w->ck_in[0] = ctx, w->ck_in[1] = r.tag;
                    w->ck_key = MIX(MIX(ctx, K_LOOP), r.tag);
                    w->ck_valid = 1;
                }
                ictx = w->ck_key;
            }
            walk(w, s->items[i], ictx, r.tag);
            w->tagi = ti + 1 + r.span;
        }
        return;
    case MT_STMT_LET: {
        if (!s->var) return;
        int id = s->var->id;
        if (id < 0 || id >= w->capvars) return;
        if (w->nlets >= w->caplets) {
            int cap = w->caplets ? 2 * w->caplets : 64;
            lin *nl = realloc(w->lets, sizeof(lin) * (size_t)cap);
            if (!nl) {
                w->failed = 1;
                return;
            }
            w->lets = nl;
            w->caplets = cap;
        }
        int slot = w->nlets++;
        if (w->st) lin_eval(w, s->value, &w->lets[slot]);
        varinfo saved = w->vars[id];
        w->vars[id] = (varinfo){VAR_LET, slot};
        walk(w, s->body, ctx, last);
        w->vars[id] = saved;
        return;
    }
    case MT_STMT_ALLOC: {
        if (!s->buf) return;
        int own;
        uint64_t hb = bh(w, s->buf);
        int slot = resolve(w, uniq(w, MIX(MIX(ctx, K_ALLOC), hb)), MT_GNODE_ALLOC, s->buf, s->buf->name, &own);
        int bs;
        buffer_node(w, s->buf, &bs);
        if (w->st && own) {
            mt__gstat *g = S(w, slot);
            g->size = (double)s->buf->size;
            g->scope = s->buf->scope;
        }
        int64_t priv = s->buf->scope == MT_SCOPE_PRIVATE ? s->buf->size : 0;
        if (w->kin) {
            if (s->buf->scope == MT_SCOPE_LOCAL) w->kin->local_bytes += 4 * s->buf->size;
            w->private_live += priv;
            if (w->private_live > w->kin->private_max) w->kin->private_max = w->private_live;
        }
        walk(w, s->body, ctx, last);
        if (w->kin) w->private_live -= priv;
        return;
    }
    case MT_STMT_FOR: {
        int ti = w->tagi++;
        if (ti >= w->ntags) {
            w->failed = 1; /* the pre-pass numbered fewer statements: cannot happen */
            return;
        }
        int next = ti + 1 + w->tags[ti].span;
        int id = s->var ? s->var->id : -1;
        if (w->nl >= MAXNEST || w->nn >= MAXNEST || id < 0 || id >= w->capvars) {
            w->tagi = next; /* too deep or malformed: the subtree is skipped */
            return;
        }
        int launch = is_launch(s);
        /* A nest of loops with one tag is one context however many of its
         * loops a template leaves out; a loop whose body holds more than
         * its inner loop (staging copies, say) starts a new one. The loop's
         * own key is taken in the context it opens, so that it does not
         * depend on whether the same-tag loops around it are there. */
        uint64_t tag = w->tags[ti].tag;
        uint64_t inner_ctx = launch || tag == last ? ctx : MIX(MIX(ctx, K_LOOP), tag);
        uint64_t key = uniq(w, MIX(MIX(inner_ctx, K_LOOP), mt__genc_hname(s->var->name)));
        int own;
        int slot = resolve(w, key, MT_GNODE_LOOP, NULL, s->var->name, &own);
        if (w->st && own) {
            mt__gstat *g = S(w, slot);
            if (s->extent > g->extent) g->extent = s->extent;
            if (g->count <= 1) {
                g->kind = s->loop;
                g->axis = s->axis;
            }
            if (w->tags[ti].inner > g->inner) g->inner = w->tags[ti].inner;
        }
        if (w->kin && launch && s->axis >= 0 && s->axis < 3) {
            if (s->loop == MT_LOOP_BLOCK) w->kin->grid[s->axis] = s->extent;
            else w->kin->block[s->axis] = s->extent;
        }
        varinfo saved = w->vars[id];
        double st_t = w->tmult, st_g = w->gmult, st_p = w->tpb;
        w->vars[id] = (varinfo){VAR_LOOP, w->nl};
        if (launch) w->gmult *= (double)s->extent;
        else w->tmult *= (double)s->extent;
        if (s->loop == MT_LOOP_THREAD) w->tpb *= (double)s->extent;
        w->loops[w->nl++] = (lframe){s, slot, own, ++w->serial};
        push_node(w, key, slot, own);
        walk(w, s->body, inner_ctx, launch ? last : tag);
        w->nn--;
        w->nl--;
        w->vars[id] = saved;
        w->tmult = st_t, w->gmult = st_g, w->tpb = st_p;
        w->tagi = next;
        return;
    }
    case MT_STMT_IF: {
        int ti = w->tagi++;
        if (ti >= w->ntags) {
            w->failed = 1;
            return;
        }
        int next = ti + 1 + w->tags[ti].span;
        if (w->nn >= MAXNEST) {
            w->tagi = next;
            return;
        }
        uint64_t key = uniq(w, MIX(MIX(ctx, K_GUARD), w->tags[ti].tag));
        int own;
        int slot = resolve(w, key, MT_GNODE_GUARD, NULL, NULL, &own);
        if (w->st && own) {
            mt__gstat *g = S(w, slot);
            lin f;
            lin_eval(w, s->cond, &f);
            g->ncmp += count_cmp(s->cond);
            for (int d = 0; d < w->nl && d < MAXD; d++) {
                if (!(f.uses >> d & 1) && !f.opaque) continue;
                if (is_launch(w->loops[d].s)) g->dep_launch = 1;
                else g->dep_serial = 1;
            }
            if (s->else_body) g->has_else = 1;
        }
        push_node(w, key, slot, own);
        walk(w, s->body, ctx, last);
        walk(w, s->else_body, MIX(key, K_ELSE), 0);
        w->nn--;
        w->tagi = next;
        return;
    }
    case MT_STMT_STORE: walk_store(w, s, ctx); return;
    case MT_STMT_BARRIER: {
        int own;
        int slot = resolve(w, uniq(w, MIX(ctx, K_BARRIER)), MT_GNODE_BARRIER, NULL, NULL, &own);
        (void)slot;
        if (w->st) per_loop(w, offsetof(mt__gstat, sub_barriers), 1.0);
        return;
    }
    default: return;
    }
}

static mt_status begin(mt__gwalk *w, const mt_kernel *k) {
    if (!k || !k->body) return MT_INVALID_ARG;
    if (k->next_id > w->capvars) {
        int cap = k->next_id + 64;
        varinfo *v = realloc(w->vars, sizeof *v * (size_t)cap);
        if (v) w->vars = v;
        uint64_t *h = realloc(w->hcache, sizeof *h * (size_t)cap);
        if (h) w->hcache = h;
        int *bs = realloc(w->bslot, sizeof *bs * (size_t)cap);
        if (bs) w->bslot = bs;
        if (!v || !h || !bs) return MT_NOMEM;
        w->capvars = cap;
    }
    memset(w->vars, 0, sizeof(varinfo) * (size_t)w->capvars);
    memset(w->hcache, 0, sizeof(uint64_t) * (size_t)w->capvars);
    memset(w->bslot, 0, sizeof(int) * (size_t)w->capvars);
    w->kstack = ++w->serial; /* a new kernel: no cached increment applies */
    w->sk_valid = 0;
    w->nlets = 0;
    w->ntags = w->tagi = 0;
    w->nn = w->nl = 0;
    w->tmult = w->gmult = w->tpb = 1;
    w->private_live = 0;
    w->order = 0;
    w->failed = 0;
    tagacc top = {0};
    pre(w, k->body, &top);
    return w->failed ? MT_NOMEM : MT_OK;
}

mt_status mt__gwalk_observe(mt__gwalk *w, const mt_kernel *k, mt__gunion *u) {
    mt_status st = begin(w, k);
    if (st != MT_OK) return st;
    w->u = u;
    w->ix = NULL;
    w->st = NULL;
    w->kin = NULL;
    int first = u->n;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i]) {
            int bs;
            buffer_node(w, k->params[i], &bs);
        }
    walk(w, k->body, 0, 0);
    w->u = NULL;
    if (w->failed || u->failed) return MT_NOMEM;
    /* Positions of the keys first seen here, as fractions of this kernel's preorder. */
    for (int j = first; j < u->n; j++) u->nodes[j].pos /= (w->order + 1);
    return MT_OK;
}

mt_status mt__gwalk_stats(mt__gwalk *w, const mt_kernel *k, const mt__gindex *ix, mt__gstat *st, int n_nodes, mt__gkernel *kin,
                          uint32_t *gen) {
    mt_status s = begin(w, k);
    if (s != MT_OK) return s;
    if (++w->gen == 0) { /* wrapped: no stale entry may look current */
        memset(st, 0, sizeof *st * (size_t)n_nodes);
        w->gen = 1;
    }
    *gen = w->gen;
    if (n_nodes > w->cap_ac) {
        acache *ac = calloc((size_t)n_nodes, sizeof *ac);
        double *inc = malloc(sizeof(double) * 2 * MAXNEST * (size_t)n_nodes);
        int *sl = malloc(sizeof(int) * MAXNEST * (size_t)n_nodes);
        if (!ac || !inc || !sl) {
            free(ac);
            free(inc);
            free(sl);
            return MT_NOMEM;
        }
        free(w->ac);
        free(w->ac_inc);
        free(w->ac_slot);
        w->ac = ac, w->ac_inc = inc, w->ac_slot = sl, w->cap_ac = n_nodes;
        for (int j = 0; j < n_nodes; j++) ac[j].inc = inc + (size_t)j * 2 * MAXNEST, ac[j].slot = sl + (size_t)j * MAXNEST;
    }
    w->u = NULL;
    w->ix = ix;
    w->st = st;
    w->n_nodes = n_nodes;
    w->kin = kin;
    memset(kin, 0, sizeof *kin);
    for (int a = 0; a < 3; a++) kin->grid[a] = kin->block[a] = 1;
    kin->unroll_explicit = k->unroll_explicit != 0;
    for (int i = 0; i < k->nparams; i++)
        if (k->params[i]) {
            int bs;
            buffer_node(w, k->params[i], &bs);
        }
    walk(w, k->body, 0, 0);
    /* the copies counted but not yet added to their loops */
    for (int j = 0; j < w->cap_ac; j++) acache_flush(w, &w->ac[j]);
    per_loop_flush(w);
    w->st = NULL;
    w->kin = NULL;
    return w->failed ? MT_NOMEM : MT_OK;
}
