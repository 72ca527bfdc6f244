/* Network descriptions: the zoo's structure, shape inference, task
 * extraction against known tables, and clean failures on bad descriptions. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mtgpu/net.h"

/* One row of a task table: C, H (= W), K, R (= S), stride, count. */
typedef struct {
    int c, hw, k, r, stride, count;
} task_row;

static mt_network *create_ok(const char *name, int batch, int image_size) {
    mt_network *net = NULL;
    char err[512] = "";
    mt_status st = mt_network_create(name, batch, image_size, &net, err, sizeof err);
    if (st != MT_OK) fail_msg("create %s (batch %d, image %d): %s (%s)", name, batch, image_size, mt_status_name(st), err);
    assert_non_null(net);
    return net;
}

static const mt_layer *find_layer(const mt_network *net, const char *name) {
    for (int i = 0; i < mt_network_num_layers(net); i++)
        if (strcmp(mt_network_layer(net, i)->name, name) == 0) return mt_network_layer(net, i);
    fail_msg("%s has no layer '%s'", mt_network_name(net), name);
    return NULL;
}

static void assert_shape(const mt_layer *l, int n, int c, int h, int w) {
    if (l->out.n != n || l->out.c != c || l->out.h != h || l->out.w != w)
        fail_msg("layer '%s': shape %dx%dx%dx%d, expected %dx%dx%dx%d", l->name, l->out.n, l->out.c, l->out.h, l->out.w, n, c, h, w);
}

static void assert_near_rel(double got, double want, double rel, const char *what) {
    if (fabs(got - want) > rel * want) fail_msg("%s: %.6g, expected %.6g within %.2g%%", what, got, want, rel * 100);
}

/* Checks the tasks of net against a table, in order, with pad = R/2 and groups 1. */
static void check_tasks(const mt_network *net, int batch, const task_row *rows, int nrows) {
    mt_task *tasks = NULL;
    int n = -1;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), MT_OK);
    if (n != nrows) fail_msg("%s: %d unique tasks, expected %d", mt_network_name(net), n, nrows);
    for (int i = 0; i < n; i++) {
        const mt_workload *wl = &tasks[i].wl;
        const task_row *r = &rows[i];
        char text[256];
        mt_workload_format(wl, text, sizeof text);
        if (wl->n != batch || wl->c != r->c || wl->h != r->hw || wl->w != r->hw || wl->k != r->k || wl->r != r->r || wl->s != r->r ||
            wl->stride_h != r->stride || wl->stride_w != r->stride || wl->pad_h != r->r / 2 || wl->pad_w != r->r / 2 || wl->groups != 1 ||
            tasks[i].count != r->count)
            fail_msg("%s task %d: %s x%d, expected (%d,%d,%d,%d/%d) x%d", mt_network_name(net), i, text, tasks[i].count, r->c, r->hw, r->k,
                     r->r, r->stride, r->count);
        assert_true(tasks[i].flops == mt_workload_flops(wl));
    }
    mt_tasks_free(tasks);
}

/* Structural invariants every network keeps: topological inputs, unique
 * names, conv workloads that match their input's shape, task counts that add
 * up to the conv layers, and a softmax over 1000 classes at the end. */
