/* mt_space / mt_config: option enumeration, indexing, neighbours, text form, rng. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "space.h"

static const int *opt(const mt_knob *k, int o) { return k->values + (size_t)o * (size_t)k->nparts; }

static int cfg_equal(const mt_config *a, const mt_config *b) {
    if (a->nknobs != b->nknobs) return 0;
    for (int i = 0; i < a->nknobs; i++)
        if (a->choice[i] != b->choice[i]) return 0;
    return 1;
}

static int is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

/* Brute force: the number of nparts-tuples of positive ints multiplying to extent. */
static int brute_factor_count(int extent, int nparts) {
    if (nparts == 1) return 1;
    int count = 0;
    for (int d = 1; d <= extent; d++)
        if (extent % d == 0) count += brute_factor_count(extent / d, nparts - 1);
    return count;
}

static void test_split_factor_order(void **state) {
    (void)state;
    mt_space sp;
    mt_space_init(&sp, "direct");
    assert_string_equal(sp.template_name, "direct");
    assert_int_equal(mt_space_add_split(&sp, "tile", 8, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    const mt_knob *k = &sp.knobs[0];
    assert_int_equal(k->kind, MT_KNOB_SPLIT);
    assert_int_equal(k->nparts, 2);
    assert_int_equal(k->noptions, 4);
    /* AutoTVM's order: the inner part ascends, the outer part is derived. */
    static const int want[4][2] = {{8, 1}, {4, 2}, {2, 4}, {1, 8}};
    for (int o = 0; o < 4; o++) {
        assert_int_equal(opt(k, o)[0], want[o][0]);
        assert_int_equal(opt(k, o)[1], want[o][1]);
    }
    /* 3 parts: the last part varies slowest, the middle one fastest. */
    assert_int_equal(mt_space_add_split(&sp, "t3", 4, 3, MT_SPLIT_FACTOR, 0), MT_OK);
    k = &sp.knobs[1];
    static const int want3[6][3] = {{4, 1, 1}, {2, 2, 1}, {1, 4, 1}, {2, 1, 2}, {1, 2, 2}, {1, 1, 4}};
    assert_int_equal(k->noptions, 6);
    for (int o = 0; o < 6; o++)
        for (int j = 0; j < 3; j++) assert_int_equal(opt(k, o)[j], want3[o][j]);
    mt_space_free(&sp);
    assert_int_equal(sp.nknobs, 0);
    mt_space_free(&sp); /* twice is harmless */
}

static void test_split_factor_counts(void **state) {
    (void)state;
    static const int extents[] = {1, 2, 7, 12, 16, 56, 64, 96, 224, 360, 1000};
    for (size_t e = 0; e < sizeof extents / sizeof extents[0]; e++) {
        for (int parts = 1; parts <= MT_MAX_SPLIT_PARTS; parts++) {
            mt_space sp;
            mt_space_init(&sp, "t");
            assert_int_equal(mt_space_add_split(&sp, "x", extents[e], parts, MT_SPLIT_FACTOR, 0), MT_OK);
            const mt_knob *k = &sp.knobs[0];
            assert_int_equal(k->noptions, brute_factor_count(extents[e], parts));
            for (int o = 0; o < k->noptions; o++) {
                long long prod = 1;
                for (int j = 0; j < parts; j++) {
                    assert_true(opt(k, o)[j] >= 1);
                    prod *= opt(k, o)[j];
                }
                assert_int_equal(prod, extents[e]);
                /* options are distinct */
                for (int p = 0; p < o; p++) assert_false(memcmp(opt(k, o), opt(k, p), sizeof(int) * (size_t)parts) == 0);
            }
            mt_space_free(&sp);
        }
    }
}

static void check_pow2(int extent, int parts, int max_inner, int expect_count) {
    mt_space sp;
    mt_space_init(&sp, "t");
    assert_int_equal(mt_space_add_split(&sp, "p", extent, parts, MT_SPLIT_POW2, max_inner), MT_OK);
    const mt_knob *k = &sp.knobs[0];
    long long limit = max_inner;
    if (max_inner <= 0)
        for (limit = 1; limit < extent; limit <<= 1) {}
    if (expect_count >= 0) assert_int_equal(k->noptions, expect_count);
    for (int o = 0; o < k->noptions; o++) {
        long long inner = 1;
        for (int j = 1; j < parts; j++) {
            assert_true(is_pow2(opt(k, o)[j]));
            inner *= opt(k, o)[j];
        }
        assert_true(inner <= limit);
        assert_int_equal(opt(k, o)[0], (extent + inner - 1) / inner);
        assert_true((long long)opt(k, o)[0] * inner >= extent);
        for (int p = 0; p < o; p++) assert_false(memcmp(opt(k, o), opt(k, p), sizeof(int) * (size_t)parts) == 0);
    }
    mt_space_free(&sp);
}

static void test_split_pow2(void **state) {
    (void)state;
    /* Inner exponents e1..em >= 0 with sum <= log2(limit): C(L + m, m) options. */
    check_pow2(10, 3, 0, 15); /* limit 16, L = 4, m = 2: C(6,2) */
    check_pow2(10, 3, 8, 10); /* L = 3: C(5,2) */
    check_pow2(10, 3, 6, 6);  /* products 1, 2, 4: C(4,2) */
    check_pow2(16, 2, 0, 5);  /* 1, 2, 4, 8, 16 */
    check_pow2(17, 2, 0, 6);  /* limit 32 */
    check_pow2(1, 4, 0, 1);   /* limit 1: all ones */
    check_pow2(7, 1, 0, 1);
    check_pow2(224, 4, 64, -1);
    check_pow2(1000000, 4, 0, -1);
    check_pow2(2147483647, 4, 0, -1); /* parts stay within int */
    /* Order: the inner part ascends. */
    mt_space sp;
    mt_space_init(&sp, "t");
    assert_int_equal(mt_space_add_split(&sp, "p", 6, 2, MT_SPLIT_POW2, 0), MT_OK);
    static const int want[4][2] = {{6, 1}, {3, 2}, {2, 4}, {1, 8}};
    assert_int_equal(sp.knobs[0].noptions, 4);
    for (int o = 0; o < 4; o++) {
        assert_int_equal(opt(&sp.knobs[0], o)[0], want[o][0]);
        assert_int_equal(opt(&sp.knobs[0], o)[1], want[o][1]);
    }
    mt_space_free(&sp);
}

static void test_enum(void **state) {
    (void)state;
    mt_space sp;
    mt_space_init(&sp, "t");
    int vals[] = {0, 1, 512, -3};
    assert_int_equal(mt_space_add_enum(&sp, "unroll", vals, 4), MT_OK);
    vals[0] = 99; /* the space keeps its own copy */
    assert_int_equal(sp.knobs[0].kind, MT_KNOB_ENUM);
    assert_int_equal(sp.knobs[0].nparts, 1);
    assert_int_equal(sp.knobs[0].noptions, 4);
    assert_int_equal(sp.knobs[0].values[0], 0);
    assert_int_equal(sp.knobs[0].values[3], -3);
    int dup[] = {1, 2, 1};
    assert_int_equal(mt_space_add_enum(&sp, "dup", dup, 3), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_enum(&sp, "none", dup, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_enum(&sp, "null", NULL, 2), MT_INVALID_ARG);
    assert_int_equal(sp.nknobs, 1);
    mt_space_free(&sp);
}

static void test_add_errors(void **state) {
    (void)state;
    mt_space sp;
    mt_space_init(&sp, "a_template_name_longer_than_16");
    assert_int_equal(strlen(sp.template_name), sizeof sp.template_name - 1);
    int v[] = {1, 2};
    assert_int_equal(mt_space_add_split(&sp, "", 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, NULL, 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "a,b", 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "a=b", 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "a b", 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "abcdefghijabcdefghijabcdefghijab", 8, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG); /* 32 chars */
    assert_int_equal(mt_space_add_split(&sp, "abcdefghijabcdefghijabcdefghija", 8, 2, MT_SPLIT_FACTOR, 0), MT_OK);         /* 31 chars */
    assert_int_equal(mt_space_add_split(&sp, "x", 0, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "x", -4, 2, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "x", 8, 0, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "x", 8, MT_MAX_SPLIT_PARTS + 1, MT_SPLIT_FACTOR, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "x", 8, 2, (mt_split_policy)7, 0), MT_INVALID_ARG);
    assert_int_equal(mt_space_add_split(&sp, "x", 8, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_enum(&sp, "x", v, 2), MT_INVALID_ARG); /* duplicate name */
    /* 2^6 3^3 5^2 7 11 13 17 split 4 ways has over four million options. */
    assert_int_equal(mt_space_add_split(&sp, "many", 735134400, 4, MT_SPLIT_FACTOR, 0), MT_RANGE);
    int *big = malloc(sizeof(int) * 100001);
    assert_non_null(big);
    for (int i = 0; i < 100001; i++) big[i] = i;
    assert_int_equal(mt_space_add_enum(&sp, "big", big, 100001), MT_RANGE);
    free(big);
    assert_int_equal(sp.nknobs, 2);
    /* Fill up to MT_MAX_KNOBS. */
    char name[16];
    for (int i = sp.nknobs; i < MT_MAX_KNOBS; i++) {
        snprintf(name, sizeof name, "e%d", i);
        assert_int_equal(mt_space_add_enum(&sp, name, v, 2), MT_OK);
    }
    assert_int_equal(mt_space_add_enum(&sp, "one_more", v, 2), MT_RANGE);
    assert_int_equal(mt_space_add_split(&sp, "one_more", 4, 2, MT_SPLIT_FACTOR, 0), MT_RANGE);
    assert_int_equal(sp.nknobs, MT_MAX_KNOBS);
    mt_space_free(&sp);
    /* Re-initialised spaces work again. */
    mt_space_init(&sp, "again");
    assert_int_equal(mt_space_add_enum(&sp, "x", v, 2), MT_OK);
    mt_space_free(&sp);
}

/* A small space like the direct template's: 3 splits and 2 enums. */
static void small_space(mt_space *sp) {
    mt_space_init(sp, "direct");
    int unroll[] = {0, 1};
    int step[] = {0, 512, 1500};
    assert_int_equal(mt_space_add_split(sp, "tile_f", 16, 3, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_y", 7, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_x", 10, 3, MT_SPLIT_POW2, 8), MT_OK);
    assert_int_equal(mt_space_add_enum(sp, "auto_unroll_max_step", step, 3), MT_OK);
    assert_int_equal(mt_space_add_enum(sp, "unroll_explicit", unroll, 2), MT_OK);
}

static void round_trip_one(const mt_space *sp, uint64_t i) {
    mt_config cfg, back;
    char text[512], err[256];
    assert_int_equal(mt_space_config_from_index(sp, i, &cfg), MT_OK);
    assert_int_equal(mt_space_check(sp, &cfg), MT_OK);
    assert_true(mt_space_config_index(sp, &cfg) == i);
    int n = mt_config_format(sp, &cfg, text, sizeof text);
    assert_true(n > 0 && n < (int)sizeof text);
    assert_int_equal(n, (int)strlen(text));
    mt_status st = mt_config_parse(sp, text, &back, err, sizeof err);
    if (st != MT_OK) fail_msg("parse '%s': %s", text, err);
    assert_true(cfg_equal(&cfg, &back));
}

static void test_index_round_trip(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    /* 15 * 2 * 10 * 3 * 2 */
    assert_true(mt_space_size(&sp) == 15 * 2 * 10 * 3 * 2);
    for (uint64_t i = 0; i < mt_space_size(&sp); i++) round_trip_one(&sp, i);
    /* first knob fastest */
    mt_config cfg;
    assert_int_equal(mt_space_config_from_index(&sp, 1, &cfg), MT_OK);
    assert_int_equal(cfg.nknobs, 5);
    assert_int_equal(cfg.choice[0], 1);
    assert_int_equal(cfg.choice[1], 0);
    assert_int_equal(mt_space_config_from_index(&sp, 15, &cfg), MT_OK);
    assert_int_equal(cfg.choice[0], 0);
    assert_int_equal(cfg.choice[1], 1);
    mt_config before = cfg;
    assert_int_equal(mt_space_config_from_index(&sp, mt_space_size(&sp), &cfg), MT_RANGE);
    assert_int_equal(mt_space_config_from_index(&sp, UINT64_MAX, &cfg), MT_RANGE);
    assert_true(cfg_equal(&cfg, &before));
    mt_space_free(&sp);

    /* The empty space has exactly one config, the empty one. */
    mt_space_init(&sp, "empty");
    assert_true(mt_space_size(&sp) == 1);
    assert_int_equal(mt_space_config_from_index(&sp, 0, &cfg), MT_OK);
    assert_int_equal(cfg.nknobs, 0);
    char text[8] = "zz";
    assert_int_equal(mt_config_format(&sp, &cfg, text, sizeof text), 0);
    assert_string_equal(text, "");
    assert_int_equal(mt_config_parse(&sp, "", &cfg, NULL, 0), MT_OK);
    mt_space_free(&sp);
}

static void big_space(mt_space *sp) {
    mt_space_init(sp, "big");
    assert_int_equal(mt_space_add_split(sp, "tile_f", 512, 4, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_y", 56, 4, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_x", 56, 4, MT_SPLIT_POW2, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_rc", 512, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_ry", 3, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_split(sp, "tile_rx", 3, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    int step[] = {0, 512, 1500};
    int unroll[] = {0, 1};
    assert_int_equal(mt_space_add_enum(sp, "auto_unroll_max_step", step, 3), MT_OK);
    assert_int_equal(mt_space_add_enum(sp, "unroll_explicit", unroll, 2), MT_OK);
}

static void test_big_space_samples(void **state) {
    (void)state;
    mt_space sp;
    big_space(&sp);
    uint64_t size = mt_space_size(&sp);
    assert_true(size > 100000000ULL && size < UINT64_MAX);
    uint64_t rng = 42;
    for (int t = 0; t < 2000; t++) round_trip_one(&sp, mt_rng_below(&rng, size));
    round_trip_one(&sp, 0);
    round_trip_one(&sp, size - 1);
    for (int t = 0; t < 2000; t++) {
        mt_config cfg;
        mt_space_random(&sp, &rng, &cfg);
        assert_int_equal(mt_space_check(&sp, &cfg), MT_OK);
        uint64_t i = mt_space_config_index(&sp, &cfg);
        assert_true(i < size);
        mt_config back;
        assert_int_equal(mt_space_config_from_index(&sp, i, &back), MT_OK);
        assert_true(cfg_equal(&cfg, &back));
    }
    mt_space_free(&sp);
}

static void test_size_saturates(void **state) {
    (void)state;
    mt_space sp;
    mt_space_init(&sp, "huge");
    char name[16];
    /* 16 knobs of 496 options: 496^16 is far beyond 2^64. */
    for (int i = 0; i < MT_MAX_KNOBS; i++) {
        snprintf(name, sizeof name, "k%d", i);
        assert_int_equal(mt_space_add_split(&sp, name, 1 << 30, 3, MT_SPLIT_FACTOR, 0), MT_OK);
    }
    assert_true(mt_space_size(&sp) == UINT64_MAX);
    mt_config cfg;
    for (int i = 0; i < MT_MAX_KNOBS; i++) cfg.choice[i] = sp.knobs[i].noptions - 1;
    cfg.nknobs = MT_MAX_KNOBS;
    assert_int_equal(mt_space_check(&sp, &cfg), MT_OK);
    assert_true(mt_space_config_index(&sp, &cfg) == UINT64_MAX); /* not representable */
    /* Small indices still decode and round-trip. */
    assert_int_equal(mt_space_config_from_index(&sp, 123456789, &cfg), MT_OK);
    assert_true(mt_space_config_index(&sp, &cfg) == 123456789);
    mt_space_free(&sp);
}

static void test_check(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    mt_config cfg;
    assert_int_equal(mt_space_config_from_index(&sp, 7, &cfg), MT_OK);
    mt_config bad = cfg;
    bad.choice[2] = -1;
    assert_int_equal(mt_space_check(&sp, &bad), MT_INVALID_CONFIG);
    assert_true(mt_space_config_index(&sp, &bad) == UINT64_MAX);
    bad = cfg;
    bad.choice[4] = sp.knobs[4].noptions;
    assert_int_equal(mt_space_check(&sp, &bad), MT_INVALID_CONFIG);
    bad = cfg;
    bad.nknobs = 4;
    assert_int_equal(mt_space_check(&sp, &bad), MT_INVALID_CONFIG);
    bad.nknobs = 6;
    assert_int_equal(mt_space_check(&sp, &bad), MT_INVALID_CONFIG);
    bad.nknobs = -1;
    assert_int_equal(mt_space_check(&sp, &bad), MT_INVALID_CONFIG);
    assert_int_equal(mt_space_check(&sp, NULL), MT_INVALID_ARG);
    char text[64] = "zz";
    bad = cfg;
    bad.choice[0] = 1000;
    assert_int_equal(mt_config_format(&sp, &bad, text, sizeof text), -1);
    assert_string_equal(text, "");
    assert_null(mt_config_get(&sp, &bad, "tile_f"));
    assert_int_equal(mt_space_neighbours(&sp, &bad, NULL, 0), 0);
    mt_space_free(&sp);
}

static void test_neighbours(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    int expect = 0;
    for (int i = 0; i < sp.nknobs; i++) expect += sp.knobs[i].noptions - 1;
    uint64_t rng = 7;
    mt_config *out = calloc((size_t)expect, sizeof *out);
    assert_non_null(out);
    for (int t = 0; t < 50; t++) {
        mt_config cfg;
        mt_space_random(&sp, &rng, &cfg);
        assert_int_equal(mt_space_neighbours(&sp, &cfg, NULL, 0), expect);
        assert_int_equal(mt_space_neighbours(&sp, &cfg, out, expect), expect);
        for (int a = 0; a < expect; a++) {
            assert_int_equal(mt_space_check(&sp, &out[a]), MT_OK);
            int diff = 0;
            for (int i = 0; i < sp.nknobs; i++) diff += out[a].choice[i] != cfg.choice[i];
            assert_int_equal(diff, 1);
            for (int b = 0; b < a; b++) assert_false(cfg_equal(&out[a], &out[b]));
        }
    }
    /* A short buffer gets the first `max` and the total comes back. */
    mt_config cfg, few[3];
    assert_int_equal(mt_space_config_from_index(&sp, 0, &cfg), MT_OK);
    memset(few, 0x7f, sizeof few);
    assert_int_equal(mt_space_neighbours(&sp, &cfg, few, 2), expect);
    assert_int_equal(few[0].choice[0], 1);
    assert_int_equal(few[1].choice[0], 2);
    assert_int_equal(few[2].nknobs, 0x7f7f7f7f); /* untouched */
    free(out);
    mt_space_free(&sp);
}

static void test_get_value(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    mt_config cfg;
    char err[256];
    assert_int_equal(mt_config_parse(&sp, "tile_f=2x4x2,tile_y=1x7,tile_x=3x2x2,auto_unroll_max_step=1500,unroll_explicit=1", &cfg, err, sizeof err),
                     MT_OK);
    const int *tf = mt_config_get(&sp, &cfg, "tile_f");
    assert_non_null(tf);
    assert_int_equal(tf[0], 2);
    assert_int_equal(tf[1], 4);
    assert_int_equal(tf[2], 2);
    assert_int_equal(mt_config_value(&sp, &cfg, "auto_unroll_max_step"), 1500);
    assert_int_equal(mt_config_value(&sp, &cfg, "unroll_explicit"), 1);
    assert_int_equal(mt_config_value(&sp, &cfg, "tile_x"), 3);
    assert_null(mt_config_get(&sp, &cfg, "nope"));
    assert_null(mt_config_get(&sp, &cfg, "tile"));
    assert_null(mt_config_get(&sp, &cfg, "tile_ff"));
    assert_int_equal(mt_config_value(&sp, &cfg, "nope"), 0);
    mt_space_free(&sp);
}

static void test_format(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    mt_config cfg;
    assert_int_equal(mt_space_config_from_index(&sp, 0, &cfg), MT_OK);
    char buf[256];
    int n = mt_config_format(&sp, &cfg, buf, sizeof buf);
    assert_string_equal(buf, "tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0");
    assert_int_equal(n, (int)strlen(buf));
    char small[10];
    assert_int_equal(mt_config_format(&sp, &cfg, small, sizeof small), n);
    assert_string_equal(small, "tile_f=16");
    assert_int_equal(mt_config_format(&sp, &cfg, NULL, 0), n);
    char one[1] = {'z'};
    assert_int_equal(mt_config_format(&sp, &cfg, one, 1), n);
    assert_int_equal(one[0], '\0');
    mt_space_free(&sp);
}

typedef struct bad_text {
    const char *text;
    mt_status status;
    const char *needle;
} bad_text;

static void test_parse_errors(void **state) {
    (void)state;
    mt_space sp;
    small_space(&sp);
    const char *good = "tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0";
    static const bad_text cases[] = {
        {"", MT_PARSE, "empty"},
        {",", MT_PARSE, "knob=value"},
        {"garbage", MT_PARSE, "knob=value"},
        {"\x01\x02\xff", MT_PARSE, "knob=value"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0,", MT_PARSE, "trailing comma"},
        {"tile_f=16x1x1,,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "knob=value"},
        {"tile_f=16x1x1,tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f' given twice"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0", MT_INVALID_CONFIG, "missing knob 'unroll_explicit'"},
        {"tile_y=7x1", MT_INVALID_CONFIG, "missing knob 'tile_f'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0,bogus=1", MT_INVALID_CONFIG, "unknown knob 'bogus'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0,TILE_F=1", MT_INVALID_CONFIG, "unknown knob"},
        {"=1", MT_INVALID_CONFIG, "unknown knob ''"},
        /* values that are well formed but not options; the message lists some */
        {"tile_f=3x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_INVALID_CONFIG, "16x1x1"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=2", MT_INVALID_CONFIG, "'unroll_explicit'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=2", MT_INVALID_CONFIG, "0, 1"},
        {"tile_f=-1x4x4,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_INVALID_CONFIG, "'tile_f'"},
        {"tile_f=16x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_INVALID_CONFIG, "takes 3 parts, got 2"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0x0,unroll_explicit=0", MT_INVALID_CONFIG, "takes 1 part"},
        {"tile_f=16x1x1x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f'"},
        /* malformed values */
        {"tile_f=16x1x,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f'"},
        {"tile_f=x16x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f'"},
        {"tile_f=16*1*1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=,unroll_explicit=0", MT_PARSE, "'auto_unroll_max_step'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step= 0,unroll_explicit=0", MT_PARSE, "'auto_unroll_max_step'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=-", MT_PARSE, "'unroll_explicit'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=99999999999999999999,unroll_explicit=0", MT_PARSE,
         "'auto_unroll_max_step'"},
        {"tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=2147483648,unroll_explicit=0", MT_PARSE, "'auto_unroll_max_step'"},
        {"tile_f=16x1x1 ,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_PARSE, "'tile_f'"},
        {" tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0,unroll_explicit=0", MT_INVALID_CONFIG, "unknown knob ' tile_f'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_config cfg;
        memset(&cfg, 0x33, sizeof cfg);
        mt_config before = cfg;
        char err[256] = "";
        mt_status st = mt_config_parse(&sp, cases[i].text, &cfg, err, sizeof err);
        if (st != cases[i].status)
            fail_msg("'%s': expected %s, got %s (%s)", cases[i].text, mt_status_name(cases[i].status), mt_status_name(st), err);
        if (!strstr(err, cases[i].needle)) fail_msg("'%s': message '%s' lacks '%s'", cases[i].text, err, cases[i].needle);
        assert_memory_equal(&cfg, &before, sizeof cfg);
    }
    /* Any order is fine. */
    mt_config a, b;
    assert_int_equal(mt_config_parse(&sp, good, &a, NULL, 0), MT_OK);
    assert_int_equal(mt_config_parse(&sp, "unroll_explicit=0,tile_x=10x1x1,auto_unroll_max_step=0,tile_y=7x1,tile_f=16x1x1", &b, NULL, 0), MT_OK);
    assert_true(cfg_equal(&a, &b));
    assert_true(mt_space_config_index(&sp, &a) == 0);
    /* Overlong text: rejected without reading all of it. */
    size_t big = 1 << 20;
    char *s = malloc(big + 1);
    assert_non_null(s);
    memset(s, 'a', big);
    s[big] = '\0';
    char err[256];
    assert_int_equal(mt_config_parse(&sp, s, &a, err, sizeof err), MT_PARSE);
    assert_non_null(strstr(err, "longer"));
    /* A valid config padded with leading zeros: accepted up to the cap of
     * 4096 characters, rejected beyond it. */
    const char *rest = ",tile_f=16x1x1,tile_y=7x1,tile_x=10x1x1,auto_unroll_max_step=0";
    for (size_t total = 4095; total <= 4097; total++) {
        size_t zeros = total - strlen("unroll_explicit=") - strlen(rest);
        strcpy(s, "unroll_explicit=");
        memset(s + strlen(s), '0', zeros);
        strcpy(s + strlen("unroll_explicit=") + zeros, rest);
        assert_int_equal(strlen(s), total);
        assert_int_equal(mt_config_parse(&sp, s, &b, err, sizeof err), total <= 4096 ? MT_OK : MT_PARSE);
        if (total <= 4096) assert_true(cfg_equal(&a, &b));
    }
    free(s);
    assert_int_equal(mt_config_parse(&sp, NULL, &a, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_config_parse(&sp, good, NULL, err, sizeof err), MT_INVALID_ARG);
    mt_space_free(&sp);
}

static void test_rng(void **state) {
    (void)state;
    /* splitmix64 reference values for seed 0. */
    uint64_t s = 0;
    assert_true(mt_rng_next(&s) == UINT64_C(0xe220a8397b1dcdaf));
    assert_true(mt_rng_next(&s) == UINT64_C(0x6e789e6aa1b965f4));
    assert_true(mt_rng_next(&s) == UINT64_C(0x06c45d188009454f));
    uint64_t a = 12345, b = 12345;
    for (int i = 0; i < 100; i++) assert_true(mt_rng_next(&a) == mt_rng_next(&b));
    uint64_t c = 12346;
    a = 12345;
    assert_true(mt_rng_next(&a) != mt_rng_next(&c));
    /* bounds */
    uint64_t r = 1;
    assert_true(mt_rng_below(&r, 0) == 0);
    assert_true(mt_rng_below(&r, 1) == 0);
    uint64_t big = (UINT64_C(1) << 63) + 1;
    for (int i = 0; i < 1000; i++) assert_true(mt_rng_below(&r, big) < big);
    for (int i = 0; i < 1000; i++) assert_true(mt_rng_below(&r, 3) < 3);
}

/* Pearson chi-square of counts against a uniform expectation. */
static double chi_square(const long *counts, int k, long total) {
    double e = (double)total / k, x = 0;
    for (int i = 0; i < k; i++) x += (counts[i] - e) * (counts[i] - e) / e;
    return x;
}

static void test_rng_uniform(void **state) {
    (void)state;
    /* 10 buckets, 9 degrees of freedom: P(chi2 > 40) ~ 7e-6. */
    long counts[10] = {0};
    uint64_t r = 2024;
    for (int i = 0; i < 200000; i++) counts[mt_rng_below(&r, 10)]++;
    assert_true(chi_square(counts, 10, 200000) < 40.0);

    /* Random configs are uniform over the whole space (24 configs, 23 dof). */
    mt_space sp;
    mt_space_init(&sp, "u");
    int e3[] = {1, 2, 3}, e2[] = {0, 1};
    assert_int_equal(mt_space_add_enum(&sp, "a", e3, 3), MT_OK);
    assert_int_equal(mt_space_add_split(&sp, "b", 8, 2, MT_SPLIT_FACTOR, 0), MT_OK);
    assert_int_equal(mt_space_add_enum(&sp, "c", e2, 2), MT_OK);
    assert_true(mt_space_size(&sp) == 24);
    long cc[24] = {0};
    for (int i = 0; i < 240000; i++) {
        mt_config cfg;
        mt_space_random(&sp, &r, &cfg);
        cc[mt_space_config_index(&sp, &cfg)]++;
    }
    assert_true(chi_square(cc, 24, 240000) < 70.0);
    /* Deterministic for a given seed. */
    uint64_t r1 = 5, r2 = 5;
    for (int i = 0; i < 100; i++) {
        mt_config x, y;
        mt_space_random(&sp, &r1, &x);
        mt_space_random(&sp, &r2, &y);
        assert_true(cfg_equal(&x, &y));
    }
    mt_space_free(&sp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_factor_order), cmocka_unit_test(test_split_factor_counts), cmocka_unit_test(test_split_pow2),
        cmocka_unit_test(test_enum),               cmocka_unit_test(test_add_errors),          cmocka_unit_test(test_index_round_trip),
        cmocka_unit_test(test_big_space_samples),  cmocka_unit_test(test_size_saturates),      cmocka_unit_test(test_check),
        cmocka_unit_test(test_neighbours),         cmocka_unit_test(test_get_value),           cmocka_unit_test(test_format),
        cmocka_unit_test(test_parse_errors),       cmocka_unit_test(test_rng),                 cmocka_unit_test(test_rng_uniform),
    };
    return cmocka_run_group_tests_name("space", tests, NULL, NULL);
}
