/* The `dwrow` template: depthwise convolutions (groups == c == k) on CPUs,
 * whole output rows in vectors.
 *
 * A depthwise layer does r*s multiply-adds per output and moves every input
 * and output once: it is bound by memory and by the instructions spent per
 * element, not by FMAs. The `depthwise` template (AutoTVM's GPU schedule)
 * and gemm (with groups) read each tap's input vector from memory at an
 * unaligned offset and fall back to per-lane loads wherever a vector touches
 * the padding, which is every vector of the first and last column tiles;
 * inside MobileNetV2 after tuning, its depthwise layers ran 1.4-3.2x slower
 * than oneDNN's (bench/layers_vs_onednn/results/mobilenet_v2_tuned.md).
 *
 * Here a work-item owns `chan` channels (in turn) x `reg_y` output rows, each
 * row whole: ceil(ow / vec) accumulator vectors per row. For each input row
 * it needs, it loads the row once into ceil(w / vec) vectors (a row past
 * the image's top or bottom is skipped; the lanes past w read as 0), and
 * builds every tap's input vector from those with register shuffles: for
 * output vector v and tap column sx, lane l reads input column
 * (v * vec + l) * stride_w - pad_w + sx, which lies in one or two row
 * vectors at stride 1, or in the zero padding; at stride 2 the row is first
 * split into its even and odd columns (one shuffle per phase vector), and
 * each window lies in one or two phase vectors. The column positions are
 * constants, so the left and right padding cost nothing at run time, and
 * each input row feeds the taps of every output row of the tile that reads
 * it (up to r of them). A tile that lies inside the output stores its rows
 * as one run (they are consecutive in the plane), in full vectors across the
 * row ends.
 *
 * Launch: axis 0 blocks of `reg_y` output rows, axis 1 blocks of `chan`
 * channels, axis 2 images; one work-item per work-group (the shape that runs
 * well on PoCL). Row blocks vary fastest, so that consecutive work-groups
 * walk down one channel's plane and read the rows the previous one left in
 * cache: with channel blocks fastest, each work-group read a few rows of a
 * different plane, and the default config took 0.59 against 0.30 ms on
 * MobileNetV2's 32-channel 112x112 layer and 1.05 against 0.46 ms on its
 * 96-channel stride-2 one (five runs of each in turns, median of the
 * fastest runs; 0.07 against 0.05 ms on a 14x14 layer). Rows past the
 * output (the last row block's overhang) are
 * computed from zero-skipped reads and not stored; channels past c (when
 * chan does not divide it) are skipped.
 *
 * Knobs, in order:
 *   vec    {4, 8, 16}               lanes of the row vectors
 *   reg_y  {1, 2, 3, 4, 7, 8, 14}   output rows per work-item (options past
 *                                   the output's height left out)
 *   chan   {1, 2, 4, 8, 16}         channels per work-item (options past c
 *                                   left out)
 * A config is invalid when its accumulators and the row vectors pass
 * MT__DWROW_MAX_PRIVATE_FLOATS (AVX-512's 32 registers of 16 floats). The
 * template accepts undilated depthwise layers with stride_w 1 or 2, kernels
 * up to 7x7, and rows narrow enough that one output row and one input row
 * fit that budget in 4-lane vectors. Weights are plain OIHW (k x 1 x r x s). */
#include <limits.h>
#include <stdint.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

#define MT__DWROW_MAX_PRIVATE_FLOATS 512
#define MT__DWROW_MAX_TAPS 7

typedef struct dwrow_plan {
    int n, c, h, w, oh, ow, r, s, sh, sw, ph, pw;
    int vec, yr, cb;
    int nvo, nvi;  /* output vectors per row, input vectors per row */
    int nin;       /* input rows a work-item reads: (yr - 1) * sh + r */
    int co, yo;    /* work-groups along channels and rows */
    const mt_conv_epilogue *epi;
} dwrow_plan;

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

