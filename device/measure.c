/* One schedule, end to end: IR -> limits -> compile -> check -> time. */
#include "measure.h"
#include "memory.h"
#include "program.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "reference.h"
#include "fail.h"

/* Elements after the output that a kernel must never touch. */
#define MT__GUARD_ELEMS 4096
/* A NaN with a recognisable payload, written over the output and its guard
 * before a checked run: unwritten outputs then fail the NaN check. */
#define MT__SENTINEL_BITS 0x7fc0dea1u

struct mt_conv_bench {
    mt_device *dev;
    mt_workload wl;
    int64_t n_in, n_w, n_out;
    float *ref;      /* reference output */
    float *scratch;  /* output + guard read back */
    float *sentinel; /* output + guard of sentinel values */
    float *w;        /* the weights (OIHW), for the other layouts */
    mt_dbuf *d_in, *d_w, *d_out;
    mt_dbuf *d_wl[MT_WEIGHT_LAYOUT_COUNT]; /* the weights in each layout a measured template read, made on first use */
};

mt_measure_params mt_measure_default_params(void) {
    return (mt_measure_params){.warmup = 1, .min_repeats = 3, .max_repeats = 20, .min_time_ms = 30.0, .check = 1, .tolerance = 1e-4};
}

void mt_conv_bench_free(mt_conv_bench *b) {
    if (!b) return;
    mt_dbuf_free(b->d_in);
    mt_dbuf_free(b->d_w);
    mt_dbuf_free(b->d_out);
    for (int i = 1; i < MT_WEIGHT_LAYOUT_COUNT; i++) mt_dbuf_free(b->d_wl[i]);
    free(b->w);
    free(b->ref);
    free(b->scratch);
    free(b->sentinel);
    free(b);
}

mt_status mt_conv_bench_new(mt_device *dev, const mt_workload *wl, uint64_t seed, mt_conv_bench **out, char *err, size_t errlen) {
    if (!dev || !wl || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "bench: NULL argument");
    mt_status st = mt_workload_validate(wl, err, errlen);
    if (st != MT_OK) return st;
    mt_conv_bench *b = calloc(1, sizeof *b);
    if (!b) return mt__fail(err, errlen, MT_NOMEM, "bench: out of memory");
    b->dev = dev;
    b->wl = *wl;
    b->n_in = mt_workload_input_elems(wl);
    b->n_w = mt_workload_weight_elems(wl);
    b->n_out = mt_workload_output_elems(wl);
    size_t out_total = (size_t)(b->n_out + MT__GUARD_ELEMS);
    /* Before any allocation: input, weights (and one copy in another
     * layout), reference, read-back and sentinel outputs on the host; input,
     * weights (twice) and output on the device. */
    const uint64_t f = sizeof(float);
    mt_mem_need need = {.host_bytes = f * ((uint64_t)b->n_in + 2 * (uint64_t)b->n_w + (uint64_t)b->n_out + 2 * (uint64_t)out_total),
                        .device_bytes = f * ((uint64_t)b->n_in + 2 * (uint64_t)b->n_w + (uint64_t)out_total)};
    need.largest_buffer = f * (uint64_t)b->n_in;
    if (f * (uint64_t)out_total > need.largest_buffer) need.largest_buffer = f * (uint64_t)out_total;
    if (f * (uint64_t)b->n_w > need.largest_buffer) need.largest_buffer = f * (uint64_t)b->n_w;
    char what[300];
    mt_workload_format(wl, what + snprintf(what, sizeof what, "workload "), sizeof what - 9);
    if ((st = mt__check_memory(mt_device_get_info(dev), what, &need, err, errlen)) != MT_OK) {
        free(b);
        return st;
    }
    float *in = malloc(sizeof(float) * (size_t)b->n_in);
    float *w = malloc(sizeof(float) * (size_t)b->n_w);
    b->ref = malloc(sizeof(float) * (size_t)b->n_out);
    b->scratch = malloc(sizeof(float) * out_total);
    b->sentinel = malloc(sizeof(float) * out_total);
    if (!in || !w || !b->ref || !b->scratch || !b->sentinel) {
        st = mt__fail(err, errlen, MT_NOMEM, "bench: out of memory for host buffers");
        goto fail;
    }
    uint32_t bits = MT__SENTINEL_BITS;
    float sentinel;
    memcpy(&sentinel, &bits, sizeof sentinel);
    for (size_t i = 0; i < out_total; i++) b->sentinel[i] = sentinel;
    mt_fill_random(in, b->n_in, seed);
    mt_fill_random(w, b->n_w, seed ^ 0x9e3779b97f4a7c15ull);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    st = mt_conv_reference_mt(wl, in, w, b->ref, ncpu > 0 ? (int)ncpu : 1);
    if (st != MT_OK) {
        mt__fail(err, errlen, st, "bench: reference convolution failed: %s", mt_status_str(st));
        goto fail;
    }
    if ((st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)b->n_in, &b->d_in)) != MT_OK ||
        (st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)b->n_w, &b->d_w)) != MT_OK ||
        (st = mt_dbuf_alloc(dev, sizeof(float) * out_total, &b->d_out)) != MT_OK) {
        mt__fail(err, errlen, st, "bench: device allocation failed: %s", mt_status_str(st));
        goto fail;
    }
    if ((st = mt_dbuf_write(dev, b->d_in, 0, in, sizeof(float) * (size_t)b->n_in)) != MT_OK ||
        (st = mt_dbuf_write(dev, b->d_w, 0, w, sizeof(float) * (size_t)b->n_w)) != MT_OK) {
        mt__fail(err, errlen, st, "bench: upload failed: %s", mt_status_str(st));
        goto fail;
    }
    free(in);
    b->w = w;
    b->d_wl[MT_WEIGHTS_OIHW] = b->d_w;
    *out = b;
    return MT_OK;
