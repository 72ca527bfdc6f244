/* The GNN library (gnn/): against finite differences on odd shapes, every
 * tensor op the model uses (gnn/tensor.h) and every piece of its forward
 * and backward one by one (the input embedding, a message-passing layer on
 * every kind of message schedule, the node-major readout, the head), and
 * the whole model's gradient in each architecture; determinism, model
 * files (round trip and every kind of corruption), and learning a
 * synthetic target (and not learning shuffled labels), all on synthetic
 * graph shapes; and the inference path that scores against the training
 * forward, on synthetic shapes and on real encoded candidates of every
 * template (the one test that uses the graph encoder). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gnn-impl.h"
#include "gnn.h"
#include "graph_enc.h"
#include "template.h"
#include "mtgpu/workload.h"

#include "gnn_samples.h"
#include "tensor.h"

#define F MT_GRAPH_FEATS

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 12345;
static double urand(void) { return (double)(mt__gnn_rand(&rs) >> 11) * (1.0 / 9007199254740992.0); }
static float frand(float a) { return (float)(a * (2 * urand() - 1)); }
static void fill(float *x, int n, float a) {
    for (int i = 0; i < n; i++) x[i] = frand(a);
}
/* values in [-1, -0.1] U [0.1, 1]: away from the activation's kink */
static void fill_away(float *x, int n) {
    for (int i = 0; i < n; i++) {
        float v = 0.1f + 0.9f * (float)urand();
        x[i] = urand() < 0.5 ? -v : v;
    }
}

/* ---- finite differences ---- */

typedef double (*loss_fn)(void *ctx);

typedef uint64_t (*kink_fn)(void *ctx);

/* Checks grad[0..n) (the analytic dL/dx) against central differences of
 * f() in x[0..n). Tolerance: 1e-2 relative plus an absolute floor scaled by
 * the largest gradient (float rounding in the forward). With kinks (the
 * state of every kink in f after the last call: which side of 0 each leaky
 * ReLU's input is, which node each maximum is), a difference over a step
 * whose two ends see different states is no derivative: if it differs, it
 * is skipped rather than counted, and at most 5% may be. */
static void gradcheck_kinks(const char *what, float *x, const float *grad, int n, loss_fn f, kink_fn kinks, void *ctx, float eps, int allowed_bad) {
    double gmax = 0;
    for (int i = 0; i < n; i++) gmax = fmax(gmax, fabs(grad[i]));
    int bad = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        float keep = x[i];
        x[i] = keep + eps;
        double lp = f(ctx);
        uint64_t kp = kinks ? kinks(ctx) : 0;
        x[i] = keep - eps;
        double lm = f(ctx);
        uint64_t km = kinks ? kinks(ctx) : 0;
        x[i] = keep;
        double fd = (lp - lm) / (2.0 * eps);
        double diff = fabs(fd - grad[i]);
        double tol = 1e-2 * fmax(fabs(fd), fabs(grad[i])) + 2e-3 * fmax(gmax, 1e-3);
        if (diff <= tol) continue;
        if (kp != km) {
            skipped++;
            continue;
        }
        if (bad < 5) printf("# %s: [%d] analytic %.6g, numeric %.6g\n", what, i, grad[i], fd);
        bad++;
    }
    if (skipped) printf("# %s: %d of %d steps across a kink differ (skipped)\n", what, skipped, n);
    if (bad > allowed_bad) fail_msg("%s: %d of %d gradients differ from finite differences", what, bad, n);
    if (skipped > n / 20) fail_msg("%s: %d of %d steps across a kink differ", what, skipped, n);
    assert_true(gmax > 0); /* a check of all-zero gradients checks nothing */
}

static void gradcheck(const char *what, float *x, const float *grad, int n, loss_fn f, void *ctx, float eps, int allowed_bad) {
    gradcheck_kinks(what, x, grad, n, f, NULL, ctx, eps, allowed_bad);
}

/* FNV-1a over the signs of x[0..n) (leaky ReLU outputs: their inputs' signs). */
static uint64_t hash_signs(uint64_t h, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)(x[i] > 0)) * 0x100000001b3ull;
    return h;
}
static uint64_t hash_ints(uint64_t h, const int *x, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint64_t)(unsigned)x[i]) * 0x100000001b3ull;
    return h;
}

static double dot(const float *a, const float *r, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * r[i];
    return s;
}

/* ---- op gradient checks: L = sum(r * out) for a fixed random r ---- */

typedef struct opctx {
    int kind;
    float A[128], B[128], C[128], b[32], r[256], out[256], t[16];
    int grp[16], fail[16];
    const float *blk[4]; /* the terms of a sum */
} opctx;

enum { OP_MM, OP_MM_NT, OP_BIAS_LRELU, OP_SUM, OP_ADD, OP_UPDATE, OP_MSE, OP_RANK };

/* Odd sizes: past the 8- and 16-wide loops' blocks, into their tails. */
enum { SUM_N = 37, UPD_ROWS = 3, UPD_H = 21, UPD_N = UPD_ROWS * UPD_H };

static double op_loss(void *vc) {
    opctx *c = vc;
    memset(c->out, 0, sizeof c->out);
    switch (c->kind) {
    case OP_MM: mt__mm(3, 7, 5, c->A, c->B, 0.0f, c->out); return dot(c->out, c->r, 21);
    case OP_MM_NT: mt__mm_nt(3, 7, 5, c->A, c->B, 0.0f, c->out); return dot(c->out, c->r, 21);
    case OP_BIAS_LRELU:
        memcpy(c->out, c->A, sizeof(float) * UPD_N);
        mt__bias_lrelu(UPD_ROWS, UPD_H, c->out, c->b);
        return dot(c->out, c->r, UPD_N);
    case OP_SUM: mt__sum_blocks(SUM_N, c->out, c->blk, 4); return dot(c->out, c->r, SUM_N);
    case OP_ADD:
        memcpy(c->out, c->C, sizeof(float) * SUM_N);
        mt__add_blocks(SUM_N, c->out, c->blk, 3);
        return dot(c->out, c->r, SUM_N);
    case OP_UPDATE:
        mt__update_pull(UPD_ROWS, UPD_H, c->A, c->out, c->out + 128, c->B, c->b, c->blk, 3);
        return dot(c->out, c->r, UPD_N);
    case OP_MSE: return mt__mse(5, c->A, c->t, 1.0f, NULL);
    case OP_RANK: return mt__rank_loss(7, c->A, c->t, c->grp, c->fail, 1.0f, NULL, NULL);
    }
    return 0;
}

