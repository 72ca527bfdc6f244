/* The test that matters most (ggml's test-backend-ops, for convolutions):
 * every template, random valid configs, on workloads that cover the shapes a
 * template can get wrong; each output is compared with the CPU reference by
 * normalised error, checked for NaN/Inf and unwritten elements, and the guard
 * region after the output buffer must be untouched (mt_conv_bench does the
 * checks). MTGPU_HARNESS_CONFIGS sets the configs per (workload, template). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtgpu/device.h"
#include "program.h"
#include "measure.h"
#include "template.h"

#include "conv_workloads.h"
#include "default_device.h"

/* The workloads (conv_workloads.h) are shared with test_cuda_gpu. */
#define NWORKLOADS MT_TEST_NCONV_WORKLOADS

typedef struct {
    const char *workload;
    const mt_template *t;
} harness_case;

/* Kernels unrolling to more statements than this are skipped by the harness. */
#define HARNESS_MAX_UNROLLED 400


static int configs_per_case(void) {
    const char *e = getenv("MTGPU_HARNESS_CONFIGS");
    int n = e ? atoi(e) : 2;
    return n > 0 ? n : 2;
}

static void run_case(void **state) {
    const harness_case *hc = *state;
    skip_without_device();
    mt_workload wl;
    char err[1024];
    assert_int_equal(mt_workload_parse(hc->workload, &wl, err, sizeof err), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(hc->t, &wl, &sp), MT_OK);
    mt_conv_bench *bench = NULL;
    mt_status st = mt_conv_bench_new(device, &wl, 42, &bench, err, sizeof err);
    if (st != MT_OK) {
        mt_space_free(&sp);
        fail_msg("bench setup: %s", err);
    }
    mt_measure_params mp = mt_measure_default_params();
    mp.warmup = 0;
    mp.min_repeats = mp.max_repeats = 1;
    mp.min_time_ms = 0;
    mt_device_limits lim = mt_device_get_limits(device);
    /* Seeded by the case's name, so each case draws its own configs reproducibly. */
    uint64_t rng = 0x1234567ull;
    for (const char *c = hc->workload; *c; c++) rng = rng * 131 + (unsigned char)*c;
    for (const char *c = mt_template_name(hc->t); *c; c++) rng = rng * 131 + (unsigned char)*c;
    int want = configs_per_case(), ran = 0, draws = 0, failures = 0;
    while (ran < want && draws < 4000) {
        mt_config cfg;
        mt_space_random(&sp, &rng, &cfg);
        draws++;
        /* Only configs the template can realise within the device's limits are "valid". */
        if (mt_template_check(hc->t, &wl, &sp, &cfg, &lim, err, sizeof err) != MT_OK) continue;
        /* Large unrolled kernels take PoCL long to compile: keep the test's time bounded. */
        mt_kernel *k = NULL;
        int64_t size = mt_template_build(hc->t, &wl, &sp, &cfg, &k, err, sizeof err) == MT_OK ? mt_kernel_unrolled_size(k) : 0;
        mt_kernel_free(k);
        if (size > HARNESS_MAX_UNROLLED) continue;
        mt_measure_result r;
        mt_conv_bench_measure(bench, hc->t, &sp, &cfg, &mp, &r);
        char ctext[1024];
        mt_config_format(&sp, &cfg, ctext, sizeof ctext);
        if (r.status != MT_OK) {
            print_error("%s %s [%s]: %s: %s\n", mt_template_name(hc->t), hc->workload, ctext, mt_status_name(r.status), r.message);
            failures++;
        } else if (ran == 0) {
            /* Timed cold (weights evicted before each run): still
             * checked against the reference, and cold where the device can. */
            mt_measure_params cp = mp;
            cp.check = 1;
            cp.warmup = 1;
            cp.min_repeats = cp.max_repeats = 2;
            cp.cold = 1;
            mt_conv_bench_measure(bench, hc->t, &sp, &cfg, &cp, &r);
            if (r.status != MT_OK || r.cold != mt_device_info_can_evict(mt_device_get_info(device)) || r.repeats != 2 || !(r.median_ms > 0)) {
                print_error("%s %s [%s] cold: %s (cold %d, %d runs): %s\n", mt_template_name(hc->t), hc->workload, ctext,
                            mt_status_name(r.status), r.cold, r.repeats, r.message);
                failures++;
            }
        }
        ran++;
    }
    mt_conv_bench_free(bench);
    mt_space_free(&sp);
    if (ran == 0) {
        print_message("skipped: no valid config of '%s' found for %s in %d draws\n", mt_template_name(hc->t), hc->workload, draws);
        skip();
    }
    assert_int_equal(failures, 0);
}

int main(void) {
    static harness_case cases[NWORKLOADS * 8];
    static struct CMUnitTest tests[NWORKLOADS * 8];
    static char names[NWORKLOADS * 8][160];
    int n = 0;
    for (int w = 0; w < NWORKLOADS; w++) {
        mt_workload wl;
        if (mt_workload_parse(mt_test_conv_workloads[w], &wl, NULL, 0) != MT_OK) {
            fprintf(stderr, "bad workload in the harness: %s\n", mt_test_conv_workloads[w]);
            return 1;
        }
        for (int t = 0; t < mt_template_count(); t++) {
            const mt_template *tp = mt_template_at(t);
            if (!mt_template_accepts(tp, &wl)) continue;
            cases[n] = (harness_case){mt_test_conv_workloads[w], tp};
            snprintf(names[n], sizeof names[n], "%s/%s", mt_template_name(tp), mt_test_conv_workloads[w]);
            tests[n] = (struct CMUnitTest){.name = names[n], .test_func = run_case, .initial_state = &cases[n]};
            n++;
        }
    }
    return _cmocka_run_group_tests("conv_harness", tests, (size_t)n, default_device_open, default_device_close);
}
