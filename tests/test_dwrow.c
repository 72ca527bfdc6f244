/* The depthwise template `dwrow` and the IR's shuffle that it builds on:
 *  - mt_ir_shuffle refuses operands of different lanes, widths OpenCL's
 *    shuffle2 lacks and mask entries outside the two operands, and a
 *    shuffle runs on the device lane for lane as its mask says;
 *  - dwrow accepts undilated depthwise layers with stride_w 1 or 2 and
 *    kernels up to 7x7, and nothing else;
 *  - on depthwise workloads that between them have rows that no vector width
 *    divides, no padding and padding wider than a vector reaches, strides 1
 *    and 2 along each axis, kernels from 1x3 to 7x7 and two images, every
 *    vector width with tiles of rows that overhang the output (stored row
 *    by row) and tiles that do not (stored as one run across the row ends,
 *    7-wide rows and rows narrower than a vector among them), and channel
 *    blocks that overhang the channels: the output against the
 *    double-accumulating CPU reference (normalised error), plain and with
 *    each fused epilogue in turn. Unwritten outputs fail (the output is
 *    poisoned first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtgpu/device.h"
#include "program.h"
#include "reference.h"
#include "template.h"

#include "fused_check.h"
#include "default_device.h"

static void test_shuffle_checks(void **state) {
    (void)state;
    mt_kernel *k = mt_kernel_new("s");
    assert_non_null(k);
    mt_expr *a4 = mt_ir_broadcast(k, mt_ir_float(k, 1.0f), 4), *b4 = mt_ir_broadcast(k, mt_ir_float(k, 2.0f), 4);
    mt_expr *a8 = mt_ir_broadcast(k, mt_ir_float(k, 1.0f), 8);
    mt_expr *a3 = mt_ir_broadcast(k, mt_ir_float(k, 1.0f), 3);
    const int ok[4] = {0, 7, 3, 4}, past[4] = {0, 8, 1, 2}, neg[4] = {0, -1, 1, 2};
    assert_non_null(mt_ir_shuffle(k, a4, b4, ok));
    assert_null(mt_ir_shuffle(k, a4, b4, past));
    assert_null(mt_ir_shuffle(k, a4, b4, neg));
    assert_null(mt_ir_shuffle(k, a4, a8, ok));
    assert_null(mt_ir_shuffle(k, a3, a3, ok));
    assert_null(mt_ir_shuffle(k, mt_ir_int(k, 1), mt_ir_int(k, 2), ok));
    mt_kernel_free(k);
}

/* Runs the shuffle test kernel built from `src` and checks its output. */
static void run_shuffle_source(const char *src, const int mask[8]) {
    char err[1024];
    mt_program *prog = NULL;
    mt_status st = mt_program_build_source(device, src, "shuffle_test", &prog, err, sizeof err);
    if (st != MT_OK) fail_msg("compile failed: %s", err);
    float host[16], got[16];
    for (int i = 0; i < 16; i++) host[i] = (float)(100 + i);
    for (int i = 0; i < 16; i++) got[i] = -1.0f;
    mt_dbuf *bi = NULL, *bo = NULL;
    assert_int_equal(mt_dbuf_alloc(device, sizeof host, &bi), MT_OK);
    assert_int_equal(mt_dbuf_alloc(device, sizeof got, &bo), MT_OK);
    assert_int_equal(mt_dbuf_write(device, bi, 0, host, sizeof host), MT_OK);
    assert_int_equal(mt_dbuf_write(device, bo, 0, got, sizeof got), MT_OK);
    mt_dbuf *args[2] = {bi, bo};
    const int64_t one[3] = {1, 1, 1};
    double ms = 0;
    assert_int_equal(mt_program_run(device, prog, args, 2, one, one, 0, 1, &ms, err, sizeof err), MT_OK);
    assert_int_equal(mt_dbuf_read(device, bo, 0, got, sizeof got), MT_OK);
    for (int l = 0; l < 8; l++) {
        assert_true(got[l] == host[mask[l]]);
        assert_true(got[8 + l] == host[(mask[l] + 8) % 16]);
    }
    mt_program_free(prog);
    mt_dbuf_free(bi);
    mt_dbuf_free(bo);
}