static void test_op_gradients(void **state) {
    (void)state;
    opctx c;
    float gA[128], gB[128], gC[128], gb[32];
    memset(&c, 0, sizeof c);
    fill(c.r, 256, 1);

    /* matmul 3x5 by 5x7 */
    c.kind = OP_MM;
    fill(c.A, 15, 1), fill(c.B, 35, 1);
    memset(gA, 0, sizeof gA), memset(gB, 0, sizeof gB);
    mt__mm_backward(3, 7, 5, c.A, c.B, c.r, gA, gB);
    gradcheck("mm dA", c.A, gA, 15, op_loss, &c, 1e-2f, 0);
    gradcheck("mm dB", c.B, gB, 35, op_loss, &c, 1e-2f, 0);

    /* 3x5 by (7x5)^T: the gradient of mt__mm's with B transposed */
    c.kind = OP_MM_NT;
    fill(c.A, 15, 1), fill(c.B, 35, 1);
    float bt[35], gbt[35];
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 5; j++) bt[j * 7 + i] = c.B[i * 5 + j];
    memset(gA, 0, sizeof gA), memset(gbt, 0, sizeof gbt);
    mt__mm_backward(3, 7, 5, c.A, bt, c.r, gA, gbt);
    for (int i = 0; i < 7; i++)
        for (int j = 0; j < 5; j++) gB[i * 5 + j] = gbt[j * 7 + i];
    gradcheck("mm_nt dA", c.A, gA, 15, op_loss, &c, 1e-2f, 0);
    gradcheck("mm_nt dB", c.B, gB, 35, op_loss, &c, 1e-2f, 0);

    /* products big enough to be cut into blocks give what one GEMM gives,
     * and beta 1 adds onto C */
    {
        enum { M = 1500, K = 33, N = 31 };
        float *a = malloc(sizeof(float) * M * K), *bb = malloc(sizeof(float) * K * N), *tb = malloc(sizeof(float) * N * K);
        float *cc = malloc(sizeof(float) * M * N), *da = calloc(M * K, sizeof(float)), *db = calloc(K * N, sizeof(float));
        double *ref = malloc(sizeof(double) * M * N);
        assert_non_null(a), assert_non_null(bb), assert_non_null(tb), assert_non_null(cc), assert_non_null(da), assert_non_null(db);
        assert_non_null(ref);
        fill(a, M * K, 1), fill(bb, K * N, 1);
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) tb[j * K + k] = bb[k * N + j];
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int k = 0; k < K; k++) s += (double)a[i * K + k] * bb[k * N + j];
                ref[i * N + j] = s;
            }
        mt__mm(M, N, K, a, bb, 0.0f, cc);
        for (int i = 0; i < M * N; i++) assert_true(fabs(ref[i] - cc[i]) < 1e-4 * (1 + fabs(ref[i])));
        mt__mm_backward(M, N, K, a, bb, cc, da, db);
        for (int k = 0; k < K; k += 7)
            for (int j = 0; j < N; j += 6) {
                double s = 0;
                for (int i = 0; i < M; i++) s += (double)a[i * K + k] * cc[i * N + j];
                assert_true(fabs(s - db[k * N + j]) < 1e-3 * (1 + fabs(s)));
            }
        for (int i = 0; i < M; i += 101)
            for (int k = 0; k < K; k += 4) {
                double s = 0;
                for (int j = 0; j < N; j++) s += (double)cc[i * N + j] * bb[k * N + j];
                assert_true(fabs(s - da[i * K + k]) < 1e-3 * (1 + fabs(s)));
            }
        mt__mm_nt(M, N, K, a, tb, 1.0f, cc);
        for (int i = 0; i < M * N; i++) assert_true(fabs(2 * ref[i] - cc[i]) < 2e-4 * (1 + fabs(ref[i])));
        mt__mm(M, N, K, a, bb, 1.0f, cc);
        for (int i = 0; i < M * N; i++) assert_true(fabs(3 * ref[i] - cc[i]) < 3e-4 * (1 + fabs(ref[i])));
        free(a), free(bb), free(tb), free(cc), free(da), free(db), free(ref);
    }

    /* bias + leaky ReLU, 3x21, pre-activations away from 0 (both sides);
     * the backward is mt__lrelu_backward from the output, then
     * mt__bias_backward */
    c.kind = OP_BIAS_LRELU;
    fill_away(c.A, UPD_N), fill(c.b, UPD_H, 0.05f);
    op_loss(&c);
    memset(gA, 0, sizeof gA), memset(gb, 0, sizeof gb);
    mt__lrelu_backward(UPD_N, c.out, c.r, gA);
    mt__bias_backward(UPD_ROWS, UPD_H, gA, gb);
    gradcheck("bias_lrelu dY", c.A, gA, UPD_N, op_loss, &c, 1e-3f, 0);
    gradcheck("bias_lrelu db", c.b, gb, UPD_H, op_loss, &c, 1e-3f, 0);

    /* sums of blocks, one block twice (a repeated edge): each block's
     * gradient is the sum's, once per appearance; added in order, so
     * exactly the plain loop's floats */
    fill(c.A, SUM_N, 1), fill(c.B, SUM_N, 1), fill(c.C, 2 * SUM_N, 1);
    c.blk[0] = c.A, c.blk[1] = c.B, c.blk[2] = c.A, c.blk[3] = c.C + SUM_N;
    c.kind = OP_SUM;
    op_loss(&c);
    for (int i = 0; i < SUM_N; i++) {
        float s = c.A[i];
        s += c.B[i], s += c.A[i], s += c.C[SUM_N + i];
        assert_memory_equal(&s, &c.out[i], sizeof s);
    }
    for (int i = 0; i < SUM_N; i++) gA[i] = 2 * c.r[i], gB[i] = c.r[i], gC[i] = 0, gC[SUM_N + i] = c.r[i];
    gradcheck("sum_blocks x0 (twice)", c.A, gA, SUM_N, op_loss, &c, 1e-2f, 0);
    gradcheck("sum_blocks x1", c.B, gB, SUM_N, op_loss, &c, 1e-2f, 0);
    gradcheck("sum_blocks x3", c.C, gC, 2 * SUM_N, op_loss, &c, 1e-2f, 0);
    c.kind = OP_ADD;
    op_loss(&c);
    for (int i = 0; i < SUM_N; i++) {
        float s = c.C[i];
        s += c.A[i], s += c.B[i], s += c.A[i];
        assert_memory_equal(&s, &c.out[i], sizeof s);
    }
    for (int i = 0; i < SUM_N; i++) gC[i] = c.r[i], gC[SUM_N + i] = 0;
    gradcheck("add_blocks y", c.C, gC, 2 * SUM_N, op_loss, &c, 1e-2f, 0);
    gradcheck("add_blocks x0 (twice)", c.A, gA, SUM_N, op_loss, &c, 1e-2f, 0);
    gradcheck("add_blocks x1", c.B, gB, SUM_N, op_loss, &c, 1e-2f, 0);
    {
        float y[SUM_N];
        memcpy(y, c.C, sizeof y);
        mt__add_blocks(SUM_N, y, c.blk, 0); /* a node without messages */
        assert_memory_equal(y, c.C, sizeof y);
        mt__add(SUM_N, y, c.A); /* the readout's sums: y += x, elementwise */
        for (int i = 0; i < SUM_N; i++) {
            float s = c.C[i];
            s += c.A[i];
            assert_memory_equal(&s, &y[i], sizeof s);
        }
    }

    /* the residual update of 3 rows of 21 with 3 pulled messages (one twice),
     * pre-activations away from 0: u is chosen to put them there */
    c.kind = OP_UPDATE;
    fill(c.A, UPD_N, 1), fill(c.b, UPD_H, 1), fill(c.C, 2 * UPD_N, 1);
    c.blk[0] = c.C, c.blk[1] = c.C + UPD_N, c.blk[2] = c.C;
    fill_away(c.B, UPD_N);
    for (int i = 0; i < UPD_N; i++) c.B[i] -= c.b[i % UPD_H] + 2 * c.C[i] + c.C[UPD_N + i];
    op_loss(&c);
    const float *act = c.out + 128;
    memset(gB, 0, sizeof gB), memset(gb, 0, sizeof gb);
    mt__lrelu_backward(UPD_N, act, c.r, gB);
    mt__bias_backward(UPD_ROWS, UPD_H, gB, gb);
    for (int i = 0; i < UPD_N; i++) gA[i] = c.r[i], gC[i] = 2 * gB[i], gC[UPD_N + i] = gB[i];
    gradcheck("update_pull dh", c.A, gA, UPD_N, op_loss, &c, 1e-3f, 0);
    gradcheck("update_pull du", c.B, gB, UPD_N, op_loss, &c, 1e-3f, 0);
    gradcheck("update_pull dbias", c.b, gb, UPD_H, op_loss, &c, 1e-3f, 0);
    gradcheck("update_pull dx", c.C, gC, 2 * UPD_N, op_loss, &c, 1e-3f, 0);
    {
        /* a = hn - h's activation; without a kept, and in place, the same bits */
        float hn[UPD_N], h2[UPD_N];
        op_loss(&c);
        mt__update_pull(UPD_ROWS, UPD_H, c.A, hn, NULL, c.B, c.b, c.blk, 3);
        assert_memory_equal(hn, c.out, sizeof hn);
        memcpy(h2, c.A, sizeof h2);
        mt__update_pull(UPD_ROWS, UPD_H, h2, h2, NULL, c.B, c.b, c.blk, 3);
        assert_memory_equal(h2, c.out, sizeof h2);
        for (int i = 0; i < UPD_N; i++) assert_true(fabsf(c.out[i] - c.A[i] - act[i]) <= 1e-6f * (1 + fabsf(c.out[i])));
    }

    /* MSE over 5 */
    c.kind = OP_MSE;
    fill(c.A, 5, 1), fill(c.t, 5, 1);
    memset(gA, 0, sizeof gA);
    mt__mse(5, c.A, c.t, 1.0f, gA);
    gradcheck("mse", c.A, gA, 5, op_loss, &c, 1e-3f, 0);

    /* pairwise ranking over 7 in 2 groups, one failed */
    c.kind = OP_RANK;
    int grp[7] = {0, 0, 0, 1, 1, 1, 1}, fl[7] = {0, 0, 1, 0, 0, 0, 1};
    memcpy(c.grp, grp, sizeof grp), memcpy(c.fail, fl, sizeof fl);
    fill(c.A, 7, 2), fill(c.t, 7, 1);
    memset(gA, 0, sizeof gA);
    long pairs = 0;
    double l = mt__rank_loss(7, c.A, c.t, c.grp, c.fail, 1.0f, gA, &pairs);
    assert_int_equal(pairs, 3 + 6); /* group 0: 1 + 2 with the failed; group 1: 3 + 3 */
    assert_true(l > 0);
    gradcheck("rank", c.A, gA, 7, op_loss, &c, 1e-3f, 0);
    /* ties and failed-failed are no pairs */
    float tt[3] = {1, 1, 0}, ss[3] = {0, 0, 0};
    int g3[3] = {0, 0, 0}, f3[3] = {0, 1, 1};
    mt__rank_loss(3, ss, tt, g3, f3, 1.0f, NULL, &pairs);
    assert_int_equal(pairs, 2);
}

/* ---- a synthetic shape: a chain of 5 nodes plus a context node ---- */

typedef struct shape_buf {
    mt_graph_shape s;
    int nt[64], src[256], dst[256], et[256];
} shape_buf;