fail:
    free(in);
    free(w);
    mt_conv_bench_free(b);
    return st;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The bench's weights in layout l, uploaded on first use. */
static mt_status weights_in(mt_conv_bench *b, mt_weight_layout l, mt_dbuf **out, char *msg, size_t msglen) {
    if ((unsigned)l >= MT_WEIGHT_LAYOUT_COUNT) return mt__fail(msg, msglen, MT_INVALID_ARG, "unknown weight layout %d", (int)l);
    if (!b->d_wl[l]) {
        int64_t n = mt_weight_layout_elems(l, &b->wl);
        if (n <= 0) return mt__fail(msg, msglen, MT_UNSUPPORTED, "weight layout %s cannot hold this workload", mt_weight_layout_name(l));
        float *h = malloc(sizeof(float) * (size_t)n);
        if (!h) return mt__fail(msg, msglen, MT_NOMEM, "bench: out of memory for %s weights", mt_weight_layout_name(l));
        mt_status st = mt_weights_to_layout(l, &b->wl, b->w, h);
        mt_dbuf *d = NULL;
        if (st == MT_OK) st = mt_dbuf_alloc(b->dev, sizeof(float) * (size_t)n, &d);
        if (st == MT_OK) st = mt_dbuf_write(b->dev, d, 0, h, sizeof(float) * (size_t)n);
        free(h);
        if (st != MT_OK) {
            mt_dbuf_free(d);
            return mt__fail(msg, msglen, st, "bench: %s weights: %s", mt_weight_layout_name(l), mt_status_str(st));
        }
        b->d_wl[l] = d;
    }
    *out = b->d_wl[l];
    return MT_OK;
}

static mt_status result(mt_measure_result *res, mt_status st) {
    res->status = st;
    return st;
}