static void check_invariants(const mt_network *net, int batch) {
    int nl = mt_network_num_layers(net);
    assert_true(nl > 2);
    assert_int_equal(mt_network_layer(net, 0)->kind, MT_LAYER_INPUT);
    assert_int_equal(mt_network_batch(net), batch);
    for (int i = 0; i < nl; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        for (int j = 0; j < l->ninputs; j++) assert_true(l->inputs[j] >= 0 && l->inputs[j] < i);
        for (int j = 0; j < i; j++)
            if (strcmp(mt_network_layer(net, j)->name, l->name) == 0) fail_msg("%s: name '%s' used twice", mt_network_name(net), l->name);
        assert_int_equal(l->out.n, batch);
        if (l->kind == MT_LAYER_CONV2D) {
            const mt_shape x = mt_network_layer(net, l->inputs[0])->out;
            assert_int_equal(l->conv.wl.n, x.n);
            assert_int_equal(l->conv.wl.c, x.c);
            assert_int_equal(l->conv.wl.h, x.h);
            assert_int_equal(l->conv.wl.w, x.w);
            assert_int_equal(l->out.c, l->conv.wl.k);
            assert_int_equal(l->out.h, mt_workload_out_h(&l->conv.wl));
            if (l->conv.residual >= 0) {
                assert_int_equal(l->ninputs, 2);
                assert_int_equal(l->inputs[1], l->conv.residual);
                assert_memory_equal(&mt_network_layer(net, l->conv.residual)->out, &l->out, sizeof l->out);
            } else {
                assert_int_equal(l->ninputs, 1);
            }
        }
    }
    const mt_layer *last = mt_network_layer(net, nl - 1);
    assert_int_equal(last->kind, MT_LAYER_SOFTMAX);
    assert_shape(last, batch, 1000, 1, 1);
    assert_null(mt_network_layer(net, nl));
    assert_null(mt_network_layer(net, -1));

    mt_task *tasks = NULL;
    int n = 0;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), MT_OK);
    int convs = 0;
    double flops = 0;
    for (int i = 0; i < n; i++) {
        convs += tasks[i].count;
        flops += tasks[i].count * tasks[i].flops;
        assert_int_equal(mt_network_layer(net, tasks[i].first_layer)->kind, MT_LAYER_CONV2D);
        for (int j = 0; j < i; j++) assert_true(tasks[j].first_layer < tasks[i].first_layer);
        /* A task is what the executor's kernel runs: a strided 1x1 layer without padding as stride 1. */
        const mt_workload kw = mt_layer_kernel_workload(mt_network_layer(net, tasks[i].first_layer));
        assert_memory_equal(&kw, &tasks[i].wl, sizeof kw);
        const mt_workload *t = &tasks[i].wl;
        assert_false(t->r == 1 && t->s == 1 && t->pad_h == 0 && t->pad_w == 0 && (t->stride_h > 1 || t->stride_w > 1));
    }
    assert_int_equal(convs, mt_network_num_convs(net));
    assert_near_rel(flops, mt_network_conv_flops(net), 1e-12, "sum of task flops");
    mt_tasks_free(tasks);
}

/* ---- the zoo against known figures ---- */

static const task_row resnet50_rows[] = {
    {3, 224, 64, 7, 2, 1},     {64, 56, 64, 1, 1, 1},     {64, 56, 64, 3, 1, 3},    {64, 56, 256, 1, 1, 4},   {256, 56, 64, 1, 1, 2},
    {256, 56, 128, 1, 1, 1},   {128, 56, 128, 3, 2, 1},   {128, 28, 512, 1, 1, 4},  {256, 28, 512, 1, 1, 1},  {512, 28, 128, 1, 1, 3},
    {128, 28, 128, 3, 1, 3},   {512, 28, 256, 1, 1, 1},   {256, 28, 256, 3, 2, 1},  {256, 14, 1024, 1, 1, 6}, {512, 14, 1024, 1, 1, 1},
    {1024, 14, 256, 1, 1, 5},  {256, 14, 256, 3, 1, 5},   {1024, 14, 512, 1, 1, 1}, {512, 14, 512, 3, 2, 1},  {512, 7, 2048, 1, 1, 3},
    {1024, 7, 2048, 1, 1, 1}, {2048, 7, 512, 1, 1, 2},   {512, 7, 512, 3, 1, 2},
};

/* The unique convolutions of torchvision's networks, with their counts, as
 * their kernels run: the strided 1x1 downsamplings at stride 1 on the
 * subsampled input (mt_layer_kernel_workload). */
static const task_row resnet18_rows[] = {
    {3, 224, 64, 7, 2, 1},   {64, 56, 64, 3, 1, 4},  {64, 56, 128, 3, 2, 1},  {128, 28, 128, 3, 1, 3}, {64, 28, 128, 1, 1, 1},
    {128, 28, 256, 3, 2, 1}, {256, 14, 256, 3, 1, 3}, {128, 14, 256, 1, 1, 1}, {256, 14, 512, 3, 2, 1}, {512, 7, 512, 3, 1, 3},
    {256, 7, 512, 1, 1, 1},
};

static const task_row vgg16_rows[] = {
    {3, 224, 64, 3, 1, 1},   {64, 224, 64, 3, 1, 1},  {64, 112, 128, 3, 1, 1}, {128, 112, 128, 3, 1, 1}, {128, 56, 256, 3, 1, 1},
    {256, 56, 256, 3, 1, 2}, {256, 28, 512, 3, 1, 1}, {512, 28, 512, 3, 1, 2}, {512, 14, 512, 3, 1, 3},
};

#define NROWS(a) (int)(sizeof(a) / sizeof((a)[0]))

