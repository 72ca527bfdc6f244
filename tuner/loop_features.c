/* Loop-nest ("itervar") features of a schedule; see tuner/loop_features.h for the
 * layout.
 *
 * Two walks over the kernel IR per config. The first finds the main nest (the
 * loops around the FMA store). The second visits every load and store with
 * the chain of loops around it and a linear form of its index: for each loop
 * depth, the coefficient of that loop's variable, and bit masks of the
 * depths the index depends on at all and non-linearly (through *, /, %, min,
 * max, select of two variables). LET bindings are substituted, so an index
 * written through `x0 = bx*BX + tx*XI` still sees bx and tx.
 *
 * Bytes touched under a loop are estimated the way AutoTVM's touch extractor
 * does: the product of the extents of the loops at or inside it that the
 * index depends on (overlap between iterations ignored), times the elements
 * one access reads, capped by the buffer's size. */
#include "loop_features.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "linear.h"

#define MAXD MT__LIN_MAXD /* loop depths the linear analysis tracks */
#define MAXCHAIN 64 /* deepest nest walked; deeper statements are skipped */

#define L_ MT_FEATURES_LOOPS
#define R_ MT_FEATURES_ROLES

typedef mt__lin lin; /* ir/linear.h */

enum { VAR_NONE = MT__LIN_VAR_NONE, VAR_LOOP = MT__LIN_VAR_LOOP, VAR_LET = MT__LIN_VAR_LET };

typedef mt__lin_var varinfo; /* ir/linear.h */

typedef struct slotstat {
    double elems;   /* elements accessed */
    double touched; /* distinct elements (estimate) */
    double best;    /* accesses of the access that set stride */
    int64_t stride;
} slotstat;

typedef struct fx {
    /* workspace, reused across configs */
    varinfo *vars;
    int capvars;
    lin *lets;
    int caplets, nlets;
    /* current chain */
    const mt_stmt *chain[MAXCHAIN];
    int depth;
    int prefix;    /* how many outer loops of the chain are main-nest loops */
    double tmult;  /* product of the extents of the non-launch loops on the chain */
    /* main nest */
    const mt_stmt *main[MAXCHAIN];
    int nmain;
    int best_fma;
    double best_work;
    /* per main-nest loop */
    slotstat st[L_][R_];
    double instr[L_], fma[L_], barrier[L_];
    /* per work-item */
    double t_elems[R_], t_touched[R_], t_fma, t_barrier;
    int lanes_gload, lanes_gstore, lanes_fma;
    int n_unrolled, n_vthread;
    /* launch resources, as mt_kernel_analyze counts them */
    int64_t grid[3], block[3], local_bytes, private_live, private_max;
    int failed;
} fx;

static void lin_eval(const fx *x, const mt_expr *e, lin *o) {
    mt__lin_scope scope = {x->vars, x->capvars, x->lets};
    mt__lin_eval(e, mt__lin_scope_var, &scope, o);
}

/* ---- walks ---- */

static int role_of(const mt_buffer *b) {
    switch (b->scope) {
    case MT_SCOPE_LOCAL: return 3;
    case MT_SCOPE_PRIVATE: return 4;
    default: break;
    }
    if (b->param_index >= 0 && b->param_index <= 2) return b->param_index;
    return b->readonly ? 0 : 2;
}

static int is_launch(const mt_stmt *s) { return s->loop == MT_LOOP_BLOCK || s->loop == MT_LOOP_THREAD; }

/* An FMA at the top of a stored value or one level below it (a select
 * around it); deeper ones are not the kernel's main computation. */
static int has_fma(const mt_expr *e) {
    if (!e) return 0;
    if (e->kind == MT_EXPR_FMA) return 1;
    return (e->a && e->a->kind == MT_EXPR_FMA) || (e->b && e->b->kind == MT_EXPR_FMA) || (e->c && e->c->kind == MT_EXPR_FMA);
}