static void chain_shape(shape_buf *b) {
    static const int types[6] = {0, 0, 1, 1, 2, 3};
    memset(b, 0, sizeof *b);
    b->s.n_nodes = 6;
    memcpy(b->nt, types, sizeof types);
    int e = 0;
    for (int v = 0; v < 4; v++) {
        b->src[e] = v, b->dst[e] = v + 1, b->et[e++] = 0;
        b->src[e] = v + 1, b->dst[e] = v, b->et[e++] = 1;
    }
    for (int v = 0; v < 5; v++) {
        b->src[e] = 5, b->dst[e] = v, b->et[e++] = 2;
        b->src[e] = v, b->dst[e] = 5, b->et[e++] = 3;
    }
    b->s.n_edges = e;
    b->s.node_type = b->nt, b->s.edge_src = b->src, b->s.edge_dst = b->dst, b->s.edge_type = b->et;
    b->s.hash = 0x1234;
}

/* A bigger shape: n nodes of mixed types, E edges of mixed types. */
static void random_shape(shape_buf *b, int n, int E) {
    memset(b, 0, sizeof *b);
    b->s.n_nodes = n, b->s.n_edges = E;
    for (int v = 0; v < n; v++) b->nt[v] = (int)(mt__gnn_rand(&rs) % 8);
    for (int e = 0; e < E; e++) {
        b->src[e] = (int)(mt__gnn_rand(&rs) % (uint64_t)n);
        b->dst[e] = (int)(mt__gnn_rand(&rs) % (uint64_t)n);
        b->et[e] = (int)(mt__gnn_rand(&rs) % 7);
    }
    b->s.node_type = b->nt, b->s.edge_src = b->src, b->s.edge_dst = b->dst, b->s.edge_type = b->et;
    b->s.hash = 0x5678;
}

/* ---- whole-model gradient ---- */

typedef struct modelctx {
    mt_gnn *m;
    mt__gnn_plan *plan;
    mt__gnn_ws *ws;
    int b;
    float *feats;
    float tg[8];
    int grp[8], fail[8];
} modelctx;

static double model_loss(void *vc) {
    modelctx *c = vc;
    const float *ptr[8];
    for (int g = 0; g < c->b; g++) ptr[g] = c->feats + (size_t)g * c->plan->n * F;
    mt__gnn_input(c->m, c->plan, c->ws, c->b, ptr);
    mt__gnn_forward(c->m, c->plan, c->ws, c->b);
    return mt__rank_loss(c->b, c->ws->s, c->tg, c->grp, c->fail, 1.0f, NULL, NULL) + mt__mse(c->b, c->ws->s, c->tg, 1.0f, NULL);
}

/* The kinks of a forward on a keep workspace: the embedding's and every
 * layer's leaky ReLUs, the head's, the readout's maxima. */
static uint64_t ws_kinks(const mt_gnn *m, const mt__gnn_plan *p, const mt__gnn_ws *w, int b) {
    const mt__gnn_layout *y = &m->lay;
    size_t NH = (size_t)p->n * b * y->H;
    uint64_t h = 0xcbf29ce484222325ull;
    if (m->p.arch != MT_GNN_MLP) h = hash_signs(hash_signs(h, w->H, NH), w->A, (size_t)y->L * NH);
    int hidden = m->p.arch == MT_GNN_MLP ? y->L : 1;
    for (int l = 0; l < hidden; l++) h = hash_signs(h, w->Z + (size_t)l * w->cap * y->H, (size_t)b * y->H);
    return hash_ints(h, w->argmax, (size_t)b * (m->p.arch == MT_GNN_MLP ? F : y->H));
}

static uint64_t model_kinks(void *vc) {
    modelctx *c = vc;
    return ws_kinks(c->m, c->plan, c->ws, c->b);
}

static void model_gradcheck(mt_gnn_arch arch) {
    shape_buf sb;
    chain_shape(&sb);
    mt_gnn_params p = mt_gnn_default_params();
    p.arch = arch, p.hidden = 5, p.layers = 2, p.seed = 7;
    mt_gnn *m;
    char err[256];
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    /* bigger weights than the initial ones so that every layer matters */
    for (size_t i = 0; i < m->lay.total; i++) m->w[i] *= 2.0f;
    for (int f = 0; f < F; f++) m->mean[f] = 0.1f, m->std[f] = 2.0f, m->istd[f] = 0.5f;
    modelctx c = {.m = m, .b = 3};
    float feats[3 * 6 * F];
    memset(feats, 0, sizeof feats);
    for (int i = 0; i < 3 * 6; i++) fill(feats + i * F, 10, 1.5f);
    c.feats = feats;
    c.tg[0] = 0.3f, c.tg[1] = -0.2f, c.tg[2] = 0.7f;
    assert_int_equal(mt__gnn_plan_make(m, &sb.s, &c.plan), MT_OK);
    assert_int_equal(mt__gnn_ws_make(m, c.plan, 3, 1, &c.ws), MT_OK);
    model_loss(&c);
    float ds[3] = {0};
    mt__rank_loss(3, c.ws->s, c.tg, c.grp, c.fail, 1.0f, ds, NULL);
    mt__mse(3, c.ws->s, c.tg, 1.0f, ds);
    size_t P = m->lay.total;
    float *grad = calloc(P, sizeof(float));
    assert_non_null(grad);
    mt__gnn_backward(m, c.plan, c.ws, 3, ds, grad);
    /* only parameters a 4-type shape can reach are worth the time; the
     * others must have zero gradient */
    int checked = 0;
    char what[64];
    snprintf(what, sizeof what, "model arch %d", (int)arch);
    gradcheck_kinks(what, m->w, grad, (int)P, model_loss, model_kinks, &c, 2e-3f, 0);
    for (size_t i = 0; i < P; i++) checked += grad[i] != 0;
    printf("# arch %d: %zu parameters, %d with a non-zero gradient\n", (int)arch, P, checked);
    assert_true(checked > 20);
    free(grad);
    mt__gnn_ws_free(c.ws);
    mt__gnn_plan_free(c.plan);
    mt_gnn_free(m);
}

static void test_model_gradient_modular(void **state) {
    (void)state;
    model_gradcheck(MT_GNN_MODULAR);
}
static void test_model_gradient_shared(void **state) {
    (void)state;
    model_gradcheck(MT_GNN_SHARED);
}
static void test_model_gradient_mlp(void **state) {
    (void)state;
    model_gradcheck(MT_GNN_MLP);
}

/* ---- the forward's pieces (gnn/forward.c), one by one ---- */

/* 12 nodes whose places (sorted by type) are not their numbers, self
 * loops, repeated edges, a node without edges, and with one module per
 * edge type every kind of message schedule: edge type 0 a row per source
 * on consecutive places (a run), 1 per source elsewhere, 2 per destination
 * on a run, 3 per destination elsewhere, 4 as many sources as
 * destinations. */
static void schedule_shape(shape_buf *b) {
    static const int types[12] = {2, 0, 0, 1, 1, 1, 3, 2, 4, 3, 0, 4};
    static const int edges[][3] = {
        {1, 3, 0}, {1, 7, 0}, {1, 1, 0}, {2, 4, 0}, {2, 9, 0}, {2, 0, 0}, {1, 3, 0}, {3, 0, 1}, {3, 6, 1},
        {3, 2, 1}, {8, 5, 1}, {8, 8, 1}, {1, 0, 2}, {4, 0, 2}, {9, 0, 2}, {5, 7, 2}, {6, 7, 2}, {7, 7, 2},
        {4, 0, 2}, {0, 2, 3}, {3, 2, 3}, {8, 9, 3}, {10, 9, 3}, {5, 2, 3}, {10, 5, 4}, {5, 10, 4},
    };
    memset(b, 0, sizeof *b);
    b->s.n_nodes = 12;
    memcpy(b->nt, types, sizeof types);
    b->s.n_edges = (int)(sizeof edges / sizeof edges[0]);
    for (int e = 0; e < b->s.n_edges; e++) b->src[e] = edges[e][0], b->dst[e] = edges[e][1], b->et[e] = edges[e][2];
    b->s.node_type = b->nt, b->s.edge_src = b->src, b->s.edge_dst = b->dst, b->s.edge_type = b->et;
    b->s.hash = 0x9abc;
}

enum { PIECE_EMBED, PIECE_LAYER, PIECE_READOUT, PIECE_HEAD };

typedef struct piecectx {
    int kind, b, l;
    mt_gnn *m;
    mt__gnn_plan *plan;
    mt__gnn_ws *ws;
    float *h; /* the layer's or the readout's input states */
    float *r; /* L = sum(r * out) */
} piecectx;

static size_t piece_nh(const piecectx *c) { return (size_t)c->plan->n * c->b * c->m->lay.H; }

