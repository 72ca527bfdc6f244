/* The GNN's tensor operations: forward and backward (see tensor.h). */
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "tensor.h"

/* OpenBLAS runs a GEMM on one thread when m*n*k is at most 65536 times
 * OPENBLAS_GEMM_MULTITHREAD_THRESHOLD (4 in Debian's build). Staying under
 * it keeps OpenBLAS from starting threads of its own next to the scorer's
 * (on 2 cores that oversubscription costs more than it gains), and blocks
 * whose edges depend only on the shapes keep results reproducible. */
#define MT__MM_BLOCK_FLOPS 262144L

/* The elementwise loops are written 8 wide by hand: at -O2 GCC vectorises
 * straight-line code (SLP) but not loops of unknown length, and these loops
 * are most of the scorer's time outside the GEMMs. */
static inline void add_row(float *restrict y, const float *restrict x, int n) {
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        y[j] += x[j], y[j + 1] += x[j + 1], y[j + 2] += x[j + 2], y[j + 3] += x[j + 3];
        y[j + 4] += x[j + 4], y[j + 5] += x[j + 5], y[j + 6] += x[j + 6], y[j + 7] += x[j + 7];
    }
    for (; j < n; j++) y[j] += x[j];
}

/* Branch-free, as a*v + b*|v| (a + b = 1, a - b = slope): random signs
 * would mispredict half the time, and GCC keeps a branch for `v > 0 ? ...`.
 * The backward's factor a + copysign(b, y) is 1 or the slope. */
#define LRELU_A (0.5f * (1.0f + MT__LRELU_SLOPE))
#define LRELU_B (0.5f * (1.0f - MT__LRELU_SLOPE))
static inline float lrelu1(float v) { return LRELU_A * v + LRELU_B * fabsf(v); }
static inline float lrelu_grad1(float y, float d) { return d * (LRELU_A + copysignf(LRELU_B, y)); }

static int block_rows(int per_row) {
    long r = MT__MM_BLOCK_FLOPS / (per_row > 0 ? per_row : 1);
    return r < 1 ? 1 : (r > 1 << 30 ? 1 << 30 : (int)r);
}

void mt__mm(int m, int n, int k, const float *A, const float *B, float beta, float *C) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        for (size_t i = 0; i < (size_t)m * n; i++) C[i] = beta == 0 ? 0 : beta * C[i];
        return;
    }
    int rb = block_rows(n * k);
    for (int r = 0; r < m; r += rb) {
        int mm = m - r < rb ? m - r : rb;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mm, n, k, 1.0f, A + (size_t)r * k, k, B, n, beta, C + (size_t)r * n, n);
    }
}

void mt__mm_nt(int m, int n, int k, const float *A, const float *B, float beta, float *C) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        for (size_t i = 0; i < (size_t)m * n; i++) C[i] = beta == 0 ? 0 : beta * C[i];
        return;
    }
    int rb = block_rows(n * k);
    for (int r = 0; r < m; r += rb) {
        int mm = m - r < rb ? m - r : rb;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mm, n, k, 1.0f, A + (size_t)r * k, k, B, k, beta, C + (size_t)r * n, n);
    }
}

void mt__mm_backward(int m, int n, int k, const float *A, const float *B, const float *dC, float *dA, float *dB) {
    if (m <= 0 || n <= 0 || k <= 0) return;
    if (dA) { /* dA[m,k] += dC[m,n] B^T */
        int rb = block_rows(n * k);
        for (int r = 0; r < m; r += rb) {
            int mm = m - r < rb ? m - r : rb;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mm, k, n, 1.0f, dC + (size_t)r * n, n, B, n, 1.0f, dA + (size_t)r * k, k);
        }
    }
    if (dB) { /* dB[k,n] += A^T dC, summed over blocks of the m rows in a fixed order */
        int rb = block_rows(n * k);
        for (int r = 0; r < m; r += rb) {
            int mm = m - r < rb ? m - r : rb;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, n, mm, 1.0f, A + (size_t)r * k, k, dC + (size_t)r * n, n, 1.0f, dB, n);
        }
    }
}

void mt__bias_backward(int m, int n, const float *dY, float *db) {
    for (int i = 0; i < m; i++) add_row(db, dY + (size_t)i * n, n);
}

void mt__lrelu_backward(size_t n, const float *y, const float *dy, float *dx) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float a[8];
        for (int k = 0; k < 8; k++) a[k] = lrelu_grad1(y[i + k], dy[i + k]);
        for (int k = 0; k < 8; k++) dx[i + k] += a[k];
    }
    for (; i < n; i++) dx[i] += lrelu_grad1(y[i], dy[i]);
}

void mt__add(size_t n, float *y, const float *x) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        y[i] += x[i], y[i + 1] += x[i + 1], y[i + 2] += x[i + 2], y[i + 3] += x[i + 3];
        y[i + 4] += x[i + 4], y[i + 5] += x[i + 5], y[i + 6] += x[i + 6], y[i + 7] += x[i + 7];
    }
    for (; i < n; i++) y[i] += x[i];
}

void mt__bias_lrelu(int m, int n, float *Y, const float *b) {
    for (int i = 0; i < m; i++) {
        float *y = Y + (size_t)i * n;
        int j = 0;
        for (; j + 8 <= n; j += 8) {
            float a[8];
            for (int k = 0; k < 8; k++) a[k] = lrelu1(y[j + k] + b[j + k]);
            for (int k = 0; k < 8; k++) y[j + k] = a[k];
        }
        for (; j < n; j++) y[j] = lrelu1(y[j] + b[j]);
    }
}