/* Pass 1: the chain around the store with the most FMA work. */
static void find_main(fx *x, const mt_stmt *s) {
    if (!s) return;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) find_main(x, s->items[i]);
        return;
    case MT_STMT_FOR:
        if (x->depth >= MAXCHAIN) return;
        x->chain[x->depth++] = s;
        find_main(x, s->body);
        x->depth--;
        return;
    case MT_STMT_ALLOC:
    case MT_STMT_LET: find_main(x, s->body); return;
    case MT_STMT_IF:
        find_main(x, s->body);
        find_main(x, s->else_body);
        return;
    case MT_STMT_STORE: {
        int f = has_fma(s->value);
        double work = s->value ? s->value->lanes : 1;
        for (int i = 0; i < x->depth; i++) work *= (double)x->chain[i]->extent;
        if (f > x->best_fma || (f == x->best_fma && work > x->best_work)) {
            x->best_fma = f;
            x->best_work = work;
            x->nmain = x->depth;
            memcpy(x->main, x->chain, sizeof(x->chain[0]) * (size_t)x->depth);
        }
        return;
    }
    default: return;
    }
}

/* One load or store of `buf` at `index` under the current chain. */
static void access(fx *x, const mt_buffer *buf, const mt_expr *index, int is_store) {
    if (!buf || !index) return;
    int role = role_of(buf);
    lin f;
    lin_eval(x, index, &f);
    double elems = 1;
    if (index->kind == MT_EXPR_RAMP && index->stride != 0) elems = index->lanes;
    if (buf->scope == MT_SCOPE_GLOBAL) {
        int *w = is_store ? &x->lanes_gstore : &x->lanes_gload;
        if (index->lanes > *w) *w = index->lanes;
    }
    double cap = buf->size > 0 ? (double)buf->size : 1e300;
    /* Per work-item. */
    double tt = elems;
    for (int d = 0; d < x->depth; d++) {
        const mt_stmt *l = x->chain[d];
        if (is_launch(l)) continue;
        if (d >= MAXD || f.opaque || (f.uses >> d & 1)) tt *= (double)l->extent;
    }
    x->t_elems[role] += x->tmult * elems;
    x->t_touched[role] += tt < cap ? tt : cap;
    /* Per main-nest loop around this access, innermost first. */
    double suf = 1, tsuf = elems;
    for (int d = x->depth - 1; d >= 0; d--) {
        const mt_stmt *l = x->chain[d];
        suf *= (double)l->extent;
        if (d >= MAXD || f.opaque || (f.uses >> d & 1)) tsuf *= (double)l->extent;
        if (d >= x->prefix || d >= L_) continue;
        slotstat *s = &x->st[d][role];
        s->elems += suf * elems;
        s->touched += tsuf < cap ? tsuf : cap;
        x->instr[d] += suf;
        if (suf > s->best) {
            s->best = suf;
            s->stride = (d < MAXD && (f.uses >> d & 1) && !(f.nl >> d & 1)) ? f.c[d] : 0;
        }
    }
}

static void count_under(fx *x, double *slot, double *thread, double v) {
    *thread += x->tmult * v;
    double suf = v;
    for (int d = x->depth - 1; d >= 0; d--) {
        suf *= (double)x->chain[d]->extent;
        if (d < x->prefix && d < L_) slot[d] += suf;
    }
}

static void walk_expr(fx *x, const mt_expr *e) {
    if (!e) return;
    switch (e->kind) {
    case MT_EXPR_LOAD:
        /* The index is not walked for loads: conv kernels index with
         * arithmetic on loop variables only, never through another load. */
        access(x, e->buf, e->a, 0);
        return;
    case MT_EXPR_FMA:
        if (e->lanes > x->lanes_fma) x->lanes_fma = e->lanes;
        count_under(x, x->fma, &x->t_fma, (double)e->lanes);
        break;
    case MT_EXPR_INT:
    case MT_EXPR_FLOAT:
    case MT_EXPR_VAR: return;
    default: break;
    }
    walk_expr(x, e->a);
    walk_expr(x, e->b);
    walk_expr(x, e->c);
}

