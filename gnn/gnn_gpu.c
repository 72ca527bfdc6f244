/* The loader side of GNN scoring on the GPU (gnn/gnn_gpu.h): the
 * model's layout and a shape's plan (gnn/gnn-impl.h) described to the CUDA
 * module's gnn_* members (cuda/cuda_module.h), the process's device, and
 * the weights kept in step with the model. */
#include "gnn_gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_module.h"
#include "gnn-impl.h"
#include "fail.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static const mt_cuda_module *g_mod; /* written once, inside g_once */
static void *g_dev;                 /* the module's device handle, kept for the process */
static char g_why[2048];            /* why there is none; or the device's name */

static void open_once(void) {
    const char *env = getenv("MTGPU_GNN_DEVICE");
    int index = 0;
    if (env && *env) {
        if (strcmp(env, "cpu") == 0) {
            snprintf(g_why, sizeof g_why, "MTGPU_GNN_DEVICE=cpu");
            return;
        }
        if (strcmp(env, "gpu") != 0 && strcmp(env, "auto") != 0 && sscanf(env, "cuda:%d", &index) != 1) {
            snprintf(g_why, sizeof g_why, "MTGPU_GNN_DEVICE=%s: not cpu, gpu, auto or cuda:N", env);
            return;
        }
    }
    const mt_cuda_module *m = NULL;
    char err[1024];
    if (mt__cuda_module(&m, err, sizeof err) != MT_OK) {
        snprintf(g_why, sizeof g_why, "%s", err);
        return;
    }
    if (!mt__cuda_module_can_run(m) || !MT_CUDA_MODULE_HAS(m, gnn_free)) {
        snprintf(g_why, sizeof g_why, "the CUDA module is older than this libmtgpu (no GNN members): rebuild it");
        return;
    }
    /* the driver and a device first: no loading cuBLAS where they are missing */
    char drv[1024];
    if (!m->driver_available(drv, sizeof drv)) {
        snprintf(g_why, sizeof g_why, "no CUDA driver: %s", drv);
        return;
    }
    mt_device_info info;
    if (m->dev_open(index, &g_dev, &info, drv, sizeof drv) != MT_OK) {
        g_dev = NULL;
        snprintf(g_why, sizeof g_why, "cuda:%d: %s", index, drv);
        return;
    }
    if (!m->gnn_available(err, sizeof err)) {
        snprintf(g_why, sizeof g_why, "%s", err);
        m->dev_close(g_dev);
        g_dev = NULL;
        return;
    }
    snprintf(g_why, sizeof g_why, "cuda:%d %s, %s", index, info.name, err);
    g_mod = m;
}

mt_status mt_gnn_gpu_available(char *why, size_t whylen) {
    if (pthread_once(&g_once, open_once) != 0) return mt__fail(why, whylen, MT_UNAVAILABLE, "pthread_once failed");
    if (!g_mod) return mt__fail(why, whylen, MT_UNAVAILABLE, "%s", g_why[0] ? g_why : "no CUDA device");
    if (why && whylen) snprintf(why, whylen, "%s", g_why);
    return MT_OK;
}

struct mt_gnn_gpu_scorer {
    const mt_gnn *m;
    mt__gnn_plan *plan;
    void *g;        /* the module's scorer */
    float *w_up;    /* [total + 2F]: the weights, means and 1/std last uploaded */
    size_t nw_up;
    int uploaded;
    int cap;
};

