/* The `kvec` template: direct convolution vectorised over output channels.
 *
 * The other templates put their vectors along output pixels, so a vector
 * needs `vec` neighbouring pixels of one row: on the small images of a
 * network's later stages (14x14, 7x7) rows are short, most tiles touch the
 * padding (every tile of a 14-wide row does, with pad 1) and take the
 * per-lane path, and strided convolutions gather. Here a vector holds `vec`
 * output channels of one pixel instead, the way CPU libraries (oneDNN's
 * blocked layouts) do it:
 *     acc[pixel][channels k..k+vec) += broadcast(in[c][iy][ix]) * w[k..k+vec)[c][r][s]
 * Each input value is loaded once per tap as a scalar, tested once against
 * the image border (a scalar select, never a per-lane path) and broadcast;
 * the weights of `vec` channels are one contiguous vector load, because the
 * kernel reads them in the OIHW16o layout (ir/template.h): blocks
 * of 16 output channels innermost, which the executor converts to once.
 * Stride and dilation cost nothing extra.
 *
 * Each work-item keeps reg_k x reg_y x reg_x vector accumulators (reg_k
 * vectors of `vec` channels for each of its reg_y x reg_x pixels) and runs
 * the reduction c > r > (tile row) > s, loading per tap its reg_k weight
 * vectors and then doing, pixel by pixel, one broadcast and reg_k FMAs
 * (with the s taps unrolled and a kernel row's weight vectors within six
 * registers, the row's weights once and then input column by input column,
 * each column broadcast once for every pixel and tap that reads it:
 * kvec_column_order); an
 * input row in the padding is skipped by one branch (row_taps), column
 * tests are made only by the tiles at the image's edges (reduction), and on
 * planes above 512 bytes each and on 1x1 layers each (c, r, tile row)
 * prefetches the row it will read 8 channels later (prefetch_row), and each
 * (c, r) the weights it will read 8 channels later (prefetch_weights) and,
 * where the work-groups of a channel group run one after another, a row of
 * the next group's weights into L2 (prefetch_next_weights). At the end it
 * stores its tile channel by channel: a vector's lanes are different channels, so
 * different planes of the NCHW output, but one channel's reg_x columns are
 * neighbours, so each row is transposed in registers (pixel vectors of
 * channels into channel vectors of pixels, by two-source shuffles) and goes
 * out as vector stores along x, with the fused epilogue applied to each
 * vector (lane by lane where the tile overhangs the row).
 * The register-tile loops are replicated in the IR (constant indices keep
 * the accumulators in registers on PoCL). One-row tiles of unpadded
 * stride-1 1x1 layers run over the image flattened to one row
 * (kvec_flatten); on 7x7 images with hundreds of channels one work-item
 * runs all of its image's tiles, 64 channels at a time
 * (kvec_channel_block).
 *
 * Channel blocks that overhang k read real memory: a vector whose first
 * channel lies past the padded k is pointed back at the last block (its
 * results are never stored); stores skip channels >= k, rows >= oh and
 * columns >= ow. Input tests are generated only for the sides a read can
 * leave the image on.
 *
 * Launch: work-items: axis 0 = channel vectors, 1 = columns, 2 = rows.
 * Work-groups: axis 1 = column blocks, and the fastest varying axis 0 (PoCL
 * runs work-groups in that order) is either the channel blocks, so that
 * consecutive work-groups reuse one input tile from cache, or the (image,
 * row block)s, so that they reuse one block of weights. The second is chosen
 * when the weights are more than twice the input rows read (kvec_pixels_first):
 * in a network every layer's weights come from memory, and in ResNet-50's
 * last stage (weights 2-9 MiB, inputs 0.1-0.8 MiB) it ran 1.1-2.3x faster, while
 * in the first stages it ran up to 2x slower (bench/kernel_order/results/kernel_order.md).
 * It is a rule and not a knob: a measurement of the kernel alone repeats it
 * with its weights in cache, so the tuner could not see the difference.
 *
 * Knobs, in order (work-group counts are derived):
 *   thread_k {1,2,4,8}     work-items per work-group along channel vectors
 *   vec      {4,8,16}      channels per vector (divides the 16 of the layout)
 *   reg_k    {1,2,3,4}     channel vectors per work-item
 *   thread_y {1,2}         work-items per work-group along rows
 *   reg_y    {1,2,4}       output rows per work-item
 *   thread_x {1,2,4,8}     work-items per work-group along columns
 *   reg_x    {1,2,3,4,5,6,7,8,14,16}  output columns per work-item (7 and
 *                          14 fit ResNet's 7-, 14-, 28- and 56-wide images)
 *   unroll_rs {0,1,2}      kernel taps as loops: 0 both serial, 1 s
 *                          unrolled, 2 r and s unrolled
 *   unroll_explicit {0,1}  replicate unrolled bodies instead of pragmas
 * Options larger than the workload can use are left out (reg_x, thread_x
 * past the output width; reg_y, thread_y past its height; vector channels
 * past k rounded up to 16). A config is invalid when its private floats
 * (accumulators and weight registers) exceed MT__KVEC_MAX_PRIVATE_FLOATS:
 * 512 floats are AVX-512's 32 vector registers. Grouped convolutions are
 * not accepted (the depthwise and gemm templates take them). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

#define MT__KVEC_MAX_PRIVATE_FLOATS 512

static int kvec_accepts(const mt_workload *wl) { return wl && wl->groups == 1; }

static void kvec_canon(const mt_workload *wl, mt__rt_plan *p) {
    mt__rt_plan_init(p, wl);
    p->k16 = (wl->k + 15) / 16 * 16;
}

/* Tiles of one row (reg_y = thread_y = 1) of such a convolution run over the
 * image as one row of oh*ow pixels, as gemm's flattened kernels do: a tile
 * may wrap to the next row and only the image's last tile overhangs. The
 * space stays the one of the unflattened image (its records keep their
 * meaning where reg_x divides the row; elsewhere the tiles now waste fewer
 * FMAs). On 7x7 images the 2 x 7 tiles of 1-row or 2-row blocks left an
 * eighth of the FMAs past the image; flat, two channel vectors x 5 or 6
 * pixels (12 accumulators: one broadcast per two FMAs) cover 49 pixels with
 * 1-5 to spare. Timed alone on a Zen 3 (`mtgpu conv` with --cold, 2
 * runs in turns, 2026-12-06): MobileNetV2's 160 -> 960 at 7x7 0.101-0.111
 * ms with 2 x 5 flat against 0.117-0.132 with the 8-lane default before (1
 * vector x 2 rows x 7), 320 -> 1280 0.279-0.281 against 0.323-0.327, ResNet-50's
 * 512 -> 2048 0.70 against 0.82; at 14x14 2 x 6 flat against 1 x 14:
 * 1024 -> 256 0.58-0.62 against 0.68-0.69, 576 -> 96 0.132-0.135 against
 * 0.153-0.154, 64 -> 384 0.066-0.067 against 0.074-0.075 (the CPU defaults,
 * records/select.c, and docs/tuning.md, Flat 1x1 tiles). */
