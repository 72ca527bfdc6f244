/* The CPU reference of a whole network: the project's double-accumulating
 * reference convolution and plain C for the rest. Batch norm is applied as
 * such after the convolution (the executor folds it into the weights), so a
 * folding mistake shows up as a difference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "executor-impl.h"
#include "mtgpu/executor.h"
#include "reference.h"
#include "fail.h"

static double act(double v, mt_activation a) {
    if (a == MT_ACT_RELU) return v > 0 ? v : 0;
    if (a == MT_ACT_RELU6) return v < 0 ? 0 : v > 6 ? 6 : v;
    return v;
}

static mt_status ref_conv(const mt_layer *l, const mt_weights *w, const float *x, const float *res, float *y, int threads, char *err,
                          size_t errlen) {
    const mt_workload *wl = &l->conv.wl;
    const float *wt;
    mt_status st = mt__weights_need(w, l->name, ".weight", mt_workload_weight_elems(wl), &wt, err, errlen);
    if (st != MT_OK) return st;
    if ((st = mt_conv_reference_mt(wl, x, wt, y, threads)) != MT_OK) return mt__fail(err, errlen, st, "layer '%s': reference conv failed", l->name);
    int k = wl->k;
    const float *bias = NULL;
    if (l->conv.bias && (st = mt__weights_need(w, l->name, ".bias", k, &bias, err, errlen)) != MT_OK) return st;
    const float *g = NULL, *b = NULL, *m = NULL, *v = NULL;
    if (l->conv.batch_norm) {
        char bn[MT_WEIGHT_NAME_MAX];
        mt_weights_bn_prefix(l, bn, sizeof bn);
        if ((st = mt__weights_need(w, bn, ".weight", k, &g, err, errlen)) != MT_OK ||
            (st = mt__weights_need(w, bn, ".bias", k, &b, err, errlen)) != MT_OK ||
            (st = mt__weights_need(w, bn, ".running_mean", k, &m, err, errlen)) != MT_OK ||
            (st = mt__weights_need(w, bn, ".running_var", k, &v, err, errlen)) != MT_OK)
            return st;
    }
    int64_t hw = (int64_t)l->out.h * l->out.w;
    for (int n = 0; n < l->out.n; n++)
        for (int o = 0; o < k; o++) {
            float *yp = y + ((int64_t)n * k + o) * hw;
            const float *rp = res ? res + ((int64_t)n * k + o) * hw : NULL;
            for (int64_t j = 0; j < hw; j++) {
                double t = yp[j];
                if (bias) t += bias[o];
                if (g) t = (t - m[o]) / sqrt((double)v[o] + MT_BN_EPS) * g[o] + b[o];
                if (rp) t += rp[j];
                yp[j] = (float)act(t, l->act);
            }
        }
    return MT_OK;
}

static void ref_pool(const mt_layer *l, mt_shape in, const float *x, float *y) {
    int H = in.h, W = in.w, OH = l->out.h, OW = l->out.w;
    for (int64_t nc = 0; nc < (int64_t)l->out.n * l->out.c; nc++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                int hs = oh * l->pool.stride_h - l->pool.pad_h, ws = ow * l->pool.stride_w - l->pool.pad_w;
                double out;
                if (l->kind == MT_LAYER_MAXPOOL) {
                    out = -INFINITY;
                    for (int h = hs < 0 ? 0 : hs; h < hs + l->pool.kernel_h && h < H; h++)
                        for (int w = ws < 0 ? 0 : ws; w < ws + l->pool.kernel_w && w < W; w++)
                            if (x[(nc * H + h) * W + w] > out) out = x[(nc * H + h) * W + w];
                } else {
                    /* PyTorch: the divisor counts the window clipped to the padded input. */
                    int he = hs + l->pool.kernel_h, we = ws + l->pool.kernel_w;
                    if (he > H + l->pool.pad_h) he = H + l->pool.pad_h;
                    if (we > W + l->pool.pad_w) we = W + l->pool.pad_w;
                    int pool = (he - hs) * (we - ws);
                    if (hs < 0) hs = 0;
                    if (ws < 0) ws = 0;
                    if (he > H) he = H;
                    if (we > W) we = W;
                    double s = 0;
                    for (int h = hs; h < he; h++)
                        for (int w = ws; w < we; w++) s += x[(nc * H + h) * W + w];
                    int div = l->pool.count_include_pad ? pool : (he - hs) * (we - ws);
                    out = div > 0 ? s / div : 0;
                }
                y[(nc * OH + oh) * OW + ow] = (float)out;
            }
}

static void ref_adaptive(const mt_layer *l, mt_shape in, const float *x, float *y) {
    int H = in.h, W = in.w, OH = l->out.h, OW = l->out.w;
    for (int64_t nc = 0; nc < (int64_t)l->out.n * l->out.c; nc++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                int hs = oh * H / OH, he = ((oh + 1) * H + OH - 1) / OH, ws = ow * W / OW, we = ((ow + 1) * W + OW - 1) / OW;
                double s = 0;
                for (int h = hs; h < he; h++)
                    for (int w = ws; w < we; w++) s += x[(nc * H + h) * W + w];
                y[(nc * OH + oh) * OW + ow] = (float)(s / ((he - hs) * (we - ws)));
            }
}