static void test_resnet50(void **state) {
    (void)state;
    mt_network *net = create_ok("resnet50", 1, 224);
    assert_string_equal(mt_network_name(net), "resnet50");
    check_invariants(net, 1);
    assert_int_equal(mt_network_num_convs(net), 53);
    check_tasks(net, 1, resnet50_rows, NROWS(resnet50_rows));
    assert_near_rel(mt_network_conv_flops(net), 8.17e9, 0.005, "resnet50 conv flops");
    assert_shape(find_layer(net, "conv1"), 1, 64, 112, 112);
    assert_shape(find_layer(net, "maxpool"), 1, 64, 56, 56);
    assert_shape(find_layer(net, "layer2.0.conv2"), 1, 128, 28, 28); /* v1.5: stride on the 3x3 */
    assert_shape(find_layer(net, "layer4.2.conv3"), 1, 2048, 7, 7);
    assert_shape(find_layer(net, "avgpool"), 1, 2048, 1, 1);
    const mt_layer *fc = find_layer(net, "fc");
    assert_int_equal(fc->kind, MT_LAYER_DENSE);
    assert_int_equal(fc->dense.in_features, 2048);
    assert_int_equal(fc->dense.out_features, 1000);
    assert_true(fc->dense.bias);
    /* Fused residuals: the downsample conv carries the add of conv3, the other
     * blocks' conv3 the add of the block input; 16 blocks in all. */
    const mt_layer *ds = find_layer(net, "layer1.0.downsample.0");
    const mt_layer *c3 = find_layer(net, "layer1.0.conv3");
    assert_int_equal(ds->act, MT_ACT_RELU);
    assert_int_equal(c3->act, MT_ACT_NONE);
    assert_string_equal(mt_network_layer(net, ds->conv.residual)->name, "layer1.0.conv3");
    assert_string_equal(ds->conv.bn_name, "layer1.0.downsample.1");
    assert_true(ds->conv.batch_norm);
    assert_false(ds->conv.bias);
    const mt_layer *b1 = find_layer(net, "layer1.1.conv3");
    assert_string_equal(mt_network_layer(net, b1->conv.residual)->name, "layer1.0.downsample.0");
    int residuals = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) residuals += mt_network_layer(net, i)->conv.residual >= 0;
    assert_int_equal(residuals, 16);
    mt_network_free(net);
}

static void test_resnet18_34(void **state) {
    (void)state;
    mt_network *net = create_ok("resnet18", 1, 224);
    check_invariants(net, 1);
    assert_int_equal(mt_network_num_convs(net), 20);
    check_tasks(net, 1, resnet18_rows, NROWS(resnet18_rows));
    assert_near_rel(mt_network_conv_flops(net), 3.627e9, 0.005, "resnet18 conv flops"); /* 1.81 GMAC */
    assert_shape(find_layer(net, "layer4.1.conv2"), 1, 512, 7, 7);
    mt_network_free(net);

    net = create_ok("resnet34", 1, 224);
    check_invariants(net, 1);
    assert_int_equal(mt_network_num_convs(net), 36);
    mt_task *tasks = NULL;
    int n = 0;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), MT_OK);
    assert_int_equal(n, 11);
    assert_int_equal(tasks[1].count, 6);  /* 64x56x56 3x3: 3 blocks x 2 */
    assert_int_equal(tasks[6].count, 11); /* 256x14x14 3x3: 6 blocks x 2 - 1 */
    mt_tasks_free(tasks);
    assert_near_rel(mt_network_conv_flops(net), 7.33e9, 0.005, "resnet34 conv flops"); /* 3.66 GMAC */
    mt_network_free(net);
}

static void test_vgg16(void **state) {
    (void)state;
    mt_network *net = create_ok("vgg16", 1, 224);
    check_invariants(net, 1);
    assert_int_equal(mt_network_num_convs(net), 13);
    check_tasks(net, 1, vgg16_rows, NROWS(vgg16_rows));
    /* 15.35 GMAC in the convs: 30.69 GFLOP counted as 2 * MACs, as the
     * reference table's MFLOP column adds up to. */
    assert_near_rel(mt_network_conv_flops(net), 30.69e9, 0.005, "vgg16 conv flops");
    int pools = 0, dense = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        pools += mt_network_layer(net, i)->kind == MT_LAYER_MAXPOOL;
        dense += mt_network_layer(net, i)->kind == MT_LAYER_DENSE;
    }
    assert_int_equal(pools, 5);
    assert_int_equal(dense, 3);
    assert_shape(find_layer(net, "features.30"), 1, 512, 7, 7);
    assert_shape(find_layer(net, "flatten"), 1, 25088, 1, 1);
    const mt_layer *fc0 = find_layer(net, "classifier.0");
    assert_int_equal(fc0->dense.in_features, 25088);
    assert_int_equal(fc0->act, MT_ACT_RELU);
    assert_int_equal(find_layer(net, "classifier.6")->act, MT_ACT_NONE);
    mt_network_free(net);

    /* Another image size: the adaptive pool brings the features back to 7x7. */
    net = create_ok("vgg16", 1, 100);
    check_invariants(net, 1);
    assert_shape(find_layer(net, "features.30"), 1, 512, 3, 3);
    assert_shape(find_layer(net, "avgpool"), 1, 512, 7, 7);
    mt_network_free(net);
}

