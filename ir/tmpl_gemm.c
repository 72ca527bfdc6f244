/* The `gemm` template: convolution as an implicit GEMM, register-tiled for
 * CPUs running OpenCL (PoCL) and usable on GPUs.
 *
 * Per batch image and group the convolution is a matrix product
 *     out[k][p] = sum over (c, r, s) of w[k][c][r][s] * in[c][iy(p, r)][ix(p, s)]
 * with M = k/groups output channels, N = the output pixels and the reduction
 * over (c/groups) x r x s. Pixels are tiled as rows x columns (oy, ox) so that
 * a vector of `vec` pixels always lies in one output row: with stride_w == 1
 * its input pixels are contiguous (one vloadN), otherwise they are gathered.
 * A 1x1 convolution with stride 1 and no padding reads input[c][p] with p
 * running over all oh*ow pixels, so it is treated as an image of one row of
 * oh*ow pixels ("flattened") and vectors cross output rows freely.
 *
 * Each work-item keeps a private accumulator tile of
 *     reg_k (channels) x reg_y (rows) x reg_x (columns)
 * outputs. Per reduction step (one input channel c, one kernel tap r, s) it
 * loads its input row pieces into a private register buffer (vectors of
 * `vec` lanes), its reg_k weights into another (scalars, broadcast), and
 * does the outer product with vector FMAs; at the end it stores its tile once.
 * This is the shape that runs well on PoCL: few, wide work-items whose
 * accumulators stay in SIMD registers (~12 float8 vectors on AVX2).
 *
 * Reduction order: c_outer > c_inner > r > s (the taps innermost, so that
 * the weights of one channel, w[k][c][0..r-1][0..s-1], are read contiguously).
 * Without local staging one test, hoisted above the whole reduction, says
 * whether every tap of every pixel of the work-item's tile reads inside the
 * unpadded input; if so the reduction runs with plain vector loads, else with
 * a per-vector test that falls back to per-lane loads reading zero outside
 * the input (padding, and tiles overhanging the output). Tests that can never
 * fail for a workload (no padding, no overhang) are not generated. Each tap
 * names its input and weight offsets once (LET), so the channel loop only adds
 * multiples of the channel: LLVM then strength-reduces the addresses.
 *
 * With local staging (stage_local >= 1) the work-group first copies, for
 * each chunk of tile_red.inner input channels, the input patch its pixel
 * block reads (zero-padded) and, for stage_local == 2, the weights of its
 * channel block into local memory, then computes from there with no tests
 * (the GPU way: one global read per element per work-group). With a single
 * chunk (tile_red = [1, c/groups]) the accumulators are initialised after the
 * barrier and no barrier follows, so none is live across a barrier. On PoCL
 * staged kernels first measured 2x slower than unstaged ones on 56x56 layers
 * (with more than one work-item per group PoCL runs the work-item loop inside
 * the reduction loop and keeps the accumulators in memory), but on ResNet-50's
 * 14x14 3x3 layer, where every unstaged tile touches the padding, the fastest
 * config 300 trials found was staged (stage_local 1, two work-items per group:
 * 0.90 ms, 257 GFLOP/s; bench/tune_curves/results/tune_curves.csv).
 *
 * Channel tiles that overhang k/groups are shifted back (without staging) so
 * that every weight read is real: the work-item computes channels
 * min(k0, kg - reg_k) + i and stores those >= k0. (Clamping each row instead
 * made LLVM vectorize the address arithmetic of the reduction loop.)
 *
 * Launch: grid axis 0 = channel blocks, axis 1 = column blocks, axis 2 =
 * (image, group, row block); work-items alike. Channel blocks vary fastest so
 * that on PoCL consecutive work-groups reuse one input tile from cache. But
 * that writes each work-group's 6x32 tile as 128-byte pieces of 6 planes, all
 * k planes in turn, and with output lines not in cache (as in a network,
 * unlike a kernel timed alone) MobileNetV2's 16 -> 96 layer at 112x112 took
 * 1.11 ms against 0.47 with the pixel blocks first (process CPU time, the
 * caches flushed between runs; in another run 0.58 against 0.40-0.41 with
 * chunks of 448 pixels or more).
 * So where an image's output passes L2 and the input of a few hundred pixels
 * fits L1 (mt__rt_chunk_blocks), the pixel blocks are cut into chunks: axis
 * 0 = the block within its chunk, axis 1 = channel blocks, axis 2 = chunks;
 * every channel block passes over one chunk while its input stays in L1,
 * writing runs of about 2 KiB per plane.
 *
 * Knobs, in order (work-group counts are derived: ceil(extent / (threads*reg))):
 *   thread_k {1,2,4,8,16}       work-items per work-group along channels
 *   reg_k    {1,2,3,4,6,8,12,16} channels per work-item (register rows)
 *   thread_y {1,2}              work-items per work-group along output rows
 *   reg_y    {1,2,3,4}          output rows per work-item
 *   thread_x {1,2,4,8,16}       work-items per work-group along columns
 *   reg_x    {1,4,8,16,24,32,48,64} columns (pixels) per work-item
 *   tile_red split of c/groups in 2 (FACTOR): outer (a serial loop), inner
 *            (unrolled when <= 16, else left to auto-unroll; the chunk
 *            staged at once with stage_local)
 *   vec      {1,4,8,16}         lanes of the pixel vectors; must divide reg_x
 *   stage_local {0,1,2}         local-memory stages: 0 none, 1 the input
 *                               patch, 2 the input patch and the weights
 *   auto_unroll_max_step {0,512,1500}  mt_ir_auto_unroll on the serial loops
 *            (r, s, c outer, staging copies)
 *   unroll_explicit {0,1}       replicate unrolled bodies instead of pragmas
 * Options larger than the workload can use are left out of the space (e.g.
 * only 1 for the y knobs when flattened). The register tiles are enums rather
 * than power-of-two splits because the best CPU tiles hold 12 float8
 * accumulators (6x16, 4x24, 12x8; AVX2 has 16 vector registers) or 24
 * float16 ones (8x48, 12x32, 6x64; AVX-512 has 32), which needs factors of
 * 3. A config is invalid when vec does not divide reg_x, when
 * the work-item's private floats (accumulators + input and weight registers)
 * exceed MT__GEMM_MAX_PRIVATE_FLOATS, or when the kernel would have more than
 * MT__GEMM_MAX_UNROLLED_STMTS statements once unrolled (PoCL compile time
 * grows steeply with size). Tiles need not divide the sizes:
 * overhanging channels, rows and columns are guarded (see above for
 * channels; inputs read as zero, stores skipped).
 *
 * PoCL note: vector accesses to the private accumulator and register arrays
 * must compile to plain vector loads/stores for LLVM to keep them in
 * registers; PoCL's vloadN/vstoreN on private memory are split in halves and
 * make these kernels ~3-5x slower (a printer matter, ir/print_c.c). */
