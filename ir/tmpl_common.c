/* The tiled direct-convolution kernel behind `direct` and `depthwise`; see
 * tmpl_common.h for the schedule. Loop nest built here, outermost first:
 *
 *   bz (BLOCK 2: n, group, f-block)  by (BLOCK 1)  bx (BLOCK 0)
 *   tz (THREAD 2: f)  ty (THREAD 1: y)  tx (THREAD 0: x)
 *     [LOCAL AA (input patch), WW (weights) when staged]
 *     PRIVATE acc[vf*fi][vy*yi][vx*xi]
 *     acc = 0                              (vthreads > tile loops)
 *     if (work-item's input footprint inside the image) reduction else guarded reduction
 *       for rco, ryo, rxo (SERIAL)
 *         [barrier; cooperative AA/WW fill with padding zeros; barrier]
 *         for rci, ryi, rxi (SERIAL; auto-unroll decides)
 *           LET xb, wb: input and weight index of this step at the tile origin
 *           for vf, vy, vx (VTHREAD), fi, yi, xv (SERIAL):
 *             acc += input[xb + const] * weight[wb + const]   (FMA, `vec` lanes along x)
 *     out <- acc
 *
 * Padding: reads of the global input are guarded only along the sides that
 * can go out of bounds for this workload, and only in work-items whose input
 * footprint touches the border. There a vector read (vec > 1) checks the
 * whole vector once and falls back to a lane-by-lane guarded read; staged
 * patches hold the padding zeros, so compute from local memory needs no
 * guard at all. */
#include "tmpl_common.h"
#include "fail.h"

#include <stdio.h>
#include <string.h>

typedef struct loopv {
    mt_var *var;
    mt_expr *e;
    int64_t extent;
    mt_loop_kind kind;
    int axis;
} loopv;

#define MAX_LETS 48

typedef struct cx {
    mt_kernel *k;
    const mt_workload *wl;
    const mt__tile_sched *s;
    int N, C, H, W, K, R, S, OH, OW, G, Cg, Kg;
    int sh, sw, ph, pw, dh, dw;
    int VF, TF, FI, VY, TY, YI, VX, TX, XI;
    int BF, BY, BX;            /* per work-group tile */
    int RCO, RCI, RYO, RYI, RXO, RXI;
    int vec, XV;               /* XV: vectors per inner x tile */
    int g_top, g_bottom, g_left, g_right; /* which sides of the input reads need guards */
    int PH, PW, AAC;           /* staged patch: rows, cols, channels */
    mt__conv_io io;
    mt_buffer *acc, *xtmp, *AA, *WW;
    /* launch indices */
    mt_expr *tz, *ty, *tx, *tid;
    /* LET-bound values */
    mt_expr *n, *bf0, *f0;     /* first output channel of the block / of the work-item (global) */
    mt_expr *by0, *bx0, *y0, *x0;
    mt_expr *in_n;             /* input offset of channel 0 of this image (and group, for direct) */
    mt_expr *iy0, *ix0;        /* y0*sh - ph, x0*sw - pw */
    mt_expr *out0;             /* output offset of (n, f0, y0, x0) */
    /* reduction indices of the current step */
    mt_expr *rco, *ryo, *rxo, *rci, *ryi, *rxi;
    mt_var *let_var[MAX_LETS];
    mt_expr *let_val[MAX_LETS];
    int nlet;
    int failed;
} cx;

static mt_expr *I(cx *c, int64_t v) { return mt_ir_int(c->k, v); }
static mt_expr *add(cx *c, mt_expr *a, mt_expr *b) { return mt_ir_add(c->k, a, b); }
static mt_expr *sub(cx *c, mt_expr *a, mt_expr *b) { return mt_ir_sub(c->k, a, b); }
static mt_expr *muli(cx *c, mt_expr *a, int64_t b) { return mt_ir_mul(c->k, a, I(c, b)); }
static mt_expr *addi(cx *c, mt_expr *a, int64_t b) { return mt_ir_add(c->k, a, I(c, b)); }
static mt_expr *divi(cx *c, mt_expr *a, int64_t b) { return mt_ir_div(c->k, a, I(c, b)); }
static mt_expr *modi(cx *c, mt_expr *a, int64_t b) { return mt_ir_mod(c->k, a, I(c, b)); }

/* Binds value to a new LET variable (wrapped around the body at the end) and
 * returns the variable; constants and plain variables are returned as they are. */
static mt_expr *let(cx *c, const char *name, mt_expr *value) {
    if (!value) {
        c->failed = 1;
        return NULL;
    }
    if (value->kind == MT_EXPR_INT || value->kind == MT_EXPR_VAR) return value;
    if (c->nlet >= MAX_LETS) {
        c->failed = 1;
        return NULL;
    }
    mt_var *v = mt_ir_var(c->k, name, MT_TYPE_INT);
    if (!v) {
        c->failed = 1;
        return NULL;
    }
    c->let_var[c->nlet] = v;
    c->let_val[c->nlet] = value;
    c->nlet++;
    return mt_ir_v(c->k, v);
}

static mt_expr *lv(cx *c, loopv *l, const char *name, int64_t extent, mt_loop_kind kind) {
    l->var = mt_ir_var(c->k, name, MT_TYPE_INT);
    l->e = mt_ir_v(c->k, l->var);
    l->extent = extent;
    l->kind = kind;
    l->axis = 0;
    return l->e;
}

static mt_stmt *wrap(cx *c, const loopv *l, mt_stmt *body) {
    return mt_ir_for(c->k, l->var, l->extent, l->kind, l->axis, body);
}

/* Wraps body in loops l[n-1] (innermost) .. l[0] (outermost). */
static mt_stmt *wrap_all(cx *c, const loopv *l, int n, mt_stmt *body) {
    for (int i = n - 1; i >= 0; i--) body = wrap(c, &l[i], body);
    return body;
}

/* ---- tile coordinates ---- */

/* Output offsets within the work-item's tile, relative to (f0, y0, x0). */
static mt_expr *f_off(cx *c, mt_expr *vf, mt_expr *fi) { return add(c, muli(c, vf, (int64_t)c->TF * c->FI), fi); }
static mt_expr *y_off(cx *c, mt_expr *vy, mt_expr *yi) { return add(c, muli(c, vy, (int64_t)c->TY * c->YI), yi); }
static mt_expr *x_off(cx *c, mt_expr *vx, mt_expr *xv) { return add(c, muli(c, vx, (int64_t)c->TX * c->XI), muli(c, xv, c->vec)); }

