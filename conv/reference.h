/* CPU reference convolution, result comparison and test data.
 *
 * The reference is a direct convolution in the layouts of mtgpu/workload.h
 * (input NCHW, weights OIHW = K x C/groups x R x S, output NKPQ, fp32) that
 * accumulates every output element in double, summing over (c, r, s) in that
 * order. It is what every generated kernel is checked against. */
#ifndef MTGPU_REFERENCE_H
#define MTGPU_REFERENCE_H

#include <stdint.h>

#include "mtgpu/status.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Computes output = conv(input, weights) for wl (batch, groups including
 * depthwise, stride, symmetric padding and dilation per axis). The buffers
 * hold mt_workload_{input,weight,output}_elems(wl) floats; output must not
 * overlap the others. MT_INVALID_ARG for NULL pointers, MT_RANGE (from
 * mt_workload_validate) for an invalid workload, MT_NOMEM if the scratch row
 * cannot be allocated; on error output is untouched. */
mt_status mt_conv_reference(const mt_workload *wl, const float *input, const float *weights, float *output);

/* The same with `threads` POSIX threads splitting the (n, k) output planes;
 * threads <= 1 runs on the calling thread. The result is bit-for-bit that of
 * mt_conv_reference for any thread count (each element is summed by the same
 * code in the same order). If threads cannot be started, the calling thread
 * does the remaining work. */
mt_status mt_conv_reference_mt(const mt_workload *wl, const float *input, const float *weights, float *output, int threads);

/* Compares out against ref (n elements each) with a normalised maximum error
 *
 *     err = max_i |out[i] - ref[i]| / max(max_j |ref[j]|, 1e-6)
 *
 * i.e. the worst absolute error measured in units of the reference's largest
 * magnitude. Unlike a relative error per element it does not blow up where
 * ref[i] is near zero, and unlike a mean (NMSE) it does not let one wrong
 * element hide in a large tensor. Typical fp32 kernels score 1e-7..1e-5;
 * callers choose the threshold (1e-4 is a reasonable default for fp32).
 *
 * Returns MT_WRONG_RESULT if out holds a NaN or an infinity (*first_bad = the
 * first such index, *max_rel_err = +inf); MT_INVALID_ARG for NULL buffers,
 * n < 0, or a non-finite value in ref (*first_bad = its index). Otherwise
 * MT_OK with *max_rel_err = err and *first_bad = the index of the first
 * element with the largest error (-1 if out equals ref exactly). max_rel_err
 * and first_bad may be NULL. */
mt_status mt_compare(const float *out, const float *ref, int64_t n, double *max_rel_err, int64_t *first_bad);

/* Fills buf with n floats uniform in [-1, 1) (multiples of 2^-23), from
 * splitmix64 seeded with `seed`: the same on every platform. */
void mt_fill_random(float *buf, int64_t n, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif
