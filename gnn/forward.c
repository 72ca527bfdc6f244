/* GNN forward and backward over batches of one shape, and batched scoring
 * on several threads.
 *
 * A batch of b graphs with n nodes is one [b*n, .] matrix of node rows,
 * sorted by node module (gnn-impl.h), so a node module is one GEMM on a
 * contiguous block. An edge module is one GEMM too: its source rows are
 * gathered, multiplied, and scatter-added onto the destinations. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gnn-impl.h"

mt_status mt__gnn_check_shape(const mt_graph_shape *s, char *err, size_t errlen) {
    if (!s) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: shape is NULL");
    if (s->n_nodes < 1 || s->n_nodes > 1 << 20) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: shape has %d nodes", s->n_nodes);
    if (s->n_edges < 0 || s->n_edges > 1 << 24) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: shape has %d edges", s->n_edges);
    if (!s->node_type || (s->n_edges > 0 && (!s->edge_src || !s->edge_dst || !s->edge_type)))
        return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: shape arrays missing");
    for (int v = 0; v < s->n_nodes; v++)
        if (s->node_type[v] < 0 || s->node_type[v] >= MT_GRAPH_NODE_TYPES)
            return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: node %d has type %d", v, s->node_type[v]);
    for (int e = 0; e < s->n_edges; e++) {
        if (s->edge_type[e] < 0 || s->edge_type[e] >= MT_GRAPH_EDGE_TYPES)
            return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: edge %d has type %d", e, s->edge_type[e]);
        if (s->edge_src[e] < 0 || s->edge_src[e] >= s->n_nodes || s->edge_dst[e] < 0 || s->edge_dst[e] >= s->n_nodes)
            return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: edge %d (%d -> %d) outside the %d nodes", e, s->edge_src[e], s->edge_dst[e],
                            s->n_nodes);
    }
    return MT_OK;
}

int mt__gnn_plan_matches(const mt__gnn_plan *p, const mt_graph_shape *s) {
    size_t E = (size_t)s->n_edges;
    return p && p->n == s->n_nodes && p->E == s->n_edges && p->hash == s->hash &&
           memcmp(p->node_type, s->node_type, sizeof(int) * (size_t)p->n) == 0 &&
           (E == 0 || (memcmp(p->edge_src, s->edge_src, sizeof(int) * E) == 0 && memcmp(p->edge_dst, s->edge_dst, sizeof(int) * E) == 0 &&
                       memcmp(p->edge_type, s->edge_type, sizeof(int) * E) == 0));
}

static int *dup_ints(const int *a, int n) {
    int *r = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (r && n > 0) memcpy(r, a, sizeof(int) * (size_t)n);
    return r;
}

mt_status mt__gnn_plan_make(const mt_gnn *m, const mt_graph_shape *s, mt__gnn_plan **out) {
    *out = NULL;
    mt__gnn_plan *p = calloc(1, sizeof *p);
    if (!p) return MT_NOMEM;
    int nt = m->lay.nt > 0 ? m->lay.nt : 1, et = m->lay.et > 0 ? m->lay.et : 1;
    p->n = s->n_nodes, p->E = s->n_edges, p->hash = s->hash;
    p->node_type = dup_ints(s->node_type, p->n);
    p->edge_src = dup_ints(s->edge_src, p->E);
    p->edge_dst = dup_ints(s->edge_dst, p->E);
    p->edge_type = dup_ints(s->edge_type, p->E);
    p->nt = nt, p->et = et;
    p->node_mod = malloc(sizeof(int) * (size_t)p->n);
    p->node_rank = malloc(sizeof(int) * (size_t)p->n);
    p->node_off = calloc((size_t)nt + 1, sizeof(int));
    p->node_cnt = calloc((size_t)nt, sizeof(int));
    p->edge_order = malloc(sizeof(int) * (size_t)(p->E > 0 ? p->E : 1));
    p->edge_cnt = calloc((size_t)et, sizeof(int));
    if (!p->node_type || !p->edge_src || !p->edge_dst || !p->edge_type || !p->node_mod || !p->node_rank || !p->node_off || !p->node_cnt ||
        !p->edge_order || !p->edge_cnt) {
        mt__gnn_plan_free(p);
        return MT_NOMEM;
    }
    /* counting sort by module, stable: the order inside a module is the shape's */
    for (int v = 0; v < p->n; v++) {
        int t = nt == 1 ? 0 : p->node_type[v];
        p->node_mod[v] = t;
        p->node_rank[v] = p->node_cnt[t]++;
    }
    for (int t = 0; t < nt; t++) p->node_off[t + 1] = p->node_off[t] + p->node_cnt[t];
    int k = 0;
    for (int t = 0; t < et; t++)
        for (int e = 0; e < p->E; e++)
            if ((et == 1 ? 0 : p->edge_type[e]) == t) p->edge_order[k++] = e, p->edge_cnt[t]++;
    *out = p;
    return MT_OK;
}

