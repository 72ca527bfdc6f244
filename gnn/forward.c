/* GNN forward and backward over batches of one shape, and batched scoring
 * on several threads.
 *
 * A batch of b graphs is one [b*n, .] matrix of node rows, node-major and
 * sorted by node module, and each edge module's product is taken once per
 * distinct source or destination (the plan's schedule, gnn-impl.h). Training
 * and scoring run the same forward: scoring keeps nothing for a backward
 * and reads its features where the caller has them. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gnn-impl.h"
#include "fail.h"

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

/* The message schedule of a plan whose modules are sorted (gnn-impl.h).
 * Rows of a module are its distinct sources or destinations in ascending
 * place; each row's edges keep the shape's order; each place's lists run
 * in module order. */
static mt_status plan_schedule(mt__gnn_plan *p) {
    int n = p->n, E = p->E, et = p->et;
    size_t e1 = (size_t)(E > 0 ? E : 1);
    p->pos = malloc(sizeof(int) * (size_t)n);
    p->mrow_off = calloc((size_t)et + 1, sizeof(int));
    p->mside = calloc((size_t)et, sizeof(int));
    p->mrun = calloc((size_t)et, sizeof(int));
    /* at most one row per edge; a list entry per edge or row */
    p->mrow_pos = malloc(sizeof(int) * e1);
    p->madj_off = malloc(sizeof(int) * ((size_t)E + 1));
    p->madj_pos = malloc(sizeof(int) * e1);
    p->in_off = calloc((size_t)n + 1, sizeof(int));
    p->in_row = malloc(sizeof(int) * 2 * e1);
    p->out_off = calloc((size_t)n + 1, sizeof(int));
    p->out_row = malloc(sizeof(int) * 2 * e1);
    int *cnt_src = calloc((size_t)n, sizeof(int)), *cnt_dst = calloc((size_t)n, sizeof(int)), *fill = calloc((size_t)n, sizeof(int));
    int *ofill = calloc((size_t)n, sizeof(int));
    mt_status st = MT_NOMEM;
    if (!p->pos || !p->mrow_off || !p->mside || !p->mrun || !p->mrow_pos || !p->madj_off || !p->madj_pos || !p->in_off || !p->in_row ||
        !p->out_off || !p->out_row || !cnt_src || !cnt_dst || !fill || !ofill)
        goto done;
    for (int v = 0; v < n; v++) p->pos[v] = p->node_off[p->node_mod[v]] + p->node_rank[v];
    int rows = 0, adj = 0, o = 0;
    p->madj_off[0] = 0;
    p->maxrows = p->maxsum = 0;
    for (int t = 0; t < et; t++) {
        const int *eo = p->edge_order + o;
        int ne = p->edge_cnt[t], ns = 0, nd = 0;
        o += ne;
        /* edges per place at either end */
        for (int i = 0; i < ne; i++) {
            int e = eo[i];
            ns += cnt_src[p->pos[p->edge_src[e]]]++ == 0;
            nd += cnt_dst[p->pos[p->edge_dst[e]]]++ == 0;
        }
        int side = nd < ns;
        const int *cnt = side ? cnt_dst : cnt_src;
        p->mside[t] = side;
        p->mrow_off[t] = rows;
        /* rows in ascending place; fill[q] = where row q's next edge goes */
        int r0 = rows;
        for (int q = 0; q < n; q++)
            if (cnt[q]) {
                p->mrow_pos[rows] = q;
                fill[q] = adj;
                adj += cnt[q];
                if (cnt[q] > p->maxsum) p->maxsum = cnt[q];
                p->madj_off[++rows] = adj;
            }
        for (int i = 0; i < ne; i++) {
            int e = eo[i], s = p->pos[p->edge_src[e]], d = p->pos[p->edge_dst[e]];
            p->madj_pos[fill[side ? d : s]++] = side ? s : d;
        }
        int run = rows > r0;
        for (int r = r0 + 1; r < rows && run; r++) run = p->mrow_pos[r] == p->mrow_pos[r - 1] + 1;
        p->mrun[t] = run;
        if (rows - r0 > p->maxrows) p->maxrows = rows - r0;
        for (int i = 0; i < ne; i++) {
            int e = eo[i];
            cnt_src[p->pos[p->edge_src[e]]] = cnt_dst[p->pos[p->edge_dst[e]]] = 0;
        }
    }
    p->nrows = p->mrow_off[et] = rows;
    /* the per-place lists: counted, then filled module by module */
    for (int pass = 0; pass < 2; pass++) {
        for (int q = 0; q < n && pass == 1; q++) fill[q] = p->in_off[q], ofill[q] = p->out_off[q];
        for (int t = 0; t < et; t++)
            for (int r = p->mrow_off[t]; r < p->mrow_off[t + 1]; r++) {
                int q = p->mrow_pos[r];
                if (p->mside[t] == 0) {
                    for (int j = p->madj_off[r]; j < p->madj_off[r + 1]; j++) {
                        if (pass == 0) p->in_off[p->madj_pos[j] + 1]++;
                        else p->in_row[fill[p->madj_pos[j]]++] = r;
                    }
                    if (!p->mrun[t]) {
                        if (pass == 0) p->out_off[q + 1]++;
                        else p->out_row[ofill[q]++] = r;
                    }
                } else {
                    if (!p->mrun[t]) {
                        if (pass == 0) p->in_off[q + 1]++;
                        else p->in_row[fill[q]++] = r;
                    }
                    for (int j = p->madj_off[r]; j < p->madj_off[r + 1]; j++) {
                        if (pass == 0) p->out_off[p->madj_pos[j] + 1]++;
                        else p->out_row[ofill[p->madj_pos[j]]++] = r;
                    }
                }
            }
        for (int q = 0; q < n && pass == 0; q++) {
            int ki = p->in_off[q + 1], ko = p->out_off[q + 1];
            if (ki > p->maxsum) p->maxsum = ki;
            if (ko > p->maxsum) p->maxsum = ko;
            p->in_off[q + 1] += p->in_off[q];
            p->out_off[q + 1] += p->out_off[q];
        }
    }
    st = MT_OK;
done:
    free(cnt_src);
    free(cnt_dst);
    free(fill);
    free(ofill);
    return st;
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
    if (plan_schedule(p) != MT_OK) {
        mt__gnn_plan_free(p);
        return MT_NOMEM;
    }
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
    size_t c = (size_t)cap, n = (size_t)p->n, H = (size_t)y->H, F = (size_t)y->F;
    size_t N = c * n, wide = F > H ? F : H, L = (size_t)y->L;
    int gnn = m->p.arch != MT_GNN_MLP;
    w->cap = cap, w->keep = keep, w->built_b = -1;
    w->rowmap = malloc(sizeof(int) * N);
    w->X = fl(N * F);
    w->R = fl(c * 2 * wide);
    w->Z = fl((keep ? (L > 1 ? L : 1) : 2) * c * H);
    w->s = fl(c);
    int ok = w->rowmap && w->X && w->R && w->Z && w->s;
    if (gnn) {
        w->H = fl((keep ? L + 1 : 1) * N * H);
        w->A = fl(keep ? L * N * H : 1);
        w->U = fl(N * H);
        w->M = fl(c * (size_t)p->nrows * H);
        w->G = fl(c * (size_t)p->maxrows * H);
        w->G2 = fl(keep ? c * (size_t)p->maxrows * H : 1);
        w->ptr = malloc(sizeof(float *) * ((size_t)p->maxsum + 1));
        ok = ok && w->H && w->A && w->U && w->M && w->G && w->G2 && w->ptr;
    } else {
        w->xrow = fl(F);
        ok = ok && w->xrow;
    }
    if (ok && keep) {
        w->argmax = malloc(sizeof(int) * c * wide);
        w->dR = fl(c * 2 * wide);
        w->dZ = fl(c * H);
        w->dZ2 = fl(c * H);
        w->ds = fl(c);
        ok = w->argmax && w->dR && w->dZ && w->dZ2 && w->ds;
        if (ok && gnn) {
            w->dH = fl(N * H);
            w->dU = fl(N * H);
            ok = w->dH && w->dU;
        }
    }
    if (!ok) {
        mt__gnn_ws_free(w);
        return MT_NOMEM;
    }
    *out = w;
    return MT_OK;
}