static mt_status ref_dense(const mt_layer *l, const mt_weights *w, const float *x, float *y, char *err, size_t errlen) {
    int I = l->dense.in_features, O = l->dense.out_features;
    const float *wt, *b = NULL;
    mt_status st = mt__weights_need(w, l->name, ".weight", (int64_t)I * O, &wt, err, errlen);
    if (st == MT_OK && l->dense.bias) st = mt__weights_need(w, l->name, ".bias", O, &b, err, errlen);
    if (st != MT_OK) return st;
    for (int n = 0; n < l->out.n; n++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0;
            const float *xp = x + (int64_t)n * I, *wp = wt + (int64_t)o * I;
            for (int j = 0; j < I; j++) s += (double)xp[j] * wp[j];
            y[(int64_t)n * O + o] = (float)act(s, l->act);
        }
    return MT_OK;
}

static void ref_softmax(const mt_layer *l, const float *x, float *y) {
    int C = l->out.c;
    int64_t hw = (int64_t)l->out.h * l->out.w;
    for (int n = 0; n < l->out.n; n++)
        for (int64_t s = 0; s < hw; s++) {
            const float *xp = x + (int64_t)n * C * hw + s;
            float *yp = y + (int64_t)n * C * hw + s;
            double m = -INFINITY, sum = 0;
            for (int c = 0; c < C; c++)
                if (xp[c * hw] > m) m = xp[c * hw];
            for (int c = 0; c < C; c++) sum += exp((double)xp[c * hw] - m);
            for (int c = 0; c < C; c++) yp[c * hw] = (float)(exp((double)xp[c * hw] - m) / sum);
        }
}

mt_status mt_network_reference(const mt_network *net, const mt_weights *w, const float *input, float *output, int threads, char *err,
                               size_t errlen) {
    if (!net || !w || !input || !output) return mt__fail(err, errlen, MT_INVALID_ARG, "reference: NULL argument");
    mt_status st = mt_network_status(net, err, errlen);
    if (st != MT_OK) return st;
    int n = mt_network_num_layers(net);
    if (n < 1 || mt_network_layer(net, 0)->kind != MT_LAYER_INPUT) return mt__fail(err, errlen, MT_INVALID_ARG, "reference: no input layer");
    /* Keeps every layer's output until its last reader; simple and enough for the zoo at test sizes. */
    float **t = calloc((size_t)n, sizeof *t);
    int *last = calloc((size_t)n, sizeof *last);
    if (!t || !last) {
        free(t);
        free(last);
        return mt__fail(err, errlen, MT_NOMEM, "reference: out of memory");
    }
    for (int i = 0; i < n; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        for (int j = 0; j < l->ninputs; j++)
            if (last[l->inputs[j]] < i) last[l->inputs[j]] = i;
    }
    for (int i = 0; i < n && st == MT_OK; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        int64_t count = mt__shape_elems(l->out);
        t[i] = malloc(sizeof(float) * (size_t)count);
        if (!t[i]) {
            st = mt__fail(err, errlen, MT_NOMEM, "reference: out of memory for layer '%s'", l->name);
            break;
        }
        const float *x = l->ninputs > 0 ? t[l->inputs[0]] : NULL;
        mt_shape in = l->ninputs > 0 ? mt_network_layer(net, l->inputs[0])->out : l->out;
        switch (l->kind) {
        case MT_LAYER_INPUT:
            memcpy(t[i], input, sizeof(float) * (size_t)count);
            break;
        case MT_LAYER_CONV2D:
            st = ref_conv(l, w, x, l->conv.residual >= 0 ? t[l->conv.residual] : NULL, t[i], threads, err, errlen);
            break;
        case MT_LAYER_MAXPOOL:
        case MT_LAYER_AVGPOOL:
            ref_pool(l, in, x, t[i]);
            break;
        case MT_LAYER_GLOBAL_AVGPOOL:
            for (int64_t nc = 0; nc < count; nc++) {
                double s = 0;
                int64_t hw = (int64_t)in.h * in.w;
                for (int64_t j = 0; j < hw; j++) s += x[nc * hw + j];
                t[i][nc] = (float)(s / (double)hw);
            }
            break;
        case MT_LAYER_ADAPTIVE_AVGPOOL:
            ref_adaptive(l, in, x, t[i]);
            break;
        case MT_LAYER_CONCAT: {
            int64_t hw = (int64_t)l->out.h * l->out.w, off = 0;
            for (int j = 0; j < l->ninputs; j++) {
                mt_shape s = mt_network_layer(net, l->inputs[j])->out;
                for (int b = 0; b < l->out.n; b++)
                    memcpy(t[i] + ((int64_t)b * l->out.c + off) * hw, t[l->inputs[j]] + (int64_t)b * s.c * hw, sizeof(float) * (size_t)(s.c * hw));
                off += s.c;
            }
            break;
        }
        case MT_LAYER_ADD:
            for (int64_t j = 0; j < count; j++) t[i][j] = (float)act((double)x[j] + t[l->inputs[1]][j], l->act);
            break;
        case MT_LAYER_DENSE:
            st = ref_dense(l, w, x, t[i], err, errlen);
            break;
        case MT_LAYER_FLATTEN:
            memcpy(t[i], x, sizeof(float) * (size_t)count);
            break;
        case MT_LAYER_SOFTMAX:
            ref_softmax(l, x, t[i]);
            break;
        default:
            st = mt__fail(err, errlen, MT_UNSUPPORTED, "reference: layer '%s' of kind %s", l->name, mt_layer_kind_name(l->kind));
        }
        /* Drop inputs no later layer reads. */
        for (int j = 0; j < l->ninputs; j++)
            if (last[l->inputs[j]] == i) {
                free(t[l->inputs[j]]);
                t[l->inputs[j]] = NULL;
            }
    }
    if (st == MT_OK) memcpy(output, t[n - 1], sizeof(float) * (size_t)mt__shape_elems(mt_network_layer(net, n - 1)->out));
    for (int i = 0; i < n; i++) free(t[i]);
    free(t);
    free(last);
    return st;
}
