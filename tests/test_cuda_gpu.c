/* CUDA on a GPU (cuda:0): device description, buffers, event timings,
 * launch limits, the cubin cache, every template on the harness's workloads
 * (conv_workloads.h) checked against the CPU reference and against cuDNN's
 * output, cuDNN's timings, builds from several threads, the measurer with
 * its worker on CUDA, and a faulting kernel reported cleanly (in a child
 * process: a fault leaves the context unusable).
 *
 * Where no CUDA device can be opened every test prints
 * "SKIP: no CUDA device: <reason>" and skips; the binary still passes.
 * MTGPU_HARNESS_CONFIGS sets the configs per (workload, template) (default 2);
 * MTGPU_GPU_TEST_BUDGET_S the seconds the template sweep may take (default 75,
 * so that the whole binary fits bench/gpu/run.sh's 150 s per test). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_backend.h"
#include "program.h"
#include "mtgpu/device.h"
#include "measure.h"
#include "measurer.h"
#include "reference.h"
#include "template.h"
#include "mtgpu/workload.h"

#include "conv_workloads.h"

static mt_device *g_dev;
static char g_why[1536];
static char g_cache[1024]; /* this run's own cubin cache */
static const char *g_argv0;

#define REQUIRE_GPU()                                           \
    do {                                                        \
        if (!g_dev) {                                           \
            printf("SKIP: no CUDA device: %s\n", g_why);        \
            fflush(stdout);                                     \
            skip();                                             \
        }                                                       \
    } while (0)

