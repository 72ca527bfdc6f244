/* The `wino` template: Winograd F(m x m, 3 x 3) for 3x3 stride-1
 * convolutions (conv/winograd.h), in one kernel.
 *
 * Direct convolution does 9 multiply-adds per output and input channel;
 * F(m x m, 3 x 3) does alpha^2 / m^2 (alpha = m + 2): 4 at m = 2, 2.25 at
 * m = 4, 1.78 at m = 6. On a CPU whose direct kernels already run near the
 * FMA peak, fewer multiplications are the only way to go faster.
 *
 * A work-group owns a block of blk_y x blk_x register tiles, each of
 * reg_y x reg_x output tiles, of one image and a share (1 / split_k) of the
 * output channels, in groups of reg_k vectors of `vec` channels: one group
 * per work-item, or (k_loop) all groups in turn in one work-item. The
 * blocks take the image's tiles row-major, a block's worth at a time, so
 * only the image's last block overhangs, and by less than a block (blocks
 * of rows and columns computed a 7x7 grid of tiles as 8x8 with 2x4 register
 * tiles: F(2x2) on 14x14, F(4x4) on 28x28); register tiles wholly past the
 * image's last tile are skipped. So only the products reg_y x reg_x and
 * blk_y x blk_x matter; the knobs keep their names, which records carry.
 * With the padded V and the channel chunks below, inside the networks with
 * the tuned configs of 2026-12-04 (3 rounds in turns with blocks of rows
 * and columns, bench/net_ab/results/net_ab_wino_rowmajor_*.md): VGG-16
 * 1.06x (its 14x14 layers 1.27-1.36x, 28x28 1.10-1.19x, 56x56 1.10-1.12x),
 * ResNet-18's wino layers 1.08-1.16x, ResNet-50's 1.02-1.19x.
 * The kernel has three phases:
 *  1. input transform: the work-items share out the input channels and
 *     write V = B^T d B of every (channel, tile) into local memory, laid out
 *     [alpha^2][c][tile] so that phase 2 reads it in order. Each input tile
 *     is transformed once per work-group, so the transform's cost is shared
 *     by all the group's output channels (with split_k = 1, all of them);
 *  2. after a barrier (none with k_loop), alpha^2 independent matrix
 *     products, one per transformed position e: M_e[tile][k] =
 *     sum_c V_e[c][tile] U_e[c][k], for each register tile of the block
 *     in turn as kvec's register tile: (reg_y x reg_x) x reg_k vector
 *     accumulators, per input channel reg_k vector loads of transformed
 *     weights and reg_y x reg_x broadcasts of V from local memory. The
 *     weights, alpha^2 / 9 times the size of the direct ones, are read from
 *     memory once per work-group and from cache by its other register
 *     tiles: a block of one register tile read them once per 4-16 tiles,
 *     and on 512 channels (37 MB of F(4x4) weights) that bounded the
 *     kernel below kvec. Each channel's step prefetches the weights
 *     MT__WINO_PREFETCH_CHANNELS channels ahead. The channels are taken in
 *     chunks that stay in L1 (products_chunk), all register tiles passing
 *     over one chunk before the next. Each position's result goes to a
 *     private array M;
 *  3. output transform Y = A^T M A on vectors of channels, then stores: for
 *     each channel of a vector, each output row of a tile as vectors along
 *     the row (as kvec stores), with the fused epilogue.
 * The weights are read in a Winograd layout (mtgpu/workload.h: G g G^T per
 * filter, [k/16][alpha^2][c][16], so that one position's sum over the input
 * channels reads one contiguous run: with the channels outside, the run of
 * one position strode over all of them, and on 512 channels the 7x7 layers
 * ran 10x slower than direct kvec) that the executor computes once;
 * which of the three depends on the `tile` knob
 * (mt_template_config_weight_layout).
 *
 * Input tiles that cross the image border read 0 through a clamped address
 * and a select (kvec's reason: a conditional load becomes a branch on
 * PoCL). Outputs of a tile past the output's last row or column are
 * computed and not stored, as are slots of a register tile past the
 * image's last tile (they compute that tile again); channel vectors past
 * the weights' 16-padded channels read the last block instead and are not
 * stored.
 *
 * Knobs, in order:
 *   tile     {2,4,6}   output tile m (options past the output's size left out)
 *   vec      {4,8,16}  channels per vector
 *   reg_k    {1,2,4}   channel vectors per group (a work-item's or one turn of the loop)
 *   reg_y    {1,2,4}   with reg_x, output tiles per register tile: reg_y x reg_x
 *   reg_x    {1,2,3,4}
 *   split_k  {1,2,4}   work-groups sharing one tile block's output channels:
 *                      more work-groups, each input tile transformed that many times;
 *                      with k_loop, a share's tile blocks are consecutive work-groups
 *   unroll   {0,1}     phases 1 and 3 loop over a register tile's tiles and a vector's
 *                      channels (0) or replicate them (1: constant indices, up to
 *                      twice as fast on the 56x56 layer of ResNet-50, but large
 *                      blocks then pass the statement limit of mt_template_check)
 *   blk_y    {1,2,4}   with blk_x, register tiles per work-group: blk_y x blk_x
 *   blk_x    {1,2,4}
 *   k_loop   {0,1}     the channel groups of a work-group as work-items (0) or
 *                      as a loop in one work-item (1: no barrier; on PoCL's
 *                      CPU device 2.8x faster on the 28x28 256-channel layer)
 * Invalid: reg_y x reg_x x reg_k x vec accumulators over MT__WINO_MAX_ACC,
 * the private M over MT__WINO_MAX_M floats, a block whose first half of
 * register tiles already covers the output's tiles. Local memory (alpha^2 x
 * c x the block's tiles floats) is checked against the device by
 * mt_template_check. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"
#include "winograd.h"

/* Accumulators of phase 2 and the weight registers: AVX-512's 32 registers
 * hold 512 floats. */
