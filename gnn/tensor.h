/* The GNN's tensor operations (private to libmtgpu): those that the model's
 * forward and backward (gnn/forward.c) and its losses (gnn/train.c) call,
 * each checked against finite differences in tests/test_gnn.c.
 *
 * Plain float32 matrices, row-major and contiguous: a matrix of r rows and c
 * columns is r*c floats, row i at i*c. No op allocates: callers hand in
 * outputs and workspaces. Backwards *accumulate* into the gradients they
 * are given (so gradients of a value used twice just add up); callers zero
 * gradient buffers first.
 *
 * Activation: leaky ReLU with slope MT__LRELU_SLOPE. Its backward reads the
 * forward *output* (its sign equals the input's), so layers keep only their
 * outputs. */
#ifndef MTGPU_GNN_TENSOR_H
#define MTGPU_GNN_TENSOR_H

#include <stddef.h>

#define MT__LRELU_SLOPE 0.01f

/* C[m,n] = beta * C + A[m,k] B[k,n]. Large products are cut into blocks
 * small enough that OpenBLAS never starts its own threads (the scorer runs
 * its own, and block boundaries fixed by the shapes keep results
 * independent of any thread count). */
void mt__mm(int m, int n, int k, const float *A, const float *B, float beta, float *C);
/* C[m,n] = beta * C + A[m,k] B[n,k]^T, blocked as mt__mm (dX = dY W^T of
 * a product Y = X W). */
void mt__mm_nt(int m, int n, int k, const float *A, const float *B, float beta, float *C);
/* Backward of C = A B: dA[m,k] += dC B^T and dB[k,n] += A^T dC; either of
 * dA, dB may be NULL. */
void mt__mm_backward(int m, int n, int k, const float *A, const float *B, const float *dC, float *dA, float *dB);

/* Y[m,n] = lrelu(Y + b[n] on every row), in place. Its backward is the
 * two below: mt__lrelu_backward from the output, then mt__bias_backward. */
void mt__bias_lrelu(int m, int n, float *Y, const float *b);
/* The backward of y = lrelu(x), elementwise: dx += dy * lrelu'(from y). */
void mt__lrelu_backward(size_t n, const float *y, const float *dy, float *dx);
/* The backward of adding b[n] to every row of Y[m,n]: db[n] += the column
 * sums of dY. */
void mt__bias_backward(int m, int n, const float *dY, float *db);

/* Sums (their backward hands each term the sum's gradient). */
/* y[0..n) += x[0..n). */
void mt__add(size_t n, float *y, const float *x);
/* y[0..n) = x[0][0..n) + ... + x[k-1][0..n), k >= 1, added in that order. */
void mt__sum_blocks(size_t n, float *y, const float *const *x, int k);
/* y[0..n) += x[0][0..n) + ... + x[k-1][0..n), k >= 0, added in that order. */
void mt__add_blocks(size_t n, float *y, const float *const *x, int k);

/* The GNN's residual update of one node over `rows` graphs (rows of H):
 * a = lrelu(u + bias + x[0] + ... + x[k-1]) (k >= 0, added in that order),
 * hn = h + a; hn may be h, a may be NULL (not kept). Backward: dL/dh =
 * dL/dhn, and mt__lrelu_backward from a gives dL/du, which is also each
 * x[c]'s gradient, and (mt__bias_backward over the rows) the bias's. */
void mt__update_pull(int rows, int H, const float *h, float *hn, float *a, const float *u, const float *bias, const float *const *x, int k);

/* Mean squared error over n values: returns mean (y - t)^2 and, if dy is
 * not NULL, adds its gradient scaled by w: dy += w * 2 (y - t) / n. */
double mt__mse(int n, const float *y, const float *t, float w, float *dy);
/* Pairwise logistic ranking loss: over all pairs (i, j) with
 * group[i] == group[j] and better(i, j) (target[i] > target[j], or i
 * working and j failed; two failed ones are no pair), loss =
 * mean of log(1 + exp(-(s_i - s_j))). Adds w * its gradient to ds (if not
 * NULL); *pairs gets the number of pairs (0: loss 0). failed may be NULL. */
double mt__rank_loss(int n, const float *s, const float *target, const int *group, const int *failed, float w, float *ds, long *pairs);

#endif