#define REQUIRE_CUDNN()                                         \
    do {                                                        \
        char why_[1024];                                        \
        if (!mt_cudnn_available(why_, sizeof why_)) {           \
            printf("SKIP: cuDNN unavailable: %s\n", why_);      \
            fflush(stdout);                                     \
            skip();                                             \
        }                                                       \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Files in dir whose names end in suffix. */
static int count_files(const char *dir, const char *suffix, char *last, size_t lastlen) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > sl && strcmp(e->d_name + l - sl, suffix) == 0) {
            n++;
            if (last) snprintf(last, lastlen, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return n;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            remove_dir(path);
        else
            unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* A fresh directory under $MTGPU_CACHE_DIR (the test environment's) or /tmp. */
static void make_temp_dir(const char *tag, char *out, size_t len) {
    const char *base = getenv("MTGPU_CACHE_DIR");
    if (!base || !*base) base = "/tmp";
    mkdir(base, 0700);
    snprintf(out, len, "%s/%s-XXXXXX", base, tag);
    if (!mkdtemp(out)) snprintf(out, len, "/tmp/%s-%ld", tag, (long)getpid()), mkdir(out, 0700);
}

static mt_device *open_cuda(const char *cache_dir, char *err, size_t errlen) {
    mt_device_params p = mt_device_default_params();
    p.cache_dir = cache_dir;
    mt_device *d = NULL;
    if (mt_device_open("cuda:0", &p, &d, err, errlen) != MT_OK) return NULL;
    return d;
}

/* ------------------------------------------------------------ device */

static void test_gpu_info(void **state) {
    (void)state;
    REQUIRE_GPU();
    const mt_device_info *d = mt_device_get_info(g_dev);
    printf("cuda:0: %s (%s), driver %s, %d SMs at %d MHz, %.1f GiB, %llu KiB shared/block, max block %lld (%lld x %lld x %lld), "
           "%d registers/thread, peak ~%.0f GFLOP/s, fingerprint %s\n",
           d->name, d->platform, d->driver, d->compute_units, d->clock_mhz, (double)d->global_mem_bytes / (1 << 30),
           (unsigned long long)d->local_mem_bytes / 1024, (long long)d->max_work_group_size, (long long)d->max_work_item_sizes[0],
           (long long)d->max_work_item_sizes[1], (long long)d->max_work_item_sizes[2], d->max_registers_per_thread, d->peak_gflops,
           d->fingerprint);
    assert_int_equal(d->backend, MT_BACKEND_CUDA);
    assert_int_equal(d->index, 0);
    assert_int_equal(strncmp(d->platform, "CUDA sm_", 8), 0);
    assert_true(strlen(d->name) > 0);
    assert_non_null(strstr(d->driver, "CUDA "));
    assert_int_equal(d->is_cpu, 0);
    assert_true(d->compute_units > 0);
    assert_true(d->clock_mhz > 0);
    assert_true(d->global_mem_bytes > ((uint64_t)1 << 30));
    assert_true(d->local_mem_bytes >= 16 * 1024);
    assert_true(d->max_work_group_size >= 512);
    assert_true(d->max_work_item_sizes[2] >= 64);
    assert_int_equal(d->max_registers_per_thread, MT_CUDA_MAX_REGISTERS);
    assert_true(d->peak_gflops > 1000);
    assert_int_equal((int)strlen(d->fingerprint), 16);

    /* Listed the same way, with the same fingerprint. */
    mt_device_info infos[16];
    int count = 0, found = 0;
    char notes[2048];
    assert_int_equal(mt_device_list(infos, 16, &count, notes, sizeof notes), MT_OK);
    for (int i = 0; i < count && i < 16; i++)
        if (infos[i].backend == MT_BACKEND_CUDA && infos[i].index == 0) {
            found = 1;
            assert_string_equal(infos[i].fingerprint, d->fingerprint);
            assert_string_equal(infos[i].name, d->name);
        }
    assert_true(found);
    mt_device_limits lim = mt_device_get_limits(g_dev);
    assert_int_equal(lim.max_grid_dim[1], 65535);
    assert_int_equal(lim.local_mem_bytes, (int64_t)d->local_mem_bytes);
    char why[512];
    int dnn = mt_cudnn_available(why, sizeof why);
    printf("cuDNN: %s%s\n", dnn ? "" : "unavailable: ", why);
}

static void test_gpu_buffers(void **state) {
    (void)state;
    REQUIRE_GPU();
    enum { N = 1 << 18 };
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    assert_non_null(a);
    assert_non_null(b);
    for (int i = 0; i < N; i++) a[i] = (float)i * 0.5f;
    mt_dbuf *buf = NULL;
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * N, &buf), MT_OK);
    assert_int_equal(mt_dbuf_size(buf), sizeof(float) * N);
    assert_int_equal(mt_dbuf_write(g_dev, buf, 0, a, sizeof(float) * N), MT_OK);
    memset(b, 0, sizeof(float) * N);
    assert_int_equal(mt_dbuf_read(g_dev, buf, 0, b, sizeof(float) * N), MT_OK);
    assert_memory_equal(a, b, sizeof(float) * N);
    /* At an offset. */
    float seven[3] = {7, 7, 7}, back[5];
    assert_int_equal(mt_dbuf_write(g_dev, buf, sizeof(float) * 10, seven, sizeof seven), MT_OK);
    assert_int_equal(mt_dbuf_read(g_dev, buf, sizeof(float) * 9, back, sizeof back), MT_OK);
    assert_true(back[0] == a[9] && back[1] == 7 && back[3] == 7 && back[4] == a[13]);
    /* Out of bounds and impossible sizes. */
    assert_int_equal(mt_dbuf_read(g_dev, buf, sizeof(float) * N - 4, back, 8), MT_INVALID_ARG);
    mt_dbuf *huge = (mt_dbuf *)1;
    assert_int_equal(mt_dbuf_alloc(g_dev, (size_t)1 << 50, &huge), MT_NOMEM);
    assert_null(huge);
    mt_dbuf_free(buf);
    free(a);
    free(b);
}

/* ------------------------------------------------------------ kernels */

#define SAXPY_N 100000
static const char SAXPY[] = "extern \"C\" __global__ void saxpy(const float *__restrict__ x, float *__restrict__ y) {\n"
                            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i < 100000) y[i] = 2.0f * x[i] + y[i];\n"
                            "}\n";

