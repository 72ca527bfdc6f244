/* Networks: the layer list, shape inference with validation, the zoo's
 * registry and task extraction. */
#include "mtgpu/net.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zoo-impl.h"
#include "fail.h"

/* Same bound as mt_workload fields: keeps every product of two sizes far
 * from int overflow before the element-count checks see it. */
#define NET_FIELD_MAX 1000000
#define NET_ERR_MAX 320

struct mt_network {
    char *name;
    mt_layer *layers;
    int nlayers, cap;
    mt_status status; /* sticky: the first failed add's status */
    char err[NET_ERR_MAX];
};

/* ---- errors ---- */

/* Marks net failed (first error wins) and returns st for the add to return. */
static int net_fail(mt_network *net, mt_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int net_fail(mt_network *net, mt_status st, const char *fmt, ...) {
    if (net->status == MT_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(net->err, sizeof net->err, fmt, ap);
        va_end(ap);
        net->status = st;
    }
    return (int)net->status;
}

mt_status mt_network_status(const mt_network *net, char *err, size_t errlen) {
    if (!net) return mt__fail(err, errlen, MT_INVALID_ARG, "network: NULL");
    if (net->status == MT_OK) return MT_OK;
    return mt__fail(err, errlen, net->status, "%s", net->err);
}

/* ---- lifetime ---- */

mt_status mt_network_new(const char *name, mt_network **out) {
    if (!name || !out) return MT_INVALID_ARG;
    mt_network *net = calloc(1, sizeof *net);
    if (!net) return MT_NOMEM;
    size_t len = strlen(name);
    net->name = malloc(len + 1);
    if (!net->name) {
        free(net);
        return MT_NOMEM;
    }
    memcpy(net->name, name, len + 1);
    *out = net;
    return MT_OK;
}

void mt_network_free(mt_network *net) {
    if (!net) return;
    free(net->layers);
    free(net->name);
    free(net);
}

/* ---- reading ---- */

const char *mt_network_name(const mt_network *net) { return net ? net->name : NULL; }
int mt_network_num_layers(const mt_network *net) { return net ? net->nlayers : 0; }
const mt_layer *mt_network_layer(const mt_network *net, int i) {
    return net && i >= 0 && i < net->nlayers ? &net->layers[i] : NULL;
}
int mt_network_batch(const mt_network *net) { return net && net->nlayers > 0 ? net->layers[0].out.n : 0; }

int mt_network_num_convs(const mt_network *net) {
    int n = 0;
    for (int i = 0; net && i < net->nlayers; i++) n += net->layers[i].kind == MT_LAYER_CONV2D;
    return n;
}

double mt_network_conv_flops(const mt_network *net) {
    double f = 0;
    for (int i = 0; net && i < net->nlayers; i++)
        if (net->layers[i].kind == MT_LAYER_CONV2D) f += mt_workload_flops(&net->layers[i].conv.wl);
    return f;
}

const char *mt_layer_kind_name(mt_layer_kind kind) {
    static const char *const names[MT_LAYER_KIND_COUNT] = {
        [MT_LAYER_INPUT] = "input",
        [MT_LAYER_CONV2D] = "conv2d",
        [MT_LAYER_MAXPOOL] = "maxpool",
        [MT_LAYER_AVGPOOL] = "avgpool",
        [MT_LAYER_GLOBAL_AVGPOOL] = "global_avgpool",
        [MT_LAYER_ADAPTIVE_AVGPOOL] = "adaptive_avgpool",
        [MT_LAYER_CONCAT] = "concat",
        [MT_LAYER_ADD] = "add",
        [MT_LAYER_DENSE] = "dense",
        [MT_LAYER_FLATTEN] = "flatten",
        [MT_LAYER_SOFTMAX] = "softmax",
    };
    return (int)kind >= 0 && kind < MT_LAYER_KIND_COUNT ? names[kind] : "unknown";
}

const char *mt_activation_name(mt_activation act) {
    switch (act) {
    case MT_ACT_NONE: return "none";
    case MT_ACT_RELU: return "relu";
    case MT_ACT_RELU6: return "relu6";
    }
    return "unknown";
}

/* ---- building ---- */

mt_conv_spec mt_conv_spec_default(int k, int r, int stride, int pad) {
    mt_conv_spec s = {.k = k, .r = r, .s = r, .stride_h = stride, .stride_w = stride, .pad_h = pad, .pad_w = pad,
                      .dil_h = 1, .dil_w = 1, .groups = 1, .act = MT_ACT_NONE, .residual = -1};
    return s;
}

/* n*c*h*w, saturating at INT32_MAX (0 if a factor is not positive). */
static int64_t shape_elems(mt_shape s) {
    const int64_t f[4] = {s.n, s.c, s.h, s.w};
    int64_t p = 1;
    for (int i = 0; i < 4; i++) {
        if (f[i] <= 0) return 0;
        if (p > INT32_MAX / f[i]) return INT32_MAX;
        p *= f[i];
    }
    return p;
}

/* Checks an output shape: every size at least 1 and the element count under
 * 2^31, the bound of 32-bit index arithmetic in kernels. Returns 0 or the
 * status the add returns. */
static int check_shape(mt_network *net, const char *name, mt_shape s) {
    if (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1)
        return net_fail(net, MT_RANGE, "layer '%s': output shape %dx%dx%dx%d has a size under 1", name, s.n, s.c, s.h, s.w);
    if (shape_elems(s) >= INT32_MAX)
        return net_fail(net, MT_RANGE, "layer '%s': output shape %dx%dx%dx%d has 2^31 or more elements", name, s.n, s.c, s.h, s.w);
    return 0;
}

static int valid_act(mt_activation act) { return act == MT_ACT_NONE || act == MT_ACT_RELU || act == MT_ACT_RELU6; }

/* Starts a layer: checks the sticky state, the name and the input indices,
 * and fills *l with the kind, name and inputs. Returns 0 or the add's status. */
static int begin(mt_network *net, mt_layer *l, mt_layer_kind kind, const char *name, const int *inputs, int ninputs) {
    if (!net) return MT_INVALID_ARG;
    if (net->status != MT_OK) return (int)net->status;
    memset(l, 0, sizeof *l);
    l->kind = kind;
    l->conv.residual = -1;
    if (!name || !name[0]) return net_fail(net, MT_INVALID_ARG, "layer %d (%s): empty name", net->nlayers, mt_layer_kind_name(kind));
    size_t len = strlen(name);
    if (len >= MT_LAYER_NAME_MAX)
        return net_fail(net, MT_INVALID_ARG, "layer %d (%s): name '%.40s...' is %zu bytes, over %d", net->nlayers, mt_layer_kind_name(kind),
                        name, len, MT_LAYER_NAME_MAX - 1);
    for (int i = 0; i < net->nlayers; i++)
        if (strcmp(net->layers[i].name, name) == 0)
            return net_fail(net, MT_INVALID_ARG, "layer %d: name '%s' is already used by layer %d", net->nlayers, name, i);
    memcpy(l->name, name, len + 1);
    if (kind == MT_LAYER_INPUT) {
        if (net->nlayers != 0) return net_fail(net, MT_INVALID_ARG, "layer '%s': the input must be the first layer and the only one", name);
        return 0;
    }
    if (net->nlayers == 0) return net_fail(net, MT_INVALID_ARG, "layer '%s': the first layer must be the input", name);
    if (ninputs < 1 || ninputs > MT_LAYER_MAX_INPUTS || !inputs)
        return net_fail(net, MT_INVALID_ARG, "layer '%s': %d inputs (expected 1..%d)", name, ninputs, MT_LAYER_MAX_INPUTS);
    for (int i = 0; i < ninputs; i++) {
        if (inputs[i] < 0 || inputs[i] >= net->nlayers)
            return net_fail(net, MT_INVALID_ARG, "layer '%s': input %d is layer %d, not one of the %d layers before it", name, i, inputs[i],
                            net->nlayers);
        l->inputs[i] = inputs[i];
    }
    l->ninputs = ninputs;
    return 0;
}

/* Checks the output shape and appends l. Returns its index or the add's status. */
static int commit(mt_network *net, const mt_layer *l) {
    int rc = check_shape(net, l->name, l->out);
    if (rc) return rc;
    if (net->nlayers == net->cap) {
        int cap = net->cap ? net->cap * 2 : 64;
        mt_layer *p = realloc(net->layers, (size_t)cap * sizeof *p);
        if (!p) return net_fail(net, MT_NOMEM, "layer '%s': out of memory", l->name);
        net->layers = p;
        net->cap = cap;
    }
    net->layers[net->nlayers] = *l;
    return net->nlayers++;
}

static mt_shape in_shape(const mt_network *net, const mt_layer *l, int i) { return net->layers[l->inputs[i]].out; }

int mt_network_add_input(mt_network *net, const char *name, int n, int c, int h, int w) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_INPUT, name, NULL, 0);
    if (rc) return rc;
    if (n < 1 || c < 1 || h < 1 || w < 1 || n > NET_FIELD_MAX || c > NET_FIELD_MAX || h > NET_FIELD_MAX || w > NET_FIELD_MAX)
        return net_fail(net, MT_RANGE, "layer '%s': input shape %dx%dx%dx%d out of range (each 1..%d)", name, n, c, h, w, NET_FIELD_MAX);
    l.out = (mt_shape){n, c, h, w};
    return commit(net, &l);
}