#include <limits.h>
#include <stdint.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

/* Room for 24 float16 accumulators (8 x 48 pixels) with their input and
 * weight registers; a tile past a device's registers spills (AVX2's 16 hold
 * 12 float8 accumulators), which the tuner measures as slow. */
#define MT__GEMM_MAX_PRIVATE_FLOATS 512
/* Largest kernel, in statements once unrolled loops are expanded: PoCL took
 * from 1 to 11 minutes to compile random configs of ~2000-5000 statements
 * (good configs have a few hundred), so bigger ones are rejected. */
#define MT__GEMM_MAX_UNROLLED_STMTS 4096
/* Largest tile_red inner part that is always unrolled. */
#define GEMM_MAX_RED_UNROLL 16


static int gemm_accepts(const mt_workload *wl) {
    return wl && wl->groups >= 1 && wl->c % wl->groups == 0 && wl->k % wl->groups == 0;
}

static void gemm_canon(const mt_workload *wl, mt__rt_plan *p) {
    mt__rt_plan_init(p, wl);
    /* A 1x1 convolution with stride 1 and no padding, as one row of pixels
     * (where dilation means nothing). */
    p->flat = mt_workload_is_pointwise(wl);
    if (p->flat) {
        p->h = p->oh = 1;
        p->w = p->ow = wl->h * wl->w;
        p->dh = p->dw = 1;
    }
}

static int pow2_at_least(int x) {
    int v = 1;
    while (v < x && v < (1 << 30)) v <<= 1;
    return v;
}