#define MT__WINO_MAX_ACC 256
/* M: alpha^2 x (the block's tiles) x reg_k x vec floats per work-item,
 * 256 KiB: F(4x4) with 16 tiles and two vectors of 16 channels needs 72 KiB. */
#define MT__WINO_MAX_M 65536

static int wino_accepts(const mt_workload *wl) {
    return wl && wl->groups == 1 && wl->r == 3 && wl->s == 3 && wl->stride_h == 1 && wl->stride_w == 1 && wl->dil_h == 1 &&
           wl->dil_w == 1;
}

typedef struct wino_plan {
    int n, c, k, k16, h, w, oh, ow, ph, pw;
    int m, alpha, vec, kr, yr, xr, ko, kt;
    int by, bx;                /* blk_y, blk_x */
    int nrt;                   /* register tiles per work-group: by * bx */
    int ntr;                   /* tiles per register tile: yr * xr */
    int nt;                    /* tiles per work-group: ntr * by * bx */
    int k_loop;                /* the kt channel groups as a loop in one work-item instead of kt work-items */
    int unroll;                /* replicate the loops over tiles and channel lanes of phases 1 and 3 */
    int ty_n, tx_n;            /* tile rows and columns of the output */
    int tiles;                 /* ty_n * tx_n */
    int nb;                    /* work-groups per image and channel share: ceil(tiles / nt) */
    mt_winograd mat;
    const mt_conv_epilogue *epi;
} wino_plan;

/* Whether the image's last block has slots past its last tile. */
static int overhangs(const wino_plan *p) {
    return (int64_t)p->nb * p->nt > p->tiles;
}

static mt_status wino_space(const mt_workload *wl, mt_space *out) {
    if (!wino_accepts(wl) || !out) return MT_UNSUPPORTED;
    const int oh = mt_workload_out_h(wl), ow = mt_workload_out_w(wl), k16 = (wl->k + 15) / 16 * 16;
    const int small = oh < ow ? oh : ow;
    const mt__enum_knob knobs[] = {
        {"tile", MT__OPTIONS(2, 4, 6), small > 2 ? small : 2},
        {"vec", MT__OPTIONS(4, 8, 16), k16},
        {"reg_k", MT__OPTIONS(1, 2, 4), k16 / 4},
        {"reg_y", MT__OPTIONS(1, 2, 4), (oh + 1) / 2},
        {"reg_x", MT__OPTIONS(1, 2, 3, 4), (ow + 1) / 2},
        {"split_k", MT__OPTIONS(1, 2, 4), k16 / 4},
        {"unroll", MT__OPTIONS(0, 1), INT_MAX},
        {"blk_y", MT__OPTIONS(1, 2, 4), (oh + 1) / 2},
        {"blk_x", MT__OPTIONS(1, 2, 4), (ow + 1) / 2},
        {"k_loop", MT__OPTIONS(0, 1), INT_MAX},
    };
    mt_space_init(out, "wino");
    mt_status st = mt__space_add_enums(out, knobs, (int)(sizeof knobs / sizeof knobs[0]));
    if (st != MT_OK) mt_space_free(out);
    return st;
}

static mt_weight_layout wino_weights_for(const mt_space *sp, const mt_config *cfg) {
    return mt_winograd_layout(mt_config_value(sp, cfg, "tile"));
}

/* How many input channels ahead phase 2 prefetches each block's
 * transformed weights (one cache line per channel), past the position's
 * last channel into the next position's, which the loop reads next. Inside
 * VGG-16, with its tuned configs, the layers at 28x28 (F(4x4) weights
 * 19-38 MB, read once per work-group) ran 1.23-1.26x as fast with it and
 * its 56x56 ones 1.08-1.12x; ResNet-50's 28x28 ones 1.16-1.21x
 * (bench/net_ab/results/net_ab_weight_prefetch_*.md). In a sweep of the
 * distance inside the networks (3 rounds, in turns) 64 channels did as well
 * on VGG-16 and 8 less well; on ResNet-50's 28x28 layers 32 beat 64.
 * With channel chunks (products_chunk), prefetching the next chunk's
 * weights in every pass over a chunk, so that memory streams while the
 * other register tiles reuse the chunk from L1, made ResNet-50's 14x14
 * F(4x4) layers no faster (0.98-1.11x their time; 3 rounds in turns, not kept). */
#define MT__WINO_PREFETCH_CHANNELS 32

/* Floats between two transformed positions of V in local memory past the
 * c x nt they hold. c x nt floats is a multiple of 4 KiB whenever nt is 64
 * or more (c a multiple of 16), and then phase 1's alpha^2 stores of one
 * (channel, tiles) all fall in one set of the 12-way L1 data cache. One
 * cache line more per position puts each in the next set. Sampled inside
 * ResNet-50 (perf, cpu-clock) phase 1 of its 14x14 F(2x2) kernel took 18%
 * of the samples before and 15% after; the layer's time moved within
 * noise (1.01x, 3 rounds in turns). */
#define MT__WINO_V_PAD 16

static int64_t wino_v_stride(const wino_plan *p) {
    return (int64_t)p->c * p->nt + MT__WINO_V_PAD;
}