static void kvec_flatten(const mt_workload *wl, mt__rt_plan *p) {
    if (!mt_workload_is_pointwise(wl) || p->yr != 1 || p->yt != 1) return;
    p->h = p->oh = 1;
    p->w = p->ow = wl->h * wl->w;
}

static mt_status kvec_space(const mt_workload *wl, mt_space *out) {
    if (!kvec_accepts(wl) || !out) return MT_UNSUPPORTED;
    mt__rt_plan p;
    kvec_canon(wl, &p);
    const mt__enum_knob knobs[] = {
        {"thread_k", MT__OPTIONS(1, 2, 4, 8), p.k16 / 4},
        {"vec", MT__OPTIONS(4, 8, 16), p.k16},
        {"reg_k", MT__OPTIONS(1, 2, 3, 4), p.k16 / 4},
        {"thread_y", MT__OPTIONS(1, 2), p.oh},
        {"reg_y", MT__OPTIONS(1, 2, 4), p.oh},
        {"thread_x", MT__OPTIONS(1, 2, 4, 8), p.ow},
        {"reg_x", MT__OPTIONS(1, 2, 3, 4, 5, 6, 7, 8, 14, 16), p.ow},
        {"unroll_rs", MT__OPTIONS(0, 1, 2), INT_MAX},
        {"unroll_explicit", MT__OPTIONS(0, 1), INT_MAX},
    };
    mt_space_init(out, "kvec");
    mt_status st = mt__space_add_enums(out, knobs, (int)(sizeof knobs / sizeof knobs[0]));
    if (st != MT_OK) mt_space_free(out);
    return st;
}

/* Weights (the OIHW16o copy) more than twice the input rows that the
 * convolution reads (a stride skips rows): work-groups run pixel blocks first. */
static int kvec_pixels_first(const mt__rt_plan *p) {
    const int64_t weight_bytes = (int64_t)p->k16 * p->c * p->r * p->s * 4;
    const int64_t input_bytes = (int64_t)p->n * p->c * p->h * p->w * 4 / (p->sh > 0 ? p->sh : 1);
    return weight_bytes > 2 * input_bytes;
}

/* Channels per block of kvec_channel_block: a block's input rows of a 7x7
 * image (64 x 196 bytes) and its weights for 16 channels (64 x 64 bytes)
 * take 16 KiB, half a core's L1 data cache. */
#define MT__KVEC_CHANNEL_BLOCK 64
/* Pixels (the flattened image) up to which kvec_channel_block applies. */
#define MT__KVEC_CHANNEL_BLOCK_MAX_PIXELS 64
/* Accumulators of all of a work-item's tiles, at most (a 7x7 image's ten
 * tiles of 2 x 5 x 8-lane: 800 floats). */
#define MT__KVEC_CHANNEL_BLOCK_MAX_FLOATS 2048

/* The channels per block where each work-item runs every tile of the
 * flattened image (one-row tiles of a 1x1 layer of at most
 * MT__KVEC_CHANNEL_BLOCK_MAX_PIXELS pixels, work-groups of one work-item,
 * pixel blocks first) channel block by channel block, its tiles'
 * accumulators kept in private memory between blocks; 0 where it does not.
 * Tile by tile over all channels, each tile reads the image's input and its
 * channel group's weights from L2, and on a 7x7 image with hundreds of
 * channels those are what the kernel waits for: alone on a Zen 3 (default
 * config, bench/kernel_anatomy/results/kernel_anatomy_flat7.md) ResNet-50's
 * 2048 -> 512 ran at 62% of the FMA peak, 92-93% with its input or its
 * weights kept in L1, and MobileNetV2's 960 -> 160 at 60%, 77-81%. In
 * blocks, a block's rows and weights stay in L1 across the tiles. At
 * default configs inside the networks, in turns with the build before
 * (2026-12-06, bench/net_ab/results/net_ab_kvec_channel_blocks_*.md,
 * against the drift of the unchanged layers): ResNet-50's 2048 -> 512
 * layers 1.17-1.23x as fast (0.68 ms, 102.8 MFLOP), its 512 -> 2048 ones
 * 1.03-1.08x; MobileNetV2's 960 -> 160 and 960 -> 320 1.14-1.18x, 576 ->
 * 160 1.10x, 320 -> 1280 1.08x. On 14x14 images a hand-written kernel
 * of blocks of 16 or 32 channels ran ResNet-50's 1024 -> 256 and 256 ->
 * 1024 1.10-1.36x slower than the generated 2 x 6 tiles, which reached
 * 86-95% of the peak there (bench_anatomy, 4 rounds in turns). */
static int kvec_channel_block(const mt__rt_plan *p) {
    const int one_row = p->r == 1 && p->s == 1 && p->sh == 1 && p->sw == 1 && p->oh == 1 && p->h == 1;
    const int64_t floats = (int64_t)p->xo * p->kr * p->xr * p->vec;
    if (!one_row || p->ow > MT__KVEC_CHANNEL_BLOCK_MAX_PIXELS || p->xo < 2 || p->kt != 1 || p->xt != 1 || p->yt != 1 || p->yr != 1 ||
        p->c % MT__KVEC_CHANNEL_BLOCK || p->c == MT__KVEC_CHANNEL_BLOCK || floats > MT__KVEC_CHANNEL_BLOCK_MAX_FLOATS || !kvec_pixels_first(p))
        return 0;
    return MT__KVEC_CHANNEL_BLOCK;
}

/* ---- IR building ---- */

typedef struct kvec_builder {
    mt_kernel *k;
    const mt__rt_plan *p;
    mt__conv_io io;
    mt_buffer *acc, *wreg, *ival;
    mt_expr *k0, *y0, *x0;     /* first channel, row and column of the work-item's tile */
    mt_expr *in_img, *out_img; /* offsets of the image in the input and the output */
    mt_expr *wbase[4];         /* weight offset of channel vector j at (c, r, s) = (0, 0, 0) */
    mt_expr *next_w;           /* NULL, or the weight offset at (c, r, s) = (0, 0, 0) of the next
                                  channel group's block this work-group brings into L2 */
    mt_expr *next_if;          /* NULL, or whether it brings one (some work-groups have none) */
    int k_over;                /* tiles overhang k */
    int w_clamp;               /* some vector starts past k16: clamp its weight reads */
    int x_tests;               /* the reduction being built tests columns against the image */
    mt_expr *c_first;          /* NULL, or the first channel of the block the reduction covers */
    int c_count;               /* the channels it covers: p->c, or a block's (kvec_channel_block) */
    int prefetch;              /* the reduction being built prefetches (channel blocks: the first tile's) */
} kvec_builder;

#define KI(b, v) mt_ir_int((b)->k, (v))

/* The input row that kernel row r reads for tile row y. */
static mt_expr *input_row(kvec_builder *b, mt_expr *r, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *first = mt_ir_add(k, mt_ir_add(k, mt_ir_mul(k, b->y0, KI(b, p->sh)), KI(b, -p->ph)), mt_ir_mul(k, r, KI(b, p->dh)));
    return mt_ir_add(k, first, KI(b, (int64_t)y * p->sh));
}

/* The input column that the tile's first pixel reads at tap s = 0. */
static mt_expr *first_col(kvec_builder *b) {
    return mt_ir_add(b->k, mt_ir_mul(b->k, b->x0, KI(b, b->p->sw)), KI(b, -b->p->pw));
}