/* The row map for b graphs: node v of graph g at row pos[v]*b + g. */
static void build_index(const mt__gnn_plan *p, mt__gnn_ws *w, int b) {
    if (w->built_b == b) return;
    for (int g = 0; g < b; g++)
        for (int v = 0; v < p->n; v++) w->rowmap[g * p->n + v] = p->pos[v] * b + g;
    w->built_b = b;
}

/* o = (x - mean) * istd over F features. */
static inline void normalise_row(const mt_gnn *m, const float *xv, float *o, int F) {
    int f = 0;
    for (; f + 8 <= F; f += 8) /* 8 wide: GCC's -O2 vectorises this, not a plain loop */
        for (int k = 0; k < 8; k++) o[f + k] = (xv[f + k] - m->mean[f + k]) * m->istd[f + k];
    for (; f < F; f++) o[f] = (xv[f] - m->mean[f]) * m->istd[f];
}

void mt__gnn_input(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *const *feats) {
    int F = m->lay.F;
    build_index(p, ws, b);
    /* read in order, written by place */
    for (int g = 0; g < b; g++)
        for (int v = 0; v < p->n; v++) normalise_row(m, feats[g] + (size_t)v * F, ws->X + (size_t)ws->rowmap[g * p->n + v] * F, F);
}

/* mx = max(mx, x) elementwise, 8 wide and branch-free (x > m ? x : m, as
 * mt__gnn_readout compares). */