static float *fl(size_t n) { return malloc(sizeof(float) * (n > 0 ? n : 1)); }

mt_status mt__gnn_ws_make(const mt_gnn *m, const mt__gnn_plan *p, int cap, int keep, mt__gnn_ws **out) {
    *out = NULL;
    /* row numbers are ints: refuse what would overflow them */
    if ((size_t)cap * (size_t)(p->n > p->E ? p->n : p->E) > (size_t)1 << 30) return MT_NOMEM;
    mt__gnn_ws *w = calloc(1, sizeof *w);
    if (!w) return MT_NOMEM;
    const mt__gnn_layout *y = &m->lay;
    size_t c = (size_t)cap, n = (size_t)p->n, E = (size_t)p->E, H = (size_t)y->H, F = (size_t)y->F;
    size_t N = c * n, wide = F > H ? F : H, L = (size_t)y->L;
    size_t nt = (size_t)(y->nt > 0 ? y->nt : 1), et = (size_t)(y->et > 0 ? y->et : 1);
    size_t maxrows = c * (n > E ? n : E);
    w->cap = cap, w->keep = keep, w->built_b = -1;
    w->rowmap = malloc(sizeof(int) * N);
    w->node_start = malloc(sizeof(int) * (nt + 1));
    w->edge_start = malloc(sizeof(int) * (et + 1));
    w->edge_src = malloc(sizeof(int) * (c * E + 1));
    w->edge_dst = malloc(sizeof(int) * (c * E + 1));
    w->X = fl(N * F);
    w->H = fl((keep ? L + 1 : 1) * N * H);
    w->A = fl(keep ? L * N * H : 1);
    w->U = fl(N * H);
    w->ws_in = fl(maxrows * wide);
    w->ws_out = fl(maxrows * wide);
    w->R = fl(c * 2 * wide);
    w->argmax = malloc(sizeof(int) * c * wide);
    w->Z = fl((keep ? (L > 1 ? L : 1) : 2) * c * H);
    w->s = fl(c);
    int ok = w->rowmap && w->node_start && w->edge_start && w->edge_src && w->edge_dst && w->X && w->H && w->A && w->U && w->ws_in &&
             w->ws_out && w->R && w->argmax && w->Z && w->s;
    if (ok && keep) {
        w->dH = fl(N * H);
        w->dU = fl(N * H);
        w->dR = fl(c * 2 * wide);
        w->dZ = fl(c * H);
        w->dZ2 = fl(c * H);
        w->ds = fl(c);
        ok = w->dH && w->dU && w->dR && w->dZ && w->dZ2 && w->ds;
    }
    if (!ok) {
        mt__gnn_ws_free(w);
        return MT_NOMEM;
    }
    *out = w;
    return MT_OK;
}

