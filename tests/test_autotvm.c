/* AutoTVM import/export over the real TopHub logs, the line decoder on
 * crafted lines, and the strict JSON parser on hostile input.
 *
 * The logs live in tests/data/tophub/ (copied from tlc-pack/tophub); set
 * MTGPU_TOPHUB_DIR to read them from elsewhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "autotvm.h"
#include "scratch_dir.h"
#include "select.h"

static char g_data[1024];


static int setup(void **state) {
    (void)state;
    if (scratch_make("autotvm") != 0) return -1;
    const char *env = getenv("MTGPU_TOPHUB_DIR");
    if (env && *env) {
        snprintf(g_data, sizeof g_data, "%s", env);
    } else {
        /* CMake compiles with absolute source paths: the data sits next to this file. */
        snprintf(g_data, sizeof g_data, "%s", __FILE__);
        char *slash = strrchr(g_data, '/');
        if (slash) snprintf(slash + 1, sizeof g_data - (size_t)(slash + 1 - g_data), "data/tophub");
        else snprintf(g_data, sizeof g_data, "tests/data/tophub");
    }
    return 0;
}


static mt_db *open_db(const char *name) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    mt_db *db = NULL;
    if (mt_db_open(path, NULL, &db, err, sizeof err) != MT_OK) fail_msg("open %s: %s", path, err);
    return db;
}

static void print_stats(const char *name, const mt_autotvm_stats *s) {
    print_message("    %-18s %5lld lines:", name, (long long)s->lines);
    for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++)
        if (s->count[o]) print_message(" %s=%lld", mt_autotvm_outcome_name((mt_autotvm_outcome)o), (long long)s->count[o]);
    print_message("\n");
    for (int i = 0; i < s->ntasks; i++) print_message("        unsupported task %-28s %lld\n", s->task_name[i], (long long)s->task_count[i]);
}

typedef struct expect {
    const char *file;
    int64_t lines, imported, comment, unsupported_template, not_in_space;
} expect;

/* What each log holds (counted independently with Python's json module):
 * cuda: 600 conv2d_nchw + 97 depthwise convert; winograd 95, batch_matmul 18,
 * conv2d_transpose 14, conv1d_transpose 1 are other tasks.
 * rocm: 5 records use auto_unroll_max_step 128 or 1024 (ours: 0/512/1500).
 * opencl: 2 comment lines; 12 records whose splits do not multiply to their
 * workload's extents (inconsistent records in the published log). */
static const expect g_expect[] = {
    {"cuda_v0.10.log", 825, 697, 0, 128, 0},
    {"rocm_v0.05.log", 217, 182, 0, 30, 5},
    {"opencl_v0.04.log", 99, 74, 2, 11, 12},
};

static void import_all(mt_db *db, int64_t *total_imported, int expect_duplicates) {
    *total_imported = 0;
    for (size_t i = 0; i < sizeof g_expect / sizeof g_expect[0]; i++) {
        const expect *e = &g_expect[i];
        char path[1200], err[512];
        snprintf(path, sizeof path, "%s/%s", g_data, e->file);
        if (access(path, R_OK) != 0) fail_msg("cannot read %s (set MTGPU_TOPHUB_DIR)", path);
        mt_autotvm_stats s;
        mt_status st = mt_autotvm_import(db, path, &s, err, sizeof err);
        if (st != MT_OK) fail_msg("import %s: %s", path, err);
        print_stats(e->file, &s);
        int64_t sum = 0;
        for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++) sum += s.count[o];
        assert_int_equal(sum, s.lines);
        assert_int_equal(s.lines, e->lines);
        if (expect_duplicates) {
            assert_int_equal(s.count[MT_AUTOTVM_IMPORTED], 0);
            assert_int_equal(s.count[MT_AUTOTVM_DUPLICATE], e->imported);
        } else {
            assert_int_equal(s.count[MT_AUTOTVM_IMPORTED], e->imported);
            assert_int_equal(s.count[MT_AUTOTVM_DUPLICATE], 0);
        }
        assert_int_equal(s.count[MT_AUTOTVM_COMMENT], e->comment);
        assert_int_equal(s.count[MT_AUTOTVM_UNSUPPORTED_TEMPLATE], e->unsupported_template);
        assert_int_equal(s.count[MT_AUTOTVM_NOT_IN_SPACE], e->not_in_space);
        assert_int_equal(s.count[MT_AUTOTVM_MALFORMED], 0);
        assert_int_equal(s.count[MT_AUTOTVM_ASYMMETRIC_PADDING], 0);
        assert_int_equal(s.count[MT_AUTOTVM_UNSUPPORTED_WORKLOAD], 0);
        *total_imported += e->imported;
    }
}

static int count_cb(const mt_record *r, void *user) {
    (void)r;
    (*(int64_t *)user)++;
    return 0;
}