static inline void max_row(float *restrict mx, const float *restrict x, int n) {
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        float a[8];
        for (int k = 0; k < 8; k++) a[k] = x[j + k] > mx[j + k] ? x[j + k] : mx[j + k];
        for (int k = 0; k < 8; k++) mx[j + k] = a[k];
    }
    for (; j < n; j++) mx[j] = x[j] > mx[j] ? x[j] : mx[j];
}

static void zero(float *x, size_t n) { memset(x, 0, sizeof(float) * n); }

/* ---- the forward's pieces and their backwards (gnn-impl.h) ---- */

void mt__gnn_embed(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, float *h) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    const int H = y->H, F = y->F;
    /* each node module is one product on its block of places */
    for (int t = 0; t < p->nt; t++) {
        int r0 = p->node_off[t] * b, r = p->node_cnt[t] * b;
        if (r == 0) continue;
        mt__mm(r, H, F, w->X + (size_t)r0 * F, W + y->in_w + (size_t)t * F * H, 0.0f, h + (size_t)r0 * H);
        mt__bias_lrelu(r, H, h + (size_t)r0 * H, W + y->in_b + (size_t)t * H);
    }
}

void mt__gnn_embed_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *h, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    const int H = y->H, F = y->F;
    const size_t NH = (size_t)p->n * b * H;
    zero(w->dU, NH);
    mt__lrelu_backward(NH, h, w->dH, w->dU);
    for (int t = 0; t < p->nt; t++) {
        int r0 = p->node_off[t] * b, r = p->node_cnt[t] * b;
        if (r == 0) continue;
        mt__mm_backward(r, H, F, w->X + (size_t)r0 * F, W + y->in_w + (size_t)t * F * H, w->dU + (size_t)r0 * H, NULL,
                        grad + y->in_w + (size_t)t * F * H);
        mt__bias_backward(r, H, w->dU + (size_t)r0 * H, grad + y->in_b + (size_t)t * H);
    }
}