static mt_status gemm_space(const mt_workload *wl, mt_space *out) {
    if (!gemm_accepts(wl) || !out) return MT_UNSUPPORTED;
    mt__rt_plan p;
    gemm_canon(wl, &p);
    /* Options past what the workload can use (more channels, rows or
     * columns per work-item or per work-group than it has) are left out. */
    const mt__enum_knob tiles[] = {
        {"thread_k", MT__OPTIONS(1, 2, 4, 8, 16), p.kg},
        {"reg_k", MT__OPTIONS(1, 2, 3, 4, 6, 8, 12, 16), p.kg},
        {"thread_y", MT__OPTIONS(1, 2), p.oh},
        {"reg_y", MT__OPTIONS(1, 2, 3, 4), p.oh},
        {"thread_x", MT__OPTIONS(1, 2, 4, 8, 16), p.ow},
        {"reg_x", MT__OPTIONS(1, 4, 8, 16, 24, 32, 48, 64), pow2_at_least(p.ow)},
    };
    const mt__enum_knob rest[] = {
        {"vec", MT__OPTIONS(1, 4, 8, 16), pow2_at_least(p.ow)},
        {"stage_local", MT__OPTIONS(0, 1, 2), INT_MAX},
        {"auto_unroll_max_step", MT__OPTIONS(0, 512, 1500), INT_MAX},
        {"unroll_explicit", MT__OPTIONS(0, 1), INT_MAX},
    };
    mt_space_init(out, "gemm");
    mt_status st = mt__space_add_enums(out, tiles, (int)(sizeof tiles / sizeof tiles[0]));
    if (st == MT_OK) st = mt_space_add_split(out, "tile_red", p.cg, 2, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt__space_add_enums(out, rest, (int)(sizeof rest / sizeof rest[0]));
    if (st != MT_OK) mt_space_free(out);
    return st;
}

/* ---- IR building ---- */

typedef struct gemm_builder {
    mt_kernel *k;
    const mt__rt_plan *p;
    mt__conv_io io;
    mt_buffer *acc;
    mt_buffer *wl, *il;           /* local stages, or NULL */
    int pch, pcw;                 /* staged input patch rows and columns */
    mt_expr *tk, *ty, *tx, *tid;  /* work-item indices */
    mt_expr *kb, *yb, *xb;        /* first channel / row / column of the work-group's tile */
    mt_expr *k0, *y0, *x0;        /* first channel / row / column of the work-item's tile */
    mt_expr *in_img;              /* input offset of (image, first channel of the group) */
    mt_expr *w_grp;               /* weight offset of the group's first output channel */
    mt_expr *out_img;             /* output offset of (image, first channel of the group) */
    mt_expr *k_grp;               /* first output channel of the group (for the epilogue's bias) */
    mt_expr *k0s;                 /* first channel the work-item computes: k0, or without staging min(k0, kg - reg_k) */
    mt_expr *w_row;               /* weight offset of channel k0s (without staging) */
    /* Per tap (r, s), without staging: the work-item tile's first input row
     * and column, the input offset of that pixel in channel 0 of the group,
     * and the weight offset of (k0s, channel 0, r, s). Named once per tap so
     * that the channel loop only adds multiples of the channel to them. */
    mt_expr *tap_iy, *tap_ix, *tap_in, *tap_w;
    int k_over;                   /* tiles overhang k/groups */
} gemm_builder;

enum load_mode {
    LOAD_FAST,    /* global input, known in bounds */
    LOAD_GUARDED, /* global input, per-vector test, per-lane fallback */
    LOAD_LOCAL    /* staged input patch */
};

#define KI(b, v) mt_ir_int((b)->k, (v))

/* e * m + a, folding what can be folded. */
static mt_expr *mad(gemm_builder *b, mt_expr *e, int64_t m, int64_t a) {
    return mt_ir_add(b->k, mt_ir_mul(b->k, e, KI(b, m)), KI(b, a));
}

/* Loads the work-item's input registers for channel c (within the group) at tap (r, s). */
static mt_stmt *load_inputs(gemm_builder *b, mt_buffer *xin, mt_expr *c, mt_expr *ci, mt_expr *r, mt_expr *s, enum load_mode mode) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_stmt_list list = {0};
    for (int yi = 0; yi < p->yr; yi++) {
        for (int xv = 0; xv < p->xr / vec; xv++) {
            mt_expr *dst = KI(b, (int64_t)yi * p->xr + (int64_t)xv * vec);
            if (mode == LOAD_LOCAL) {
                /* il[ci][py][px], py = (ty*yr + yi)*sh + r*dh, px = (tx*xr + xv*vec)*sw + s*dw */
                mt_expr *py = mt_ir_add(k, mad(b, b->ty, (int64_t)p->yr * p->sh, (int64_t)yi * p->sh), mt_ir_mul(k, r, KI(b, p->dh)));
                mt_expr *px = mt_ir_add(k, mad(b, b->tx, (int64_t)p->xr * p->sw, (int64_t)xv * vec * p->sw), mt_ir_mul(k, s, KI(b, p->dw)));
                mt_expr *idx = mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, ci, KI(b, b->pch)), py), KI(b, b->pcw)), px);
                mt_expr *v = mt_ir_load(k, b->il, mt_ir_ramp(k, idx, p->sw, vec));
                mt_stmt_list_push(k, &list, mt_ir_store_vec(k, xin, dst, v));
                continue;
            }
            /* Row iy, first column ix and input index of vector (yi, xv). */
            int64_t off_y = (int64_t)yi * p->sh, off_x = (int64_t)xv * vec * p->sw;
            mt_expr *iy = mt_ir_add(k, b->tap_iy, KI(b, off_y));
            mt_expr *ix = mt_ir_add(k, b->tap_ix, KI(b, off_x));
            mt_expr *idx = mt_ir_add(k, mt_ir_add(k, b->tap_in, mt_ir_mul(k, c, KI(b, (int64_t)p->h * p->w))), KI(b, off_y * p->w + off_x));
            mt_stmt *fast = mt_ir_store_vec(k, xin, dst, mt_ir_load(k, b->io.in, mt_ir_ramp(k, idx, p->sw, vec)));
            if (mode == LOAD_FAST) {
                mt_stmt_list_push(k, &list, fast);
                continue;
            }
            mt_expr *ycond = mt__range_cond(k, iy, 0, p->h, p->iy_lo, p->iy_hi);
            mt_expr *vcond = mt_ir_and(k, ycond, mt__range_cond(k, ix, (int64_t)(vec - 1) * p->sw, p->w, p->ix_lo, p->ix_hi));
            if (!vcond) {
                mt_stmt_list_push(k, &list, fast);
                continue;
            }
            /* Per lane: zero outside the input. The select reads only when the
             * lane is inside (a scalar select evaluates one side). */
            mt_stmt_list lanes = {0};
            for (int j = 0; j < vec; j++) {
                mt_expr *ixj = mt_ir_add(k, ix, KI(b, (int64_t)j * p->sw));
                mt_expr *lc = mt_ir_and(k, ycond, mt__range_cond(k, ixj, 0, p->w, p->ix_lo, p->ix_hi));
                mt_expr *val = mt_ir_load(k, b->io.in, mt_ir_add(k, idx, KI(b, (int64_t)j * p->sw)));
                if (lc) val = mt_ir_select(k, lc, val, mt_ir_float(k, 0.0f));
                mt_stmt_list_push(k, &lanes, mt_ir_store(k, xin, mt_ir_add(k, dst, KI(b, j)), val));
            }
            mt_stmt *slow = mt_stmt_list_seq(k, &lanes);
            mt_stmt_list_push(k, &list, vec == 1 ? slow : mt_ir_if(k, vcond, fast, slow));
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* Whether a flattened 1x1 kernel prefetches its input MT__PREFETCH_CHANNELS
 * channels ahead (planes past 2 KiB, see mt__prefetch_planes). Each channel's
 * pixels are a run of reg_x floats, but successive channels lie a plane
 * apart, beyond the stride prefetcher's reach, and the first work-group to
 * read a pixel block waited for each channel's lines. Inside the networks at
 * default configs (bench/net_ab/results/net_ab_gemm_prefetch_*.md):
 * MobileNetV2's 96 -> 24 and 144 -> 24 layers at 56x56 1.12x and 1.21x
 * while its unchanged layers drifted 0.91-0.94x, ResNet-50's 1x1 gemm layers
 * 1.02-1.15x (median 1.09) while the rest held at 0.99-1.00x. In a first
 * run (not kept) MobileNetV2's 16 -> 96 layer at 112x112 ran 0.92x with
 * them: chunked (mt__rt_chunk_blocks), its input is already in L1, and
 * chunked kernels take none. */