int mt_network_add_conv(mt_network *net, const char *name, int input, const mt_conv_spec *spec) {
    mt_layer l;
    int ins[2] = {input, spec ? spec->residual : -1};
    int nin = spec && spec->residual >= 0 ? 2 : 1;
    if (spec && spec->residual < -1) nin = 2; /* let begin() reject it */
    int rc = begin(net, &l, MT_LAYER_CONV2D, name, ins, nin);
    if (rc) return rc;
    if (!spec) return net_fail(net, MT_INVALID_ARG, "layer '%s': NULL conv spec", name);
    if (!valid_act(spec->act)) return net_fail(net, MT_INVALID_ARG, "layer '%s': unknown activation %d", name, (int)spec->act);
    mt_shape x = in_shape(net, &l, 0);
    mt_workload wl = {.n = x.n, .c = x.c, .h = x.h, .w = x.w, .k = spec->k, .r = spec->r, .s = spec->s,
                      .stride_h = spec->stride_h, .stride_w = spec->stride_w, .pad_h = spec->pad_h, .pad_w = spec->pad_w,
                      .dil_h = spec->dil_h, .dil_w = spec->dil_w, .groups = spec->groups};
    char msg[256];
    mt_status st = mt_workload_validate(&wl, msg, sizeof msg);
    if (st != MT_OK) return net_fail(net, st, "layer '%s': %s", name, msg);
    l.conv.wl = wl;
    l.conv.bias = spec->bias != 0;
    l.conv.batch_norm = spec->batch_norm != 0;
    l.act = spec->act;
    l.out = (mt_shape){wl.n, wl.k, mt_workload_out_h(&wl), mt_workload_out_w(&wl)};
    if (spec->bn_name && spec->bn_name[0]) {
        if (!l.conv.batch_norm) return net_fail(net, MT_INVALID_ARG, "layer '%s': a batch-norm name without batch norm", name);
        size_t len = strlen(spec->bn_name);
        if (len >= MT_LAYER_NAME_MAX)
            return net_fail(net, MT_INVALID_ARG, "layer '%s': batch-norm name is %zu bytes, over %d", name, len, MT_LAYER_NAME_MAX - 1);
        memcpy(l.conv.bn_name, spec->bn_name, len + 1);
    }
    if (nin == 2) {
        mt_shape r = in_shape(net, &l, 1);
        if (memcmp(&r, &l.out, sizeof r) != 0)
            return net_fail(net, MT_RANGE, "layer '%s': residual '%s' has shape %dx%dx%dx%d, the conv's output %dx%dx%dx%d", name,
                            net->layers[spec->residual].name, r.n, r.c, r.h, r.w, l.out.n, l.out.c, l.out.h, l.out.w);
        l.conv.residual = spec->residual;
    }
    return commit(net, &l);
}

