/* The `direct` template: AutoTVM's conv2d_nchw CUDA schedule (topi
 * conv2d_direct.py) for every non-depthwise convolution, grouped ones
 * included, with two knobs of its own for CPU/OpenCL devices.
 *
 * Knobs, in order (the first eight are AutoTVM's, so its logs import):
 *   tile_f   split of k/groups in 4: block (grid z, with n and the group),
 *            vthread, thread (local z), inner
 *   tile_y   split of the output height in 4 (grid y, vthread, local y, inner)
 *   tile_x   split of the output width in 4 (grid x, vthread, local x, inner)
 *   tile_rc  split of c/groups in 2: reduction outer, inner
 *   tile_ry  split of the kernel height r in 2
 *   tile_rx  split of the kernel width s in 2
 *   auto_unroll_max_step {0, 512, 1500}
 *   unroll_explicit {0, 1}
 *   vec {1, 2, 4, 8}: lanes along the inner x tile (must divide it)
 *   stage_local {0, 1}: stage the input patch and weights of each outer
 *            reduction step in local memory (AutoTVM always does; 0 reads
 *            global memory directly)
 * An AutoTVM record corresponds to vec=1, stage_local=1.
 *
 * Note on AutoTVM logs: records from TVM 0.7.dev0 (tophub cuda_v0.10 without
 * -1 entries) list "tile_rx" before "tile_ry" and their "tile_rx" splits the
 * kernel HEIGHT; by position (and by config index) they are this template's
 * tile_ry and tile_rx. Newer records name them as here. */
#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

static int direct_accepts(const mt_workload *wl) {
    return wl && !mt_workload_is_depthwise(wl) && wl->groups >= 1 && wl->c % wl->groups == 0 && wl->k % wl->groups == 0;
}

static mt_status direct_space(const mt_workload *wl, mt_space *out) {
    if (!direct_accepts(wl) || !out) return MT_UNSUPPORTED;
    static const int unroll[] = {0, 512, 1500};
    mt_space_init(out, "direct");
    mt_status st = mt__tile_space_splits(out, wl, wl->k / wl->groups);
    if (st == MT_OK) st = mt_space_add_split(out, "tile_rc", wl->c / wl->groups, 2, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt_space_add_split(out, "tile_ry", wl->r, 2, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt_space_add_split(out, "tile_rx", wl->s, 2, MT_SPLIT_FACTOR, 0);
    if (st == MT_OK) st = mt__tile_space_options(out, unroll);
    if (st != MT_OK) mt_space_free(out);
    return st;
}

static mt_status direct_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi,
                                 mt_kernel **out, char *err, size_t errlen) {
    if (!direct_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "direct: depthwise workloads go to the depthwise template");
    mt__tile_sched s = {0};
    mt_status st = mt__tile_sched_read(sp, cfg, &s, err, errlen);
    if (st == MT_OK) st = mt__config_split(sp, cfg, "tile_rc", s.rc, 2, err, errlen);
    if (st == MT_OK) st = mt__config_split(sp, cfg, "tile_ry", s.ry, 2, err, errlen);
    if (st == MT_OK) st = mt__config_split(sp, cfg, "tile_rx", s.rx, 2, err, errlen);
    if (st != MT_OK) return st;
    s.depthwise = 0;
    s.epi = epi;
    return mt__tile_conv_build(wl, &s, "conv2d_direct", out, err, errlen);
}

const mt_template mt__template_direct = {
    /* .name    = */ "direct",
    /* .accepts = */ direct_accepts,
    /* .space   = */ direct_space,
    /* .build   = */ direct_build,
    /* .weights = */ MT_WEIGHTS_OIHW,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