static void test_mobilenet_v2(void **state) {
    (void)state;
    mt_network *net = create_ok("mobilenet_v2", 1, 224);
    check_invariants(net, 1);
    /* first conv + 1 block of 2 convs + 16 blocks of 3 + last conv */
    assert_int_equal(mt_network_num_convs(net), 52);
    /* 300 MMAC with the classifier (1.28 MMAC): 0.60 GFLOP in the convs. */
    assert_near_rel(mt_network_conv_flops(net), 0.60e9, 0.02, "mobilenet_v2 conv flops");
    int depthwise = 0, residuals = 0, relu6 = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind != MT_LAYER_CONV2D) continue;
        depthwise += mt_workload_is_depthwise(&l->conv.wl);
        residuals += l->conv.residual >= 0;
        relu6 += l->act == MT_ACT_RELU6;
        assert_true(l->conv.batch_norm);
        assert_false(l->conv.bias);
        if (l->conv.residual >= 0) assert_int_equal(l->act, MT_ACT_NONE); /* linear bottleneck */
    }
    assert_int_equal(depthwise, 17);
    assert_int_equal(residuals, 10);
    assert_int_equal(relu6, 52 - 17); /* all but the 17 projections */
    assert_shape(find_layer(net, "features.0.0"), 1, 32, 112, 112);
    const mt_layer *dw = find_layer(net, "features.2.conv.1.0");
    assert_int_equal(dw->conv.wl.groups, 96);
    assert_shape(dw, 1, 96, 56, 56);
    assert_string_equal(find_layer(net, "features.2.conv.2")->conv.bn_name, "features.2.conv.3");
    assert_shape(find_layer(net, "features.18.0"), 1, 1280, 7, 7);
    assert_int_equal(find_layer(net, "classifier.1")->dense.in_features, 1280);
    mt_network_free(net);
}

static void test_squeezenet1_1(void **state) {
    (void)state;
    mt_network *net = create_ok("squeezenet1_1", 1, 224);
    check_invariants(net, 1);
    assert_int_equal(mt_network_num_convs(net), 26); /* 1 + 8 fire modules x 3 + 1 */
    assert_near_rel(mt_network_conv_flops(net), 0.70e9, 0.02, "squeezenet1_1 conv flops"); /* 0.35 GMAC */
    assert_shape(find_layer(net, "features.0"), 1, 64, 111, 111);
    /* ceil_mode: floor would give 55, 27, 13 only by luck of odd sizes; check the pools anyway. */
    const mt_layer *p = find_layer(net, "features.2");
    assert_true(p->pool.ceil_mode);
    assert_shape(p, 1, 64, 55, 55);
    assert_shape(find_layer(net, "features.5"), 1, 128, 27, 27);
    assert_shape(find_layer(net, "features.8"), 1, 256, 13, 13);
    const mt_layer *cat = find_layer(net, "features.12");
    assert_int_equal(cat->kind, MT_LAYER_CONCAT);
    assert_int_equal(cat->ninputs, 2);
    assert_string_equal(mt_network_layer(net, cat->inputs[0])->name, "features.12.expand1x1");
    assert_shape(cat, 1, 512, 13, 13);
    const mt_layer *cls = find_layer(net, "classifier.1");
    assert_int_equal(cls->act, MT_ACT_RELU);
    assert_true(cls->conv.bias);
    assert_shape(cls, 1, 1000, 13, 13);
    mt_network_free(net);
}

