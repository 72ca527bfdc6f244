/* Meta-learning on the GNN (gnn/maml.c).
 *
 * The inner and outer updates of first-order MAML and Meta-SGD on a tiny
 * model (the MLP architecture, 2 hidden units) against a step computed
 * here independently: the model's forward and loss written out in double
 * precision and differentiated by central differences. The whole-set loss
 * against the training loss and, over several chunks, against that same
 * reference. Meta-training on a synthetic family of tasks (targets from a
 * task-specific linear function of shared features): its start reaches a
 * given query loss in fewer adaptation steps than a random start and than
 * a pooled-trained one. Determinism, argument errors, and model files of
 * format version 2 (round trip of meta-trained models, version 1 still
 * read, every corrupted field of version 2 refused). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gnn-impl.h"
#include "gnn.h"

#define F MT_GRAPH_FEATS

static uint64_t rs = 4242;
static double urand(void) { return (double)(mt__gnn_rand(&rs) >> 11) * (1.0 / 9007199254740992.0); }
static float frand(float a) { return (float)(a * (2 * urand() - 1)); }

/* ---- graphs: one small shape ---- */

enum { NN = 5 };
static int g_nt[NN] = {0, 1, 2, 3, 11}, g_src[4] = {0, 1, 2, 4}, g_dst[4] = {1, 2, 3, 0}, g_et[4] = {0, 1, 0, 11};
static mt_graph_shape g_shape = {NN, g_nt, 4, g_src, g_dst, g_et, 0x77};

/* n samples of group `group` with random features (into x, n x NN x F)
 * and targets from tgt (NULL: random in [-1, 0]). */
static void make_samples(mt_gnn_sample *s, float *x, int n, int group) {
    for (int i = 0; i < n; i++) {
        float *xi = x + (size_t)i * NN * F;
        for (int j = 0; j < NN * F; j++) xi[j] = frand(1.0f);
        s[i] = (mt_gnn_sample){.shape = &g_shape, .feats = xi, .target = (float)-urand(), .group = group};
    }
}

/* ---- the tiny MLP model, written out in double ---- */

static mt_gnn *tiny_model(uint64_t seed) {
    mt_gnn_params p = mt_gnn_default_params();
    p.arch = MT_GNN_MLP, p.hidden = 2, p.layers = 1, p.seed = seed, p.threads = 1;
    mt_gnn *m;
    char err[256];
    assert_int_equal(mt_gnn_create(&p, &m, err, sizeof err), MT_OK);
    /* weights big enough that both hidden units matter; a normalisation */
    for (size_t i = 0; i < m->lay.total; i++) m->w[i] = frand(0.3f);
    for (int f = 0; f < F; f++) {
        m->mean[f] = frand(0.2f);
        m->std[f] = 0.5f + (float)urand();
        m->istd[f] = 1.0f / m->std[f];
    }
    return m;
}

/* The model's score of one graph at weights w: the readout (mean and max
 * of the normalised node features), one hidden layer of leaky ReLU, the
 * output. */
static double ref_score(const mt_gnn *m, const double *w, const float *x) {
    const mt__gnn_layout *y = &m->lay;
    const int H = y->H;
    double R[2 * F];
    for (int f = 0; f < F; f++) {
        double sum = 0, mx = -INFINITY;
        for (int v = 0; v < NN; v++) {
            double a = ((double)x[v * F + f] - m->mean[f]) * m->istd[f];
            sum += a;
            mx = a > mx ? a : mx;
        }
        R[f] = sum / NN, R[F + f] = mx;
    }
    double s = w[y->out_b];
    for (int h = 0; h < H; h++) {
        double z = w[y->mlp_b[0] + h];
        for (int k = 0; k < 2 * F; k++) z += R[k] * w[y->mlp_w[0] + (size_t)k * H + h];
        z = z > 0 ? z : MT__LRELU_SLOPE * z;
        s += z * w[y->out_w + h];
    }
    return s;
}

/* The loss of a set (one group, all working): mean over pairs of
 * log(1 + exp(-(s_i - s_j))) for target_i > target_j, plus the mean
 * squared error against the targets shifted so that the best of ref (NULL:
 * of the set) is 0. */
static double ref_loss_ref(const mt_gnn *m, const double *w, const mt_gnn_sample *const *set, int n, const mt_gnn_sample *const *ref, int nref) {
    double s[256], best = -INFINITY;
    assert_true(n <= 256);
    for (int i = 0; i < n; i++) s[i] = ref_score(m, w, set[i]->feats);
    if (!ref) ref = set, nref = n;
    for (int i = 0; i < nref; i++) best = ref[i]->target > best ? ref[i]->target : best;
    double rank = 0, mse = 0;
    long pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (set[i]->target > set[j]->target) rank += log1p(exp(-(s[i] - s[j]))), pairs++;
    for (int i = 0; i < n; i++) {
        double d = s[i] - ((double)set[i]->target - best);
        mse += d * d;
    }
    return (pairs ? rank / pairs : 0) + mse / n;
}