/* ---- IR building ---- */

typedef struct wino_builder {
    mt_kernel *k;
    const wino_plan *p;
    mt__conv_io io;
    mt_buffer *vloc;          /* LOCAL [alpha^2][c][nt], positions wino_v_stride apart */
    mt_buffer *d, *t;         /* PRIVATE alpha^2: the input tile, B^T d */
    mt_buffer *acc, *wreg, *mbuf, *tbuf, *ybuf;
    mt_expr *img, *t0, *k0;    /* t0: the block's first tile, row-major over the image's tiles */
    mt_expr *tid;             /* the work-item, one of nthreads sharing phase 1 */
    int nthreads;
    mt_expr *wbase[4];
} wino_builder;

#define KI(b, v) mt_ir_int((b)->k, (v))

/* sum_i coef[i] * x[i], skipping zero coefficients; +-1 as additions. NULL
 * terms never occur: every row of the matrices has a non-zero entry. */
static mt_expr *lincomb(mt_kernel *k, const double *coef, mt_expr *const *x, int n, int lanes) {
    mt_expr *acc = NULL;
    for (int i = 0; i < n; i++) {
        const double c = coef[i];
        if (c == 0.0) continue;
        if (!acc) {
            acc = c == 1.0 ? x[i] : mt_ir_mul(k, x[i], lanes > 1 ? mt_ir_broadcast(k, mt_ir_float(k, (float)c), lanes) : mt_ir_float(k, (float)c));
        } else if (c == 1.0) {
            acc = mt_ir_add(k, acc, x[i]);
        } else if (c == -1.0) {
            acc = mt_ir_sub(k, acc, x[i]);
        } else {
            mt_expr *cf = mt_ir_float(k, (float)c);
            acc = mt_ir_fma(k, lanes > 1 ? mt_ir_broadcast(k, cf, lanes) : cf, x[i], acc);
        }
    }
    return acc ? acc : (lanes > 1 ? mt_ir_broadcast(k, mt_ir_float(k, 0.0f), lanes) : mt_ir_float(k, 0.0f));
}

/* Phase 1 for input channel c and tile `tile` = (y, x) of the block: d,
 * then t = B^T d, then V = t B straight into local memory. */
