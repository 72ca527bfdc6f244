/* Private: what the templates share. The tiled direct-convolution kernel
 * of the `direct` and `depthwise` templates (ir/tmpl_direct.c,
 * ir/tmpl_depthwise.c) and their common knobs; every template's kernel
 * parameters and fused epilogue; the plan, the knobs and the IR-building
 * functions of the register-tile templates `gemm` and `kvec`.
 *
 * The tiled kernel follows AutoTVM's CUDA schedules (conv2d_nchw.cuda and
 * depthwise_conv2d_nchw.cuda): each output axis f (channels), y (rows) and
 * x (columns) is split into block x vthread x thread x inner; each work-item
 * keeps a private accumulator tile of (vf*fi) x (vy*yi) x (vx*xi) outputs, runs
 * the reduction rc_outer > ry_outer > rx_outer > rc_inner > ry_inner > rx_inner,
 * and stores its tile once at the end. Optionally the input patch and the
 * weights of each outer reduction step (rc_outer, ry_outer, rx_outer, where
 * AutoTVM attaches them) are staged in local memory by the whole work-group
 * (AutoTVM's shared-memory stages AA and WW).
 *
 * The header has no state. */
#ifndef MTGPU_TMPL_COMMON_H
#define MTGPU_TMPL_COMMON_H

#include <stddef.h>

#include "ir.h"
#include "space.h"
#include "template.h"
#include "mtgpu/workload.h"

/* Accumulators per work-item above which a register tile is rejected as
 * unrealisable (MT_INVALID_CONFIG), whatever the device. */
#define MT__TILE_MAX_PRIVATE_FLOATS 256

typedef struct mt__tile_sched {
    int f[4], y[4], x[4];      /* output splits, outermost first: block, vthread, thread, inner */
    int rc[2], ry[2], rx[2];   /* reduction splits: outer, inner (depthwise: rc = {1,1}) */
    int vec;                   /* lanes along the inner x tile: 1, 2, 4, 8 (16) */
    int stage_local;           /* stage input patch and weights of each outer reduction step in local memory */
    int auto_unroll_max_step;  /* mt_ir_auto_unroll */
    int unroll_explicit;       /* mt_kernel.unroll_explicit */
    int depthwise;             /* groups == c == k: output channel f reads input channel f only */
    const mt_conv_epilogue *epi; /* applied to every output before its store; NULL: none */
} mt__tile_sched;

/* ---- the tiled templates' knobs (direct, depthwise) ---- */

/* Adds their first knobs: tile_f (split of f_extent output channels), tile_y
 * and tile_x (of the output height and width), each in 4 parts: block,
 * vthread, thread, inner. Returns the first failure. */
mt_status mt__tile_space_splits(mt_space *sp, const mt_workload *wl, int f_extent);
/* Adds their last knobs: auto_unroll_max_step (the 3 options of `unroll`),
 * unroll_explicit {0, 1}, vec {1, 2, 4, 8}, stage_local {0, 1}. */
mt_status mt__tile_space_options(mt_space *sp, const int unroll[3]);
/* Reads the knobs of both into s (tile_f, tile_y, tile_x into s->f, s->y,
 * s->x); MT_INVALID_ARG (with err) when a split knob is missing. */
mt_status mt__tile_sched_read(const mt_space *sp, const mt_config *cfg, mt__tile_sched *s, char *err, size_t errlen);

/* ---- parameters and fused epilogues, shared by every template ---- */

/* The parameters an epilogue reads (NULL where it does not). */
typedef struct mt__epilogue_bufs {
    const mt_conv_epilogue *epi;
    mt_buffer *bias, *residual; /* residual: its own parameter, or the output itself (in place) */
} mt__epilogue_bufs;

/* A convolution kernel's parameters. */
typedef struct mt__conv_io {
    mt_buffer *in, *wt, *out;
    mt__epilogue_bufs epi;
} mt__conv_io;

/* Declares the parameters in the order of the template contract
 * (ir/template.h): input (in_elems floats), weight (w_elems), output
 * (out_elems), then those of the epilogue epi (may be NULL) for kout output
 * channels. io->epi.epi = epi. */
void mt__conv_io_params(mt_kernel *k, mt__conv_io *io, int64_t in_elems, int64_t w_elems, int64_t out_elems, int64_t kout,
                        const mt_conv_epilogue *epi);

