/* The `stem` template: dense convolutions on few input channels (a
 * network's first layer, on the image's RGB planes) on CPUs, output rows
 * in vectors.
 *
 * With three input channels a 3x3 layer does 27 multiply-adds per output:
 * too short a reduction for kvec (channels in vectors, one broadcast per
 * FMA, its 8 x 8 tile transposed for the NCHW store) or gemm (pixels in
 * vectors, but each stride-2 vector gathered and each tile's padding
 * tested). Timed alone on the 2-core Zen 3 of 2026-12-06 (process CPU
 * time, 5 rounds in turns), MobileNetV2's first layer (3 -> 32, 3x3 stride
 * 2, 224x224) took 0.26-0.32 ms with kvec's default against 0.16-0.19 ms
 * with the kernel below written by hand, and VGG-16's (3 -> 64, 3x3,
 * stride 1) 2.0-2.1 ms with gemm's default against 1.1 ms.
 *
 * Each work-item (one per work-group) owns `rows` consecutive output rows
 * of one image and a block of output channels. It first copies every input
 * row those output rows read, for every input channel, into private
 * memory, split by the column stride into phases: phase q of a row holds
 * input columns q - pad_w, q - pad_w + stride_w, ... with the padding and
 * the columns past the row as zeros. Tap (r, sx) of output column x then
 * reads phase sx % stride_w at x + sx / stride_w: every tap of a vector of
 * consecutive output columns is one contiguous vector load, whatever the
 * stride and the padding. Stride-2 phases are built with one shuffle of
 * two vectors per vector (the even or odd lanes); only the vectors at the
 * row's two ends go lane by lane.
 *
 * Then, per output row, per tile of reg_k channels x reg_x vectors of `vec`
 * columns: for each input channel and kernel row (two serial loops), for
 * each kernel column (unrolled) the tile's reg_x input vectors and reg_k
 * weights (scalars, broadcast) and reg_k x reg_x FMAs; the tile's vectors
 * are stored straight into the NCHW output rows (no transposition). The
 * channels past the last whole tile and the columns past the last whole
 * tile run in tiles of their own size (the last vector of a row that no
 * vector width divides is stored lane by lane), so no work is guarded.
 *
 * Launch: axis 0 blocks of `rows` output rows (consecutive work-groups
 * read overlapping input rows), axis 1 `k_blocks` blocks of channel tiles
 * (more work-groups where an image has few rows), axis 2 images.
 *
 * Knobs, in order:
 *   vec      {4, 8, 16}      lanes of the column vectors
 *   reg_k    {1,2,3,4,6,8}   channels per tile (options past k left out)
 *   reg_x    {1, 2, 3, 4}    vectors per tile (options past the row in
 *                            4-lane vectors left out)
 *   rows     {1, 2, 4}       output rows per work-item, sharing the copied
 *                            input rows (options past the output left out)
 *   k_blocks {1, 2, 4}       work-groups along the channel tiles
 * A config is invalid when its copied rows pass MT__STEM_MAX_STAGED_FLOATS
 * (a core's L1 data cache) or its tile with its input vectors and weights
 * passes MT__STEM_MAX_TILE_FLOATS. The template accepts undilated,
 * ungrouped layers of at most MT__STEM_MAX_CHANNELS input channels with
 * kernels larger than 1x1 and stride_w 1 or 2 whose rows fit that budget.
 * Weights are plain OIHW. */
#include <limits.h>
#include <stdint.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

/* Input channels at most: the layers on a network's input image. */
#define MT__STEM_MAX_CHANNELS 8
/* Floats of copied input rows per work-item at most (32 KiB, a core's L1
 * data cache; ResNet-50's 7x7 stem copies 5,040 with one row). */
#define MT__STEM_MAX_STAGED_FLOATS 8192
/* A tile's accumulators with its input vectors and weights at most
 * (AVX-512's 32 registers of 16 floats). */
#define MT__STEM_MAX_TILE_FLOATS 512

