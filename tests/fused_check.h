/* Running one convolution kernel with a fused epilogue and comparing it with
 * the CPU reference followed by the same epilogue on the host: what
 * test_fused (every template) and the per-template tests (test_winograd,
 * test_dwrow, test_stem, test_kvec_columns) share. Include after cmocka.h;
 * every failure fails the calling test. */
#ifndef MTGPU_TEST_FUSED_CHECK_H
#define MTGPU_TEST_FUSED_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "mtgpu/device.h"
#include "program.h"
#include "reference.h"
#include "template.h"

/* The epilogues the Winograd and dwrow tests run in turn: none, then each
 * fused one. */
static const mt_conv_epilogue fused_epilogues[] = {
    {0},
    {.bias = 1, .residual = MT_RESIDUAL_BUFFER, .act = MT_EPILOGUE_RELU},
    {.bias = 1, .residual = MT_RESIDUAL_NONE, .act = MT_EPILOGUE_RELU6},
    {.bias = 0, .residual = MT_RESIDUAL_IN_OUTPUT, .act = MT_EPILOGUE_NONE},
};
#define FUSED_NEPI (int)(sizeof fused_epilogues / sizeof fused_epilogues[0])

/* One workload's random data, its reference convolution, and their device
 * buffers; the weights are uploaded in the layout a config reads. */
typedef struct fused_data {
    mt_workload wl;
    int64_t nin, nw, nout, plane;
    float *in, *wt, *bias, *res, *conv, *want, *got;
    mt_dbuf *b_in, *b_wt, *b_out, *b_bias, *b_res;
    mt_weight_layout wt_layout; /* the layout b_wt holds (MT_WEIGHT_LAYOUT_COUNT: none yet) */
} fused_data;

static void fused_data_init(fused_data *d, mt_device *dev, const mt_workload *wl, uint64_t seed) {
    memset(d, 0, sizeof *d);
    d->wl = *wl;
    d->wt_layout = MT_WEIGHT_LAYOUT_COUNT;
    d->nin = mt_workload_input_elems(wl), d->nw = mt_workload_weight_elems(wl), d->nout = mt_workload_output_elems(wl);
    d->plane = (int64_t)mt_workload_out_h(wl) * mt_workload_out_w(wl);
    d->in = malloc(sizeof(float) * (size_t)d->nin), d->wt = malloc(sizeof(float) * (size_t)d->nw);
    d->bias = malloc(sizeof(float) * (size_t)wl->k), d->res = malloc(sizeof(float) * (size_t)d->nout);
    d->conv = malloc(sizeof(float) * (size_t)d->nout), d->want = malloc(sizeof(float) * (size_t)d->nout);
    d->got = malloc(sizeof(float) * (size_t)d->nout);
    assert_true(d->in && d->wt && d->bias && d->res && d->conv && d->want && d->got);
    mt_fill_random(d->in, d->nin, seed);
    mt_fill_random(d->wt, d->nw, seed + 1);
    mt_fill_random(d->bias, wl->k, seed + 2);
    mt_fill_random(d->res, d->nout, seed + 3);
    assert_int_equal(mt_conv_reference(wl, d->in, d->wt, d->conv), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof(float) * (size_t)d->nin, &d->b_in), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof(float) * (size_t)d->nout, &d->b_out), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof(float) * (size_t)wl->k, &d->b_bias), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof(float) * (size_t)d->nout, &d->b_res), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, d->b_in, 0, d->in, sizeof(float) * (size_t)d->nin), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, d->b_bias, 0, d->bias, sizeof(float) * (size_t)wl->k), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, d->b_res, 0, d->res, sizeof(float) * (size_t)d->nout), MT_OK);
}

/* The weights in layout l on the device (converted again only when l changes). */
static void fused_data_weights(fused_data *d, mt_device *dev, mt_weight_layout l) {
    if (d->b_wt && d->wt_layout == l) return;
    const int64_t nwl = mt_weight_layout_elems(l, &d->wl);
    assert_true(nwl >= d->nw);
    float *wtl = malloc(sizeof(float) * (size_t)nwl);
    assert_non_null(wtl);
    assert_int_equal(mt_weights_to_layout(l, &d->wl, d->wt, wtl), MT_OK);
    mt_dbuf_free(d->b_wt);
    d->b_wt = NULL;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof(float) * (size_t)nwl, &d->b_wt), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, d->b_wt, 0, wtl, sizeof(float) * (size_t)nwl), MT_OK);
    free(wtl);
    d->wt_layout = l;
}

static void fused_data_free(fused_data *d) {
    mt_dbuf_free(d->b_in);
    mt_dbuf_free(d->b_wt);
    mt_dbuf_free(d->b_out);
    mt_dbuf_free(d->b_bias);
    mt_dbuf_free(d->b_res);
    free(d->in);
    free(d->wt);
    free(d->bias);
    free(d->res);
    free(d->conv);
    free(d->want);
    free(d->got);
}

/* One template's case on one workload, opened: the workload parsed from
 * text, the template's space for it, its data (fused_data_init with seed)
 * and the device's limits. Close with fused_case_close. */