static double piece_loss(void *vc) {
    piecectx *c = vc;
    mt__gnn_ws *w = c->ws;
    int NH = (int)piece_nh(c), H = c->m->lay.H;
    switch (c->kind) {
    case PIECE_EMBED: mt__gnn_embed(c->m, c->plan, w, c->b, w->H); return dot(w->H, c->r, NH);
    case PIECE_LAYER:
        mt__gnn_layer(c->m, c->plan, w, c->b, c->l, c->h, c->h + NH, w->A + (size_t)c->l * NH);
        return dot(c->h + NH, c->r, NH);
    case PIECE_READOUT: mt__gnn_readout(c->m, c->plan, w, c->b, c->h); return dot(w->R, c->r, c->b * 2 * H);
    case PIECE_HEAD: mt__gnn_head(c->m, w, c->b); return dot(w->s, c->r, c->b);
    }
    return 0;
}

/* The kinks of the piece that piece_loss ran. */
static uint64_t piece_kinks(void *vc) {
    piecectx *c = vc;
    const mt__gnn_ws *w = c->ws;
    size_t NH = piece_nh(c);
    int H = c->m->lay.H;
    uint64_t h = 0xcbf29ce484222325ull;
    switch (c->kind) {
    case PIECE_EMBED: return hash_signs(h, w->H, NH);
    case PIECE_LAYER: return hash_signs(h, w->A + (size_t)c->l * NH, NH);
    case PIECE_READOUT: return hash_ints(h, w->argmax, (size_t)c->b * H);
    case PIECE_HEAD: {
        int hidden = c->m->p.arch == MT_GNN_MLP ? c->m->lay.L : 1;
        for (int l = 0; l < hidden; l++) h = hash_signs(h, w->Z + (size_t)l * w->cap * H, (size_t)c->b * H);
        return h;
    }
    }
    return h;
}

/* A model of hidden width 19 (past the 16-wide blocks of the sums and the
 * update, into their tails), 2 layers, weights big enough that every
 * layer matters; its plan of the schedule shape and a keep workspace for 3
 * graphs, their features in it. */
static void piece_setup(piecectx *c, mt_gnn_arch arch, shape_buf *sb) {
    mt_gnn_params p = mt_gnn_default_params();
    p.arch = arch, p.hidden = 19, p.layers = 2, p.seed = 5;
    char err[256];
    memset(c, 0, sizeof *c);
    c->b = 3;
    assert_int_equal(mt_gnn_create(&p, &c->m, err, sizeof err), MT_OK);
    for (size_t i = 0; i < c->m->lay.total; i++) c->m->w[i] = 2.0f * c->m->w[i] + 0.05f * frand(1);
    for (int f = 0; f < F; f++) c->m->mean[f] = 0.1f, c->m->std[f] = 2.0f, c->m->istd[f] = 0.5f;
    schedule_shape(sb);
    assert_int_equal(mt__gnn_plan_make(c->m, &sb->s, &c->plan), MT_OK);
    assert_int_equal(mt__gnn_ws_make(c->m, c->plan, c->b, 1, &c->ws), MT_OK);
    int n = c->plan->n;
    float *feats = malloc(sizeof(float) * (size_t)c->b * n * F);
    assert_non_null(feats);
    fill(feats, c->b * n * F, 1.5f);
    const float *ptr[3] = {feats, feats + (size_t)n * F, feats + (size_t)2 * n * F};
    mt__gnn_input(c->m, c->plan, c->ws, c->b, ptr);
    free(feats);
    c->r = malloc(sizeof(float) * piece_nh(c) * 2);
    assert_non_null(c->r);
    fill(c->r, (int)piece_nh(c) * 2, 1);
}

static void piece_free(piecectx *c) {
    free(c->r);
    mt__gnn_ws_free(c->ws);
    mt__gnn_plan_free(c->plan);
    mt_gnn_free(c->m);
}

/* Checks the gradients grad[lo, hi) of the weights against finite
 * differences. */
static void piece_check_weights(const char *what, piecectx *c, const float *grad, size_t lo, size_t hi) {
    gradcheck_kinks(what, c->m->w + lo, grad + lo, (int)(hi - lo), piece_loss, piece_kinks, c, 1e-3f, 0);
}

static void piece_gradients(mt_gnn_arch arch) {
    shape_buf sb;
    piecectx c;
    piece_setup(&c, arch, &sb);
    const mt__gnn_layout *y = &c.m->lay;
    mt__gnn_ws *w = c.ws;
    const size_t NH = piece_nh(&c), P = y->total;
    const int H = y->H, b = c.b;
    float *grad = calloc(P, sizeof(float)), *gh = malloc(sizeof(float) * NH);
    assert_non_null(grad), assert_non_null(gh);
    char what[96];
    if (arch != MT_GNN_MLP) {
        if (arch == MT_GNN_MODULAR) {
            /* every kind of schedule is here: (side, run) */
            int seen = 0;
            for (int t = 0; t < c.plan->et; t++)
                if (c.plan->mrow_off[t + 1] > c.plan->mrow_off[t]) seen |= 1 << (2 * c.plan->mside[t] + c.plan->mrun[t]);
            assert_int_equal(seen, 15);
        }
        /* the input embedding, from the features: its weights */
        c.kind = PIECE_EMBED;
        piece_loss(&c);
        memcpy(w->dH, c.r, sizeof(float) * NH);
        mt__gnn_embed_backward(c.m, c.plan, w, b, w->H, grad);
        snprintf(what, sizeof what, "arch %d embedding", (int)arch);
        piece_check_weights(what, &c, grad, y->in_w, y->msg_w[0]);

        /* each layer on random states: dL/dh and the layer's weights */
        c.kind = PIECE_LAYER;
        for (int l = 0; l < y->L; l++) {
            c.l = l, c.h = w->H + (size_t)l * NH;
            fill(c.h, (int)NH, 1);
            piece_loss(&c);
            memcpy(w->dH, c.r, sizeof(float) * NH);
            mt__gnn_layer_backward(c.m, c.plan, w, b, l, c.h, w->A + (size_t)l * NH, grad);
            memcpy(gh, w->dH, sizeof(float) * NH);
            snprintf(what, sizeof what, "arch %d layer %d dh", (int)arch, l);
            gradcheck_kinks(what, c.h, gh, (int)NH, piece_loss, piece_kinks, &c, 1e-3f, 0);
            snprintf(what, sizeof what, "arch %d layer %d weights", (int)arch, l);
            piece_check_weights(what, &c, grad, y->msg_w[l], y->upd_b[l] + (size_t)y->nt * H);
            /* scoring's layer (in place, nothing kept) gives the same bits */
            float *hs = malloc(sizeof(float) * NH);
            assert_non_null(hs);
            piece_loss(&c);
            memcpy(hs, c.h, sizeof(float) * NH);
            mt__gnn_layer(c.m, c.plan, w, b, l, hs, hs, NULL);
            assert_memory_equal(hs, c.h + NH, sizeof(float) * NH);
            free(hs);
        }

        /* the readout of distinct states (a unique maximum, further apart than the steps) */
        c.kind = PIECE_READOUT;
        c.h = w->H + (size_t)y->L * NH;
        for (size_t i = 0; i < NH; i++) c.h[i] = (float)((i * 37) % NH) * (4.0f / (float)NH) - 2.0f;
        piece_loss(&c);
        memcpy(w->dR, c.r, sizeof(float) * (size_t)b * 2 * H);
        memset(gh, 0, sizeof(float) * NH);
        mt__gnn_readout_backward(c.m, c.plan, w, b, gh);
        snprintf(what, sizeof what, "arch %d readout", (int)arch);
        gradcheck_kinks(what, c.h, gh, (int)NH, piece_loss, piece_kinks, &c, 1e-3f, 0);
        /* scoring's readout (no argmax kept) gives the same bits */
        piece_loss(&c);
        mt__gnn_ws *w0;
        assert_int_equal(mt__gnn_ws_make(c.m, c.plan, b, 0, &w0), MT_OK);
        mt__gnn_readout(c.m, c.plan, w0, b, c.h);
        assert_memory_equal(w0->R, w->R, sizeof(float) * (size_t)b * 2 * H);
        mt__gnn_ws_free(w0);
    }

    /* the head on a random readout: its weights and (GNN) dL/dR */
    c.kind = PIECE_HEAD;
    int rw = 2 * (arch == MT_GNN_MLP ? F : H);
    fill(w->R, b * rw, 1);
    piece_loss(&c);
    memset(w->dR, 0, sizeof(float) * (size_t)b * rw);
    mt__gnn_head_backward(c.m, w, b, c.r, grad);
    size_t lo = arch == MT_GNN_MLP ? 0 : y->head_w1;
    snprintf(what, sizeof what, "arch %d head", (int)arch);
    piece_check_weights(what, &c, grad, lo, P);
    if (arch != MT_GNN_MLP) {
        float *dR = malloc(sizeof(float) * (size_t)b * rw);
        assert_non_null(dR);
        memcpy(dR, w->dR, sizeof(float) * (size_t)b * rw);
        snprintf(what, sizeof what, "arch %d head dR", (int)arch);
        gradcheck_kinks(what, w->R, dR, b * rw, piece_loss, piece_kinks, &c, 1e-3f, 0);
        free(dR);
    }
    free(grad), free(gh);
    piece_free(&c);
}