/* How far past first_col the tile's last tap reads, in input columns. */
static int64_t tile_reach(const mt__rt_plan *p) { return (int64_t)(p->xr - 1) * p->sw + (int64_t)(p->s - 1) * p->dw; }

/* The start of input channel c's plane in this image. */
static mt_expr *channel_plane(kvec_builder *b, mt_expr *c) {
    return mt_ir_add(b->k, b->in_img, mt_ir_mul(b->k, c, KI(b, (int64_t)b->p->h * b->p->w)));
}

/* One tap (c, r, s) of tile row y: the weight vectors, then the row's input
 * values, then per pixel a broadcast and reg_k FMAs.
 *
 * Input values go through the private buffer `ival`, loaded unconditionally
 * from an address that is clamped into the image (the plane's first value
 * when the pixel lies in the padding) and only then replaced by 0. Written
 * as `inside ? in[idx] : 0` the load is conditional in C, which PoCL's LLVM
 * cannot speculate (it cannot prove the address dereferenceable): it became
 * a branch per pixel and tap, with the values staged through the stack, and
 * the 3x3 layers ran at half the speed of the 1x1 ones. A load from a
 * private array can be speculated, so the select becomes a blend. Pixels
 * that cannot leave the image use ival too: one template, one graph shape.
 * Only the column test is made here: the row test is a branch around the
 * row's taps (row_taps). */
static mt_stmt *tap(kvec_builder *b, mt_expr *c, mt_expr *r, mt_expr *s, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_stmt_list list = {0};
    mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, c, KI(b, p->r)), r), KI(b, p->s)), s), KI(b, 16));
    for (int j = 0; j < p->kr; j++)
        mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->wreg, KI(b, (int64_t)j * vec), mt_ir_load_vec(k, b->io.wt, mt_ir_add(k, b->wbase[j], woff), vec)));
    mt_expr *plane = channel_plane(b, c);
    mt_expr *iy = input_row(b, r, y);
    mt_expr *ix0 = mt_ir_add(k, first_col(b), mt_ir_mul(k, s, KI(b, p->dw)));
    mt_expr *conds[MT__KVEC_MAX_PRIVATE_FLOATS];
    for (int x = 0; x < p->xr; x++) {
        mt_expr *ix = mt_ir_add(k, ix0, KI(b, (int64_t)x * p->sw));
        mt_expr *cond = b->x_tests ? mt__range_cond(k, ix, 0, p->w, p->ix_lo, p->ix_hi) : NULL;
        mt_expr *idx = mt_ir_add(k, plane, mt_ir_add(k, mt_ir_mul(k, iy, KI(b, p->w)), ix));
        if (cond) idx = mt_ir_select(k, cond, idx, plane); /* an address inside the image */
        mt_stmt_list_push(k, &list, mt_ir_store(k, b->ival, KI(b, x), mt_ir_load(k, b->io.in, idx)));
        conds[x] = cond;
    }
    for (int x = 0; x < p->xr; x++) {
        mt_expr *v = mt_ir_load(k, b->ival, KI(b, x));
        if (conds[x]) v = mt_ir_select(k, conds[x], v, mt_ir_float(k, 0.0f)); /* the padding reads 0 */
        mt_expr *bv = mt_ir_broadcast(k, v, vec);
        for (int j = 0; j < p->kr; j++) {
            int64_t a = (((int64_t)y * p->xr + x) * p->kr + j) * vec;
            mt_expr *wv = mt_ir_load_vec(k, b->wreg, KI(b, (int64_t)j * vec), vec);
            mt_expr *acc = mt_ir_load_vec(k, b->acc, KI(b, a), vec);
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_fma(k, bv, wv, acc)));
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* Most weight vectors (channel vectors x kernel columns) kept in registers
 * through a kernel row by kvec_column_order. */
#define KVEC_COLUMN_ORDER_MAX_WEIGHT_VECTORS 6

/* Whether a kernel row's taps run column by column (row_columns) rather
 * than tap by tap: the kernel columns unrolled (unroll_rs >= 1), more than
 * one of them, and their weight vectors within
 * KVEC_COLUMN_ORDER_MAX_WEIGHT_VECTORS registers.
 * Tap by tap, the pixels of neighbouring taps read the same input columns
 * (with stride 2, tap s = 2 of pixel x reads what tap 0 of pixel x + 1
 * reads), and PoCL's LLVM loads each column once and keeps its broadcast
 * live from the first tap that reads it to the last: in ResNet-50's 3x3
 * stride-2 layer at 28x28 (one channel vector x 2 rows x 7) six
 * broadcasts, the 14 accumulators and three weight vectors passed AVX2's
 * 16 registers, and seven accumulators went to the stack, a load and a
 * store each per kernel row. Column by column, each input column is loaded
 * and broadcast once and feeds every (pixel, tap) that reads it at once,
 * so one broadcast is live at a time; the row's weight vectors stay in
 * registers. Which configs are valid does not change (the private-float
 * budget of kvec_build counts one tap's weight vectors either way). */
static int kvec_column_order(const mt__rt_plan *p) {
    return p->unroll_rs >= 1 && p->s > 1 && (int64_t)p->kr * p->s <= KVEC_COLUMN_ORDER_MAX_WEIGHT_VECTORS;
}

/* The weight vectors of kernel row r for every kernel column s, into
 * wreg[(s * reg_k + j) * vec] (kvec_column_order). */
static mt_stmt *row_weights(kvec_builder *b, mt_expr *c, mt_expr *r) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt_list list = {0};
    for (int s = 0; s < p->s; s++) {
        mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, c, KI(b, p->r)), r), KI(b, p->s)), KI(b, s)), KI(b, 16));
        for (int j = 0; j < p->kr; j++)
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->wreg, KI(b, ((int64_t)s * p->kr + j) * p->vec),
                                                        mt_ir_load_vec(k, b->io.wt, mt_ir_add(k, b->wbase[j], woff), p->vec)));
    }
    return mt_stmt_list_seq(k, &list);
}

/* Kernel row r of tile row y column by column (kvec_column_order): for
 * each input column o past the tile's first (o = x * stride + s *
 * dilation), its value loaded once (through ival, as in tap), broadcast,
 * and one FMA per channel vector for every (pixel x, tap s) that reads it. */
