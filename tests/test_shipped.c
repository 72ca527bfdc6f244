/* The cost models shipped in data/: each loads, its manifest describes it
 * (kind of training, parameters, inner procedure), and no convolution its
 * manifest holds out, nor any of the networks the benchmarks hold out
 * (ResNet-18 and SqueezeNet 1.1), is among the tasks it was trained on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "file.h"
#include "gnn.h"
#include "json.h"
#include "mtgpu/net.h"

#ifndef MTGPU_SOURCE_DATA_DIR
#define MTGPU_SOURCE_DATA_DIR "data"
#endif

typedef struct shipped {
    mt_gnn *model;
    mt_json_doc *doc;
    const mt_json *root;
} shipped;

/* Loads data/NAME and data/NAME.manifest.json; skips when the model is not there. */
static void load(const char *name, shipped *s) {
    char path[4096], mpath[4200], err[1024];
    snprintf(path, sizeof path, "%s/%s", MTGPU_SOURCE_DATA_DIR, name);
    snprintf(mpath, sizeof mpath, "%s.manifest.json", path);
    memset(s, 0, sizeof *s);
    mt_status st = mt_gnn_load(path, &s->model, err, sizeof err);
    if (st == MT_NOT_FOUND) {
        print_message("skipped: %s is not in this tree\n", path);
        skip();
    }
    assert_int_equal(st, MT_OK);
    unsigned char *text = NULL;
    size_t len = 0;
    assert_int_equal(mt__read_file_bounded(mpath, (size_t)64 << 20, &text, &len, err, sizeof err), MT_OK);
    mt_json_limits lim = mt__json_default_limits();
    lim.max_bytes = (size_t)64 << 20;
    lim.max_nodes = 10000000;
    st = mt__json_parse((const char *)text, len, &lim, &s->doc, err, sizeof err);
    free(text);
    if (st != MT_OK) fail_msg("%s: %s", mpath, err);
    s->root = mt__json_root(s->doc);
}

static void release(shipped *s) {
    mt_gnn_free(s->model);
    mt__json_free(s->doc);
}

static int in_string_array(const mt_json *arr, const char *text) {
    for (size_t i = 0; i < (arr ? arr->count : 0); i++) {
        const mt_json *v = mt__json_at(arr, i);
        if (mt__json_is(v, MT_JSON_STRING) && strcmp(v->str, text) == 0) return 1;
    }
    return 0;
}

/* No training task is a held-out workload of the manifest or a convolution of net. */
static void check_held_out(const shipped *s, const char *net) {
    const mt_json *ds = mt__json_get(s->root, "dataset");
    const mt_json *tasks = mt__json_get(ds, "task_list"), *held = mt__json_get(ds, "held_out_workloads");
    assert_true(mt__json_is(tasks, MT_JSON_ARRAY));
    assert_true(mt__json_is(held, MT_JSON_ARRAY));
    assert_true(tasks->count > 0);
    mt_network *n = NULL;
    mt_task *nt = NULL;
    int nn = 0;
    char err[512];
    assert_int_equal(mt_network_create(net, 1, 0, &n, err, sizeof err), MT_OK);
    assert_int_equal(mt_network_tasks(n, &nt, &nn), MT_OK);
    for (size_t i = 0; i < tasks->count; i++) {
        const mt_json *w = mt__json_get(mt__json_at(tasks, i), "workload");
        assert_true(mt__json_is(w, MT_JSON_STRING));
        if (in_string_array(held, w->str)) fail_msg("training task %s is held out", w->str);
        for (int k = 0; k < nn; k++) {
            char text[256];
            mt_workload_format(&nt[k].wl, text, sizeof text);
            if (strcmp(text, w->str) == 0) fail_msg("training task %s is a convolution of %s", w->str, net);
        }
    }
    mt_tasks_free(nt);
    mt_network_free(n);
}

static double num(const mt_json *obj, const char *key) {
    const mt_json *v = mt__json_get(obj, key);
    assert_true(mt__json_is(v, MT_JSON_NUMBER));
    return v->num;
}

static void test_meta_model(void **state) {
    (void)state;
    shipped s;
    load("opencl_gnn_meta.model", &s);
    assert_int_equal(mt_gnn_get_origin(s.model), MT_GNN_ORIGIN_META);
    assert_string_equal(mt__json_get(s.root, "training")->str, "meta-trained");
    assert_int_equal((int64_t)num(s.root, "params"), mt_gnn_param_count(s.model));
    /* the inner procedure the file carries is the one the manifest says it was meta-trained with */
    const mt_json *hp = mt__json_get(s.root, "hyper_parameters");
    mt_gnn_inner in = mt_gnn_get_inner(s.model);
    assert_int_equal(in.steps, (int)num(hp, "inner_steps"));
    assert_true(in.lr > 0.999 * num(hp, "inner_lr") && in.lr < 1.001 * num(hp, "inner_lr"));
    const char *algo = mt__json_get(hp, "algorithm")->str;
    assert_int_equal(in.algorithm, strcmp(algo, "meta-sgd") == 0 ? MT_GNN_META_SGD : MT_GNN_META_FOMAML);
    mt_gnn_params p = mt_gnn_get_params(s.model);
    assert_int_equal(p.hidden, (int)num(hp, "hidden"));
    assert_int_equal(p.layers, (int)num(hp, "layers"));
    check_held_out(&s, "resnet18");
    check_held_out(&s, "squeezenet1_1");
    release(&s);
}

static void test_pooled_model(void **state) {
    (void)state;
    shipped s;
    load("opencl_gnn_pooled.model", &s);
    assert_int_equal(mt_gnn_get_origin(s.model), MT_GNN_ORIGIN_POOLED);
    assert_string_equal(mt__json_get(s.root, "training")->str, "pooled");
    assert_int_equal((int64_t)num(s.root, "params"), mt_gnn_param_count(s.model));
    check_held_out(&s, "resnet18");
    check_held_out(&s, "squeezenet1_1");
    release(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meta_model),
        cmocka_unit_test(test_pooled_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