/* Position of an output in the private accumulator tile. */
static mt_expr *acc_idx(cx *c, mt_expr *vf, mt_expr *fi, mt_expr *vy, mt_expr *yi, mt_expr *vx, mt_expr *xv) {
    mt_expr *fpos = add(c, muli(c, vf, c->FI), fi);
    mt_expr *ypos = add(c, muli(c, vy, c->YI), yi);
    mt_expr *xpos = add(c, muli(c, vx, c->XI), muli(c, xv, c->vec));
    return add(c, muli(c, add(c, muli(c, fpos, (int64_t)c->VY * c->YI), ypos), (int64_t)c->VX * c->XI), xpos);
}

/* A load of `vec` elements of buf from index base with element stride `stride`
 * (a scalar load when vec == 1). */
static mt_expr *load_lanes(cx *c, mt_buffer *buf, mt_expr *base, int stride) {
    if (c->vec == 1) return mt_ir_load(c->k, buf, base);
    return mt_ir_load(c->k, buf, mt_ir_ramp(c->k, base, stride, c->vec));
}
static mt_stmt *store_lanes(cx *c, mt_buffer *buf, mt_expr *base, mt_expr *value) {
    if (c->vec == 1) return mt_ir_store(c->k, buf, base, value);
    return mt_ir_store_vec(c->k, buf, base, value);
}

/* In-bounds condition for input row `row` and column `col` (only the sides
 * that can fail for this workload); NULL when always in bounds. Both accept
 * vectors (a RAMP of columns gives one condition per lane). */
static mt_expr *row_ok(cx *c, mt_expr *row) {
    mt_expr *ok = NULL;
    if (c->g_top) ok = mt_ir_ge(c->k, row, I(c, 0));
    if (c->g_bottom) ok = mt_ir_and(c->k, ok, mt_ir_lt(c->k, row, I(c, c->H)));
    return ok;
}
static mt_expr *col_ok(cx *c, mt_expr *col_lo, mt_expr *col_hi) {
    mt_expr *ok = NULL;
    if (c->g_left) ok = mt_ir_ge(c->k, col_lo, I(c, 0));
    if (c->g_right) ok = mt_ir_and(c->k, ok, mt_ir_lt(c->k, col_hi, I(c, c->W)));
    return ok;
}

/* One step (rci, ryi, rxi) of the reduction: every accumulator of the tile
 * gets input * weight, both read straight from global (or staged local)
 * memory at a per-step base (LET) plus a constant offset per tile element, so
 * that after unrolling the compiler sees base+constant addresses. For direct
 * convolutions the loops run over input vectors (vy, vx, yi, xv) outside and
 * output channels (vf, fi) inside, so each input vector is read once and used
 * for every channel; for depthwise each channel reads its own input.
 *
 * guarded: reads of the global input may leave the image. A vector whose
 * lanes are all inside is read with one vload; otherwise it is gathered lane
 * by lane into the private vector xtmp, each lane loaded only when inside
 * (zero elsewhere); an input wholly outside (only rows can be out, or vec=1)
 * contributes nothing and is skipped. */