static void walk(fx *x, const mt_stmt *s) {
    if (!s || x->failed) return;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) walk(x, s->items[i]);
        return;
    case MT_STMT_FOR: {
        if (x->depth >= MAXCHAIN || !s->var) return;
        int id = s->var->id;
        if (id < 0 || id >= x->capvars) return;
        varinfo saved = x->vars[id];
        int saved_prefix = x->prefix;
        double saved_tmult = x->tmult;
        int d = x->depth;
        x->vars[id] = (varinfo){VAR_LOOP, d};
        if (x->prefix == d && d < x->nmain && x->main[d] == s) x->prefix = d + 1;
        if (!is_launch(s)) x->tmult *= (double)s->extent;
        if (s->loop == MT_LOOP_UNROLLED) x->n_unrolled++;
        if (s->loop == MT_LOOP_VTHREAD) x->n_vthread++;
        if (s->axis >= 0 && s->axis < 3) {
            if (s->loop == MT_LOOP_BLOCK) x->grid[s->axis] = s->extent;
            if (s->loop == MT_LOOP_THREAD) x->block[s->axis] = s->extent;
        }
        x->chain[x->depth++] = s;
        walk(x, s->body);
        x->depth--;
        x->vars[id] = saved;
        x->prefix = saved_prefix;
        x->tmult = saved_tmult;
        return;
    }
    case MT_STMT_ALLOC: {
        int64_t priv = s->buf && s->buf->scope == MT_SCOPE_PRIVATE ? s->buf->size : 0;
        if (s->buf && s->buf->scope == MT_SCOPE_LOCAL) x->local_bytes += 4 * s->buf->size;
        x->private_live += priv;
        if (x->private_live > x->private_max) x->private_max = x->private_live;
        walk(x, s->body);
        x->private_live -= priv;
        return;
    }
    case MT_STMT_LET: {
        if (!s->var) return;
        int id = s->var->id;
        if (id < 0 || id >= x->capvars) return;
        if (x->nlets >= x->caplets) {
            int cap = x->caplets ? 2 * x->caplets : 64;
            lin *nl = realloc(x->lets, sizeof(lin) * (size_t)cap);
            if (!nl) {
                x->failed = 1;
                return;
            }
            x->lets = nl;
            x->caplets = cap;
        }
        int slot = x->nlets++;
        lin_eval(x, s->value, &x->lets[slot]);
        varinfo saved = x->vars[id];
        x->vars[id] = (varinfo){VAR_LET, slot};
        walk(x, s->body);
        x->vars[id] = saved;
        return;
    }
    case MT_STMT_STORE:
        access(x, s->buf, s->index, 1);
        walk_expr(x, s->value);
        return;
    case MT_STMT_BARRIER: count_under(x, x->barrier, &x->t_barrier, 1.0); return;
    case MT_STMT_IF:
        walk_expr(x, s->cond);
        walk(x, s->body);
        walk(x, s->else_body);
        return;
    default: return;
    }
}

/* ---- rows ---- */

static float lg(double v) { return v > 0 ? (float)log2(1.0 + v) : 0.0f; }

static void put_workload(const mt_workload *wl, float *row) {
    float *w = row + MT_FEATURES_WORKLOAD_OFF;
    const int v[14] = {wl->n, wl->c, wl->h, wl->w, wl->k, wl->r, wl->s, wl->stride_h, wl->stride_w, wl->pad_h, wl->pad_w, wl->groups,
                       mt_workload_out_h(wl), mt_workload_out_w(wl)};
    for (int i = 0; i < 14; i++) w[i] = lg(v[i]);
    w[14] = lg(mt_workload_flops(wl));
}

static void put_knobs(const mt_space *sp, const mt_config *cfg, float *row) {
    float *o = row + MT_FEATURES_KNOB_OFF;
    for (int i = 0; i < sp->nknobs && i < MT_MAX_KNOBS; i++) {
        const mt_knob *kb = &sp->knobs[i];
        const int *v = kb->values + (size_t)cfg->choice[i] * (size_t)kb->nparts;
        if (kb->kind == MT_KNOB_ENUM) {
            o[MT_MAX_SPLIT_PARTS * i] = (float)v[0];
            continue;
        }
        for (int j = 0; j < kb->nparts && j < MT_MAX_SPLIT_PARTS; j++) o[MT_MAX_SPLIT_PARTS * i + j] = v[j] > 0 ? (float)log2((double)v[j]) : 0.0f;
    }
}