static mt_stmt *input_transform(wino_builder *b, mt_expr *c, mt_expr *tile, mt_expr *y, mt_expr *x) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    const int a = p->alpha;
    mt_stmt_list list = {0};
    mt_expr *plane = mt_ir_add(k, mt_ir_mul(k, b->img, KI(b, (int64_t)p->c * p->h * p->w)), mt_ir_mul(k, c, KI(b, (int64_t)p->h * p->w)));
    mt_expr *iy0 = mt_ir_add(k, mt_ir_mul(k, y, KI(b, p->m)), KI(b, -p->ph));
    mt_expr *ix0 = mt_ir_add(k, mt_ir_mul(k, x, KI(b, p->m)), KI(b, -p->pw));
    /* Which sides a read can leave the image on. */
    const int y_lo = p->ph > 0, y_hi = (int64_t)(p->ty_n - 1) * p->m - p->ph + a - 1 >= p->h;
    const int x_lo = p->pw > 0, x_hi = (int64_t)(p->tx_n - 1) * p->m - p->pw + a - 1 >= p->w;
    mt_expr *conds[MT_WINO_MAX_ALPHA * MT_WINO_MAX_ALPHA];
    for (int i = 0; i < a; i++) {
        mt_expr *iy = mt_ir_add(k, iy0, KI(b, i));
        mt_expr *yc = mt__range_cond(k, iy, 0, p->h, y_lo, y_hi);
        for (int j = 0; j < a; j++) {
            mt_expr *ix = mt_ir_add(k, ix0, KI(b, j));
            mt_expr *cond = mt_ir_and(k, yc, mt__range_cond(k, ix, 0, p->w, x_lo, x_hi));
            mt_expr *idx = mt_ir_add(k, plane, mt_ir_add(k, mt_ir_mul(k, iy, KI(b, p->w)), ix));
            if (cond) idx = mt_ir_select(k, cond, idx, plane);
            mt_stmt_list_push(k, &list, mt_ir_store(k, b->d, KI(b, i * a + j), mt_ir_load(k, b->io.in, idx)));
            conds[i * a + j] = cond;
        }
    }
    mt_expr *dv[MT_WINO_MAX_ALPHA * MT_WINO_MAX_ALPHA];
    for (int e = 0; e < a * a; e++) {
        dv[e] = mt_ir_load(k, b->d, KI(b, e));
        if (conds[e]) dv[e] = mt_ir_select(k, conds[e], dv[e], mt_ir_float(k, 0.0f));
    }
    /* t[i][j] = sum_r BT[i][r] d[r][j] */
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) {
            mt_expr *col[MT_WINO_MAX_ALPHA];
            for (int r = 0; r < a; r++) col[r] = dv[r * a + j];
            mt_stmt_list_push(k, &list, mt_ir_store(k, b->t, KI(b, i * a + j), lincomb(k, p->mat.bt[i], col, a, 1)));
        }
    /* V[i][j] = sum_s t[i][s] BT[j][s], to vloc[(i*a + j) * wino_v_stride + ch * nt + tile] */
    mt_expr *vbase = mt_ir_add(k, mt_ir_mul(k, c, KI(b, p->nt)), tile);
    for (int i = 0; i < a; i++) {
        mt_expr *row[MT_WINO_MAX_ALPHA];
        for (int s = 0; s < a; s++) row[s] = mt_ir_load(k, b->t, KI(b, i * a + s));
        for (int j = 0; j < a; j++) {
            mt_expr *idx = mt_ir_add(k, vbase, KI(b, (int64_t)(i * a + j) * wino_v_stride(p)));
            mt_stmt_list_push(k, &list, mt_ir_store(k, b->vloc, idx, lincomb(k, p->mat.bt[j], row, a, 1)));
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* A tile of the work-group's block by its slot: register tile sb, tile r
 * in it. The blocks take the image's tiles row-major, nt at a time, so
 * that only the last block of an image overhangs, and by less than nt
 * tiles (with blocks of rows and columns, a 7x7 grid of tiles in blocks of
 * 2x4 computed 64 tiles); *t is the tile's number, *y and *x its row and
 * column, those of the image's last tile for slots past it. Slots number
 * the tiles register tile by register tile, so that phase 2 reads one
 * register tile's transformed inputs from consecutive addresses. */
static mt_expr *tile_slot(wino_builder *b, mt_expr *sb, mt_expr *r, mt_expr **t, mt_expr **y, mt_expr **x) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *slot = mt_ir_add(k, mt_ir_mul(k, sb, KI(b, p->ntr)), r);
    *t = mt_ir_add(k, b->t0, slot);
    mt_expr *tc = overhangs(p) ? mt_ir_min(k, *t, KI(b, p->tiles - 1)) : *t;
    *y = mt_ir_div(k, tc, KI(b, p->tx_n));
    *x = mt_ir_mod(k, tc, KI(b, p->tx_n));
    return slot;
}

/* Whether register tile sb of the block holds a tile of the image (NULL:
 * every one does). Phases 1 and 2 skip those that do not. */
static mt_expr *register_tile_real(wino_builder *b, mt_expr *sb) {
    const wino_plan *p = b->p;
    if (!overhangs(p) || (int64_t)(p->nb - 1) * p->nt + (int64_t)(p->nrt - 1) * p->ntr < p->tiles) return NULL;
    return mt_ir_lt(b->k, mt_ir_add(b->k, b->t0, mt_ir_mul(b->k, sb, KI(b, p->ntr))), KI(b, p->tiles));
}

/* Phase 1: work-item tk transforms channels tk, tk + kt, ... */
static mt_stmt *phase_transform(wino_builder *b) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    const int64_t rounds = (p->c + b->nthreads - 1) / b->nthreads;
    mt__opt_loop lc;
    mt_expr *cc = mt__loop_begin(k, &lc, "cc", rounds, MT_LOOP_SERIAL);
    mt_var *cv = mt_ir_var(k, "ci", MT_TYPE_INT);
    mt_expr *c = mt_ir_v(k, cv);
    /* The block's register tiles as a loop, the tiles of one as a loop
     * replicated when `unroll` is set. */
    mt__opt_loop ls, lt;
    mt_expr *sb = mt__loop_begin(k, &ls, "sb", p->nrt, MT_LOOP_SERIAL);
    mt_expr *r = mt__loop_begin(k, &lt, "tile", p->ntr, p->unroll ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    mt_expr *t, *y, *x;
    mt_expr *slot = tile_slot(b, sb, r, &t, &y, &x);
    mt_stmt *tiles = mt__loop_end(k, &lt, input_transform(b, c, slot, y, x));
    mt_expr *real = register_tile_real(b, sb);
    if (real) tiles = mt_ir_if(k, real, tiles, NULL);
    mt_stmt *body = mt__loop_end(k, &ls, tiles);
    body = mt_ir_alloc(k, b->d, mt_ir_alloc(k, b->t, body));
    if (rounds * b->nthreads > p->c) body = mt_ir_if(k, mt_ir_lt(k, c, KI(b, p->c)), body, NULL);
    body = mt_ir_let(k, cv, mt_ir_add(k, mt_ir_mul(k, cc, KI(b, b->nthreads)), b->tid), body);
    return mt__loop_end(k, &lc, body);
}

/* Input channels per pass of phase 2 over the block's register tiles.
 * Each register tile reads, per channel, the position's weights for its
 * channel groups (reg_k x vec floats) and its tiles' transformed inputs
 * from a row of nt; over all c channels that is more than the L1 data
 * cache holds once the block or the channel group is large (48 KiB for
 * F(2x2) on 14x14 with 64 tiles and two vectors of 16), and each register
 * tile then re-read both from L2. In chunks of channels whose weights and
 * transformed inputs fit in MT__WINO_CHUNK_BYTES, all register tiles pass
 * over one chunk before the next, carrying their sums in M. The chunk
 * divides c (a divisor at most the bound; c itself when it fits). Inside
 * ResNet-50, in turns with no chunks (3 rounds, 2026-12-04): its 14x14
 * F(2x2) layers in blocks of 64 tiles 1.08-1.11x as fast, the 28x28 and
 * 56x56 ones 0.98-1.04x; chunks of 12 KiB did less well (1.03-1.11x). */
#define MT__WINO_CHUNK_BYTES (24 * 1024)
#define MT__WINO_MIN_CHUNK 16

static int products_chunk(const wino_plan *p) {
    const int64_t per_channel = ((int64_t)p->kr * p->vec + p->nt) * 4;
    if (p->nrt == 1) return p->c;
    int best = 1;
    for (int d = 1; d <= p->c; d++)
        if (p->c % d == 0 && (int64_t)d * per_channel <= MT__WINO_CHUNK_BYTES) best = d;
    /* Chunks of a few channels (c prime, say) would pass the sums through
     * M more often than they save reads. */
    return best >= MT__WINO_MIN_CHUNK ? best : p->c;
}

/* Phase 2: for each transformed position e and each register tile of the
 * block, the ntr x reg_k register tile summed over the input channels, then
 * copied to M[e]. With e outside, one position's transformed weights for
 * this work-item's channels (c x reg_k vectors) are read by every register
 * tile of the block while they are still in cache: a block of many tiles
 * reads the weights from memory once for all of them. */
static mt_stmt *phase_products(wino_builder *b) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    const int a2 = p->alpha * p->alpha, vec = p->vec;
    const int64_t nacc = (int64_t)p->ntr * p->kr * vec, mrow_len = (int64_t)p->nt * p->kr * vec;
    const int chunk = products_chunk(p), nchunks = p->c / chunk;
    mt_var *ev = mt_ir_var(k, "e", MT_TYPE_INT);
    mt_var *cv = mt_ir_var(k, "c", MT_TYPE_INT);
    mt_expr *e = mt_ir_v(k, ev);
    mt__opt_loop lch, ls;
    mt_expr *cch = nchunks > 1 ? mt__loop_begin(k, &lch, "cch", nchunks, MT_LOOP_SERIAL) : NULL;
    mt_expr *sb = mt__loop_begin(k, &ls, "sb", p->nrt, MT_LOOP_SERIAL);
    mt_expr *c = mt_ir_v(k, cv);
    if (cch) c = mt_ir_add(k, mt_ir_mul(k, cch, KI(b, chunk)), c);
    mt_stmt_list inner = {0};
    mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, e, KI(b, p->c)), c), KI(b, 16));
    for (int j = 0; j < p->kr; j++)
        mt_stmt_list_push(k, &inner, mt_ir_store_vec(k, b->wreg, KI(b, (int64_t)j * vec), mt_ir_load_vec(k, b->io.wt, mt_ir_add(k, b->wbase[j], woff), vec)));
    for (int j = 0; j < p->kr; j += mt__vectors_per_weight_line(vec))
        mt_stmt_list_push(k, &inner, mt_ir_prefetch(k, b->io.wt, mt_ir_add(k, mt_ir_add(k, b->wbase[j], woff), KI(b, MT__WINO_PREFETCH_CHANNELS * 16))));
    mt_expr *vrow = mt_ir_add(k, mt_ir_add(k, mt_ir_mul(k, e, KI(b, wino_v_stride(p))), mt_ir_mul(k, c, KI(b, p->nt))), mt_ir_mul(k, sb, KI(b, p->ntr)));
    for (int x = 0; x < p->ntr; x++) {
        mt_expr *bv = mt_ir_broadcast(k, mt_ir_load(k, b->vloc, mt_ir_add(k, vrow, KI(b, x))), vec);
        for (int j = 0; j < p->kr; j++) {
            mt_expr *ai = KI(b, ((int64_t)x * p->kr + j) * vec);
            mt_expr *wv = mt_ir_load_vec(k, b->wreg, KI(b, (int64_t)j * vec), vec);
            mt_stmt_list_push(k, &inner, mt_ir_store_vec(k, b->acc, ai, mt_ir_fma(k, bv, wv, mt_ir_load_vec(k, b->acc, ai, vec))));
        }
    }
    mt_stmt *cloop = mt_ir_for(k, cv, chunk, MT_LOOP_SERIAL, 0, mt_ir_alloc(k, b->wreg, mt_stmt_list_seq(k, &inner)));
    mt_stmt_list copy = {0}, reload = {0};
    mt_expr *mrow = mt_ir_add(k, mt_ir_mul(k, e, KI(b, mrow_len)), mt_ir_mul(k, sb, KI(b, nacc)));
    for (int64_t i = 0; i < nacc; i += vec) {
        mt_stmt_list_push(k, &copy, mt_ir_store_vec(k, b->mbuf, mt_ir_add(k, mrow, KI(b, i)), mt_ir_load_vec(k, b->acc, KI(b, i), vec)));
        mt_stmt_list_push(k, &reload, mt_ir_store_vec(k, b->acc, KI(b, i), mt_ir_load_vec(k, b->mbuf, mt_ir_add(k, mrow, KI(b, i)), vec)));
    }
    /* With chunks the sums go on from where the last chunk left them in M. */
    mt_stmt *init = mt__zero_fill(k, b->acc, nacc, vec);
    if (cch) init = mt_ir_if(k, mt_ir_lt(k, cch, KI(b, 1)), init, mt_stmt_list_seq(k, &reload));
    mt_stmt *body = mt_ir_seq2(k, mt_ir_seq2(k, init, cloop), mt_stmt_list_seq(k, &copy));
    mt_expr *real = register_tile_real(b, sb);
    if (real) body = mt_ir_if(k, real, body, NULL);
    body = mt__loop_end(k, &ls, mt_ir_alloc(k, b->acc, body));
    if (cch) body = mt__loop_end(k, &lch, body);
    return mt_ir_for(k, ev, a2, MT_LOOP_SERIAL, 0, body);
}