static mt_stmt *row_columns(kvec_builder *b, mt_expr *c, mt_expr *r, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_stmt_list list = {0};
    mt_expr *plane = channel_plane(b, c);
    mt_expr *iy = input_row(b, r, y);
    mt_expr *ix0 = first_col(b);
    const int64_t reach = tile_reach(p);
    for (int64_t o = 0; o <= reach; o++) {
        int readers = 0;
        for (int x = 0; x < p->xr; x++)
            for (int s = 0; s < p->s; s++) readers += (int64_t)x * p->sw + (int64_t)s * p->dw == o;
        if (!readers) continue;
        mt_expr *ix = mt_ir_add(k, ix0, KI(b, o));
        mt_expr *cond = b->x_tests ? mt__range_cond(k, ix, 0, p->w, p->ix_lo, p->ix_hi) : NULL;
        mt_expr *idx = mt_ir_add(k, plane, mt_ir_add(k, mt_ir_mul(k, iy, KI(b, p->w)), ix));
        if (cond) idx = mt_ir_select(k, cond, idx, plane); /* an address inside the image */
        mt_stmt_list_push(k, &list, mt_ir_store(k, b->ival, KI(b, o), mt_ir_load(k, b->io.in, idx)));
        mt_expr *v = mt_ir_load(k, b->ival, KI(b, o));
        if (cond) v = mt_ir_select(k, cond, v, mt_ir_float(k, 0.0f)); /* the padding reads 0 */
        mt_expr *bv = mt_ir_broadcast(k, v, vec);
        for (int x = 0; x < p->xr; x++)
            for (int s = 0; s < p->s; s++) {
                if ((int64_t)x * p->sw + (int64_t)s * p->dw != o) continue;
                for (int j = 0; j < p->kr; j++) {
                    const int64_t a = (((int64_t)y * p->xr + x) * p->kr + j) * vec;
                    mt_expr *wv = mt_ir_load_vec(k, b->wreg, KI(b, ((int64_t)s * p->kr + j) * vec), vec);
                    mt_expr *acc = mt_ir_load_vec(k, b->acc, KI(b, a), vec);
                    mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_fma(k, bv, wv, acc)));
                }
            }
    }
    return mt_stmt_list_seq(k, &list);
}

/* The taps s of kernel row r for tile row y, behind one branch on whether
 * the input row lies inside the image (a padding row adds nothing). With
 * the row test inside each value's select instead, every input value of
 * every tap was a masked load and a broadcast from a register, which runs
 * on the port that AVX-512 FMAs also need. */
static mt_stmt *row_taps(kvec_builder *b, mt_expr *c, mt_expr *r, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt *taps;
    if (kvec_column_order(p)) {
        taps = row_columns(b, c, r, y);
    } else {
        mt__opt_loop ls;
        mt_expr *s = mt__loop_begin(k, &ls, "s", p->s, p->unroll_rs >= 1 ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
        taps = mt__loop_end(k, &ls, tap(b, c, r, s, y));
    }
    mt_expr *ycond = mt__range_cond(k, input_row(b, r, y), 0, p->h, p->iy_lo, p->iy_hi);
    return ycond ? mt_ir_if(k, ycond, taps, NULL) : taps;
}

/* How many channels ahead prefetch_row reads: on 1x1 layers twice
 * MT__PREFETCH_CHANNELS. Their steps are short (one tap per channel), and
 * where the input passes L2 with the weights (ResNet-50's 2048 -> 512 at
 * 7x7: 401 KiB of input, a core's L2 512 KiB on a Zen 3) its rows come from
 * L3 later than 8 steps ahead. At default configs on a Zen 3 (3 rounds in
 * turns with 8, 2026-12-06,
 * bench/net_ab/results/net_ab_kvec_pf16_{resnet50,mobilenet_v2}.md)
 * that layer ran 1.11-1.14x as fast, ResNet-50's other kvec 1x1 layers
 * 1.00-1.05x, MobileNetV2's 1.00-1.03x. */
static int kvec_input_prefetch_channels(const mt__rt_plan *p) { return p->r == 1 && p->s == 1 ? 2 * MT__PREFETCH_CHANNELS : MT__PREFETCH_CHANNELS; }

/* The input row segment that kernel row r reads for tile row y in channel
 * c + kvec_input_prefetch_channels, prefetched (see kvec_prefetches_input): one
 * prefetch per cache line it can touch, at its first float, every 16 floats
 * on and at its last. Prefetching only the first float left the segment's
 * second line (14 floats start anywhere in a line) to a miss at full
 * latency. The channel is not clamped to the last one: a prefetch does not
 * fault, on x86-64 (the only target that gets them) not even past the
 * buffer, and the clamp cost a compare, a move and a multiply per prefetch
 * in the loop's hottest part. ResNet-50's 256 -> 64 1x1 layer at 56x56,
 * default config (median process CPU time per run, 80 runs each in turns,
 * one OpenCL host program): 1.02 ms with one clamped prefetch, 0.76 with
 * these; its 512 -> 128 layer at 28x28 0.77 against 0.68 ms. Prefetching 16
 * or 32 channels ahead instead of 8 changed nothing beyond noise there (on
 * a Xeon with 2 MiB of L2 per core). */
static mt_stmt *prefetch_row(kvec_builder *b, mt_expr *c, mt_expr *r, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *ahead = mt_ir_add(k, c, KI(b, kvec_input_prefetch_channels(p)));
    mt_expr *row = mt_ir_add(k, mt_ir_mul(k, input_row(b, r, y), KI(b, p->w)), first_col(b));
    mt_expr *start = mt_ir_add(k, channel_plane(b, ahead), row);
    return mt__prefetch_run(k, b->io.in, start, tile_reach(p), 0);
}

/* The weights of every 16-channel block the work-item reads, at (c +
 * MT__PREFETCH_CHANNELS, r): the s cache lines of one kernel row (OIHW16o:
 * a tap's 16 channels are one line). In a network every layer finds its
 * weights in L3 or memory, where the hardware prefetcher alone left the
 * 7x7 and 14x14 layers of ResNet-50 (weights 1-9 MiB, streamed once per
 * row of work-groups) at 50-60% of the FMA peak. With this prefetch, in
 * the network with its tuned configs, its 3x3 7x7 layers ran 1.20-1.26x as
 * fast, its 3x3 14x14 ones 1.02-1.10x and its 1x1 14x14 ones 1.01-1.08x;
 * ResNet-18's 3x3 7x7 layers 1.18-1.21x, VGG-16's 14x14 ones 1.09x
 * (bench/net_ab/results/net_ab_weight_prefetch_*.md). Tiles of fewer than
 * 16 channels share one block's line. */
static mt_stmt *prefetch_weights(kvec_builder *b, mt_expr *c, mt_expr *r) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *ahead = mt_ir_add(k, c, KI(b, MT__PREFETCH_CHANNELS));
    mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, ahead, KI(b, p->r)), r), KI(b, (int64_t)p->s * 16));
    mt_stmt_list list = {0};
    for (int j = 0; j < p->kr; j += mt__vectors_per_weight_line(p->vec))
        mt_stmt_list_push(k, &list, mt__prefetch_run(k, b->io.wt, mt_ir_add(k, b->wbase[j], woff), (int64_t)(p->s - 1) * 16, 1));
    return mt_stmt_list_seq(k, &list);
}

/* Work-groups that share one channel group's weights: its pixel blocks. */
static int64_t kvec_group_work_groups(const mt__rt_plan *p) { return (int64_t)p->n * p->yo * p->xo; }

/* Bytes of one channel group's weights (a work-group's kt * kr * vec
 * channels, all c, r, s) past which the next group's are not brought into
 * L2 ahead: the two groups' weights share a core's L2 (2 MiB on the Xeon
 * this was measured on) with the input rows and the output. Inside
 * ResNet-50 with its tuned configs, the layers with groups of 32-256 KiB
 * ran 1.01-1.08x as fast, those with 295 and 512 KiB groups 0.97-1.04x
 * (bench/net_ab/results/net_ab_next_weights_resnet50.md). */