static void test_piece_gradients_modular(void **state) {
    (void)state;
    piece_gradients(MT_GNN_MODULAR);
}
static void test_piece_gradients_shared(void **state) {
    (void)state;
    piece_gradients(MT_GNN_SHARED);
}
static void test_piece_gradients_mlp(void **state) {
    (void)state;
    piece_gradients(MT_GNN_MLP);
}

/* ---- a learnable synthetic data set ---- */

typedef struct dataset {
    shape_buf sb;
    int n;
    float *feats;
    mt_gnn_sample *s;
} dataset;

/* groups x per samples of the chain shape. Each group (a "workload") has
 * its context features; a config's features sit on the chain nodes. The
 * target mixes a per-node-type linear part, a product of neighbours and a
 * context interaction; normalised per group (best = 0); some configs fail. */
static void make_data(dataset *d, int groups, int per, int first_group, uint64_t seed) {
    chain_shape(&d->sb);
    d->n = groups * per;
    d->feats = calloc((size_t)d->n * 6 * F, sizeof(float));
    d->s = calloc((size_t)d->n, sizeof(mt_gnn_sample));
    assert_non_null(d->feats), assert_non_null(d->s);
    uint64_t keep = rs;
    rs = seed;
    for (int g = 0; g < groups; g++) {
        float ctx[4];
        fill(ctx, 4, 1);
        double best = -1e30;
        for (int k = 0; k < per; k++) {
            int i = g * per + k;
            float *x = d->feats + (size_t)i * 6 * F;
            for (int v = 0; v < 5; v++) fill(x + v * F, 4, 1);
            for (int j = 0; j < 4; j++) x[5 * F + j] = ctx[j];
            x[5 * F + 10] = 3.0f; /* a constant feature: normalisation must cope */
            for (int v = 0; v < 6; v++) x[v * F + 40 + d->sb.nt[v]] = 1.0f; /* one-hot node kind, as the encoder gives */
            double t = 1.0 * x[0 * F + 0] - 0.8 * x[2 * F + 0] + 0.6 * x[4 * F + 1] + 0.9 * x[1 * F + 1] * x[2 * F + 1] +
                       0.8 * ctx[0] * x[3 * F + 2] - 0.5 * fabs(x[1 * F + 3]);
            d->s[i] = (mt_gnn_sample){.shape = &d->sb.s, .feats = x, .target = (float)t, .group = first_group + g};
            d->s[i].failed = x[4 * F + 3] > 0.85f;
            if (!d->s[i].failed && t > best) best = t;
        }
        for (int k = 0; k < per; k++) d->s[g * per + k].target -= (float)best;
    }
    rs = keep;
}

static void free_data(dataset *d) {
    free(d->feats);
    free(d->s);
}

/* Pairwise accuracy over pairs of working configs of one group with
 * different targets. */
static double pair_accuracy(mt_gnn *m, const dataset *d) {
    float *sc = malloc(sizeof(float) * (size_t)d->n);
    assert_non_null(sc);
    char err[256];
    assert_int_equal(mt_gnn_score(m, &d->sb.s, d->n, d->feats, sc, err, sizeof err), MT_OK);
    long ok = 0, all = 0;
    for (int i = 0; i < d->n; i++)
        for (int j = 0; j < d->n; j++)
            if (d->s[i].group == d->s[j].group && !d->s[i].failed && !d->s[j].failed && d->s[i].target > d->s[j].target) {
                all++;
                ok += sc[i] > sc[j];
            }
    free(sc);
    return all ? (double)ok / (double)all : 0;
}

static void test_learns_synthetic(void **state) {
    (void)state;
    dataset tr, te;
    make_data(&tr, 48, 25, 0, 101);
    make_data(&te, 10, 25, 1000, 202);
    char err[256];
    mt_gnn_arch archs[3] = {MT_GNN_MODULAR, MT_GNN_SHARED, MT_GNN_MLP};
    for (int a = 0; a < 3; a++) {
        mt_gnn_params p = mt_gnn_default_params();
        p.arch = archs[a], p.epochs = 30;
        mt_gnn *m;
        assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
        double before = pair_accuracy(m, &te), l0, l1;
        assert_int_equal(mt_gnn_loss_value(m, tr.s, tr.n, &l0, err, sizeof err), MT_OK);
        double t0 = now_s();
        assert_int_equal(mt_gnn_fit(m, tr.s, tr.n, err, sizeof err), MT_OK);
        double dt = now_s() - t0;
        assert_int_equal(mt_gnn_loss_value(m, tr.s, tr.n, &l1, err, sizeof err), MT_OK);
        double acc = pair_accuracy(m, &te), acc_tr = pair_accuracy(m, &tr);
        printf("# arch %d (%lld params): held-out pairwise accuracy %.3f (untrained %.3f, train %.3f), loss %.3f -> %.3f, fit %.2fs\n",
               (int)archs[a], (long long)mt_gnn_param_count(m), acc, before, acc_tr, l0, l1, dt);
        assert_int_equal(mt_gnn_trained(m), (int64_t)p.epochs * tr.n);
        assert_true(l1 < l0);
        /* the paper's design must learn it, the shared module most of it;
         * the MLP's mean/max pooling loses which node is which, so it only
         * has to lower its loss (above) */
        if (archs[a] == MT_GNN_MODULAR) assert_true(acc >= 0.85);
        if (archs[a] == MT_GNN_SHARED) assert_true(acc >= 0.7);

        /* shuffled labels: nothing to learn, held-out stays near chance */
        mt_gnn_sample *sh = malloc(sizeof *sh * (size_t)tr.n);
        assert_non_null(sh);
        memcpy(sh, tr.s, sizeof *sh * (size_t)tr.n);
        uint64_t r = 99;
        for (int i = tr.n - 1; i > 0; i--) {
            int j = (int)(mt__gnn_rand(&r) % (uint64_t)(i + 1));
            float t = sh[i].target;
            sh[i].target = sh[j].target, sh[j].target = t;
            int f = sh[i].failed;
            sh[i].failed = sh[j].failed, sh[j].failed = f;
        }
        assert_int_equal(mt_gnn_fit(m, sh, tr.n, err, sizeof err), MT_OK);
        double acc_sh = pair_accuracy(m, &te);
        printf("# arch %d: shuffled labels: held-out pairwise accuracy %.3f\n", (int)archs[a], acc_sh);
        assert_true(acc_sh > 0.35 && acc_sh < 0.65);
        free(sh);
        mt_gnn_free(m);
    }
    free_data(&tr);
    free_data(&te);
}

/* ---- determinism, continued training ---- */