static int gemm_prefetches(const mt__rt_plan *p) {
    return p->flat && mt__prefetch_planes(p->h, p->w) && p->cg > MT__PREFETCH_CHANNELS &&
           mt__rt_chunk_blocks(p, (int64_t)p->n * p->groups) == 1;
}

/* The prefetch of every cache line of the work-item's pixels in channel
 * c + MT__PREFETCH_CHANNELS (flattened: one run of reg_x floats); past the
 * last channel it prefetches past the plane, which never faults. */
static mt_stmt *prefetch_input(gemm_builder *b, mt_expr *c) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *ahead = mt_ir_add(k, c, KI(b, MT__PREFETCH_CHANNELS));
    mt_expr *start = mt_ir_add(k, b->tap_in, mt_ir_mul(k, ahead, KI(b, (int64_t)p->h * p->w)));
    /* Runs start lines when every run's offset is a multiple of a line (buffers are line-aligned). */
    const int runs_aligned = p->xr % MT__LINE_FLOATS == 0 && (int64_t)p->h * p->w % MT__LINE_FLOATS == 0;
    return mt__prefetch_run(k, b->io.in, start, p->xr - 1, runs_aligned);
}

/* One reduction step: input and weight registers for (c, r, s), then the outer product.
 * The weights are not prefetched as kvec's and wino's are: one prefetch per
 * weight row and step (16 or 32 channels ahead) made ResNet-50's gemm
 * layers 1.02-1.14x slower inside the network (tuned configs, 3 rounds in
 * turns; not kept): each scalar row's line serves 16 steps, and the rows
 * of a layer's 16-512 KiB weights reach the hardware prefetcher's streams. */
static mt_stmt *reduction_step(gemm_builder *b, mt_expr *c, mt_expr *ci, mt_expr *r, mt_expr *s, enum load_mode mode) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    const int64_t rs = (int64_t)p->r * p->s;
    mt_buffer *xin = mt_ir_buffer(k, "xin", MT_SCOPE_PRIVATE, (int64_t)p->yr * p->xr);
    mt_buffer *wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, p->kr);
    mt_stmt_list list = {0};
    if (mode != LOAD_LOCAL && gemm_prefetches(p)) mt_stmt_list_push(k, &list, prefetch_input(b, c));
    mt_stmt_list_push(k, &list, load_inputs(b, xin, c, ci, r, s, mode));
    mt_expr *tap = b->wl ? mt_ir_add(k, mt_ir_mul(k, r, KI(b, p->s)), s) : NULL;
    for (int i = 0; i < p->kr; i++) {
        mt_expr *widx;
        if (b->wl) {
            /* wl[kl][ci][r][s], kl = tk*kr + i */
            mt_expr *kl = mad(b, b->tk, p->kr, i);
            widx = mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, kl, KI(b, p->rci)), ci), KI(b, rs)), tap);
            mt_stmt_list_push(k, &list, mt_ir_store(k, wreg, KI(b, i), mt_ir_load(k, b->wl, widx)));
        } else {
            widx = mt_ir_add(k, mt_ir_add(k, b->tap_w, mt_ir_mul(k, c, KI(b, rs))), KI(b, (int64_t)i * p->cg * rs));
            mt_stmt_list_push(k, &list, mt_ir_store(k, wreg, KI(b, i), mt_ir_load(k, b->io.wt, widx)));
        }
    }
    for (int i = 0; i < p->kr; i++) {
        mt_expr *wv = mt_ir_broadcast(k, mt_ir_load(k, wreg, KI(b, i)), vec);
        for (int yi = 0; yi < p->yr; yi++) {
            for (int xv = 0; xv < p->xr / vec; xv++) {
                int64_t a = ((int64_t)i * p->yr + yi) * p->xr + (int64_t)xv * vec;
                mt_expr *xv_e = mt_ir_load_vec(k, xin, KI(b, (int64_t)yi * p->xr + (int64_t)xv * vec), vec);
                mt_expr *acc = mt_ir_load_vec(k, b->acc, KI(b, a), vec);
                mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_fma(k, wv, xv_e, acc)));
            }
        }
    }
    return mt_ir_alloc(k, xin, mt_ir_alloc(k, wreg, mt_stmt_list_seq(k, &list)));
}

/* The taps r > s of channel c (ci: its index in the chunk). Without an
 * input stage each tap first names its input and weight offsets. */
static mt_stmt *tap_loops(gemm_builder *b, mt_expr *c, mt_expr *ci, enum load_mode mode) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt__opt_loop lr, ls;
    mt_expr *r = mt__loop_begin(b->k, &lr, "r", p->r, MT_LOOP_SERIAL);
    mt_expr *s = mt__loop_begin(b->k, &ls, "s", p->s, MT_LOOP_SERIAL);
    mt_stmt *body;
    if (mode == LOAD_LOCAL && b->wl) {
        body = reduction_step(b, c, ci, r, s, mode);
    } else if (mode == LOAD_LOCAL) {
        mt__let_chain lc = {0};
        b->tap_w = mt__let_bind(b->k, &lc, "tw", mt_ir_add(k, b->w_row, mt_ir_add(k, mt_ir_mul(k, r, KI(b, p->s)), s)));
        body = mt__let_wrap(b->k, &lc, reduction_step(b, c, ci, r, s, mode));
    } else {
        mt__let_chain lc = {0};
        b->tap_iy = mt__let_bind(b->k, &lc, "tiy", mt_ir_add(k, mad(b, b->y0, p->sh, -p->ph), mt_ir_mul(k, r, KI(b, p->dh))));
        b->tap_ix = mt__let_bind(b->k, &lc, "tix", mt_ir_add(k, mad(b, b->x0, p->sw, -p->pw), mt_ir_mul(k, s, KI(b, p->dw))));
        b->tap_in = mt__let_bind(b->k, &lc, "tin", mt_ir_add(k, mt_ir_add(k, b->in_img, mt_ir_mul(k, b->tap_iy, KI(b, p->w))), b->tap_ix));
        b->tap_w = mt__let_bind(b->k, &lc, "tw", mt_ir_add(k, b->w_row, mt_ir_add(k, mt_ir_mul(k, r, KI(b, p->s)), s)));
        body = mt__let_wrap(b->k, &lc, reduction_step(b, c, ci, r, s, mode));
    }
    return mt__loop_end(b->k, &lr, mt__loop_end(b->k, &ls, body));
}