typedef struct stem_plan {
    int n, c, h, w, k, oh, ow, r, s, sh, sw, ph, pw;
    int vec, kr, xr, yr, kb;     /* the knobs */
    int nin;                     /* input rows copied per work-item: (yr - 1) * sh + r */
    int plen;                    /* floats per copied phase row */
    int nkf, ktail, kper;        /* whole channel tiles, channels of the last partial one, whole tiles per work-group */
    int nxf, xtv, xpart;         /* whole column tiles; vectors of the last partial one (0: none); lanes of its last vector (0: whole) */
    int yo;                      /* work-groups along rows */
    const mt_conv_epilogue *epi;
} stem_plan;

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* Floats per copied phase row: the output row in whole vectors and the
 * taps' reach past it. */
static int stem_phase_len(int ow, int s, int sw, int vec) { return round_up(round_up(ow, vec) + (s - 1) / sw, vec); }

static int64_t stem_staged_floats(const mt_workload *wl, int vec, int rows) {
    const int nin = (rows - 1) * wl->stride_h + wl->r;
    return (int64_t)wl->c * nin * wl->stride_w * stem_phase_len(mt_workload_out_w(wl), wl->s, wl->stride_w, vec);
}

static int stem_accepts(const mt_workload *wl) {
    if (!wl || wl->groups != 1 || wl->dil_h != 1 || wl->dil_w != 1 || wl->c > MT__STEM_MAX_CHANNELS) return 0;
    if (wl->stride_w < 1 || wl->stride_w > 2 || (wl->r == 1 && wl->s == 1)) return 0;
    return mt_workload_out_h(wl) >= 1 && mt_workload_out_w(wl) >= 1 && stem_staged_floats(wl, 4, 1) <= MT__STEM_MAX_STAGED_FLOATS;
}

static mt_status stem_space(const mt_workload *wl, mt_space *out) {
    if (!stem_accepts(wl) || !out) return MT_UNSUPPORTED;
    const mt__enum_knob knobs[] = {
        {"vec", MT__OPTIONS(4, 8, 16), INT_MAX},
        {"reg_k", MT__OPTIONS(1, 2, 3, 4, 6, 8), wl->k},
        {"reg_x", MT__OPTIONS(1, 2, 3, 4), (mt_workload_out_w(wl) + 3) / 4},
        {"rows", MT__OPTIONS(1, 2, 4), mt_workload_out_h(wl)},
        {"k_blocks", MT__OPTIONS(1, 2, 4), wl->k},
    };
    mt_space_init(out, "stem");
    mt_status st = mt__space_add_enums(out, knobs, (int)(sizeof knobs / sizeof knobs[0]));
    if (st != MT_OK) mt_space_free(out);
    return st;
}

/* ---- IR building ---- */

typedef struct stem_builder {
    mt_kernel *k;
    const stem_plan *p;
    mt__conv_io io;
    mt_buffer *stage, *acc, *xin, *wreg;
} stem_builder;

#define KI(b, v) mt_ir_int((b)->k, (v))

static mt_expr *addi(stem_builder *b, mt_expr *a, int64_t v) { return v ? mt_ir_add(b->k, a, KI(b, v)) : a; }
static mt_expr *muli(stem_builder *b, mt_expr *a, int64_t v) { return v == 1 ? a : mt_ir_mul(b->k, a, KI(b, v)); }

/* Input columns (j * vec + l) * sw + q - pw of one phase vector. */
static int phase_col(const stem_plan *p, int q, int j, int l) { return (j * p->vec + l) * p->sw + q - p->pw; }

/* Phase vector j of phase q whose loads stay inside the input row: the
 * vector loads cover columns col .. col + sw * vec - 1. */
static int phase_vector_inside(const stem_plan *p, int q, int j) {
    const int col = phase_col(p, q, j, 0);
    return col >= 0 && col + p->sw * p->vec - 1 < p->w;
}

/* The vector of phase q at input column `col` (a run of sw * vec columns
 * inside the row starting at row_at): one load, or for stride 2 the even
 * lanes of two. */
static mt_expr *phase_vector(stem_builder *b, mt_expr *row_at, mt_expr *col) {
    const int vec = b->p->vec;
    mt_expr *lo = mt_ir_load_vec(b->k, b->io.in, mt_ir_add(b->k, row_at, col), vec);
    if (b->p->sw == 1) return lo;
    mt_expr *hi = mt_ir_load_vec(b->k, b->io.in, addi(b, mt_ir_add(b->k, row_at, col), vec), vec);
    int mask[MT_IR_MAX_LANES];
    for (int l = 0; l < vec; l++) mask[l] = 2 * l;
    return mt_ir_shuffle(b->k, lo, hi, mask);
}