mt_status mt_gnn_gpu_scorer_create(const mt_gnn *m, const mt_graph_shape *shape, mt_gnn_gpu_scorer **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn gpu: scorer: out is NULL");
    *out = NULL;
    if (!m) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn gpu: scorer: model is NULL");
    mt_status st = mt_gnn_gpu_available(err, errlen);
    if (st != MT_OK) return st;
    if ((st = mt__gnn_check_shape(shape, err, errlen)) != MT_OK) return st;
    const mt__gnn_layout *y = &m->lay;
    if (y->L > MT_CUDA_GNN_MAX_LAYERS) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn gpu: %d layers", y->L);
    mt_gnn_gpu_scorer *s = calloc(1, sizeof *s);
    if (!s) return mt__fail(err, errlen, MT_NOMEM, "gnn gpu: out of memory");
    s->m = m;
    s->nw_up = y->total + 2 * (size_t)y->F;
    s->w_up = malloc(sizeof(float) * s->nw_up);
    if (!s->w_up || mt__gnn_plan_make(m, shape, &s->plan) != MT_OK) {
        mt_gnn_gpu_scorer_free(s);
        return mt__fail(err, errlen, MT_NOMEM, "gnn gpu: out of memory for a plan");
    }
    const mt__gnn_plan *p = s->plan;
    mt_cuda_gnn_desc d;
    memset(&d, 0, sizeof d);
    d.arch = (int)m->p.arch;
    d.F = y->F, d.H = y->H, d.L = y->L;
    d.n = p->n, d.nt = p->nt, d.et = p->et;
    d.nrows = p->nrows, d.maxrows = p->maxrows;
    d.pos = p->pos, d.node_off = p->node_off;
    d.mrow_off = p->mrow_off, d.mside = p->mside, d.mrun = p->mrun, d.mrow_pos = p->mrow_pos;
    d.madj_off = p->madj_off, d.madj_pos = p->madj_pos, d.in_off = p->in_off, d.in_row = p->in_row;
    d.nweights = y->total;
    d.in_w = y->in_w, d.in_b = y->in_b, d.head_w1 = y->head_w1, d.head_b1 = y->head_b1, d.out_w = y->out_w, d.out_b = y->out_b;
    for (int l = 0; l < y->L; l++) {
        d.msg_w[l] = y->msg_w[l], d.upd_w[l] = y->upd_w[l], d.upd_b[l] = y->upd_b[l];
        d.mlp_w[l] = y->mlp_w[l], d.mlp_b[l] = y->mlp_b[l];
    }
    const char *mg = getenv("MTGPU_GNN_GPU_GRAPHS"); /* graphs per device pass, for tests and benchmarks */
    d.max_graphs = mg && *mg ? atoi(mg) : 0;
    if ((st = g_mod->gnn_create(g_dev, &d, &s->g, err, errlen)) != MT_OK) {
        s->g = NULL;
        mt_gnn_gpu_scorer_free(s);
        return st;
    }
    *out = s;
    return MT_OK;
}

/* Uploads the model's weights when they differ from the last upload. */
static mt_status refresh(mt_gnn_gpu_scorer *s, char *err, size_t errlen) {
    const mt_gnn *m = s->m;
    size_t T = m->lay.total, F = (size_t)m->lay.F;
    if (s->uploaded && memcmp(s->w_up, m->w, sizeof(float) * T) == 0 && memcmp(s->w_up + T, m->mean, sizeof(float) * F) == 0 &&
        memcmp(s->w_up + T + F, m->istd, sizeof(float) * F) == 0)
        return MT_OK;
    s->uploaded = 0;
    mt_status st = g_mod->gnn_set_weights(s->g, m->w, m->mean, m->istd, err, errlen);
    if (st != MT_OK) return st;
    memcpy(s->w_up, m->w, sizeof(float) * T);
    memcpy(s->w_up + T, m->mean, sizeof(float) * F);
    memcpy(s->w_up + T + F, m->istd, sizeof(float) * F);
    s->uploaded = 1;
    return MT_OK;
}

mt_status mt_gnn_gpu_scorer_run(mt_gnn_gpu_scorer *s, int B, const float *feats, float *scores, char *err, size_t errlen) {
    if (!s || B < 0 || (B > 0 && (!feats || !scores))) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn gpu: scorer: bad arguments");
    if (B == 0) return MT_OK;
    mt_status st = refresh(s, err, errlen);
    if (st != MT_OK) return st;
    return g_mod->gnn_score(s->g, B, feats, scores, err, errlen);
}

int mt_gnn_gpu_scorer_matches(const mt_gnn_gpu_scorer *s, const mt_graph_shape *shape) {
    return s && shape && mt__gnn_plan_matches(s->plan, shape);
}

void mt_gnn_gpu_scorer_free(mt_gnn_gpu_scorer *s) {
    if (!s) return;
    if (s->g) g_mod->gnn_free(s->g);
    mt__gnn_plan_free(s->plan);
    free(s->w_up);
    free(s);
}
