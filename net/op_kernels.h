/* Private: the fixed OpenCL C kernels of the executor's non-convolution
 * operations (net/op_kernels.c).
 *
 * All of them live in one source, so the driver compiles it once and the
 * binary cache serves every other kernel name. Kernels take global buffers
 * only (mt_program_run passes no scalars): the first is an int32 parameter
 * block whose layout each kernel's comment gives, element 0 always being the
 * number of work-items that do work (the launch rounds up to a multiple of
 * the work-group size). Activations are coded as mt_activation. */
#ifndef MTGPU_OP_KERNELS_H
#define MTGPU_OP_KERNELS_H

/* Work-items per work-group of every op kernel. */
#define MT_OP_GROUP 64

/* Floats a work-item of the concatenation copies (the chunks of one image's
 * block of one input). */
#define MT_OP_CONCAT_CHUNK 256

/* The OpenCL C source holding every kernel below. */
const char *mt__op_kernels_source(void);

/* Kernel names. */
#define MT_OPK_MAXPOOL "mt_op_maxpool"           /* (p, x, y): p = total, H, W, OH, OW, kh, kw, sh, sw, ph, pw */
#define MT_OPK_MAXPOOL_S2 "mt_op_maxpool_s2"     /* (p, x, y): p as maxpool, total = output rows (n * c * OH); stride_w 2, pad_w <= 1, 1 <= kw - pw <= 3 */
#define MT_OPK_AVGPOOL "mt_op_avgpool"           /* (p, x, y): p as maxpool, then count_include_pad */
#define MT_OPK_GLOBAL_AVGPOOL "mt_op_global_avgpool" /* (p, x, y): p = total (n*c), HW */
#define MT_OPK_ADAPTIVE_AVGPOOL "mt_op_adaptive_avgpool" /* (p, x, y): p = total, H, W, OH, OW */
#define MT_OPK_CONCAT "mt_op_concat_copy"        /* (p, x, y): p = work-items (n * chunks), Cin*HW, Cout*HW, c_offset*HW, chunks per image */
#define MT_OPK_SUBSAMPLE "mt_op_subsample"     /* (p, x, y): p = total (n*c*OH rows), H, W, OH, OW, sh, sw */
#define MT_OPK_ADD "mt_op_add"                   /* (p, a, b, y): y = act(a + b); p = total, act */
#define MT_OPK_DENSE "mt_op_dense"               /* (p, x, w, b, y): four outputs of every image per work-item; p = work-items ((O+3)/4), I, O, act, n */
#define MT_OPK_SOFTMAX "mt_op_softmax"           /* (p, x, y): over channels; p = total (n*HW), C, HW */

#endif