static mt_stmt *reduction_step(cx *c, int guarded) {
    int64_t HW = (int64_t)c->H * c->W, RS = (int64_t)c->R * c->S;
    int dw_ = c->s->depthwise;
    mt_expr *xb, *wb, *row0 = NULL, *col0 = NULL;
    int64_t x_fstride, x_ystride, x_xstride, w_fstride; /* offsets per unit of f_off, y_off, x_off */
    mt_buffer *xbuf, *wbuf;
    if (c->s->stage_local) {
        /* AA[(chan*PH + row)*PW + col] and WW[((fl*RCI + rci)*RYI + ryi)*RXI + rxi], relative to the block. */
        mt_expr *chan0 = dw_ ? muli(c, c->tz, c->FI) : c->rci;
        mt_expr *r0 = add(c, muli(c, c->ty, (int64_t)c->YI * c->sh), muli(c, c->ryi, c->dh));
        mt_expr *q0 = add(c, muli(c, c->tx, (int64_t)c->XI * c->sw), muli(c, c->rxi, c->dw));
        xb = add(c, muli(c, add(c, muli(c, chan0, c->PH), r0), c->PW), q0);
        mt_expr *fl0 = muli(c, c->tz, c->FI);
        wb = add(c, muli(c, add(c, muli(c, add(c, muli(c, fl0, c->RCI), c->rci), c->RYI), c->ryi), c->RXI), c->rxi);
        x_fstride = dw_ ? (int64_t)c->PH * c->PW : 0;
        x_ystride = (int64_t)c->sh * c->PW;
        x_xstride = c->sw;
        w_fstride = (int64_t)c->RCI * c->RYI * c->RXI;
        xbuf = c->AA, wbuf = c->WW;
        guarded = 0;
    } else {
        mt_expr *rc = add(c, muli(c, c->rco, c->RCI), c->rci);
        mt_expr *ry = add(c, muli(c, c->ryo, c->RYI), c->ryi);
        mt_expr *rx = add(c, muli(c, c->rxo, c->RXI), c->rxi);
        row0 = add(c, c->iy0, muli(c, ry, c->dh));
        col0 = add(c, c->ix0, muli(c, rx, c->dw));
        mt_expr *chan = dw_ ? muli(c, c->f0, HW) : muli(c, rc, HW);
        xb = add(c, add(c, c->in_n, chan), add(c, muli(c, row0, c->W), col0));
        wb = add(c, add(c, muli(c, add(c, muli(c, c->f0, c->Cg), rc), RS), muli(c, ry, c->S)), rx);
        x_fstride = dw_ ? HW : 0;
        x_ystride = (int64_t)c->sh * c->W;
        x_xstride = c->sw;
        w_fstride = (int64_t)c->Cg * RS;
        xbuf = c->io.in, wbuf = c->io.wt;
    }
    mt_var *xbv = mt_ir_var(c->k, "xb", MT_TYPE_INT), *wbv = mt_ir_var(c->k, "wb", MT_TYPE_INT);
    mt_var *r0v = guarded ? mt_ir_var(c->k, "row", MT_TYPE_INT) : NULL, *c0v = guarded ? mt_ir_var(c->k, "col", MT_TYPE_INT) : NULL;

    /* Outer loops O: the input vectors (and, for depthwise, the channels);
     * inner loops F: the channels that share an input vector (direct only). */
    loopv O[6], F[2];
    int no = 0, nf = 0;
    mt_expr *vf, *fi;
    if (dw_) {
        vf = lv(c, &O[no++], "vf", c->VF, MT_LOOP_VTHREAD);
        fi = lv(c, &O[no++], "fi", c->FI, MT_LOOP_SERIAL);
    }
    mt_expr *vy = lv(c, &O[no++], "vy", c->VY, MT_LOOP_VTHREAD);
    mt_expr *vx = lv(c, &O[no++], "vx", c->VX, MT_LOOP_VTHREAD);
    mt_expr *yi = lv(c, &O[no++], "yi", c->YI, MT_LOOP_SERIAL);
    mt_expr *xv = lv(c, &O[no++], "xv", c->XV, MT_LOOP_SERIAL);
    if (!dw_) {
        vf = lv(c, &F[nf++], "vf", c->VF, MT_LOOP_VTHREAD);
        fi = lv(c, &F[nf++], "fi", c->FI, MT_LOOP_SERIAL);
    }
    mt_expr *fo = f_off(c, vf, fi), *yo = y_off(c, vy, yi), *xo = x_off(c, vx, xv);
    mt_expr *xidx = add(c, mt_ir_v(c->k, xbv), add(c, add(c, muli(c, fo, x_fstride), muli(c, yo, x_ystride)), muli(c, xo, x_xstride)));
    mt_expr *w = mt_ir_load(c->k, wbuf, add(c, mt_ir_v(c->k, wbv), muli(c, fo, w_fstride)));
    mt_expr *ai = acc_idx(c, vf, fi, vy, yi, vx, xv);
    mt_expr *a = load_lanes(c, c->acc, ai, 1);
    mt_expr *x = load_lanes(c, xbuf, xidx, x_xstride);
    mt_stmt *st;
    if (!guarded) {
        st = wrap_all(c, F, nf, store_lanes(c, c->acc, ai, mt_ir_fma(c->k, x, w, a)));
    } else {
        mt_expr *row = add(c, mt_ir_v(c->k, r0v), muli(c, yo, c->sh));
        mt_expr *col = add(c, mt_ir_v(c->k, c0v), muli(c, xo, c->sw));
        mt_expr *col_hi = addi(c, col, (int64_t)(c->vec - 1) * c->sw);
        mt_expr *rok = row_ok(c, row);
        mt_stmt *use;
        if (c->vec > 1 && (c->g_left || c->g_right)) {
            /* xtmp <- the vector: one vload when all lanes are inside; else, when
             * the vector still lies inside the input buffer (it then reads a
             * neighbouring row's elements in its outside lanes), one vload and a
             * per-lane select; else lane by lane, each lane loaded only when inside. */
            mt_expr *cok = col_ok(c, col, col_hi);
            mt_expr *lanes = mt_ir_ramp(c->k, col, c->sw, c->vec);
            mt_expr *lok = col_ok(c, lanes, lanes);
            mt_expr *zero = mt_ir_float(c->k, 0.0f);
            mt_expr *xt = mt_ir_load_vec(c->k, c->xtmp, I(c, 0), c->vec);
            mt_stmt *whole = mt_ir_store_vec(c->k, c->xtmp, I(c, 0), x);
            mt_stmt *by_lane = mt_ir_store_vec(c->k, c->xtmp, I(c, 0), mt_ir_select(c->k, lok, x, zero));
            mt_stmt *partial = by_lane;
            if (x_xstride == 1) {
                mt_expr *inbuf = mt_ir_and(c->k, mt_ir_ge(c->k, xidx, I(c, 0)),
                                           mt_ir_lt(c->k, addi(c, xidx, c->vec - 1), I(c, mt_workload_input_elems(c->wl))));
                mt_stmt *masked = mt_ir_seq2(c->k, whole, mt_ir_store_vec(c->k, c->xtmp, I(c, 0), mt_ir_select(c->k, lok, xt, zero)));
                partial = mt_ir_if(c->k, inbuf, masked, by_lane);
            }
            mt_stmt *fill = mt_ir_if(c->k, cok, whole, partial);
            use = mt_ir_seq2(c->k, fill, wrap_all(c, F, nf, store_lanes(c, c->acc, ai, mt_ir_fma(c->k, xt, w, a))));
        } else {
            use = mt_ir_if(c->k, col_ok(c, col, col_hi), wrap_all(c, F, nf, store_lanes(c, c->acc, ai, mt_ir_fma(c->k, x, w, a))), NULL);
        }
        /* Rows outside the image contribute nothing. */
        st = mt_ir_if(c->k, rok, use, NULL);
    }
    mt_stmt *body = wrap_all(c, O, no, st);
    if (guarded) {
        body = mt_ir_let(c->k, c0v, col0, body);
        body = mt_ir_let(c->k, r0v, row0, body);
    }
    body = mt_ir_let(c->k, wbv, wb, body);
    return mt_ir_let(c->k, xbv, xb, body);
}

/* Cooperative fill of a local buffer of `size` elements: work-item tid stores
 * elements tid, tid+T, ...; value_at(e) gives the value of element e. */
typedef mt_expr *(*elem_fn)(cx *c, mt_expr *e);

static mt_stmt *coop_fill(cx *c, mt_buffer *dst, int64_t size, elem_fn value_at, const char *name) {
    int64_t T = (int64_t)c->TF * c->TY * c->TX;
    int64_t iters = (size + T - 1) / T;
    loopv l;
    mt_expr *it = lv(c, &l, name, iters, MT_LOOP_SERIAL);
    mt_expr *e = add(c, muli(c, it, T), c->tid);
    mt_stmt *st = mt_ir_store(c->k, dst, e, value_at(c, e));
    if (size % T != 0) st = mt_ir_if(c->k, mt_ir_lt(c->k, e, I(c, size)), st, NULL);
    return wrap(c, &l, st);
}

/* AA element e = (chan, r, q): input at row row0 + r, column col0 + q of the
 * block's patch for the current outer step, zero outside the image. */