static void put_kernel(const fx *x, const mt_kernel *k, float *row) {
    mt_kernel_resources r = {.local_bytes = x->local_bytes, .private_floats = x->private_max};
    for (int a = 0; a < 3; a++) r.grid[a] = x->grid[a], r.block[a] = x->block[a];
    r.threads_per_block = r.block[0] * r.block[1] * r.block[2];
    const mt_kernel_resources *res = &r;
    float *o = row + MT_FEATURES_KERNEL_OFF;
    int i = 0;
    double grid = (double)res->grid[0] * (double)res->grid[1] * (double)res->grid[2];
    o[i++] = lg((double)res->threads_per_block);
    for (int a = 0; a < 3; a++) o[i++] = lg((double)res->block[a]);
    o[i++] = lg(grid);
    for (int a = 0; a < 3; a++) o[i++] = lg((double)res->grid[a]);
    o[i++] = lg(grid * (double)res->threads_per_block);
    o[i++] = lg((double)res->local_bytes);
    o[i++] = lg((double)res->private_floats);
    o[i++] = (float)x->lanes_gload;
    o[i++] = (float)x->lanes_gstore;
    o[i++] = (float)x->lanes_fma;
    o[i++] = lg(x->t_barrier);
    o[i++] = lg(x->t_fma);
    o[i++] = (float)(k->unroll_explicit != 0);
    o[i++] = (float)x->n_unrolled;
    o[i++] = (float)x->n_vthread;
    o[i++] = (float)x->nmain;
    double gacc = x->t_elems[0] + x->t_elems[1] + x->t_elems[2];
    o[i++] = gacc > 0 ? lg(x->t_fma / gacc) : 0.0f;
    for (int r = 0; r < R_; r++) {
        o[i++] = lg(x->t_elems[r]);
        o[i++] = lg(4.0 * x->t_touched[r]);
        o[i++] = x->t_touched[r] > 0 ? lg(x->t_elems[r] / x->t_touched[r]) : 0.0f;
    }
}

static void put_loops(const fx *x, float *row) {
    double above = 1;
    int n = x->nmain < L_ ? x->nmain : L_;
    for (int d = 0; d < n; d++) {
        const mt_stmt *l = x->main[d];
        float *o = row + MT_FEATURES_LOOP_OFF + MT_FEATURES_PER_LOOP * d;
        double inward = 1;
        for (int j = d; j < x->nmain; j++) inward *= (double)x->main[j]->extent;
        o[0] = lg((double)l->extent);
        if (l->loop >= 0 && l->loop < MT_LOOP_KIND_COUNT) o[1 + l->loop] = 1.0f;
        o[7] = (float)d;
        o[8] = lg(above);
        o[9] = lg(inward);
        o[10] = is_launch(l) ? (float)(l->axis + 1) : 0.0f;
        for (int r = 0; r < R_; r++) {
            const slotstat *s = &x->st[d][r];
            o[11 + 3 * r] = lg(fabs((double)s->stride));
            o[12 + 3 * r] = lg(4.0 * s->touched);
            o[13 + 3 * r] = s->touched > 0 ? lg(s->elems / s->touched) : 0.0f;
        }
        o[26] = lg(x->instr[d]);
        o[27] = lg(x->fma[d]);
        o[28] = lg(x->barrier[d]);
        above *= (double)l->extent;
    }
}

/* Fills row for kernel k (row zeroed by the caller): 1, or -1 when out of
 * memory. The kernel is trusted to be well formed (templates build kernels
 * that pass mt_kernel_analyze; its resources are recounted here, in the
 * same walk, because analysing every candidate twice costs a quarter of the
 * time). */
static int kernel_row(fx *x, const mt_kernel *k, float *row) {
    if (!k->body) return 0;
    if (k->next_id > x->capvars) {
        int cap = k->next_id + 64;
        varinfo *v = realloc(x->vars, sizeof *v * (size_t)cap);
        if (!v) return -1;
        x->vars = v;
        x->capvars = cap;
    }
    memset(x->vars, 0, sizeof(varinfo) * (size_t)x->capvars);
    x->nlets = 0;
    x->depth = 0;
    x->prefix = 0;
    x->tmult = 1;
    x->nmain = 0;
    x->best_fma = -1;
    x->best_work = -1;
    memset(x->st, 0, sizeof x->st);
    memset(x->instr, 0, sizeof x->instr);
    memset(x->fma, 0, sizeof x->fma);
    memset(x->barrier, 0, sizeof x->barrier);
    memset(x->t_elems, 0, sizeof x->t_elems);
    memset(x->t_touched, 0, sizeof x->t_touched);
    x->t_fma = x->t_barrier = 0;
    x->lanes_gload = x->lanes_gstore = x->lanes_fma = 0;
    x->n_unrolled = x->n_vthread = 0;
    for (int a = 0; a < 3; a++) x->grid[a] = x->block[a] = 1;
    x->local_bytes = x->private_live = x->private_max = 0;
    x->failed = 0;
    find_main(x, k->body);
    x->depth = 0;
    walk(x, k->body);
    if (x->failed) return -1;
    put_kernel(x, k, row);
    put_loops(x, row);
    row[0] = 1.0f;
    return 1;
}

