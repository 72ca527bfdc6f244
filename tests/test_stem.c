/* The `stem` template (dense layers on few input channels):
 *  - it accepts undilated, ungrouped layers of at most 8 input channels with
 *    kernels over 1x1, stride_w 1 or 2 and rows whose copies fit its
 *    budget, and nothing else;
 *  - on workloads that between them have rows that no vector width divides
 *    and rows narrower than a vector, no padding and padding on one axis
 *    only, strides 1 and 2 along each axis, kernels from 2x2 to 7x7 and
 *    rectangular ones, one to eight input channels and two images, every
 *    vector width with tiles of channels and columns that overhang the
 *    layer, blocks of rows that overhang the output and channel blocks of
 *    unequal work: the output against the double-accumulating CPU reference
 *    (normalised error), plain and with each fused epilogue in turn.
 *    Unwritten outputs fail (the output is poisoned first). */
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

static void test_accepts(void **state) {
    (void)state;
    const mt_template *t = mt_template_find("stem");
    assert_non_null(t);
    static const char *const yes[] = {"n=1,c=3,h=224,w=224,k=32,r=3,s=3,stride=2,pad=1", "n=1,c=3,h=224,w=224,k=64,r=7,s=7,stride=2,pad=3",
                                      "n=1,c=3,h=224,w=224,k=64,r=3,s=3,pad=1", "n=2,c=8,h=9,w=9,k=4,r=1,s=3,pad=0x1",
                                      "n=1,c=1,h=5,w=5,k=1,r=2,s=2,stride=3x2"};
    static const char *const no[] = {"n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1",               /* too many channels */
                                     "n=1,c=3,h=20,w=20,k=24,r=1,s=1",                      /* 1x1 */
                                     "n=1,c=4,h=12,w=12,k=8,r=3,s=3,pad=1,groups=2",        /* grouped */
                                     "n=1,c=4,h=12,w=12,k=4,r=3,s=3,pad=1,groups=4",        /* depthwise */
                                     "n=1,c=3,h=16,w=16,k=8,r=3,s=3,pad=2,dilation=2",      /* dilated */
                                     "n=1,c=3,h=17,w=17,k=8,r=3,s=3,stride=3,pad=1",        /* stride_w 3 */
                                     "n=1,c=8,h=600,w=600,k=8,r=7,s=7,pad=3"};               /* rows past the budget */
    mt_workload wl;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_int_equal(mt_workload_parse(yes[i], &wl, NULL, 0), MT_OK);
        if (!mt_template_accepts(t, &wl)) fail_msg("%s: refused", yes[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_int_equal(mt_workload_parse(no[i], &wl, NULL, 0), MT_OK);
        if (mt_template_accepts(t, &wl)) fail_msg("%s: accepted", no[i]);
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_UNSUPPORTED);
    }
}

/* The workloads: see the file's comment. */
static const char *const workloads[] = {
    "n=1,c=3,h=17,w=19,k=10,r=3,s=3,stride=2,pad=1",     /* MobileNetV2's first layer's shape, odd sizes */
    "n=2,c=3,h=12,w=37,k=7,r=3,s=3,pad=1",               /* two images, stride 1, a row no width divides */
    "n=1,c=3,h=23,w=29,k=12,r=7,s=7,stride=2,pad=3",     /* ResNet's 7x7 stem's shape */
    "n=1,c=4,h=9,w=8,k=6,r=3,s=3",                       /* no padding */
    "n=1,c=1,h=10,w=21,k=5,r=5,s=3,stride=2x1,pad=2x1",  /* stride along rows only, a 5x3 kernel */
    "n=1,c=2,h=9,w=20,k=9,r=3,s=5,stride=1x2,pad=1x2",   /* stride along columns only, a 3x5 kernel */
    "n=1,c=8,h=7,w=40,k=16,r=3,s=3,stride=2",            /* eight channels, stride 2, unpadded */
    "n=1,c=3,h=6,w=6,k=3,r=2,s=2,stride=2",              /* a row narrower than every vector */
    "n=1,c=3,h=11,w=26,k=5,r=3,s=3,pad=0x1",             /* padding on one axis only */
};
#define NWORKLOADS (int)(sizeof workloads / sizeof workloads[0])

static void run_workload(void **state) {
    const char *text = *state;
    skip_without_device();
    fused_case_data c;
    fused_case_open(&c, device, "stem", text, 23);
    static const char *const names[5] = {"vec", "reg_k", "reg_x", "rows", "k_blocks"};
    int kn[5];
    for (int j = 0; j < 5; j++) {
        kn[j] = -1;
        for (int i = 0; i < c.sp.nknobs; i++)
            if (!strcmp(c.sp.knobs[i].name, names[j])) kn[j] = i;
        assert_true(kn[j] >= 0);
    }
    assert_int_equal(c.sp.nknobs, 5);
    /* Every vector width; of reg_k, reg_x, rows and k_blocks (an option's
     * index, -1: the last, clamped to the options the workload has) all
     * first, the largest tiles and row blocks, and mixes: one of them three
     * channels per tile (channels past the whole tiles, which the last
     * channel block runs) over two channel blocks. */
    enum { NMIX = 5 };
    static const int mixes[NMIX][4] = {{0, 0, 0, 0}, {-1, -1, -1, 0}, {-1, 0, -1, 1}, {0, -1, 0, -1}, {2, 1, 1, 1}};
    int tested = 0, turn = 0;
    double worst = 0;
    for (int ov = 0; ov < c.sp.knobs[kn[0]].noptions; ov++)
        for (int m = 0; m < NMIX; m++) {
            mt_config cfg = {.nknobs = c.sp.nknobs};
            cfg.choice[kn[0]] = ov;
            for (int j = 1; j < 5; j++) {
                const int last = c.sp.knobs[kn[j]].noptions - 1, want = mixes[m][j - 1];
                cfg.choice[kn[j]] = want < 0 || want > last ? last : want;
            }
            char what[512];
            int n = snprintf(what, sizeof what, "%s ", text);
            mt_config_format(&c.sp, &cfg, what + n, sizeof what - (size_t)n);
            if (fused_case_run(&c, device, &cfg, &fused_epilogues[turn % FUSED_NEPI], 1e-5, what, &worst)) tested++, turn++;
        }
    print_message("  %s: %d configs, largest normalised error %.2g\n", text, tested, worst);
    assert_true(tested >= c.sp.knobs[kn[0]].noptions);
    fused_case_close(&c);
}

int main(void) {
    static struct CMUnitTest tests[NWORKLOADS + 1];
    static char names[NWORKLOADS][160];
    int n = 0;
    tests[n++] = (struct CMUnitTest){.name = "accepts", .test_func = test_accepts};
    for (int w = 0; w < NWORKLOADS; w++) {
        snprintf(names[w], sizeof names[w], "stem/%s", workloads[w]);
        tests[n++] = (struct CMUnitTest){.name = names[w], .test_func = run_workload, .initial_state = (void *)workloads[w]};
    }
    return _cmocka_run_group_tests("stem", tests, (size_t)n, default_device_open, default_device_close);
}