static int dwrow_accepts(const mt_workload *wl) {
    if (!wl || !mt_workload_is_depthwise(wl) || wl->dil_h != 1 || wl->dil_w != 1) return 0;
    if (wl->stride_w < 1 || wl->stride_w > 2 || wl->r > MT__DWROW_MAX_TAPS || wl->s > MT__DWROW_MAX_TAPS) return 0;
    const int ow = mt_workload_out_w(wl), oh = mt_workload_out_h(wl);
    return ow >= 1 && oh >= 1 && round_up(ow, 4) + round_up(wl->w, 4) <= MT__DWROW_MAX_PRIVATE_FLOATS;
}

static mt_status dwrow_space(const mt_workload *wl, mt_space *out) {
    if (!dwrow_accepts(wl) || !out) return MT_UNSUPPORTED;
    const mt__enum_knob knobs[] = {
        {"vec", MT__OPTIONS(4, 8, 16), INT_MAX},
        {"reg_y", MT__OPTIONS(1, 2, 3, 4, 7, 8, 14), mt_workload_out_h(wl)},
        {"chan", MT__OPTIONS(1, 2, 4, 8, 16), wl->c},
    };
    mt_space_init(out, "dwrow");
    mt_status st = mt__space_add_enums(out, knobs, (int)(sizeof knobs / sizeof knobs[0]));
    if (st != MT_OK) mt_space_free(out);
    return st;
}

/* ---- IR building ---- */

typedef struct dwrow_builder {
    mt_kernel *k;
    const dwrow_plan *p;
    mt__conv_io io;
    mt_buffer *row, *acc, *wreg;
    mt_expr *rowi; /* the flat index of the input row being read */
} dwrow_builder;

#define KI(b, v) mt_ir_int((b)->k, (v))

static int floor_div(int a, int m) { return a >= 0 ? a / m : -((-a + m - 1) / m); }

/* Row vector q of the input row in b->row; the zero vector outside it. */
static mt_expr *row_vector(dwrow_builder *b, int q) {
    const dwrow_plan *p = b->p;
    if (q < 0 || q >= p->nvi) return mt_ir_broadcast(b->k, mt_ir_float(b->k, 0.0f), p->vec);
    return mt_ir_load_vec(b->k, b->row, KI(b, (int64_t)q * p->vec), p->vec);
}

/* Stride 2: vector j of the row's phase ph (lane l: column 2 * (j * vec +
 * l) + ph), from row vectors 2j and 2j + 1 in one shuffle. */
static mt_expr *phase_vector(dwrow_builder *b, int j, int ph) {
    const int vec = b->p->vec;
    int mask[MT_IR_MAX_LANES];
    for (int l = 0; l < vec; l++) mask[l] = 2 * l + ph;
    return mt_ir_shuffle(b->k, row_vector(b, 2 * j), row_vector(b, 2 * j + 1), mask);
}

/* Stride 2: the window from base as phase (base mod 2) elements J .. J +
 * vec - 1 (J = floor(base / 2)): one phase vector, or two and a shuffle.
 * The phase vectors are the same expressions for every window and every
 * output vector that reads them, so each is built once per input row: a
 * 3-wide kernel's three windows of an output vector take 3 shuffles where
 * taking each tap's lanes from the row vectors took 4 (one window's lanes
 * lie in three row vectors). */
static mt_expr *phase_window(dwrow_builder *b, int base) {
    const int vec = b->p->vec;
    const int ph = base - 2 * floor_div(base, 2), J = floor_div(base, 2);
    const int j = floor_div(J, vec), o = J - j * vec;
    if (o == 0) return phase_vector(b, j, ph);
    int mask[MT_IR_MAX_LANES];
    for (int l = 0; l < vec; l++) mask[l] = o + l;
    return mt_ir_shuffle(b->k, phase_vector(b, j, ph), phase_vector(b, j + 1, ph), mask);
}

/* The vector whose lane l is lane m[l] of source vector q[l] (q not falling
 * from lane to lane), by shuffles of the source vectors: the first two in
 * one shuffle, each further one in another that keeps the lanes already
 * placed. */