/* Runs once over sentinel-filled output and compares with the reference. */
static mt_status check_output(mt_conv_bench *b, mt_program *prog, mt_dbuf **args, const mt_kernel_resources *kr, double tol,
                              mt_measure_result *res) {
    size_t out_total = (size_t)(b->n_out + MT__GUARD_ELEMS);
    mt_status st = mt_dbuf_write(b->dev, b->d_out, 0, b->sentinel, sizeof(float) * out_total);
    if (st != MT_OK) {
        snprintf(res->message, sizeof res->message, "could not reset the output buffer: %s", mt_status_str(st));
        return st;
    }
    double t;
    st = mt_program_run(b->dev, prog, args, 3, kr->grid, kr->block, 0, 1, &t, res->message, sizeof res->message);
    if (st != MT_OK) return st == MT_INVALID_CONFIG ? st : MT_LAUNCH;
    st = mt_dbuf_read(b->dev, b->d_out, 0, b->scratch, sizeof(float) * out_total);
    if (st != MT_OK) {
        snprintf(res->message, sizeof res->message, "could not read the output back: %s", mt_status_str(st));
        return MT_LAUNCH;
    }
    if (memcmp(b->scratch + b->n_out, b->sentinel + b->n_out, sizeof(float) * MT__GUARD_ELEMS) != 0) {
        int64_t i = 0;
        while (i < MT__GUARD_ELEMS && memcmp(b->scratch + b->n_out + i, b->sentinel + b->n_out + i, sizeof(float)) == 0) i++;
        snprintf(res->message, sizeof res->message, "out-of-bounds write: guard element %lld after the output was overwritten", (long long)i);
        return MT_WRONG_RESULT;
    }
    double err = 0;
    int64_t bad = -1;
    st = mt_compare(b->scratch, b->ref, b->n_out, &err, &bad);
    res->max_rel_err = err;
    if (st != MT_OK) {
        snprintf(res->message, sizeof res->message, "output element %lld is NaN/Inf or unwritten", (long long)bad);
        return MT_WRONG_RESULT;
    }
    if (!(err <= tol)) {
        snprintf(res->message, sizeof res->message, "normalised error %.3g exceeds %.3g (first large difference at element %lld)", err, tol,
                 (long long)bad);
        return MT_WRONG_RESULT;
    }
    return MT_OK;
}

/* The IR of cfg, checked against the device's launch limits and compiled
 * (through the binary cache): *k, *kr and *prog on MT_OK, res->build_s the
 * compile time. Otherwise res->message says why: MT_INVALID_CONFIG for a
 * kernel over a limit (also one only the compiler sees, such as CUDA's ptxas
 * report), MT_BUILD for a compile error. */
static mt_status build_checked(mt_device *dev, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfg,
                               mt_kernel **k, mt_kernel_resources *kr, mt_program **prog, mt_measure_result *res) {
    mt_status st = mt_template_build(t, wl, sp, cfg, k, res->message, sizeof res->message);
    if (st != MT_OK) return st;
    st = mt_kernel_analyze(*k, kr, res->message, sizeof res->message);
    if (st != MT_OK) return MT_INVALID_CONFIG;
    mt_device_limits lim = mt_device_get_limits(dev);
    st = mt_kernel_check_limits(kr, &lim, res->message, sizeof res->message);
    if (st != MT_OK) return st;
    st = mt_program_build(dev, *k, prog, res->message, sizeof res->message);
    if (st != MT_OK) return st == MT_NOMEM || st == MT_INVALID_CONFIG ? st : MT_BUILD;
    res->build_s = mt_program_build_seconds(*prog);
    return MT_OK;
}

