/* mt_workload: parsing, validation, canonical form, derived sizes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mtgpu/workload.h"

static int wl_equal(const mt_workload *a, const mt_workload *b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k && a->r == b->r && a->s == b->s &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h && a->pad_w == b->pad_w &&
           a->dil_h == b->dil_h && a->dil_w == b->dil_w && a->groups == b->groups;
}

static mt_workload parse_ok(const char *text) {
    mt_workload wl;
    char err[256] = "";
    mt_status st = mt_workload_parse(text, &wl, err, sizeof err);
    if (st != MT_OK) fail_msg("parse '%s' failed: %s (%s)", text, mt_status_name(st), err);
    return wl;
}

static void test_defaults(void **state) {
    (void)state;
    mt_workload wl = parse_ok("c=64,h=56,w=56,k=64,r=3,s=3");
    assert_int_equal(wl.n, 1);
    assert_int_equal(wl.c, 64);
    assert_int_equal(wl.h, 56);
    assert_int_equal(wl.w, 56);
    assert_int_equal(wl.k, 64);
    assert_int_equal(wl.r, 3);
    assert_int_equal(wl.s, 3);
    assert_int_equal(wl.stride_h, 1);
    assert_int_equal(wl.stride_w, 1);
    assert_int_equal(wl.pad_h, 0);
    assert_int_equal(wl.pad_w, 0);
    assert_int_equal(wl.dil_h, 1);
    assert_int_equal(wl.dil_w, 1);
    assert_int_equal(wl.groups, 1);
    assert_int_equal(mt_workload_out_h(&wl), 54);
    assert_int_equal(mt_workload_out_w(&wl), 54);
    assert_false(mt_workload_is_depthwise(&wl));
}

static void test_all_fields(void **state) {
    (void)state;
    mt_workload wl = parse_ok("n=2,c=64,h=56,w=57,k=128,r=3,s=5,stride=2,pad=1,dilation=2,groups=4");
    assert_int_equal(wl.n, 2);
    assert_int_equal(wl.w, 57);
    assert_int_equal(wl.k, 128);
    assert_int_equal(wl.s, 5);
    assert_int_equal(wl.stride_h, 2);
    assert_int_equal(wl.stride_w, 2);
    assert_int_equal(wl.pad_h, 1);
    assert_int_equal(wl.pad_w, 1);
    assert_int_equal(wl.dil_h, 2);
    assert_int_equal(wl.dil_w, 2);
    assert_int_equal(wl.groups, 4);
    /* (56 + 2 - 2*2 - 1) / 2 + 1 = 27; (57 + 2 - 2*4 - 1) / 2 + 1 = 26 */
    assert_int_equal(mt_workload_out_h(&wl), 27);
    assert_int_equal(mt_workload_out_w(&wl), 26);
    assert_int_equal(mt_workload_input_elems(&wl), 2LL * 64 * 56 * 57);
    assert_int_equal(mt_workload_weight_elems(&wl), 128LL * 16 * 3 * 5);
    assert_int_equal(mt_workload_output_elems(&wl), 2LL * 128 * 27 * 26);
    assert_true(mt_workload_flops(&wl) == 2.0 * 2 * 128 * 27 * 26 * 16 * 3 * 5);
}

static void test_pairs(void **state) {
    (void)state;
    mt_workload wl = parse_ok("c=3,h=224,w=224,k=64,r=7,s=1,pad=3x0,stride=1x2,dilation=2x1");
    assert_int_equal(wl.pad_h, 3);
    assert_int_equal(wl.pad_w, 0);
    assert_int_equal(wl.stride_h, 1);
    assert_int_equal(wl.stride_w, 2);
    assert_int_equal(wl.dil_h, 2);
    assert_int_equal(wl.dil_w, 1);
    assert_int_equal(mt_workload_out_h(&wl), 224 + 6 - 13 + 1);
    assert_int_equal(mt_workload_out_w(&wl), (224 - 1) / 2 + 1);
    /* "dil" is accepted as a short form of "dilation". */
    mt_workload d = parse_ok("c=3,h=9,w=9,k=1,r=3,s=3,dil=2");
    assert_int_equal(d.dil_h, 2);
    assert_int_equal(d.dil_w, 2);
    /* Leading zeros are still decimal. */
    mt_workload z = parse_ok("c=0064,h=08,w=09,k=1,r=1,s=1");
    assert_int_equal(z.c, 64);
    assert_int_equal(z.h, 8);
    assert_int_equal(z.w, 9);
}