/* Batch 2 doubles every FLOP figure and keeps the counts. */
static void test_batch2(void **state) {
    (void)state;
    int count = 0;
    const char *const *names = mt_network_names(&count);
    assert_int_equal(count, 6);
    for (int m = 0; m < count; m++) {
        mt_network *a = create_ok(names[m], 1, 0);
        mt_network *b = create_ok(names[m], 2, 224);
        check_invariants(b, 2);
        assert_int_equal(mt_network_num_layers(a), mt_network_num_layers(b));
        assert_int_equal(mt_network_num_convs(a), mt_network_num_convs(b));
        assert_near_rel(mt_network_conv_flops(b), 2 * mt_network_conv_flops(a), 1e-12, names[m]);
        mt_task *ta = NULL, *tb = NULL;
        int na = 0, nb = 0;
        assert_int_equal(mt_network_tasks(a, &ta, &na), MT_OK);
        assert_int_equal(mt_network_tasks(b, &tb, &nb), MT_OK);
        assert_int_equal(na, nb);
        for (int i = 0; i < na; i++) {
            assert_int_equal(ta[i].count, tb[i].count);
            assert_int_equal(tb[i].wl.n, 2);
            mt_workload w = tb[i].wl;
            w.n = 1;
            assert_memory_equal(&w, &ta[i].wl, sizeof w);
            assert_true(tb[i].flops == 2 * ta[i].flops);
        }
        mt_tasks_free(ta);
        mt_tasks_free(tb);
        mt_network_free(a);
        mt_network_free(b);
    }
}

/* ---- failures ---- */

static void test_create_errors(void **state) {
    (void)state;
    mt_network *sentinel = (mt_network *)&sentinel;
    mt_network *net = sentinel;
    char err[512] = "";
    assert_int_equal(mt_network_create("resnet51", 1, 224, &net, err, sizeof err), MT_NOT_FOUND);
    assert_ptr_equal(net, sentinel);
    assert_non_null(strstr(err, "resnet51"));
    assert_non_null(strstr(err, "squeezenet1_1")); /* lists the models */
    assert_int_equal(mt_network_create("", 1, 224, &net, err, sizeof err), MT_NOT_FOUND);
    assert_int_equal(mt_network_create(NULL, 1, 224, &net, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_network_create("resnet50", 1, 224, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_network_create("resnet50", 0, 224, &net, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "batch"));
    assert_int_equal(mt_network_create("resnet50", -3, 224, &net, err, sizeof err), MT_RANGE);
    assert_int_equal(mt_network_create("resnet50", 1, -224, &net, err, sizeof err), MT_RANGE);
    assert_int_equal(mt_network_create("resnet50", 1, 2000000, &net, err, sizeof err), MT_RANGE);
    /* Too many elements for 32-bit indexing. */
    assert_int_equal(mt_network_create("vgg16", 1000000, 224, &net, err, sizeof err), MT_RANGE);
    /* Too small for VGG's five pools: an error naming the layer, not a crash. */
    err[0] = 0;
    assert_int_equal(mt_network_create("vgg16", 1, 16, &net, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "features."));
    /* Every model at every tiny size either builds or fails cleanly. */
    int count = 0;
    const char *const *names = mt_network_names(&count);
    for (int m = 0; m < count; m++)
        for (int s = 1; s <= 40; s++) {
            mt_status st = mt_network_create(names[m], 1, s, &net, err, sizeof err);
            assert_true(st == MT_OK || st == MT_RANGE);
            if (st == MT_OK) {
                check_invariants(net, 1);
                mt_network_free(net);
            }
            net = sentinel;
        }
    assert_ptr_equal(net, sentinel);
    /* No err buffer is fine. */
    assert_int_equal(mt_network_create("nope", 1, 224, &net, NULL, 0), MT_NOT_FOUND);
    mt_network_free(NULL);
}

static void test_build_by_hand(void **state) {
    (void)state;
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("tiny", &net), MT_OK);
    assert_int_equal(mt_network_batch(net), 0);
    int x = mt_network_add_input(net, "x", 2, 3, 6, 6);
    assert_int_equal(x, 0);
    /* ceil_mode: a 6-wide input, 3/2 pools to 3 with ceil, 2 without. */
    int pc = mt_network_add_pool(net, "pool_ceil", MT_LAYER_MAXPOOL, x, 3, 2, 0, 1);
    int pf = mt_network_add_pool(net, "pool_floor", MT_LAYER_MAXPOOL, x, 3, 2, 0, 0);
    assert_shape(mt_network_layer(net, pc), 2, 3, 3, 3);
    assert_shape(mt_network_layer(net, pf), 2, 3, 2, 2);
    assert_int_equal(mt_network_add_input(net, "y", 2, 3, 5, 5), MT_INVALID_ARG); /* a second input */
    mt_network_free(net);

    /* The last window must start inside the input or its left pad: 5 wide,
     * 2/2 pad 1 gives 4 windows by ceil, of which the last starts in the right pad. */
    assert_int_equal(mt_network_new("tiny", &net), MT_OK);
    x = mt_network_add_input(net, "x", 2, 3, 5, 5);
    int p = mt_network_add_pool(net, "p", MT_LAYER_AVGPOOL, x, 2, 2, 1, 1);
    assert_shape(mt_network_layer(net, p), 2, 3, 3, 3);
    assert_true(mt_network_layer(net, p)->pool.count_include_pad);
    mt_conv_spec s = mt_conv_spec_default(8, 3, 1, 1);
    s.bias = 1;
    s.act = MT_ACT_RELU6;
    int c = mt_network_add_conv(net, "c", p, &s);
    assert_shape(mt_network_layer(net, c), 2, 8, 3, 3);
    s = mt_conv_spec_default(8, 1, 1, 0);
    s.residual = c;
    int c2 = mt_network_add_conv(net, "c2", c, &s);
    assert_int_equal(mt_network_layer(net, c2)->ninputs, 2);
    int ins[3] = {c, c2, c};
    int cat = mt_network_add_concat(net, "cat", ins, 3);
    assert_shape(mt_network_layer(net, cat), 2, 24, 3, 3);
    int add = mt_network_add_add(net, "add", c, c2, MT_ACT_RELU);
    assert_shape(mt_network_layer(net, add), 2, 8, 3, 3);
    int g = mt_network_add_adaptive_avgpool(net, "ap", cat, 2, 2);
    int f = mt_network_add_flatten(net, "flat", g);
    assert_shape(mt_network_layer(net, f), 2, 96, 1, 1);
    int d = mt_network_add_dense(net, "fc", f, 10, 1, MT_ACT_NONE);
    assert_int_equal(mt_network_layer(net, d)->dense.in_features, 96);
    int sm = mt_network_add_softmax(net, "sm", d);
    assert_shape(mt_network_layer(net, sm), 2, 10, 1, 1);
    assert_int_equal(mt_network_status(net, NULL, 0), MT_OK);
    mt_task *tasks = NULL;
    int n = 0;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), MT_OK);
    assert_int_equal(n, 2);
    assert_int_equal(tasks[0].first_layer, c);
    mt_tasks_free(tasks);
    mt_network_free(net);

    /* No convolutions: no tasks. */
    assert_int_equal(mt_network_new("none", &net), MT_OK);
    mt_network_add_input(net, "x", 1, 1, 4, 4);
    tasks = (mt_task *)&tasks;
    n = -1;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), MT_OK);
    assert_null(tasks);
    assert_int_equal(n, 0);
    mt_network_free(net);
}