/* PyTorch's pooling output size, ceil_mode included: with ceil_mode the last
 * window must start inside the input or its left padding. */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int ceil_mode) {
    int64_t span = in + 2 * p - k;
    if (span < 0) return 0;
    int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

int mt_network_add_pool(mt_network *net, const char *name, mt_layer_kind kind, int input, int kernel, int stride, int pad, int ceil_mode) {
    mt_layer l;
    int rc = begin(net, &l, kind == MT_LAYER_AVGPOOL ? MT_LAYER_AVGPOOL : MT_LAYER_MAXPOOL, name, &input, 1);
    if (rc) return rc;
    if (kind != MT_LAYER_MAXPOOL && kind != MT_LAYER_AVGPOOL)
        return net_fail(net, MT_INVALID_ARG, "layer '%s': pool kind %d is neither maxpool nor avgpool", name, (int)kind);
    if (kernel < 1 || stride < 1 || pad < 0 || kernel > NET_FIELD_MAX || stride > NET_FIELD_MAX || pad > kernel / 2)
        return net_fail(net, MT_RANGE, "layer '%s': pool kernel %d, stride %d, pad %d out of range (kernel, stride >= 1; 0 <= pad <= kernel/2)",
                        name, kernel, stride, pad);
    mt_shape x = in_shape(net, &l, 0);
    int64_t oh = pool_out(x.h, kernel, stride, pad, ceil_mode), ow = pool_out(x.w, kernel, stride, pad, ceil_mode);
    if (oh < 1 || ow < 1)
        return net_fail(net, MT_RANGE, "layer '%s': pool %dx%d/%d of a %dx%d input gives no output", name, kernel, kernel, stride, x.h, x.w);
    l.pool.kernel_h = l.pool.kernel_w = kernel;
    l.pool.stride_h = l.pool.stride_w = stride;
    l.pool.pad_h = l.pool.pad_w = pad;
    l.pool.ceil_mode = ceil_mode != 0;
    l.pool.count_include_pad = kind == MT_LAYER_AVGPOOL;
    l.out = (mt_shape){x.n, x.c, (int)oh, (int)ow};
    return commit(net, &l);
}

int mt_network_add_global_avgpool(mt_network *net, const char *name, int input) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_GLOBAL_AVGPOOL, name, &input, 1);
    if (rc) return rc;
    mt_shape x = in_shape(net, &l, 0);
    l.out = (mt_shape){x.n, x.c, 1, 1};
    return commit(net, &l);
}