/* Phase vector j of phase q built lane by lane: zeros, then the lanes whose
 * column lies in the row. */
static void phase_vector_lanes(stem_builder *b, mt_stmt_list *list, mt_expr *row_at, mt_expr *dst, int q, int j) {
    const stem_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *at = addi(b, dst, (int64_t)q * p->plen + (int64_t)j * p->vec);
    mt_stmt_list_push(k, list, mt_ir_store_vec(k, b->stage, at, mt_ir_broadcast(k, mt_ir_float(k, 0.0f), p->vec)));
    for (int l = 0; l < p->vec; l++) {
        const int col = phase_col(p, q, j, l);
        if (col < 0 || col >= p->w) continue;
        mt_stmt_list_push(k, list, mt_ir_store(k, b->stage, addi(b, at, l), mt_ir_load(k, b->io.in, addi(b, row_at, col))));
    }
}

/* Copies the nin input rows of every input channel that output rows y0 ..
 * y0 + yr - 1 read into b->stage, phase by phase; rows past the image's
 * top or bottom as zeros. */
static mt_stmt *stage_rows(stem_builder *b, mt_expr *img, mt_expr *y0) {
    const stem_plan *p = b->p;
    mt_kernel *k = b->k;
    mt__opt_loop lc, lt;
    mt_expr *ci = mt__loop_begin(k, &lc, "sc", p->c, MT_LOOP_SERIAL);
    mt_expr *t = mt__loop_begin(k, &lt, "st", p->nin, MT_LOOP_SERIAL);
    mt__let_chain l = {0};
    mt_expr *iy = mt__let_bind(k, &l, "iy", addi(b, mt_ir_add(k, muli(b, y0, p->sh), t), -(int64_t)p->ph));
    mt_expr *dst = mt__let_bind(k, &l, "dst", muli(b, mt_ir_add(k, muli(b, ci, p->nin), t), (int64_t)p->sw * p->plen));
    mt_expr *row_at = mt__let_bind(k, &l, "row_at", mt_ir_add(k, muli(b, mt_ir_add(k, muli(b, img, p->c), ci), (int64_t)p->h * p->w),
                                                              muli(b, iy, p->w)));
    const int nv = p->plen / p->vec;
    mt_stmt_list in = {0};
    for (int q = 0; q < p->sw; q++) {
        int jlo = 0;
        while (jlo < nv && !phase_vector_inside(p, q, jlo)) jlo++;
        int jhi = jlo;
        while (jhi < nv && phase_vector_inside(p, q, jhi)) jhi++;
        for (int j = 0; j < jlo; j++) phase_vector_lanes(b, &in, row_at, dst, q, j);
        if (jhi > jlo) {
            mt__opt_loop lj;
            mt_expr *jj = mt__loop_begin(k, &lj, "sj", jhi - jlo, MT_LOOP_SERIAL);
            mt_expr *j = addi(b, jj, jlo);
            mt_expr *col = addi(b, muli(b, j, (int64_t)p->vec * p->sw), q - p->pw);
            mt_expr *at = addi(b, mt_ir_add(k, dst, muli(b, j, p->vec)), (int64_t)q * p->plen);
            mt_stmt_list_push(k, &in, mt__loop_end(k, &lj, mt_ir_store_vec(k, b->stage, at, phase_vector(b, row_at, col))));
        }
        for (int j = jhi; j < nv; j++) phase_vector_lanes(b, &in, row_at, dst, q, j);
    }
    mt__opt_loop lz;
    mt_expr *z = mt__loop_begin(k, &lz, "sz", (int64_t)p->sw * nv, MT_LOOP_SERIAL);
    mt_stmt *zeros = mt__loop_end(k, &lz, mt_ir_store_vec(k, b->stage, mt_ir_add(k, dst, muli(b, z, p->vec)),
                                                          mt_ir_broadcast(k, mt_ir_float(k, 0.0f), p->vec)));
    const int64_t last_y0 = (int64_t)(p->yo - 1) * p->yr;
    const int need_lo = p->ph > 0, need_hi = last_y0 * p->sh - p->ph + p->nin - 1 >= p->h;
    mt_stmt *row = mt_ir_if(k, mt__range_cond(k, iy, 0, p->h, need_lo, need_hi), mt_stmt_list_seq(k, &in), zeros);
    return mt__loop_end(k, &lc, mt__loop_end(k, &lt, mt__let_wrap(k, &l, row)));
}