/* Builds x (1x4x8x8) and conv a (8 ch, 8x8), then calls fn, which makes
 * `prep` good adds and then one bad add, and checks the bad add's status, that
 * it added nothing, the sticky error and that tasks refuse the network. */
typedef int (*bad_add)(mt_network *net, int x, int a);

static void expect_bad(bad_add fn, int prep, mt_status want, const char *what) {
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("bad", &net), MT_OK);
    int x = mt_network_add_input(net, "x", 1, 4, 8, 8);
    mt_conv_spec s = mt_conv_spec_default(8, 3, 1, 1);
    int a = mt_network_add_conv(net, "a", x, &s);
    assert_int_equal(a, 1);
    int before = mt_network_num_layers(net) + prep;
    int rc = fn(net, x, a);
    if (rc != (int)want) fail_msg("%s: returned %d, expected %s", what, rc, mt_status_name(want));
    assert_int_equal(mt_network_num_layers(net), before);
    char err[512] = "";
    assert_int_equal(mt_network_status(net, err, sizeof err), want);
    assert_true(err[0] != 0);
    /* Sticky: a good add now fails with the same status and adds nothing. */
    assert_int_equal(mt_network_add_softmax(net, "later", a), (int)want);
    assert_int_equal(mt_network_num_layers(net), before);
    mt_task *tasks = NULL;
    int n = 0;
    assert_int_equal(mt_network_tasks(net, &tasks, &n), want);
    assert_null(tasks);
    mt_network_free(net);
}