/* The row map and typed index lists for b graphs. */
static void build_index(const mt__gnn_plan *p, mt__gnn_ws *w, int b) {
    if (w->built_b == b) return;
    int n = p->n;
    for (int t = 0; t <= p->nt; t++) w->node_start[t] = b * p->node_off[t];
    for (int g = 0; g < b; g++)
        for (int v = 0; v < n; v++) {
            int t = p->node_mod[v];
            w->rowmap[g * n + v] = b * p->node_off[t] + g * p->node_cnt[t] + p->node_rank[v];
        }
    int k = 0, o = 0;
    w->edge_start[0] = 0;
    for (int t = 0; t < p->et; t++) {
        for (int g = 0; g < b; g++)
            for (int i = 0; i < p->edge_cnt[t]; i++) {
                int e = p->edge_order[o + i];
                w->edge_src[k] = w->rowmap[g * n + p->edge_src[e]];
                w->edge_dst[k++] = w->rowmap[g * n + p->edge_dst[e]];
            }
        o += p->edge_cnt[t];
        w->edge_start[t + 1] = k;
    }
    w->built_b = b;
}

void mt__gnn_input(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *const *feats) {
    int F = m->lay.F;
    build_index(p, ws, b);
    for (int g = 0; g < b; g++) {
        const float *x = feats[g];
        for (int v = 0; v < p->n; v++) {
            float *o = ws->X + (size_t)ws->rowmap[g * p->n + v] * F;
            const float *xv = x + (size_t)v * F;
            int f = 0;
            for (; f + 8 <= F; f += 8) /* 8 wide: GCC's -O2 vectorises this, not a plain loop */
                for (int k = 0; k < 8; k++) o[f + k] = (xv[f + k] - m->mean[f + k]) * m->istd[f + k];
            for (; f < F; f++) o[f] = (xv[f] - m->mean[f]) * m->istd[f];
        }
    }
}

static void forward_gnn(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    int H = y->H, n = p->n;
    size_t N = (size_t)b * n, NH = N * H;
    mt__typed_index nodes = {y->nt, w->node_start, NULL, NULL};
    mt__typed_index edges = {y->et, w->edge_start, w->edge_src, w->edge_dst};
    float *h = w->H;
    memset(h, 0, sizeof(float) * NH);
    mt__typed_linear(&nodes, y->F, H, w->X, W + y->in_w, W + y->in_b, h, w->ws_in, w->ws_out);
    mt__lrelu(NH, h, h);
    for (int l = 0; l < y->L; l++) {
        memset(w->U, 0, sizeof(float) * NH);
        mt__typed_linear(&edges, H, H, h, W + y->msg_w[l], NULL, w->U, w->ws_in, w->ws_out);
        mt__typed_linear(&nodes, H, H, h, W + y->upd_w[l], W + y->upd_b[l], w->U, w->ws_in, w->ws_out);
        if (w->keep) {
            float *a = w->A + (size_t)l * NH, *hn = h + NH;
            mt__lrelu(NH, w->U, a);
            for (size_t i = 0; i < NH; i++) hn[i] = h[i] + a[i];
            h = hn;
        } else {
            mt__lrelu(NH, w->U, w->U);
            for (size_t i = 0; i < NH; i++) h[i] += w->U[i];
        }
    }
    mt__readout(b, n, H, h, w->rowmap, 1.0f / (float)n, w->R, 2 * H, w->R + H, 2 * H, w->argmax);
    mt__mm(b, H, 2 * H, w->R, W + y->head_w1, 0.0f, w->Z);
    mt__bias_add(b, H, w->Z, W + y->head_b1);
    mt__lrelu((size_t)b * H, w->Z, w->Z);
    mt__mm(b, 1, H, w->Z, W + y->out_w, 0.0f, w->s);
    for (int g = 0; g < b; g++) w->s[g] += W[y->out_b];
}