#define MT__KVEC_NEXT_WEIGHTS_MAX_BYTES (256 * 1024)

/* The 16-channel blocks of a channel group whose work-groups bring the
 * next group's weights into L2, or 0 where they do not.
 * When pixel blocks run first (kvec_pixels_first), the work-groups of one
 * channel group run one after another on a core and share its weights: the
 * first of them streams them from L3 or memory and the others find them in
 * L2 (alone, ResNet-50's 7x7 1x1 layers ran at 77-79% of the FMA peak and
 * at 87-89% with their weights in cache: bench/kernel_anatomy). Instead, the
 * first nb work-groups of a group (nb: its 16-channel blocks) each fetch
 * one block of the next group's weights into L2 (prefetcht1), a kernel row
 * per (c, r), while they compute; the next group then starts with its
 * weights in L2. Needs as many work-groups per group as blocks, blocks
 * whole (kt * kr * vec a multiple of 16), more than one group, and a
 * group's weights within MT__KVEC_NEXT_WEIGHTS_MAX_BYTES. */
static int64_t kvec_next_weight_blocks(const mt__rt_plan *p) {
    const int64_t span = (int64_t)p->kt * p->kr * p->vec;
    if (!kvec_pixels_first(p) || span % 16 || p->ko < 2 || p->c <= MT__PREFETCH_CHANNELS) return 0;
    const int fits = kvec_group_work_groups(p) >= span / 16 && (int64_t)p->c * p->r * p->s * span * 4 <= MT__KVEC_NEXT_WEIGHTS_MAX_BYTES;
    return fits ? span / 16 : 0;
}

/* The next group's block for this work-group at (c, r) (see kvec_next_weight_blocks). */
static mt_stmt *prefetch_next_weights(kvec_builder *b, mt_expr *c, mt_expr *r) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, c, KI(b, p->r)), r), KI(b, (int64_t)p->s * 16));
    mt_stmt *run = mt__prefetch_run_outer(k, b->io.wt, mt_ir_add(k, b->next_w, woff), (int64_t)(p->s - 1) * 16, 1);
    return b->next_if ? mt_ir_if(k, b->next_if, run, NULL) : run;
}

/* Whether kvec prefetches its input rows: on planes above 512 bytes (14x14
 * and larger), a lower bound than gemm's mt__prefetch_planes, and on 1x1
 * layers whatever their planes; not where every prefetch would read past
 * the input (the stems' 3 channels: there they only touched other pages). Inside a
 * network a layer's input was written by the layer before and sits in L2
 * or L3, one row segment per channel h*w floats apart. With the bound at
 * 512 instead of 2048 bytes, tuned configs in turns inside the networks (4
 * rounds; bench/net_ab/results/net_ab_kvec_input_prefetch_*.md):
 * ResNet-50's 1x1 layers at 14x14 ran 1.11-1.22x as fast and its 3x3 ones
 * 1.04-1.10x while its unchanged layers drifted 1.03-1.06x, MobileNetV2's
 * 1x1 layers at 14x14 1.08-1.32x, ResNet-18's 14x14 3x3 layers 1.00-1.01x;
 * the networks 1.07x, 1.06x and 0.99x. In a first run (not kept) a bound
 * that took 7x7 planes too (196 bytes) made ResNet-50's 3x3 7x7 layers 3%
 * slower. On 7x7 1x1 layers alone, with the refined databases in turns
 * (bench/net_ab/results/net_ab_input_prefetch_1x1_7x7_*.md), MobileNetV2's
 * ran 1.03-1.07x as fast (its other layers 0.97-1.02x) and ResNet-50's
 * 2048 -> 512 ones 1.03-1.05x against a drift of 0.95-0.98x on the
 * others. */
static int kvec_prefetches_input(const mt__rt_plan *p) { return ((int64_t)p->h * p->w * 4 > 512 || (p->r == 1 && p->s == 1)) && p->c > kvec_input_prefetch_channels(p); }

static mt_stmt *reduction_loops(kvec_builder *b) {
    const mt__rt_plan *p = b->p;
    mt__opt_loop lc, lr;
    mt_expr *c = mt__loop_begin(b->k, &lc, "c", b->c_count, MT_LOOP_SERIAL);
    if (b->c_first) c = mt_ir_add(b->k, b->c_first, c);
    mt_expr *r = mt__loop_begin(b->k, &lr, "r", p->r, p->unroll_rs >= 2 ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    mt_stmt_list rows = {0};
    if (kvec_prefetches_input(p) && b->prefetch)
        for (int y = 0; y < p->yr; y++) mt_stmt_list_push(b->k, &rows, prefetch_row(b, c, r, y));
    if (p->c > MT__PREFETCH_CHANNELS && b->prefetch) mt_stmt_list_push(b->k, &rows, prefetch_weights(b, c, r));
    if (b->next_w && b->prefetch) mt_stmt_list_push(b->k, &rows, prefetch_next_weights(b, c, r));
    if (kvec_column_order(p)) mt_stmt_list_push(b->k, &rows, row_weights(b, c, r));
    for (int y = 0; y < p->yr; y++) mt_stmt_list_push(b->k, &rows, row_taps(b, c, r, y));
    /* The tap registers are declared once for all rows (each row's taps reuse them). */
    mt_stmt *body = mt_ir_alloc(b->k, b->wreg, mt_ir_alloc(b->k, b->ival, mt_stmt_list_seq(b->k, &rows)));
    return mt__loop_end(b->k, &lc, mt__loop_end(b->k, &lr, body));
}

/* Most edge tiles a kernel gets a reduction of its own for (see reduction). */
#define KVEC_MAX_EDGE_COPIES 4

/* The reduction, where a tile's columns can leave the image, once without
 * column tests for the tiles whose every tap reads inside the image's
 * columns, and once for each tile at the left or right edge with that
 * tile's first column as a constant (one uniform branch per work-item). A
 * tile that covers a whole row has constant columns and only the second.
 * With its columns constant, an edge tile's tests fold away once s is
 * unrolled: the taps in the padding read nothing and the others read
 * without a select. One reduction with the tests made at run time instead
 * kept a clamped address and a condition live per (pixel, tap), more than
 * the registers hold: in a 3x3 stride-2 kernel of 7-pixel tiles its edge
 * tiles ran 3x slower than the interior ones (ResNet-50's layer2.0.conv2,
 * 4.1 against 1.4 ms with every tile taking one path or the other, its data
 * in cache), so a quarter of the tiles took 40% of the time. More edge
 * tiles than KVEC_MAX_EDGE_COPIES share that run-time tested reduction. */
static mt_stmt *reduction(kvec_builder *b) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    b->x_tests = p->ix_lo || p->ix_hi;
    const int64_t tiles = (int64_t)p->xo * p->xt;
    if (!b->x_tests || tiles < 2) return reduction_loops(b);
    const int64_t reach = tile_reach(p);
    int64_t edge[KVEC_MAX_EDGE_COPIES];
    int edges = 0;
    for (int64_t t = 0; t < tiles && edges >= 0; t++) {
        const int64_t first = t * p->xr * p->sw - p->pw;
        if (first >= 0 && first + reach < p->w) continue;
        if (edges == KVEC_MAX_EDGE_COPIES) edges = -1;
        else edge[edges++] = t * p->xr;
    }
    mt_stmt *at_edges = NULL;
    if (edges < 0) {
        at_edges = reduction_loops(b);
    } else {
        mt_expr *x0 = b->x0;
        for (int i = edges - 1; i >= 0; i--) {
            b->x0 = KI(b, edge[i]);
            mt_stmt *copy = reduction_loops(b);
            b->x0 = x0;
            at_edges = at_edges ? mt_ir_if(k, mt_ir_bin(k, MT_OP_EQ, x0, KI(b, edge[i])), copy, at_edges) : copy;
        }
    }
    b->x_tests = 0;
    mt_stmt *inside = reduction_loops(b);
    b->x_tests = 1;
    mt_expr *ix_first = first_col(b);
    mt_expr *ix_last = mt_ir_add(k, ix_first, KI(b, reach));
    mt_expr *interior = mt_ir_and(k, mt_ir_ge(k, ix_first, KI(b, 0)), mt_ir_lt(k, ix_last, KI(b, p->w)));
    return mt_ir_if(k, interior, inside, at_edges);
}