/* Layer l's products from states h: the node modules' into U (no bias),
 * the edge modules' into M (side-1 runs: added onto U). */
static void messages(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, int l, const float *h) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    const int H = y->H;
    const size_t bH = (size_t)b * H;
    for (int t = 0; t < p->nt; t++) {
        int r0 = p->node_off[t] * b, r = p->node_cnt[t] * b;
        if (r > 0) mt__mm(r, H, H, h + (size_t)r0 * H, W + y->upd_w[l] + (size_t)t * H * H, 0.0f, w->U + (size_t)r0 * H);
    }
    for (int t = 0; t < p->et; t++) {
        int a = p->mrow_off[t], rows = p->mrow_off[t + 1] - a;
        if (rows == 0) continue;
        const int *rp = p->mrow_pos + a;
        const float *Wt = W + y->msg_w[l] + (size_t)t * H * H;
        if (p->mside[t] == 0) {
            /* a product per source; its destinations pull it */
            const float *in = h + (size_t)rp[0] * bH;
            if (!p->mrun[t]) {
                for (int i = 0; i < rows; i++) memcpy(w->G + (size_t)i * bH, h + (size_t)rp[i] * bH, sizeof(float) * bH);
                in = w->G;
            }
            mt__mm(rows * b, H, H, in, Wt, 0.0f, w->M + (size_t)a * bH);
        } else {
            /* a product per destination, on the sum of its sources */
            for (int i = 0; i < rows; i++) {
                int j0 = p->madj_off[a + i], k = p->madj_off[a + i + 1] - j0;
                for (int j = 0; j < k; j++) w->ptr[j] = h + (size_t)p->madj_pos[j0 + j] * bH;
                mt__sum_blocks(bH, w->G + (size_t)i * bH, w->ptr, k);
            }
            if (p->mrun[t]) mt__mm(rows * b, H, H, w->G, Wt, 1.0f, w->U + (size_t)rp[0] * bH);
            else mt__mm(rows * b, H, H, w->G, Wt, 0.0f, w->M + (size_t)a * bH);
        }
    }
}

void mt__gnn_layer(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, int l, const float *h, float *hn, float *a) {
    const mt__gnn_layout *y = &m->lay;
    const int H = y->H;
    const size_t bH = (size_t)b * H;
    messages(m, p, w, b, l, h);
    /* h' = h + lrelu(update + bias + messages), place by place */
    for (int t = 0; t < p->nt; t++)
        for (int q = p->node_off[t]; q < p->node_off[t + 1]; q++) {
            int j0 = p->in_off[q], k = p->in_off[q + 1] - j0;
            for (int j = 0; j < k; j++) w->ptr[j] = w->M + (size_t)p->in_row[j0 + j] * bH;
            size_t o = (size_t)q * bH;
            mt__update_pull(b, H, h + o, hn + o, a ? a + o : NULL, w->U + o, m->w + y->upd_b[l] + (size_t)t * H, w->ptr, k);
        }
}