static mt_expr *gather_lanes(dwrow_builder *b, mt_expr *(*source)(dwrow_builder *, int), const int *q, const int *m) {
    const int vec = b->p->vec, qlo = q[0], qhi = q[vec - 1], qb = qhi > qlo ? qlo + 1 : qlo;
    int mask[MT_IR_MAX_LANES];
    for (int l = 0; l < vec; l++) mask[l] = q[l] == qlo ? m[l] : q[l] == qb ? vec + m[l] : 0;
    mt_expr *r = mt_ir_shuffle(b->k, source(b, qlo), source(b, qb), mask);
    for (int qq = qb + 1; qq <= qhi; qq++) {
        for (int l = 0; l < vec; l++) mask[l] = q[l] < qq ? l : q[l] == qq ? vec + m[l] : 0;
        r = mt_ir_shuffle(b->k, r, source(b, qq), mask);
    }
    return r;
}

/* The vector whose lane l holds input column base + sw * l of the loaded row
 * (0 outside the row): a row vector; at stride 1 a window inside the row
 * loaded from the input; else gathered from the row vectors its lanes lie
 * in. */
static mt_expr *row_window(dwrow_builder *b, int base) {
    const dwrow_plan *p = b->p;
    const int vec = p->vec;
    if (p->sw == 2) return phase_window(b, base);
    int q[MT_IR_MAX_LANES] = {0}, m[MT_IR_MAX_LANES] = {0};
    for (int l = 0; l < vec; l++) {
        const int e = base + p->sw * l;
        q[l] = floor_div(e, vec);
        m[l] = e - q[l] * vec;
    }
    const int qlo = q[0], qhi = q[vec - 1];
    int identity = qlo == qhi;
    for (int l = 0; l < vec && identity; l++) identity = m[l] == l;
    if (identity) return row_vector(b, qlo);
    /* one unaligned load (from L1: the row's vectors were just loaded),
     * where a two-source shuffle of the row vectors took three shuffle
     * instructions on AVX2 */
    if (p->sw == 1 && base >= 0 && base + vec <= p->w) return mt_ir_load_vec(b->k, b->io.in, mt_ir_add(b->k, b->rowi, KI(b, base)), vec);
    return gather_lanes(b, row_vector, q, m);
}

/* Loads input row `rowi` (a flat index of its first element) into b->row:
 * whole vectors, then the last partial one in power-of-two pieces over a
 * zeroed vector (no read past the row). */
static void load_row(dwrow_builder *b, mt_stmt_list *list, mt_expr *rowi) {
    const dwrow_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    for (int j = 0; j < p->nvi; j++) {
        const int at = j * vec, rem = p->w - at;
        if (rem >= vec) {
            mt_stmt_list_push(k, list, mt_ir_store_vec(k, b->row, KI(b, at), mt_ir_load_vec(k, b->io.in, mt_ir_add(k, rowi, KI(b, at)), vec)));
            continue;
        }
        mt_stmt_list_push(k, list, mt_ir_store_vec(k, b->row, KI(b, at), mt_ir_broadcast(k, mt_ir_float(k, 0.0f), vec)));
        int off = 0;
        for (int piece = vec / 2; piece >= 1; piece /= 2) {
            if (rem - off < piece) continue;
            mt_expr *src = mt_ir_add(k, rowi, KI(b, at + off));
            mt_stmt *st = piece == 1 ? mt_ir_store(k, b->row, KI(b, at + off), mt_ir_load(k, b->io.in, src))
                                     : mt_ir_store_vec(k, b->row, KI(b, at + off), mt_ir_load_vec(k, b->io.in, src, piece));
            mt_stmt_list_push(k, list, st);
            off += piece;
        }
    }
}

static int64_t acc_at(const dwrow_plan *p, int yi, int v) { return ((int64_t)yi * p->nvo + v) * p->vec; }

/* `lanes` accumulator values from element `at` (one float or a vector). */
static mt_expr *acc_lanes(dwrow_builder *b, int64_t at, int lanes) {
    return lanes == 1 ? mt_ir_load(b->k, b->acc, KI(b, at)) : mt_ir_load_vec(b->k, b->acc, KI(b, at), lanes);
}

/* Stores val (`lanes` outputs from output element idx of channel ch)
 * through the epilogue. */
