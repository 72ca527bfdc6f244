/* kvec's kernel rows column by column (ir/tmpl_kvec.c, kvec_column_order:
 * the kernel columns unrolled, at most 6 weight vectors per kernel row):
 * each input column loaded once and fed to every (pixel, tap) that reads
 * it. On workloads with strides 1 and 2 along the columns, dilation 2,
 * padding on the left, on both sides and on the columns only, rectangular
 * kernels (2x3, 3x5), rows no tile divides, tiles at both edges and more
 * edge tiles than get reductions of their own (the run-time tested one),
 * two images and channels no tile divides: tiles of one and two channel
 * vectors, one and two rows, 1 to 16 columns, two work-items along the
 * columns, the kernel rows unrolled too, pragmas instead of replicated
 * bodies, each vector width on the first mixes; configs outside the
 * column order (three channel vectors of a 3-wide kernel) run alongside.
 * Each output against the double-accumulating CPU reference (normalised
 * error), with a fused epilogue in turn; unwritten outputs fail (the
 * output is poisoned first). */
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

/* The workloads: see the file's comment. */
static const char *const workloads[] = {
    "n=1,c=5,h=13,w=34,k=19,r=3,s=3,stride=2,pad=1",          /* stride 2, a 17-wide row, left edge */
    "n=2,c=4,h=9,w=16,k=20,r=3,s=3,pad=1",                    /* stride 1, both edges, two images */
    "n=1,c=3,h=11,w=23,k=24,r=3,s=5,stride=1x2,pad=1x2",     /* a 3x5 kernel, stride 2 along columns */
    "n=1,c=6,h=12,w=19,k=24,r=2,s=3,pad=0x1,dilation=2",     /* dilation 2, columns padded only */
    "n=1,c=3,h=10,w=20,k=20,r=3,s=5,pad=1x4,dilation=1x2",    /* eight edge tiles of one column */
    "n=1,c=16,h=7,w=7,k=24,r=3,s=3,pad=1",                    /* a 7x7 image, the row in one tile */
};
#define NWORKLOADS (int)(sizeof workloads / sizeof workloads[0])

/* Tiles: reg_k, reg_y, reg_x, thread_x, unroll_rs, unroll_explicit; the
 * first two in every vector width, the rest in 8 lanes. */
typedef struct {
    int kr, yr, xr, xt, unroll_rs, explicit_;
} tile_mix;
static const tile_mix mixes[] = {
    {1, 2, 7, 1, 1, 1}, {2, 1, 3, 1, 1, 1}, {1, 1, 7, 1, 1, 1}, {1, 1, 4, 1, 2, 1},
    {1, 2, 3, 1, 1, 0}, {1, 1, 16, 1, 1, 1}, {1, 1, 3, 2, 1, 1}, {1, 1, 1, 1, 1, 1},
    {3, 1, 2, 1, 1, 1},
};
#define NMIXES (int)(sizeof mixes / sizeof mixes[0])

static void run_workload(void **state) {
    const char *text = *state;
    skip_without_device();
    fused_case_data c;
    fused_case_open(&c, device, "kvec", text, 29);
    char err[2048];
    static const int vecs[] = {8, 4, 16};
    int tested = 0, turn = 0;
    double worst = 0;
    for (int m = 0; m < NMIXES; m++)
        for (int v = 0; v < (m < 2 ? 3 : 1); v++) {
            const tile_mix *x = &mixes[m];
            char cfg_text[256], what[512];
            snprintf(cfg_text, sizeof cfg_text,
                     "thread_k=1,vec=%d,reg_k=%d,thread_y=1,reg_y=%d,thread_x=%d,reg_x=%d,unroll_rs=%d,unroll_explicit=%d", vecs[v], x->kr,
                     x->yr, x->xt, x->xr, x->unroll_rs, x->explicit_);
            snprintf(what, sizeof what, "%s %s", text, cfg_text);
            mt_config cfg;
            if (mt_config_parse(&c.sp, cfg_text, &cfg, err, sizeof err) != MT_OK) {
                print_message("  %s: not in this workload's space: %s\n", what, err);
                continue;
            }
            if (fused_case_run(&c, device, &cfg, &fused_epilogues[turn % FUSED_NEPI], 1e-5, what, &worst)) tested++, turn++;
        }
    print_message("  %s: %d configs, largest normalised error %.2g\n", text, tested, worst);
    assert_true(tested >= NMIXES - 1);
    fused_case_close(&c);
}

int main(void) {
    static struct CMUnitTest tests[NWORKLOADS];
    static char names[NWORKLOADS][160];
    for (int w = 0; w < NWORKLOADS; w++) {
        snprintf(names[w], sizeof names[w], "kvec_columns/%s", workloads[w]);
        tests[w] = (struct CMUnitTest){.name = names[w], .test_func = run_workload, .initial_state = (void *)workloads[w]};
    }
    return _cmocka_run_group_tests("kvec_columns", tests, (size_t)NWORKLOADS, default_device_open, default_device_close);
}
