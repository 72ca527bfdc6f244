/* Loop-nest features of a schedule, for the "xgb" cost model (AutoTVM's
 * "itervar" features, computed from mtgpu's own IR).
 *
 * For each config, the template builds its kernel and the extractor walks the
 * IR. It picks the main nest: the chain of loops, outermost first, around the
 * store that does the most FMA work (if the kernel has no FMA, the most
 * executed store). For each of the first MT_FEATURES_LOOPS loops of that
 * chain it records the loop and, per buffer role, the accesses of every load
 * and store anywhere under the loop (not only on the chain): the stride of
 * the loop variable in the index (from a linear-coefficient analysis of the
 * index expression, LET bindings substituted; 0 when the variable appears
 * non-linearly or not at all), how many accesses one run of the loop makes,
 * how many bytes they touch, and the reuse ratio between the two.
 *
 * The layout is the same for every template and workload, so rows of several
 * templates can share one model; unused slots are 0. All counts are given as
 * log2(1 + x). Length MT_FEATURES_DIM = 812 floats:
 *
 *   [0]          valid: 1 for a config that builds, 0 for one that does not
 *                (its whole row is 0)
 *   [1, 16)      workload (15): n c h w k r s stride_h stride_w pad_h pad_w
 *                groups out_h out_w flops
 *   [16, 52)     kernel (36): threads per block, block[3], grid blocks, grid[3],
 *                all work-items, local bytes, private floats, widest global
 *                load / global store / FMA in lanes, barriers per work-item,
 *                FMAs per work-item, unroll_explicit, unrolled loops, vthread
 *                loops, main-nest length, FMAs per global access, then per
 *                role (5 x 3): accesses, bytes touched, reuse per work-item
 *   [52, 116)    knobs (MT_MAX_KNOBS x MT_MAX_SPLIT_PARTS = 64): for knob i,
 *                part j at 52 + 4*i + j: a SPLIT part's log2(value), an ENUM's
 *                value (in part 0)
 *   [116, 812)   loops (MT_FEATURES_LOOPS = 24 x 29), loop l at 116 + 29*l:
 *                  +0  log2(1 + extent)
 *                  +1  kind one-hot (MT_LOOP_KIND_COUNT = 6)
 *                  +7  depth along the main nest
 *                  +8  log2(1 + product of extents above it)
 *                  +9  log2(1 + product of extents from it inwards)
 *                  +10 launch axis + 1 (0 for other loops)
 *                  +11 per role r (5 x 3) at 11 + 3*r: log2(1 + |stride|),
 *                      log2(1 + bytes touched), log2(1 + reuse)
 *                  +26 log2(1 + accesses) of all roles, log2(1 + FMAs),
 *                      log2(1 + barriers) under one run of the loop
 *
 * Buffer roles: 0 input, 1 weights, 2 output (the first three global
 * parameters; further read-only parameters count as input, writable ones as
 * output), 3 local memory, 4 private memory. */
#ifndef MTGPU_FEATURES_H
#define MTGPU_FEATURES_H

#include <stddef.h>

#include "space.h"
#include "mtgpu/status.h"
#include "template.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_FEATURES_ROLES 5
#define MT_FEATURES_LOOPS 24
#define MT_FEATURES_PER_LOOP 29
#define MT_FEATURES_WORKLOAD_OFF 1
#define MT_FEATURES_KERNEL_OFF 16
#define MT_FEATURES_KNOB_OFF 52
#define MT_FEATURES_LOOP_OFF 116
#define MT_FEATURES_DIM (MT_FEATURES_LOOP_OFF + MT_FEATURES_LOOPS * MT_FEATURES_PER_LOOP)

/* Writes n rows of MT_FEATURES_DIM floats to out (row i at out + i*dim) and
 * the row length to *dim. out may be NULL to ask for *dim only. A config the
 * template cannot build gets a row of zeros (feature 0, "valid", is 0 there);
 * that is not an error. Errors: MT_INVALID_ARG for NULL arguments, a space of
 * another template or a config outside the space; MT_NOMEM. Single-threaded;
 * safe to call from several threads at once. */
mt_status mt_features_extract(const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs, int n, float *out,
                              int *dim);

/* The name of feature i ("loop3.role1.stride"), for dumps and plots; returns
 * the length written like snprintf, or -1 when i is out of range. */
int mt_features_name(int i, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