void mt__gnn_layer_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, int l, const float *h, const float *act, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    const float *W = m->w;
    const int H = y->H, n = p->n;
    const size_t bH = (size_t)b * H;
    /* h' = h + act, act = lrelu(pre-activation): dU = dL/d the
     * pre-activation; dH (dL/dh') already is the residual's share of dL/dh */
    zero(w->dU, (size_t)n * bH);
    mt__lrelu_backward((size_t)n * bH, act, w->dH, w->dU);
    const float *dU = w->dU;
    for (int t = 0; t < p->nt; t++) {
        int r0 = p->node_off[t] * b, r = p->node_cnt[t] * b;
        if (r == 0) continue;
        size_t o = (size_t)r0 * H;
        mt__mm_backward(r, H, H, h + o, W + y->upd_w[l] + (size_t)t * H * H, dU + o, w->dH + o, grad + y->upd_w[l] + (size_t)t * H * H);
        mt__bias_backward(r, H, dU + o, grad + y->upd_b[l] + (size_t)t * H);
    }
    for (int t = 0; t < p->et; t++) {
        int a = p->mrow_off[t], rows = p->mrow_off[t + 1] - a;
        if (rows == 0) continue;
        const int *rp = p->mrow_pos + a;
        const float *Wt = W + y->msg_w[l] + (size_t)t * H * H;
        float *dWt = grad + y->msg_w[l] + (size_t)t * H * H, *P = w->M + (size_t)a * bH;
        if (p->mside[t] == 0) {
            /* product M = h[src] W: dM = the sum of its destinations' dU */
            for (int i = 0; i < rows; i++) {
                int j0 = p->madj_off[a + i], k = p->madj_off[a + i + 1] - j0;
                for (int j = 0; j < k; j++) w->ptr[j] = dU + (size_t)p->madj_pos[j0 + j] * bH;
                mt__sum_blocks(bH, w->G2 + (size_t)i * bH, w->ptr, k);
            }
            const float *in = h + (size_t)rp[0] * bH;
            if (!p->mrun[t]) {
                for (int i = 0; i < rows; i++) memcpy(w->G + (size_t)i * bH, h + (size_t)rp[i] * bH, sizeof(float) * bH);
                in = w->G;
            }
            mt__mm_backward(rows * b, H, H, in, Wt, w->G2, NULL, dWt);
            /* dh[src] += dM W^T: in place for a run, else pulled below */
            if (p->mrun[t]) mt__mm_nt(rows * b, H, H, w->G2, Wt, 1.0f, w->dH + (size_t)rp[0] * bH);
            else mt__mm_nt(rows * b, H, H, w->G2, Wt, 0.0f, P);
        } else {
            /* product G W, G the sum of the sources (summed again: cheaper than keeping it) */
            for (int i = 0; i < rows; i++) {
                int j0 = p->madj_off[a + i], k = p->madj_off[a + i + 1] - j0;
                for (int j = 0; j < k; j++) w->ptr[j] = h + (size_t)p->madj_pos[j0 + j] * bH;
                mt__sum_blocks(bH, w->G + (size_t)i * bH, w->ptr, k);
            }
            const float *d = dU + (size_t)rp[0] * bH;
            if (!p->mrun[t]) {
                for (int i = 0; i < rows; i++) memcpy(w->G2 + (size_t)i * bH, dU + (size_t)rp[i] * bH, sizeof(float) * bH);
                d = w->G2;
            }
            mt__mm_backward(rows * b, H, H, w->G, Wt, d, NULL, dWt);
            /* dG = dU W^T, pulled below by every source */
            mt__mm_nt(rows * b, H, H, d, Wt, 0.0f, P);
        }
    }
    for (int q = 0; q < n; q++) {
        int j0 = p->out_off[q], k = p->out_off[q + 1] - j0;
        if (k == 0) continue;
        for (int j = 0; j < k; j++) w->ptr[j] = w->M + (size_t)p->out_row[j0 + j] * bH;
        mt__add_blocks(bH, w->dH + (size_t)q * bH, w->ptr, k);
    }
}