static void test_import_tophub(void **state) {
    (void)state;
    mt_db *db = open_db("tophub.db");
    int64_t total;
    import_all(db, &total, 0);
    int64_t n;
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, total);
    assert_int_equal(mt_db_count(db, NULL, NULL, "depthwise", &n, NULL, 0), MT_OK);
    assert_int_equal(n, 97 + 9 + 6); /* opencl: 3 of its 9 depthwise records are inconsistent */
    print_message("    %lld records imported, %lld depthwise\n", (long long)total, (long long)n);
    /* Importing again stores nothing new. */
    import_all(db, &total, 1);
    assert_int_equal(mt_db_count(db, NULL, NULL, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, total);

    /* One target: the first record of cuda_v0.10 (titanx, 2048->192 1x1). */
    char fp[17];
    mt_autotvm_fingerprint("cuda -model=titanx", fp);
    mt_db_device d;
    mt_device_info info;
    assert_int_equal(mt_db_get_device(db, fp, &d, &info, NULL, 0), MT_OK);
    assert_string_equal(d.backend, "autotvm");
    assert_string_equal(d.name, "cuda -model=titanx");
    assert_string_equal(d.platform, "cuda");
    assert_int_equal(info.max_work_group_size, 1024);
    assert_int_equal(mt_db_count(db, NULL, fp, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 141); /* titanx: 160 lines, 19 of them other tasks */
    mt_workload wl;
    assert_int_equal(mt_workload_parse("c=2048,h=8,w=8,k=192,r=1,s=1", &wl, NULL, 0), MT_OK);
    mt_record best;
    assert_int_equal(mt_db_best(db, &wl, fp, &best, NULL, 0), MT_OK);
    assert_string_equal(best.template_name, "direct");
    assert_string_equal(best.config, "tile_f=6x1x32x1,tile_y=4x1x2x1,tile_x=1x1x8x1,tile_rc=64x32,tile_ry=1x1,tile_rx=1x1,"
                                     "auto_unroll_max_step=1500,unroll_explicit=1,vec=1,stage_local=1");
    assert_true(best.median_ms > 0.0569732 && best.median_ms < 0.0569733);
    assert_true(best.timestamp > 1535423916.7 && best.timestamp < 1535423916.8);
    assert_string_equal(best.source, "autotvm:cuda -model=titanx");
    assert_string_equal(best.version, "tvm 0.7.dev0");
    assert_int_equal(best.status, MT_OK);

    /* The best-config selection on that device picks the imported record. */
    mt_select_query q = mt_select_query_default(db, &wl, &info);
    mt_select_result sel;
    char err[512];
    assert_int_equal(mt_select_config(&q, &sel, err, sizeof err), MT_OK);
    assert_int_equal(sel.from, MT_SELECT_FROM_RECORD);
    assert_string_equal(mt_template_name(sel.t), "direct");
    mt_select_result_free(&sel);

    mt_db_filter f = {0};
    f.source_prefix = "autotvm:rocm";
    n = 0;
    assert_int_equal(mt_db_for_each(db, &f, count_cb, &n, NULL, 0), MT_OK);
    assert_int_equal(n, 166); /* the other 16 imported rocm-log records are "opencl -model=gfx900" */
    mt_db_close(db);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Every field of every record, in order, in both databases. */
typedef struct rec_list {
    mt_record *r;
    int64_t n, cap;
} rec_list;

static int list_cb(const mt_record *r, void *user) {
    rec_list *l = user;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        l->r = realloc(l->r, sizeof *l->r * (size_t)l->cap);
        assert_non_null(l->r);
    }
    l->r[l->n++] = *r;
    return 0;
}

static void test_export_round_trip(void **state) {
    (void)state;
    mt_db *a = open_db("export-a.db");
    int64_t total;
    import_all(a, &total, 0);
    char out1[512], out2[512], err[512];
    snprintf(out1, sizeof out1, "%s/export1.log", g_dir);
    snprintf(out2, sizeof out2, "%s/export2.log", g_dir);
    FILE *f = fopen(out1, "w");
    assert_non_null(f);
    mt_autotvm_export_stats es;
    assert_int_equal(mt_autotvm_export(a, f, NULL, &es, err, sizeof err), MT_OK);
    fclose(f);
    assert_int_equal(es.written, total);
    assert_int_equal(es.other_template + es.not_expressible + es.bad, 0);

    mt_db *b = open_db("export-b.db");
    mt_autotvm_stats s;
    assert_int_equal(mt_autotvm_import(b, out1, &s, err, sizeof err), MT_OK);
    print_stats("export1.log", &s);
    assert_int_equal(s.lines, total);
    assert_int_equal(s.count[MT_AUTOTVM_IMPORTED], total);

    rec_list la = {0}, lb = {0};
    assert_int_equal(mt_db_for_each(a, NULL, list_cb, &la, NULL, 0), MT_OK);
    assert_int_equal(mt_db_for_each(b, NULL, list_cb, &lb, NULL, 0), MT_OK);
    assert_int_equal(la.n, lb.n);
    for (int64_t i = 0; i < la.n; i++) {
        const mt_record *x = &la.r[i], *y = &lb.r[i];
        assert_memory_equal(&x->wl, &y->wl, sizeof x->wl);
        assert_string_equal(x->template_name, y->template_name);
        assert_string_equal(x->config, y->config);
        assert_int_equal(x->config_index, y->config_index);
        assert_string_equal(x->device, y->device);
        assert_int_equal(x->ncosts, y->ncosts);
        for (int k = 0; k < x->ncosts; k++) assert_true(fabs(x->costs_ms[k] - y->costs_ms[k]) <= 1e-12 * x->costs_ms[k]);
        assert_true(fabs(x->median_ms - y->median_ms) <= 1e-12 * x->median_ms);
        assert_int_equal(x->status, y->status);
        assert_true(x->timestamp == y->timestamp);
        assert_string_equal(x->version, y->version);
        assert_string_equal(x->source, y->source);
    }
    free(la.r);
    free(lb.r);

    /* Exporting the copy gives the same file, byte for byte. */
    f = fopen(out2, "w");
    assert_non_null(f);
    assert_int_equal(mt_autotvm_export(b, f, NULL, &es, err, sizeof err), MT_OK);
    fclose(f);
    assert_int_equal(es.written, total);
    size_t n1 = 0, n2 = 0;
    char *t1 = slurp(out1, &n1), *t2 = slurp(out2, &n2);
    assert_non_null(t1);
    assert_non_null(t2);
    assert_int_equal(n1, n2);
    assert_memory_equal(t1, t2, n1);
    free(t1);
    free(t2);

    /* A filtered export: one device only. */
    char fp[17];
    mt_autotvm_fingerprint("cuda -model=v100", fp);
    mt_db_filter filt = {0};
    filt.device = fp;
    f = fopen(out2, "w");
    assert_int_equal(mt_autotvm_export(a, f, &filt, &es, err, sizeof err), MT_OK);
    fclose(f);
    int64_t n;
    assert_int_equal(mt_db_count(a, NULL, fp, NULL, &n, NULL, 0), MT_OK);
    assert_int_equal(es.written, n);
    assert_true(n > 0);
    mt_db_close(a);
    mt_db_close(b);
}

static void test_export_skips(void **state) {
    (void)state;
    mt_db *db = open_db("skips.db");
    mt_workload wl;
    assert_int_equal(mt_workload_parse("c=16,h=8,w=8,k=16,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find("direct");
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_record r;
    mt_record_init(&r);
    r.wl = wl;
    snprintf(r.template_name, sizeof r.template_name, "direct");
    memcpy(r.device, "00000000000000aa", 17);
    r.ncosts = 1;
    r.costs_ms[0] = 0.5;
    /* vec=2: AutoTVM has no such schedule. */
    snprintf(r.config, sizeof r.config,
             "tile_f=1x1x16x1,tile_y=1x1x8x1,tile_x=1x1x4x2,tile_rc=4x4,tile_ry=3x1,tile_rx=1x3,auto_unroll_max_step=0,unroll_explicit=0,"
             "vec=2,stage_local=1");
    mt_config cfg;
    char err[512];
    assert_int_equal(mt_config_parse(&sp, r.config, &cfg, err, sizeof err), MT_OK);
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    /* The same with vec=1, and a failed build. */
    snprintf(r.config, sizeof r.config,
             "tile_f=1x1x16x1,tile_y=1x1x8x1,tile_x=1x1x4x2,tile_rc=4x4,tile_ry=3x1,tile_rx=1x3,auto_unroll_max_step=0,unroll_explicit=0,"
             "vec=1,stage_local=1");
    char vec1[MT_RECORD_CONFIG_LEN];
    snprintf(vec1, sizeof vec1, "%s", r.config);
    r.status = MT_BUILD;
    r.ncosts = 0;
    snprintf(r.message, sizeof r.message, "ptxas error");
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    /* A gemm record. */
    snprintf(r.template_name, sizeof r.template_name, "gemm");
    snprintf(r.config, sizeof r.config, "whatever=1");
    r.status = MT_OK;
    r.ncosts = 1;
    assert_int_equal(mt_db_put_record(db, &r, NULL, NULL, 0), MT_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/skips.log", g_dir);
    FILE *f = fopen(path, "w");
    mt_autotvm_export_stats es;
    assert_int_equal(mt_autotvm_export(db, f, NULL, &es, err, sizeof err), MT_OK);
    fclose(f);
    assert_int_equal(es.written, 1);
    assert_int_equal(es.not_expressible, 1);
    assert_int_equal(es.other_template, 1);
    /* The written line: an error record with AutoTVM's 1e9 cost and error_no 3. */
    char line[4096] = "";
    f = fopen(path, "r");
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    print_message("    %s", line);
    assert_non_null(strstr(line, "\"result\": [[1000000000], 3, "));
    assert_non_null(strstr(line, "\"opencl -model=device_00000000000000aa\""));
    mt_record back;
    char target[200];
    assert_int_equal(mt_autotvm_decode(line, strlen(line), &back, target, sizeof target, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_int_equal(back.status, MT_BUILD);
    assert_string_equal(back.config, vec1);
    mt_space_free(&sp);
    mt_db_close(db);
}

/* ---- the line decoder ---- */

static const char *LINE_HEAD = "{\"input\": [\"cuda -model=test\", \"conv2d_nchw.cuda\", [[\"TENSOR\", [1, 64, 56, 56], \"float32\"], "
                               "[\"TENSOR\", [64, 64, 1, 7], \"float32\"], [1, 1], ";

static mt_autotvm_outcome decode_with(const char *pad, const char *entity, const char *result, mt_record *rec, char *err, size_t errlen) {
    char line[4096];
    snprintf(line, sizeof line,
             "%s%s, [1, 1], \"float32\"], {}], \"config\": {\"index\": 1, \"code_hash\": null, \"entity\": [%s]}, \"result\": %s, "
             "\"version\": 0.2, \"tvm_version\": \"0.7.dev1\"}\n",
             LINE_HEAD, pad, entity, result);
    char target[200];
    return mt_autotvm_decode(line, strlen(line), rec, target, sizeof target, err, errlen);
}

static const char *ENT_OLD = "[\"tile_f\", \"sp\", [4, 2, 8, 1]], [\"tile_y\", \"sp\", [7, 1, 8, 1]], [\"tile_x\", \"sp\", [2, 1, 2, 14]], "
                             "[\"tile_rc\", \"sp\", [8, 8]], [\"tile_rx\", \"sp\", [1, 1]], [\"tile_ry\", \"sp\", [7, 1]], "
                             "[\"auto_unroll_max_step\", \"ot\", 512], [\"unroll_explicit\", \"ot\", 1]";
static const char *RES_OK = "[[1e-4, 3e-4, 2e-4], 0, 1.5, 1600000000.25]";

static void test_decode_lines(void **state) {
    (void)state;
    mt_record r;
    char err[512];
    /* Old naming: the window splits map by position (height, then width). */
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, RES_OK, &r, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_string_equal(r.config, "tile_f=4x2x8x1,tile_y=7x1x8x1,tile_x=2x1x2x14,tile_rc=8x8,tile_ry=1x1,tile_rx=7x1,"
                                  "auto_unroll_max_step=512,unroll_explicit=1,vec=1,stage_local=1");
    assert_int_equal(r.wl.r, 1);
    assert_int_equal(r.wl.s, 7);
    assert_int_equal(r.wl.pad_w, 3);
    assert_int_equal(r.ncosts, 3);
    assert_true(fabs(r.median_ms - 0.2) < 1e-12);
    assert_true(r.timestamp == 1600000000.25);
    assert_string_equal(r.version, "tvm 0.7.dev1");
    /* Two-value padding is the same workload. */
    mt_record r2;
    assert_int_equal(decode_with("[0, 3]", ENT_OLD, RES_OK, &r2, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_memory_equal(&r.wl, &r2.wl, sizeof r.wl);
    /* -1 parts are derived from the extent. */
    const char *ent_neg = "[\"tile_f\", \"sp\", [-1, 2, 8, 1]], [\"tile_y\", \"sp\", [-1, 1, 8, 1]], [\"tile_x\", \"sp\", [-1, 1, 2, 14]], "
                          "[\"tile_rc\", \"sp\", [-1, 8]], [\"tile_ry\", \"sp\", [-1, 1]], [\"tile_rx\", \"sp\", [-1, 1]], "
                          "[\"auto_unroll_max_step\", \"ot\", 512], [\"unroll_explicit\", \"ot\", 1]";
    assert_int_equal(decode_with("[0, 3, 0, 3]", ent_neg, RES_OK, &r2, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_string_equal(r2.config, "tile_f=4x2x8x1,tile_y=7x1x8x1,tile_x=2x1x2x14,tile_rc=8x8,tile_ry=1x1,tile_rx=7x1,"
                                   "auto_unroll_max_step=512,unroll_explicit=1,vec=1,stage_local=1");
    /* Asymmetric padding. */
    assert_int_equal(decode_with("[0, 3, 1, 3]", ENT_OLD, RES_OK, &r2, err, sizeof err), MT_AUTOTVM_ASYMMETRIC_PADDING);
    print_message("    %s\n", err);
    /* A split that does not multiply to the extent; an unknown unroll value. */
    const char *ent_bad = "[\"tile_f\", \"sp\", [4, 2, 8, 2]], [\"tile_y\", \"sp\", [7, 1, 8, 1]], [\"tile_x\", \"sp\", [2, 1, 2, 14]], "
                          "[\"tile_rc\", \"sp\", [8, 8]], [\"tile_rx\", \"sp\", [1, 1]], [\"tile_ry\", \"sp\", [7, 1]], "
                          "[\"auto_unroll_max_step\", \"ot\", 512], [\"unroll_explicit\", \"ot\", 1]";
    assert_int_equal(decode_with("[0, 3, 0, 3]", ent_bad, RES_OK, &r2, err, sizeof err), MT_AUTOTVM_NOT_IN_SPACE);
    print_message("    %s\n", err);
    /* A knob set of another schedule. */
    assert_int_equal(decode_with("[0, 3, 0, 3]", "[\"tile_ic\", \"sp\", [1, 64]]", RES_OK, &r2, err, sizeof err), MT_AUTOTVM_UNSUPPORTED_TEMPLATE);
    /* Error records. */
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, "[[1000000000.0], 4, 10.0, 1600000000]", &r2, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_int_equal(r2.status, MT_LAUNCH);
    assert_int_equal(r2.ncosts, 0);
    assert_non_null(strstr(r2.message, "RUNTIME_DEVICE"));
    /* Malformed results. */
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, "[[], 0, 1.0, 1600000000]", &r2, err, sizeof err), MT_AUTOTVM_MALFORMED);
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, "[[\"x\"], 0, 1.0, 1600000000]", &r2, err, sizeof err), MT_AUTOTVM_MALFORMED);
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, "[[1e-4], 0, 1.0]", &r2, err, sizeof err), MT_AUTOTVM_MALFORMED);
    assert_int_equal(decode_with("[0, 3, 0, 3]", ENT_OLD, "[[-1e-4], 0, 1.0, 1]", &r2, err, sizeof err), MT_AUTOTVM_MALFORMED);
    assert_int_equal(decode_with("[-1, 3, 0, 3]", ENT_OLD, RES_OK, &r2, err, sizeof err), MT_AUTOTVM_MALFORMED);
    /* Blank, comment, garbage. */
    char target[64];
    assert_int_equal(mt_autotvm_decode("  \r\n", 4, &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_BLANK);
    assert_int_equal(mt_autotvm_decode("", 0, &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_BLANK);
    assert_int_equal(mt_autotvm_decode("# hi\n", 5, &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_COMMENT);
    assert_int_equal(mt_autotvm_decode("{\"input\": [", 11, &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_MALFORMED);
    assert_int_equal(mt_autotvm_decode("[1, 2, 3]", 9, &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_MALFORMED);
    /* Depthwise: weight [C, multiplier, R, S]. */
    const char *dw = "{\"input\": [\"rocm -model=x\", \"depthwise_conv2d_nchw.cuda\", [[\"TENSOR\", [1, 32, 112, 112], \"float32\"], "
                     "[\"TENSOR\", [32, 1, 3, 3], \"float32\"], [1, 1], [1, 1, 1, 1], [1, 1], \"float32\"], {}], \"config\": {\"index\": 0, "
                     "\"code_hash\": null, \"entity\": [[\"tile_f\", \"sp\", [-1, 1, 8, 1]], [\"tile_y\", \"sp\", [-1, 1, 8, 2]], "
                     "[\"tile_x\", \"sp\", [-1, 2, 4, 1]], [\"auto_unroll_max_step\", \"ot\", 256], [\"unroll_explicit\", \"ot\", 0]]}, "
                     "\"result\": [[2e-5], 0, 1.0, 1600000000.0], \"version\": 0.2, \"tvm_version\": \"0.7.dev1\"}";
    assert_int_equal(mt_autotvm_decode(dw, strlen(dw), &r2, target, sizeof target, err, sizeof err), MT_AUTOTVM_IMPORTED);
    assert_string_equal(r2.template_name, "depthwise");
    assert_string_equal(target, "rocm -model=x");
    assert_int_equal(r2.wl.groups, 32);
    assert_int_equal(r2.wl.k, 32);
    assert_string_equal(r2.config, "tile_f=4x1x8x1,tile_y=7x1x8x2,tile_x=14x2x4x1,auto_unroll_max_step=256,unroll_explicit=0,vec=1,stage_local=1");
    assert_string_equal(r2.source, "autotvm:rocm -model=x");
    char fp[17];
    mt_autotvm_fingerprint("rocm -model=x", fp);
    assert_string_equal(r2.device, fp);
}

/* Mutations of a real line never crash the decoder (ASan watches). */
/* ---- files that are no logs: devices, FIFOs, binary and endless lines ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A log line that imports (the old-naming line of test_decode_lines). */
static void good_line(char *line, size_t len) {
    snprintf(line, len,
             "%s[0, 3, 0, 3], [1, 1], \"float32\"], {}], \"config\": {\"index\": 1, \"code_hash\": null, \"entity\": [%s]}, \"result\": %s, "
             "\"version\": 0.2, \"tvm_version\": \"0.7.dev1\"}\n",
             LINE_HEAD, ENT_OLD, RES_OK);
}

/* Imports path into db and expects status want, the message containing
 * needle, in bounded time: the bound tells "stopped at the limit" from
 * "reads forever" (a FIFO, /dev/zero), not fast from slow, so it leaves
 * room for a 64 MiB line read under ASan on a loaded machine (48 s seen). */
static void expect_import(mt_db *db, const char *path, mt_status want, const char *needle, mt_autotvm_stats *s) {
    char err[1024] = "";
    double t0 = now_s();
    mt_status st = mt_autotvm_import(db, path, s, err, sizeof err);
    double el = now_s() - t0;
    print_message("    %s -> %s in %.2f s: %s\n", strrchr(path, '/') ? strrchr(path, '/') + 1 : path, mt_status_name(st), el, err);
    assert_int_equal(st, want);
    if (needle) assert_non_null(strstr(err, needle));
    assert_true(el < 600);
}

static void test_import_hostile_files(void **state) {
    (void)state;
    mt_db *db = open_db("hostile.db");
    mt_autotvm_stats s;
    char path[512], line[4096];
    good_line(line, sizeof line);
    /* A device and a FIFO (which no one writes): refused before any read. */
    expect_import(db, "/dev/zero", MT_IO, "character device", &s);
    assert_int_equal(s.lines, 0);
    snprintf(path, sizeof path, "%s/fifo", g_dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_import(db, path, MT_IO, "FIFO", &s);
    /* A sparse file of 30 GB (zeros): stopped at its first byte. */
    snprintf(path, sizeof path, "%s/sparse", g_dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(truncate(path, (off_t)30 << 30), 0);
    expect_import(db, path, MT_PARSE, "NUL byte in line 1", &s);
    /* Binary data after a good line: the good line is imported, then it stops. */
    snprintf(path, sizeof path, "%s/binary", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs(line, f);
    fwrite("{\"input\": \0\0\0", 1, 13, f);
    fclose(f);
    expect_import(db, path, MT_PARSE, "line 2", &s);
    assert_int_equal(s.count[MT_AUTOTVM_IMPORTED], 1);
    /* A UTF-8 byte-order mark before line 1 is not part of it. */
    snprintf(path, sizeof path, "%s/bom", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("\xEF\xBB\xBF", f);
    fputs(line, f);
    fclose(f);
    expect_import(db, path, MT_OK, NULL, &s);
    assert_int_equal(s.lines, 1);
    assert_int_equal(s.count[MT_AUTOTVM_DUPLICATE], 1); /* the record of the binary file's first line */
    assert_int_equal(s.count[MT_AUTOTVM_MALFORMED], 0);
    /* A line of 2 MiB is skipped as malformed; one running past 64 MiB ends the import. */
    snprintf(path, sizeof path, "%s/long", g_dir);
    f = fopen(path, "wb");
    assert_non_null(f);
    char *chunk = malloc(1 << 20);
    assert_non_null(chunk);
    memset(chunk, 'a', 1 << 20);
    for (int i = 0; i < 2; i++) fwrite(chunk, 1, 1 << 20, f);
    fputs("\n", f);
    fputs(line, f);
    fclose(f);
    expect_import(db, path, MT_OK, NULL, &s);
    assert_int_equal(s.count[MT_AUTOTVM_MALFORMED], 1);
    assert_int_equal(s.count[MT_AUTOTVM_DUPLICATE], 1);
    f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 65; i++) fwrite(chunk, 1, 1 << 20, f);
    fclose(f);
    free(chunk);
    expect_import(db, path, MT_PARSE, "runs past 64 MiB", &s);
    unlink(path);
    mt_db_close(db);
}

static void test_decode_mutations(void **state) {
    (void)state;
    char path[1200];
    snprintf(path, sizeof path, "%s/cuda_v0.10.log", g_data);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096];
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    size_t len = strlen(line);
    uint64_t rng = 7;
    mt_record *r = malloc(sizeof *r);
    int outcomes[MT_AUTOTVM_OUTCOME_COUNT] = {0};
    for (int it = 0; it < 3000; it++) {
        char *m = malloc(len);
        memcpy(m, line, len);
        int flips = 1 + (int)mt_rng_below(&rng, 4);
        for (int k = 0; k < flips; k++) m[mt_rng_below(&rng, len)] = (char)mt_rng_below(&rng, 256);
        size_t cut = it % 3 == 0 ? (size_t)mt_rng_below(&rng, len + 1) : len;
        char err[256], target[64];
        mt_autotvm_outcome o = mt_autotvm_decode(m, cut, r, target, sizeof target, err, sizeof err);
        assert_true(o >= 0 && o < MT_AUTOTVM_OUTCOME_COUNT);
        outcomes[o]++;
        free(m);
    }
    print_message("    3000 mutations:");
    for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++)
        if (outcomes[o]) print_message(" %s=%d", mt_autotvm_outcome_name((mt_autotvm_outcome)o), outcomes[o]);
    print_message("\n");
    free(r);
}

/* ---- the JSON parser ---- */

/* Parses exactly n bytes from a heap copy (no NUL after it), so ASan sees any over-read. */
static mt_status parse_n(const char *text, size_t n, const mt_json_limits *lim, mt_json_doc **doc) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, text, n);
    char err[256];
    mt_status st = mt__json_parse(copy, n, lim, doc, err, sizeof err);
    free(copy);
    return st;
}

static mt_status parse_s(const char *text) {
    mt_json_doc *doc = NULL;
    mt_status st = parse_n(text, strlen(text), NULL, &doc);
    if (st == MT_OK) assert_non_null(doc);
    else assert_null(doc);
    mt__json_free(doc);
    return st;
}

static void test_json_basic(void **state) {
    (void)state;
    const char *text = " {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"], \"b\": {}, \"c\": [], \"a\": 9007199254740993} ";
    mt_json_doc *doc = NULL;
    assert_int_equal(parse_n(text, strlen(text), NULL, &doc), MT_OK);
    const mt_json *root = mt__json_root(doc);
    assert_int_equal(root->type, MT_JSON_OBJECT);
    assert_int_equal(root->count, 4);
    const mt_json *a = mt__json_get(root, "a"); /* the first of duplicates */
    assert_int_equal(a->type, MT_JSON_ARRAY);
    assert_int_equal(a->count, 6);
    int64_t v;
    assert_true(mt__json_int(mt__json_at(a, 0), 0, 10, &v));
    assert_int_equal(v, 1);
    assert_false(mt__json_int(mt__json_at(a, 1), -10000, 10000, &v));
    assert_true(mt__json_at(a, 1)->num == -2500.0);
    assert_int_equal(mt__json_at(a, 2)->type, MT_JSON_TRUE);
    assert_int_equal(mt__json_at(a, 3)->type, MT_JSON_FALSE);
    assert_int_equal(mt__json_at(a, 4)->type, MT_JSON_NULL);
    assert_string_equal(mt__json_at(a, 5)->str, "x\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_null(mt__json_at(a, 6));
    assert_int_equal(mt__json_get(root, "b")->count, 0);
    const mt_json *last = mt__json_at(root, 3);
    assert_string_equal(last->key, "a");
    assert_true(last->is_int);
    assert_int_equal(last->ival, 9007199254740993LL); /* exact beyond 2^53 */
    mt__json_free(doc);
    assert_int_equal(parse_s("0"), MT_OK);
    assert_int_equal(parse_s("-0.0e-0"), MT_OK);
    assert_int_equal(parse_s("\"\""), MT_OK);
    assert_int_equal(parse_s("-9223372036854775808"), MT_OK);
    assert_int_equal(parse_s("123456789012345678901234567890"), MT_OK);
    assert_int_equal(parse_s("1e-999"), MT_OK); /* underflows to 0: fine */
    assert_int_equal(parse_s("\"raw \xe2\x82\xac euro\""), MT_OK);
}

static void test_json_hostile(void **state) {
    (void)state;
    /* Malformed. */
    const char *bad[] = {
        "", " ", "[", "]", "{", "}", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{1: 2}", "{'a': 1}", "nul", "tru", "True", "NaN", "-Infinity",
        "Infinity", "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x10", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u0000\"", "\"a\tb\"", "\"\x01\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
        "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "[1] x", "1 2", "{\"a\":}", "[,1]", "/* c */ 1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = strlen(bad[i]);
        mt_json_doc *doc = NULL;
        mt_status st = parse_n(bad[i], n, NULL, &doc);
        if (st == MT_OK) fail_msg("accepted bad JSON #%zu '%s'", i, bad[i]);
        assert_null(doc);
    }
    /* The NUL after "[1]" (4 bytes) is trailing garbage. */
    mt_json_doc *doc = NULL;
    assert_int_equal(parse_n("[1]\0", 4, NULL, &doc), MT_PARSE);
    /* Out of range. */
    assert_int_equal(parse_s("1e999"), MT_RANGE);
    assert_int_equal(parse_s("-1e999"), MT_RANGE);
    assert_int_equal(parse_s("[1e400]"), MT_RANGE);
    char *big = malloc(2000);
    memset(big, '9', 1999);
    big[1999] = '\0';
    assert_int_equal(parse_s(big), MT_RANGE); /* a number token too long */
    free(big);
    /* Deep nesting: far past the limit, and exactly at it. */
    size_t deep = 1000000;
    char *d = malloc(deep * 2);
    memset(d, '[', deep);
    memset(d + deep, ']', deep);
    assert_int_equal(parse_n(d, deep * 2, NULL, &doc), MT_RANGE);
    mt_json_limits lim = mt__json_default_limits();
    lim.max_bytes = deep * 2;
    assert_int_equal(parse_n(d, deep * 2, &lim, &doc), MT_RANGE);
    size_t at = lim.max_depth;
    memcpy(d + at, d + deep, at); /* "[[...]]" with max_depth levels */
    assert_int_equal(parse_n(d, 2 * at, &lim, &doc), MT_OK);
    mt__json_free(doc);
    d[0] = '{';
    assert_int_equal(parse_n(d, 2 * at, &lim, &doc), MT_PARSE);
    memset(d, '{', deep);
    assert_int_equal(parse_n(d, deep, &lim, &doc), MT_PARSE); /* '{' needs a key */
    for (size_t i = 0; i < 1000; i++) memcpy(d + 5 * i, "{\"a\":", 5);
    assert_int_equal(parse_n(d, 5000, &lim, &doc), MT_RANGE);
    free(d);
    /* Too many values; too many bytes. */
    size_t nv = 300000;
    char *many = malloc(nv * 2 + 2);
    many[0] = '[';
    for (size_t i = 0; i < nv; i++) many[1 + 2 * i] = '0', many[2 + 2 * i] = ',';
    many[2 * nv] = ']';
    lim = mt__json_default_limits();
    lim.max_bytes = nv * 2 + 1;
    assert_int_equal(parse_n(many, nv * 2 + 1, &lim, &doc), MT_RANGE);
    lim.max_nodes = nv + 1;
    assert_int_equal(parse_n(many, nv * 2 + 1, &lim, &doc), MT_OK);
    assert_int_equal(mt__json_root(doc)->count, nv);
    mt__json_free(doc);
    assert_int_equal(parse_n(many, nv * 2 + 1, NULL, &doc), MT_RANGE); /* over the default 1 MiB? no: over 100000 nodes */
    free(many);
    /* Every proper prefix of a valid document fails cleanly (and never reads past it). */
    const char *full = "{\"input\": [\"cuda\", \"conv2d_nchw.cuda\", [[\"TENSOR\", [1, 3, 224, 224], \"float32\"]], {}], "
                       "\"s\": \"\\u00e9\\ud83d\\ude00\\\"\", \"n\": -1.5e-3, \"t\": true, \"z\": null}";
    size_t fl = strlen(full);
    for (size_t n = 0; n < fl; n++) {
        mt_status st = parse_n(full, n, NULL, &doc);
        if (st == MT_OK) fail_msg("accepted a prefix of %zu bytes", n);
    }
    assert_int_equal(parse_n(full, fl, NULL, &doc), MT_OK);
    mt__json_free(doc);
    /* Extreme limits. */
    lim = mt__json_default_limits();
    lim.max_depth = SIZE_MAX;
    assert_int_equal(parse_n("[[1]]", 5, &lim, &doc), MT_OK);
    mt__json_free(doc);
    lim.max_nodes = 0;
    assert_int_equal(parse_n("1", 1, &lim, &doc), MT_RANGE);
    lim = mt__json_default_limits();
    lim.max_bytes = 3;
    assert_int_equal(parse_n("[1]", 3, &lim, &doc), MT_OK);
    mt__json_free(doc);
    assert_int_equal(parse_n("[10]", 4, &lim, &doc), MT_RANGE);
    /* NULL handling. */
    assert_int_equal(mt__json_parse(NULL, 5, NULL, &doc, NULL, 0), MT_INVALID_ARG);
    assert_null(mt__json_get(NULL, "a"));
    assert_null(mt__json_at(NULL, 0));
    assert_false(mt__json_int(NULL, 0, 1, NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_basic),
        cmocka_unit_test(test_json_hostile),
        cmocka_unit_test(test_decode_lines),
        cmocka_unit_test(test_decode_mutations),
        cmocka_unit_test(test_import_hostile_files),
        cmocka_unit_test(test_import_tophub),
        cmocka_unit_test(test_export_round_trip),
        cmocka_unit_test(test_export_skips),
    };
    return cmocka_run_group_tests(tests, setup, scratch_remove);
}