static void test_determinism(void **state) {
    (void)state;
    dataset tr;
    make_data(&tr, 6, 20, 0, 303);
    char err[256];
    mt_gnn_params p = mt_gnn_default_params();
    p.epochs = 5, p.batch = 16;
    mt_gnn *a, *b;
    assert_int_equal(mt_gnn_create(&p, &a, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_create(&p, &b, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_fit(a, tr.s, tr.n, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_fit(b, tr.s, tr.n, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_train_steps(a, tr.s, tr.n, 7, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_train_steps(b, tr.s, tr.n, 7, err, sizeof err), MT_OK);
    unsigned char *ba, *bb;
    size_t la, lb;
    assert_int_equal(mt_gnn_save_mem(a, &ba, &la, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_save_mem(b, &bb, &lb, err, sizeof err), MT_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(ba, bb, la);
    free(bb);
    /* another seed: other weights */
    mt_gnn_params q = p;
    q.seed = 2;
    assert_int_equal(mt_gnn_set_params(b, &q, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_fit(b, tr.s, tr.n, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_save_mem(b, &bb, &lb, err, sizeof err), MT_OK);
    assert_true(memcmp(ba, bb, la) != 0);
    free(ba), free(bb);
    /* adaptation steps lower the loss on the new data */
    dataset nw;
    make_data(&nw, 1, 30, 77, 404);
    double l0, l1;
    assert_int_equal(mt_gnn_loss_value(a, nw.s, nw.n, &l0, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_train_steps(a, nw.s, nw.n, 40, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_loss_value(a, nw.s, nw.n, &l1, err, sizeof err), MT_OK);
    printf("# adaptation: 40 steps on a new group: loss %.3f -> %.3f\n", l0, l1);
    assert_true(l1 < l0);
    /* set_params cannot change the architecture */
    q = mt_gnn_get_params(a);
    q.hidden = 8;
    assert_int_equal(mt_gnn_set_params(a, &q, err, sizeof err), MT_INVALID_ARG);
    mt_gnn_free(a);
    mt_gnn_free(b);
    free_data(&tr);
    free_data(&nw);
}

static void test_bad_inputs(void **state) {
    (void)state;
    char err[256];
    mt_gnn *m;
    mt_gnn_params p = mt_gnn_default_params();
    p.hidden = 0;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_INVALID_ARG);
    assert_null(m);
    p = mt_gnn_default_params();
    p.arch = MT_GNN_MLP, p.layers = 0;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_INVALID_ARG);
    p = mt_gnn_default_params();
    p.epochs = 2;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    dataset tr;
    make_data(&tr, 3, 10, 0, 505);
    assert_int_equal(mt_gnn_fit(m, tr.s, tr.n, err, sizeof err), MT_OK);
    unsigned char *before, *after;
    size_t lb, la;
    assert_int_equal(mt_gnn_save_mem(m, &before, &lb, err, sizeof err), MT_OK);

    /* malformed shapes */
    shape_buf bad;
    chain_shape(&bad);
    float sc[2];
    bad.nt[2] = MT_GRAPH_NODE_TYPES;
    assert_int_equal(mt_gnn_score(m, &bad.s, 1, tr.feats, sc, err, sizeof err), MT_INVALID_ARG);
    chain_shape(&bad);
    bad.dst[3] = 6;
    assert_int_equal(mt_gnn_score(m, &bad.s, 1, tr.feats, sc, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "edge 3"));
    chain_shape(&bad);
    bad.et[0] = -1;
    assert_int_equal(mt_gnn_score(m, &bad.s, 1, tr.feats, sc, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_score(m, &tr.sb.s, -1, tr.feats, sc, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_score(m, &tr.sb.s, 0, NULL, NULL, err, sizeof err), MT_OK);
    /* the smallest shape: one node, no edges */
    int one_type = 5;
    mt_graph_shape one = {1, &one_type, 0, NULL, NULL, NULL, 1};
    assert_int_equal(mt_gnn_score(m, &one, 2, tr.feats, sc, err, sizeof err), MT_OK);
    assert_true(isfinite(sc[0]) && isfinite(sc[1]));

    /* a group that mixes shapes, a sample without features, no samples:
     * refused, and the model is unchanged */
    shape_buf other;
    chain_shape(&other);
    other.src[0] = 2;
    other.s.hash = 99;
    const mt_graph_shape *keep = tr.s[5].shape;
    tr.s[5].shape = &other.s;
    assert_int_equal(mt_gnn_fit(m, tr.s, tr.n, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "mixes"));
    tr.s[5].shape = keep;
    const float *kf = tr.s[3].feats;
    tr.s[3].feats = NULL;
    assert_int_equal(mt_gnn_train_steps(m, tr.s, tr.n, 3, err, sizeof err), MT_INVALID_ARG);
    tr.s[3].feats = kf;
    assert_int_equal(mt_gnn_fit(m, tr.s, 0, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_save_mem(m, &after, &la, err, sizeof err), MT_OK);
    assert_int_equal(la, lb);
    assert_memory_equal(before, after, la);
    free(before), free(after);
    mt_gnn_free(m);
    free_data(&tr);
}

static void test_param_counts(void **state) {
    (void)state;
    char err[256];
    mt_gnn *m;
    mt_gnn_params p = mt_gnn_default_params();
    int64_t H = p.hidden, L = p.layers, NT = MT_GRAPH_NODE_TYPES, ET = MT_GRAPH_EDGE_TYPES;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    int64_t head = 2 * H * H + H + H + 1;
    assert_int_equal(mt_gnn_param_count(m), NT * (F * H + H) + L * (ET * H * H + NT * (H * H + H)) + head);
    mt_gnn_free(m);
    p.arch = MT_GNN_SHARED;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_param_count(m), (F * H + H) + L * (H * H + H * H + H) + head);
    mt_gnn_free(m);
    p.arch = MT_GNN_MLP;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_param_count(m), (2 * F * H + H) + (L - 1) * (H * H + H) + H + 1);
    mt_gnn_free(m);
}

/* ---- model files ---- */

static mt_gnn *trained_model(mt_gnn_arch arch, dataset *tr) {
    char err[256];
    mt_gnn_params p = mt_gnn_default_params();
    p.arch = arch, p.hidden = 6, p.layers = 2, p.epochs = 2;
    mt_gnn *m;
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_fit(m, tr->s, tr->n, err, sizeof err), MT_OK);
    return m;
}

static void scores_of(mt_gnn *m, const dataset *d, float *sc) {
    char err[256];
    assert_int_equal(mt_gnn_score(m, &d->sb.s, d->n, d->feats, sc, err, sizeof err), MT_OK);
}

static void test_file_round_trip(void **state) {
    (void)state;
    dataset tr;
    make_data(&tr, 4, 20, 0, 606);
    char dir[] = "/tmp/mtgpu-gnn-XXXXXX", path[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/model.bin", dir);
    float *a = malloc(sizeof(float) * (size_t)tr.n), *b = malloc(sizeof(float) * (size_t)tr.n);
    assert_non_null(a), assert_non_null(b);
    for (int arch = 0; arch < 3; arch++) {
        mt_gnn *m = trained_model((mt_gnn_arch)arch, &tr), *l = NULL;
        scores_of(m, &tr, a);
        assert_int_equal(mt_gnn_save(m, path, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_load(path, &l, err, sizeof err), MT_OK);
        scores_of(l, &tr, b);
        assert_memory_equal(a, b, sizeof(float) * (size_t)tr.n);
        mt_gnn_params pm = mt_gnn_get_params(m), pl = mt_gnn_get_params(l);
        assert_int_equal(pm.arch, pl.arch);
        assert_int_equal(pm.hidden, pl.hidden);
        assert_int_equal(pm.layers, pl.layers);
        assert_int_equal(mt_gnn_param_count(m), mt_gnn_param_count(l));
        assert_int_equal(mt_gnn_trained(m), mt_gnn_trained(l));
        /* memory: bytes identical to the file's */
        unsigned char *buf;
        size_t len;
        assert_int_equal(mt_gnn_save_mem(l, &buf, &len, err, sizeof err), MT_OK);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        unsigned char *fb = malloc(len + 1);
        assert_non_null(fb);
        assert_int_equal(fread(fb, 1, len + 1, f), len);
        fclose(f);
        assert_memory_equal(buf, fb, len);
        free(fb), free(buf);
        mt_gnn_free(m);
        mt_gnn_free(l);
    }
    /* no temporary files left behind; a missing file is not found */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s | wc -l)\" -eq 1", dir);
    assert_int_equal(system(cmd), 0);
    mt_gnn *l = (mt_gnn *)1;
    snprintf(path, sizeof path, "%s/none.bin", dir);
    assert_int_equal(mt_gnn_load(path, &l, err, sizeof err), MT_NOT_FOUND);
    assert_null(l);
    /* writing into a directory that does not exist fails cleanly */
    snprintf(path, sizeof path, "%s/no/such/dir/model.bin", dir);
    mt_gnn *m = trained_model(MT_GNN_MODULAR, &tr);
    assert_int_equal(mt_gnn_save(m, path, err, sizeof err), MT_IO);
    mt_gnn_free(m);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(a), free(b);
    free_data(&tr);
}

static void put32le(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void reseal(unsigned char *b, size_t len) {
    uint64_t h = mt__gnn_fnv64(b, len - 8);
    for (int i = 0; i < 8; i++) b[len - 8 + i] = (unsigned char)(h >> (8 * i));
}

/* Loads a copy of buf[0..len) (a fresh allocation of exactly len bytes, so
 * ASan catches any read past it) and expects status want. */
static void expect_load(const unsigned char *buf, size_t len, mt_status want, const char *needle) {
    unsigned char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, buf, len);
    char err[256] = "";
    mt_gnn *m = (mt_gnn *)1;
    mt_status st = mt_gnn_load_mem(copy, len, &m, err, sizeof err);
    if (st != want) fail_msg("load of %zu bytes: %s (%s), expected %s", len, mt_status_name(st), err, mt_status_name(want));
    if (want != MT_OK) {
        assert_null(m);
        assert_true(err[0] != '\0');
        if (needle && !strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err, needle);
    } else {
        mt_gnn_free(m);
    }
    free(copy);
}

static void test_file_corruption(void **state) {
    (void)state;
    dataset tr;
    make_data(&tr, 3, 10, 0, 707);
    mt_gnn *m = trained_model(MT_GNN_MODULAR, &tr);
    unsigned char *buf;
    size_t len;
    char err[256];
    assert_int_equal(mt_gnn_save_mem(m, &buf, &len, err, sizeof err), MT_OK);
    expect_load(buf, len, MT_OK, NULL);

    /* truncated: at every offset in the header and near the end, every 13th elsewhere */
    for (size_t cut = 0; cut < len; cut += (cut < 128 || cut > len - 128) ? 1 : 13) expect_load(buf, cut, MT_CORRUPT, NULL);
    expect_load(buf, 0, MT_CORRUPT, "shorter");
    expect_load(buf, len - 1, MT_CORRUPT, "truncated");
    /* trailing data */
    unsigned char *longer = calloc(len + 5, 1);
    assert_non_null(longer);
    memcpy(longer, buf, len);
    expect_load(longer, len + 5, MT_CORRUPT, "trailing");
    free(longer);

    unsigned char *c = malloc(len);
    assert_non_null(c);
    /* every header byte flipped, and bytes all over the body */
    for (size_t i = 0; i < len; i += i < 64 ? 1 : 37) {
        memcpy(c, buf, len);
        c[i] ^= 0x5a;
        expect_load(c, len, MT_CORRUPT, NULL);
    }
    memcpy(c, buf, len);
    c[len - 1] ^= 1;
    expect_load(c, len, MT_CORRUPT, "checksum");
    memcpy(c, buf, len);
    c[200] ^= 0x10;
    expect_load(c, len, MT_CORRUPT, "checksum");

    /* corrupt fields with a valid checksum: each named in the error */
    memcpy(c, buf, len);
    memcpy(c, "MTGNNXXX", 8);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "magic");
    memcpy(c, buf, len);
    put32le(c + 8, 9);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "version 9");
    memcpy(c, buf, len);
    put32le(c + 12, 9);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "architecture");
    memcpy(c, buf, len);
    put32le(c + 24, 40);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "features");
    memcpy(c, buf, len);
    put32le(c + 28, 11);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "node types");
    memcpy(c, buf, len);
    put32le(c + 16, 7); /* hidden 7: the parameter count no longer matches */
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "parameters");
    memcpy(c, buf, len);
    put32le(c + 16, 0xffffffffu);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "out of range");
    memcpy(c, buf, len);
    put32le(c + 36, 0xfffffff0u);
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "parameters");
    memcpy(c, buf, len);
    put32le(c + 72 + 4 * F + 8, 0); /* a standard deviation of 0 (format version 2) */
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "standard deviation");
    memcpy(c, buf, len);
    put32le(c + len - 12, 0x7fc00000u); /* a NaN weight */
    reseal(c, len);
    expect_load(c, len, MT_CORRUPT, "non-finite");
    /* a model of another architecture with our shapes loads fine: shapes
     * come from the file */
    free(c);

    /* on disk: a truncated file */
    char path[] = "/tmp/mtgpu-gnn-trunc-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len / 2), (ssize_t)(len / 2));
    close(fd);
    mt_gnn *l = NULL;
    assert_int_equal(mt_gnn_load(path, &l, err, sizeof err), MT_CORRUPT);
    assert_null(l);
    unlink(path);
    free(buf);
    mt_gnn_free(m);
    free_data(&tr);
}