static int64_t acc_at(const stem_plan *p, int kk, int j) { return ((int64_t)kk * p->xr + j) * p->vec; }

/* One tile: nk channels from kbase x nx vectors from output column x0 of
 * output row oy (copied rows from t0 on); the last vector has `part`
 * lanes when part > 0. */
static mt_stmt *tile(stem_builder *b, mt_expr *img, mt_expr *oy, mt_expr *t0, mt_expr *kbase, mt_expr *x0, int nk, int nx, int part) {
    const stem_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_stmt_list list = {0};
    for (int kk = 0; kk < nk; kk++)
        for (int j = 0; j < nx; j++)
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->acc, KI(b, acc_at(p, kk, j)), mt_ir_broadcast(k, mt_ir_float(k, 0.0f), vec)));
    mt__opt_loop lc, lr;
    mt_expr *ci = mt__loop_begin(k, &lc, "rc", p->c, MT_LOOP_SERIAL);
    mt_expr *rr = mt__loop_begin(k, &lr, "rr", p->r, MT_LOOP_SERIAL);
    mt__let_chain l = {0};
    mt_expr *row = mt__let_bind(k, &l, "xs", mt_ir_add(k, muli(b, mt_ir_add(k, muli(b, ci, p->nin), mt_ir_add(k, t0, rr)), (int64_t)p->sw * p->plen), x0));
    mt_expr *wb = mt__let_bind(k, &l, "wb", muli(b, mt_ir_add(k, muli(b, mt_ir_add(k, muli(b, kbase, p->c), ci), p->r), rr), p->s));
    mt_stmt_list red = {0};
    const int64_t wk = (int64_t)p->c * p->r * p->s;
    for (int sx = 0; sx < p->s; sx++) {
        const int64_t off = (int64_t)(sx % p->sw) * p->plen + sx / p->sw;
        for (int j = 0; j < nx; j++)
            mt_stmt_list_push(k, &red, mt_ir_store_vec(k, b->xin, KI(b, (int64_t)j * vec), mt_ir_load_vec(k, b->stage, addi(b, row, off + (int64_t)j * vec), vec)));
        for (int kk = 0; kk < nk; kk++)
            mt_stmt_list_push(k, &red, mt_ir_store(k, b->wreg, KI(b, kk), mt_ir_load(k, b->io.wt, addi(b, wb, kk * wk + sx))));
        for (int kk = 0; kk < nk; kk++)
            for (int j = 0; j < nx; j++) {
                mt_expr *wv = mt_ir_broadcast(k, mt_ir_load(k, b->wreg, KI(b, kk)), vec);
                mt_expr *xv = mt_ir_load_vec(k, b->xin, KI(b, (int64_t)j * vec), vec);
                mt_expr *a = mt_ir_load_vec(k, b->acc, KI(b, acc_at(p, kk, j)), vec);
                mt_stmt_list_push(k, &red, mt_ir_store_vec(k, b->acc, KI(b, acc_at(p, kk, j)), mt_ir_fma(k, wv, xv, a)));
            }
    }
    mt_stmt *reduction = mt__let_wrap(k, &l, mt_stmt_list_seq(k, &red));
    mt_stmt_list_push(k, &list, mt__loop_end(k, &lc, mt__loop_end(k, &lr, reduction)));
    for (int kk = 0; kk < nk; kk++) {
        mt_expr *ch = addi(b, kbase, kk);
        mt_expr *plane = mt_ir_add(k, muli(b, mt_ir_add(k, muli(b, img, p->k), ch), (int64_t)p->oh * p->ow), muli(b, oy, p->ow));
        for (int j = 0; j < nx; j++) {
            mt_expr *idx = addi(b, mt_ir_add(k, plane, x0), (int64_t)j * vec);
            if (j < nx - 1 || part == 0) {
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, mt_ir_load_vec(k, b->acc, KI(b, acc_at(p, kk, j)), vec), ch, idx, vec);
                mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->io.out, idx, val));
                continue;
            }
            for (int ln = 0; ln < part; ln++) {
                mt_expr *il = addi(b, idx, ln);
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, mt_ir_load(k, b->acc, KI(b, acc_at(p, kk, j) + ln)), ch, il, 1);
                mt_stmt_list_push(k, &list, mt_ir_store(k, b->io.out, il, val));
            }
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* Every column tile of output row oy for nk channels from kbase. */
static mt_stmt *row_tiles(stem_builder *b, mt_expr *img, mt_expr *oy, mt_expr *t0, mt_expr *kbase, int nk) {
    const stem_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt_list list = {0};
    if (p->nxf > 0) {
        mt__opt_loop lx;
        mt_expr *xt = mt__loop_begin(k, &lx, "xt", p->nxf, MT_LOOP_SERIAL);
        mt_stmt *one = tile(b, img, oy, t0, kbase, muli(b, xt, (int64_t)p->xr * p->vec), nk, p->xr, 0);
        mt_stmt_list_push(k, &list, mt__loop_end(k, &lx, one));
    }
    if (p->xtv > 0) mt_stmt_list_push(k, &list, tile(b, img, oy, t0, kbase, KI(b, (int64_t)p->nxf * p->xr * p->vec), nk, p->xtv, p->xpart));
    return mt_stmt_list_seq(k, &list);
}