/* Phase 3 for tile `tile` = (y, x) and channel vector j: Y = A^T M A into
 * ybuf ([m*m][vec]), then the stores, a loop over the vector's channels. */
static mt_stmt *output_tile(wino_builder *b, mt_expr *tile, mt_expr *t, mt_expr *y, mt_expr *x, int j) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    const int a = p->alpha, m = p->m, vec = p->vec;
    const int64_t nacc = (int64_t)p->nt * p->kr * vec;
    mt_expr *off = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, tile, KI(b, p->kr)), KI(b, j)), KI(b, vec));
    mt_stmt_list list = {0};
    /* T[i][s] = sum_r AT[i][r] M[r][s] (m x alpha vectors) */
    for (int i = 0; i < m; i++)
        for (int s = 0; s < a; s++) {
            mt_expr *col[MT_WINO_MAX_ALPHA];
            for (int r = 0; r < a; r++) col[r] = mt_ir_load_vec(k, b->mbuf, mt_ir_add(k, off, KI(b, (int64_t)(r * a + s) * nacc)), vec);
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->tbuf, KI(b, (int64_t)(i * a + s) * vec), lincomb(k, p->mat.at[i], col, a, vec)));
        }
    /* Y[i][jj] = sum_s T[i][s] AT[jj][s] */
    for (int i = 0; i < m; i++) {
        mt_expr *row[MT_WINO_MAX_ALPHA];
        for (int s = 0; s < a; s++) row[s] = mt_ir_load_vec(k, b->tbuf, KI(b, (int64_t)(i * a + s) * vec), vec);
        for (int jj = 0; jj < m; jj++)
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->ybuf, KI(b, (int64_t)(i * m + jj) * vec), lincomb(k, p->mat.at[jj], row, a, vec)));
    }
    /* Stores: channel by channel, row by row; a row of m columns as vectors
     * (chunks of 4 and 2) where the tile lies inside the output, else
     * column by column. */
    static const int chunk[] = {4, 2, 1};
    const int64_t plane = (int64_t)p->oh * p->ow;
    mt_expr *oy0 = mt_ir_mul(k, y, KI(b, m));
    mt_expr *ox0 = mt_ir_mul(k, x, KI(b, m));
    const int x_over = (int64_t)p->tx_n * m > p->ow, y_over = (int64_t)p->ty_n * m > p->oh;
    const int k_over = (int64_t)p->ko * p->kt * p->kr * vec > p->k;
    mt_expr *full = x_over ? mt_ir_lt(k, ox0, KI(b, (int64_t)p->ow - m + 1)) : NULL;
    mt_expr *obase = mt_ir_mul(k, b->img, KI(b, (int64_t)p->k * plane));
    mt_var *lv = mt_ir_var(k, "lane", MT_TYPE_INT);
    mt_expr *l = mt_ir_v(k, lv);
    {
        mt_expr *ch = mt_ir_add(k, mt_ir_add(k, b->k0, KI(b, (int64_t)j * vec)), l);
        mt_stmt_list rows = {0};
        for (int i = 0; i < m; i++) {
            mt_expr *oy = mt_ir_add(k, oy0, KI(b, i));
            mt_expr *first = mt_ir_add(k, mt_ir_add(k, obase, mt_ir_mul(k, ch, KI(b, plane))), mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), ox0));
            mt_stmt_list vecs = {0}, cols = {0};
            for (int x0 = 0, ci = 0; x0 < m; x0 += chunk[ci]) {
                while (chunk[ci] > m - x0) ci++;
                const int n = chunk[ci];
                mt_expr *ya = mt_ir_add(k, KI(b, (int64_t)(i * m + x0) * vec), l);
                mt_expr *v = mt_ir_load(k, b->ybuf, n == 1 ? ya : mt_ir_ramp(k, ya, vec, n));
                mt_expr *idx = mt_ir_add(k, first, KI(b, x0));
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, v, ch, idx, n);
                mt_stmt_list_push(k, &vecs, n == 1 ? mt_ir_store(k, b->io.out, idx, val) : mt_ir_store_vec(k, b->io.out, idx, val));
            }
            mt_stmt *row = mt_stmt_list_seq(k, &vecs);
            if (x_over) {
                for (int jj = 0; jj < m; jj++) {
                    mt_expr *idx = mt_ir_add(k, first, KI(b, jj));
                    mt_expr *val = mt__epilogue_apply(k, &b->io.epi, mt_ir_load(k, b->ybuf, mt_ir_add(k, KI(b, (int64_t)(i * m + jj) * vec), l)), ch, idx, 1);
                    mt_expr *inside = mt_ir_lt(k, mt_ir_add(k, ox0, KI(b, jj)), KI(b, p->ow));
                    mt_stmt_list_push(k, &cols, mt_ir_if(k, inside, mt_ir_store(k, b->io.out, idx, val), NULL));
                }
                row = mt_ir_if(k, full, row, mt_stmt_list_seq(k, &cols));
            }
            if (y_over) row = mt_ir_if(k, mt_ir_lt(k, oy, KI(b, p->oh)), row, NULL);
            mt_stmt_list_push(k, &rows, row);
        }
        mt_stmt *st = mt_stmt_list_seq(k, &rows);
        if (k_over) st = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->k)), st, NULL);
        if (overhangs(p)) st = mt_ir_if(k, mt_ir_lt(k, t, KI(b, p->tiles)), st, NULL);
        mt_stmt_list_push(k, &list, mt_ir_for(k, lv, vec, p->unroll ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL, 0, st));
    }
    return mt_stmt_list_seq(k, &list);
}