static void push_output(dwrow_builder *b, mt_stmt_list *sl, mt_expr *ch, mt_expr *idx, mt_expr *val, int lanes) {
    mt_kernel *k = b->k;
    val = mt__epilogue_apply(k, &b->io.epi, val, ch, idx, lanes);
    mt_stmt_list_push(k, sl, lanes == 1 ? mt_ir_store(k, b->io.out, idx, val) : mt_ir_store_vec(k, b->io.out, idx, val));
}

/* Output row yi of the tile, vector by vector through the epilogue; the
 * row's tail in power-of-two pieces (14 = 8 + 4 + 2). Rows past the output
 * (the last row block's overhang) are not stored. */
static mt_stmt *store_row(dwrow_builder *b, mt_expr *ch, mt_expr *out_plane, mt_expr *y0, int yi) {
    const dwrow_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_expr *oy = mt_ir_add(k, y0, KI(b, yi));
    mt_stmt_list sl = {0};
    for (int v = 0; v < p->nvo; v++) {
        const int at = v * vec, n = p->ow - at < vec ? p->ow - at : vec;
        mt_expr *idx = mt_ir_add(k, out_plane, mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), KI(b, at)));
        int off = 0;
        for (int piece = vec; piece >= 1; piece /= 2) {
            if (n - off < piece) continue;
            push_output(b, &sl, ch, off ? mt_ir_add(k, idx, KI(b, off)) : idx, acc_lanes(b, acc_at(p, yi, v) + off, piece), piece);
            off += piece;
        }
    }
    mt_stmt *row = mt_stmt_list_seq(k, &sl);
    return (int64_t)p->yo * p->yr > p->oh ? mt_ir_if(k, mt_ir_lt(k, oy, KI(b, p->oh)), row, NULL) : row;
}

/* The accumulator vector q (of the tile's rows laid end to end, each padded
 * to nvo vectors). */
static mt_expr *acc_vector(dwrow_builder *b, int q) { return mt_ir_load_vec(b->k, b->acc, KI(b, (int64_t)q * b->p->vec), b->p->vec); }

/* The tile's yr whole rows are yr * ow consecutive outputs of the plane:
 * stored as one run, in full vectors across the row ends (each built from
 * the two or three accumulator vectors its lanes lie in), the last piece
 * in power-of-two pieces. Row by row, a 7-wide row took an epilogue and a
 * store for each of its pieces (4 + 2 + 1); lane by lane, LLVM had merged
 * such rows into whole vectors itself but left a 14-wide row's six tail
 * lanes one by one. */
static mt_stmt *store_tile(dwrow_builder *b, mt_expr *ch, mt_expr *out_plane, mt_expr *y0) {
    const dwrow_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec, total = p->yr * p->ow;
    mt_expr *base = mt_ir_add(k, out_plane, mt_ir_mul(k, y0, KI(b, p->ow)));
    mt_stmt_list sl = {0};
    int f0 = 0;
    while (f0 < total) {
        int piece = vec;
        while (piece > total - f0) piece /= 2;
        int e[MT_IR_MAX_LANES] = {0};
        for (int l = 0; l < piece; l++) e[l] = (int)acc_at(p, (f0 + l) / p->ow, 0) + (f0 + l) % p->ow;
        const int contiguous = e[piece - 1] - e[0] == piece - 1;
        mt_expr *idx = f0 ? mt_ir_add(k, base, KI(b, f0)) : base, *val;
        if (piece == 1 || (contiguous && (piece < vec || e[0] % vec == 0))) {
            val = acc_lanes(b, e[0], piece);
        } else if (piece < vec) {
            /* lanes of two rows in a piece narrower than a vector: one by one */
            for (int l = 0; l < piece; l++) push_output(b, &sl, ch, mt_ir_add(k, idx, KI(b, l)), acc_lanes(b, e[l], 1), 1);
            f0 += piece;
            continue;
        } else {
            /* the lanes from the accumulator vectors they lie in */
            int q[MT_IR_MAX_LANES], m[MT_IR_MAX_LANES];
            for (int l = 0; l < vec; l++) q[l] = e[l] / vec, m[l] = e[l] % vec;
            val = gather_lanes(b, acc_vector, q, m);
        }
        push_output(b, &sl, ch, idx, val, piece);
        f0 += piece;
    }
    return mt_stmt_list_seq(k, &sl);
}