static mt_status stem_build_plan(const stem_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_stem");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "stem: out of memory");
    stem_builder bb = {.k = k, .p = p};
    stem_builder *b = &bb;
    mt__conv_io_params(k, &b->io, (int64_t)p->n * p->c * p->h * p->w, (int64_t)p->k * p->c * p->r * p->s, (int64_t)p->n * p->k * p->oh * p->ow,
                       p->k, p->epi);
    b->stage = mt_ir_buffer(k, "rows", MT_SCOPE_PRIVATE, (int64_t)p->c * p->nin * p->sw * p->plen);
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, (int64_t)p->kr * p->xr * p->vec);
    b->xin = mt_ir_buffer(k, "xin", MT_SCOPE_PRIVATE, (int64_t)p->xr * p->vec);
    b->wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, p->kr);
    mt__opt_loop g[3];
    mt_expr *by = mt__loop_begin(k, &g[0], "by", p->yo, MT_LOOP_BLOCK);
    mt_expr *bk = mt__loop_begin(k, &g[1], "bk", p->kb, MT_LOOP_BLOCK);
    mt_expr *img = mt__loop_begin(k, &g[2], "img", p->n, MT_LOOP_BLOCK);
    for (int i = 0; i < 3; i++) g[i].axis = i;
    mt__let_chain l = {0};
    mt_expr *y0 = mt__let_bind(k, &l, "y0", muli(b, by, p->yr));

    mt__opt_loop ly;
    mt_expr *yi = mt__loop_begin(k, &ly, "yi", p->yr, MT_LOOP_SERIAL);
    mt__let_chain lrow = {0};
    mt_expr *oy = mt__let_bind(k, &lrow, "oy", mt_ir_add(k, y0, yi));
    mt_expr *t0 = muli(b, yi, p->sh);
    mt_stmt_list rl = {0};
    if (p->kper > 0) {
        mt__opt_loop lk;
        mt_expr *kt = mt__loop_begin(k, &lk, "kt", p->kper, MT_LOOP_SERIAL);
        mt__let_chain lkt = {0};
        mt_expr *kti = mt__let_bind(k, &lkt, "kti", mt_ir_add(k, muli(b, bk, p->kper), kt));
        mt_expr *kbase = mt__let_bind(k, &lkt, "kbase", muli(b, kti, p->kr));
        mt_stmt *tiles = row_tiles(b, img, oy, t0, kbase, p->kr);
        if ((int64_t)p->kper * p->kb > p->nkf) tiles = mt_ir_if(k, mt_ir_lt(k, kti, KI(b, p->nkf)), tiles, NULL);
        mt_stmt_list_push(k, &rl, mt__loop_end(k, &lk, mt__let_wrap(k, &lkt, tiles)));
    }
    if (p->ktail > 0) {
        mt_stmt *tiles = row_tiles(b, img, oy, t0, KI(b, (int64_t)p->nkf * p->kr), p->ktail);
        if (p->kb > 1) tiles = mt_ir_if(k, mt_ir_lt(k, KI(b, p->kb - 2), bk), tiles, NULL);
        mt_stmt_list_push(k, &rl, tiles);
    }
    mt_stmt *one_row = mt_stmt_list_seq(k, &rl);
    if ((int64_t)p->yo * p->yr > p->oh) one_row = mt_ir_if(k, mt_ir_lt(k, oy, KI(b, p->oh)), one_row, NULL);
    mt_stmt *rows = mt__loop_end(k, &ly, mt__let_wrap(k, &lrow, one_row));

    mt_stmt *body = mt_ir_seq2(k, stage_rows(b, img, y0), rows);
    body = mt_ir_alloc(k, b->stage, mt_ir_alloc(k, b->acc, mt_ir_alloc(k, b->xin, mt_ir_alloc(k, b->wreg, body))));
    body = mt__let_wrap(k, &l, body);
    for (int i = 2; i >= 0; i--) body = mt__loop_end(k, &g[i], body);
    const mt__rt_plan rp = {.unroll_explicit = 1};
    return mt__rt_finish(k, body, &rp, 0, "stem", out, err, errlen);
}