static void test_gpu_saxpy_timing(void **state) {
    (void)state;
    REQUIRE_GPU();
    char log[8192];
    mt_program *p = NULL;
    mt_status st = mt_program_build_source(g_dev, SAXPY, "saxpy", &p, log, sizeof log);
    if (st != MT_OK) printf("build: %s\n", log);
    assert_int_equal(st, MT_OK);
    printf("saxpy: built in %.3f s%s\n", mt_program_build_seconds(p), mt_program_from_cache(p) ? " (cache)" : "");
    float *x = malloc(sizeof(float) * SAXPY_N), *y = malloc(sizeof(float) * SAXPY_N), *r = malloc(sizeof(float) * SAXPY_N);
    assert_true(x && y && r);
    mt_fill_random(x, SAXPY_N, 1);
    mt_fill_random(y, SAXPY_N, 2);
    mt_dbuf *dx = NULL, *dy = NULL;
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * SAXPY_N, &dx), MT_OK);
    assert_int_equal(mt_dbuf_alloc(g_dev, sizeof(float) * SAXPY_N, &dy), MT_OK);
    assert_int_equal(mt_dbuf_write(g_dev, dx, 0, x, sizeof(float) * SAXPY_N), MT_OK);
    assert_int_equal(mt_dbuf_write(g_dev, dy, 0, y, sizeof(float) * SAXPY_N), MT_OK);
    mt_dbuf *args[2] = {dx, dy};
    int64_t grid[3] = {(SAXPY_N + 255) / 256, 1, 1}, block[3] = {256, 1, 1};
    double t[70];
    char err[1024];
    st = mt_program_run(g_dev, p, args, 2, grid, block, 0, 1, t, err, sizeof err);
    if (st != MT_OK) printf("run: %s\n", err);
    assert_int_equal(st, MT_OK);
    assert_int_equal(mt_dbuf_read(g_dev, dy, 0, r, sizeof(float) * SAXPY_N), MT_OK);
    for (int i = 0; i < SAXPY_N; i++) assert_true(r[i] == 2.0f * x[i] + y[i]);

    /* More repeats than one batch of events; every time positive. */
    st = mt_program_run(g_dev, p, args, 2, grid, block, 3, 70, t, err, sizeof err);
    if (st != MT_OK) printf("run: %s\n", err);
    assert_int_equal(st, MT_OK);
    double lo = 1e9, hi = 0;
    for (int i = 0; i < 70; i++) {
        assert_true(t[i] > 0 && t[i] < 1000);
        lo = t[i] < lo ? t[i] : lo;
        hi = t[i] > hi ? t[i] : hi;
    }
    printf("saxpy of %d: event times %.4f .. %.4f ms over 70 runs\n", SAXPY_N, lo, hi);

    /* Launches the device or the kernel cannot take are invalid configs. */
    int64_t big[3] = {1, 1, 1}, b2048[3] = {2048, 1, 1}, bz[3] = {1, 1, 128}, gy[3] = {1, 70000, 1};
    assert_int_equal(mt_program_run(g_dev, p, args, 2, big, b2048, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    printf("block of 2048: %s\n", err);
    assert_int_equal(mt_program_run(g_dev, p, args, 2, big, bz, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    assert_int_equal(mt_program_run(g_dev, p, args, 2, gy, block, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    printf("grid y of 70000: %s\n", err);
    /* A wrong argument count is caught where the driver can count parameters (CUDA 12.4+). */
    st = mt_program_run(g_dev, p, args, 1, grid, block, 0, 1, t, err, sizeof err);
    printf("1 argument for 2 parameters: %s: %s\n", mt_status_name(st), err);
    if (st != MT_OK) assert_int_equal(st, MT_INVALID_ARG);

    /* __launch_bounds__ is the kernel's own limit. */
    static const char bounded[] = "extern \"C\" __global__ void __launch_bounds__(128) bounded(float *y) { y[threadIdx.x] = 1.0f; }\n";
    mt_program *pb = NULL;
    assert_int_equal(mt_program_build_source(g_dev, bounded, "bounded", &pb, log, sizeof log), MT_OK);
    int64_t b256[3] = {256, 1, 1};
    assert_int_equal(mt_program_run(g_dev, pb, args + 1, 1, big, b256, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    printf("256 threads into __launch_bounds__(128): %s\n", err);
    mt_program_free(pb);

    /* Build errors. */
    mt_program *bad = NULL;
    assert_int_equal(mt_program_build_source(g_dev, SAXPY, "nope", &bad, log, sizeof log), MT_NOT_FOUND);
    assert_null(bad);
    assert_int_equal(mt_program_build_source(g_dev, "extern \"C\" __global__ void k( {", "k", &bad, log, sizeof log), MT_BUILD);
    assert_true(strlen(log) > 0);

    mt_dbuf_free(dx);
    mt_dbuf_free(dy);
    mt_program_free(p);
    free(x);
    free(y);
    free(r);
}

static void test_gpu_cache(void **state) {
    (void)state;
    REQUIRE_GPU();
    char dir[1100], entry[1400], log[4096], err[1024];
    make_temp_dir("cubin-cache", dir, sizeof dir);
    mt_device *dev = open_cuda(dir, err, sizeof err);
    assert_non_null(dev);
    mt_program *p = NULL;
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    assert_int_equal(count_files(dir, ".cubin", entry, sizeof entry), 1);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    assert_true(mt_program_build_seconds(p) == 0);
    mt_program_free(p);
    mt_device_close(dev);

    /* A new handle hits too; a truncated entry is rebuilt and rewritten. */
    dev = open_cuda(dir, err, sizeof err);
    assert_non_null(dev);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);
    assert_int_equal(truncate(entry, 40), 0);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);

    /* A template's kernel: the second build is a cache hit. */
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find("direct");
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_device_limits lim = mt_device_get_limits(dev);
    uint64_t rng = 5;
    mt_config cfg;
    int found = 0;
    for (int i = 0; i < 4000 && !found; i++) {
        mt_space_random(&sp, &rng, &cfg);
        found = mt_template_check(t, &wl, &sp, &cfg, &lim, NULL, 0) == MT_OK;
    }
    assert_true(found);
    mt_kernel *k = NULL;
    assert_int_equal(mt_template_build(t, &wl, &sp, &cfg, &k, err, sizeof err), MT_OK);
    assert_int_equal(mt_program_build(dev, k, &p, log, sizeof log), MT_OK);
    printf("direct kernel: %.2f s to build\n", mt_program_build_seconds(p));
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    assert_int_equal(mt_program_build(dev, k, &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);
    assert_int_equal(count_files(dir, ".cubin", NULL, 0), 2);
    mt_kernel_free(k);
    mt_space_free(&sp);
    mt_device_close(dev);

    /* use_cache = 0: nothing read or written. */
    char off[1100];
    make_temp_dir("cubin-off", off, sizeof off);
    mt_device_params dp = mt_device_default_params();
    dp.cache_dir = off;
    dp.use_cache = 0;
    assert_int_equal(mt_device_open("cuda:0", &dp, &dev, err, sizeof err), MT_OK);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    mt_device_close(dev);
    assert_int_equal(count_files(off, ".cubin", NULL, 0), 0);
    remove_dir(off);
    remove_dir(dir);
}

/* ------------------------------------------------------ the harness */

/* Runs k once on fresh buffers with in/wt; out receives the output. */
static mt_status run_kernel(mt_device *dev, const mt_kernel *k, const mt_workload *wl, const float *in, const float *wt, float *out,
                            char *err, size_t errlen) {
    mt_kernel_resources kr;
    mt_status st = mt_kernel_analyze(k, &kr, err, errlen);
    if (st != MT_OK) return st;
    mt_program *p = NULL;
    char log[8192];
    st = mt_program_build(dev, k, &p, log, sizeof log);
    if (st != MT_OK) {
        snprintf(err, errlen, "build: %.1900s", log);
        return st;
    }
    size_t nin = sizeof(float) * (size_t)mt_workload_input_elems(wl), nwt = sizeof(float) * (size_t)mt_workload_weight_elems(wl),
           nout = sizeof(float) * (size_t)mt_workload_output_elems(wl);
    mt_dbuf *b[3] = {NULL, NULL, NULL};
    if ((st = mt_dbuf_alloc(dev, nin, &b[0])) == MT_OK && (st = mt_dbuf_alloc(dev, nwt, &b[1])) == MT_OK &&
        (st = mt_dbuf_alloc(dev, nout, &b[2])) == MT_OK && (st = mt_dbuf_write(dev, b[0], 0, in, nin)) == MT_OK &&
        (st = mt_dbuf_write(dev, b[1], 0, wt, nwt)) == MT_OK) {
        double t;
        st = mt_program_run(dev, p, b, 3, kr.grid, kr.block, 0, 1, &t, err, errlen);
        if (st == MT_OK) st = mt_dbuf_read(dev, b[2], 0, out, nout);
    }
    for (int i = 0; i < 3; i++) mt_dbuf_free(b[i]);
    mt_program_free(p);
    return st;
}

static int configs_per_case(void) {
    const char *e = getenv("MTGPU_HARNESS_CONFIGS");
    int n = e ? atoi(e) : 2;
    return n > 0 ? n : 2;
}

/* Every template, configs_per_case() valid configs each, on every harness
 * workload: mt_conv_bench_measure checks each against the CPU reference
 * (NaN/Inf, unwritten outputs, guard region) and times it; the same kernel
 * is run again on the workload's own data and compared with the CPU
 * reference and with cuDNN's strict output directly. */
static void test_gpu_templates(void **state) {
    (void)state;
    REQUIRE_GPU();
    char why[1024];
    int dnn = mt_cudnn_available(why, sizeof why);
    if (!dnn) printf("cuDNN unavailable (%s): kernels are compared with the CPU reference only\n", why);
    const char *budget_env = getenv("MTGPU_GPU_TEST_BUDGET_S");
    const double budget_s = budget_env && atof(budget_env) > 0 ? atof(budget_env) : 75.0, tol = 1e-4;
    double t0 = now_s();
    int want = configs_per_case(), ran = 0, failures = 0, out_of_time = 0;
    int per_template[16] = {0};
    mt_device_limits lim = mt_device_get_limits(g_dev);
    for (int step = 0; step < MT_TEST_NCONV_WORKLOADS && !out_of_time; step++) {
        /* Workloads in a stride-7 order (a permutation while the count is not
         * a multiple of 7): every kind of shape, depthwise ones included, comes
         * early, should the budget stop the sweep. */
        int w = MT_TEST_NCONV_WORKLOADS % 7 ? step * 7 % MT_TEST_NCONV_WORKLOADS : step;
        const char *text = mt_test_conv_workloads[w];
        mt_workload wl;
        char err[2048];
        assert_int_equal(mt_workload_parse(text, &wl, err, sizeof err), MT_OK);
        int64_t nin = mt_workload_input_elems(&wl), nwt = mt_workload_weight_elems(&wl), nout = mt_workload_output_elems(&wl);
        float *in = malloc(sizeof(float) * nin), *wt = malloc(sizeof(float) * nwt), *ref = malloc(sizeof(float) * nout),
              *dnn_out = malloc(sizeof(float) * nout), *out = malloc(sizeof(float) * nout);
        assert_true(in && wt && ref && dnn_out && out);
        mt_fill_random(in, nin, 11 + w);
        mt_fill_random(wt, nwt, 101 + w);
        assert_int_equal(mt_conv_reference(&wl, in, wt, ref), MT_OK);
        int have_dnn = 0;
        if (dnn) {
            mt_cudnn_params cp = mt_cudnn_default_params();
            cp.repeats = 3;
            mt_cudnn_result res;
            mt_status st = mt_cudnn_reference(g_dev, &wl, &cp, in, wt, dnn_out, &res, err, sizeof err);
            if (st != MT_OK) {
                print_error("%s: cuDNN: %s: %s\n", text, mt_status_name(st), err);
                failures++;
            } else {
                double e = -1;
                assert_int_equal(mt_compare(dnn_out, ref, nout, &e, NULL), MT_OK);
                printf("%s: cuDNN %s %.4f ms (err %.2g vs CPU)\n", text, res.strict_algo, res.strict_ms, e);
                if (!(e <= tol)) {
                    print_error("%s: cuDNN's output differs from the CPU reference by %.3g\n", text, e);
                    failures++;
                }
                have_dnn = 1;
            }
        }
        mt_conv_bench *bench = NULL;
        assert_int_equal(mt_conv_bench_new(g_dev, &wl, 42, &bench, err, sizeof err), MT_OK);
        for (int ti = 0; ti < mt_template_count() && !out_of_time; ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &wl)) continue;
            mt_space sp;
            assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
            uint64_t rng = 0x1234567ull;
            for (const char *c = text; *c; c++) rng = rng * 131 + (unsigned char)*c;
            for (const char *c = mt_template_name(t); *c; c++) rng = rng * 131 + (unsigned char)*c;
            int got = 0, draws = 0;
            while (got < want && draws < 4000) {
                if (now_s() - t0 > budget_s) {
                    out_of_time = 1;
                    break;
                }
                mt_config cfg;
                mt_space_random(&sp, &rng, &cfg);
                draws++;
                if (mt_template_check(t, &wl, &sp, &cfg, &lim, NULL, 0) != MT_OK) continue;
                char ctext[1024];
                mt_config_format(&sp, &cfg, ctext, sizeof ctext);
                mt_measure_params mp = mt_measure_default_params();
                mp.min_time_ms = 0;
                mp.min_repeats = mp.max_repeats = 3;
                mt_measure_result r;
                mt_conv_bench_measure(bench, t, &sp, &cfg, &mp, &r);
                if (r.status == MT_INVALID_CONFIG) {
                    /* Over a limit only the compiler saw (spills): a config the device cannot take. */
                    printf("  %s [%s]: invalid on this device: %s\n", mt_template_name(t), ctext, r.message);
                    continue;
                }
                got++;
                ran++;
                if (r.status != MT_OK) {
                    print_error("%s %s [%s]: %s: %s\n", mt_template_name(t), text, ctext, mt_status_name(r.status), r.message);
                    failures++;
                    continue;
                }
                for (int i = 0; i < r.nruns; i++) assert_true(r.run_ms[i] > 0);
                mt_kernel *k = NULL;
                assert_int_equal(mt_template_build(t, &wl, &sp, &cfg, &k, err, sizeof err), MT_OK);
                mt_status st = run_kernel(g_dev, k, &wl, in, wt, out, err, sizeof err);
                mt_kernel_free(k);
                double e_ref = -1, e_dnn = -1;
                if (st == MT_OK) st = mt_compare(out, ref, nout, &e_ref, NULL);
                if (st == MT_OK && have_dnn) st = mt_compare(out, dnn_out, nout, &e_dnn, NULL);
                if (st != MT_OK || !(e_ref <= tol) || (have_dnn && !(e_dnn <= tol))) {
                    print_error("%s %s [%s]: %s: err %.3g vs CPU, %.3g vs cuDNN: %s\n", mt_template_name(t), text, ctext, mt_status_name(st),
                                e_ref, e_dnn, st == MT_OK ? "" : err);
                    failures++;
                    continue;
                }
                per_template[ti < 16 ? ti : 15]++;
                printf("  %-9s %8.4f ms  err %.2g (CPU) %.2g (cuDNN)  %s\n", mt_template_name(t), r.median_ms, e_ref, e_dnn, ctext);
            }
            mt_space_free(&sp);
        }
        mt_conv_bench_free(bench);
        free(in);
        free(wt);
        free(ref);
        free(dnn_out);
        free(out);
    }
    printf("templates on cuda:0: %d configs ran, %d failures, %.1f s%s\n", ran, failures, now_s() - t0,
           out_of_time ? " (stopped at the time budget)" : "");
    for (int ti = 0; ti < mt_template_count() && ti < 16; ti++) {
        printf("  %s: %d correct\n", mt_template_name(mt_template_at(ti)), per_template[ti]);
        /* Past the budget, later workloads (the depthwise ones among them) were not reached. */
        if (!out_of_time) assert_true(per_template[ti] > 0);
    }
    assert_true(ran > 0);
    assert_int_equal(failures, 0);
}

/* ---------------------------------------------------------------- cuDNN */

static void check_cudnn(const char *text, double tol) {
    mt_workload wl;
    char err[2048];
    assert_int_equal(mt_workload_parse(text, &wl, err, sizeof err), MT_OK);
    int64_t nin = mt_workload_input_elems(&wl), nwt = mt_workload_weight_elems(&wl), nout = mt_workload_output_elems(&wl);
    float *in = malloc(sizeof(float) * nin), *wt = malloc(sizeof(float) * nwt), *ref = malloc(sizeof(float) * nout),
          *out = malloc(sizeof(float) * nout);
    assert_true(in && wt && ref && out);
    mt_fill_random(in, nin, 3);
    mt_fill_random(wt, nwt, 4);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(mt_conv_reference_mt(&wl, in, wt, ref, ncpu > 0 ? (int)ncpu : 1), MT_OK);
    mt_cudnn_result r;
    double t0 = now_s();
    mt_status st = mt_cudnn_reference(g_dev, &wl, NULL, in, wt, out, &r, err, sizeof err);
    if (st != MT_OK) printf("%s: %s: %s\n", text, mt_status_name(st), err);
    assert_int_equal(st, MT_OK);
    double e = -1;
    assert_int_equal(mt_compare(out, ref, nout, &e, NULL), MT_OK);
    printf("%s: cuDNN %s: strict %.4f ms (%s, find %.4f ms, %zu B workspace, %d algorithms), default %.4f ms (%s, %s math, %d), "
           "err %.2g, %.1f s in all\n",
           text, r.version, r.strict_ms, r.strict_algo, r.strict_find_ms, r.strict_workspace, r.strict_algos_tried, r.default_ms,
           r.default_algo, r.default_math, r.default_algos_tried, e, now_s() - t0);
    assert_true(e <= tol);
    assert_true(r.strict_ms > 0 && r.default_ms > 0);
    assert_true(r.strict_algos_tried > 0 && r.default_algos_tried > 0);
    assert_string_not_equal(r.strict_algo, "unknown");
    assert_string_not_equal(r.default_algo, "unknown");
    assert_true(strlen(r.default_math) > 0);
    assert_int_equal(r.repeats, mt_cudnn_default_params().repeats);
    assert_int_equal(strncmp(r.version, "9.", 2), 0);
    free(in);
    free(wt);
    free(ref);
    free(out);
}

static void test_gpu_cudnn(void **state) {
    (void)state;
    REQUIRE_GPU();
    REQUIRE_CUDNN();
    check_cudnn("n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1", 1e-4);
    check_cudnn("n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1,groups=32", 1e-4);
    check_cudnn("n=2,c=16,h=17,w=17,k=24,r=5,s=5,stride=2,pad=2,dilation=1", 1e-4);

    /* The bench's variant: its own data, compared with its CPU reference. */
    mt_workload wl;
    char err[1024];
    assert_int_equal(mt_workload_parse("n=1,c=128,h=28,w=28,k=128,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    mt_conv_bench *b = NULL;
    assert_int_equal(mt_conv_bench_new(g_dev, &wl, 9, &b, err, sizeof err), MT_OK);
    mt_cudnn_result r;
    double e = -1;
    mt_status st = mt_conv_bench_cudnn(b, NULL, NULL, &r, &e, err, sizeof err);
    if (st != MT_OK) printf("bench cuDNN: %s\n", err);
    assert_int_equal(st, MT_OK);
    printf("bench: cuDNN strict %.4f ms, default %.4f ms, err %.2g\n", r.strict_ms, r.default_ms, e);
    assert_true(e >= 0 && e <= 1e-4);
    mt_conv_bench_free(b);

    /* Bad buffers. */
    mt_dbuf *small = NULL;
    assert_int_equal(mt_dbuf_alloc(g_dev, 64, &small), MT_OK);
    assert_int_equal(mt_cudnn_reference_dbuf(g_dev, &wl, NULL, small, small, small, &r, err, sizeof err), MT_INVALID_ARG);
    mt_dbuf_free(small);
}

/* --------------------------------------------------------------- threads */

typedef struct thread_job {
    const mt_workload *wl;
    const mt_template *t;
    const mt_space *sp;
    mt_config cfg;
    const float *in, *wt, *ref;
    mt_status st;
    double err;
    char msg[1024];
} thread_job;

static void *thread_main(void *arg) {
    thread_job *j = arg;
    int64_t nout = mt_workload_output_elems(j->wl);
    float *out = malloc(sizeof(float) * nout);
    mt_kernel *k = NULL;
    j->st = out ? mt_template_build(j->t, j->wl, j->sp, &j->cfg, &k, j->msg, sizeof j->msg) : MT_NOMEM;
    if (j->st == MT_OK) j->st = run_kernel(g_dev, k, j->wl, j->in, j->wt, out, j->msg, sizeof j->msg);
    if (j->st == MT_OK) j->st = mt_compare(out, j->ref, nout, &j->err, NULL);
    mt_kernel_free(k);
    free(out);
    return NULL;
}

/* Builds, loads and runs from several threads at once on one device handle
 * (the measurer compiles in threads): contexts pushed per call, the stream
 * serialised. */
static void test_gpu_threads(void **state) {
    (void)state;
    REQUIRE_GPU();
    enum { NT = 6 };
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=32,h=14,w=14,k=48,r=1,s=1", &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find("gemm");
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    int64_t nin = mt_workload_input_elems(&wl), nwt = mt_workload_weight_elems(&wl), nout = mt_workload_output_elems(&wl);
    float *in = malloc(sizeof(float) * nin), *wt = malloc(sizeof(float) * nwt), *ref = malloc(sizeof(float) * nout);
    assert_true(in && wt && ref);
    mt_fill_random(in, nin, 21);
    mt_fill_random(wt, nwt, 22);
    assert_int_equal(mt_conv_reference(&wl, in, wt, ref), MT_OK);
    mt_device_limits lim = mt_device_get_limits(g_dev);
    thread_job jobs[NT];
    uint64_t rng = 99;
    for (int i = 0; i < NT; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i] = (thread_job){.wl = &wl, .t = t, .sp = &sp, .in = in, .wt = wt, .ref = ref};
        int found = 0;
        for (int d = 0; d < 4000 && !found; d++) {
            mt_space_random(&sp, &rng, &jobs[i].cfg);
            found = mt_template_check(t, &wl, &sp, &jobs[i].cfg, &lim, NULL, 0) == MT_OK;
        }
        assert_true(found);
    }
    pthread_t tid[NT];
    for (int i = 0; i < NT; i++) assert_int_equal(pthread_create(&tid[i], NULL, thread_main, &jobs[i]), 0);
    for (int i = 0; i < NT; i++) pthread_join(tid[i], NULL);
    int bad = 0;
    for (int i = 0; i < NT; i++) {
        if (jobs[i].st != MT_OK || !(jobs[i].err <= 1e-4)) {
            print_error("thread %d: %s, err %.3g: %s\n", i, mt_status_name(jobs[i].st), jobs[i].err, jobs[i].msg);
            bad++;
        }
    }
    printf("%d threads built and ran gemm kernels on one handle: %d failed\n", NT, bad);
    assert_int_equal(bad, 0);
    mt_space_free(&sp);
    free(in);
    free(wt);
    free(ref);
}

/* -------------------------------------------------------------- measurer */

/* The tuner's path: compiles here in threads, times in mtgpu-worker, which
 * opens cuda:0 in a process of its own. */
static void test_gpu_measurer(void **state) {
    (void)state;
    REQUIRE_GPU();
    mt_measurer_params p = mt_measurer_default_params();
    p.device = "cuda:0";
    p.cache_dir = g_cache;
    mt_measurer *m = NULL;
    mt_device_info info;
    char err[2048];
    mt_status st = mt_measurer_start(&p, &m, &info, err, sizeof err);
    if (st != MT_OK) printf("measurer: %s\n", err);
    assert_int_equal(st, MT_OK);
    assert_int_equal(info.backend, MT_BACKEND_CUDA);
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=64,h=28,w=28,k=64,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find("direct");
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    enum { N = 4 };
    mt_config cfgs[N];
    mt_device_limits lim = mt_device_info_limits(&info);
    uint64_t rng = 3;
    for (int i = 0; i < N; i++) {
        int found = 0;
        for (int d = 0; d < 4000 && !found; d++) {
            mt_space_random(&sp, &rng, &cfgs[i]);
            found = mt_template_check(t, &wl, &sp, &cfgs[i], &lim, NULL, 0) == MT_OK;
        }
        assert_true(found);
    }
    mt_measurer_result res[N];
    st = mt_measurer_measure_batch(m, &wl, t, &sp, cfgs, N, res, err, sizeof err);
    if (st != MT_OK) printf("batch: %s\n", err);
    assert_int_equal(st, MT_OK);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        char ctext[1024];
        mt_config_format(&sp, &cfgs[i], ctext, sizeof ctext);
        printf("  %s: %.4f ms, %.0f GFLOP/s, err %.2g, built in %.2f s: %s %s\n", mt_status_name(res[i].m.status), res[i].m.median_ms,
               res[i].m.gflops, res[i].m.max_rel_err, res[i].m.build_s, ctext, res[i].m.message);
        if (res[i].m.status == MT_OK) {
            ok++;
            assert_true(res[i].m.median_ms > 0);
        } else {
            assert_int_equal(res[i].m.status, MT_INVALID_CONFIG); /* anything else is a bug */
        }
    }
    assert_true(ok > 0);
    mt_space_free(&sp);
    mt_measurer_stop(m);
}

/* ---------------------------------------------------------------- faults */

/* In a child process: a kernel writing far outside any allocation. The
 * error must name the fault and say the context is unusable. */
static int fault_child(void) {
    char err[2048];
    mt_device *dev = open_cuda(NULL, err, sizeof err);
    if (!dev) return 10;
    static const char wild[] = "extern \"C\" __global__ void wild(float *p) { p[(size_t)1 << 40] = 1.0f; }\n";
    mt_program *p = NULL;
    char log[4096];
    if (mt_program_build_source(dev, wild, "wild", &p, log, sizeof log) != MT_OK) return 11;
    mt_dbuf *b = NULL;
    if (mt_dbuf_alloc(dev, 64, &b) != MT_OK) return 12;
    int64_t one[3] = {1, 1, 1};
    double t;
    mt_status st = mt_program_run(dev, p, &b, 1, one, one, 0, 1, &t, err, sizeof err);
    printf("faulting kernel: %s: %s\n", mt_status_name(st), err);
    fflush(stdout);
    if (st != MT_LAUNCH) return 13;
    if (!strstr(err, "CUDA_ERROR_") || !strstr(err, "unusable")) return 14;
    /* Freeing after a fault must not crash either. */
    mt_dbuf_free(b);
    mt_program_free(p);
    mt_device_close(dev);
    return 0;
}

static void test_gpu_fault(void **state) {
    (void)state;
    REQUIRE_GPU();
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A fresh process image: CUDA state does not survive fork. */
        char *args[] = {(char *)g_argv0, (char *)"--fault-child", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---------------------------------------------------------------- main */

static int group_setup(void **state) {
    (void)state;
    make_temp_dir("cuda-gpu", g_cache, sizeof g_cache);
    g_dev = open_cuda(g_cache, g_why, sizeof g_why);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    mt_device_close(g_dev);
    remove_dir(g_cache);
    return 0;
}

int main(int argc, char **argv) {
    g_argv0 = argv[0];
    if (argc > 1 && strcmp(argv[1], "--fault-child") == 0) return fault_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_info),       cmocka_unit_test(test_gpu_buffers), cmocka_unit_test(test_gpu_saxpy_timing),
        cmocka_unit_test(test_gpu_cache),      cmocka_unit_test(test_gpu_cudnn),   cmocka_unit_test(test_gpu_templates),
        cmocka_unit_test(test_gpu_threads),    cmocka_unit_test(test_gpu_measurer), cmocka_unit_test(test_gpu_fault),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