static mt_expr *aa_value(cx *c, mt_expr *e) {
    int64_t plane = (int64_t)c->PH * c->PW;
    mt_expr *chan = divi(c, e, plane);
    mt_expr *r = modi(c, divi(c, e, c->PW), c->PH);
    mt_expr *q = modi(c, e, c->PW);
    mt_expr *row0 = add(c, muli(c, c->by0, c->sh), add(c, I(c, -c->ph), muli(c, c->ryo, (int64_t)c->RYI * c->dh)));
    mt_expr *col0 = add(c, muli(c, c->bx0, c->sw), add(c, I(c, -c->pw), muli(c, c->rxo, (int64_t)c->RXI * c->dw)));
    mt_expr *row = add(c, row0, r), *col = add(c, col0, q);
    mt_expr *gchan = c->s->depthwise ? add(c, c->bf0, chan) : add(c, muli(c, c->rco, c->RCI), chan);
    mt_expr *idx = add(c, add(c, c->in_n, muli(c, gchan, (int64_t)c->H * c->W)), add(c, muli(c, row, c->W), col));
    mt_expr *ok = mt_ir_and(c->k, row_ok(c, row), col_ok(c, col, col));
    mt_expr *v = mt_ir_load(c->k, c->io.in, idx);
    return ok ? mt_ir_select(c->k, ok, v, mt_ir_float(c->k, 0.0f)) : v;
}

/* WW element e = (fl, rc, a, b): weight of output channel bf0 + fl. */
static mt_expr *ww_value(cx *c, mt_expr *e) {
    int64_t per_f = (int64_t)c->RCI * c->RYI * c->RXI;
    mt_expr *fl = divi(c, e, per_f);
    mt_expr *rc = modi(c, divi(c, e, (int64_t)c->RYI * c->RXI), c->RCI);
    mt_expr *a = modi(c, divi(c, e, c->RXI), c->RYI);
    mt_expr *b = modi(c, e, c->RXI);
    mt_expr *f = add(c, c->bf0, fl);
    mt_expr *grc = add(c, muli(c, c->rco, c->RCI), rc);
    mt_expr *ry = add(c, muli(c, c->ryo, c->RYI), a);
    mt_expr *rx = add(c, muli(c, c->rxo, c->RXI), b);
    mt_expr *idx = add(c, add(c, muli(c, add(c, muli(c, f, c->Cg), grc), (int64_t)c->R * c->S), muli(c, ry, c->S)), rx);
    return mt_ir_load(c->k, c->io.wt, idx);
}

static mt_stmt *reduction(cx *c, int guarded) {
    loopv O[3], In[3];
    c->rco = lv(c, &O[0], "rco", c->RCO, MT_LOOP_SERIAL);
    c->ryo = lv(c, &O[1], "ryo", c->RYO, MT_LOOP_SERIAL);
    c->rxo = lv(c, &O[2], "rxo", c->RXO, MT_LOOP_SERIAL);
    c->rci = lv(c, &In[0], "rci", c->RCI, MT_LOOP_SERIAL);
    c->ryi = lv(c, &In[1], "ryi", c->RYI, MT_LOOP_SERIAL);
    c->rxi = lv(c, &In[2], "rxi", c->RXI, MT_LOOP_SERIAL);
    mt_stmt *inner = wrap_all(c, In, 3, reduction_step(c, guarded));
    if (c->s->stage_local) {
        mt_stmt *items[5] = {
            mt_ir_barrier(c->k),
            coop_fill(c, c->AA, (int64_t)c->AAC * c->PH * c->PW, aa_value, "ia"),
            coop_fill(c, c->WW, (int64_t)c->BF * c->RCI * c->RYI * c->RXI, ww_value, "iw"),
            mt_ir_barrier(c->k),
            inner,
        };
        inner = mt_ir_seq(c->k, items, 5);
    }
    return wrap_all(c, O, 3, inner);
}

/* The reduction, with the global input reads guarded where needed. Reading
 * global memory directly (no staging), a work-item whose whole input
 * footprint lies inside the image takes a copy of the reduction without any
 * guard; only work-items on the image border pay for the checks. */
static mt_stmt *guarded_reduction(cx *c) {
    int guarded = c->g_top || c->g_bottom || c->g_left || c->g_right;
    if (c->s->stage_local || !guarded) return reduction(c, 0);
    /* The work-item's input rows run from iy0 to iy0 + span_y, columns likewise. */
    int64_t span_y = ((int64_t)(c->VY - 1) * c->TY * c->YI + c->YI - 1) * c->sh + (int64_t)(c->R - 1) * c->dh;
    int64_t span_x = ((int64_t)(c->VX - 1) * c->TX * c->XI + c->XI - 1) * c->sw + (int64_t)(c->S - 1) * c->dw;
    mt_expr *inside = mt_ir_and(c->k, row_ok(c, c->iy0), row_ok(c, addi(c, c->iy0, span_y)));
    inside = mt_ir_and(c->k, inside, col_ok(c, c->ix0, addi(c, c->ix0, span_x)));
    mt_stmt *fast = reduction(c, 0);
    mt_stmt *slow = reduction(c, 1);
    return mt_ir_if(c->k, inside, fast, slow);
}

/* The loops over the work-item's whole tile, vthreads outermost (vf, vy, vx,
 * fi, yi, xv): their indices in t, the loops in L for wrap_all. */
typedef struct tile_pos {
    mt_expr *vf, *fi, *vy, *yi, *vx, *xv;
} tile_pos;

static void tile_loops(cx *c, loopv L[6], tile_pos *t) {
    static const char *const names[6] = {"vf", "vy", "vx", "fi", "yi", "xv"};
    const int64_t extents[6] = {c->VF, c->VY, c->VX, c->FI, c->YI, c->XV};
    mt_expr **idx[6] = {&t->vf, &t->vy, &t->vx, &t->fi, &t->yi, &t->xv};
    for (int i = 0; i < 6; i++) *idx[i] = lv(c, &L[i], names[i], extents[i], i < 3 ? MT_LOOP_VTHREAD : MT_LOOP_SERIAL);
}

static mt_stmt *init_acc(cx *c) {
    loopv L[6];
    tile_pos t;
    tile_loops(c, L, &t);
    mt_expr *zero = mt_ir_broadcast(c->k, mt_ir_float(c->k, 0.0f), c->vec);
    return wrap_all(c, L, 6, store_lanes(c, c->acc, acc_idx(c, t.vf, t.fi, t.vy, t.yi, t.vx, t.xv), zero));
}