/* Accumulator of lane l of channel vector j at tile pixel (y, x). */
static int64_t acc_at(const mt__rt_plan *p, int y, int x, int j, int l) { return (((int64_t)y * p->xr + x) * p->kr + j) * p->vec + l; }

/* Row y of the tile, one output at a time: lane l of vector j is channel
 * k0 + j*vec + l, a different plane of the NCHW output for every lane. Used
 * where the tile overhangs the row's end (pixels past ow are skipped). */
static mt_stmt *store_row_lanes(kvec_builder *b, int y, mt_expr *oy) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int64_t plane = (int64_t)p->oh * p->ow;
    mt_stmt_list list = {0};
    for (int x = 0; x < p->xr; x++) {
        mt_expr *ox = mt_ir_add(k, b->x0, KI(b, x));
        mt_expr *pcond = p->x_over ? mt_ir_lt(k, ox, KI(b, p->ow)) : NULL;
        mt_expr *pix = mt_ir_add(k, b->out_img, mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), ox));
        mt_stmt_list lanes = {0};
        for (int j = 0; j < p->kr; j++) {
            for (int l = 0; l < p->vec; l++) {
                mt_expr *ch = mt_ir_add(k, b->k0, KI(b, (int64_t)j * p->vec + l));
                mt_expr *idx = mt_ir_add(k, pix, mt_ir_mul(k, ch, KI(b, plane)));
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, mt_ir_load(k, b->acc, KI(b, acc_at(p, y, x, j, l))), ch, idx, 1);
                mt_stmt *st = mt_ir_store(k, b->io.out, idx, val);
                if (b->k_over) st = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->k)), st, NULL);
                mt_stmt_list_push(k, &lanes, st);
            }
        }
        mt_stmt *all = mt_stmt_list_seq(k, &lanes);
        mt_stmt_list_push(k, &list, pcond ? mt_ir_if(k, pcond, all, NULL) : all);
    }
    return mt_stmt_list_seq(k, &list);
}

/* Largest block of pixels transposed at once: a power of two, at most the
 * vector width and at least the row's reg_x (or the vector width). */
static int transpose_block(const mt__rt_plan *p) {
    int bl = 1;
    while (bl < p->xr && bl < p->vec) bl *= 2;
    return bl;
}

/* Row y of the tile transposed into `tb`: tb[ch * xrp + x] = channel ch
 * (0 .. kr*vec) of tile column x, xrp = reg_x rounded up to the block. Per
 * block of bl pixels and bl channels: bl vectors (the pixels' pieces of
 * bl channels; zero past reg_x) swap their off-diagonal halves at block
 * sizes bl/2 .. 1, one two-source shuffle per vector and step. */
static mt_stmt *transpose_row(kvec_builder *b, mt_buffer *tb, int y) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int bl = transpose_block(p), xrp = (p->xr + bl - 1) / bl * bl;
    mt_stmt_list list = {0};
    mt_expr *m[16];
    int mask_lo[16], mask_hi[16];
    if (bl == 1) { /* one column: tb is the tile row's accumulators as they lie */
        for (int64_t ch = 0; ch < (int64_t)p->kr * p->vec; ch++)
            mt_stmt_list_push(k, &list, mt_ir_store(k, tb, KI(b, ch), mt_ir_load(k, b->acc, KI(b, acc_at(p, y, 0, (int)(ch / p->vec), (int)(ch % p->vec))))));
        return mt_stmt_list_seq(k, &list);
    }
    for (int j = 0; j < p->kr; j++)
        for (int g = 0; g < p->vec / bl; g++)
            for (int x0 = 0; x0 < p->xr; x0 += bl) {
                for (int i = 0; i < bl; i++)
                    m[i] = x0 + i < p->xr ? mt_ir_load_vec(k, b->acc, KI(b, acc_at(p, y, x0 + i, j, g * bl)), bl)
                                          : mt_ir_broadcast(k, mt_ir_float(k, 0.0f), bl);
                for (int h = bl / 2; h >= 1; h /= 2) {
                    for (int l = 0; l < bl; l++) {
                        mask_lo[l] = (l & h) ? bl + (l ^ h) : l;
                        mask_hi[l] = (l & h) ? bl + l : l ^ h;
                    }
                    for (int i = 0; i < bl; i++) {
                        if (i & h) continue;
                        mt_expr *lo = mt_ir_shuffle(k, m[i], m[i ^ h], mask_lo), *hi = mt_ir_shuffle(k, m[i], m[i ^ h], mask_hi);
                        m[i] = lo, m[i ^ h] = hi;
                    }
                }
                for (int l = 0; l < bl; l++) {
                    const int64_t ch = (int64_t)j * p->vec + g * bl + l;
                    mt_stmt_list_push(k, &list, mt_ir_store_vec(k, tb, KI(b, ch * xrp + x0), m[l]));
                }
            }
    return mt_stmt_list_seq(k, &list);
}

/* Row y of the tile, channel by channel: one channel's reg_x outputs are
 * neighbours in NCHW, so they go out as vector stores (chunks of 16, 8, 4, 2
 * and 1 columns) given the epilogue as a vector (one bias, one residual
 * vector load). Stored lane by lane instead, every output cost its own
 * address, epilogue and scalar store. Inside ResNet-50
 * (bench/net_ab/results/net_ab.md, against lane-by-lane stores) the kvec layers ran
 * 1.05-1.36x faster (most on the 1x1 layers with short reductions), except
 * one strided 3x3 layer whose 4-column tiles ran 0.90x, and the
 * convolutions 1.09x. The columns of a channel are brought together by a
 * transposition in registers (transpose_row) rather than gathered lane by
 * lane from the accumulators: ResNet-50's default 1x1 kernel (2 channel
 * vectors x 14 columns) went from 2724 to 1903 instructions, and alone
 * MobileNetV2's and ResNet-50's kvec 1x1 layers with reductions of 64 to
 * 256 channels ran 1.03-1.25x faster (median of the per-round ratios, 15
 * rounds in turns, 2026-12-03); inside ResNet-50 at default configs they
 * moved with the unchanged layers (1.10 against 1.07-1.11,
 * bench/net_ab/results/net_ab_kvec_transpose_resnet50.md). The same
 * transposition printed with OpenCL's shuffle2 had made no difference
 * (see ir/print_c.c on shuffles). */