/* The value to store for `v`: `lanes` consecutive outputs of one channel
 * starting at output index out_index, after bias, residual and activation.
 * Returns v itself when there is no epilogue; NULL when out of memory. */
mt_expr *mt__epilogue_apply(mt_kernel *k, const mt__epilogue_bufs *eb, mt_expr *v, mt_expr *channel, mt_expr *out_index, int lanes);

/* Builds the kernel for wl under schedule s. For non-depthwise workloads,
 * s->f splits k/groups (every work-group lies inside one group) and s->rc
 * splits c/groups; for depthwise, s->f splits k. The splits must multiply to
 * their extents exactly. Returns MT_INVALID_CONFIG (reason in err) for a
 * schedule it cannot realise (vec not dividing the inner x tile, a register
 * tile over MT__TILE_MAX_PRIVATE_FLOATS), MT_NOMEM when the IR arena fails,
 * MT_INVALID_ARG for inconsistent splits. *out is owned by the caller. */
mt_status mt__tile_conv_build(const mt_workload *wl, const mt__tile_sched *s, const char *name, mt_kernel **out, char *err,
                              size_t errlen);

/* Copies the nparts values of split knob `name` into dst; MT_INVALID_ARG (with
 * err) when cfg has no such knob. */
mt_status mt__config_split(const mt_space *sp, const mt_config *cfg, const char *name, int *dst, int nparts, char *err, size_t errlen);

/* ---- the register-tile templates (gemm, kvec) ---- */

/* An enum knob whose options past `limit` are left out of the space (the
 * first always stays): options the workload cannot use. At most
 * MT__ENUM_MAX_OPTIONS options. */
#define MT__ENUM_MAX_OPTIONS 16
typedef struct mt__enum_knob {
    const char *name;
    const int *options;
    int noptions;
    int limit;
} mt__enum_knob;
/* The options and their count of an mt__enum_knob: MT__OPTIONS(1, 2, 4). */
#define MT__OPTIONS(...) (const int[]){__VA_ARGS__}, (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int))
/* Adds the n knobs to sp in order; returns the first failure (MT_INVALID_ARG
 * for a knob of too many options). */
mt_status mt__space_add_enums(mt_space *sp, const mt__enum_knob *knobs, int n);

/* What a register-tile template plans before it builds: the convolution as
 * the kernel sees it, the work split, and what the tiles need guarded. */
typedef struct mt__rt_plan {
    /* The convolution (gemm treats a 1x1, stride-1, unpadded one as one row
     * of oh*ow pixels: h = oh = 1, w = ow = the pixels); cg and kg are the
     * input and output channels of one group. */
    int n, groups, c, k, cg, kg;
    int h, w, oh, ow, r, s, sh, sw, ph, pw, dh, dw;
    /* Along channels, rows and columns: work-items per work-group (kt, yt,
     * xt), outputs per work-item (kr, yr, xr), work-groups (ko, yo, xo). */
    int kt, kr, yt, yr, xt, xr;
    int ko, yo, xo;
    /* The tiles overhang oh (ow); an input read can fall below 0 (lo), at or
     * past h or w (hi). */
    int y_over, x_over;
    int iy_lo, iy_hi, ix_lo, ix_hi;
    int vec;                     /* lanes of the vectors: gemm's run along pixels, kvec's along channels */
    int unroll_explicit;         /* mt_kernel.unroll_explicit */
    const mt_conv_epilogue *epi; /* applied before each output store; NULL: none */
    /* gemm's own: flattened 1x1; tile_red's outer and inner parts; stage_local; auto_unroll_max_step */
    int flat, rco, rci, stage, unroll_max;
    /* kvec's own: k rounded up to the 16 channels of its weight layout; unroll_rs */
    int k16, unroll_rs;
} mt__rt_plan;

/* Zeroes p and fills in the convolution's sizes from wl. */
void mt__rt_plan_init(mt__rt_plan *p, const mt_workload *wl);
/* Reads the work split knobs thread_k, reg_k, thread_y, reg_y, thread_x and
 * reg_x of cfg into p (0 for a knob the space lacks). */