/* for rco (serial, or the given index when rco_e != NULL): for rci (unrolled): taps. */
static mt_stmt *channel_loops(gemm_builder *b, mt_expr *rco_e, enum load_mode mode) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt__opt_loop lo, li;
    mt_expr *rco = rco_e ? rco_e : mt__loop_begin(b->k, &lo, "rco", p->rco, MT_LOOP_SERIAL);
    /* The chunk is unrolled; past GEMM_MAX_RED_UNROLL channels it is left
     * to auto-unroll, so that huge chunks do not make huge kernels. */
    mt_expr *ci = mt__loop_begin(b->k, &li, "rci", p->rci, p->rci <= GEMM_MAX_RED_UNROLL ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    mt_expr *c = mt_ir_add(k, mt_ir_mul(k, rco, KI(b, p->rci)), ci);
    mt_stmt *body = mt__loop_end(b->k, &li, tap_loops(b, c, ci, mode));
    return rco_e ? body : mt__loop_end(b->k, &lo, body);
}

/* A work-group-wide copy of `total` elements: each work-item takes every
 * nth-th element starting at its id; make(e) builds the copy of element e. */
typedef mt_stmt *(*copy_fn)(gemm_builder *b, mt_expr *e, mt_expr *rco);

static mt_stmt *coop_copy(gemm_builder *b, int64_t total, copy_fn make, mt_expr *rco) {
    mt_kernel *k = b->k;
    int64_t nth = (int64_t)b->p->kt * b->p->yt * b->p->xt;
    mt__opt_loop l;
    mt_expr *eo = mt__loop_begin(b->k, &l, "cp", (total + nth - 1) / nth, MT_LOOP_SERIAL);
    mt_var *ev = mt_ir_var(k, "e", MT_TYPE_INT);
    mt_expr *e = mt_ir_v(k, ev);
    mt_stmt *copy = make(b, e, rco);
    if (total % nth) copy = mt_ir_if(k, mt_ir_lt(k, e, KI(b, total)), copy, NULL);
    return mt__loop_end(b->k, &l, mt_ir_let(k, ev, mt_ir_add(k, mt_ir_mul(k, eo, KI(b, nth)), b->tid), copy));
}

/* wl[e] = w[group][kb + e / (rci*r*s)][rco*rci*r*s + e % (rci*r*s)] */
static mt_stmt *copy_weight(gemm_builder *b, mt_expr *e, mt_expr *rco) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    int64_t row = (int64_t)p->rci * p->r * p->s;
    mt_expr *kk = mt_ir_add(k, b->kb, mt_ir_div(k, e, KI(b, row)));
    if (b->k_over) kk = mt_ir_min(k, kk, KI(b, p->kg - 1));
    mt_expr *src = mt_ir_add(k, mt_ir_add(k, b->w_grp, mt_ir_mul(k, kk, KI(b, (int64_t)p->cg * p->r * p->s))),
                             mt_ir_add(k, mt_ir_mul(k, rco, KI(b, row)), mt_ir_mod(k, e, KI(b, row))));
    return mt_ir_store(k, b->wl, e, mt_ir_load(k, b->io.wt, src));
}

/* il[e] = input[group channel rco*rci + ci][iy][ix], zero outside the input. */
static mt_stmt *copy_input(gemm_builder *b, mt_expr *e, mt_expr *rco) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    int64_t plane = (int64_t)b->pch * b->pcw;
    mt_expr *ci = mt_ir_div(k, e, KI(b, plane));
    mt_expr *rem = mt_ir_mod(k, e, KI(b, plane));
    mt_expr *iy = mt_ir_add(k, mad(b, b->yb, p->sh, -p->ph), mt_ir_div(k, rem, KI(b, b->pcw)));
    mt_expr *ix = mt_ir_add(k, mad(b, b->xb, p->sw, -p->pw), mt_ir_mod(k, rem, KI(b, b->pcw)));
    mt_expr *c = mt_ir_add(k, mt_ir_mul(k, rco, KI(b, p->rci)), ci);
    mt_expr *src = mt_ir_add(k, mt_ir_add(k, b->in_img, mt_ir_mul(k, c, KI(b, (int64_t)p->h * p->w))),
                             mt_ir_add(k, mt_ir_mul(k, iy, KI(b, p->w)), ix));
    /* The patch reaches past the input where some tile's reads can (padding, overhang). */
    mt_expr *cond = mt_ir_and(k, mt__range_cond(k, iy, 0, p->h, p->iy_lo, p->iy_hi), mt__range_cond(k, ix, 0, p->w, p->ix_lo, p->ix_hi));
    mt_expr *val = mt_ir_load(k, b->io.in, src);
    if (cond) val = mt_ir_select(k, cond, val, mt_ir_float(k, 0.0f));
    return mt_ir_store(k, b->il, e, val);
}

/* The reduction, with the accumulator initialisation `init` placed first
 * or, for a single staged chunk, after the copy: then no accumulator is live
 * across a barrier (PoCL keeps such values in memory, not registers). */