static int bad_input_index(mt_network *net, int x, int a) { (void)x; return mt_network_add_softmax(net, "s", a + 1); }
static int bad_negative_index(mt_network *net, int x, int a) { (void)x; (void)a; return mt_network_add_flatten(net, "f", -1); }
static int bad_dup_name(mt_network *net, int x, int a) { (void)a; return mt_network_add_flatten(net, "a", x); }
static int bad_empty_name(mt_network *net, int x, int a) { (void)a; return mt_network_add_flatten(net, "", x); }
static int bad_null_name(mt_network *net, int x, int a) { (void)a; return mt_network_add_flatten(net, NULL, x); }
static int bad_long_name(mt_network *net, int x, int a) {
    (void)a;
    char name[MT_LAYER_NAME_MAX + 8];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    return mt_network_add_flatten(net, name, x);
}
static int bad_concat_hw(mt_network *net, int x, int a) {
    int p = mt_network_add_pool(net, "p", MT_LAYER_MAXPOOL, a, 2, 2, 0, 0);
    (void)x;
    int ins[2] = {a, p};
    return mt_network_add_concat(net, "cat", ins, 2);
}
static int bad_concat_one(mt_network *net, int x, int a) {
    (void)x;
    return mt_network_add_concat(net, "cat", &a, 1);
}
static int bad_concat_many(mt_network *net, int x, int a) {
    int ins[MT_LAYER_MAX_INPUTS + 1];
    for (int i = 0; i <= MT_LAYER_MAX_INPUTS; i++) ins[i] = i % 2 ? x : a;
    return mt_network_add_concat(net, "cat", ins, MT_LAYER_MAX_INPUTS + 1);
}
static int bad_add_shapes(mt_network *net, int x, int a) { return mt_network_add_add(net, "add", x, a, MT_ACT_NONE); }
static int bad_dense_unflat(mt_network *net, int x, int a) { (void)x; return mt_network_add_dense(net, "fc", a, 10, 1, MT_ACT_NONE); }
static int bad_dense_zero(mt_network *net, int x, int a) {
    (void)x;
    int f = mt_network_add_flatten(net, "f", a);
    return mt_network_add_dense(net, "fc", f, 0, 1, MT_ACT_NONE);
}
static int bad_residual_shape(mt_network *net, int x, int a) {
    mt_conv_spec s = mt_conv_spec_default(8, 1, 1, 0);
    s.residual = x; /* 4 channels, the conv gives 8 */
    return mt_network_add_conv(net, "c", a, &s);
}
static int bad_residual_index(mt_network *net, int x, int a) {
    (void)x;
    mt_conv_spec s = mt_conv_spec_default(8, 1, 1, 0);
    s.residual = 7;
    return mt_network_add_conv(net, "c", a, &s);
}
static int bad_conv_groups(mt_network *net, int x, int a) {
    (void)a;
    mt_conv_spec s = mt_conv_spec_default(8, 3, 1, 1);
    s.groups = 3; /* 4 channels */
    return mt_network_add_conv(net, "c", x, &s);
}
static int bad_conv_too_big(mt_network *net, int x, int a) {
    (void)a;
    mt_conv_spec s = mt_conv_spec_default(8, 11, 1, 0); /* 11x11 on 8x8 */
    return mt_network_add_conv(net, "c", x, &s);
}
static int bad_conv_null(mt_network *net, int x, int a) { (void)a; return mt_network_add_conv(net, "c", x, NULL); }
static int bad_conv_act(mt_network *net, int x, int a) {
    (void)a;
    mt_conv_spec s = mt_conv_spec_default(8, 3, 1, 1);
    s.act = (mt_activation)9;
    return mt_network_add_conv(net, "c", x, &s);
}
static int bad_pool_pad(mt_network *net, int x, int a) { (void)a; return mt_network_add_pool(net, "p", MT_LAYER_MAXPOOL, x, 3, 2, 2, 0); }
static int bad_pool_big(mt_network *net, int x, int a) { (void)a; return mt_network_add_pool(net, "p", MT_LAYER_MAXPOOL, x, 9, 1, 0, 0); }
static int bad_pool_kind(mt_network *net, int x, int a) { (void)a; return mt_network_add_pool(net, "p", MT_LAYER_CONCAT, x, 2, 2, 0, 0); }
static int bad_pool_stride(mt_network *net, int x, int a) { (void)a; return mt_network_add_pool(net, "p", MT_LAYER_AVGPOOL, x, 2, 0, 0, 0); }
static int bad_adaptive(mt_network *net, int x, int a) { (void)a; return mt_network_add_adaptive_avgpool(net, "p", x, 0, 7); }