static mt_stmt *phase_outputs(wino_builder *b) {
    const wino_plan *p = b->p;
    mt_kernel *k = b->k;
    mt__opt_loop ls, lt;
    mt_expr *sb = mt__loop_begin(k, &ls, "osb", p->nrt, MT_LOOP_SERIAL);
    mt_expr *r = mt__loop_begin(k, &lt, "otile", p->ntr, p->unroll ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    mt_expr *t, *y, *x;
    mt_expr *slot = tile_slot(b, sb, r, &t, &y, &x);
    mt_stmt_list list = {0};
    for (int j = 0; j < p->kr; j++) mt_stmt_list_push(k, &list, output_tile(b, slot, t, y, x, j));
    mt_stmt *body = mt__loop_end(k, &ls, mt__loop_end(k, &lt, mt_stmt_list_seq(k, &list)));
    return mt_ir_alloc(k, b->tbuf, mt_ir_alloc(k, b->ybuf, body));
}

static mt_status wino_build_plan(const wino_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_wino");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "wino: out of memory");
    wino_builder bb = {.k = k, .p = p};
    wino_builder *b = &bb;
    const int a = p->alpha, a2 = a * a, vec = p->vec;
    const int64_t nacc = (int64_t)p->ntr * p->kr * vec;
    mt__conv_io_params(k, &b->io, (int64_t)p->n * p->c * p->h * p->w, (int64_t)p->k16 * p->c * a2, (int64_t)p->n * p->k * p->oh * p->ow, p->k,
                       p->epi);
    b->vloc = mt_ir_buffer(k, "vt", MT_SCOPE_LOCAL, (int64_t)a2 * wino_v_stride(p));
    b->d = mt_ir_buffer(k, "d", MT_SCOPE_PRIVATE, a2);
    b->t = mt_ir_buffer(k, "bd", MT_SCOPE_PRIVATE, a2);
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, nacc);
    b->wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, (int64_t)p->kr * vec);
    b->mbuf = mt_ir_buffer(k, "mt", MT_SCOPE_PRIVATE, (int64_t)a2 * p->nt * p->kr * vec);
    b->tbuf = mt_ir_buffer(k, "at_m", MT_SCOPE_PRIVATE, (int64_t)p->m * a * vec);
    b->ybuf = mt_ir_buffer(k, "y", MT_SCOPE_PRIVATE, (int64_t)p->m * p->m * vec);

    /* Launch: axis 0 channel shares (split_k) and their work-items, axis 1
     * of extent 1, axis 2 (image, block of tiles). With
     * k_loop the share's kt channel groups are a loop in one work-item and
     * the kernel has no barrier: PoCL's CPU compiler puts the work-item loop
     * inside every innermost loop of a kernel with barriers, and phase 2's
     * accumulators then lived in memory (2-4x slower on 28x28 layers). */
    b->nthreads = p->k_loop ? 1 : p->kt;
    mt__opt_loop g[3], it, kg;
    mt_expr *bk = mt__loop_begin(k, &g[0], "bk", p->ko, MT_LOOP_BLOCK);
    mt__loop_begin(k, &g[1], "bx", 1, MT_LOOP_BLOCK);
    mt_expr *bz = mt__loop_begin(k, &g[2], "bz", (int64_t)p->n * p->nb, MT_LOOP_BLOCK);
    b->tid = mt__loop_begin(k, &it, "tk", b->nthreads, MT_LOOP_THREAD);
    for (int i = 0; i < 3; i++) g[i].axis = i;
    it.axis = 0;
    /* With one work-item per group (k_loop) and the channels split over
     * work-groups, the image's tile blocks go first (axis 0): PoCL hands
     * out consecutive work-groups together, which then read one share of
     * the transformed weights while it is in cache, instead of each block
     * reading every share from memory (VGG-16's 512-channel 28x28 layers:
     * 37.7 MB of F(4x4) weights, 7 blocks of 8 tiles). Inside VGG-16 on a
     * Zen 4, with four shares, 5 rounds in turns with the build before
     * (bench/net_ab/results/net_ab_zen4_wino_tiles_first_split4_vgg16.md):
     * those layers 1.21x as fast against the drift (8.50 -> 6.99 ms), and
     * 0.86-0.89x the time of one share (bench/config_ab/results/
     * zen4_vgg16_512_28x28_split_tiles_first.md). Not a default: with every
     * other layer at its default config, four shares ran those layers no
     * faster than one (1.01x against the drift, net_ab_zen4_wino_split_tiles_first_vgg16.md);
     * the tuner and the refinement's whole-pass check find it where it pays. */
    if (b->nthreads == 1 && p->ko > 1 && (int64_t)p->n * p->nb > 1) g[0].axis = 2, g[2].axis = 0;

    mt__let_chain l = {0};
    b->img = mt__let_bind(k, &l, "img", mt_ir_div(k, bz, KI(b, p->nb)));
    b->t0 = mt__let_bind(k, &l, "t0", mt_ir_mul(k, mt_ir_mod(k, bz, KI(b, p->nb)), KI(b, p->nt)));
    mt_stmt *transform = phase_transform(b);
    if (b->nthreads > 1) transform = mt_ir_seq2(k, transform, mt_ir_barrier(k));
    mt_expr *tk = p->k_loop ? mt__loop_begin(k, &kg, "kg", p->kt, MT_LOOP_SERIAL) : b->tid;
    mt__let_chain lk = {0};
    b->k0 = mt__let_bind(k, &lk, "k0", mt_ir_add(k, mt_ir_mul(k, bk, KI(b, (int64_t)p->kt * p->kr * vec)), mt_ir_mul(k, tk, KI(b, (int64_t)p->kr * vec))));
    const int64_t block_stride = (int64_t)p->c * a2 * 16;
    for (int j = 0; j < p->kr; j++) {
        mt_expr *first = mt_ir_add(k, b->k0, KI(b, (int64_t)j * vec));
        if ((int64_t)p->ko * p->kt * p->kr * vec > p->k16) first = mt_ir_min(k, first, KI(b, p->k16 - vec));
        char name[16];
        snprintf(name, sizeof name, "wb%d", j);
        b->wbase[j] = mt__let_bind(k, &lk, name, mt_ir_add(k, mt_ir_mul(k, mt_ir_div(k, first, KI(b, 16)), KI(b, block_stride)), mt_ir_mod(k, first, KI(b, 16))));
    }
    mt_stmt *group = mt__let_wrap(k, &lk, mt_ir_alloc(k, b->mbuf, mt_ir_seq2(k, phase_products(b), phase_outputs(b))));
    if (p->k_loop) group = mt__loop_end(k, &kg, group);
    mt_stmt *work = mt_ir_seq2(k, transform, group);
    mt_stmt *body = mt__let_wrap(k, &l, mt_ir_alloc(k, b->vloc, work));
    body = mt__loop_end(k, &it, body);
    for (int i = 2; i >= 0; i--) body = mt__loop_end(k, &g[i], body);
    const mt__rt_plan rp = {.unroll_explicit = 1}; /* the printer replicates the UNROLLED loops */
    return mt__rt_finish(k, body, &rp, 0, "wino", out, err, errlen);
}