/* One channel: weights to registers, accumulators zeroed, every input row
 * the tile reads (skipped outside the image) into the accumulators, stores:
 * the tile's rows as one run where the tile lies inside the output, else
 * row by row. (Zeroing each output row's accumulators just before its first
 * input row and storing it after its last, so that fewer are live at a
 * time, ran no faster: PoCL's LLVM schedules the rows' loads and shuffles
 * ahead as it likes.) */
static mt_stmt *channel_body(dwrow_builder *b, mt_expr *img, mt_expr *ch, mt_expr *y0) {
    const dwrow_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec, taps = p->r * p->s;
    mt_stmt_list list = {0};
    mt__let_chain lc = {0};
    mt_expr *plane = mt_ir_add(k, mt_ir_mul(k, img, KI(b, p->c)), ch);
    mt_expr *in_plane = mt__let_bind(k, &lc, "ip", mt_ir_mul(k, plane, KI(b, (int64_t)p->h * p->w)));
    mt_expr *out_plane = mt__let_bind(k, &lc, "op", mt_ir_mul(k, plane, KI(b, (int64_t)p->oh * p->ow)));
    for (int i = 0; i < taps; i++)
        mt_stmt_list_push(k, &list, mt_ir_store(k, b->wreg, KI(b, i), mt_ir_load(k, b->io.wt, mt_ir_add(k, mt_ir_mul(k, ch, KI(b, taps)), KI(b, i)))));
    mt_stmt_list_push(k, &list, mt__zero_fill(k, b->acc, (int64_t)p->yr * p->nvo * vec, vec));
    const int64_t last_y0 = (int64_t)(p->yo - 1) * p->yr;
    for (int t = 0; t < p->nin; t++) {
        mt_expr *iy = mt_ir_add(k, mt_ir_mul(k, y0, KI(b, p->sh)), KI(b, (int64_t)t - p->ph));
        const int need_lo = t < p->ph, need_hi = last_y0 * p->sh - p->ph + t >= p->h;
        mt_stmt_list rl = {0};
        b->rowi = mt_ir_add(k, in_plane, mt_ir_mul(k, iy, KI(b, p->w)));
        load_row(b, &rl, b->rowi);
        for (int v = 0; v < p->nvo; v++)
            for (int sx = 0; sx < p->s; sx++) {
                mt_expr *x = NULL;
                for (int yi = 0; yi < p->yr; yi++) {
                    const int rr = t - yi * p->sh;
                    if (rr < 0 || rr >= p->r) continue;
                    if (!x) x = row_window(b, v * vec * p->sw - p->pw + sx);
                    mt_expr *wv = mt_ir_broadcast(k, mt_ir_load(k, b->wreg, KI(b, rr * p->s + sx)), vec);
                    mt_expr *a = mt_ir_load_vec(k, b->acc, KI(b, acc_at(p, yi, v)), vec);
                    mt_stmt_list_push(k, &rl, mt_ir_store_vec(k, b->acc, KI(b, acc_at(p, yi, v)), mt_ir_fma(k, wv, x, a)));
                }
            }
        mt_stmt_list_push(k, &list, mt_ir_if(k, mt__range_cond(k, iy, 0, p->h, need_lo, need_hi), mt_stmt_list_seq(k, &rl), NULL));
    }
    if ((int64_t)p->yo * p->yr == p->oh) {
        mt_stmt_list_push(k, &list, store_tile(b, ch, out_plane, y0));
    } else {
        for (int yi = 0; yi < p->yr; yi++) mt_stmt_list_push(k, &list, store_row(b, ch, out_plane, y0, yi));
    }
    return mt__let_wrap(k, &lc, mt_stmt_list_seq(k, &list));
}