static mt_stmt *reduction(gemm_builder *b, mt_stmt *init) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    if (!b->il) {
        /* Does every tap of every pixel of the work-item's tile read inside the input? */
        mt_expr *iy = mad(b, b->y0, p->sh, -p->ph), *ix = mad(b, b->x0, p->sw, -p->pw);
        mt_expr *cond = mt_ir_and(k, mt__range_cond(k, iy, (int64_t)(p->yr - 1) * p->sh + (int64_t)(p->r - 1) * p->dh, p->h, p->iy_lo, p->iy_hi),
                                  mt__range_cond(k, ix, (int64_t)(p->xr - 1) * p->sw + (int64_t)(p->s - 1) * p->dw, p->w, p->ix_lo, p->ix_hi));
        mt_stmt *fast = channel_loops(b, NULL, LOAD_FAST);
        return mt_ir_seq2(k, init, cond ? mt_ir_if(k, cond, fast, channel_loops(b, NULL, LOAD_GUARDED)) : fast);
    }
    mt__opt_loop lo;
    mt_expr *rco = mt__loop_begin(b->k, &lo, "rco", p->rco, MT_LOOP_SERIAL);
    mt_stmt_list list = {0};
    if (b->wl) mt_stmt_list_push(k, &list, coop_copy(b, (int64_t)p->kt * p->kr * p->rci * p->r * p->s, copy_weight, rco));
    mt_stmt_list_push(k, &list, coop_copy(b, (int64_t)p->rci * b->pch * b->pcw, copy_input, rco));
    mt_stmt_list_push(k, &list, mt_ir_barrier(k));
    if (p->rco == 1) {
        mt_stmt_list_push(k, &list, init);
        mt_stmt_list_push(k, &list, channel_loops(b, rco, LOAD_LOCAL));
        return mt_stmt_list_seq(k, &list);
    }
    mt_stmt_list_push(k, &list, channel_loops(b, rco, LOAD_LOCAL));
    mt_stmt_list_push(k, &list, mt_ir_barrier(k)); /* before the next chunk overwrites the stage */
    return mt_ir_seq2(k, init, mt__loop_end(b->k, &lo, mt_stmt_list_seq(k, &list)));
}

/* Stores the accumulator tile, skipping overhanging channels, rows and columns. */
static mt_stmt *epilogue(gemm_builder *b) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    const int64_t plane = (int64_t)p->oh * p->ow;
    mt_stmt_list list = {0};
    for (int i = 0; i < p->kr; i++) {
        /* Staged: channel k0 + i, stored when < kg. Otherwise the tile was
         * shifted back to k0s so that it reads only real weights; channel
         * k0s + i (< kg) is stored when >= k0, so each output once. */
        mt_expr *kk = mt_ir_add(k, b->k0s, KI(b, i));
        mt_expr *kc = !b->k_over ? NULL : b->wl ? mt_ir_lt(k, kk, KI(b, p->kg)) : mt_ir_ge(k, kk, b->k0);
        for (int yi = 0; yi < p->yr; yi++) {
            mt_expr *oy = mt_ir_add(k, b->y0, KI(b, yi));
            mt_expr *yc = mt_ir_and(k, kc, p->y_over ? mt_ir_lt(k, oy, KI(b, p->oh)) : NULL);
            for (int xv = 0; xv < p->xr / vec; xv++) {
                int64_t a = ((int64_t)i * p->yr + yi) * p->xr + (int64_t)xv * vec;
                mt_expr *ox = mt_ir_add(k, b->x0, KI(b, (int64_t)xv * vec));
                mt_expr *idx = mt_ir_add(k, mt_ir_add(k, b->out_img, mt_ir_mul(k, kk, KI(b, plane))),
                                         mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), ox));
                mt_expr *chan = mt_ir_add(k, b->k_grp, kk);
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, mt_ir_load_vec(k, b->acc, KI(b, a), vec), chan, idx, vec);
                mt_stmt *full = mt_ir_store_vec(k, b->io.out, idx, val);
                if (!p->x_over) {
                    mt_stmt_list_push(k, &list, mt_ir_if(k, yc, full, NULL));
                    continue;
                }
                mt_stmt *st;
                if (vec == 1) {
                    st = mt_ir_if(k, mt_ir_and(k, yc, mt_ir_lt(k, ox, KI(b, p->ow))), full, NULL);
                } else {
                    mt_stmt_list lanes = {0};
                    for (int j = 0; j < vec; j++) {
                        mt_expr *oxj = mt_ir_add(k, ox, KI(b, j));
                        mt_expr *at = mt_ir_add(k, idx, KI(b, j));
                        mt_expr *lane = mt__epilogue_apply(k, &b->io.epi, mt_ir_load(k, b->acc, KI(b, a + j)), chan, at, 1);
                        mt_stmt *one = mt_ir_store(k, b->io.out, at, lane);
                        mt_stmt_list_push(k, &lanes, mt_ir_if(k, mt_ir_lt(k, oxj, KI(b, p->ow)), one, NULL));
                    }
                    mt_stmt *part = mt_stmt_list_seq(k, &lanes);
                    mt_expr *whole = mt_ir_lt(k, mt_ir_add(k, ox, KI(b, vec - 1)), KI(b, p->ow));
                    st = mt_ir_if(k, yc, mt_ir_if(k, whole, full, part), NULL);
                }
                mt_stmt_list_push(k, &list, st);
            }
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* With a residual in the epilogue, the tile's lines of it are prefetched
 * before the reduction. The residual was written layers before (the
 * block's input, or the output of the shortcut's convolution) and has left
 * L1 and L2, and the epilogue's load of each of its vectors stalled the
 * stores: sampled inside ResNet-50 (perf, cpu-clock) the 64 -> 256 layer
 * at 56x56 that adds it spent 11% of its samples on the one instruction
 * after that load. The reduction's steps hide the misses. Inside ResNet-50
 * with its tuned configs (6 rounds in turns with the build before,
 * bench/net_ab/results/net_ab_gemm_residual_prefetch_resnet50.md): its gemm
 * layers with a residual 1.01-1.13x as fast (the 56x56 ones 1.05-1.13x),
 * the others 0.99-1.01x, the network within noise (1.00x); MobileNetV2's
 * 1.01-1.02x (net_ab_gemm_residual_prefetch_mobilenet_v2.md). Prefetching
 * the tile's output lines for writing too (prefetchw) on every layer
 * made the 64-channel layers at 56x56 1.07-1.10x slower (not kept); the
 * same prefetch in kvec (tiles of 64 channels, one run per channel) made
 * its residual layers at 14x14 and 7x7 1.01-1.04x slower (not kept). */