mt_status mt_conv_compile(mt_device *dev, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfg,
                          int warm_launch, mt_measure_result *res) {
    if (!res) return MT_INVALID_ARG;
    memset(res, 0, sizeof *res);
    res->max_rel_err = -1;
    if (!dev || !wl || !t || !sp || !cfg) {
        snprintf(res->message, sizeof res->message, "NULL argument");
        return result(res, MT_INVALID_ARG);
    }
    mt_kernel *k = NULL;
    mt_program *prog = NULL;
    mt_dbuf *args[3] = {NULL, NULL, NULL};
    mt_kernel_resources kr;
    mt_status st = build_checked(dev, wl, t, sp, cfg, &k, &kr, &prog, res);
    if (st != MT_OK || !warm_launch) goto done;
    /* One work-group over scratch buffers of the workload's sizes (contents
     * undefined: the output is thrown away). Its launch is where PoCL
     * generates the work-group code for this block size and caches it on
     * disk, which the timing worker then finds. */
    const size_t bytes[3] = {sizeof(float) * (size_t)mt_workload_input_elems(wl),
                             sizeof(float) * (size_t)mt_weight_layout_elems(mt_template_config_weight_layout(t, sp, cfg), wl),
                             sizeof(float) * ((size_t)mt_workload_output_elems(wl) + MT__GUARD_ELEMS)};
    for (int i = 0; i < 3 && st == MT_OK; i++) st = mt_dbuf_alloc(dev, bytes[i], &args[i]);
    if (st != MT_OK) {
        snprintf(res->message, sizeof res->message, "cannot allocate scratch buffers for the first launch: %s", mt_status_str(st));
        goto done;
    }
    const int64_t one_group[3] = {1, 1, 1};
    double t0 = now_s();
    double ms;
    st = mt_program_run(dev, prog, args, 3, one_group, kr.block, 0, 1, &ms, res->message, sizeof res->message);
    if (st != MT_OK) {
        st = MT_LAUNCH;
        goto done;
    }
    /* A cached binary was warmed before (the driver's cache has its code):
     * build_s stays 0 for it, as for any cache hit. */
    if (!mt_program_from_cache(prog)) res->build_s += now_s() - t0;
    res->message[0] = '\0';
done:
    for (int i = 0; i < 3; i++) mt_dbuf_free(args[i]);
    mt_program_free(prog);
    mt_kernel_free(k);
    return result(res, st);
}

/* `repeats` timed runs of prog; warm, after `warmup` untimed ones; cold
 * (the caller warmed up), with the weights evicted before each timed run
 * (outside its timing). Only the
 * weights: a network's activations live in one reused arena that stays in
 * the caches, and evicting the output too made 1x1 layers at 56x56 time
 * 1.5-2x slower than inside ResNet-50 (weights alone: within 0.73-1.03x
 * of their in-network times over nine layers, warm 0.69-0.95x). MT_LAUNCH
 * when a launch fails, the reason in msg. */
static mt_status timed_runs(mt_conv_bench *b, mt_program *prog, mt_dbuf **args, const mt_kernel_resources *kr, int warmup, int repeats,
                            int cold, mt_dbuf *wbuf, double *times, char *msg, size_t msglen) {
    if (!cold) return mt_program_run(b->dev, prog, args, 3, kr->grid, kr->block, warmup, repeats, times, msg, msglen) == MT_OK ? MT_OK : MT_LAUNCH;
    for (int i = 0; i < repeats; i++) {
        if (mt_dbuf_evict(b->dev, wbuf, msg, msglen) != MT_OK) return MT_LAUNCH;
        if (mt_program_run(b->dev, prog, args, 3, kr->grid, kr->block, 0, 1, times + i, msg, msglen) != MT_OK) return MT_LAUNCH;
    }
    return MT_OK;
}