static mt_status stem_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                            char *err, size_t errlen) {
    if (!stem_accepts(wl))
        return mt__fail(err, errlen, MT_UNSUPPORTED, "stem: only undilated, ungrouped layers of at most %d input channels with kernels "
                                                     "over 1x1, stride_w 1 or 2 and rows that fit %d floats",
                        MT__STEM_MAX_CHANNELS, MT__STEM_MAX_STAGED_FLOATS);
    stem_plan p = {0};
    p.n = wl->n, p.c = wl->c, p.h = wl->h, p.w = wl->w, p.k = wl->k, p.oh = mt_workload_out_h(wl), p.ow = mt_workload_out_w(wl);
    p.r = wl->r, p.s = wl->s, p.sh = wl->stride_h, p.sw = wl->stride_w, p.ph = wl->pad_h, p.pw = wl->pad_w;
    p.vec = mt_config_value(sp, cfg, "vec");
    p.kr = mt_config_value(sp, cfg, "reg_k");
    p.xr = mt_config_value(sp, cfg, "reg_x");
    p.yr = mt_config_value(sp, cfg, "rows");
    p.kb = mt_config_value(sp, cfg, "k_blocks");
    p.epi = epi;
    if ((p.vec != 4 && p.vec != 8 && p.vec != 16) || p.kr < 1 || p.xr < 1 || p.yr < 1 || p.kb < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "stem: config does not match this workload's space");
    p.nin = (p.yr - 1) * p.sh + p.r;
    p.plen = stem_phase_len(p.ow, p.s, p.sw, p.vec);
    p.nkf = p.k / p.kr;
    p.ktail = p.k % p.kr;
    p.kper = (p.nkf + p.kb - 1) / p.kb;
    const int whole = p.ow / p.vec, part = p.ow % p.vec;
    p.nxf = whole / p.xr;
    p.xtv = whole % p.xr + (part > 0);
    p.xpart = part;
    p.yo = (p.oh + p.yr - 1) / p.yr;
    const int64_t staged = (int64_t)p.c * p.nin * p.sw * p.plen;
    if (staged > MT__STEM_MAX_STAGED_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "stem: %lld floats of copied input rows (%d channels x %d rows x %d phases x %d) exceed %d",
                        (long long)staged, p.c, p.nin, p.sw, p.plen, MT__STEM_MAX_STAGED_FLOATS);
    const int64_t tile_floats = ((int64_t)p.kr * p.xr + p.xr) * p.vec + p.kr;
    if (tile_floats > MT__STEM_MAX_TILE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "stem: a tile of %d channels x %d vectors of %d (%lld floats with its inputs and weights) exceeds %d",
                        p.kr, p.xr, p.vec, (long long)tile_floats, MT__STEM_MAX_TILE_FLOATS);
    if (p.kb > (p.k + p.kr - 1) / p.kr)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "stem: %d channel blocks for %d tiles of %d channels", p.kb, (p.k + p.kr - 1) / p.kr, p.kr);
    return stem_build_plan(&p, out, err, errlen);
}

const mt_template mt__template_stem = {
    /* .name    = */ "stem",
    /* .accepts = */ stem_accepts,
    /* .space   = */ stem_space,
    /* .build   = */ stem_build,
    /* .weights = */ MT_WEIGHTS_OIHW,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