void mt__gnn_readout(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *x) {
    const int c = m->p.arch == MT_GNN_MLP ? m->lay.F : m->lay.H, n = p->n;
    const size_t bc = (size_t)b * c;
    const int keep = w->keep;
    float *R = w->R;
    /* node by node (each node's block of b rows is contiguous), the sum
     * and the maximum in node order, with the first node of the maximum */
    for (int g = 0; g < b; g++) {
        const float *x0 = x + ((size_t)p->pos[0] * b + g) * c;
        memset(R + (size_t)g * 2 * c, 0, sizeof(float) * (size_t)c);
        memcpy(R + (size_t)g * 2 * c + c, x0, sizeof(float) * (size_t)c);
        if (keep) memset(w->argmax + (size_t)g * c, 0, sizeof(int) * (size_t)c);
    }
    for (int v = 0; v < n; v++) {
        const float *xq = x + (size_t)p->pos[v] * bc;
        for (int g = 0; g < b; g++) {
            float *sum = R + (size_t)g * 2 * c, *mx = sum + c;
            const float *xv = xq + (size_t)g * c;
            mt__add((size_t)c, sum, xv);
            if (v == 0) continue;
            if (!keep) {
                max_row(mx, xv, c);
                continue;
            }
            int *am = w->argmax + (size_t)g * c;
            for (int j = 0; j < c; j++)
                if (xv[j] > mx[j]) mx[j] = xv[j], am[j] = v;
        }
    }
    float scale = 1.0f / (float)n;
    for (int g = 0; g < b; g++)
        for (int j = 0; j < c; j++) R[(size_t)g * 2 * c + j] *= scale;
}

void mt__gnn_readout_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, float *dh) {
    const int H = m->lay.H, n = p->n;
    /* the mean reaches every node, the maximum its first node */
    float scale = 1.0f / (float)n;
    float *d = w->dZ2; /* one row of the mean's gradient */
    for (int g = 0; g < b; g++) {
        const float *dsum = w->dR + (size_t)g * 2 * H, *dmax = dsum + H;
        for (int j = 0; j < H; j++) d[j] = scale * dsum[j];
        for (int q = 0; q < n; q++) mt__add((size_t)H, dh + ((size_t)q * b + g) * H, d);
        const int *am = w->argmax + (size_t)g * H;
        for (int j = 0; j < H; j++) dh[((size_t)p->pos[am[j]] * b + g) * H + j] += dmax[j];
    }
}

/* The head's hidden layers: the MLP's L, the GNN's one. */
static int head_layers(const mt_gnn *m) { return m->p.arch == MT_GNN_MLP ? m->lay.L : 1; }
static size_t head_w(const mt_gnn *m, int l) { return m->p.arch == MT_GNN_MLP ? m->lay.mlp_w[l] : m->lay.head_w1; }
static size_t head_b(const mt_gnn *m, int l) { return m->p.arch == MT_GNN_MLP ? m->lay.mlp_b[l] : m->lay.head_b1; }
/* Layer l's hidden values: all kept for a backward, else two in turn. */
static float *head_z(mt__gnn_ws *w, int l, int H) { return w->Z + (size_t)(w->keep ? l : l % 2) * w->cap * H; }

void mt__gnn_head(const mt_gnn *m, mt__gnn_ws *w, int b) {
    const mt__gnn_layout *y = &m->lay;
    const int H = y->H;
    const float *in = w->R;
    int in_dim = 2 * (m->p.arch == MT_GNN_MLP ? y->F : H);
    for (int l = 0; l < head_layers(m); l++) {
        float *z = head_z(w, l, H);
        mt__mm(b, H, in_dim, in, m->w + head_w(m, l), 0.0f, z);
        mt__bias_lrelu(b, H, z, m->w + head_b(m, l));
        in = z, in_dim = H;
    }
    mt__mm(b, 1, H, in, m->w + y->out_w, 0.0f, w->s);
    for (int g = 0; g < b; g++) w->s[g] += m->w[y->out_b];
}