static mt_status dwrow_build_plan(const dwrow_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_dwrow");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "dwrow: out of memory");
    dwrow_builder bb = {.k = k, .p = p};
    dwrow_builder *b = &bb;
    mt__conv_io_params(k, &b->io, (int64_t)p->n * p->c * p->h * p->w, (int64_t)p->c * p->r * p->s, (int64_t)p->n * p->c * p->oh * p->ow, p->c,
                       p->epi);
    b->row = mt_ir_buffer(k, "row", MT_SCOPE_PRIVATE, (int64_t)p->nvi * p->vec);
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, (int64_t)p->yr * p->nvo * p->vec);
    b->wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, (int64_t)p->r * p->s);
    mt__opt_loop g[3], lc;
    mt_expr *by = mt__loop_begin(k, &g[0], "by", p->yo, MT_LOOP_BLOCK);
    mt_expr *bc = mt__loop_begin(k, &g[1], "bc", p->co, MT_LOOP_BLOCK);
    mt_expr *img = mt__loop_begin(k, &g[2], "img", p->n, MT_LOOP_BLOCK);
    for (int i = 0; i < 3; i++) g[i].axis = i;
    mt__let_chain l = {0};
    mt_expr *y0 = mt__let_bind(k, &l, "y0", mt_ir_mul(k, by, KI(b, p->yr)));
    mt_expr *ci = mt__loop_begin(k, &lc, "ci", p->cb, MT_LOOP_SERIAL);
    mt__let_chain lch = {0};
    mt_expr *ch = mt__let_bind(k, &lch, "ch", mt_ir_add(k, mt_ir_mul(k, bc, KI(b, p->cb)), ci));
    mt_stmt *one = channel_body(b, img, ch, y0);
    if ((int64_t)p->co * p->cb > p->c) one = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->c)), one, NULL);
    mt_stmt *body = mt__loop_end(k, &lc, mt__let_wrap(k, &lch, one));
    body = mt_ir_alloc(k, b->row, mt_ir_alloc(k, b->acc, mt_ir_alloc(k, b->wreg, body)));
    body = mt__let_wrap(k, &l, body);
    for (int i = 2; i >= 0; i--) body = mt__loop_end(k, &g[i], body);
    const mt__rt_plan rp = {.unroll_explicit = 1};
    return mt__rt_finish(k, body, &rp, 0, "dwrow", out, err, errlen);
}

static mt_status dwrow_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                             char *err, size_t errlen) {
    if (!dwrow_accepts(wl))
        return mt__fail(err, errlen, MT_UNSUPPORTED, "dwrow: only undilated depthwise layers with stride_w 1 or 2, kernels up to 7x7 and rows up to ~250");
    dwrow_plan p = {0};
    p.n = wl->n, p.c = wl->c, p.h = wl->h, p.w = wl->w, p.oh = mt_workload_out_h(wl), p.ow = mt_workload_out_w(wl);
    p.r = wl->r, p.s = wl->s, p.sh = wl->stride_h, p.sw = wl->stride_w, p.ph = wl->pad_h, p.pw = wl->pad_w;
    p.vec = mt_config_value(sp, cfg, "vec");
    p.yr = mt_config_value(sp, cfg, "reg_y");
    p.cb = mt_config_value(sp, cfg, "chan");
    p.epi = epi;
    if ((p.vec != 4 && p.vec != 8 && p.vec != 16) || p.yr < 1 || p.cb < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "dwrow: config does not match this workload's space");
    p.nvo = (p.ow + p.vec - 1) / p.vec;
    p.nvi = (p.w + p.vec - 1) / p.vec;
    p.nin = (p.yr - 1) * p.sh + p.r;
    p.co = (p.c + p.cb - 1) / p.cb;
    p.yo = (p.oh + p.yr - 1) / p.yr;
    const int64_t priv = ((int64_t)p.yr * p.nvo + p.nvi) * p.vec + (int64_t)p.r * p.s;
    if (priv > MT__DWROW_MAX_PRIVATE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "dwrow: %lld private floats per work-item (%d rows x %d vectors of %d, and a row of %d) exceed %d",
                        (long long)priv, p.yr, p.nvo, p.vec, p.nvi, MT__DWROW_MAX_PRIVATE_FLOATS);
    return dwrow_build_plan(&p, out, err, errlen);
}

const mt_template mt__template_dwrow = {
    /* .name    = */ "dwrow",
    /* .accepts = */ dwrow_accepts,
    /* .space   = */ dwrow_space,
    /* .build   = */ dwrow_build,
    /* .weights = */ MT_WEIGHTS_OIHW,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