static mt_stmt *prefetch_residual(gemm_builder *b) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_buffer *res = b->io.epi.residual;
    if (!res) return NULL;
    const int64_t plane = (int64_t)p->oh * p->ow;
    /* Runs start lines when every run's offset is a multiple of a line (buffers are line-aligned). */
    const int aligned = p->xr % MT__LINE_FLOATS == 0 && p->ow % MT__LINE_FLOATS == 0 && plane % MT__LINE_FLOATS == 0;
    mt_stmt_list list = {0};
    for (int i = 0; i < p->kr; i++)
        for (int yi = 0; yi < p->yr; yi++) {
            mt_expr *kk = mt_ir_add(k, b->k0s, KI(b, i));
            mt_expr *oy = mt_ir_add(k, b->y0, KI(b, yi));
            mt_expr *idx = mt_ir_add(k, mt_ir_add(k, b->out_img, mt_ir_mul(k, kk, KI(b, plane))), mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), b->x0));
            mt_stmt_list_push(k, &list, mt__prefetch_run(k, res, idx, p->xr - 1, aligned));
        }
    return mt_stmt_list_seq(k, &list);
}

static mt_stmt *work_item(gemm_builder *b) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt *init = mt__zero_fill(k, b->acc, (int64_t)p->kr * p->yr * p->xr, p->vec);
    mt_stmt *pf = prefetch_residual(b);
    if (pf) init = mt_ir_seq2(k, pf, init);
    mt_stmt *body = mt_ir_alloc(k, b->acc, mt_ir_seq2(k, reduction(b, init), epilogue(b)));
    if (b->il) body = mt_ir_alloc(k, b->il, body);
    if (b->wl) body = mt_ir_alloc(k, b->wl, body);
    return body;
}

static mt_status gemm_build_plan(const mt__rt_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_gemm");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "gemm: out of memory");
    gemm_builder bb = {.k = k, .p = p};
    gemm_builder *b = &bb;
    int64_t in_elems = (int64_t)p->n * p->c * p->h * p->w;
    int64_t w_elems = (int64_t)p->k * p->cg * p->r * p->s;
    int64_t out_elems = (int64_t)p->n * p->k * p->oh * p->ow;
    mt__conv_io_params(k, &b->io, in_elems, w_elems, out_elems, p->k, p->epi);
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, (int64_t)p->kr * p->yr * p->xr);
    b->k_over = (int64_t)p->ko * p->kt * p->kr > p->kg;

    if (p->stage >= 2) b->wl = mt_ir_buffer(k, "wl", MT_SCOPE_LOCAL, (int64_t)p->kt * p->kr * p->rci * p->r * p->s);
    if (p->stage >= 1) {
        b->pch = (p->yt * p->yr - 1) * p->sh + (p->r - 1) * p->dh + 1;
        b->pcw = (p->xt * p->xr - 1) * p->sw + (p->s - 1) * p->dw + 1;
        b->il = mt_ir_buffer(k, "il", MT_SCOPE_LOCAL, (int64_t)p->rci * b->pch * b->pcw);
    }

    /* Launch: channel blocks fastest, or chunks of pixel blocks (see the
     * header comment); work-items along channels, columns and rows. */
    mt__rt_launch ln;
    const int64_t images = (int64_t)p->n * p->groups;
    mt__rt_launch_begin_chunked(k, p, images, mt__rt_chunk_blocks(p, images), &ln);
    b->tk = ln.tk, b->tx = ln.tx, b->ty = ln.ty;

    mt__let_chain lc = {0};
    mt_expr *byb = mt_ir_mod(k, ln.bz, KI(b, p->yo));
    mt_expr *img_grp = mt__let_bind(b->k, &lc, "ng", mt_ir_div(k, ln.bz, KI(b, p->yo)));
    mt_expr *img = mt_ir_div(k, img_grp, KI(b, p->groups));
    mt_expr *grp = mt_ir_mod(k, img_grp, KI(b, p->groups));
    b->kb = mt__let_bind(b->k, &lc, "kb", mt_ir_mul(k, ln.bk, KI(b, (int64_t)p->kt * p->kr)));
    b->yb = mt__let_bind(b->k, &lc, "yb", mt_ir_mul(k, byb, KI(b, (int64_t)p->yt * p->yr)));
    b->xb = mt__let_bind(b->k, &lc, "xb", mt_ir_mul(k, ln.bx, KI(b, (int64_t)p->xt * p->xr)));
    b->k0 = mt__let_bind(b->k, &lc, "k0", mt_ir_add(k, b->kb, mt_ir_mul(k, b->tk, KI(b, p->kr))));
    b->y0 = mt__let_bind(b->k, &lc, "y0", mt_ir_add(k, b->yb, mt_ir_mul(k, b->ty, KI(b, p->yr))));
    b->x0 = mt__let_bind(b->k, &lc, "x0", mt_ir_add(k, b->xb, mt_ir_mul(k, b->tx, KI(b, p->xr))));
    b->k0s = b->k0;
    if (!b->wl && b->k_over) b->k0s = mt__let_bind(b->k, &lc, "k0s", mt_ir_min(k, b->k0, KI(b, p->kg - p->kr)));
    b->tid = mt__let_bind(b->k, &lc, "tid", mt_ir_add(k, mad(b, mt_ir_add(k, mt_ir_mul(k, b->ty, KI(b, p->xt)), b->tx), p->kt, 0), b->tk));
    b->in_img = mt__let_bind(b->k, &lc, "in_base",
                         mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, img, KI(b, p->c)), mt_ir_mul(k, grp, KI(b, p->cg))), KI(b, (int64_t)p->h * p->w)));
    b->w_grp = mt__let_bind(b->k, &lc, "w_base", mt_ir_mul(k, grp, KI(b, (int64_t)p->kg * p->cg * p->r * p->s)));
    if (!b->wl) b->w_row = mt__let_bind(b->k, &lc, "w_row", mt_ir_add(k, b->w_grp, mt_ir_mul(k, b->k0s, KI(b, (int64_t)p->cg * p->r * p->s))));
    b->k_grp = mt_ir_mul(k, grp, KI(b, p->kg));
    b->out_img = mt__let_bind(b->k, &lc, "out_base", mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, img, KI(b, p->k)), mt_ir_mul(k, grp, KI(b, p->kg))),
                                                         KI(b, (int64_t)p->oh * p->ow)));

    mt_stmt *body = mt__rt_launch_end(k, &ln, mt__let_wrap(b->k, &lc, work_item(b)));
    return mt__rt_finish(k, body, p, p->unroll_max, "gemm", out, err, errlen);
}