static mt_stmt *store_out(cx *c) {
    loopv L[6];
    tile_pos t;
    tile_loops(c, L, &t);
    int64_t plane = (int64_t)c->OH * c->OW;
    mt_expr *off = add(c, add(c, muli(c, f_off(c, t.vf, t.fi), plane), muli(c, y_off(c, t.vy, t.yi), c->OW)), x_off(c, t.vx, t.xv));
    mt_expr *v = load_lanes(c, c->acc, acc_idx(c, t.vf, t.fi, t.vy, t.yi, t.vx, t.xv), 1);
    mt_expr *at = add(c, c->out0, off);
    v = mt__epilogue_apply(c->k, &c->io.epi, v, add(c, c->f0, f_off(c, t.vf, t.fi)), at, c->vec);
    return wrap_all(c, L, 6, store_lanes(c, c->io.out, at, v));
}

static int prod3(const int *p, int n) {
    int64_t v = 1;
    for (int i = 0; i < n; i++) v *= p[i];
    return v > (1 << 30) ? -1 : (int)v;
}

mt_status mt__tile_conv_build(const mt_workload *wl, const mt__tile_sched *s, const char *name, mt_kernel **out, char *err,
                              size_t errlen) {
    if (!wl || !s || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "tile conv: NULL argument");
    *out = NULL;
    cx cc;
    memset(&cc, 0, sizeof cc);
    cx *c = &cc;
    c->s = s;
    c->wl = wl;
    c->N = wl->n, c->C = wl->c, c->H = wl->h, c->W = wl->w, c->K = wl->k, c->R = wl->r, c->S = wl->s;
    c->OH = mt_workload_out_h(wl), c->OW = mt_workload_out_w(wl);
    c->sh = wl->stride_h, c->sw = wl->stride_w, c->ph = wl->pad_h, c->pw = wl->pad_w, c->dh = wl->dil_h, c->dw = wl->dil_w;
    c->G = s->depthwise ? 1 : wl->groups;
    c->Cg = s->depthwise ? 1 : wl->c / wl->groups;
    c->Kg = s->depthwise ? wl->k : wl->k / wl->groups;
    if (s->depthwise && !(wl->groups == wl->c && wl->groups == wl->k))
        return mt__fail(err, errlen, MT_INVALID_ARG, "tile conv: depthwise schedule for a workload with groups != c or != k");
    if (prod3(s->f, 4) != c->Kg || prod3(s->y, 4) != c->OH || prod3(s->x, 4) != c->OW || prod3(s->rc, 2) != c->Cg || prod3(s->ry, 2) != c->R ||
        prod3(s->rx, 2) != c->S)
        return mt__fail(err, errlen, MT_INVALID_ARG, "tile conv: splits do not multiply to the workload's extents");
    for (int i = 0; i < 4; i++)
        if (s->f[i] < 1 || s->y[i] < 1 || s->x[i] < 1) return mt__fail(err, errlen, MT_INVALID_ARG, "tile conv: split part < 1");
    c->VF = s->f[1], c->TF = s->f[2], c->FI = s->f[3];
    c->VY = s->y[1], c->TY = s->y[2], c->YI = s->y[3];
    c->VX = s->x[1], c->TX = s->x[2], c->XI = s->x[3];
    c->BF = c->VF * c->TF * c->FI, c->BY = c->VY * c->TY * c->YI, c->BX = c->VX * c->TX * c->XI;
    c->RCO = s->rc[0], c->RCI = s->rc[1], c->RYO = s->ry[0], c->RYI = s->ry[1], c->RXO = s->rx[0], c->RXI = s->rx[1];
    c->vec = s->vec;
    if (c->vec != 1 && c->vec != 2 && c->vec != 4 && c->vec != 8 && c->vec != 16)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "vec=%d is not 1, 2, 4, 8 or 16", c->vec);
    if (c->XI % c->vec != 0)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "vec=%d does not divide the inner x tile %d (tile_x=%dx%dx%dx%d)", c->vec, c->XI, s->x[0],
                        s->x[1], s->x[2], s->x[3]);
    c->XV = c->XI / c->vec;

    int64_t acc_n = (int64_t)c->VF * c->FI * c->VY * c->YI * c->VX * c->XI;
    if (acc_n > MT__TILE_MAX_PRIVATE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "register tile of %lld accumulators exceeds %d private floats", (long long)acc_n,
                        MT__TILE_MAX_PRIVATE_FLOATS);

    /* Which sides of the global input reads can leave the image. */
    c->g_top = c->ph > 0;
    c->g_left = c->pw > 0;
    c->g_bottom = (int64_t)(c->OH - 1) * c->sh - c->ph + (int64_t)(c->R - 1) * c->dh > c->H - 1;
    c->g_right = (int64_t)(c->OW - 1) * c->sw - c->pw + (int64_t)(c->S - 1) * c->dw > c->W - 1;
    c->PH = (c->BY - 1) * c->sh + (c->RYI - 1) * c->dh + 1;
    c->PW = (c->BX - 1) * c->sw + (c->RXI - 1) * c->dw + 1;
    c->AAC = s->depthwise ? c->BF : c->RCI;

    c->k = mt_kernel_new(name);
    if (!c->k) return mt__fail(err, errlen, MT_NOMEM, "tile conv: out of memory");
    mt_kernel *k = c->k;
    k->unroll_explicit = s->unroll_explicit ? 1 : 0;
    mt__conv_io_params(k, &c->io, mt_workload_input_elems(wl), mt_workload_weight_elems(wl), mt_workload_output_elems(wl), wl->k, s->epi);
    c->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, acc_n);
    /* The gathered input vector on the image border (vec > 1 only). */
    c->xtmp = c->vec > 1 ? mt_ir_buffer(k, "xtmp", MT_SCOPE_PRIVATE, c->vec) : NULL;
    if (s->stage_local) {
        c->AA = mt_ir_buffer(k, "in_shared", MT_SCOPE_LOCAL, (int64_t)c->AAC * c->PH * c->PW);
        c->WW = mt_ir_buffer(k, "w_shared", MT_SCOPE_LOCAL, (int64_t)c->BF * c->RCI * c->RYI * c->RXI);
    }

    /* Launch grid: bz = (n*G + g)*BFo + fb. */
    int64_t BFo = s->f[0];
    loopv B[3], T[3];
    mt_expr *bz = lv(c, &B[0], "bz", (int64_t)c->N * c->G * BFo, MT_LOOP_BLOCK);
    mt_expr *by = lv(c, &B[1], "by", s->y[0], MT_LOOP_BLOCK);
    mt_expr *bx = lv(c, &B[2], "bx", s->x[0], MT_LOOP_BLOCK);
    B[0].axis = 2, B[1].axis = 1, B[2].axis = 0;
    c->tz = lv(c, &T[0], "tz", c->TF, MT_LOOP_THREAD);
    c->ty = lv(c, &T[1], "ty", c->TY, MT_LOOP_THREAD);
    c->tx = lv(c, &T[2], "tx", c->TX, MT_LOOP_THREAD);
    T[0].axis = 2, T[1].axis = 1, T[2].axis = 0;

    c->n = c->N == 1 ? I(c, 0) : let(c, "n", divi(c, bz, (int64_t)c->G * BFo));
    mt_expr *g = c->G == 1 ? I(c, 0) : let(c, "g", modi(c, divi(c, bz, BFo), c->G));
    mt_expr *fb = (c->N == 1 && c->G == 1) ? bz : modi(c, bz, BFo);
    c->bf0 = let(c, "bf0", add(c, muli(c, g, c->Kg), muli(c, fb, c->BF)));
    c->f0 = let(c, "f0", add(c, c->bf0, muli(c, c->tz, c->FI)));
    c->by0 = let(c, "by0", muli(c, by, c->BY));
    c->bx0 = let(c, "bx0", muli(c, bx, c->BX));
    c->y0 = let(c, "y0", add(c, c->by0, muli(c, c->ty, c->YI)));
    c->x0 = let(c, "x0", add(c, c->bx0, muli(c, c->tx, c->XI)));
    /* Direct: channel 0 of the group in image n; depthwise: channel 0 of image n. */
    c->in_n = let(c, "in_n", muli(c, add(c, muli(c, c->n, c->C), muli(c, g, c->Cg)), (int64_t)c->H * c->W));
    c->iy0 = let(c, "iy0", sub(c, muli(c, c->y0, c->sh), I(c, c->ph)));
    c->ix0 = let(c, "ix0", sub(c, muli(c, c->x0, c->sw), I(c, c->pw)));
    c->out0 = let(c, "out0", add(c, add(c, muli(c, add(c, muli(c, c->n, c->K), c->f0), (int64_t)c->OH * c->OW), muli(c, c->y0, c->OW)), c->x0));
    c->tid = s->stage_local ? let(c, "tid", add(c, muli(c, add(c, muli(c, c->tz, c->TY), c->ty), c->TX), c->tx)) : NULL;
    if (c->failed) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_NOMEM, "tile conv: out of memory");
    }

    mt_stmt *items[3] = {init_acc(c), guarded_reduction(c), store_out(c)};
    mt_stmt *body = mt_ir_seq(k, items, 3);
    if (c->xtmp) body = mt_ir_alloc(k, c->xtmp, body);
    body = mt_ir_alloc(k, c->acc, body);
    if (s->stage_local) {
        body = mt_ir_alloc(k, c->WW, body);
        body = mt_ir_alloc(k, c->AA, body);
    }
    for (int i = c->nlet - 1; i >= 0; i--) body = mt_ir_let(k, c->let_var[i], c->let_val[i], body);
    body = wrap_all(c, T, 3, body);
    body = wrap_all(c, B, 3, body);
    if (!body || c->failed) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_NOMEM, "tile conv: out of memory building the IR");
    }
    k->body = body;
    mt_ir_auto_unroll(k, s->auto_unroll_max_step);
    *out = k;
    return MT_OK;
}