/* ---- scoring: threads, batches, speed ---- */

static void test_score_threads_and_speed(void **state) {
    (void)state;
    shape_buf sb;
    random_shape(&sb, 60, 100);
    enum { B = 1000 };
    float *x = malloc(sizeof(float) * B * 60 * F), *s1 = malloc(sizeof(float) * B), *s2 = malloc(sizeof(float) * B), *s3 = malloc(sizeof(float) * 70);
    assert_non_null(x), assert_non_null(s1), assert_non_null(s2), assert_non_null(s3);
    fill(x, B * 60 * F, 1);
    char err[256];
    for (int arch = 0; arch < 3; arch++) {
        mt_gnn_params p = mt_gnn_default_params();
        p.arch = (mt_gnn_arch)arch, p.threads = 1;
        mt_gnn *m;
        assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_score(m, &sb.s, B, x, s1, err, sizeof err), MT_OK); /* warm: plan and workspaces */
        double t0 = now_s();
        assert_int_equal(mt_gnn_score(m, &sb.s, B, x, s1, err, sizeof err), MT_OK);
        double t1 = now_s();
        p.threads = 2;
        assert_int_equal(mt_gnn_set_params(m, &p, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_score(m, &sb.s, B, x, s2, err, sizeof err), MT_OK);
        double t2 = now_s();
        assert_int_equal(mt_gnn_score(m, &sb.s, B, x, s2, err, sizeof err), MT_OK);
        double t3 = now_s();
        printf("# arch %d: B=%d, 60 nodes, 100 edges: %.0f graphs/s on 1 thread, %.0f on 2\n", arch, B, B / (t1 - t0), B / (t3 - t2));
        /* the same bits whatever the threads; a graph scored at another
         * place in a batch may differ in the last bits (BLAS kernels treat
         * edge rows of a block differently) */
        assert_memory_equal(s1, s2, sizeof(float) * B);
        assert_int_equal(mt_gnn_score(m, &sb.s, 70, x + (size_t)130 * 60 * F, s3, err, sizeof err), MT_OK);
        for (int i = 0; i < 70; i++) assert_true(fabsf(s3[i] - s1[130 + i]) <= 1e-5f * (1 + fabsf(s1[130 + i])));
        for (int i = 0; i < B; i++) assert_true(isfinite(s1[i]));
        /* a new shape replaces the cached plan; scores of the old come back the same */
        shape_buf small;
        chain_shape(&small);
        assert_int_equal(mt_gnn_score(m, &small.s, 3, x, s3, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_score(m, &sb.s, 64, x, s3, err, sizeof err), MT_OK);
        assert_memory_equal(s3, s1, sizeof(float) * 64); /* the same chunk: the same bits */
        mt_gnn_free(m);
    }
    free(x), free(s1), free(s2), free(s3);
}

/* ---- the inference path against the training forward ---- */

/* Scores of B graphs through the training forward (mt__gnn_input +
 * mt__gnn_forward on a keep workspace, minibatches of 64 as training runs). */
static void training_scores(mt_gnn *m, const mt_graph_shape *s, int B, const float *feats, float *out) {
    mt__gnn_plan *plan;
    mt__gnn_ws *ws;
    assert_int_equal(mt__gnn_plan_make(m, s, &plan), MT_OK);
    assert_int_equal(mt__gnn_ws_make(m, plan, 64, 1, &ws), MT_OK);
    const float *ptr[64];
    for (int lo = 0; lo < B; lo += 64) {
        int b = B - lo < 64 ? B - lo : 64;
        for (int g = 0; g < b; g++) ptr[g] = feats + (size_t)(lo + g) * s->n_nodes * F;
        mt__gnn_input(m, plan, ws, b, ptr);
        mt__gnn_forward(m, plan, ws, b);
        memcpy(out + lo, ws->s, sizeof(float) * (size_t)b);
    }
    mt__gnn_ws_free(ws);
    mt__gnn_plan_free(plan);
}

static double lrelu_d(double v) { return v > 0 ? v : 0.01 * v; }

/* The model as gnn/gnn.h defines it, written out naively in double: per
 * node and per edge, in the shape's order, no plans or batches. Both paths
 * are checked against it. */
static void reference_scores(const mt_gnn *m, const mt_graph_shape *s, int B, const float *feats, double *out) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    int n = s->n_nodes, H = y->H;
    double *x = malloc(sizeof(double) * (size_t)n * F), *h = malloc(sizeof(double) * (size_t)n * H);
    double *u = malloc(sizeof(double) * (size_t)n * H), *r = malloc(sizeof(double) * 2 * (F > H ? F : H));
    double *z = malloc(sizeof(double) * (size_t)H), *z2 = malloc(sizeof(double) * (size_t)H);
    assert_true(x && h && u && r && z && z2);
    for (int g = 0; g < B; g++) {
        for (int i = 0; i < n * F; i++) {
            int f = i % F;
            x[i] = ((double)feats[(size_t)g * n * F + i] - m->mean[f]) * m->istd[f];
        }
        const double *nodes = x;
        int width = F;
        if (m->p.arch != MT_GNN_MLP) {
            for (int v = 0; v < n; v++) {
                int t = y->nt == 1 ? 0 : s->node_type[v];
                for (int j = 0; j < H; j++) {
                    double a = W[y->in_b + (size_t)t * H + j];
                    for (int f = 0; f < F; f++) a += x[v * F + f] * W[y->in_w + (size_t)t * F * H + (size_t)f * H + j];
                    h[v * H + j] = lrelu_d(a);
                }
            }
            for (int l = 0; l < y->L; l++) {
                for (int v = 0; v < n; v++) {
                    int t = y->nt == 1 ? 0 : s->node_type[v];
                    for (int j = 0; j < H; j++) {
                        double a = W[y->upd_b[l] + (size_t)t * H + j];
                        for (int i = 0; i < H; i++) a += h[v * H + i] * W[y->upd_w[l] + (size_t)t * H * H + (size_t)i * H + j];
                        u[v * H + j] = a;
                    }
                }
                for (int e = 0; e < s->n_edges; e++) {
                    int t = y->et == 1 ? 0 : s->edge_type[e], a = s->edge_src[e], d = s->edge_dst[e];
                    for (int j = 0; j < H; j++)
                        for (int i = 0; i < H; i++) u[d * H + j] += h[a * H + i] * W[y->msg_w[l] + (size_t)t * H * H + (size_t)i * H + j];
                }
                for (int i = 0; i < n * H; i++) h[i] += lrelu_d(u[i]);
            }
            nodes = h, width = H;
        }
        for (int j = 0; j < width; j++) {
            double sum = 0, mx = nodes[j];
            for (int v = 0; v < n; v++) sum += nodes[v * width + j], mx = fmax(mx, nodes[v * width + j]);
            r[j] = sum / n, r[width + j] = mx;
        }
        const double *in = r;
        int in_dim = 2 * width;
        int layers = m->p.arch == MT_GNN_MLP ? y->L : 1;
        for (int l = 0; l < layers; l++) {
            size_t wo = m->p.arch == MT_GNN_MLP ? y->mlp_w[l] : y->head_w1, bo = m->p.arch == MT_GNN_MLP ? y->mlp_b[l] : y->head_b1;
            double *o = l % 2 ? z2 : z;
            for (int j = 0; j < H; j++) {
                double a = W[bo + j];
                for (int i = 0; i < in_dim; i++) a += in[i] * W[wo + (size_t)i * H + j];
                o[j] = lrelu_d(a);
            }
            in = o, in_dim = H;
        }
        double sc = W[y->out_b];
        for (int j = 0; j < H; j++) sc += in[j] * W[y->out_w + j];
        out[g] = sc;
    }
    free(x), free(h), free(u), free(r), free(z), free(z2);
}