int mt_network_add_adaptive_avgpool(mt_network *net, const char *name, int input, int out_h, int out_w) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_ADAPTIVE_AVGPOOL, name, &input, 1);
    if (rc) return rc;
    if (out_h < 1 || out_w < 1 || out_h > NET_FIELD_MAX || out_w > NET_FIELD_MAX)
        return net_fail(net, MT_RANGE, "layer '%s': adaptive pool output %dx%d out of range (1..%d)", name, out_h, out_w, NET_FIELD_MAX);
    mt_shape x = in_shape(net, &l, 0);
    l.out = (mt_shape){x.n, x.c, out_h, out_w};
    return commit(net, &l);
}

int mt_network_add_concat(mt_network *net, const char *name, const int *inputs, int ninputs) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_CONCAT, name, inputs, ninputs);
    if (rc) return rc;
    if (ninputs < 2) return net_fail(net, MT_INVALID_ARG, "layer '%s': concat of %d input (expected at least 2)", name, ninputs);
    mt_shape a = in_shape(net, &l, 0);
    int64_t c = 0;
    for (int i = 0; i < ninputs; i++) {
        mt_shape b = in_shape(net, &l, i);
        if (b.n != a.n || b.h != a.h || b.w != a.w)
            return net_fail(net, MT_RANGE, "layer '%s': concat input '%s' is %dx%dx%dx%d, input '%s' is %dx%dx%dx%d (n, h, w must agree)", name,
                            net->layers[inputs[i]].name, b.n, b.c, b.h, b.w, net->layers[inputs[0]].name, a.n, a.c, a.h, a.w);
        c += b.c;
    }
    if (c > INT32_MAX) return net_fail(net, MT_RANGE, "layer '%s': concat has too many channels", name);
    l.out = (mt_shape){a.n, (int)c, a.h, a.w};
    return commit(net, &l);
}