void mt__conv_io_params(mt_kernel *k, mt__conv_io *io, int64_t in_elems, int64_t w_elems, int64_t out_elems, int64_t kout,
                        const mt_conv_epilogue *epi) {
    io->in = mt_ir_param(k, "input", in_elems, 1);
    io->wt = mt_ir_param(k, "weight", w_elems, 1);
    io->out = mt_ir_param(k, "output", out_elems, 0);
    mt__epilogue_bufs *eb = &io->epi;
    eb->epi = epi;
    eb->bias = epi && epi->bias ? mt_ir_param(k, "bias", kout, 1) : NULL;
    eb->residual = !epi                                      ? NULL
                   : epi->residual == MT_RESIDUAL_BUFFER    ? mt_ir_param(k, "residual", out_elems, 1)
                   : epi->residual == MT_RESIDUAL_IN_OUTPUT ? io->out
                                                            : NULL;
}

mt_expr *mt__epilogue_apply(mt_kernel *k, const mt__epilogue_bufs *eb, mt_expr *v, mt_expr *channel, mt_expr *out_index, int lanes) {
    if (!eb->epi) return v;
    if (eb->bias) v = mt_ir_add(k, v, mt_ir_load(k, eb->bias, channel)); /* one channel: the scalar is broadcast */
    if (eb->residual) v = mt_ir_add(k, v, lanes == 1 ? mt_ir_load(k, eb->residual, out_index) : mt_ir_load_vec(k, eb->residual, out_index, lanes));
    if (eb->epi->act != MT_EPILOGUE_NONE) v = mt_ir_bin(k, MT_OP_MAX, v, mt_ir_float(k, 0.0f));
    if (eb->epi->act == MT_EPILOGUE_RELU6) v = mt_ir_bin(k, MT_OP_MIN, v, mt_ir_float(k, 6.0f));
    return v;
}

mt_status mt__config_split(const mt_space *sp, const mt_config *cfg, const char *name, int *dst, int nparts, char *err, size_t errlen) {
    const int *v = mt_config_get(sp, cfg, name);
    if (!v) return mt__fail(err, errlen, MT_INVALID_ARG, "config has no knob '%s'", name);
    for (int i = 0; i < nparts; i++) dst[i] = v[i];
    return MT_OK;
}

/* ---- the tiled templates' knobs ---- */