static double ref_loss(const mt_gnn *m, const double *w, const mt_gnn_sample *const *set, int n) { return ref_loss_ref(m, w, set, n, NULL, 0); }

/* Central differences of ref_loss_ref in every weight. */
static void ref_grad_ref(const mt_gnn *m, double *w, const mt_gnn_sample *const *set, int n, const mt_gnn_sample *const *ref, int nref, double *g) {
    const double eps = 1e-6;
    for (size_t i = 0; i < m->lay.total; i++) {
        double keep = w[i];
        w[i] = keep + eps;
        double lp = ref_loss_ref(m, w, set, n, ref, nref);
        w[i] = keep - eps;
        double lm = ref_loss_ref(m, w, set, n, ref, nref);
        w[i] = keep;
        g[i] = (lp - lm) / (2 * eps);
    }
}

static void ref_grad(const mt_gnn *m, double *w, const mt_gnn_sample *const *set, int n, double *g) { ref_grad_ref(m, w, set, n, NULL, 0, g); }

static double max_abs(const double *a, size_t n) {
    double r = 0;
    for (size_t i = 0; i < n; i++) r = fmax(r, fabs(a[i]));
    return r;
}

/* max |a - b| over n, b in float */
static double max_diff(const double *a, const float *b, size_t n) {
    double r = 0;
    for (size_t i = 0; i < n; i++) r = fmax(r, fabs(a[i] - (double)b[i]));
    return r;
}

static double norm2(const double *a, size_t n) {
    double r = 0;
    for (size_t i = 0; i < n; i++) r += a[i] * a[i];
    return sqrt(r);
}

enum { NT = 2, NS = 4, NQ = 5 };

typedef struct tasks2 {
    float x[NT][NS + NQ][NN * F];
    mt_gnn_sample smp[NT][NS + NQ];
    const mt_gnn_sample *sup[NT][NS], *qry[NT][NQ];
    mt__gnn_split split[NT];
} tasks2;

static void make_tasks2(tasks2 *t) {
    for (int k = 0; k < NT; k++) {
        make_samples(t->smp[k], &t->x[k][0][0], NS + NQ, k);
        for (int i = 0; i < NS; i++) t->sup[k][i] = &t->smp[k][i];
        for (int i = 0; i < NQ; i++) t->qry[k][i] = &t->smp[k][NS + i];
        t->split[k] = (mt__gnn_split){.support = t->sup[k], .ns = NS, .query = t->qry[k], .nq = NQ};
    }
}

/* The whole-set loss is the training loss (one minibatch holding the set,
 * targets already shifted), and its gradient, over one chunk and over
 * several, is the reference's. */