void mt__gnn_head_backward(const mt_gnn *m, mt__gnn_ws *w, int b, const float *ds, float *grad) {
    const mt__gnn_layout *y = &m->lay;
    const int H = y->H, L = head_layers(m);
    /* the output s = z w_out + b_out */
    zero(w->dZ, (size_t)b * H);
    mt__mm_backward(b, 1, H, head_z(w, L - 1, H), m->w + y->out_w, ds, w->dZ, grad + y->out_w);
    for (int g = 0; g < b; g++) grad[y->out_b] += ds[g];
    for (int l = L - 1; l >= 0; l--) {
        zero(w->dZ2, (size_t)b * H);
        mt__lrelu_backward((size_t)b * H, head_z(w, l, H), w->dZ, w->dZ2);
        mt__bias_backward(b, H, w->dZ2, grad + head_b(m, l));
        if (l > 0) {
            zero(w->dZ, (size_t)b * H);
            mt__mm_backward(b, H, H, head_z(w, l - 1, H), m->w + head_w(m, l), w->dZ2, w->dZ, grad + head_w(m, l));
        } else if (m->p.arch == MT_GNN_MLP) { /* the features are no parameters */
            mt__mm_backward(b, H, 2 * y->F, w->R, m->w + head_w(m, 0), w->dZ2, NULL, grad + head_w(m, 0));
        } else {
            zero(w->dR, (size_t)b * 2 * H);
            mt__mm_backward(b, H, 2 * H, w->R, m->w + head_w(m, 0), w->dZ2, w->dR, grad + head_w(m, 0));
        }
    }
}

/* ---- the whole model ---- */

void mt__gnn_forward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b) {
    if (m->p.arch == MT_GNN_MLP) {
        mt__gnn_readout(m, p, ws, b, ws->X);
    } else {
        const size_t NH = (size_t)p->n * b * m->lay.H;
        const int keep = ws->keep;
        mt__gnn_embed(m, p, ws, b, ws->H);
        for (int l = 0; l < m->lay.L; l++) {
            float *h = ws->H + (keep ? (size_t)l * NH : 0);
            mt__gnn_layer(m, p, ws, b, l, h, keep ? h + NH : h, keep ? ws->A + (size_t)l * NH : NULL);
        }
        mt__gnn_readout(m, p, ws, b, ws->H + (keep ? (size_t)m->lay.L * NH : 0));
    }
    mt__gnn_head(m, ws, b);
}

void mt__gnn_backward(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *ds, float *grad) {
    mt__gnn_head_backward(m, ws, b, ds, grad);
    if (m->p.arch == MT_GNN_MLP) return;
    const size_t NH = (size_t)p->n * b * m->lay.H;
    zero(ws->dH, NH);
    mt__gnn_readout_backward(m, p, ws, b, ws->dH);
    /* dH holds dL/dH[l+1] and becomes dL/dH[l] */
    for (int l = m->lay.L - 1; l >= 0; l--) mt__gnn_layer_backward(m, p, ws, b, l, ws->H + (size_t)l * NH, ws->A + (size_t)l * NH, grad);
    mt__gnn_embed_backward(m, p, ws, b, ws->H, grad);
}

/* ---- inference ---- */

/* The MLP reads the normalised features only through their mean and max:
 * computed graph by graph in node order, as mt__gnn_readout does (the same
 * bits), without storing the normalised rows. */
static void infer_mlp(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *w, int b, const float *feats) {
    int F = m->lay.F, n = p->n;
    float scale = 1.0f / (float)n;
    for (int g = 0; g < b; g++) {
        float *sum = w->R + (size_t)g * 2 * F, *mx = sum + F, *x = w->xrow;
        for (int v = 0; v < n; v++) {
            normalise_row(m, feats + ((size_t)g * n + v) * F, x, F);
            if (v == 0) {
                memset(sum, 0, sizeof(float) * (size_t)F);
                memcpy(mx, x, sizeof(float) * (size_t)F);
            } else {
                max_row(mx, x, F);
            }
            mt__add((size_t)F, sum, x);
        }
        for (int j = 0; j < F; j++) sum[j] *= scale;
    }
    mt__gnn_head(m, w, b);
}