static mt_stmt *store_row_vectors(kvec_builder *b, int y, mt_expr *oy) {
    static const int chunk[] = {16, 8, 4, 2, 1};
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    const int64_t plane = (int64_t)p->oh * p->ow;
    const int bl = transpose_block(p), xrp = (p->xr + bl - 1) / bl * bl;
    mt_buffer *tb = mt_ir_buffer(k, "tr", MT_SCOPE_PRIVATE, (int64_t)p->kr * p->vec * xrp);
    mt_expr *row = mt_ir_add(k, b->out_img, mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), b->x0));
    mt_stmt_list list = {0};
    mt_stmt_list_push(k, &list, transpose_row(b, tb, y));
    for (int j = 0; j < p->kr; j++) {
        for (int l = 0; l < p->vec; l++) {
            const int64_t chi = (int64_t)j * p->vec + l;
            mt_expr *ch = mt_ir_add(k, b->k0, KI(b, chi));
            mt_expr *first = mt_ir_add(k, row, mt_ir_mul(k, ch, KI(b, plane)));
            mt_stmt_list cols = {0};
            for (int x = 0, c = 0; x < p->xr; x += chunk[c]) {
                while (chunk[c] > p->xr - x) c++;
                const int n = chunk[c];
                mt_expr *a = KI(b, chi * xrp + x);
                mt_expr *v = n == 1 ? mt_ir_load(k, tb, a) : mt_ir_load_vec(k, tb, a, n);
                mt_expr *idx = mt_ir_add(k, first, KI(b, x));
                mt_expr *val = mt__epilogue_apply(k, &b->io.epi, v, ch, idx, n);
                mt_stmt_list_push(k, &cols, n == 1 ? mt_ir_store(k, b->io.out, idx, val) : mt_ir_store_vec(k, b->io.out, idx, val));
            }
            mt_stmt *st = mt_stmt_list_seq(k, &cols);
            if (b->k_over) st = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->k)), st, NULL);
            mt_stmt_list_push(k, &list, st);
        }
    }
    return mt_ir_alloc(k, tb, mt_stmt_list_seq(k, &list));
}

/* Stores the tile row by row: as vectors along the row where the tile's
 * columns all lie inside the image (always, unless tiles overhang ow), else
 * lane by lane. Rows past oh are skipped. */
static mt_stmt *store_tile(kvec_builder *b) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt_list list = {0};
    mt_expr *x_full = p->x_over ? mt_ir_lt(k, b->x0, KI(b, (int64_t)p->ow - p->xr + 1)) : NULL;
    for (int y = 0; y < p->yr; y++) {
        mt_expr *oy = mt_ir_add(k, b->y0, KI(b, y));
        mt_expr *ycond = p->y_over ? mt_ir_lt(k, oy, KI(b, p->oh)) : NULL;
        mt_stmt *row = x_full ? mt_ir_if(k, x_full, store_row_vectors(b, y, oy), store_row_lanes(b, y, oy)) : store_row_vectors(b, y, oy);
        mt_stmt_list_push(k, &list, ycond ? mt_ir_if(k, ycond, row, NULL) : row);
    }
    return mt_stmt_list_seq(k, &list);
}

/* Accumulators of tile t between `saved` (at t * nacc) and `acc` (registers):
 * into acc, or back into saved (to_saved). */
static mt_stmt *copy_tile_acc(kvec_builder *b, mt_buffer *saved, mt_expr *t, int64_t nacc, int to_saved) {
    mt_kernel *k = b->k;
    const int vec = b->p->vec;
    mt_expr *at = mt_ir_mul(k, t, KI(b, nacc));
    mt_stmt_list list = {0};
    for (int64_t a = 0; a < nacc; a += vec) {
        mt_expr *slot = mt_ir_add(k, at, KI(b, a));
        mt_stmt_list_push(k, &list, to_saved ? mt_ir_store_vec(k, saved, slot, mt_ir_load_vec(k, b->acc, KI(b, a), vec))
                                             : mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_load_vec(k, saved, slot, vec)));
    }
    return mt_stmt_list_seq(k, &list);
}

/* body for tile t: with b->x0 its first column and acc declared around it. */
static mt_stmt *in_tile(kvec_builder *b, mt_var *x0, mt_expr *t, mt_stmt *body) {
    return mt_ir_let(b->k, x0, mt_ir_mul(b->k, t, KI(b, b->p->xr)), mt_ir_alloc(b->k, b->acc, body));
}

/* The work of a work-item that runs all p->xo tiles of its image in channel
 * blocks (kvec_channel_block): tile t's accumulators live in `saved` at t *
 * nacc between blocks and are copied into `acc` (registers) around each
 * block's reduction and before its store. */
static mt_stmt *channel_blocked_tiles(kvec_builder *b, int cblock, int64_t nacc) {
    const mt__rt_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_buffer *saved = mt_ir_buffer(k, "saved", MT_SCOPE_PRIVATE, p->xo * nacc);
    mt_stmt *init = mt__zero_fill(k, saved, p->xo * nacc, p->vec);

    /* Block by block, tile by tile: the reduction over the block's channels. */
    mt__opt_loop lb, lt;
    mt_expr *blk = mt__loop_begin(k, &lb, "cb", p->c / cblock, MT_LOOP_SERIAL);
    mt_expr *t = mt__loop_begin(k, &lt, "t", p->xo, MT_LOOP_SERIAL);
    mt_var *x0 = mt_ir_var(k, "x0", MT_TYPE_INT);
    b->x0 = mt_ir_v(k, x0);
    b->c_first = mt_ir_mul(k, blk, KI(b, cblock));
    b->c_count = cblock;
    /* The first tile brings the block's rows and weights into L1 (and the
     * next group's into L2); the others find them there. */
    mt_stmt *first = reduction(b);
    b->prefetch = 0;
    mt_stmt *others = reduction(b);
    b->prefetch = 1;
    mt_stmt *red = mt_ir_if(k, mt_ir_bin(k, MT_OP_EQ, t, KI(b, 0)), first, others);
    mt_stmt *reduce = in_tile(b, x0, t, mt_ir_seq2(k, mt_ir_seq2(k, copy_tile_acc(b, saved, t, nacc, 0), red), copy_tile_acc(b, saved, t, nacc, 1)));
    mt_stmt *blocks = mt__loop_end(k, &lb, mt__loop_end(k, &lt, reduce));

    /* Then each tile's store. */
    mt__opt_loop ls;
    mt_expr *ts = mt__loop_begin(k, &ls, "t", p->xo, MT_LOOP_SERIAL);
    mt_var *xs = mt_ir_var(k, "x0", MT_TYPE_INT);
    b->x0 = mt_ir_v(k, xs);
    mt_stmt *stores = mt__loop_end(k, &ls, in_tile(b, xs, ts, mt_ir_seq2(k, copy_tile_acc(b, saved, ts, nacc, 0), store_tile(b))));
    return mt_ir_alloc(k, saved, mt_ir_seq2(k, mt_ir_seq2(k, init, blocks), stores));
}