/* mt_gnn_score (2 threads) and a scorer against the training forward and
 * the reference: max |difference| within 1e-4 of the largest score; the
 * scorer gives mt_gnn_score's bits. Returns the relative difference of the
 * two paths. */
static double compare_paths(mt_gnn *m, const mt_graph_shape *s, int B, const float *feats, const char *what) {
    float *a = malloc(sizeof(float) * (size_t)B), *b = malloc(sizeof(float) * (size_t)B), *c = malloc(sizeof(float) * (size_t)B);
    double *ref = malloc(sizeof(double) * (size_t)B);
    assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(ref);
    reference_scores(m, s, B, feats, ref);
    char err[256];
    mt_gnn_params p = mt_gnn_get_params(m);
    p.threads = 2;
    assert_int_equal(mt_gnn_set_params(m, &p, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_score(m, s, B, feats, a, err, sizeof err), MT_OK);
    training_scores(m, s, B, feats, b);
    mt_gnn_scorer *sc = NULL;
    assert_int_equal(mt_gnn_scorer_create(m, s, &sc, err, sizeof err), MT_OK);
    assert_true(mt_gnn_scorer_matches(sc, s));
    assert_int_equal(mt_gnn_scorer_run(sc, B, feats, c, err, sizeof err), MT_OK);
    mt_gnn_scorer_free(sc);
    assert_memory_equal(a, c, sizeof(float) * (size_t)B);
    double dmax = 0, dref = 0, smax = 0;
    for (int i = 0; i < B; i++) {
        assert_true(isfinite(a[i]) && isfinite(b[i]));
        dmax = fmax(dmax, fabs((double)a[i] - b[i]));
        dref = fmax(dref, fmax(fabs(a[i] - ref[i]), fabs(b[i] - ref[i])));
        smax = fmax(smax, fabs(ref[i]));
    }
    assert_true(smax > 0);
    double rel = dmax / smax;
    printf("# %s: %d graphs, max |inference - training| %.3g (%.3g of the largest score %.3g), from the reference %.3g\n", what, B, dmax, rel,
           smax, dref / smax);
    if (rel > 1e-4) fail_msg("%s: inference and training scores differ by %g relative", what, rel);
    if (dref / smax > 1e-4) fail_msg("%s: scores differ from the reference by %g relative", what, dref / smax);
    free(a), free(b), free(c), free(ref);
    return rel;
}

/* Odd shapes: self loops, repeated edges, no edges, one node; odd widths;
 * batches that do not fill the last chunk. */
static void test_infer_matches_forward(void **state) {
    (void)state;
    shape_buf shapes[4];
    chain_shape(&shapes[0]);
    random_shape(&shapes[1], 60, 100);
    random_shape(&shapes[2], 7, 0);
    memset(&shapes[3], 0, sizeof shapes[3]);
    shapes[3].s.n_nodes = 1, shapes[3].nt[0] = 3, shapes[3].s.node_type = shapes[3].nt, shapes[3].s.hash = 9;
    /* whatever the draw: a self loop and a repeated edge */
    shapes[1].dst[0] = shapes[1].src[0];
    shapes[1].src[1] = shapes[1].src[2], shapes[1].dst[1] = shapes[1].dst[2], shapes[1].et[1] = shapes[1].et[2];
    int self = 0;
    for (int e = 0; e < shapes[1].s.n_edges; e++) self += shapes[1].src[e] == shapes[1].dst[e];
    printf("# random shape: %d self loops\n", self);
    enum { B = 75 };
    float *x = malloc(sizeof(float) * B * 60 * F);
    assert_non_null(x);
    fill(x, B * 60 * F, 1.5f);
    char err[256], what[96];
    for (int arch = 0; arch < 3; arch++)
        for (int hi = 0; hi < 2; hi++)
            for (int k = 0; k < 4; k++) {
                mt_gnn_params p = mt_gnn_default_params();
                p.arch = (mt_gnn_arch)arch, p.hidden = hi ? 32 : 5, p.layers = 2, p.seed = 11;
                mt_gnn *m;
                assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
                /* weights big enough that every layer matters, biases too */
                for (size_t i = 0; i < m->lay.total; i++) m->w[i] = 2.0f * m->w[i] + 0.05f * frand(1);
                for (int f = 0; f < F; f++) m->mean[f] = 0.1f * (float)(f % 3), m->std[f] = 2.0f, m->istd[f] = 0.5f;
                snprintf(what, sizeof what, "arch %d hidden %d shape %d", arch, p.hidden, k);
                compare_paths(m, &shapes[k].s, B, x, what);
                mt_gnn_free(m);
            }
    /* a scorer refuses what mt_gnn_score refuses, and knows its shape */
    mt_gnn *m;
    assert_int_equal(mt_gnn_create(NULL, &m, err, sizeof err), MT_OK);
    mt_gnn_scorer *sc = (mt_gnn_scorer *)1;
    assert_int_equal(mt_gnn_scorer_create(NULL, &shapes[0].s, &sc, err, sizeof err), MT_INVALID_ARG);
    assert_null(sc);
    assert_int_equal(mt_gnn_scorer_create(m, &shapes[0].s, NULL, err, sizeof err), MT_INVALID_ARG);
    shape_buf bad = shapes[0];
    bad.s.node_type = bad.nt;
    bad.nt[2] = MT_GRAPH_NODE_TYPES;
    assert_int_equal(mt_gnn_scorer_create(m, &bad.s, &sc, err, sizeof err), MT_INVALID_ARG);
    assert_null(sc);
    assert_int_equal(mt_gnn_scorer_create(m, &shapes[0].s, &sc, err, sizeof err), MT_OK);
    assert_true(mt_gnn_scorer_matches(sc, &shapes[0].s));
    assert_false(mt_gnn_scorer_matches(sc, &shapes[1].s));
    float one;
    assert_int_equal(mt_gnn_scorer_run(sc, -1, x, &one, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_scorer_run(sc, 1, NULL, &one, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_scorer_run(sc, 0, NULL, NULL, err, sizeof err), MT_OK);
    mt_gnn_scorer_free(sc);
    mt_gnn_scorer_free(NULL);
    mt_gnn_free(m);
    free(x);
}

/* Real candidates: every template's encoded configs (a batch of the ones it
 * builds), each architecture at its default size with the normalisation of
 * a short fit on them. */
static void test_infer_matches_forward_encoded(void **state) {
    (void)state;
    enum { B = 130 };
    char err[256];
    int tested = 0;
    for (int ti = 0; ti < mt_template_count(); ti++) {
        const mt_template *t = mt_template_at(ti);
        mt_graph_encoder *enc = NULL;
        assert_int_equal(mt_graph_encoder_create(t, &enc, err, sizeof err), MT_OK);
        const mt_graph_shape *s = mt_graph_encoder_shape(enc);
        size_t per = (size_t)s->n_nodes * F;
        float *x = malloc(sizeof(float) * per * B);
        mt_gnn_sample *smp = calloc(B, sizeof *smp);
        assert_non_null(x), assert_non_null(smp);
        int n = mt_test_encode_samples(t, enc, B, x, smp);
        assert_true(n >= 64);
        for (int arch = 0; arch < 3; arch++) {
            mt_gnn_params p = mt_gnn_default_params();
            p.arch = (mt_gnn_arch)arch, p.epochs = 1;
            mt_gnn *m;
            assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
            assert_int_equal(mt_gnn_fit(m, smp, n, err, sizeof err), MT_OK);
            char what[96];
            snprintf(what, sizeof what, "%s, arch %d", mt_template_name(t), arch);
            compare_paths(m, s, n, x, what);
            mt_gnn_free(m);
        }
        free(x), free(smp);
        mt_graph_encoder_free(enc);
        tested++;
    }
    assert_true(tested >= 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_gradients),
        cmocka_unit_test(test_piece_gradients_modular),
        cmocka_unit_test(test_piece_gradients_shared),
        cmocka_unit_test(test_piece_gradients_mlp),
        cmocka_unit_test(test_model_gradient_modular),
        cmocka_unit_test(test_model_gradient_shared),
        cmocka_unit_test(test_model_gradient_mlp),
        cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_file_round_trip),
        cmocka_unit_test(test_file_corruption),
        cmocka_unit_test(test_score_threads_and_speed),
        cmocka_unit_test(test_infer_matches_forward),
        cmocka_unit_test(test_infer_matches_forward_encoded),
        cmocka_unit_test(test_learns_synthetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
