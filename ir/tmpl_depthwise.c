/* The `depthwise` template: AutoTVM's depthwise_conv2d_nchw CUDA schedule
 * (topi depthwise_conv2d.py) for groups == c == k > 1, with knobs of its own
 * for CPU/OpenCL devices.
 *
 * Knobs, in order (the first five are AutoTVM's, names as in its logs):
 *   tile_f   split of k (= c) in 4: block (grid z, with n), vthread,
 *            thread (local z), inner
 *   tile_y   split of the output height in 4
 *   tile_x   split of the output width in 4
 *   auto_unroll_max_step {0, 256, 1500}
 *   unroll_explicit {0, 1}
 *   vec {1, 2, 4, 8}: lanes along the inner x tile (must divide it)
 *   stage_local {0, 1}: stage the block's input patch and weights in local
 *            memory (AutoTVM always does; 0 reads global memory directly)
 * An AutoTVM record corresponds to vec=1, stage_local=1. The kernel window
 * (r x s) is not split: it is the whole reduction, as in AutoTVM. */
#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

static int depthwise_accepts(const mt_workload *wl) { return wl && mt_workload_is_depthwise(wl); }

static mt_status depthwise_space(const mt_workload *wl, mt_space *out) {
    if (!depthwise_accepts(wl) || !out) return MT_UNSUPPORTED;
    static const int unroll[] = {0, 256, 1500};
    mt_space_init(out, "depthwise");
    mt_status st = mt__tile_space_splits(out, wl, wl->k);
    if (st == MT_OK) st = mt__tile_space_options(out, unroll);
    if (st != MT_OK) mt_space_free(out);
    return st;
}

static mt_status depthwise_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi,
                                 mt_kernel **out, char *err, size_t errlen) {
    if (!depthwise_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "depthwise: workload is not depthwise (groups == c == k > 1)");
    mt__tile_sched s = {0};
    mt_status st = mt__tile_sched_read(sp, cfg, &s, err, errlen);
    if (st != MT_OK) return st;
    s.rc[0] = s.rc[1] = 1;
    s.ry[0] = 1, s.ry[1] = wl->r;
    s.rx[0] = 1, s.rx[1] = wl->s;
    s.depthwise = 1;
    s.epi = epi;
    return mt__tile_conv_build(wl, &s, "conv2d_depthwise", out, err, errlen);
}

const mt_template mt__template_depthwise = {
    /* .name    = */ "depthwise",
    /* .accepts = */ depthwise_accepts,
    /* .space   = */ depthwise_space,
    /* .build   = */ depthwise_build,
    /* .weights = */ MT_WEIGHTS_OIHW,
    /* .weights_for = */ NULL,
    /* .weights_all = */ 0,
};