int mt_network_add_add(mt_network *net, const char *name, int a, int b, mt_activation act) {
    mt_layer l;
    int ins[2] = {a, b};
    int rc = begin(net, &l, MT_LAYER_ADD, name, ins, 2);
    if (rc) return rc;
    if (!valid_act(act)) return net_fail(net, MT_INVALID_ARG, "layer '%s': unknown activation %d", name, (int)act);
    mt_shape x = in_shape(net, &l, 0), y = in_shape(net, &l, 1);
    if (memcmp(&x, &y, sizeof x) != 0)
        return net_fail(net, MT_RANGE, "layer '%s': add of shapes %dx%dx%dx%d and %dx%dx%dx%d", name, x.n, x.c, x.h, x.w, y.n, y.c, y.h, y.w);
    l.act = act;
    l.out = x;
    return commit(net, &l);
}

int mt_network_add_dense(mt_network *net, const char *name, int input, int out_features, int bias, mt_activation act) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_DENSE, name, &input, 1);
    if (rc) return rc;
    if (!valid_act(act)) return net_fail(net, MT_INVALID_ARG, "layer '%s': unknown activation %d", name, (int)act);
    mt_shape x = in_shape(net, &l, 0);
    if (x.h != 1 || x.w != 1)
        return net_fail(net, MT_RANGE, "layer '%s': dense input '%s' is %dx%dx%dx%d, not flat (flatten it first)", name,
                        net->layers[input].name, x.n, x.c, x.h, x.w);
    if (out_features < 1 || out_features > NET_FIELD_MAX)
        return net_fail(net, MT_RANGE, "layer '%s': %d output features out of range (1..%d)", name, out_features, NET_FIELD_MAX);
    if ((int64_t)x.c * out_features >= INT32_MAX)
        return net_fail(net, MT_RANGE, "layer '%s': weight matrix %d x %d has 2^31 or more elements", name, out_features, x.c);
    l.dense.in_features = x.c;
    l.dense.out_features = out_features;
    l.dense.bias = bias != 0;
    l.act = act;
    l.out = (mt_shape){x.n, out_features, 1, 1};
    return commit(net, &l);
}

int mt_network_add_flatten(mt_network *net, const char *name, int input) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_FLATTEN, name, &input, 1);
    if (rc) return rc;
    mt_shape x = in_shape(net, &l, 0);
    /* The input passed check_shape, so c*h*w < 2^31. */
    l.out = (mt_shape){x.n, (int)((int64_t)x.c * x.h * x.w), 1, 1};
    return commit(net, &l);
}

int mt_network_add_softmax(mt_network *net, const char *name, int input) {
    mt_layer l;
    int rc = begin(net, &l, MT_LAYER_SOFTMAX, name, &input, 1);
    if (rc) return rc;
    l.out = in_shape(net, &l, 0);
    return commit(net, &l);
}

int mt__net_conv(mt_network *net, const char *name, const char *bn_name, int input, int k, int r, int stride, int pad, int groups,
                 int bias, mt_activation act, int residual) {
    mt_conv_spec s = mt_conv_spec_default(k, r, stride, pad);
    s.groups = groups;
    s.bias = bias;
    s.batch_norm = bn_name != NULL;
    s.bn_name = bn_name;
    s.act = act;
    s.residual = residual;
    return mt_network_add_conv(net, name, input, &s);
}

/* ---- the zoo ---- */

static const struct {
    const char *name;
    mt__zoo_builder build;
} zoo[] = {
    {"resnet18", mt__zoo_resnet18},         {"resnet34", mt__zoo_resnet34}, {"resnet50", mt__zoo_resnet50},
    {"vgg16", mt__zoo_vgg16},               {"mobilenet_v2", mt__zoo_mobilenet_v2},
    {"squeezenet1_1", mt__zoo_squeezenet1_1},
};
#define ZOO_COUNT (int)(sizeof zoo / sizeof zoo[0])

