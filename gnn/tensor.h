/* The GNN's tensor operations (private to libmtgpu).
 *
 * Plain float32 matrices, row-major and contiguous: a matrix of r rows and c
 * columns is r*c floats, row i at i*c. No op allocates: callers hand in
 * outputs and workspaces. Each op has a backward that *accumulates* into the
 * gradients it is given (so gradients of a value used twice just add up);
 * callers zero gradient buffers first.
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
/* Backward of C = A B: dA[m,k] += dC B^T and dB[k,n] += A^T dC; either of
 * dA, dB may be NULL. */
void mt__mm_backward(int m, int n, int k, const float *A, const float *B, const float *dC, float *dA, float *dB);

/* Y[m,n] += b[n] on every row; backward db[n] += column sums of dY. */
void mt__bias_add(int m, int n, float *Y, const float *b);
void mt__bias_backward(int m, int n, const float *dY, float *db);

/* y = lrelu(x), elementwise (y may be x); backward dx += dy * lrelu'(from y). */
void mt__lrelu(size_t n, const float *x, float *y);
void mt__lrelu_backward(size_t n, const float *y, const float *dy, float *dx);

/* y[0..n) += x[0..n). */
void mt__add(size_t n, float *y, const float *x);

/* Y[m,n] = lrelu(Y + b[n] on every row): mt__bias_add then mt__lrelu in one pass, the same bits. */
void mt__bias_lrelu(int m, int n, float *Y, const float *b);
/* y[0..n) = x[0][0..n) + ... + x[k-1][0..n), k >= 1, added in that order. */
void mt__sum_blocks(size_t n, float *y, const float *const *x, int k);
/* y[0..n) += x[0][0..n) + ... + x[k-1][0..n), k >= 0. */
void mt__add_blocks(size_t n, float *y, const float *const *x, int k);
/* The GNN's residual update of one node over `rows` graphs (rows of H):
 * a = lrelu(u + bias + x[0] + ... + x[k-1]) (k >= 0), hn = h + a; hn may
 * be h, a may be NULL (not kept). */
void mt__update_pull(int rows, int H, const float *h, float *hn, float *a, const float *u, const float *bias, const float *const *x, int k);
/* C[m,n] = beta * C + A[m,k] B[n,k]^T, blocked as mt__mm (dX = dY W^T of
 * a product Y = X W). */
void mt__mm_nt(int m, int n, int k, const float *A, const float *B, float beta, float *C);

/* Y[i,:] = X[idx[i],:] for i < n_idx; backward dX[idx[i],:] += dY[i,:]. */
void mt__gather(int n_idx, int cols, const float *X, const int *idx, float *Y);
void mt__gather_backward(int n_idx, int cols, const float *dY, const int *idx, float *dX);
/* Y[idx[i],:] += X[i,:] (message aggregation); backward dX[i,:] += dY[idx[i],:]. */
void mt__scatter_add(int n_idx, int cols, const float *X, const int *idx, float *Y);
void mt__scatter_add_backward(int n_idx, int cols, const float *dY, const int *idx, float *dX);

/* A typed linear map over index lists: the per-node-type linear (src ==
 * dst) and the per-edge-type messages as the model first computed them,
 * one row per edge. The model now follows its plan's schedule
 * (gnn/forward.c: a product per distinct source or destination, pulled
 * sums), which the edge-per-row form is the plain statement of; the tests
 * still check this op's backward:
 * for each type t and each i in [start[t], start[t+1]):
 *     Y[dst[i],:] += X[src[i],:] W_t + b_t
 * with W_t = W + t*in*out ([in, out]) and b_t = b + t*out (b may be NULL).
 * Rows of Y not named in dst are untouched; a row named several times gets
 * the sum. ws_in and ws_out hold start[ntypes] rows of in and out floats.
 * With src and dst both NULL the rows are contiguous blocks, row i of X
 * feeding row i of Y (the per-node-type linear over type-sorted rows): no
 * gathers, no workspaces (they may be NULL). */
typedef struct mt__typed_index {
    int ntypes;
    const int *start; /* [ntypes + 1], start[0] = 0 */
    const int *src;   /* [start[ntypes]] */
    const int *dst;   /* [start[ntypes]] */
} mt__typed_index;

void mt__typed_linear(const mt__typed_index *ti, int in, int out, const float *X, const float *W, const float *b, float *Y, float *ws_in,
                      float *ws_out);
/* Backward: dX[src] += dY[dst] W_t^T, dW_t += X[src]^T dY[dst], db_t += sums
 * of dY[dst]; dX, dW, db may be NULL. Same workspaces. */
void mt__typed_linear_backward(const mt__typed_index *ti, int in, int out, const float *X, const float *W, const float *dY, float *dX, float *dW,
                               float *db, float *ws_in, float *ws_out);

/* Readout over the n nodes of each of B graphs: node v of graph b is row
 * rows[b*n + v] of X (rows NULL: row b*n + v). sum[b,:] = scale * the sum
 * of graph b's rows and max[b,:] = their maximum, written with row strides
 * ld_sum, ld_max (so both can land in the halves of one concatenated row);
 * argmax[b*c + j] = the node of the maximum, first one on ties. Either
 * output may be NULL. */
void mt__readout(int B, int n, int c, const float *X, const int *rows, float scale, float *sum, int ld_sum, float *max, int ld_max, int *argmax);
void mt__readout_backward(int B, int n, int c, const int *rows, float scale, const float *dsum, int ld_sum, const float *dmax, int ld_max,
                          const int *argmax, float *dX);

/* Y[r, :] = [A[r, 0..ca) | B[r, 0..cb)]; backward splits dY into dA, dB (+=). */
void mt__concat(int rows, int ca, const float *A, int cb, const float *B, float *Y);
void mt__concat_backward(int rows, int ca, int cb, const float *dY, float *dA, float *dB);

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