/* Four floats as one value, for the sums below. They keep partial
 * sums in registers while k blocks stream past; written with arrays, GCC
 * (12, at -O2 and -O3) keeps them in scalar registers and adds one float at
 * a time, and they were half of the inference path's time. The vectors are
 * 16 bytes, one SSE register of baseline x86-64 (wider ones would live on
 * the stack there); memcpy is how to load and store them unaligned. */
typedef float v4f __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));

static inline v4f ld4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

/* lrelu1 on 4 lanes: the same operations, so the same bits. */
static inline v4f lrelu4(v4f v) {
    v4f abs = (v4f)((v4i)v & 0x7fffffff);
    return LRELU_A * v + LRELU_B * abs;
}

void mt__sum_blocks(size_t n, float *y, const float *const *x, int k) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v4f a0 = ld4(x[0] + i), a1 = ld4(x[0] + i + 4), a2 = ld4(x[0] + i + 8), a3 = ld4(x[0] + i + 12);
        for (int c = 1; c < k; c++) {
            const float *xc = x[c] + i;
            a0 += ld4(xc), a1 += ld4(xc + 4), a2 += ld4(xc + 8), a3 += ld4(xc + 12);
        }
        st4(y + i, a0), st4(y + i + 4, a1), st4(y + i + 8, a2), st4(y + i + 12, a3);
    }
    for (; i < n; i++) {
        float a = x[0][i];
        for (int c = 1; c < k; c++) a += x[c][i];
        y[i] = a;
    }
}

void mt__add_blocks(size_t n, float *y, const float *const *x, int k) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v4f a0 = ld4(y + i), a1 = ld4(y + i + 4), a2 = ld4(y + i + 8), a3 = ld4(y + i + 12);
        for (int c = 0; c < k; c++) {
            const float *xc = x[c] + i;
            a0 += ld4(xc), a1 += ld4(xc + 4), a2 += ld4(xc + 8), a3 += ld4(xc + 12);
        }
        st4(y + i, a0), st4(y + i + 4, a1), st4(y + i + 8, a2), st4(y + i + 12, a3);
    }
    for (; i < n; i++) {
        float a = y[i];
        for (int c = 0; c < k; c++) a += x[c][i];
        y[i] = a;
    }
}

void mt__update_pull(int rows, int H, const float *h, float *hn, float *a, const float *u, const float *bias, const float *const *x, int k) {
    for (int r = 0; r < rows; r++) {
        size_t o = (size_t)r * H;
        int j = 0;
        for (; j + 16 <= H; j += 16) {
            size_t q = o + (size_t)j;
            v4f a0 = ld4(u + q) + ld4(bias + j), a1 = ld4(u + q + 4) + ld4(bias + j + 4);
            v4f a2 = ld4(u + q + 8) + ld4(bias + j + 8), a3 = ld4(u + q + 12) + ld4(bias + j + 12);
            for (int c = 0; c < k; c++) {
                const float *xc = x[c] + q;
                a0 += ld4(xc), a1 += ld4(xc + 4), a2 += ld4(xc + 8), a3 += ld4(xc + 12);
            }
            a0 = lrelu4(a0), a1 = lrelu4(a1), a2 = lrelu4(a2), a3 = lrelu4(a3);
            if (a) st4(a + q, a0), st4(a + q + 4, a1), st4(a + q + 8, a2), st4(a + q + 12, a3);
            st4(hn + q, ld4(h + q) + a0), st4(hn + q + 4, ld4(h + q + 4) + a1);
            st4(hn + q + 8, ld4(h + q + 8) + a2), st4(hn + q + 12, ld4(h + q + 12) + a3);
        }
        for (; j < H; j++) {
            float v = u[o + j] + bias[j];
            for (int c = 0; c < k; c++) v += x[c][o + j];
            v = lrelu1(v);
            if (a) a[o + j] = v;
            hn[o + j] = h[o + j] + v;
        }
    }
}

double mt__mse(int n, const float *y, const float *t, float w, float *dy) {
    if (n <= 0) return 0;
    double s = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)y[i] - (double)t[i];
        s += d * d;
        if (dy) dy[i] += (float)(w * 2.0 * d / n);
    }
    return s / n;
}

/* log(1 + exp(-x)) without overflow, and its derivative -1 / (1 + exp(x)). */
static double softplus_neg(double x) { return x > 0 ? log1p(exp(-x)) : -x + log1p(exp(x)); }
static double softplus_neg_grad(double x) { return x > 0 ? -exp(-x) / (1 + exp(-x)) : -1 / (1 + exp(x)); }

static int better(int i, int j, const float *target, const int *failed) {
    int fi = failed && failed[i], fj = failed && failed[j];
    if (fi || fj) return !fi && fj;
    return target[i] > target[j];
}

double mt__rank_loss(int n, const float *s, const float *target, const int *group, const int *failed, float w, float *ds, long *pairs) {
    long np = 0;
    double total = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (group[i] == group[j] && better(i, j, target, failed)) {
                np++;
                total += softplus_neg((double)s[i] - (double)s[j]);
            }
    if (pairs) *pairs = np;
    if (np == 0) return 0;
    if (ds)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (group[i] == group[j] && better(i, j, target, failed)) {
                    double g = w * softplus_neg_grad((double)s[i] - (double)s[j]) / (double)np;
                    ds[i] += (float)g;
                    ds[j] -= (float)g;
                }
    return total / (double)np;
}
