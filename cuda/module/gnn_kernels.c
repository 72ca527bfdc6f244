/* The GNN's own CUDA kernels (everything of the scoring forward that is not
 * a GEMM): the input's normalisation and scatter into node-major places,
 * bias + leaky ReLU, the gathers and pulled sums of the message schedule,
 * the residual update, the readout and the head's output.
 *
 * They follow gnn/forward.c and gnn/ops.c operation by operation, in the
 * same order: the additions of a pulled sum run in the plan's order, and
 * the elementwise arithmetic uses the _rn intrinsics, which the compiler
 * never contracts into FMAs, so each of these kernels gives the CPU's bits
 * on the same inputs; only the GEMMs (cuBLAS) sum in another order.
 *
 * Every kernel is a grid-stride loop over 64-bit indices. Compiled with
 * NVRTC (cuda/module/gnn.c) for the device's sm; tests/test_cuda.c compiles each
 * for sm_90 and reads nvJitLink's report. */
#include "module-impl.h"

static const char gnn_src[] =
    "#define LRELU_A (0.5f * (1.0f + 0.01f))\n"
    "#define LRELU_B (0.5f * (1.0f - 0.01f))\n"
    "__device__ __forceinline__ float lrelu1(float v) {\n"
    "    return __fadd_rn(__fmul_rn(LRELU_A, v), __fmul_rn(LRELU_B, fabsf(v)));\n"
    "}\n"
    "#define GRID_LOOP(i, total) \\\n"
    "    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (total); i += (long long)gridDim.x * blockDim.x)\n"
    "\n"
    "/* X[(pos[v]*b + g)*F + f] = (feats[(g*n + v)*F + f] - mean[f]) * istd[f] */\n"
    "extern \"C\" __global__ void mt_gnn_input(const float *__restrict__ feats, const float *__restrict__ mean,\n"
    "        const float *__restrict__ istd, const int *__restrict__ pos, float *__restrict__ X, int b, int n, int F) {\n"
    "    long long total = (long long)b * n * F;\n"
    "    GRID_LOOP(i, total) {\n"
    "        int f = (int)(i % F);\n"
    "        long long gv = i / F;\n"
    "        int v = (int)(gv % n), g = (int)(gv / n);\n"
    "        X[((long long)pos[v] * b + g) * F + f] = __fmul_rn(__fsub_rn(feats[i], mean[f]), istd[f]);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Y = lrelu(Y + bias[module of the place][j]) over places [0, total / bH) */\n"
    "extern \"C\" __global__ void mt_gnn_bias_lrelu_mod(float *__restrict__ Y, const float *__restrict__ bias,\n"
    "        const int *__restrict__ placemod, long long bH, int H, long long total) {\n"
    "    GRID_LOOP(i, total) {\n"
    "        int q = (int)(i / bH), j = (int)(i % H);\n"
    "        Y[i] = lrelu1(__fadd_rn(Y[i], bias[(long long)placemod[q] * H + j]));\n"
    "    }\n"
    "}\n"
    "\n"
    "/* Y[r][j] = lrelu(Y[r][j] + bias[j]) */\n"
    "extern \"C\" __global__ void mt_gnn_bias_lrelu(float *__restrict__ Y, const float *__restrict__ bias, int H, long long total) {\n"
    "    GRID_LOOP(i, total) Y[i] = lrelu1(__fadd_rn(Y[i], bias[i % H]));\n"
    "}\n"
    "\n"
    "/* G[r] = h[place rp[r]]: blocks of bH floats */\n"
    "extern \"C\" __global__ void mt_gnn_gather(const float *__restrict__ h, const int *__restrict__ rp, float *__restrict__ G,\n"
    "        long long bH, long long total) {\n"
    "    GRID_LOOP(i, total) {\n"
    "        long long r = i / bH, e = i % bH;\n"
    "        G[i] = h[(long long)rp[r] * bH + e];\n"
    "    }\n"
    "}\n"
    "\n"
    "/* G[r] = the sum of h[place adj[k]] over k in [off[r], off[r+1]), added in that order */\n"
    "extern \"C\" __global__ void mt_gnn_sum_rows(const float *__restrict__ h, const int *__restrict__ off,\n"
    "        const int *__restrict__ adj, float *__restrict__ G, long long bH, long long total) {\n"
    "    GRID_LOOP(i, total) {\n"
    "        long long r = i / bH, e = i % bH;\n"
    "        int k0 = off[r], k1 = off[r + 1];\n"
    "        float a = h[(long long)adj[k0] * bH + e];\n"
    "        for (int k = k0 + 1; k < k1; k++) a = __fadd_rn(a, h[(long long)adj[k] * bH + e]);\n"
    "        G[i] = a;\n"
    "    }\n"
    "}\n"
    "\n"
    "/* hn = h + lrelu(U + bias[module][j] + the product rows in_row[in_off[q] .. in_off[q+1]) of M), in that order; hn may be h */\n"
    "extern \"C\" __global__ void mt_gnn_update(const float *h, float *hn, const float *__restrict__ U, const float *__restrict__ bias,\n"
    "        const int *__restrict__ placemod, const int *__restrict__ in_off, const int *__restrict__ in_row,\n"
    "        const float *__restrict__ M, long long bH, int H, long long total) {\n"
    "    GRID_LOOP(i, total) {\n"
    "        int q = (int)(i / bH);\n"
    "        long long e = i % bH;\n"
    "        float v = __fadd_rn(U[i], bias[(long long)placemod[q] * H + (int)(e % H)]);\n"
    "        for (int k = in_off[q]; k < in_off[q + 1]; k++) v = __fadd_rn(v, M[(long long)in_row[k] * bH + e]);\n"
    "        v = lrelu1(v);\n"
    "        hn[i] = __fadd_rn(h[i], v);\n"
    "    }\n"
    "}\n"
    "\n"
    "/* R[g] = [mean | max] over nodes v (in node order) of x[(pos[v]*b + g)*c + j] */\n"
    "extern \"C\" __global__ void mt_gnn_readout(const float *__restrict__ x, const int *__restrict__ pos, int n, int b, int c,\n"
    "        float scale, float *__restrict__ R) {\n"
    "    long long total = (long long)b * c;\n"
    "    GRID_LOOP(i, total) {\n"
    "        int g = (int)(i / c), j = (int)(i % c);\n"
    "        float x0 = x[((long long)pos[0] * b + g) * c + j], sum = __fadd_rn(0.0f, x0), mx = x0;\n"
    "        for (int v = 1; v < n; v++) {\n"
    "            float xv = x[((long long)pos[v] * b + g) * c + j];\n"
    "            sum = __fadd_rn(sum, xv);\n"
    "            mx = xv > mx ? xv : mx;\n"
    "        }\n"
    "        R[(long long)g * 2 * c + j] = __fmul_rn(sum, scale);\n"
    "        R[(long long)g * 2 * c + c + j] = mx;\n"
    "    }\n"
    "}\n"
    "\n"
    "/* The MLP's readout, of the normalised features read graph-major where they are */\n"
    "extern \"C\" __global__ void mt_gnn_readout_feats(const float *__restrict__ feats, const float *__restrict__ mean,\n"
    "        const float *__restrict__ istd, int n, int b, int F, float scale, float *__restrict__ R) {\n"
    "    long long total = (long long)b * F;\n"
    "    GRID_LOOP(i, total) {\n"
    "        int g = (int)(i / F), j = (int)(i % F);\n"
    "        const float *fg = feats + (long long)g * n * F + j;\n"
    "        float m = mean[j], s = istd[j];\n"
    "        float x0 = __fmul_rn(__fsub_rn(fg[0], m), s), sum = __fadd_rn(0.0f, x0), mx = x0;\n"
    "        for (int v = 1; v < n; v++) {\n"
    "            float xv = __fmul_rn(__fsub_rn(fg[(long long)v * F], m), s);\n"
    "            mx = xv > mx ? xv : mx;\n"
    "            sum = __fadd_rn(sum, xv);\n"
    "        }\n"
    "        R[(long long)g * 2 * F + j] = __fmul_rn(sum, scale);\n"
    "        R[(long long)g * 2 * F + F + j] = mx;\n"
    "    }\n"
    "}\n"
    "\n"
    "/* s[g] = z[g] . w + bout[0] */\n"
    "extern \"C\" __global__ void mt_gnn_head_out(const float *__restrict__ z, const float *__restrict__ w,\n"
    "        const float *__restrict__ bout, int H, int b, float *__restrict__ s) {\n"
    "    GRID_LOOP(g, (long long)b) {\n"
    "        const float *zg = z + g * H;\n"
    "        float a = 0.0f;\n"
    "        for (int j = 0; j < H; j++) a = fmaf(zg[j], w[j], a);\n"
    "        s[g] = __fadd_rn(a, bout[0]);\n"
    "    }\n"
    "}\n";

static const char *const gnn_names[] = {
    "mt_gnn_input", "mt_gnn_bias_lrelu_mod", "mt_gnn_bias_lrelu", "mt_gnn_gather", "mt_gnn_sum_rows",
    "mt_gnn_update", "mt_gnn_readout", "mt_gnn_readout_feats", "mt_gnn_head_out",
};

const char *mt__gnn_cuda_source(const char *const **names, int *count) {
    if (names) *names = gnn_names;
    if (count) *count = (int)(sizeof gnn_names / sizeof gnn_names[0]);
    return gnn_src;
}