void mt__rt_plan_read_tiles(mt__rt_plan *p, const mt_space *sp, const mt_config *cfg);
/* Completes a plan with a positive work split: the row and column
 * work-groups (yo, xo: enough to cover oh and ow) and the guard flags. */
void mt__rt_plan_cover(mt__rt_plan *p);

/* The condition that every index in [lo, lo + span] lies in [0, limit),
 * tested only on the sides that can fail (need_lo: below 0, need_hi: at or
 * past limit); NULL when neither can. */
mt_expr *mt__range_cond(mt_kernel *k, mt_expr *lo, int64_t span, int limit, int need_lo, int need_hi);

/* Software prefetch of the input in kvec's reduction over channels:
 * successive channels of one input row lie h*w floats apart, and on planes
 * above 2 KiB (images above 22x22) that is past the reach of the CPU's
 * stride prefetcher, so without a prefetch every channel's row came from
 * L2 or memory at full latency. Timed on PoCL's CPU device (2-core Xeon,
 * AVX-512), kvec's default on ResNet-50's 1x1 layers at 56x56 and 28x28
 * (`mtgpu conv --config default`, three runs with and without in turns,
 * fastest of each): 9-11% faster alone with prefetches 4-16 channels
 * ahead (8 taken), none on 14x14 planes; inside ResNet-50 those layers
 * 3-12% and the 7x7 stem 18%
 * (bench/net_ab/results/net_ab_prefetch_resnet50.md). gemm prefetches on
 * flattened 1x1 layers (ir/tmpl_gemm.c, gemm_prefetches): timed alone on
 * ResNet-50's they first seemed 2-3% slower, but inside the network they
 * ran 1.02-1.15x faster. mt__prefetch_planes says whether planes of h x w
 * take gemm's; kvec has its own, lower bound (kvec_prefetches_input). */
#define MT__PREFETCH_CHANNELS 8
int mt__prefetch_planes(int h, int w);

/* Floats per CPU cache line (64 bytes). */
#define MT__LINE_FLOATS 16
/* Prefetches of buf at every cache line the floats start .. start + last
 * can touch: the first, every MT__LINE_FLOATS on and the last, which is left
 * out when `aligned` (the run starts a line, so the last float's line is
 * already in). A sequence; NULL when out of memory. */
mt_stmt *mt__prefetch_run(mt_kernel *k, mt_buffer *buf, mt_expr *start, int64_t last, int aligned);
/* The same into the outer caches (mt_ir_prefetch_outer). */
mt_stmt *mt__prefetch_run_outer(mt_kernel *k, mt_buffer *buf, mt_expr *start, int64_t last, int aligned);

/* In the 16-channel-blocked weight layouts (OIHW16o, Winograd's), a tap's
 * 16 channels are one cache line: the step over a work-item's channel
 * vectors of `vec` lanes that visits each line once (vectors of fewer than
 * 16 channels share a line). */
static inline int mt__vectors_per_weight_line(int vec) { return vec < 16 ? 16 / vec : 1; }

/* Stores of 0 into buf[0..n), vec lanes at a time (vec divides n). */
mt_stmt *mt__zero_fill(mt_kernel *k, mt_buffer *buf, int64_t n, int vec);

/* Gives k its body, the plan's unroll_explicit and mt_ir_auto_unroll up to
 * auto_unroll (0: none), and hands it to *out. A NULL body (the arena ran
 * out while building) frees k: MT_NOMEM, naming the template `name`. */
mt_status mt__rt_finish(mt_kernel *k, mt_stmt *body, const mt__rt_plan *p, int64_t auto_unroll, const char *name, mt_kernel **out,
                        char *err, size_t errlen);

/* Named integer values: mt__let_bind returns a variable for value (or value
 * itself when it is a constant or a variable), and mt__let_wrap wraps a body
 * in the LETs, the first bound outermost. A failure (NULL value, too many)
 * makes mt__let_wrap return NULL. */
#define MT__LET_MAX 24
typedef struct mt__let_chain {
    mt_var *vars[MT__LET_MAX];
    mt_expr *vals[MT__LET_MAX];
    int n;
    int failed;
} mt__let_chain;
mt_expr *mt__let_bind(mt_kernel *k, mt__let_chain *lc, const char *name, mt_expr *value);
mt_stmt *mt__let_wrap(mt_kernel *k, mt__let_chain *lc, mt_stmt *body);