mt_status mt__tile_space_splits(mt_space *sp, const mt_workload *wl, int f_extent) {
    mt_status st = mt_space_add_split(sp, "tile_f", f_extent, 4, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt_space_add_split(sp, "tile_y", mt_workload_out_h(wl), 4, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt_space_add_split(sp, "tile_x", mt_workload_out_w(wl), 4, MT_SPLIT_FACTOR, 0);
    return st;
}

mt_status mt__tile_space_options(mt_space *sp, const int unroll[3]) {
    static const int explicit_[] = {0, 1};
    static const int vec[] = {1, 2, 4, 8};
    static const int stage[] = {0, 1};
    mt_status st = mt_space_add_enum(sp, "auto_unroll_max_step", unroll, 3);
    if (st == MT_OK) st = mt_space_add_enum(sp, "unroll_explicit", explicit_, 2);
    if (st == MT_OK) st = mt_space_add_enum(sp, "vec", vec, 4);
    if (st == MT_OK) st = mt_space_add_enum(sp, "stage_local", stage, 2);
    return st;
}

mt_status mt__tile_sched_read(const mt_space *sp, const mt_config *cfg, mt__tile_sched *s, char *err, size_t errlen) {
    mt_status st = mt__config_split(sp, cfg, "tile_f", s->f, 4, err, errlen);
    if (st == MT_OK) st = mt__config_split(sp, cfg, "tile_y", s->y, 4, err, errlen);
    if (st == MT_OK) st = mt__config_split(sp, cfg, "tile_x", s->x, 4, err, errlen);
    s->auto_unroll_max_step = mt_config_value(sp, cfg, "auto_unroll_max_step");
    s->unroll_explicit = mt_config_value(sp, cfg, "unroll_explicit");
    s->vec = mt_config_value(sp, cfg, "vec");
    s->stage_local = mt_config_value(sp, cfg, "stage_local");
    return st;
}

/* ---- the register-tile templates ---- */

mt_status mt__space_add_enums(mt_space *sp, const mt__enum_knob *knobs, int n) {
    mt_status st = MT_OK;
    for (int i = 0; i < n && st == MT_OK; i++) {
        if (knobs[i].noptions > MT__ENUM_MAX_OPTIONS) return MT_INVALID_ARG;
        int vals[MT__ENUM_MAX_OPTIONS], nv = 0;
        for (int j = 0; j < knobs[i].noptions; j++)
            if (j == 0 || knobs[i].options[j] <= knobs[i].limit) vals[nv++] = knobs[i].options[j];
        st = mt_space_add_enum(sp, knobs[i].name, vals, nv);
    }
    return st;
}

void mt__rt_plan_init(mt__rt_plan *p, const mt_workload *wl) {
    memset(p, 0, sizeof *p);
    p->n = wl->n;
    p->groups = wl->groups;
    p->c = wl->c;
    p->k = wl->k;
    p->cg = wl->c / wl->groups;
    p->kg = wl->k / wl->groups;
    p->h = wl->h;
    p->w = wl->w;
    p->oh = mt_workload_out_h(wl);
    p->ow = mt_workload_out_w(wl);
    p->r = wl->r;
    p->s = wl->s;
    p->sh = wl->stride_h;
    p->sw = wl->stride_w;
    p->ph = wl->pad_h;
    p->pw = wl->pad_w;
    p->dh = wl->dil_h;
    p->dw = wl->dil_w;
}

void mt__rt_plan_read_tiles(mt__rt_plan *p, const mt_space *sp, const mt_config *cfg) {
    p->kt = mt_config_value(sp, cfg, "thread_k");
    p->kr = mt_config_value(sp, cfg, "reg_k");
    p->yt = mt_config_value(sp, cfg, "thread_y");
    p->yr = mt_config_value(sp, cfg, "reg_y");
    p->xt = mt_config_value(sp, cfg, "thread_x");
    p->xr = mt_config_value(sp, cfg, "reg_x");
}

void mt__rt_plan_cover(mt__rt_plan *p) {
    p->yo = (p->oh + p->yt * p->yr - 1) / (p->yt * p->yr);
    p->xo = (p->ow + p->xt * p->xr - 1) / (p->xt * p->xr);
    p->y_over = (int64_t)p->yo * p->yt * p->yr > p->oh;
    p->x_over = (int64_t)p->xo * p->xt * p->xr > p->ow;
    p->iy_lo = p->ph > 0;
    p->ix_lo = p->pw > 0;
    p->iy_hi = ((int64_t)p->yo * p->yt * p->yr - 1) * p->sh - p->ph + (int64_t)(p->r - 1) * p->dh >= p->h;
    p->ix_hi = ((int64_t)p->xo * p->xt * p->xr - 1) * p->sw - p->pw + (int64_t)(p->s - 1) * p->dw >= p->w;
}

int mt__prefetch_planes(int h, int w) { return (int64_t)h * w * 4 > 2048; }

static mt_stmt *prefetch_run(mt_kernel *k, mt_buffer *buf, mt_expr *start, int64_t last, int aligned, int outer) {
    mt_stmt *(*one)(mt_kernel *, mt_buffer *, mt_expr *) = outer ? mt_ir_prefetch_outer : mt_ir_prefetch;
    mt_stmt_list list = {0};
    for (int64_t off = 0; off < last; off += MT__LINE_FLOATS) mt_stmt_list_push(k, &list, one(k, buf, mt_ir_add(k, start, mt_ir_int(k, off))));
    if (!aligned || last % MT__LINE_FLOATS == 0) mt_stmt_list_push(k, &list, one(k, buf, mt_ir_add(k, start, mt_ir_int(k, last))));
    return mt_stmt_list_seq(k, &list);
}

mt_stmt *mt__prefetch_run(mt_kernel *k, mt_buffer *buf, mt_expr *start, int64_t last, int aligned) {
    return prefetch_run(k, buf, start, last, aligned, 0);
}

mt_stmt *mt__prefetch_run_outer(mt_kernel *k, mt_buffer *buf, mt_expr *start, int64_t last, int aligned) {
    return prefetch_run(k, buf, start, last, aligned, 1);
}

mt_expr *mt__range_cond(mt_kernel *k, mt_expr *lo, int64_t span, int limit, int need_lo, int need_hi) {
    mt_expr *c = NULL;
    if (need_lo) c = mt_ir_ge(k, lo, mt_ir_int(k, 0));
    if (need_hi) c = mt_ir_and(k, c, mt_ir_lt(k, mt_ir_add(k, lo, mt_ir_int(k, span)), mt_ir_int(k, limit)));
    return c;
}

mt_stmt *mt__zero_fill(mt_kernel *k, mt_buffer *buf, int64_t n, int vec) {
    mt_stmt_list list = {0};
    for (int64_t a = 0; a < n; a += vec)
        mt_stmt_list_push(k, &list, mt_ir_store_vec(k, buf, mt_ir_int(k, a), mt_ir_broadcast(k, mt_ir_float(k, 0.0f), vec)));
    return mt_stmt_list_seq(k, &list);
}

mt_status mt__rt_finish(mt_kernel *k, mt_stmt *body, const mt__rt_plan *p, int64_t auto_unroll, const char *name, mt_kernel **out,
                        char *err, size_t errlen) {
    if (!body) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_NOMEM, "%s: out of memory while building the kernel", name);
    }
    k->body = body;
    k->unroll_explicit = p->unroll_explicit;
    mt_ir_auto_unroll(k, auto_unroll);
    *out = k;
    return MT_OK;
}

