/* Convolution workloads: a conv2d descriptor, its text form, and derived sizes.
 *
 * Layouts are fixed: input NCHW, weights OIHW (K x C/groups x R x S), output
 * NKPQ, fp32. Padding is symmetric per axis (pad_h on top and bottom). */
#ifndef MTGPU_WORKLOAD_H
#define MTGPU_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_workload {
    int n, c, h, w;     /* batch, input channels, input height, input width */
    int k, r, s;        /* output channels, kernel height, kernel width */
    int stride_h, stride_w;
    int pad_h, pad_w;
    int dil_h, dil_w;
    int groups;         /* groups == c == k: depthwise */
} mt_workload;

/* Parses "n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1". Keys may come in
 * any order; n defaults to 1, stride/pad/dilation default to 1/0/1, groups to 1;
 * stride, pad and dilation take "A" or "HxW". c, h, w, k, r, s are required.
 * On error returns MT_PARSE (malformed) or MT_RANGE (impossible sizes), leaves
 * *out untouched, and writes a message naming the offending field to err. */
mt_status mt_workload_parse(const char *text, mt_workload *out, char *err, size_t errlen);

/* Checks sizes: all positive, output at least 1x1, channels divisible by
 * groups, and every tensor's element count below 2^31 so that 32-bit index
 * arithmetic in kernels cannot overflow. */
mt_status mt_workload_validate(const mt_workload *wl, char *err, size_t errlen);

/* Canonical text form, accepted by mt_workload_parse; the database key.
 * Returns the length written (like snprintf). */
int mt_workload_format(const mt_workload *wl, char *buf, size_t len);

int mt_workload_out_h(const mt_workload *wl);
int mt_workload_out_w(const mt_workload *wl);
int mt_workload_is_depthwise(const mt_workload *wl);
/* Every field the same (1) or not (0). */
int mt_workload_equal(const mt_workload *a, const mt_workload *b);
/* A 1x1 convolution with stride 1 and no padding: each output pixel reads
 * the input pixel at its own place, so the image can run as one row of h*w. */
int mt_workload_is_pointwise(const mt_workload *wl);
/* Useful floating-point operations: 2 * n * k * P * Q * (c/groups) * r * s. */
double mt_workload_flops(const mt_workload *wl);
int64_t mt_workload_input_elems(const mt_workload *wl);
int64_t mt_workload_weight_elems(const mt_workload *wl);
int64_t mt_workload_output_elems(const mt_workload *wl);
/* A strided 1x1 convolution without padding reads only every stride-th
 * row and column, so it equals the stride-1 convolution of those pixels:
 * when wl is one (n, groups any; r = s = 1, pad 0, a stride above 1),
 * writes that convolution, on the subsampled oh x ow input, to *out and
 * returns 1; otherwise returns 0 and leaves *out untouched. */
int mt_workload_unit_stride(const mt_workload *wl, mt_workload *out);

/* How a convolution kernel reads the weights. Weights are constants, so an
 * inference executor converts them once (mt_weights_to_layout); a layout
 * with output channels innermost lets a kernel load the weights of several
 * output channels as one vector and broadcast the input instead. */
typedef enum mt_weight_layout {
    MT_WEIGHTS_OIHW,    /* [k][c/groups][r][s] (mtgpu/workload.h) */
    MT_WEIGHTS_OIHW16O, /* [ceil(k/16)][c][r][s][16] (groups == 1): blocks of 16 output channels innermost,
                           the channels past k zero */
    MT_WEIGHTS_WINO2,   /* Winograd F(2x2,3x3): [ceil(k/16)][4*4][c][16], each 3x3 filter as G g G^T
                           (conv/winograd.h), blocks of 16 output channels innermost, the channels past k zero */
    MT_WEIGHTS_WINO4,   /* the same for F(4x4,3x3): [ceil(k/16)][6*6][c][16] */
    MT_WEIGHTS_WINO6,   /* the same for F(6x6,3x3): [ceil(k/16)][8*8][c][16] */
    MT_WEIGHT_LAYOUT_COUNT
} mt_weight_layout;
#define MT_WEIGHT_LAYOUTS_ALL ((1u << MT_WEIGHT_LAYOUT_COUNT) - 1u)

const char *mt_weight_layout_name(mt_weight_layout l);
/* Floats the weights of wl take in layout l; 0 when l cannot hold them (OIHW16o with groups > 1, the
 * Winograd layouts unless groups == 1 and the filter is 3x3). */
int64_t mt_weight_layout_elems(mt_weight_layout l, const mt_workload *wl);
/* Writes wl's weights, given in OIHW (mt_workload_weight_elems floats), into
 * dst (mt_weight_layout_elems floats) in layout l. MT_UNSUPPORTED when l
 * cannot hold them, MT_INVALID_ARG for NULL pointers. */
mt_status mt_weights_to_layout(mt_weight_layout l, const mt_workload *wl, const float *oihw, float *dst);

#ifdef __cplusplus
}
#endif
#endif
