/* Private: the tiled direct-convolution kernel shared by the `direct` and
 * `depthwise` templates (ir/tmpl_direct.c, ir/tmpl_depthwise.c).
 *
 * Both follow AutoTVM's CUDA schedules (conv2d_nchw.cuda and
 * depthwise_conv2d_nchw.cuda): each output axis f (channels), y (rows) and
 * x (columns) is split into block x vthread x thread x inner; each work-item
 * keeps a private accumulator tile of (vf*fi) x (vy*yi) x (vx*xi) outputs, runs
 * the reduction rc_outer > ry_outer > rx_outer > rc_inner > ry_inner > rx_inner,
 * and stores its tile once at the end. Optionally the input patch and the
 * weights of each outer reduction step (rc_outer, ry_outer, rx_outer, where
 * AutoTVM attaches them) are staged in local memory by the whole work-group
 * (AutoTVM's shared-memory stages AA and WW).
 *
 * Other templates may include this header; it has no state. */
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

/* ---- fused epilogues, shared by every template ---- */

/* The parameters an epilogue reads (NULL where it does not). */
typedef struct mt__epilogue_bufs {
    const mt_conv_epilogue *epi;
    mt_buffer *bias, *residual; /* residual: its own parameter, or the output itself (in place) */
} mt__epilogue_bufs;

/* Declares the epilogue's kernel parameters (call right after the output's:
 * the parameter order is part of the template contract) for a workload with
 * k output channels and out_elems outputs. eb->epi = epi (may be NULL). */
void mt__epilogue_params(mt_kernel *k, const mt_conv_epilogue *epi, mt_buffer *output, int64_t kout, int64_t out_elems,
                         mt__epilogue_bufs *eb);

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

/* ---- IR building helpers of the register-tile templates (gemm, kvec) ---- */

/* Copies into vals the options of `opts` up to `limit` (always the first); returns how many. */
int mt__clip_options(const int *opts, int nopts, int limit, int *vals);

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

/* Copies the nparts values of split knob `name` into dst; MT_INVALID_ARG (with
 * err) when cfg has no such knob. */
mt_status mt__config_split(const mt_space *sp, const mt_config *cfg, const char *name, int *dst, int nparts, char *err, size_t errlen);

#endif