void mt__rt_launch_begin(mt_kernel *k, const mt__rt_plan *p, int64_t images, mt__rt_launch *l) {
    l->guard = NULL;
    l->bk = mt__loop_begin(k, &l->group[0], "bk", p->ko, MT_LOOP_BLOCK);
    l->bx = mt__loop_begin(k, &l->group[1], "bx", p->xo, MT_LOOP_BLOCK);
    l->bz = mt__loop_begin(k, &l->group[2], "bz", images * p->yo, MT_LOOP_BLOCK);
    l->tk = mt__loop_begin(k, &l->item[0], "tk", p->kt, MT_LOOP_THREAD);
    l->tx = mt__loop_begin(k, &l->item[1], "tx", p->xt, MT_LOOP_THREAD);
    l->ty = mt__loop_begin(k, &l->item[2], "ty", p->yt, MT_LOOP_THREAD);
    for (int i = 0; i < 3; i++) l->group[i].axis = l->item[i].axis = i;
}

int64_t mt__rt_chunk_blocks(const mt__rt_plan *p, int64_t images) {
    const int64_t blocks = images * p->yo * p->xo;
    const int64_t block_pixels = (int64_t)p->yt * p->yr * p->xt * p->xr;
    const int64_t pixel_bytes = (int64_t)p->cg * p->r * p->s * 4;
    if ((int64_t)p->k * p->oh * p->ow * 4 <= MT__RT_CHUNK_MIN_OUTPUT_BYTES) return 1;
    int64_t divisor = 1, any = 1;
    for (int64_t q = 2; q <= blocks && q * block_pixels <= MT__RT_CHUNK_PIXELS &&
                        q * block_pixels * pixel_bytes <= MT__RT_CHUNK_INPUT_BYTES; q++) {
        if (blocks % q == 0) divisor = q;
        any = q;
    }
    if (divisor * block_pixels >= MT__RT_CHUNK_MIN_PIXELS) return divisor;
    /* A last chunk that is only partly there needs a test around the body,
     * which a kernel with barriers (local staging) must not have. */
    return !p->stage && any * block_pixels >= MT__RT_CHUNK_MIN_PIXELS ? any : 1;
}

void mt__rt_launch_begin_chunked(mt_kernel *k, const mt__rt_plan *p, int64_t images, int64_t chunk, mt__rt_launch *l) {
    const int64_t blocks = images * p->yo * p->xo;
    if (chunk <= 1) {
        mt__rt_launch_begin(k, p, images, l);
        return;
    }
    l->guard = NULL;
    mt_expr *bq = mt__loop_begin(k, &l->group[0], "bq", chunk, MT_LOOP_BLOCK);
    l->bk = mt__loop_begin(k, &l->group[1], "bk", p->ko, MT_LOOP_BLOCK);
    mt_expr *bc = mt__loop_begin(k, &l->group[2], "bc", (blocks + chunk - 1) / chunk, MT_LOOP_BLOCK);
    l->tk = mt__loop_begin(k, &l->item[0], "tk", p->kt, MT_LOOP_THREAD);
    l->tx = mt__loop_begin(k, &l->item[1], "tx", p->xt, MT_LOOP_THREAD);
    l->ty = mt__loop_begin(k, &l->item[2], "ty", p->yt, MT_LOOP_THREAD);
    for (int i = 0; i < 3; i++) l->group[i].axis = l->item[i].axis = i;
    mt_expr *block = mt_ir_add(k, mt_ir_mul(k, bc, mt_ir_int(k, chunk)), bq);
    l->bx = p->xo > 1 ? mt_ir_mod(k, block, mt_ir_int(k, p->xo)) : mt_ir_int(k, 0);
    l->bz = p->xo > 1 ? mt_ir_div(k, block, mt_ir_int(k, p->xo)) : block;
    /* The work-groups of the last chunk past the last block do nothing. */
    if (blocks % chunk) l->guard = mt_ir_lt(k, block, mt_ir_int(k, blocks));
}

mt_stmt *mt__rt_launch_end(mt_kernel *k, const mt__rt_launch *l, mt_stmt *body) {
    if (l->guard) body = mt_ir_if(k, l->guard, body, NULL);
    for (int i = 2; i >= 0; i--) body = mt__loop_end(k, &l->item[i], body);
    for (int i = 2; i >= 0; i--) body = mt__loop_end(k, &l->group[i], body);
    return body;
}

mt_expr *mt__let_bind(mt_kernel *k, mt__let_chain *lc, const char *name, mt_expr *value) {
    if (!value || lc->n >= MT__LET_MAX) {
        lc->failed = 1;
        return NULL;
    }
    if (value->kind == MT_EXPR_INT || value->kind == MT_EXPR_VAR) return value; /* nothing to name */
    mt_var *v = mt_ir_var(k, name, MT_TYPE_INT);
    lc->vars[lc->n] = v;
    lc->vals[lc->n] = value;
    lc->n++;
    return mt_ir_v(k, v);
}

mt_stmt *mt__let_wrap(mt_kernel *k, mt__let_chain *lc, mt_stmt *body) {
    if (lc->failed) return NULL;
    for (int i = lc->n - 1; i >= 0; i--) body = mt_ir_let(k, lc->vars[i], lc->vals[i], body);
    return body;
}

mt_expr *mt__loop_begin(mt_kernel *k, mt__opt_loop *l, const char *name, int64_t extent, mt_loop_kind kind) {
    l->extent = extent;
    l->kind = kind;
    l->axis = 0;
    l->var = NULL;
    if (extent <= 1) return mt_ir_int(k, 0);
    l->var = mt_ir_var(k, name, MT_TYPE_INT);
    return mt_ir_v(k, l->var);
}

mt_stmt *mt__loop_end(mt_kernel *k, const mt__opt_loop *l, mt_stmt *body) {
    return l->extent <= 1 ? body : mt_ir_for(k, l->var, l->extent, l->kind, l->axis, body);
}