const char *const *mt_network_names(int *count) {
    static const char *const names[ZOO_COUNT] = {"resnet18", "resnet34", "resnet50", "vgg16", "mobilenet_v2", "squeezenet1_1"};
    if (count) *count = ZOO_COUNT;
    return names;
}

mt_status mt_network_create(const char *name, int batch, int image_size, mt_network **out, char *err, size_t errlen) {
    if (!name || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "network: NULL argument");
    int idx = -1;
    for (int i = 0; i < ZOO_COUNT; i++)
        if (strcmp(zoo[i].name, name) == 0) idx = i;
    if (idx < 0) {
        char list[256] = "";
        size_t used = 0;
        for (int i = 0; i < ZOO_COUNT && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", zoo[i].name);
        return mt__fail(err, errlen, MT_NOT_FOUND, "network: unknown model '%.64s' (models: %s)", name, list);
    }
    if (batch < 1 || batch > NET_FIELD_MAX)
        return mt__fail(err, errlen, MT_RANGE, "network %s: batch %d out of range (1..%d)", name, batch, NET_FIELD_MAX);
    if (image_size == 0) image_size = 224;
    if (image_size < 1 || image_size > NET_FIELD_MAX)
        return mt__fail(err, errlen, MT_RANGE, "network %s: image size %d out of range (1..%d, or 0 for 224)", name, image_size, NET_FIELD_MAX);
    mt_network *net = NULL;
    mt_status st = mt_network_new(name, &net);
    if (st != MT_OK) return mt__fail(err, errlen, st, "network %s: %s", name, mt_status_str(st));
    st = zoo[idx].build(net, batch, image_size);
    if (st == MT_OK) st = net->status;
    if (st != MT_OK) {
        mt__fail(err, errlen, st, "network %s at batch %d, image size %d: %s", name, batch, image_size,
                 net->status != MT_OK ? net->err : mt_status_str(st));
        mt_network_free(net);
        return st;
    }
    *out = net;
    return MT_OK;
}

/* ---- tasks ---- */

static int wl_equal(const mt_workload *a, const mt_workload *b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k && a->r == b->r && a->s == b->s &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h && a->pad_w == b->pad_w &&
           a->dil_h == b->dil_h && a->dil_w == b->dil_w && a->groups == b->groups;
}

mt_workload mt_layer_kernel_workload(const mt_layer *l) {
    mt_workload wl = l->conv.wl;
    mt_workload_unit_stride(&l->conv.wl, &wl);
    return wl;
}

mt_status mt_network_tasks(const mt_network *net, mt_task **tasks, int *ntasks) {
    if (!net || !tasks || !ntasks) return MT_INVALID_ARG;
    if (net->status != MT_OK) return net->status;
    int nconv = mt_network_num_convs(net);
    if (nconv == 0) {
        *tasks = NULL;
        *ntasks = 0;
        return MT_OK;
    }
    mt_task *t = malloc((size_t)nconv * sizeof *t);
    if (!t) return MT_NOMEM;
    int n = 0;
    /* Networks have at most a few hundred convolutions: a linear search per
     * layer keeps the first-occurrence order without a hash table. */
    for (int i = 0; i < net->nlayers; i++) {
        const mt_layer *l = &net->layers[i];
        if (l->kind != MT_LAYER_CONV2D) continue;
        const mt_workload wl = mt_layer_kernel_workload(l);
        int j = 0;
        while (j < n && !wl_equal(&t[j].wl, &wl)) j++;
        if (j == n) {
            t[n] = (mt_task){.wl = wl, .count = 0, .flops = mt_workload_flops(&wl), .first_layer = i};
            n++;
        }
        t[j].count++;
    }
    *tasks = t;
    *ntasks = n;
    return MT_OK;
}

void mt_tasks_free(mt_task *tasks) { free(tasks); }