static void test_key_order(void **state) {
    (void)state;
    mt_workload a = parse_ok("n=1,c=32,h=28,w=28,k=32,r=3,s=3,stride=1,pad=1,groups=32");
    mt_workload b = parse_ok("groups=32,pad=1,s=3,r=3,k=32,w=28,h=28,c=32");
    assert_true(wl_equal(&a, &b));
    assert_true(mt_workload_is_depthwise(&a));
    assert_false(mt_workload_is_pointwise(&a));
}

/* 1x1, stride 1, no padding (dilation means nothing there); groups do not matter. */
static void test_pointwise(void **state) {
    (void)state;
    static const struct {
        const char *text;
        int pointwise;
    } cases[] = {
        {"c=64,h=7,w=7,k=256,r=1,s=1", 1},
        {"c=64,h=7,w=7,k=256,r=1,s=1,dilation=2,groups=4", 1},
        {"c=64,h=14,w=14,k=256,r=1,s=1,stride=2", 0},
        {"c=64,h=14,w=14,k=256,r=1,s=1,stride=1x2", 0},
        {"c=64,h=7,w=7,k=256,r=1,s=1,pad=0x1", 0},
        {"c=64,h=7,w=7,k=256,r=1,s=3,pad=0x1", 0},
        {"c=64,h=7,w=7,k=256,r=3,s=1,pad=1x0", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_workload w = parse_ok(cases[i].text);
        if (mt_workload_is_pointwise(&w) != cases[i].pointwise) fail_msg("%s: pointwise %d, want %d", cases[i].text, !cases[i].pointwise, cases[i].pointwise);
    }
}

static void test_format_canonical(void **state) {
    (void)state;
    char buf[256];
    mt_workload wl = parse_ok("s=3,r=3,k=64,w=56,h=56,c=64");
    int n = mt_workload_format(&wl, buf, sizeof buf);
    assert_string_equal(buf, "n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=0");
    assert_int_equal(n, (int)strlen(buf));
    wl = parse_ok("c=8,h=9,w=10,k=4,r=3,s=1,pad=1x0,stride=2,dil=1x2,groups=2,n=3");
    mt_workload_format(&wl, buf, sizeof buf);
    assert_string_equal(buf, "n=3,c=8,h=9,w=10,k=4,r=3,s=1,stride=2,pad=1x0,dilation=1x2,groups=2");
    /* Truncation behaves like snprintf. */
    char small[8];
    n = mt_workload_format(&wl, small, sizeof small);
    assert_int_equal(n, (int)strlen(buf));
    assert_string_equal(small, "n=3,c=8");
    assert_int_equal(mt_workload_format(&wl, NULL, 0), n);
}

static void test_round_trip(void **state) {
    (void)state;
    static const char *texts[] = {
        "c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3",
        "n=8,c=256,h=14,w=14,k=256,r=3,s=3,pad=1",
        "c=32,h=112,w=112,k=32,r=3,s=3,pad=1,groups=32",
        "c=64,h=56,w=56,k=128,r=1,s=1,stride=2",
        "c=16,h=20,w=30,k=8,r=3,s=5,stride=1x2,pad=0x2,dilation=3x1,groups=8",
        "n=1000000,c=1,h=1,w=1,k=1,r=1,s=1",
        "c=1,h=1000000,w=1,k=1,r=1,s=1,pad=1000000x0,dilation=1000000",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        mt_workload a = parse_ok(texts[i]);
        char buf[256];
        int n = mt_workload_format(&a, buf, sizeof buf);
        assert_true(n > 0 && n < (int)sizeof buf);
        mt_workload b = parse_ok(buf);
        assert_true(wl_equal(&a, &b));
        char buf2[256];
        mt_workload_format(&b, buf2, sizeof buf2);
        assert_string_equal(buf, buf2);
        assert_int_equal(mt_workload_validate(&a, NULL, 0), MT_OK);
    }
}

typedef struct bad_case {
    const char *text;
    mt_status status;
    const char *needle; /* must appear in the message */
} bad_case;

static void check_bad(const bad_case *bc) {
    mt_workload wl;
    memset(&wl, 0x5a, sizeof wl);
    mt_workload before = wl;
    char err[256] = "";
    mt_status st = mt_workload_parse(bc->text, &wl, err, sizeof err);
    if (st != bc->status)
        fail_msg("'%.60s': expected %s, got %s (%s)", bc->text, mt_status_name(bc->status), mt_status_name(st), err);
    if (!strstr(err, bc->needle)) fail_msg("'%.60s': message '%s' lacks '%s'", bc->text, err, bc->needle);
    assert_memory_equal(&wl, &before, sizeof wl); /* untouched on error */
}

static void test_hostile(void **state) {
    (void)state;
    static const bad_case cases[] = {
        {"", MT_PARSE, "empty"},
        {"c=64,h=56,w=56,k=64,r=3", MT_PARSE, "missing field 's'"},
        {"h=56,w=56,k=64,r=3,s=3", MT_PARSE, "missing field 'c'"},
        {"c=64,w=56,k=64,r=3,s=3", MT_PARSE, "'h'"},
        {"n=1,pad=1", MT_PARSE, "missing field"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,foo=1", MT_PARSE, "foo"},
        {"C=64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "unknown field 'C'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,c=64", MT_PARSE, "'c' given twice"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=1,pad=1", MT_PARSE, "'pad' given twice"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,dilation=1,dil=1", MT_PARSE, "twice"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,", MT_PARSE, "trailing comma"},
        {",c=64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "key=value"},
        {"c=64,,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "key=value"},
        {"c=64,h=56,w=56,k=64,r=3,s", MT_PARSE, "key=value"},
        {"=64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "unknown field"},
        {"c=,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c==64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64=,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=abc,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=6 4,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c= 64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64 ,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=+64,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64.0,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=0x40,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=-,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64\xff,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64,h=56\x01,w=56,k=64,r=3,s=3", MT_PARSE, "'h'"},
        {"\x01\x02\x03", MT_PARSE, "key=value"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,stride=1x2x3", MT_PARSE, "'stride'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=x", MT_PARSE, "'pad'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=1x", MT_PARSE, "'pad'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,stride=x2", MT_PARSE, "'stride'"},
        {"c=64x2,h=56,w=56,k=64,r=3,s=3", MT_PARSE, "'c'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,groups=2x2", MT_PARSE, "'groups'"},
        /* impossible sizes */
        {"c=0,h=56,w=56,k=64,r=3,s=3", MT_RANGE, "'c'"},
        {"c=-1,h=56,w=56,k=64,r=3,s=3", MT_RANGE, "'c'"},
        {"c=64,h=56,w=56,k=0,r=3,s=3", MT_RANGE, "'k'"},
        {"n=0,c=64,h=56,w=56,k=64,r=3,s=3", MT_RANGE, "'n'"},
        {"c=64,h=-56,w=56,k=64,r=3,s=3", MT_RANGE, "'h'"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=-1", MT_RANGE, "pad"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,pad=0x-1", MT_RANGE, "pad (w)"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,stride=0", MT_RANGE, "stride"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,stride=1x0", MT_RANGE, "stride (w)"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,dilation=0", MT_RANGE, "dilation"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,groups=0", MT_RANGE, "groups"},
        {"c=64,h=56,w=56,k=64,r=3,s=3,groups=-2", MT_RANGE, "groups"},
        {"c=6,h=5,w=5,k=4,r=1,s=1,groups=4", MT_RANGE, "'c'"},
        {"c=8,h=5,w=5,k=6,r=1,s=1,groups=4", MT_RANGE, "'k'"},
        {"c=3,h=5,w=5,k=1,r=7,s=3", MT_RANGE, "'r'"},
        {"c=3,h=5,w=5,k=1,r=3,s=7", MT_RANGE, "'s'"},
        {"c=3,h=5,w=5,k=1,r=3,s=3,dilation=3", MT_RANGE, "'r'"},
        {"c=3,h=5,w=5,k=1,r=3,s=3,dilation=1x3", MT_RANGE, "'s'"},
        /* huge numbers */
        {"c=1000001,h=1,w=1,k=1,r=1,s=1", MT_RANGE, "'c'"},
        {"c=99999999999999999999999999,h=1,w=1,k=1,r=1,s=1", MT_RANGE, "'c'"},
        {"c=-99999999999999999999999999,h=1,w=1,k=1,r=1,s=1", MT_RANGE, "'c'"},
        {"c=1,h=1,w=1,k=1,r=1,s=1,pad=2147483648", MT_RANGE, "'pad'"},
        {"c=1,h=1,w=1,k=1,r=1,s=1,stride=1x4294967297", MT_RANGE, "'stride'"},
        /* element counts at or beyond 2^31 */
        {"n=1000,c=1000,h=1000,w=1000,k=1,r=1,s=1", MT_RANGE, "input"},
        {"n=1000000,c=1000000,h=1000000,w=1000000,k=1000000,r=1,s=1", MT_RANGE, "input"},
        {"n=2,c=1024,h=1024,w=1024,k=1,r=1,s=1", MT_RANGE, "input"},
        {"c=100000,h=1,w=1,k=100000,r=1,s=1", MT_RANGE, "weights"},
        {"c=1,h=1,w=1,k=1000000,r=1000000,s=1000000,pad=1000000", MT_RANGE, "weights"},
        {"n=1000,c=1,h=1,w=1,k=1000,r=1,s=1,pad=1000", MT_RANGE, "output"},
        {"c=1,h=1,w=1,k=1,r=1,s=1,pad=1000000", MT_RANGE, "elements"},
        {"n=1000000,c=1000000,h=1000000,w=1000000,k=1000000,r=1000000,s=1000000,pad=1000000,dilation=1000000", MT_RANGE, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_bad(&cases[i]);
}

static void test_just_below_limit(void **state) {
    (void)state;
    /* 2^31 - 2 = 126 * 341 * 151 * 331 input elements is accepted (2^31 - 1
     * is prime, so no workload within the field limits has exactly that many);
     * 2^31 is not. */
    mt_workload wl = parse_ok("n=126,c=341,h=151,w=331,k=1,r=1,s=1");
    assert_int_equal(mt_workload_input_elems(&wl), 2147483646LL);
    bad_case over = {"n=128,c=256,h=256,w=256,k=1,r=1,s=1", MT_RANGE, "input"};
    check_bad(&over);
}

static void test_long_strings(void **state) {
    (void)state;
    const size_t big = 1 << 20;
    char *s = malloc(big + 64);
    assert_non_null(s);
    /* one enormous key */
    memset(s, 'a', big);
    strcpy(s + big, "=1");
    bad_case k = {s, MT_PARSE, "unknown field"};
    check_bad(&k);
    /* one enormous value */
    strcpy(s, "c=");
    memset(s + 2, '7', big);
    strcpy(s + 2 + big, ",h=1,w=1,k=1,r=1,s=1");
    bad_case v = {s, MT_RANGE, "'c'"};
    check_bad(&v);
    /* no '=' at all */
    memset(s, 'x', big);
    s[big] = '\0';
    bad_case g = {s, MT_PARSE, "key=value"};
    check_bad(&g);
    /* many commas */
    memset(s, ',', big);
    s[big] = '\0';
    bad_case c = {s, MT_PARSE, "key=value"};
    check_bad(&c);
    /* a valid workload followed by a long tail of garbage */
    strcpy(s, "c=1,h=1,w=1,k=1,r=1,s=1,");
    size_t at = strlen(s);
    memset(s + at, 'z', big - at);
    s[big] = '\0';
    bad_case t = {s, MT_PARSE, "key=value"};
    check_bad(&t);
    free(s);
}

static void test_err_buffer(void **state) {
    (void)state;
    mt_workload wl;
    /* NULL or tiny error buffers are fine. */
    assert_int_equal(mt_workload_parse("c=1", &wl, NULL, 0), MT_PARSE);
    char tiny[4] = "zzz";
    assert_int_equal(mt_workload_parse("c=1", &wl, tiny, 1), MT_PARSE);
    assert_int_equal(tiny[0], '\0');
    char small[12];
    assert_int_equal(mt_workload_parse("c=1,h=1,w=1,k=1,r=1,s=1,bogus=1", &wl, small, sizeof small), MT_PARSE);
    assert_int_equal(strlen(small), sizeof small - 1);
    char err[128];
    assert_int_equal(mt_workload_parse(NULL, &wl, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_workload_parse("c=1,h=1,w=1,k=1,r=1,s=1", NULL, err, sizeof err), MT_INVALID_ARG);
}

static void test_validate_direct(void **state) {
    (void)state;
    char err[256];
    mt_workload wl = parse_ok("c=4,h=8,w=8,k=4,r=3,s=3,pad=1");
    assert_int_equal(mt_workload_validate(&wl, err, sizeof err), MT_OK);
    assert_int_equal(mt_workload_validate(NULL, err, sizeof err), MT_INVALID_ARG);
    mt_workload bad = wl;
    bad.pad_h = -3;
    assert_int_equal(mt_workload_validate(&bad, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "pad (h)"));
    bad = wl;
    bad.h = 2000000000;
    assert_int_equal(mt_workload_validate(&bad, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "'h'"));
    bad = wl;
    bad.groups = 3;
    assert_int_equal(mt_workload_validate(&bad, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "groups"));
    /* Every field at its maximum: the element-count products must not overflow. */
    mt_workload huge = {1000000, 1000000, 1000000, 1000000, 1000000, 1000000, 1000000, 1, 1, 1000000, 1000000, 1, 1, 1};
    assert_int_equal(mt_workload_validate(&huge, err, sizeof err), MT_RANGE);
    assert_non_null(strstr(err, "elements"));
}

/* A strided 1x1 convolution without padding and the stride-1 one it equals. */
static void test_unit_stride(void **state) {
    (void)state;
    mt_workload u = {0};
    mt_workload wl = parse_ok("n=2,c=64,h=15,w=14,k=32,r=1,s=1,stride=2");
    assert_int_equal(mt_workload_unit_stride(&wl, &u), 1);
    assert_int_equal(u.n, 2);
    assert_int_equal(u.c, 64);
    assert_int_equal(u.k, 32);
    assert_int_equal(u.h, 8); /* rows 0, 2, ..., 14 */
    assert_int_equal(u.w, 7);
    assert_int_equal(u.stride_h, 1);
    assert_int_equal(u.stride_w, 1);
    assert_int_equal(mt_workload_out_h(&u), mt_workload_out_h(&wl));
    assert_int_equal(mt_workload_out_w(&u), mt_workload_out_w(&wl));
    assert_true(mt_workload_flops(&u) == mt_workload_flops(&wl));
    /* One axis strided is enough. */
    wl = parse_ok("c=8,h=9,w=9,k=8,r=1,s=1,stride=1x3");
    assert_int_equal(mt_workload_unit_stride(&wl, &u), 1);
    assert_int_equal(u.h, 9);
    assert_int_equal(u.w, 3);
    /* Not equal to a dense stride-1 convolution, or already one: untouched. */
    const char *others[] = {"c=8,h=9,w=9,k=8,r=1,s=1,stride=2,pad=1", "c=8,h=9,w=9,k=8,r=3,s=3,stride=2",
                            "c=8,h=9,w=9,k=8,r=1,s=1", "c=8,h=9,w=9,k=8,r=1,s=3,stride=2"};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++) {
        wl = parse_ok(others[i]);
        mt_workload before = u;
        assert_int_equal(mt_workload_unit_stride(&wl, &u), 0);
        assert_memory_equal(&u, &before, sizeof u);
    }
    assert_int_equal(mt_workload_unit_stride(NULL, &u), 0);
    assert_int_equal(mt_workload_unit_stride(&wl, NULL), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_all_fields),       cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_key_order),       cmocka_unit_test(test_pointwise),        cmocka_unit_test(test_format_canonical),
        cmocka_unit_test(test_round_trip),      cmocka_unit_test(test_hostile),          cmocka_unit_test(test_just_below_limit),
        cmocka_unit_test(test_long_strings),    cmocka_unit_test(test_err_buffer),       cmocka_unit_test(test_validate_direct),
        cmocka_unit_test(test_unit_stride),
    };
    return cmocka_run_group_tests_name("workload", tests, NULL, NULL);
}