/* out[0..16) = shuffle(in[0..8), in[8..16), mask) and its reverse pairing,
 * run on the device: as printed (clang's __builtin_shufflevector where the
 * compiler has it), and through OpenCL's shuffle2, the printed source's
 * form for other compilers. */
static void test_shuffle_runs(void **state) {
    (void)state;
    skip_without_device();
    if (mt_device_get_info(device)->backend != MT_BACKEND_OPENCL) {
        print_message("skipped: the device's language is not OpenCL C (CUDA prints shuffles lane by lane)\n");
        skip();
    }
    mt_kernel *k = mt_kernel_new("shuffle_test");
    assert_non_null(k);
    mt_buffer *in = mt_ir_param(k, "in", 16, 1), *out = mt_ir_param(k, "out", 16, 0);
    const int mask[8] = {15, 0, 9, 1, 8, 7, 2, 14};
    mt_expr *a = mt_ir_load_vec(k, in, mt_ir_int(k, 0), 8), *b = mt_ir_load_vec(k, in, mt_ir_int(k, 8), 8);
    mt_stmt *s0 = mt_ir_store_vec(k, out, mt_ir_int(k, 0), mt_ir_shuffle(k, a, b, mask));
    mt_stmt *s1 = mt_ir_store_vec(k, out, mt_ir_int(k, 8), mt_ir_shuffle(k, b, a, mask));
    mt_var *g = mt_ir_var(k, "g", MT_TYPE_INT);
    k->body = mt_ir_for(k, g, 1, MT_LOOP_BLOCK, 0, mt_ir_seq2(k, s0, s1));
    assert_non_null(k->body);
    char err[1024];
    char *src = NULL;
    assert_int_equal(mt_kernel_print(k, MT_LANG_OPENCL, &src, err, sizeof err), MT_OK);
    mt_kernel_free(k);
    assert_non_null(strstr(src, "MT_SHUFFLE2("));
    run_shuffle_source(src, mask);
    static const char library[] = "#define MT_SHUFFLE2(a, b, n, ...) shuffle2(a, b, (uint##n)(__VA_ARGS__))\n";
    char *both = malloc(sizeof library + strlen(src));
    assert_non_null(both);
    memcpy(both, library, sizeof library - 1);
    memcpy(both + sizeof library - 1, src, strlen(src) + 1);
    run_shuffle_source(both, mask);
    free(both);
    free(src);
}

static void test_accepts(void **state) {
    (void)state;
    const mt_template *t = mt_template_find("dwrow");
    assert_non_null(t);
    static const char *const yes[] = {"n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1,groups=16", "n=1,c=24,h=15,w=15,k=24,r=3,s=3,stride=2,pad=1,groups=24",
                                      "n=2,c=4,h=9,w=9,k=4,r=7,s=7,pad=3,groups=4", "n=1,c=3,h=10,w=17,k=3,r=3,s=3,stride=3x1,pad=1,groups=3"};
    static const char *const no[] = {"n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1", "n=1,c=16,h=12,w=12,k=32,r=3,s=3,pad=1,groups=4",
                                     "n=1,c=8,h=16,w=16,k=8,r=3,s=3,pad=2,dilation=2,groups=8", "n=1,c=8,h=17,w=17,k=8,r=3,s=3,stride=3,pad=1,groups=8",
                                     "n=1,c=8,h=20,w=20,k=8,r=9,s=9,pad=4,groups=8", "n=1,c=8,h=4,w=400,k=8,r=3,s=3,pad=1,groups=8"};
    mt_workload wl;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_int_equal(mt_workload_parse(yes[i], &wl, NULL, 0), MT_OK);
        assert_true(mt_template_accepts(t, &wl));
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_int_equal(mt_workload_parse(no[i], &wl, NULL, 0), MT_OK);
        assert_false(mt_template_accepts(t, &wl));
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_UNSUPPORTED);
    }
}