static void forward_mlp(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b) {
    const mt__gnn_layout *y = &m->lay;
    int H = y->H, F = y->F;
    mt__readout(b, p->n, F, w->X, w->rowmap, 1.0f / (float)p->n, w->R, 2 * F, w->R + F, 2 * F, w->argmax);
    const float *in = w->R;
    int in_dim = 2 * F;
    for (int l = 0; l < y->L; l++) {
        float *z = w->Z + (size_t)(w->keep ? l : l % 2) * w->cap * H;
        mt__mm(b, H, in_dim, in, m->w + y->mlp_w[l], 0.0f, z);
        mt__bias_add(b, H, z, m->w + y->mlp_b[l]);
        mt__lrelu((size_t)b * H, z, z);
        in = z, in_dim = H;
    }
    mt__mm(b, 1, H, in, m->w + y->out_w, 0.0f, w->s);
    for (int g = 0; g < b; g++) w->s[g] += m->w[y->out_b];
}

void mt__gnn_forward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b) {
    if (m->p.arch == MT_GNN_MLP) forward_mlp(m, p, ws, b);
    else forward_gnn(m, p, ws, b);
}

static void zero(float *x, size_t n) { memset(x, 0, sizeof(float) * n); }

/* The output layer: s = z w_out + b_out; fills w->dZ with dL/dz. */
static void backward_out(const mt_gnn *m, mt__gnn_ws *w, int b, const float *z, const float *ds, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    zero(w->dZ, (size_t)b * y->H);
    mt__mm_backward(b, 1, y->H, z, m->w + y->out_w, ds, w->dZ, grad + y->out_w);
    for (int g = 0; g < b; g++) grad[y->out_b] += ds[g];
}

static void backward_gnn(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *ds, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    int H = y->H, n = p->n;
    size_t N = (size_t)b * n, NH = N * H;
    mt__typed_index nodes = {y->nt, w->node_start, NULL, NULL};
    mt__typed_index edges = {y->et, w->edge_start, w->edge_src, w->edge_dst};
    backward_out(m, w, b, w->Z, ds, grad);
    zero(w->dZ2, (size_t)b * H);
    mt__lrelu_backward((size_t)b * H, w->Z, w->dZ, w->dZ2);
    mt__bias_backward(b, H, w->dZ2, grad + y->head_b1);
    zero(w->dR, (size_t)b * 2 * H);
    mt__mm_backward(b, H, 2 * H, w->R, W + y->head_w1, w->dZ2, w->dR, grad + y->head_w1);
    zero(w->dH, NH);
    mt__readout_backward(b, n, H, w->rowmap, 1.0f / (float)n, w->dR, 2 * H, w->dR + H, 2 * H, w->argmax, w->dH);
    for (int l = y->L - 1; l >= 0; l--) {
        /* H[l+1] = H[l] + lrelu(U); dH holds dL/dH[l+1] and becomes dL/dH[l] */
        const float *hl = w->H + (size_t)l * NH;
        zero(w->dU, NH);
        mt__lrelu_backward(NH, w->A + (size_t)l * NH, w->dH, w->dU);
        mt__typed_linear_backward(&nodes, H, H, hl, W + y->upd_w[l], w->dU, w->dH, grad + y->upd_w[l], grad + y->upd_b[l], w->ws_in, w->ws_out);
        mt__typed_linear_backward(&edges, H, H, hl, W + y->msg_w[l], w->dU, w->dH, grad + y->msg_w[l], NULL, w->ws_in, w->ws_out);
    }
    zero(w->dU, NH);
    mt__lrelu_backward(NH, w->H, w->dH, w->dU);
    mt__typed_linear_backward(&nodes, y->F, H, w->X, W + y->in_w, w->dU, NULL, grad + y->in_w, grad + y->in_b, w->ws_in, w->ws_out);
}