/* A loop over 0..extent-1 that disappears when extent is 1: mt__loop_begin
 * returns its index (the constant 0 then), mt__loop_end wraps the body
 * (along l->axis for launch loops; 0 unless the caller sets it). */
typedef struct mt__opt_loop {
    mt_var *var;
    int64_t extent;
    mt_loop_kind kind;
    int axis;
} mt__opt_loop;
mt_expr *mt__loop_begin(mt_kernel *k, mt__opt_loop *l, const char *name, int64_t extent, mt_loop_kind kind);
mt_stmt *mt__loop_end(mt_kernel *k, const mt__opt_loop *l, mt_stmt *body);

/* The launch of a register-tile kernel. mt__rt_launch_begin begins, in this
 * order, the work-group loops bk (p->ko channel blocks, axis 0), bx (p->xo
 * column blocks, axis 1), bz (images x p->yo row blocks, axis 2) and the
 * work-item loops tk (p->kt, axis 0), tx (p->xt, axis 1), ty (p->yt, axis
 * 2); a template may swap the axes of group[0] and group[2] before
 * mt__rt_launch_end wraps the body in all six, bk outermost. */
typedef struct mt__rt_launch {
    mt__opt_loop group[3], item[3]; /* bk, bx, bz; tk, tx, ty */
    mt_expr *bk, *bx, *bz, *tk, *tx, *ty;
    mt_expr *guard; /* NULL, or whether the work-group has work (a partial last chunk) */
} mt__rt_launch;
void mt__rt_launch_begin(mt_kernel *k, const mt__rt_plan *p, int64_t images, mt__rt_launch *l);
mt_stmt *mt__rt_launch_end(mt_kernel *k, const mt__rt_launch *l, mt_stmt *body);

/* Pixel blocks (images x p->yo x p->xo, row-major) per chunk for
 * mt__rt_launch_begin_chunked: the largest divisor of their count that keeps
 * a chunk at or under MT__RT_CHUNK_PIXELS output pixels and its input (the
 * reduction's floats for each of its pixels) within MT__RT_CHUNK_INPUT_BYTES,
 * about a core's L1 data cache. Where no divisor gives at least
 * MT__RT_CHUNK_MIN_PIXELS, the largest such chunk with a partial last one
 * (pixel blocks of 48, 262 of them at 112x112, have no divisor in range),
 * unless the kernel stages through local memory (p->stage: its barriers
 * must not sit under the test that skips the missing blocks); 1 (no
 * chunking) when that is still short of MT__RT_CHUNK_MIN_PIXELS, or when an image's output is at most
 * MT__RT_CHUNK_MIN_OUTPUT_BYTES, about a core's L2: inside a network,
 * chunking ran MobileNetV2's 16 -> 96 layer at 112x112 1.47x faster, left
 * its 1x1 layers at 56x56 and 28x28 (outputs under 2 MiB) unchanged when
 * they were excluded and 1.1-1.6x slower when they were not, and ResNet-50's
 * 64 -> 256 layers at 56x56 with 448-pixel chunks (115 KiB of input) ran
 * 1.05-1.3x slower (bench/net_ab/results/net_ab_gemm_chunks_*.md). */
#define MT__RT_CHUNK_PIXELS 512
#define MT__RT_CHUNK_MIN_PIXELS 256
#define MT__RT_CHUNK_INPUT_BYTES (32 << 10)
#define MT__RT_CHUNK_MIN_OUTPUT_BYTES (2 << 20)
int64_t mt__rt_chunk_blocks(const mt__rt_plan *p, int64_t images);
/* As mt__rt_launch_begin, but the work-groups run chunk by chunk: axis 0 =
 * the pixel block within a chunk (`chunk` of them), axis 1 = channel blocks,
 * axis 2 = chunks; bx and bz are derived from the pixel block (bk, bx, bz
 * keep their meaning; group[] holds bq, bk, bc). When chunk does not divide
 * the blocks, the last chunk's work-groups past the last block skip the
 * body (l->guard). With chunk == 1 it is mt__rt_launch_begin. */
void mt__rt_launch_begin_chunked(mt_kernel *k, const mt__rt_plan *p, int64_t images, int64_t chunk, mt__rt_launch *l);

#endif