/* Statements in the kernel once unrolled loops are expanded (vector stores
 * count one per lane when their index is not contiguous: the printer writes
 * them lane by lane), saturating at `cap`. */
static int64_t unrolled_size(const mt_stmt *s, int64_t cap) {
    int64_t n = 0;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems && n < cap; i++) n += unrolled_size(s->items[i], cap);
        return n;
    case MT_STMT_FOR: {
        int64_t body = unrolled_size(s->body, cap);
        int expanded = s->loop == MT_LOOP_UNROLLED || s->loop == MT_LOOP_VECTORIZED || s->loop == MT_LOOP_VTHREAD;
        return expanded ? (body > cap / s->extent ? cap : body * s->extent) : body + 1;
    }
    case MT_STMT_IF: return 1 + unrolled_size(s->body, cap) + (s->else_body ? unrolled_size(s->else_body, cap) : 0);
    case MT_STMT_ALLOC:
    case MT_STMT_LET: return 1 + unrolled_size(s->body, cap);
    case MT_STMT_STORE: return s->value->lanes > 1 && !(s->index->kind == MT_EXPR_RAMP && s->index->stride == 1) ? s->value->lanes : 1;
    default: return 1;
    }
}

static mt_status gemm_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                            char *err, size_t errlen) {
    if (!gemm_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "gemm: channels not divisible by groups");
    mt__rt_plan p;
    gemm_canon(wl, &p);
    int red[2] = {0};
    mt_status st = mt__config_split(sp, cfg, "tile_red", red, 2, err, errlen);
    if (st != MT_OK) return st;
    mt__rt_plan_read_tiles(&p, sp, cfg);
    p.rco = red[0], p.rci = red[1];
    p.vec = mt_config_value(sp, cfg, "vec");
    p.stage = mt_config_value(sp, cfg, "stage_local");
    p.unroll_max = mt_config_value(sp, cfg, "auto_unroll_max_step");
    p.unroll_explicit = mt_config_value(sp, cfg, "unroll_explicit");
    p.epi = epi;
    if (p.kt < 1 || p.kr < 1 || p.yt < 1 || p.yr < 1 || p.xt < 1 || p.xr < 1 || p.vec < 1 || (int64_t)p.rco * p.rci != p.cg)
        return mt__fail(err, errlen, MT_INVALID_ARG, "gemm: config does not match this workload's space");
    p.ko = (p.kg + p.kt * p.kr - 1) / (p.kt * p.kr);
    mt__rt_plan_cover(&p);
    if (p.kr > p.kg) return mt__fail(err, errlen, MT_INVALID_CONFIG, "gemm: reg_k=%d exceeds the %d channels per group", p.kr, p.kg);
    if (p.xr % p.vec)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "gemm: vec=%d does not divide the %d columns per work-item", p.vec, p.xr);
    int64_t priv = (int64_t)p.kr * p.yr * p.xr + (int64_t)p.yr * p.xr + p.kr;
    if (priv > MT__GEMM_MAX_PRIVATE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "gemm: %lld private floats per work-item (%dx%dx%d accumulators) exceed %d",
                        (long long)priv, p.kr, p.yr, p.xr, MT__GEMM_MAX_PRIVATE_FLOATS);
    mt_kernel *k = NULL;
    st = gemm_build_plan(&p, &k, err, errlen);
    if (st != MT_OK) return st;
    int64_t size = unrolled_size(k->body, (int64_t)1 << 40);
    if (size > MT__GEMM_MAX_UNROLLED_STMTS) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "gemm: %lld statements once unrolled exceed %d (compile time)", (long long)size,
                        MT__GEMM_MAX_UNROLLED_STMTS);
    }
    *out = k;
    return MT_OK;
}

const mt_template mt__template_gemm = {
    /* .name    = */ "gemm",
    /* .accepts = */ gemm_accepts,
    /* .space   = */ gemm_space,
    /* .build   = */ gemm_build,
    /* .weights = */ MT_WEIGHTS_OIHW,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