static mt_status wino_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                            char *err, size_t errlen) {
    if (!wino_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "wino: only 3x3 stride-1 undilated dense convolutions");
    wino_plan p = {0};
    p.n = wl->n, p.c = wl->c, p.k = wl->k, p.k16 = (wl->k + 15) / 16 * 16, p.h = wl->h, p.w = wl->w;
    p.oh = mt_workload_out_h(wl), p.ow = mt_workload_out_w(wl), p.ph = wl->pad_h, p.pw = wl->pad_w;
    p.m = mt_config_value(sp, cfg, "tile");
    p.vec = mt_config_value(sp, cfg, "vec");
    p.kr = mt_config_value(sp, cfg, "reg_k");
    p.yr = mt_config_value(sp, cfg, "reg_y");
    p.xr = mt_config_value(sp, cfg, "reg_x");
    p.ko = mt_config_value(sp, cfg, "split_k");
    p.unroll = mt_config_value(sp, cfg, "unroll");
    p.k_loop = mt_config_value(sp, cfg, "k_loop");
    p.by = mt_config_value(sp, cfg, "blk_y");
    p.bx = mt_config_value(sp, cfg, "blk_x");
    p.epi = epi;
    if (mt_winograd_init(&p.mat, p.m) != MT_OK || p.vec < 1 || 16 % p.vec || p.kr < 1 || p.kr > 4 || p.yr < 1 || p.xr < 1 || p.ko < 1 || p.unroll < 0 || p.by < 1 || p.bx < 1 || p.k_loop < 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "wino: config does not match this workload's space");
    p.alpha = p.m + 2;
    const int64_t per_item = (int64_t)p.kr * p.vec;
    if (per_item > p.k16) return mt__fail(err, errlen, MT_INVALID_CONFIG, "wino: %d channel vectors of %d exceed the %d channels (padded to 16)", p.kr, p.vec, p.k16);
    const int64_t items = (p.k + per_item - 1) / per_item;
    if (p.ko > items) return mt__fail(err, errlen, MT_INVALID_CONFIG, "wino: split_k %d over %lld channel vectors", p.ko, (long long)items);
    p.kt = (int)((items + p.ko - 1) / p.ko);
    p.ty_n = (p.oh + p.m - 1) / p.m;
    p.tx_n = (p.ow + p.m - 1) / p.m;
    p.ntr = p.yr * p.xr;
    p.nrt = p.by * p.bx;
    p.nt = p.ntr * p.nrt;
    p.tiles = p.ty_n * p.tx_n;
    p.nb = (p.tiles + p.nt - 1) / p.nt;
    /* A block whose first half of register tiles already covers the
     * image's tiles does the work of a smaller one (the rest are skipped). */
    const int64_t needed = (p.tiles + p.ntr - 1) / p.ntr;
    if (p.nrt / 2 >= needed)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "wino: %dx%d register tiles of %dx%d tiles: %lld of them cover the output's %dx%d tiles",
                        p.by, p.bx, p.yr, p.xr, (long long)needed, p.ty_n, p.tx_n);
    const int64_t nacc = (int64_t)p.ntr * per_item;
    if (nacc > MT__WINO_MAX_ACC)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "wino: %lld accumulators per work-item (%dx%d tiles x %d vectors of %d) exceed %d",
                        (long long)nacc, p.yr, p.xr, p.kr, p.vec, MT__WINO_MAX_ACC);
    const int64_t mlen = (int64_t)p.alpha * p.alpha * p.nt * per_item;
    if (mlen > MT__WINO_MAX_M)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "wino: %lld transformed outputs per work-item exceed %d", (long long)mlen, MT__WINO_MAX_M);
    return wino_build_plan(&p, out, err, errlen);
}

const mt_template mt__template_wino = {
    /* .name    = */ "wino",
    /* .accepts = */ wino_accepts,
    /* .space   = */ wino_space,
    /* .build   = */ wino_build,
    /* .weights = */ MT_WEIGHTS_WINO4,
    /* .weights_for = */ wino_weights_for,
    /* .weights_all = */ (1u << MT_WEIGHTS_WINO2) | (1u << MT_WEIGHTS_WINO4) | (1u << MT_WEIGHTS_WINO6),
};