mt_status mt_features_extract(const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs, int n, float *out,
                              int *dim) {
    if (!dim) return MT_INVALID_ARG;
    *dim = MT_FEATURES_DIM;
    if (!out) return MT_OK;
    if (!wl || !t || !sp || (n > 0 && !cfgs) || n < 0) return MT_INVALID_ARG;
    if (strcmp(sp->template_name, mt_template_name(t)) != 0) return MT_INVALID_ARG;
    for (int i = 0; i < n; i++)
        if (mt_space_check(sp, &cfgs[i]) != MT_OK) return MT_INVALID_ARG;
    if (n == 0) return MT_OK;
    fx *x = calloc(1, sizeof *x);
    if (!x) return MT_NOMEM;
    mt_status st = MT_OK;
    for (int i = 0; i < n && st == MT_OK; i++) {
        float *row = out + (size_t)i * MT_FEATURES_DIM;
        memset(row, 0, sizeof(float) * MT_FEATURES_DIM);
        mt_kernel *k = NULL;
        char err[8];
        mt_status bs = mt_template_build(t, wl, sp, &cfgs[i], &k, err, sizeof err);
        if (bs == MT_NOMEM) st = MT_NOMEM;
        if (bs != MT_OK) continue; /* cannot be built: a row of zeros */
        int r = kernel_row(x, k, row);
        mt_kernel_free(k);
        if (r < 0) st = MT_NOMEM;
        if (r <= 0) {
            memset(row, 0, sizeof(float) * MT_FEATURES_DIM);
            continue;
        }
        put_workload(wl, row);
        put_knobs(sp, &cfgs[i], row);
    }
    free(x->vars);
    free(x->lets);
    free(x);
    return st;
}

int mt_features_name(int i, char *buf, size_t len) {
    static const char *wl_names[15] = {"n", "c", "h", "w", "k", "r", "s", "stride_h", "stride_w", "pad_h", "pad_w", "groups", "out_h", "out_w", "flops"};
    static const char *k_names[21] = {"threads_per_block", "block0", "block1", "block2", "grid", "grid0", "grid1", "grid2", "work_items",
                                      "local_bytes", "private_floats", "lanes_gload", "lanes_gstore", "lanes_fma", "barriers", "fmas",
                                      "unroll_explicit", "unrolled_loops", "vthread_loops", "main_nest_len", "fma_per_gaccess"};
    static const char *role_names[R_] = {"input", "weight", "output", "local", "private"};
    static const char *stat3[3] = {"accesses", "bytes", "reuse"};
    static const char *loop_names[11] = {"extent", "serial", "unrolled", "vectorized", "block", "thread", "vthread", "depth", "above", "inward", "axis"};
    static const char *role_stat[3] = {"stride", "bytes", "reuse"};
    static const char *loop_tail[3] = {"accesses", "fmas", "barriers"};
    if (i < 0 || i >= MT_FEATURES_DIM) return -1;
    if (!buf) len = 0;
    if (i == 0) return snprintf(buf, len, "valid");
    if (i < MT_FEATURES_KERNEL_OFF) return snprintf(buf, len, "wl.%s", wl_names[i - MT_FEATURES_WORKLOAD_OFF]);
    if (i < MT_FEATURES_KNOB_OFF) {
        int j = i - MT_FEATURES_KERNEL_OFF;
        if (j < 21) return snprintf(buf, len, "kernel.%s", k_names[j]);
        j -= 21;
        return snprintf(buf, len, "kernel.%s.%s", role_names[j / 3], stat3[j % 3]);
    }
    if (i < MT_FEATURES_LOOP_OFF) {
        int j = i - MT_FEATURES_KNOB_OFF;
        return snprintf(buf, len, "knob%d.part%d", j / MT_MAX_SPLIT_PARTS, j % MT_MAX_SPLIT_PARTS);
    }
    int j = i - MT_FEATURES_LOOP_OFF;
    int l = j / MT_FEATURES_PER_LOOP, f = j % MT_FEATURES_PER_LOOP;
    if (f < 11) return snprintf(buf, len, "loop%d.%s", l, loop_names[f]);
    if (f < 26) return snprintf(buf, len, "loop%d.%s.%s", l, role_names[(f - 11) / 3], role_stat[(f - 11) % 3]);
    return snprintf(buf, len, "loop%d.%s", l, loop_tail[f - 26]);
}