static mt_status kvec_build_plan(const mt__rt_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_kvec");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "kvec: out of memory");
    kvec_builder bb = {.k = k, .p = p, .c_count = p->c, .prefetch = 1};
    kvec_builder *b = &bb;
    const int vec = p->vec;
    const int64_t in_elems = (int64_t)p->n * p->c * p->h * p->w;
    const int64_t w_elems = (int64_t)p->k16 * p->c * p->r * p->s;
    const int64_t out_elems = (int64_t)p->n * p->k * p->oh * p->ow;
    mt__conv_io_params(k, &b->io, in_elems, w_elems, out_elems, p->k, p->epi);
    const int64_t nacc = (int64_t)p->kr * p->yr * p->xr * vec;
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, nacc);
    const int column_order = kvec_column_order(p);
    b->wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, (int64_t)p->kr * vec * (column_order ? p->s : 1));
    b->ival = mt_ir_buffer(k, "ival", MT_SCOPE_PRIVATE, column_order ? tile_reach(p) + 1 : p->xr);

    const int64_t kspan = (int64_t)p->ko * p->kt * p->kr * vec;
    b->k_over = kspan > p->k;
    b->w_clamp = kspan > p->k16;

    /* In channel blocks a work-item runs its image's tiles itself: one column block. */
    const int cblock = kvec_channel_block(p);
    mt__rt_plan launch = *p;
    if (cblock) launch.xo = 1;
    mt__rt_launch ln;
    mt__rt_launch_begin(k, &launch, p->n, &ln);
    if (kvec_pixels_first(p)) ln.group[2].axis = 0, ln.group[0].axis = 2;

    mt__let_chain l = {0};
    mt_expr *img = mt__let_bind(k, &l, "img", mt_ir_div(k, ln.bz, KI(b, p->yo)));
    mt_expr *yblk = mt_ir_mod(k, ln.bz, KI(b, p->yo));
    b->k0 = mt__let_bind(k, &l, "k0", mt_ir_add(k, mt_ir_mul(k, ln.bk, KI(b, (int64_t)p->kt * p->kr * vec)), mt_ir_mul(k, ln.tk, KI(b, (int64_t)p->kr * vec))));
    b->y0 = mt__let_bind(k, &l, "y0", mt_ir_add(k, mt_ir_mul(k, yblk, KI(b, (int64_t)p->yt * p->yr)), mt_ir_mul(k, ln.ty, KI(b, p->yr))));
    b->x0 = mt__let_bind(k, &l, "x0", mt_ir_add(k, mt_ir_mul(k, ln.bx, KI(b, (int64_t)p->xt * p->xr)), mt_ir_mul(k, ln.tx, KI(b, p->xr))));
    b->in_img = mt__let_bind(k, &l, "in_base", mt_ir_mul(k, img, KI(b, (int64_t)p->c * p->h * p->w)));
    b->out_img = mt__let_bind(k, &l, "out_base", mt_ir_mul(k, img, KI(b, (int64_t)p->k * p->oh * p->ow)));
    const int64_t block_stride = (int64_t)p->c * p->r * p->s * 16;
    for (int j = 0; j < p->kr; j++) {
        /* Channel vector j starts at k0 + j*vec; past the layout's channels
         * it reads the last block instead (and is never stored). */
        mt_expr *first = mt_ir_add(k, b->k0, KI(b, (int64_t)j * vec));
        if (b->w_clamp) first = mt_ir_min(k, first, KI(b, p->k16 - vec));
        char name[16];
        snprintf(name, sizeof name, "wb%d", j);
        b->wbase[j] = mt__let_bind(k, &l, name, mt_ir_add(k, mt_ir_mul(k, mt_ir_div(k, first, KI(b, 16)), KI(b, block_stride)), mt_ir_mod(k, first, KI(b, 16))));
    }
    /* In channel blocks a group's work-groups are its images' (launch.xo = 1). */
    const int64_t blocks = kvec_next_weight_blocks(&launch);
    if (blocks > 0) {
        /* Pixel blocks first: work-group axis 0 is bz (images x row blocks),
         * then bx; the work-group's place among its group's is bz + bx * n * yo. */
        mt_expr *place = mt__let_bind(k, &l, "wg_place", mt_ir_add(k, ln.bz, mt_ir_mul(k, ln.bx, KI(b, (int64_t)p->n * p->yo))));
        mt_expr *block = mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, ln.bk, KI(b, 1)), KI(b, blocks)), place);
        b->next_w = mt__let_bind(k, &l, "wnext", mt_ir_mul(k, block, KI(b, block_stride)));
        if (kvec_group_work_groups(&launch) > blocks) b->next_if = mt_ir_lt(k, place, KI(b, blocks));
    }

    mt_stmt *work;
    if (cblock) {
        work = channel_blocked_tiles(b, cblock, nacc);
    } else {
        mt_stmt *init = mt__zero_fill(k, b->acc, nacc, vec);
        work = mt_ir_alloc(k, b->acc, mt_ir_seq2(k, mt_ir_seq2(k, init, reduction(b)), store_tile(b)));
    }
    mt_stmt *body = mt__rt_launch_end(k, &ln, mt__let_wrap(k, &l, work));
    return mt__rt_finish(k, body, p, 0, "kvec", out, err, errlen);
}

static mt_status kvec_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                            char *err, size_t errlen) {
    if (!kvec_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "kvec: grouped convolutions are not supported");
    mt__rt_plan p;
    kvec_canon(wl, &p);
    mt__rt_plan_read_tiles(&p, sp, cfg);
    kvec_flatten(wl, &p);
    p.vec = mt_config_value(sp, cfg, "vec");
    p.unroll_rs = mt_config_value(sp, cfg, "unroll_rs");
    p.unroll_explicit = mt_config_value(sp, cfg, "unroll_explicit");
    p.epi = epi;
    if (p.kt < 1 || p.vec < 1 || 16 % p.vec || p.kr < 1 || p.kr > 4 || p.yt < 1 || p.yr < 1 || p.xt < 1 || p.xr < 1 || p.unroll_rs < 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "kvec: config does not match this workload's space");
    if ((int64_t)p.kr * p.vec > p.k16)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "kvec: %d channel vectors of %d exceed the %d channels (padded to 16)", p.kr, p.vec, p.k16);
    int64_t priv = (int64_t)p.kr * p.vec * ((int64_t)p.yr * p.xr + 1);
    if (priv > MT__KVEC_MAX_PRIVATE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "kvec: %lld private floats per work-item (%dx%d pixels x %d vectors of %d) exceed %d",
                        (long long)priv, p.yr, p.xr, p.kr, p.vec, MT__KVEC_MAX_PRIVATE_FLOATS);
    p.ko = (int)((p.k + (int64_t)p.kt * p.kr * p.vec - 1) / ((int64_t)p.kt * p.kr * p.vec));
    mt__rt_plan_cover(&p);
    return kvec_build_plan(&p, out, err, errlen);
}

const mt_template mt__template_kvec = {
    /* .name    = */ "kvec",
    /* .accepts = */ kvec_accepts,
    /* .space   = */ kvec_space,
    /* .build   = */ kvec_build,
    /* .weights = */ MT_WEIGHTS_OIHW16O,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