/* The workloads: see the file's comment. */
static const char *const workloads[] = {
    "n=1,c=16,h=14,w=14,k=16,r=3,s=3,pad=1,groups=16",          /* the harness's */
    "n=1,c=24,h=15,w=15,k=24,r=3,s=3,stride=2,pad=1,groups=24", /* the harness's stride 2 */
    "n=2,c=6,h=9,w=37,k=6,r=3,s=3,pad=1,groups=6",              /* two images, a row no width divides */
    "n=1,c=5,h=8,w=21,k=5,r=5,s=5,stride=2,pad=2,groups=5",     /* 5x5 stride 2: three row vectors per tap */
    "n=1,c=4,h=7,w=7,k=4,r=3,s=3,groups=4",                     /* no padding */
    "n=1,c=3,h=10,w=17,k=3,r=3,s=3,stride=2x1,pad=1,groups=3",  /* stride along rows only */
    "n=1,c=3,h=9,w=20,k=3,r=3,s=3,stride=1x2,pad=1,groups=3",   /* stride along columns only */
    "n=1,c=8,h=9,w=9,k=8,r=7,s=7,pad=3,groups=8",               /* 7x7, padding past a 4-lane vector */
    "n=1,c=4,h=6,w=13,k=4,r=1,s=3,stride=2,pad=0x1,groups=4",   /* 1x3, padding on one axis */
    "n=1,c=5,h=7,w=7,k=5,r=3,s=3,pad=1,groups=5",               /* 7 rows of 7 stored as one run */
    "n=1,c=6,h=4,w=3,k=6,r=3,s=3,pad=1,groups=6",               /* rows narrower than a vector: runs across 2-5 rows */
};
#define NWORKLOADS (int)(sizeof workloads / sizeof workloads[0])

static void run_workload(void **state) {
    const char *text = *state;
    skip_without_device();
    fused_case_data c;
    fused_case_open(&c, device, "dwrow", text, 17);
    /* Every option of vec; of reg_y and chan the first and the last. */
    int kv = -1, ky = -1, kc = -1;
    for (int i = 0; i < c.sp.nknobs; i++) {
        if (!strcmp(c.sp.knobs[i].name, "vec")) kv = i;
        if (!strcmp(c.sp.knobs[i].name, "reg_y")) ky = i;
        if (!strcmp(c.sp.knobs[i].name, "chan")) kc = i;
    }
    assert_true(kv >= 0 && ky >= 0 && kc >= 0 && c.sp.nknobs == 3);
    int tested = 0, turn = 0;
    double worst = 0;
    for (int ov = 0; ov < c.sp.knobs[kv].noptions; ov++)
        for (int iy = 0; iy < 2; iy++)
            for (int ic = 0; ic < 2; ic++) {
                const int oy = iy == 0 ? 0 : c.sp.knobs[ky].noptions - 1;
                const int oc = ic == 0 ? 0 : c.sp.knobs[kc].noptions - 1;
                mt_config cfg = {.nknobs = c.sp.nknobs};
                cfg.choice[kv] = ov, cfg.choice[ky] = oy, cfg.choice[kc] = oc;
                char what[512];
                int n = snprintf(what, sizeof what, "%s ", text);
                mt_config_format(&c.sp, &cfg, what + n, sizeof what - (size_t)n);
                if (fused_case_run(&c, device, &cfg, &fused_epilogues[turn % FUSED_NEPI], 1e-5, what, &worst)) tested++, turn++;
            }
    print_message("  %s: %d configs, largest normalised error %.2g\n", text, tested, worst);
    assert_true(tested >= c.sp.knobs[kv].noptions);
    fused_case_close(&c);
}

int main(void) {
    static struct CMUnitTest tests[NWORKLOADS + 3];
    static char names[NWORKLOADS][160];
    int n = 0;
    tests[n++] = (struct CMUnitTest){.name = "shuffle_checks", .test_func = test_shuffle_checks};
    tests[n++] = (struct CMUnitTest){.name = "shuffle_runs", .test_func = test_shuffle_runs};
    tests[n++] = (struct CMUnitTest){.name = "accepts", .test_func = test_accepts};
    for (int w = 0; w < NWORKLOADS; w++) {
        snprintf(names[w], sizeof names[w], "dwrow/%s", workloads[w]);
        tests[n++] = (struct CMUnitTest){.name = names[w], .test_func = run_workload, .initial_state = (void *)workloads[w]};
    }
    return _cmocka_run_group_tests("dwrow", tests, (size_t)n, default_device_open, default_device_close);
}