static void backward_mlp(const mt_gnn *m, mt__gnn_ws *w, int b, const float *ds, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    int H = y->H;
    size_t cH = (size_t)w->cap * H;
    backward_out(m, w, b, w->Z + (size_t)(y->L - 1) * cH, ds, grad);
    for (int l = y->L - 1; l >= 0; l--) {
        const float *z = w->Z + (size_t)l * cH;
        zero(w->dZ2, (size_t)b * H);
        mt__lrelu_backward((size_t)b * H, z, w->dZ, w->dZ2);
        mt__bias_backward(b, H, w->dZ2, grad + y->mlp_b[l]);
        if (l > 0) {
            zero(w->dZ, (size_t)b * H);
            mt__mm_backward(b, H, H, w->Z + (size_t)(l - 1) * cH, m->w + y->mlp_w[l], w->dZ2, w->dZ, grad + y->mlp_w[l]);
        } else {
            mt__mm_backward(b, H, 2 * y->F, w->R, m->w + y->mlp_w[0], w->dZ2, NULL, grad + y->mlp_w[0]);
        }
    }
}

void mt__gnn_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *ds, float *grad) {
    if (m->p.arch == MT_GNN_MLP) backward_mlp(m, ws, b, ds, grad);
    else backward_gnn(m, p, ws, b, ds, grad);
}

/* ---- scoring ---- */

typedef struct score_job {
    const mt_gnn *m;
    const mt__gnn_plan *p;
    mt__gnn_ws *ws;
    int k, stride, B; /* chunks k, k + stride, ... */
    const float *feats;
    float *scores;
} score_job;

static void *score_run(void *arg) {
    score_job *j = arg;
    const float *ptr[MT__GNN_CHUNK];
    size_t per = (size_t)j->p->n * j->m->lay.F;
    for (int c = j->k; (long)c * MT__GNN_CHUNK < j->B; c += j->stride) {
        int lo = c * MT__GNN_CHUNK, b = j->B - lo < MT__GNN_CHUNK ? j->B - lo : MT__GNN_CHUNK;
        for (int g = 0; g < b; g++) ptr[g] = j->feats + (size_t)(lo + g) * per;
        mt__gnn_input(j->m, j->p, j->ws, b, ptr);
        mt__gnn_forward(j->m, j->p, j->ws, b);
        memcpy(j->scores + lo, j->ws->s, sizeof(float) * (size_t)b);
    }
    return NULL;
}

mt_status mt_gnn_score(mt_gnn *m, const mt_graph_shape *shape, int B, const float *feats, float *scores, char *err, size_t errlen) {
    if (!m || B < 0 || (B > 0 && (!feats || !scores))) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: score: bad arguments");
    mt_status st = mt__gnn_check_shape(shape, err, errlen);
    if (st != MT_OK || B == 0) return st;
    if (!mt__gnn_plan_matches(m->plan, shape)) {
        mt__gnn_drop_caches(m);
        if (mt__gnn_plan_make(m, shape, &m->plan) != MT_OK) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a plan");
    }
    int chunks = (int)(((long)B + MT__GNN_CHUNK - 1) / MT__GNN_CHUNK);
    int T = m->p.threads < 1 ? 1 : m->p.threads;
    if (T > MT__GNN_MAX_THREADS) T = MT__GNN_MAX_THREADS;
    if (T > chunks) T = chunks;
    for (int k = 0; k < T; k++)
        if (!m->ws[k] && mt__gnn_ws_make(m, m->plan, MT__GNN_CHUNK, 0, &m->ws[k]) != MT_OK)
            return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a workspace");
    score_job jobs[MT__GNN_MAX_THREADS];
    pthread_t tid[MT__GNN_MAX_THREADS];
    int started[MT__GNN_MAX_THREADS] = {0};
    for (int k = 0; k < T; k++) jobs[k] = (score_job){m, m->plan, m->ws[k], k, T, B, feats, scores};
    for (int k = 1; k < T; k++) started[k] = pthread_create(&tid[k], NULL, score_run, &jobs[k]) == 0;
    score_run(&jobs[0]);
    for (int k = 1; k < T; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else score_run(&jobs[k]); /* no thread: do its share here */
    }
    return MT_OK;
}