void mt__gnn_infer(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, int b, const float *feats) {
    if (b <= 0) return;
    if (m->p.arch == MT_GNN_MLP) {
        infer_mlp(m, p, ws, b, feats);
        return;
    }
    int F = m->lay.F, n = p->n;
    build_index(p, ws, b);
    for (int g = 0; g < b; g++)
        for (int v = 0; v < n; v++) normalise_row(m, feats + ((size_t)g * n + v) * F, ws->X + (size_t)ws->rowmap[g * n + v] * F, F);
    mt__gnn_forward(m, p, ws, b);
}

/* ---- scoring ---- */

/* Scores the fixed chunks of MT__GNN_CHUNK graphs that it claims from
 * *next, until none is left. Threads claim chunks as they go, so a thread
 * that the machine holds back (on a shared machine) takes fewer; a chunk's
 * scores are the same whichever thread computes it. */
static void score_chunks(const mt_gnn *m, const mt__gnn_plan *p, mt__gnn_ws *ws, atomic_int *next, int B, const float *feats, float *scores) {
    size_t per = (size_t)p->n * m->lay.F;
    for (int c; (long)(c = atomic_fetch_add(next, 1)) * MT__GNN_CHUNK < B;) {
        int lo = c * MT__GNN_CHUNK, b = B - lo < MT__GNN_CHUNK ? B - lo : MT__GNN_CHUNK;
        mt__gnn_infer(m, p, ws, b, feats + (size_t)lo * per);
        memcpy(scores + lo, ws->s, sizeof(float) * (size_t)b);
    }
}

typedef struct score_job {
    const mt_gnn *m;
    const mt__gnn_plan *p;
    mt__gnn_ws *ws;
    atomic_int *next;
    int B;
    const float *feats;
    float *scores;
} score_job;

static void *score_run(void *arg) {
    score_job *j = arg;
    score_chunks(j->m, j->p, j->ws, j->next, j->B, j->feats, j->scores);
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
    atomic_int next;
    atomic_init(&next, 0);
    for (int k = 0; k < T; k++) jobs[k] = (score_job){m, m->plan, m->ws[k], &next, B, feats, scores};
    for (int k = 1; k < T; k++) started[k] = pthread_create(&tid[k], NULL, score_run, &jobs[k]) == 0;
    score_run(&jobs[0]);
    for (int k = 1; k < T; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else score_run(&jobs[k]); /* no thread: whatever is left is done here */
    }
    return MT_OK;
}

mt_status mt_gnn_scorer_create(const mt_gnn *m, const mt_graph_shape *shape, mt_gnn_scorer **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: scorer: out is NULL");
    *out = NULL;
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: scorer: model is NULL");
    mt_status st = mt__gnn_check_shape(shape, err, errlen);
    if (st != MT_OK) return st;
    mt_gnn_scorer *s = calloc(1, sizeof *s);
    if (!s || mt__gnn_plan_make(m, shape, &s->plan) != MT_OK || mt__gnn_ws_make(m, s->plan, MT__GNN_CHUNK, 0, &s->ws) != MT_OK) {
        mt_gnn_scorer_free(s);
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a scorer");
    }
    s->m = m;
    *out = s;
    return MT_OK;
}

mt_status mt_gnn_scorer_run(mt_gnn_scorer *s, int B, const float *feats, float *scores, char *err, size_t errlen) {
    if (!s || B < 0 || (B > 0 && (!feats || !scores))) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: scorer: bad arguments");
    atomic_int next;
    atomic_init(&next, 0);
    score_chunks(s->m, s->plan, s->ws, &next, B, feats, scores);
    return MT_OK;
}

int mt_gnn_scorer_matches(const mt_gnn_scorer *s, const mt_graph_shape *shape) { return s && shape && mt__gnn_plan_matches(s->plan, shape); }

void mt_gnn_scorer_free(mt_gnn_scorer *s) {
    if (!s) return;
    mt__gnn_plan_free(s->plan);
    mt__gnn_ws_free(s->ws);
    free(s);
}