static void test_bad_descriptions(void **state) {
    (void)state;
    expect_bad(bad_input_index, 0, MT_INVALID_ARG, "input index past the layer");
    expect_bad(bad_negative_index, 0, MT_INVALID_ARG, "negative input index");
    expect_bad(bad_dup_name, 0, MT_INVALID_ARG, "duplicate name");
    expect_bad(bad_empty_name, 0, MT_INVALID_ARG, "empty name");
    expect_bad(bad_null_name, 0, MT_INVALID_ARG, "NULL name");
    expect_bad(bad_long_name, 0, MT_INVALID_ARG, "long name");
    expect_bad(bad_concat_hw, 1, MT_RANGE, "concat of different sizes");
    expect_bad(bad_concat_one, 0, MT_INVALID_ARG, "concat of one input");
    expect_bad(bad_concat_many, 0, MT_INVALID_ARG, "concat of too many inputs");
    expect_bad(bad_add_shapes, 0, MT_RANGE, "add of different shapes");
    expect_bad(bad_dense_unflat, 0, MT_RANGE, "dense on a 4-d tensor");
    expect_bad(bad_dense_zero, 1, MT_RANGE, "dense with 0 outputs");
    expect_bad(bad_residual_shape, 0, MT_RANGE, "residual of another shape");
    expect_bad(bad_residual_index, 0, MT_INVALID_ARG, "residual index past the layer");
    expect_bad(bad_conv_groups, 0, MT_RANGE, "groups not dividing channels");
    expect_bad(bad_conv_too_big, 0, MT_RANGE, "kernel over the input");
    expect_bad(bad_conv_null, 0, MT_INVALID_ARG, "NULL spec");
    expect_bad(bad_conv_act, 0, MT_INVALID_ARG, "unknown activation");
    expect_bad(bad_pool_pad, 0, MT_RANGE, "pool pad over kernel/2");
    expect_bad(bad_pool_big, 0, MT_RANGE, "pool window over the input");
    expect_bad(bad_pool_kind, 0, MT_INVALID_ARG, "pool of a non-pool kind");
    expect_bad(bad_pool_stride, 0, MT_RANGE, "pool stride 0");
    expect_bad(bad_adaptive, 0, MT_RANGE, "adaptive pool to 0 rows");

    /* Layers before the input, and a bad input shape. */
    mt_network *net = NULL;
    assert_int_equal(mt_network_new("bad", &net), MT_OK);
    assert_int_equal(mt_network_add_softmax(net, "s", 0), MT_INVALID_ARG);
    assert_int_equal(mt_network_num_layers(net), 0);
    mt_network_free(net);
    assert_int_equal(mt_network_new("bad", &net), MT_OK);
    assert_int_equal(mt_network_add_input(net, "x", 1, 0, 8, 8), MT_RANGE);
    mt_network_free(net);
    assert_int_equal(mt_network_new("bad", &net), MT_OK);
    assert_int_equal(mt_network_add_input(net, "x", 1000, 1000, 1000, 1000), MT_RANGE);
    mt_network_free(net);
    assert_int_equal(mt_network_new(NULL, &net), MT_INVALID_ARG);
    assert_int_equal(mt_network_add_flatten(NULL, "f", 0), MT_INVALID_ARG);
    assert_int_equal(mt_network_status(NULL, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(mt_network_tasks(NULL, NULL, NULL), MT_INVALID_ARG);
}

static void test_names(void **state) {
    (void)state;
    const char *const *names = mt_network_names(NULL);
    const char *want[] = {"resnet18", "resnet34", "resnet50", "vgg16", "mobilenet_v2", "squeezenet1_1"};
    for (int i = 0; i < 6; i++) assert_string_equal(names[i], want[i]);
    assert_string_equal(mt_layer_kind_name(MT_LAYER_CONV2D), "conv2d");
    assert_string_equal(mt_layer_kind_name(MT_LAYER_KIND_COUNT), "unknown");
    assert_string_equal(mt_activation_name(MT_ACT_RELU6), "relu6");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50),
        cmocka_unit_test(test_resnet18_34),
        cmocka_unit_test(test_vgg16),
        cmocka_unit_test(test_mobilenet_v2),
        cmocka_unit_test(test_squeezenet1_1),
        cmocka_unit_test(test_batch2),
        cmocka_unit_test(test_create_errors),
        cmocka_unit_test(test_build_by_hand),
        cmocka_unit_test(test_bad_descriptions),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