static void test_set_loss(void **state) {
    (void)state;
    mt_gnn *m = tiny_model(11);
    const size_t P = m->lay.total;
    enum { N = 150 }; /* three chunks */
    float *x = malloc(sizeof(float) * N * NN * F);
    mt_gnn_sample *s = malloc(sizeof *s * N);
    const mt_gnn_sample **set = malloc(sizeof *set * N);
    float *g = malloc(sizeof(float) * P);
    double *w = malloc(sizeof(double) * P), *rg = malloc(sizeof(double) * P);
    assert_non_null(x), assert_non_null(s), assert_non_null(set), assert_non_null(g), assert_non_null(w), assert_non_null(rg);
    make_samples(s, x, N, 0);
    s[7].target = 0; /* the best is 0: shifting changes nothing */
    for (int i = 0; i < N; i++) set[i] = &s[i];
    for (size_t i = 0; i < P; i++) w[i] = m->w[i];
    mt__gnn_lctx *c;
    char err[256];
    assert_int_equal(mt__gnn_lctx_make(m, &c, err, sizeof err), MT_OK);
    const int sizes[2] = {30, N};
    for (int k = 0; k < 2; k++) {
        int n = sizes[k];
        double L, Lt;
        assert_int_equal(mt__gnn_set_loss(c, m, NULL, MT_GNN_LOSS_BOTH, set, n, NULL, 0, &L, g, err, sizeof err), MT_OK);
        mt_gnn_params p = mt_gnn_get_params(m);
        p.batch = n;
        assert_int_equal(mt_gnn_set_params(m, &p, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_loss_value(m, s, n, &Lt, err, sizeof err), MT_OK);
        double Lr = ref_loss(m, w, set, n);
        printf("# set of %d: loss %.7f, training loss %.7f, reference %.7f\n", n, L, Lt, Lr);
        assert_true(fabs(L - Lt) <= 1e-6 * fabs(Lt));
        assert_true(fabs(L - Lr) <= 1e-5 * fabs(Lr));
        ref_grad(m, w, set, n, rg);
        double d = max_diff(rg, g, P), gm = max_abs(rg, P);
        printf("# set of %d: gradient max |analytic - reference| %.3g of %.3g\n", n, d, gm);
        assert_true(gm > 1e-3);
        assert_true(d <= 1e-4 * gm);
    }
    /* weights given explicitly are used, and the model's stay */
    double L0, L1;
    float *w2 = malloc(sizeof(float) * P);
    assert_non_null(w2);
    for (size_t i = 0; i < P; i++) w2[i] = m->w[i] + 0.1f;
    assert_int_equal(mt__gnn_set_loss(c, m, NULL, MT_GNN_LOSS_BOTH, set, 20, NULL, 0, &L0, NULL, err, sizeof err), MT_OK);
    assert_int_equal(mt__gnn_set_loss(c, m, w2, MT_GNN_LOSS_BOTH, set, 20, NULL, 0, &L1, NULL, err, sizeof err), MT_OK);
    for (size_t i = 0; i < P; i++) w[i] = w2[i];
    assert_true(fabs(L1 - ref_loss(m, w, set, 20)) <= 1e-5 * L1);
    assert_true(L0 != L1);
    assert_true(m->w[0] + 0.1f == w2[0]);
    free(w2);
    mt__gnn_lctx_free(c);
    free(x), free(s), free(set), free(g), free(w), free(rg);
    mt_gnn_free(m);
}

/* First-order MAML, two inner steps, two tasks: the adapted weights, the
 * meta-gradient (the query gradient at the adapted weights, averaged) and
 * Adam's first step, against the reference. */
static void test_fomaml_step_by_hand(void **state) {
    (void)state;
    mt_gnn *m = tiny_model(21);
    const size_t P = m->lay.total;
    tasks2 t;
    make_tasks2(&t);
    mt_gnn_meta_params p = mt_gnn_meta_default_params();
    p.algorithm = MT_GNN_META_FOMAML, p.inner_steps = 2, p.inner_lr = 0.1, p.outer_lr = 1e-3;
    double *w0 = malloc(sizeof(double) * P), *w1 = malloc(sizeof(double) * P), *g = malloc(sizeof(double) * P);
    double *G = calloc(P, sizeof(double)), *G0 = calloc(P, sizeof(double));
    float *before = malloc(sizeof(float) * P);
    assert_non_null(w0), assert_non_null(w1), assert_non_null(g), assert_non_null(G), assert_non_null(G0), assert_non_null(before);
    const double lr = (float)p.inner_lr;
    double qloss = 0;
    char err[256];
    for (int k = 0; k < NT; k++) {
        for (size_t i = 0; i < P; i++) w0[i] = m->w[i], w1[i] = m->w[i];
        for (int s = 0; s < p.inner_steps; s++) {
            ref_grad(m, w1, t.sup[k], NS, g);
            if (norm2(g, P) >= MT__GNN_CLIP) fail_msg("support gradient norm %g: clipped", norm2(g, P)); /* no clipping here */
            for (size_t i = 0; i < P; i++) w1[i] -= lr * g[i];
        }
        /* adaptation (public, the same code) gives these weights */
        mt_gnn *a;
        assert_int_equal(mt_gnn_clone(m, &a, err, sizeof err), MT_OK);
        a->origin = MT_GNN_ORIGIN_META;
        a->inner = (mt_gnn_inner){.algorithm = MT_GNN_META_FOMAML, .steps = p.inner_steps, .lr = lr, .loss = MT_GNN_LOSS_BOTH};
        mt_gnn_sample sup[NS];
        for (int i = 0; i < NS; i++) sup[i] = *t.sup[k][i];
        assert_int_equal(mt_gnn_adapt(a, sup, NS, err, sizeof err), MT_OK);
        double da = max_diff(w1, a->w, P), moved = 0;
        for (size_t i = 0; i < P; i++) moved = fmax(moved, fabs(w1[i] - w0[i]));
        printf("# task %d: adapted weights moved %.3g, max |model - reference| %.3g\n", k, moved, da);
        assert_true(moved > 1e-2);
        assert_true(da <= 1e-4 * moved);
        assert_int_equal(mt_gnn_get_origin(a), MT_GNN_ORIGIN_ADAPTED);
        mt_gnn_free(a);
        /* the query's targets relative to the support's best */
        ref_grad_ref(m, w1, t.qry[k], NQ, t.sup[k], NS, g);
        for (size_t i = 0; i < P; i++) G[i] += g[i] / NT;
        qloss += ref_loss_ref(m, w1, t.qry[k], NQ, t.sup[k], NS) / NT;
        ref_grad_ref(m, w0, t.qry[k], NQ, t.sup[k], NS, g); /* at the initial weights: what a wrong step would use */
        for (size_t i = 0; i < P; i++) G0[i] += g[i] / NT;
    }
    mt__gnn_meta *st;
    memcpy(before, m->w, sizeof(float) * P);
    assert_int_equal(mt__gnn_meta_make(m, &p, &st, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_get_origin(m), MT_GNN_ORIGIN_META);
    assert_null(m->rates);
    double ql;
    assert_int_equal(mt__gnn_meta_step(st, t.split, NT, &ql, err, sizeof err), MT_OK);
    const float *Gm = mt__gnn_meta_grad(st, 0);
    assert_null(mt__gnn_meta_grad(st, 1));
    double gm = max_abs(G, P), d = max_diff(G, Gm, P), d0 = 0;
    for (size_t i = 0; i < P; i++) d0 = fmax(d0, fabs(G[i] - G0[i]));
    printf("# meta-gradient: max %.3g, max |model - reference| %.3g (the gradient at the initial weights is %.3g away); query loss %.6f / %.6f\n",
           gm, d, d0, ql, qloss);
    assert_true(d <= 1e-4 * gm);
    assert_true(d0 > 100 * 1e-4 * gm);
    assert_true(fabs(ql - qloss) <= 1e-5 * qloss);
    /* Adam's first step: lr * g / (|g| + eps) of the clipped meta-gradient */
    for (size_t i = 0; i < P; i++) {
        double want = before[i] - p.outer_lr * Gm[i] / (fabs(Gm[i]) + 1e-8);
        if (fabs(m->w[i] - want) > 1e-7 + 1e-3 * p.outer_lr) fail_msg("weight %zu: %.9g after the step, expected %.9g", i, m->w[i], want);
    }
    mt__gnn_meta_free(st);
    free(w0), free(w1), free(g), free(G), free(G0), free(before);
    mt_gnn_free(m);
}

/* Meta-SGD, one inner step with a rate per weight: the weights'
 * meta-gradient, the log rates' (rate * dL_q/d rate, the rate's
 * derivative taken here by central differences of the query loss of
 * w - rate * g_s), and the rates' update. */
static void test_meta_sgd_step_by_hand(void **state) {
    (void)state;
    mt_gnn *m = tiny_model(31);
    const size_t P = m->lay.total;
    tasks2 t;
    make_tasks2(&t);
    mt_gnn_meta_params p = mt_gnn_meta_default_params();
    p.algorithm = MT_GNN_META_SGD, p.inner_steps = 1, p.inner_lr = 0.2, p.rate_lr = 1e-2;
    char err[256];
    mt__gnn_meta *st;
    assert_int_equal(mt__gnn_meta_make(m, &p, &st, err, sizeof err), MT_OK);
    assert_non_null(m->rates);
    for (size_t i = 0; i < P; i++) assert_true(m->rates[i] == (float)p.inner_lr);
    /* different rates per weight: the step must use each one's own */
    for (size_t i = 0; i < P; i++) m->rates[i] = (float)(0.05 + 0.45 * urand());
    double *w0 = malloc(sizeof(double) * P), *w1 = malloc(sizeof(double) * P), *gs = malloc(sizeof(double) * P), *g = malloc(sizeof(double) * P);
    double *G = calloc(P, sizeof(double)), *GR = calloc(P, sizeof(double));
    assert_non_null(w0), assert_non_null(w1), assert_non_null(gs), assert_non_null(g), assert_non_null(G), assert_non_null(GR);
    for (int k = 0; k < NT; k++) {
        for (size_t i = 0; i < P; i++) w0[i] = m->w[i];
        ref_grad(m, w0, t.sup[k], NS, gs);
        for (size_t i = 0; i < P; i++) w1[i] = w0[i] - (double)m->rates[i] * gs[i];
        ref_grad_ref(m, w1, t.qry[k], NQ, t.sup[k], NS, g);
        for (size_t i = 0; i < P; i++) G[i] += g[i] / NT;
        /* d L_q(w0 - rate * gs) / d rate_i, by differences in the rate */
        const double eps = 1e-5;
        for (size_t i = 0; i < P; i++) {
            double keep = w1[i];
            w1[i] = w0[i] - ((double)m->rates[i] + eps) * gs[i];
            double lp = ref_loss_ref(m, w1, t.qry[k], NQ, t.sup[k], NS);
            w1[i] = w0[i] - ((double)m->rates[i] - eps) * gs[i];
            double lm = ref_loss_ref(m, w1, t.qry[k], NQ, t.sup[k], NS);
            w1[i] = keep;
            GR[i] += (double)m->rates[i] * (lp - lm) / (2 * eps) / NT;
        }
    }
    double ql;
    assert_int_equal(mt__gnn_meta_step(st, t.split, NT, &ql, err, sizeof err), MT_OK);
    const float *Gm = mt__gnn_meta_grad(st, 0), *GRm = mt__gnn_meta_grad(st, 1);
    assert_non_null(GRm);
    double d = max_diff(G, Gm, P), dr = max_diff(GR, GRm, P), gm = max_abs(G, P), grm = max_abs(GR, P);
    printf("# Meta-SGD: weights' meta-gradient max %.3g, off by %.3g; log rates' max %.3g, off by %.3g\n", gm, d, grm, dr);
    assert_true(gm > 1e-3 && grm > 1e-5);
    assert_true(d <= 1e-4 * gm);
    assert_true(dr <= 1e-3 * grm);
    /* rates: exp of the log rate after Adam's first step, which started
     * from log(inner_lr) */
    for (size_t i = 0; i < P; i++) {
        double want = exp(log((float)p.inner_lr) - p.rate_lr * GRm[i] / (fabs(GRm[i]) + 1e-8));
        if (fabs(m->rates[i] - want) > 1e-5 * want) fail_msg("rate %zu: %.9g, expected %.9g", i, m->rates[i], want);
    }
    mt__gnn_meta_free(st);
    free(w0), free(w1), free(gs), free(g), free(G), free(GR);
    mt_gnn_free(m);
}

/* ---- a synthetic family of tasks ---- */

/* Task k's target: a function of features 0 and 1 that all tasks share,
 * plus b_k times a function of features 2 and 3: b_k is the task's own,
 * of either sign, so that pooled training (which sees b average out) has
 * to learn it per task, from scratch, while meta-training can learn a
 * start from which one step along a support set's gradient finds it. */
typedef struct family {
    int ntasks, per;
    float *x;
    mt_gnn_sample *s;
    mt_gnn_task *t;
} family;

static void family_make(family *fm, int ntasks, int per, uint64_t seed) {
    uint64_t keep = rs;
    rs = seed;
    fm->ntasks = ntasks, fm->per = per;
    fm->x = malloc(sizeof(float) * (size_t)ntasks * per * NN * F);
    fm->s = malloc(sizeof *fm->s * (size_t)ntasks * per);
    fm->t = malloc(sizeof *fm->t * (size_t)ntasks);
    assert_non_null(fm->x), assert_non_null(fm->s), assert_non_null(fm->t);
    for (int k = 0; k < ntasks; k++) {
        double b = (urand() < 0.5 ? -1 : 1) * (0.5 + urand());
        mt_gnn_sample *s = fm->s + (size_t)k * per;
        make_samples(s, fm->x + (size_t)k * per * NN * F, per, k);
        for (int i = 0; i < per; i++) {
            float *x = fm->x + ((size_t)k * per + i) * NN * F;
            for (int n = 0; n < NN; n++)
                for (int f = 4; f < F; f++) x[n * F + f] = 0; /* only features 0..3 vary */
            double u = 0, v = 0;
            for (int n = 0; n < NN; n++) u += x[n * F + 0] - 0.5 * x[n * F + 1], v += x[n * F + 2] + x[n * F + 3];
            s[i].target = (float)(u + b * v);
        }
        fm->t[k] = (mt_gnn_task){.samples = s, .n = per};
    }
    rs = keep;
}

static void family_free(family *fm) { free(fm->x), free(fm->s), free(fm->t); }

/* Plain gradient steps at `lr` from start's weights on task k's first K
 * samples until the loss of the next Q falls to `target` (at most `most`
 * steps); returns the steps taken (most + 1: never). */
static int steps_to(const mt_gnn *start, const family *fm, int k, int K, int Q, double lr, double target, int most) {
    char err[256];
    mt_gnn *a;
    assert_int_equal(mt_gnn_clone(start, &a, err, sizeof err), MT_OK);
    mt__gnn_clear_inner(a);
    a->origin = MT_GNN_ORIGIN_META;
    a->inner = (mt_gnn_inner){.algorithm = MT_GNN_META_FOMAML, .steps = 1, .lr = lr, .loss = MT_GNN_LOSS_RANK};
    mt__gnn_lctx *c;
    assert_int_equal(mt__gnn_lctx_make(a, &c, err, sizeof err), MT_OK);
    const mt_gnn_sample *q[64], *sp[64];
    const mt_gnn_sample *s = fm->t[k].samples;
    for (int i = 0; i < Q; i++) q[i] = &s[K + i];
    for (int i = 0; i < K; i++) sp[i] = &s[i];
    int step = 0;
    for (;; step++) {
        double L;
        assert_int_equal(mt__gnn_set_loss(c, a, NULL, MT_GNN_LOSS_RANK, q, Q, sp, K, &L, NULL, err, sizeof err), MT_OK);
        if (L <= target || step > most) break;
        assert_int_equal(mt_gnn_adapt(a, s, K, err, sizeof err), MT_OK);
    }
    mt__gnn_lctx_free(c);
    mt_gnn_free(a);
    return step;
}

/* The ranking loss alone: the family's targets carry no offset that a
 * start could get right for every task. */
static void synthetic_family(mt_gnn_arch arch) {
    family tr, te;
    family_make(&tr, 48, 40, 1001);
    family_make(&te, 8, 40, 2002);
    mt_gnn_params gp = mt_gnn_default_params();
    gp.arch = arch, gp.hidden = 8, gp.layers = 1, gp.seed = 5, gp.threads = 1, gp.loss = MT_GNN_LOSS_RANK;
    char err[256];
    mt_gnn *meta, *pooled, *fresh;
    assert_int_equal(mt_gnn_create(&gp, &meta, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_create(&gp, &fresh, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_create(&gp, &pooled, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_fit(pooled, tr.s, tr.ntasks * tr.per, err, sizeof err), MT_OK);
    mt_gnn_meta_params p = mt_gnn_meta_default_params();
    /* first-order MAML: its inner procedure (one rate) is what every start
     * adapts with below */
    p.algorithm = MT_GNN_META_FOMAML;
    p.support = 10, p.query = 20, p.inner_steps = 1, p.inner_lr = 0.5, p.tasks_per_batch = 8, p.outer_lr = 3e-3, p.iterations = 300, p.seed = 9;
    assert_int_equal(mt_gnn_meta_train(meta, &p, tr.t, tr.ntasks, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_get_origin(meta), MT_GNN_ORIGIN_META);
    assert_int_equal(mt_gnn_get_inner(meta).loss, MT_GNN_LOSS_RANK);
    /* each held-out task: gradient steps at the inner rate from each start */
    const int K = 10, Q = 30, most = 60;
    const double target = 0.45;
    double sm = 0, sp = 0, sf = 0;
    for (int k = 0; k < te.ntasks; k++) {
        int a = steps_to(meta, &te, k, K, Q, p.inner_lr, target, most), b = steps_to(pooled, &te, k, K, Q, p.inner_lr, target, most),
            c = steps_to(fresh, &te, k, K, Q, p.inner_lr, target, most);
        printf("# arch %d, held-out task %d: steps to a query loss of %.2f: meta-trained %d, pooled %d, random %d\n", (int)arch, k, target, a, b, c);
        sm += a, sp += b, sf += c;
    }
    printf("# arch %d: mean steps (%d: never): meta-trained %.2f, pooled %.2f, random %.2f\n", (int)arch, most + 1, sm / te.ntasks,
           sp / te.ntasks, sf / te.ntasks);
    assert_true(sm < sp);
    assert_true(sm < sf);
    mt_gnn_free(meta), mt_gnn_free(pooled), mt_gnn_free(fresh);
    family_free(&tr), family_free(&te);
}

static void test_synthetic_family(void **state) {
    (void)state;
    synthetic_family(MT_GNN_MODULAR);
    synthetic_family(MT_GNN_MLP);
}

/* ---- determinism and errors ---- */

static void test_determinism_and_errors(void **state) {
    (void)state;
    family tr;
    family_make(&tr, 6, 12, 3003);
    mt_gnn_params gp = mt_gnn_default_params();
    gp.hidden = 4, gp.layers = 1, gp.threads = 1;
    char err[256];
    mt_gnn *a, *b, *c;
    assert_int_equal(mt_gnn_create(&gp, &a, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_create(&gp, &b, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_create(&gp, &c, err, sizeof err), MT_OK);
    mt_gnn_meta_params p = mt_gnn_meta_default_params();
    p.algorithm = MT_GNN_META_SGD, p.support = 4, p.query = 6, p.inner_steps = 2, p.tasks_per_batch = 3, p.iterations = 20;
    assert_int_equal(mt_gnn_meta_train(a, &p, tr.t, tr.ntasks, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_meta_train(b, &p, tr.t, tr.ntasks, err, sizeof err), MT_OK);
    size_t P = a->lay.total;
    assert_memory_equal(a->w, b->w, sizeof(float) * P);
    assert_memory_equal(a->rates, b->rates, sizeof(float) * P);
    assert_int_equal(mt_gnn_trained(a), 6 * 12);
    mt_gnn_inner in = mt_gnn_get_inner(a);
    assert_int_equal(in.algorithm, MT_GNN_META_SGD);
    assert_int_equal(in.steps, 2);
    assert_true(in.lr == (float)p.inner_lr);
    p.seed = 2;
    assert_int_equal(mt_gnn_meta_train(c, &p, tr.t, tr.ntasks, err, sizeof err), MT_OK);
    assert_true(memcmp(a->w, c->w, sizeof(float) * P) != 0);
    /* adaptation: deterministic, and it moves the weights */
    float *w0 = malloc(sizeof(float) * P);
    assert_non_null(w0);
    memcpy(w0, a->w, sizeof(float) * P);
    assert_int_equal(mt_gnn_adapt(a, tr.s, 8, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_adapt(b, tr.s, 8, err, sizeof err), MT_OK);
    assert_memory_equal(a->w, b->w, sizeof(float) * P);
    assert_true(memcmp(a->w, w0, sizeof(float) * P) != 0);
    free(w0);

    /* bad params, each refused with the model unchanged */
    mt_gnn_meta_params bad[8];
    for (int i = 0; i < 8; i++) bad[i] = p;
    bad[0].algorithm = (mt_gnn_meta_algo)7;
    bad[1].support = 0;
    bad[2].query = 0;
    bad[3].inner_steps = 0;
    bad[4].inner_steps = MT_GNN_MAX_INNER_STEPS + 1;
    bad[5].inner_lr = -1;
    bad[6].outer_lr = NAN;
    bad[7].tasks_per_batch = 0;
    memcpy(c->w, b->w, sizeof(float) * P);
    for (int i = 0; i < 8; i++) {
        err[0] = '\0';
        assert_int_equal(mt_gnn_meta_train(c, &bad[i], tr.t, tr.ntasks, err, sizeof err), MT_INVALID_ARG);
        assert_true(err[0] != '\0');
    }
    assert_memory_equal(c->w, b->w, sizeof(float) * P);
    /* no usable task; a task of mixed shapes; a NaN target */
    mt_gnn_task one = {tr.s, 1};
    assert_int_equal(mt_gnn_meta_train(c, &p, &one, 1, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "no task"));
    mt_graph_shape other = g_shape;
    other.n_edges = 3;
    other.hash = 0x78;
    mt_gnn_sample mixed[3] = {tr.s[0], tr.s[1], tr.s[2]};
    mixed[2].shape = &other;
    mt_gnn_task mt = {mixed, 3};
    assert_int_equal(mt_gnn_meta_train(c, &p, &mt, 1, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "shapes"));
    mixed[2] = tr.s[2];
    mixed[1].target = NAN;
    assert_int_equal(mt_gnn_meta_train(c, &p, &mt, 1, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "non-finite"));
    assert_memory_equal(c->w, b->w, sizeof(float) * P);

    /* adaptation needs an inner procedure; training makes a model pooled */
    mt_gnn *pooled;
    assert_int_equal(mt_gnn_create(&gp, &pooled, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_adapt(pooled, tr.s, 4, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "not meta-trained"));
    assert_int_equal(mt_gnn_adapt(b, tr.s, 0, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_gnn_train_steps(b, tr.s, 12, 2, err, sizeof err), MT_OK);
    assert_int_equal(mt_gnn_get_origin(b), MT_GNN_ORIGIN_POOLED);
    assert_int_equal(mt_gnn_get_inner(b).steps, 0);
    assert_null(b->rates);
    mt_gnn_free(pooled);
    mt_gnn_free(a), mt_gnn_free(b), mt_gnn_free(c);
    family_free(&tr);
}

/* ---- model files, version 2 ---- */

static void put32le(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void putf32le(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put32le(p, u);
}
static void reseal(unsigned char *b, size_t len) {
    uint64_t h = mt__gnn_fnv64(b, len - 8);
    for (int i = 0; i < 8; i++) b[len - 8 + i] = (unsigned char)(h >> (8 * i));
}

/* Loads a resealed copy of buf with the u32 (or, with isf, f32) at off
 * set to v, and expects MT_CORRUPT with needle in the message. */
static void expect_field(const unsigned char *buf, size_t len, size_t off, uint32_t v, int isf, float fv, const char *needle) {
    unsigned char *c = malloc(len);
    assert_non_null(c);
    memcpy(c, buf, len);
    if (isf) putf32le(c + off, fv);
    else put32le(c + off, v);
    reseal(c, len);
    mt_gnn *m = (mt_gnn *)1;
    char err[256] = "";
    mt_status st = mt_gnn_load_mem(c, len, &m, err, sizeof err);
    if (st != MT_CORRUPT) fail_msg("field at %zu: %s (%s), expected MT_CORRUPT", off, mt_status_name(st), err);
    assert_null(m);
    if (!strstr(err, needle)) fail_msg("field at %zu: error '%s' does not mention '%s'", off, err, needle);
    free(c);
}

static void scores(mt_gnn *m, const family *fm, float *out) {
    char err[256];
    for (int k = 0; k < fm->ntasks; k++) {
        const mt_gnn_sample *s = fm->t[k].samples;
        for (int i = 0; i < fm->per; i++)
            assert_int_equal(mt_gnn_score(m, &g_shape, 1, s[i].feats, out + (size_t)k * fm->per + i, err, sizeof err), MT_OK);
    }
}

static void test_file_v2(void **state) {
    (void)state;
    family tr;
    family_make(&tr, 4, 10, 4004);
    const int N = tr.ntasks * tr.per;
    float *s1 = malloc(sizeof(float) * N), *s2 = malloc(sizeof(float) * N);
    assert_non_null(s1), assert_non_null(s2);
    char err[256];
    mt_gnn_params gp = mt_gnn_default_params();
    gp.hidden = 4, gp.layers = 1, gp.threads = 1;
    for (int algo = MT_GNN_META_FOMAML; algo <= MT_GNN_META_SGD; algo++) {
        mt_gnn *m, *l;
        assert_int_equal(mt_gnn_create(&gp, &m, err, sizeof err), MT_OK);
        mt_gnn_meta_params p = mt_gnn_meta_default_params();
        p.algorithm = (mt_gnn_meta_algo)algo, p.support = 4, p.query = 4, p.inner_steps = 3, p.inner_lr = 0.01, p.iterations = 5;
        p.tasks_per_batch = 2;
        assert_int_equal(mt_gnn_meta_train(m, &p, tr.t, tr.ntasks, err, sizeof err), MT_OK);
        unsigned char *buf, *buf2;
        size_t len, len2;
        assert_int_equal(mt_gnn_save_mem(m, &buf, &len, err, sizeof err), MT_OK);
        size_t P = m->lay.total, want = 72 + 8 * F + 4 * P + (algo == MT_GNN_META_SGD ? 4 * P : 0) + 8;
        assert_int_equal(len, want);
        assert_int_equal(mt_gnn_load_mem(buf, len, &l, err, sizeof err), MT_OK);
        /* the same scores, inner procedure, rates; adapts to the same weights */
        scores(m, &tr, s1);
        scores(l, &tr, s2);
        assert_memory_equal(s1, s2, sizeof(float) * N);
        assert_int_equal(mt_gnn_get_origin(l), MT_GNN_ORIGIN_META);
        mt_gnn_inner a = mt_gnn_get_inner(m), b = mt_gnn_get_inner(l);
        assert_int_equal(a.algorithm, b.algorithm);
        assert_int_equal(a.steps, b.steps);
        assert_true(a.lr == b.lr);
        assert_int_equal(a.loss, b.loss);
        if (algo == MT_GNN_META_SGD) assert_memory_equal(m->rates, l->rates, sizeof(float) * P);
        else assert_null(l->rates);
        assert_int_equal(mt_gnn_adapt(m, tr.s, 6, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_adapt(l, tr.s, 6, err, sizeof err), MT_OK);
        assert_memory_equal(m->w, l->w, sizeof(float) * P);
        /* one encoding: saving the loaded model gives the same bytes; an
         * adapted model says so */
        mt_gnn_free(l);
        assert_int_equal(mt_gnn_load_mem(buf, len, &l, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_save_mem(l, &buf2, &len2, err, sizeof err), MT_OK);
        assert_int_equal(len2, len);
        assert_memory_equal(buf, buf2, len);
        free(buf2);
        assert_int_equal(mt_gnn_save_mem(m, &buf2, &len2, err, sizeof err), MT_OK);
        mt_gnn *l2;
        assert_int_equal(mt_gnn_load_mem(buf2, len2, &l2, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_get_origin(l2), MT_GNN_ORIGIN_ADAPTED);
        mt_gnn_free(l2);
        free(buf2);

        /* every field of version 2, corrupted under a valid checksum */
        expect_field(buf, len, 48, 3, 0, 0, "origin");
        expect_field(buf, len, 48, 0, 0, 0, "pooled model with an inner");
        expect_field(buf, len, 52, 0, 0, 0, "inner algorithm");
        expect_field(buf, len, 52, 3, 0, 0, "inner algorithm");
        expect_field(buf, len, 56, 0, 0, 0, "inner steps");
        expect_field(buf, len, 56, MT_GNN_MAX_INNER_STEPS + 1, 0, 0, "inner steps");
        expect_field(buf, len, 60, 3, 0, 0, "inner loss");
        expect_field(buf, len, 64, 0, 1, 0.0f, "inner rate");
        expect_field(buf, len, 64, 0, 1, -0.5f, "inner rate");
        expect_field(buf, len, 64, 0, 1, NAN, "inner rate");
        expect_field(buf, len, 64, 0, 1, INFINITY, "inner rate");
        expect_field(buf, len, 68, 1, 0, 0, "reserved");
        /* the other algorithm implies another length */
        expect_field(buf, len, 52, algo == MT_GNN_META_SGD ? MT_GNN_META_FOMAML : MT_GNN_META_SGD, 0, 0,
                     algo == MT_GNN_META_SGD ? "trailing" : "truncated");
        if (algo == MT_GNN_META_SGD) {
            size_t r0 = 72 + 8 * F + 4 * P;
            expect_field(buf, len, r0 + 4 * 5, 0, 1, -1e-3f, "inner rate of weight 5");
            expect_field(buf, len, r0 + 4 * (P - 1), 0, 1, NAN, "non-finite");
        }
        free(buf);
        mt_gnn_free(l);

        /* a pooled model: no inner procedure allowed */
        assert_int_equal(mt_gnn_fit(m, tr.s, N, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_save_mem(m, &buf, &len, err, sizeof err), MT_OK);
        assert_int_equal(len, 72 + 8 * F + 4 * P + 8);
        expect_field(buf, len, 56, 1, 0, 0, "pooled model with an inner");
        expect_field(buf, len, 52, 1, 0, 0, "pooled model with an inner");
        expect_field(buf, len, 64, 0, 1, 0.01f, "pooled model with an inner");
        /* version 1 (the same model without bytes 48..72) still loads, pooled */
        unsigned char *v1 = malloc(len - 24);
        assert_non_null(v1);
        memcpy(v1, buf, 48);
        memcpy(v1 + 48, buf + 72, len - 72);
        put32le(v1 + 8, 1);
        reseal(v1, len - 24);
        assert_int_equal(mt_gnn_load_mem(v1, len - 24, &l, err, sizeof err), MT_OK);
        assert_int_equal(mt_gnn_get_origin(l), MT_GNN_ORIGIN_POOLED);
        scores(m, &tr, s1);
        scores(l, &tr, s2);
        assert_memory_equal(s1, s2, sizeof(float) * N);
        mt_gnn_free(l);
        /* a version-2 header on a version-1 body is refused */
        put32le(v1 + 8, 2);
        reseal(v1, len - 24);
        l = (mt_gnn *)1;
        assert_int_equal(mt_gnn_load_mem(v1, len - 24, &l, err, sizeof err), MT_CORRUPT);
        assert_null(l);
        free(v1);
        free(buf);
        mt_gnn_free(m);
    }
    free(s1), free(s2);
    family_free(&tr);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_loss),
        cmocka_unit_test(test_fomaml_step_by_hand),
        cmocka_unit_test(test_meta_sgd_step_by_hand),
        cmocka_unit_test(test_determinism_and_errors),
        cmocka_unit_test(test_file_v2),
        cmocka_unit_test(test_synthetic_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