mt_status mt_conv_bench_measure(mt_conv_bench *b, const mt_template *t, const mt_space *sp, const mt_config *cfg,
                                const mt_measure_params *params, mt_measure_result *res) {
    if (!res) return MT_INVALID_ARG;
    memset(res, 0, sizeof *res);
    res->max_rel_err = -1;
    if (!b || !t || !sp || !cfg) {
        snprintf(res->message, sizeof res->message, "NULL argument");
        return result(res, MT_INVALID_ARG);
    }
    mt_measure_params p = params ? *params : mt_measure_default_params();
    if (p.min_repeats < 1) p.min_repeats = 1;
    if (p.max_repeats < p.min_repeats) p.max_repeats = p.min_repeats;
    if (p.warmup < 0) p.warmup = 0;

    mt_kernel *k = NULL;
    mt_program *prog = NULL;
    double *times = NULL;
    mt_kernel_resources kr;
    mt_status st = build_checked(b->dev, &b->wl, t, sp, cfg, &k, &kr, &prog, res);
    if (st != MT_OK) goto done;
    mt_dbuf *wbuf = NULL;
    if ((st = weights_in(b, mt_template_config_weight_layout(t, sp, cfg), &wbuf, res->message, sizeof res->message)) != MT_OK) goto done;
    mt_dbuf *args[3] = {b->d_in, wbuf, b->d_out};
    if (p.check) {
        st = check_output(b, prog, args, &kr, p.tolerance, res);
        if (st != MT_OK) goto done;
    }
    times = malloc(sizeof(double) * (size_t)p.max_repeats);
    if (!times) {
        st = MT_NOMEM;
        goto done;
    }
    int n = p.min_repeats, cold = 0;
    if (p.cold && mt_device_info_can_evict(mt_device_get_info(b->dev))) {
        /* Cold only where the device can evict; the warm-up first, so that
         * the input and output are where a network's layers leave them
         * (timed_runs evicts the weights before each run). */
        double warm_ms;
        if (p.warmup > 0 &&
            mt_program_run(b->dev, prog, args, 3, kr.grid, kr.block, p.warmup - 1, 1, &warm_ms, res->message, sizeof res->message) != MT_OK) {
            st = MT_LAUNCH;
            goto done;
        }
        p.warmup = 0;
        cold = 1;
    }
    if ((st = timed_runs(b, prog, args, &kr, p.warmup, n, cold, wbuf, times, res->message, sizeof res->message)) != MT_OK) goto done;
    double total = 0;
    for (int i = 0; i < n; i++) total += times[i];
    if (total < p.min_time_ms && n < p.max_repeats) {
        /* Enough further runs to reach min_time_ms, within max_repeats. */
        double per = total / n;
        int more = per > 0 ? (int)ceil((p.min_time_ms - total) / per) : p.max_repeats - n;
        if (more > p.max_repeats - n) more = p.max_repeats - n;
        if (more > 0) {
            if ((st = timed_runs(b, prog, args, &kr, 0, more, cold, wbuf, times + n, res->message, sizeof res->message)) != MT_OK) goto done;
            n += more;
        }
    }
    res->cold = cold;
    res->nruns = n < MT_MEASURE_MAX_RUNS ? n : MT_MEASURE_MAX_RUNS;
    memcpy(res->run_ms, times, sizeof(double) * (size_t)res->nruns);
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    res->repeats = n;
    res->min_ms = times[0];
    res->median_ms = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    res->gflops = res->median_ms > 0 ? mt_workload_flops(&b->wl) / (res->median_ms * 1e6) : 0;
    res->message[0] = '\0';
    st = MT_OK;
done:
    free(times);
    mt_program_free(prog);
    mt_kernel_free(k);
    return result(res, st);
}

mt_status mt_conv_bench_check_vendor(mt_conv_bench *b, mt_conv_bench_vendor_fn run, void *user, double tolerance, double *max_rel_err,
                                     char *err, size_t errlen) {
    if (max_rel_err) *max_rel_err = -1;
    if (!b || !run) return mt__fail(err, errlen, MT_INVALID_ARG, "bench: NULL argument");
    mt_status st = run(b->dev, &b->wl, b->d_in, b->d_w, b->d_out, user, err, errlen);
    if (st != MT_OK) return st;
    /* The output buffer is the measured kernels' too: every checked run
     * writes its sentinel first, so the vendor's output here is harmless. */
    st = mt_dbuf_read(b->dev, b->d_out, 0, b->scratch, sizeof(float) * (size_t)b->n_out);
    if (st != MT_OK) return mt__fail(err, errlen, st, "bench: reading the vendor library's output back failed: %s", mt_status_str(st));
    double e = 0;
    int64_t bad = -1;
    st = mt_compare(b->scratch, b->ref, b->n_out, &e, &bad);
    if (max_rel_err) *max_rel_err = e;
    if (st != MT_OK)
        return mt__fail(err, errlen, MT_WRONG_RESULT, "the vendor library's output element %lld is NaN/Inf or unwritten", (long long)bad);
    if (!(e <= tolerance))
        return mt__fail(err, errlen, MT_WRONG_RESULT,
                        "the vendor library's normalised error %.3g exceeds %.3g (first large difference at element %lld)", e, tolerance,
                        (long long)bad);
    return MT_OK;
}