typedef struct fused_case_data {
    const mt_template *t;
    mt_workload wl;
    mt_space sp;
    fused_data d;
    mt_device_limits lim;
} fused_case_data;

static inline void fused_case_open(fused_case_data *c, mt_device *dev, const char *tmpl, const char *text, uint64_t seed) {
    char err[512];
    c->t = mt_template_find(tmpl);
    assert_non_null(c->t);
    if (mt_workload_parse(text, &c->wl, err, sizeof err) != MT_OK) fail_msg("%s: %s", text, err);
    assert_int_equal(mt_template_space(c->t, &c->wl, &c->sp), MT_OK);
    fused_data_init(&c->d, dev, &c->wl, seed);
    c->lim = mt_device_get_limits(dev);
}

static inline void fused_case_close(fused_case_data *c) {
    fused_data_free(&c->d);
    mt_space_free(&c->sp);
}

static float fused_host_epilogue(const mt_conv_epilogue *e, double v, float bias, float res) {
    if (e->bias) v += bias;
    if (e->residual != MT_RESIDUAL_NONE) v += res;
    if (e->act != MT_EPILOGUE_NONE && v < 0) v = 0;
    if (e->act == MT_EPILOGUE_RELU6 && v > 6) v = 6;
    return (float)v;
}

/* Builds cfg's kernel with epilogue e, runs it on d's buffers (the weights in
 * the config's layout) and fails the test unless its output is within
 * tolerance of the reference with the epilogue (normalised error, which it
 * returns). `what` names the case in messages. */
static double fused_run(fused_data *d, mt_device *dev, const mt_template *t, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *e,
                        double tolerance, const char *what) {
    char err[2048];
    fused_data_weights(d, dev, mt_template_config_weight_layout(t, sp, cfg));
    mt_kernel *k = NULL;
    mt_status st = mt_template_build_fused(t, &d->wl, sp, cfg, e, &k, err, sizeof err);
    if (st != MT_OK) fail_msg("%s: fused build failed: %s", what, err);
    mt_kernel_resources kr;
    assert_int_equal(mt_kernel_analyze(k, &kr, err, sizeof err), MT_OK);
    /* The parameters follow the contract of template.h: input, weight, output, [bias], [residual]. */
    assert_int_equal(k->nparams, 3 + e->bias + (e->residual == MT_RESIDUAL_BUFFER));
    mt_program *prog = NULL;
    st = mt_program_build(dev, k, &prog, err, sizeof err);
    mt_kernel_free(k);
    if (st != MT_OK) fail_msg("%s: compile failed: %s", what, err);
    /* Poison the output so an unwritten element cannot pass; in place, it
     * holds the residual (an unwritten element then lacks the convolution). */
    for (int64_t i = 0; i < d->nout; i++) d->got[i] = e->residual == MT_RESIDUAL_IN_OUTPUT ? d->res[i] : NAN;
    assert_int_equal(mt_dbuf_write(dev, d->b_out, 0, d->got, sizeof(float) * (size_t)d->nout), MT_OK);
    mt_dbuf *args[5] = {d->b_in, d->b_wt, d->b_out};
    int na = 3;
    if (e->bias) args[na++] = d->b_bias;
    if (e->residual == MT_RESIDUAL_BUFFER) args[na++] = d->b_res;
    double ms = 0;
    st = mt_program_run(dev, prog, args, na, kr.grid, kr.block, 0, 1, &ms, err, sizeof err);
    mt_program_free(prog);
    if (st != MT_OK) fail_msg("%s: launch failed: %s", what, err);
    assert_int_equal(mt_dbuf_read(dev, d->b_out, 0, d->got, sizeof(float) * (size_t)d->nout), MT_OK);
    for (int64_t i = 0; i < d->nout; i++)
        d->want[i] = fused_host_epilogue(e, d->conv[i], d->bias[(i / d->plane) % d->wl.k], d->res[i]);
    double max_err = 0;
    int64_t bad = -1;
    st = mt_compare(d->got, d->want, d->nout, &max_err, &bad);
    if (st != MT_OK || !(max_err <= tolerance))
        fail_msg("%s (bias %d residual %d act %d): normalised error %.3g over %.1g (first bad element %lld: %g, want %g)", what, e->bias,
                 e->residual, (int)e->act, max_err, tolerance, (long long)bad, bad >= 0 ? d->got[bad] : 0.0, bad >= 0 ? d->want[bad] : 0.0);
    return max_err;
}

/* cfg of c's template, where it is valid on the device, run with epilogue e
 * (fused_run at tolerance tol; what names it in messages) and the largest
 * normalised error kept in *worst: 1, or 0 where the config is not valid
 * there (said, and nothing run). */
static inline int fused_case_run(fused_case_data *c, mt_device *dev, const mt_config *cfg, const mt_conv_epilogue *e, double tol, const char *what,
                                 double *worst) {
    char err[2048];
    if (mt_template_check(c->t, &c->wl, &c->sp, cfg, &c->lim, err, sizeof err) != MT_OK) {
        print_message("  %s: not valid here: %s\n", what, err);
        return 0;
    }
    double max_err = fused_run(&c->d, dev, c->t, &c->sp, cfg, e, tol, what);
    if (max_err > *worst) *worst = max_err;
    return 1;
}

#endif
