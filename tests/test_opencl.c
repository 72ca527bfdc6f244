/* OpenCL backend and device dispatcher: discovery, device specs, builds and
 * the binary cache, buffers and bounds, timed launches.
 *
 * Needs an OpenCL device (PoCL on the CPU is enough); without one the whole
 * test reports skipped (exit code 77) and says why. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "mtgpu/device.h"
#include "program.h"
#include "ir.h"
#include "template.h"

#include "backend-impl.h"
#include "pocl_affinity.h"

static int g_have_opencl;
static char g_tmp[256]; /* scratch root; cache dirs live under it */

#define N_ELEMS 1000

static const char *saxpy_src =
    "__kernel void saxpy(__global const float *x, __global const float *y, __global float *out) {\n"
    "    int i = get_global_id(0);\n"
    "    if (i < 1000) out[i] = 2.0f * x[i] + y[i];\n"
    "}\n";

/* Differs from saxpy_src only so that the cache tests own their cache entry. */
static const char *saxpy_cached_src =
    "/* cache test */\n"
    "__kernel void saxpy(__global const float *x, __global const float *y, __global float *out) {\n"
    "    int i = get_global_id(0);\n"
    "    if (i < 1000) out[i] = 2.0f * x[i] + y[i];\n"
    "}\n";

#define REQUIRE_OPENCL()                                                  \
    do {                                                                  \
        if (!g_have_opencl) {                                             \
            print_message("skipped: no OpenCL device on this machine\n"); \
            skip();                                                       \
        }                                                                 \
    } while (0)

/* ---------------------------------------------------------------- helpers */

static void make_dir(const char *name, char *out, size_t len) {
    snprintf(out, len, "%s/%s", g_tmp, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

/* Removes every file in dir, then dir (it holds no subdirectories). */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) {
            char sub[512];
            snprintf(sub, sizeof sub, "%s", path);
            remove_dir(sub);
        }
    }
    closedir(d);
    rmdir(dir);
}

/* Counts files in dir; cache entries (.clbin, or .clsrc on PoCL, which keeps
 * the built source rather than a binary) are counted in *nclbin and the path
 * of the last one goes to clbin. */
static int count_files(const char *dir, int *nclbin, char *clbin, size_t len) {
    DIR *d = opendir(dir);
    int n = 0;
    *nclbin = 0;
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        size_t l = strlen(e->d_name);
        if (l > 6 && (!strcmp(e->d_name + l - 6, ".clbin") || !strcmp(e->d_name + l - 6, ".clsrc"))) {
            (*nclbin)++;
            if (clbin) snprintf(clbin, len, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    return n;
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static mt_device *open_dev(const char *cache_dir, int use_cache) {
    mt_device_params params = mt_device_default_params();
    params.cache_dir = cache_dir;
    params.use_cache = use_cache;
    mt_device *dev = NULL;
    char err[512];
    mt_status st = mt_device_open("opencl:0", &params, &dev, err, sizeof err);
    if (st != MT_OK) print_error("open: %s\n", err);
    assert_int_equal(st, MT_OK);
    assert_non_null(dev);
    return dev;
}

static mt_program *build(mt_device *dev, const char *src, int expect_cache) {
    mt_program *p = NULL;
    char log[4096];
    mt_status st = mt_program_build_source(dev, src, "saxpy", &p, log, sizeof log);
    if (st != MT_OK) print_error("build: %s\n", log);
    assert_int_equal(st, MT_OK);
    assert_non_null(p);
    if (expect_cache >= 0) assert_int_equal(mt_program_from_cache(p), expect_cache);
    if (mt_program_from_cache(p))
        assert_true(mt_program_build_seconds(p) == 0.0);
    else
        assert_true(mt_program_build_seconds(p) > 0.0);
    return p;
}

/* Runs saxpy on dev and checks every output element and the timings. */
static void run_saxpy(mt_device *dev, mt_program *p, int warmup, int repeats) {
    float x[N_ELEMS], y[N_ELEMS], out[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) {
        x[i] = (float)i * 0.5f;
        y[i] = (float)(i % 7) - 3.0f;
        out[i] = -999.0f;
    }
    mt_dbuf *bx, *by, *bo;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof x, &bx), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof y, &by), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof out, &bo), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, bx, 0, x, sizeof x), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, by, 0, y, sizeof y), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, bo, 0, out, sizeof out), MT_OK);
    mt_dbuf *args[3] = {bx, by, bo};
    const int64_t grid[3] = {16, 1, 1}, block[3] = {64, 1, 1};
    double times[8];
    assert_true(repeats <= 7);
    for (int i = 0; i < 8; i++) times[i] = -1.0;
    char err[256];
    mt_status st = mt_program_run(dev, p, args, 3, grid, block, warmup, repeats, times, err, sizeof err);
    if (st != MT_OK) print_error("run: %s\n", err);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < repeats; i++) assert_true(times[i] > 0.0 && times[i] < 10000.0);
    assert_true(times[repeats] == -1.0); /* nothing written past repeats */
    assert_int_equal(mt_dbuf_read(dev, bo, 0, out, sizeof out), MT_OK);
    for (int i = 0; i < N_ELEMS; i++) assert_true(out[i] == 2.0f * x[i] + y[i]);
    mt_dbuf_free(bx);
    mt_dbuf_free(by);
    mt_dbuf_free(bo);
}

/* ------------------------------------------------------------------ tests */

static void test_names_and_defaults(void **state) {
    (void)state;
    assert_string_equal(mt_backend_name(MT_BACKEND_OPENCL), "opencl");
    assert_string_equal(mt_backend_name(MT_BACKEND_CUDA), "cuda");
    assert_string_equal(mt_backend_name(MT_BACKEND_COUNT), "unknown");
    mt_device_params p = mt_device_default_params();
    assert_null(p.cache_dir);
    assert_int_equal(p.use_cache, 1);
}

/* mt__hash64 is FNV-1a 64 (published test vectors) and chains through the
 * seed; mt__hash64_update fed piece by piece gives the hash of the whole. */
static void test_hash(void **state) {
    (void)state;
    assert_true(mt__hash64(NULL, 0, 0) == 0xcbf29ce484222325ULL);
    assert_true(mt__hash64("a", 1, 0) == 0xaf63dc4c8601ec8cULL);
    assert_true(mt__hash64("foobar", 6, 0) == 0x85944171f73967e8ULL);
    assert_true(mt__hash64("foobar", 6, 1) != mt__hash64("foobar", 6, 0));
    assert_true(mt__hash64("bar", 3, mt__hash64("foo", 3, 0)) != mt__hash64("foobar", 6, 0));
    assert_true(mt__hash64_update(MT__HASH64_INIT, NULL, 0) == mt__hash64(NULL, 0, 0));
    assert_true(mt__hash64_update(mt__hash64_update(MT__HASH64_INIT, "foo", 3), "bar", 3) == 0x85944171f73967e8ULL);
}

static void test_list(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device_info info[16];
    char notes[1024];
    int count = -1;
    assert_int_equal(mt_device_list(info, 16, &count, notes, sizeof notes), MT_OK);
    assert_true(count >= 1);
    int count0 = -1;
    assert_int_equal(mt_device_list(NULL, 0, &count0, NULL, 0), MT_OK);
    assert_int_equal(count0, count);
    assert_int_equal(mt_device_list(NULL, 1, &count0, NULL, 0), MT_INVALID_ARG);
    assert_int_equal(mt_device_list(info, 1, NULL, NULL, 0), MT_INVALID_ARG);

    /* OpenCL devices come first, numbered within their backend. */
    int ncl = 0;
    for (int i = 0; i < count && i < 16; i++) {
        const mt_device_info *d = &info[i];
        if (d->backend != MT_BACKEND_OPENCL) break;
        assert_int_equal(d->index, ncl);
        ncl++;
        assert_true(d->name[0] && d->platform[0] && d->driver[0]);
        assert_int_equal((int)strlen(d->fingerprint), 16);
        assert_int_equal((int)strspn(d->fingerprint, "0123456789abcdef"), 16);
        assert_true(d->compute_units > 0);
        assert_true(d->clock_mhz > 0);
        assert_true(d->global_mem_bytes > 0 && d->max_alloc_bytes > 0);
        assert_true(d->max_work_group_size > 0);
        for (int k = 0; k < 3; k++) assert_true(d->max_work_item_sizes[k] > 0);
        assert_true(d->native_vector_width > 0 && d->pref_vector_width > 0);
        assert_true(d->peak_gflops > 0);
        print_message("opencl:%d  %s | %s | %s | %s\n  cpu=%d cu=%d clock=%dMHz gmem=%llu lmem=%llu maxalloc=%llu wg=%lld items=%lldx%lldx%lld "
                      "vec=%d/%d peak=%.1f GFLOP/s fingerprint=%s\n",
                      d->index, d->platform, d->name, d->vendor, d->driver, d->is_cpu, d->compute_units, d->clock_mhz,
                      (unsigned long long)d->global_mem_bytes, (unsigned long long)d->local_mem_bytes,
                      (unsigned long long)d->max_alloc_bytes, (long long)d->max_work_group_size, (long long)d->max_work_item_sizes[0],
                      (long long)d->max_work_item_sizes[1], (long long)d->max_work_item_sizes[2], d->pref_vector_width,
                      d->native_vector_width, d->peak_gflops, d->fingerprint);
    }
    assert_true(ncl >= 1);
    if (notes[0]) print_message("notes: %s", notes);

    /* A peak given in the environment wins; the fingerprint does not depend on it. */
    char fp[17];
    memcpy(fp, info[0].fingerprint, sizeof fp);
    assert_int_equal(setenv("MTGPU_PEAK_GFLOPS", "123.5", 1), 0);
    assert_int_equal(mt_device_list(info, 1, &count0, NULL, 0), MT_OK);
    assert_true(info[0].peak_gflops == 123.5);
    assert_string_equal(info[0].fingerprint, fp);
    assert_int_equal(setenv("MTGPU_PEAK_GFLOPS", "junk", 1), 0);
    assert_int_equal(mt_device_list(info, 1, &count0, NULL, 0), MT_OK);
    assert_true(info[0].peak_gflops > 0 && info[0].peak_gflops != 123.5);
    unsetenv("MTGPU_PEAK_GFLOPS");
}

/* Threads of this process whose allowed CPUs are exactly one CPU. */
static int threads_on_one_cpu(void) {
    DIR *dir = opendir("/proc/self/task");
    assert_non_null(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.') continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* the thread ended meanwhile */
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) {
                const char *v = line + 18 + strspn(line + 18, " \t");
                if (!strpbrk(v, ",-")) n++;
            }
        fclose(f);
    }
    closedir(dir);
    return n;
}

/* PoCL's CPU workers run pinned one per core (opencl/pocl_affinity.h):
 * unpinned, kernels timed alone ran up to 2x slower. */
static void test_pocl_workers_pinned(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    if (!mt_pocl_pin_workers()) {
        const char *v = getenv("POCL_AFFINITY");
        print_message("skipped: POCL_AFFINITY=%s came from the environment, or this process may not run on every online CPU "
                      "(or there is only one)\n", v ? v : "(unset)");
        skip();
    }
    assert_string_equal(getenv("POCL_AFFINITY"), "1");
    mt_device_info info[8];
    int count = 0;
    long workers = 0;
    assert_int_equal(mt_device_list(info, 8, &count, NULL, 0), MT_OK);
    for (int i = 0; i < count && i < 8; i++)
        if (info[i].backend == MT_BACKEND_OPENCL && info[i].is_cpu && strstr(info[i].platform, "Portable Computing Language") && !workers)
            workers = info[i].compute_units; /* PoCL's CPU device: one worker thread per compute unit */
    if (!workers) {
        print_message("skipped: no PoCL CPU device, whose workers the variable pins\n");
        skip();
    }
    /* PoCL started its workers in the first clGetPlatformIDs (main's device list). */
    int pinned = threads_on_one_cpu();
    print_message("%d of this process's threads run on one CPU (%ld PoCL workers expected)\n", pinned, workers);
    assert_true(pinned >= workers);
}

static void test_open_specs(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device_info first;
    int count = 0;
    assert_int_equal(mt_device_list(&first, 1, &count, NULL, 0), MT_OK);
    const char *good[] = {NULL, "", "opencl:0", "0", "opencl"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        mt_device *dev = NULL;
        char err[256];
        mt_status st = mt_device_open(good[i], NULL, &dev, err, sizeof err);
        if (st != MT_OK) print_error("spec '%s': %s\n", good[i] ? good[i] : "(null)", err);
        assert_int_equal(st, MT_OK);
        const mt_device_info *in = mt_device_get_info(dev);
        assert_int_equal(in->backend, MT_BACKEND_OPENCL);
        assert_int_equal(in->index, 0);
        assert_string_equal(in->fingerprint, first.fingerprint);
        mt_device_limits lim = mt_device_get_limits(dev);
        /* CPUs get a tighter work-group limit than the driver's (device/device_info.c). */
        assert_true(lim.max_threads_per_block == (in->is_cpu && in->max_work_group_size > 256 ? 256 : in->max_work_group_size));
        for (int k = 0; k < 3; k++) {
            assert_true(lim.max_block_dim[k] == in->max_work_item_sizes[k]);
            assert_true(lim.max_grid_dim[k] == 0);
        }
        assert_true(lim.local_mem_bytes == (int64_t)in->local_mem_bytes);
        if (in->is_cpu) assert_true(lim.max_private_floats == 0);
        mt_device_close(dev);
    }

    struct {
        const char *spec;
        mt_status want;
    } bad[] = {{"opencl:x", MT_INVALID_ARG}, {"foo", MT_INVALID_ARG},      {"opencl:", MT_INVALID_ARG},
               {"opencl:-1", MT_INVALID_ARG}, {"opencl:1x", MT_INVALID_ARG}, {" 0", MT_INVALID_ARG},
               {"-1", MT_INVALID_ARG},        {"opencl:99", MT_NOT_FOUND},   {"99", MT_NOT_FOUND},
               {"opencl:99999999999999999999", MT_INVALID_ARG}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mt_device *dev = (mt_device *)&count; /* must be reset to NULL */
        char err[256] = "";
        mt_status st = mt_device_open(bad[i].spec, NULL, &dev, err, sizeof err);
        print_message("spec '%s': %s: %s\n", bad[i].spec, mt_status_name(st), err);
        assert_int_equal(st, bad[i].want);
        assert_null(dev);
        assert_true(err[0] != '\0');
        if (bad[i].want == MT_NOT_FOUND) assert_non_null(strstr(err, "available"));
    }
    /* CUDA may or may not be here; either way the answer is a status, never a crash. */
    mt_device *dev = NULL;
    char err[256] = "";
    mt_status st = mt_device_open("cuda:0", NULL, &dev, err, sizeof err);
    print_message("spec 'cuda:0': %s: %s\n", mt_status_name(st), err);
    assert_true(st == MT_OK || st == MT_UNAVAILABLE || st == MT_NOT_FOUND);
    mt_device_close(dev);
    assert_int_equal(mt_device_open("opencl:0", NULL, NULL, err, sizeof err), MT_INVALID_ARG);
}

static void test_build_and_run(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device *dev = open_dev(NULL, 0); /* no cache: a real compile every time */
    mt_program *p = build(dev, saxpy_src, 0);
    run_saxpy(dev, p, 0, 1);
    run_saxpy(dev, p, 2, 5);

    /* Bad launches are refused before anything reaches the device. */
    mt_dbuf *b[3];
    for (int i = 0; i < 3; i++) assert_int_equal(mt_dbuf_alloc(dev, N_ELEMS * sizeof(float), &b[i]), MT_OK);
    const mt_device_info *in = mt_device_get_info(dev);
    double t[4];
    char err[256];
    const int64_t g[3] = {16, 1, 1}, blk[3] = {64, 1, 1};
    assert_int_equal(mt_program_run(dev, p, b, 2, g, blk, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    print_message("2 args: %s\n", err);
    assert_int_equal(mt_program_run(dev, p, b, 3, g, blk, 0, 0, t, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_program_run(dev, p, b, 3, g, blk, -1, 1, t, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_program_run(dev, p, b, 3, g, blk, 0, 1, NULL, err, sizeof err), MT_INVALID_ARG);
    const int64_t g0[3] = {0, 1, 1};
    assert_int_equal(mt_program_run(dev, p, b, 3, g0, blk, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    const int64_t big_dim[3] = {in->max_work_item_sizes[0] + 1, 1, 1};
    assert_int_equal(mt_program_run(dev, p, b, 3, g, big_dim, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    print_message("block too wide: %s\n", err);
    if (in->max_work_item_sizes[1] > 1 && in->max_work_group_size < in->max_work_item_sizes[0] * in->max_work_item_sizes[1]) {
        const int64_t big_wg[3] = {in->max_work_item_sizes[0], in->max_work_item_sizes[1], 1};
        assert_int_equal(mt_program_run(dev, p, b, 3, g, big_wg, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
        print_message("work-group too big: %s\n", err);
    }
    mt_dbuf *with_null[3] = {b[0], NULL, b[2]};
    assert_int_equal(mt_program_run(dev, p, with_null, 3, g, blk, 0, 1, t, err, sizeof err), MT_INVALID_ARG);

    /* Handles of another device are refused. */
    mt_device *other = open_dev(NULL, 0);
    mt_dbuf *ob;
    assert_int_equal(mt_dbuf_alloc(other, 64, &ob), MT_OK);
    mt_dbuf *mixed[3] = {b[0], ob, b[2]};
    assert_int_equal(mt_program_run(dev, p, mixed, 3, g, blk, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_program_run(other, p, b, 3, g, blk, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    float f[4] = {0};
    assert_int_equal(mt_dbuf_write(dev, ob, 0, f, sizeof f), MT_INVALID_ARG);
    mt_dbuf_free(ob);
    mt_device_close(other);

    for (int i = 0; i < 3; i++) mt_dbuf_free(b[i]);
    mt_program_free(p);

    /* A kernel name the program lacks is a build error that says so. */
    char log[1024];
    mt_program *q = (mt_program *)dev;
    assert_int_equal(mt_program_build_source(dev, saxpy_src, "nope", &q, log, sizeof log), MT_BUILD);
    assert_null(q);
    assert_non_null(strstr(log, "nope"));
    assert_int_equal(mt_program_build_source(dev, NULL, "saxpy", &q, log, sizeof log), MT_INVALID_ARG);
    assert_int_equal(mt_program_build_source(dev, saxpy_src, "", &q, log, sizeof log), MT_INVALID_ARG);
    mt_device_close(dev);
}

/* Queued launches: saxpy in place twice, then one wait; the read sees both,
 * in order. Timed ones (more than the backend's first batch of events)
 * get their device time at the wait, and run like the others. Bad launches
 * are refused at the call, before anything is queued. */
static void test_queued_launches(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device *dev = open_dev(NULL, 1);
    mt_program *p = build(dev, saxpy_src, -1);
    float x[N_ELEMS], y[N_ELEMS];
    for (int i = 0; i < N_ELEMS; i++) {
        x[i] = (float)(i % 11);
        y[i] = 1.0f;
    }
    mt_dbuf *bx, *by;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof x, &bx), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof y, &by), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, bx, 0, x, sizeof x), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, by, 0, y, sizeof y), MT_OK);
    /* out = 2x + y written over y: twice gives 4x + y. */
    mt_dbuf *args[3] = {bx, by, by};
    const int64_t grid[3] = {16, 1, 1}, block[3] = {64, 1, 1};
    char err[256];
    for (int r = 0; r < 2; r++) assert_int_equal(mt_program_launch(dev, p, args, 3, grid, block, err, sizeof err), MT_OK);
    assert_int_equal(mt_device_finish(dev, err, sizeof err), MT_OK);
    float out[N_ELEMS];
    assert_int_equal(mt_dbuf_read(dev, by, 0, out, sizeof out), MT_OK);
    for (int i = 0; i < N_ELEMS; i++) assert_true(out[i] == 4.0f * x[i] + 1.0f);
    /* 100 timed launches and one untimed: 103 in all give 206x + 1. */
    double ms[100];
    for (int r = 0; r < 100; r++) ms[r] = -1.0;
    for (int r = 0; r < 100; r++) assert_int_equal(mt_program_launch_timed(dev, p, args, 3, grid, block, &ms[r], err, sizeof err), MT_OK);
    assert_int_equal(mt_program_launch(dev, p, args, 3, grid, block, err, sizeof err), MT_OK);
    assert_int_equal(mt_device_finish(dev, err, sizeof err), MT_OK);
    for (int r = 0; r < 100; r++) assert_true(ms[r] >= 0.0 && ms[r] < 1000.0);
    assert_int_equal(mt_dbuf_read(dev, by, 0, out, sizeof out), MT_OK);
    for (int i = 0; i < N_ELEMS; i++) assert_true(out[i] == 206.0f * x[i] + 1.0f);
    assert_int_equal(mt_program_launch_timed(dev, p, args, 3, grid, block, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_program_launch(dev, p, args, 2, grid, block, err, sizeof err), MT_INVALID_ARG);
    const int64_t g0[3] = {0, 1, 1};
    assert_int_equal(mt_program_launch(dev, p, args, 3, g0, block, err, sizeof err), MT_INVALID_ARG);
    const int64_t wide[3] = {mt_device_get_info(dev)->max_work_item_sizes[0] + 1, 1, 1};
    assert_int_equal(mt_program_launch(dev, p, args, 3, grid, wide, err, sizeof err), MT_INVALID_CONFIG);
    assert_int_equal(mt_device_finish(dev, err, sizeof err), MT_OK);
    assert_int_equal(mt_device_finish(NULL, err, sizeof err), MT_INVALID_ARG);
    mt_dbuf_free(bx);
    mt_dbuf_free(by);
    mt_program_free(p);
    mt_device_close(dev);
}

static void test_build_error(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device *dev = open_dev(NULL, 1); /* failures never reach the cache */
    const char *bad = "__kernel void broken(__global float *x) {\n    x[get_global_id(0)] = 1.0f +;\n}\n";
    mt_program *p = NULL;
    char log[8192];
    mt_status st = mt_program_build_source(dev, bad, "broken", &p, log, sizeof log);
    assert_int_equal(st, MT_BUILD);
    assert_null(p);
    assert_true(strlen(log) > 0);
    print_message("build log (%zu chars): %.300s\n", strlen(log), log);
    /* A tiny log buffer is truncated, not overrun. */
    char small[8];
    memset(small, 'Z', sizeof small);
    assert_int_equal(mt_program_build_source(dev, bad, "broken", &p, small, 4), MT_BUILD);
    assert_int_equal((int)strlen(small), 3);
    assert_true(small[4] == 'Z');
    mt_device_close(dev);
}

static void test_cache(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    char dir[300], clbin[600];
    make_dir("cache", dir, sizeof dir);
    int nclbin;

    mt_device *dev = open_dev(dir, 1);
    mt_program *p = build(dev, saxpy_cached_src, 0);
    mt_program_free(p);
    assert_int_equal(count_files(dir, &nclbin, clbin, sizeof clbin), 1); /* no temporaries left */
    assert_int_equal(nclbin, 1);
    long good_size = file_size(clbin);
    assert_true(good_size > 32);

    /* Same device handle, and a freshly opened one, both hit. */
    p = build(dev, saxpy_cached_src, 1);
    run_saxpy(dev, p, 1, 3);
    mt_program_free(p);
    mt_device_close(dev);
    dev = open_dev(dir, 1);
    p = build(dev, saxpy_cached_src, 1);
    run_saxpy(dev, p, 0, 2);
    mt_program_free(p);

    /* Truncated entry: rebuilt from source and rewritten whole. */
    assert_int_equal(truncate(clbin, good_size / 2), 0);
    p = build(dev, saxpy_cached_src, 0);
    run_saxpy(dev, p, 0, 1);
    mt_program_free(p);
    /* (PoCL's binaries grow once kernels have run, so sizes are not compared.) */
    assert_true(file_size(clbin) > 32);
    mt_program_free(build(dev, saxpy_cached_src, 1)); /* the rewritten entry is valid */

    /* Flipped bytes in the payload, in the header, and in the key. */
    const long offsets[] = {-2, -1, 0, 9, 17, 25}; /* -2: middle, -1: last byte */
    for (size_t i = 0; i < sizeof offsets / sizeof *offsets; i++) {
        long size = file_size(clbin), at = offsets[i] == -2 ? size / 2 : offsets[i] == -1 ? size - 1 : offsets[i];
        FILE *f = fopen(clbin, "r+b");
        assert_non_null(f);
        assert_int_equal(fseek(f, at, SEEK_SET), 0);
        int c = fgetc(f);
        assert_true(c != EOF);
        assert_int_equal(fseek(f, at, SEEK_SET), 0);
        fputc(c ^ 0x5a, f);
        assert_int_equal(fclose(f), 0);
        p = build(dev, saxpy_cached_src, 0);
        run_saxpy(dev, p, 0, 1);
        mt_program_free(p);
        mt_program_free(build(dev, saxpy_cached_src, 1));
    }

    /* An empty file and one with extra bytes are not entries either. */
    FILE *f = fopen(clbin, "wb");
    assert_non_null(f);
    assert_int_equal(fclose(f), 0);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    f = fopen(clbin, "ab");
    assert_non_null(f);
    fputs("trailing", f);
    assert_int_equal(fclose(f), 0);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_program_free(build(dev, saxpy_cached_src, 1));
    assert_int_equal(count_files(dir, &nclbin, NULL, 0), 1);

    /* A different source is a different entry. */
    mt_program_free(build(dev, saxpy_src, -1));
    assert_int_equal(count_files(dir, &nclbin, NULL, 0), 2);
    assert_int_equal(nclbin, 2);
    mt_device_close(dev);

    /* use_cache = 0: never read, never written. */
    char off[300];
    make_dir("off", off, sizeof off);
    dev = open_dev(off, 0);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_device_close(dev);
    assert_int_equal(count_files(off, &nclbin, NULL, 0), 0);

    /* A cache directory that cannot be created, or is a file: builds still work. */
    dev = open_dev("/proc/mtgpu-no-such-cache/kernels", 1);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_device_close(dev);
    dev = open_dev(clbin, 1);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_device_close(dev);

    /* A nested directory that does not exist yet is created with its parents. */
    char nested[400];
    snprintf(nested, sizeof nested, "%s/a/b/c", dir);
    dev = open_dev(nested, 1);
    mt_program_free(build(dev, saxpy_cached_src, 0));
    mt_program_free(build(dev, saxpy_cached_src, 1));
    mt_device_close(dev);
    assert_int_equal(count_files(nested, &nclbin, NULL, 0), 1);
}

static void test_buffers(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    mt_device *dev = open_dev(NULL, 0);
    mt_dbuf *b = (mt_dbuf *)dev;
    assert_int_equal(mt_dbuf_alloc(dev, 0, &b), MT_INVALID_ARG);
    assert_null(b);
    const mt_device_info *in = mt_device_get_info(dev);
    assert_int_equal(mt_dbuf_alloc(dev, (size_t)in->max_alloc_bytes + 1, &b), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_alloc(NULL, 16, &b), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_alloc(dev, 256, &b), MT_OK);

    unsigned char src[256], dst[256];
    for (int i = 0; i < 256; i++) src[i] = (unsigned char)i;
    assert_int_equal(mt_dbuf_write(dev, b, 0, src, 256), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, b, 200, src, 100), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_write(dev, b, 257, src, 0), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_write(dev, b, 256, src, 0), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, b, SIZE_MAX, src, 2), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_write(dev, b, 2, src, SIZE_MAX), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_write(dev, b, 0, NULL, 4), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_read(dev, b, 1, dst, 256), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_read(dev, b, SIZE_MAX, dst, 1), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_read(dev, b, 0, NULL, 4), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_read(NULL, b, 0, dst, 4), MT_INVALID_ARG);

    /* Offsets land where they should. */
    unsigned char patch[16];
    memset(patch, 0xee, sizeof patch);
    assert_int_equal(mt_dbuf_write(dev, b, 64, patch, sizeof patch), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, b, 240, patch, sizeof patch), MT_OK); /* ends exactly at the end */
    memset(dst, 0, sizeof dst);
    assert_int_equal(mt_dbuf_read(dev, b, 0, dst, 256), MT_OK);
    for (int i = 0; i < 256; i++) {
        int patched = (i >= 64 && i < 80) || i >= 240;
        assert_int_equal(dst[i], patched ? 0xee : i);
    }
    unsigned char part[8];
    assert_int_equal(mt_dbuf_read(dev, b, 100, part, sizeof part), MT_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(part[i], 100 + i);

    /* Evicting a CPU device's buffer (x86: clflush through a mapping)
     * leaves its contents; elsewhere it says it cannot. */
    char err[256] = "";
    mt_status ev = mt_dbuf_evict(dev, b, err, sizeof err);
    assert_int_equal(ev, mt_device_info_can_evict(in) ? MT_OK : MT_UNSUPPORTED);
    if (ev != MT_OK) assert_true(err[0] != '\0');
    memset(dst, 0, sizeof dst);
    assert_int_equal(mt_dbuf_read(dev, b, 0, dst, 256), MT_OK);
    for (int i = 0; i < 256; i++) assert_int_equal(dst[i], (i >= 64 && i < 80) || i >= 240 ? 0xee : i);
    assert_int_equal(mt_dbuf_evict(dev, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_dbuf_evict(NULL, b, err, sizeof err), MT_INVALID_ARG);
#if defined(__x86_64__)
    if (in->is_cpu) assert_true(mt_device_info_can_evict(in));
#endif
    mt_dbuf_free(b);
    mt_dbuf_free(NULL);
    mt_program_free(NULL);
    mt_device_close(NULL);
    mt_device_close(dev);
}

/* mt_program_build: the IR printed as OpenCL C, built and run. The kernel
 * prefetches the element 2*B ahead (past the buffer's end for the last
 * groups: a prefetch never faults): the OpenCL text has it for clang on
 * x86-64, the CUDA text has none, and the results are those without it. */
static void test_build_ir(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    enum { N = 256, B = 64 };
    mt_kernel *k = mt_kernel_new("scale2");
    assert_non_null(k);
    mt_buffer *in = mt_ir_param(k, "in", N, 1);
    mt_buffer *out = mt_ir_param(k, "out", N, 0);
    mt_var *bx = mt_ir_var(k, "bx", MT_TYPE_INT), *tx = mt_ir_var(k, "tx", MT_TYPE_INT);
    mt_expr *idx = mt_ir_add(k, mt_ir_mul(k, mt_ir_v(k, bx), mt_ir_int(k, B)), mt_ir_v(k, tx));
    mt_stmt *st = mt_ir_store(k, out, idx, mt_ir_mul(k, mt_ir_load(k, in, idx), mt_ir_float(k, 2.0f)));
    mt_stmt *pf = mt_ir_prefetch(k, in, mt_ir_add(k, idx, mt_ir_int(k, 2 * B)));
    assert_non_null(pf);
    assert_null(mt_ir_prefetch(k, in, mt_ir_ramp(k, idx, 1, 4)));  /* one address per prefetch */
    assert_null(mt_ir_prefetch(k, in, mt_ir_float(k, 1.0f)));
    k->body = mt_ir_for(k, bx, N / B, MT_LOOP_BLOCK, 0, mt_ir_for(k, tx, B, MT_LOOP_THREAD, 0, mt_ir_seq2(k, pf, st)));
    assert_non_null(k->body);
    char *text = NULL, perr[256];
    assert_int_equal(mt_kernel_print(k, MT_LANG_OPENCL, &text, perr, sizeof perr), MT_OK);
    assert_non_null(strstr(text, "#if defined(__clang__) && defined(__x86_64__)\n"));
    assert_non_null(strstr(text, "__builtin_prefetch(in + "));
    free(text);
    assert_int_equal(mt_kernel_print(k, MT_LANG_CUDA, &text, perr, sizeof perr), MT_OK);
    assert_null(strstr(text, "prefetch"));
    free(text);

    mt_device *dev = open_dev(NULL, 0);
    mt_program *p = NULL;
    char log[4096];
    mt_status s = mt_program_build(dev, k, &p, log, sizeof log);
    if (s != MT_OK) print_error("build: %s\n", log);
    assert_int_equal(s, MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);

    float h[N], r[N];
    for (int i = 0; i < N; i++) h[i] = (float)i - 100.0f;
    mt_dbuf *bi, *bo;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof h, &bi), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof r, &bo), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, bi, 0, h, sizeof h), MT_OK);
    mt_dbuf *args[2] = {bi, bo};
    const int64_t grid[3] = {N / B, 1, 1}, block[3] = {B, 1, 1};
    double t[2];
    char err[256];
    assert_int_equal(mt_program_run(dev, p, args, 1, grid, block, 0, 2, t, err, sizeof err), MT_INVALID_ARG);
    s = mt_program_run(dev, p, args, 2, grid, block, 0, 2, t, err, sizeof err);
    if (s != MT_OK) print_error("run: %s\n", err);
    assert_int_equal(s, MT_OK);
    assert_true(t[0] > 0 && t[1] > 0);
    assert_int_equal(mt_dbuf_read(dev, bo, 0, r, sizeof r), MT_OK);
    for (int i = 0; i < N; i++) assert_true(r[i] == 2.0f * h[i]);
    mt_dbuf_free(bi);
    mt_dbuf_free(bo);
    mt_program_free(p);
    mt_device_close(dev);
    mt_kernel_free(k);
}

/* Vector loads of every other float (stride-2 convolutions) print as two
 * contiguous vector loads and a shuffle (.even of the first, .odd of the
 * second) and load the right floats for every vector width; the input is
 * exactly as long as the last vector needs. */
static void test_strided_vector_loads(void **state) {
    (void)state;
    REQUIRE_OPENCL();
    enum { N = 64 };
    mt_device *dev = open_dev(NULL, 0);
    float h[2 * N - 1], r[N];
    for (int i = 0; i < 2 * N - 1; i++) h[i] = (float)(i * 3 - 50);
    mt_dbuf *bi, *bo;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof h, &bi), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof r, &bo), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, bi, 0, h, sizeof h), MT_OK);
    static const int widths[] = {2, 4, 8, 16};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int lanes = widths[w];
        mt_kernel *k = mt_kernel_new("even");
        assert_non_null(k);
        mt_buffer *in = mt_ir_param(k, "in", 2 * N - 1, 1);
        mt_buffer *out = mt_ir_param(k, "out", N, 0);
        mt_var *bx = mt_ir_var(k, "bx", MT_TYPE_INT);
        mt_expr *first = mt_ir_mul(k, mt_ir_v(k, bx), mt_ir_int(k, lanes));
        mt_expr *v = mt_ir_load(k, in, mt_ir_ramp(k, mt_ir_mul(k, first, mt_ir_int(k, 2)), 2, lanes));
        k->body = mt_ir_for(k, bx, N / lanes, MT_LOOP_BLOCK, 0, mt_ir_store_vec(k, out, first, v));
        assert_non_null(k->body);
        char *text = NULL, perr[256];
        assert_int_equal(mt_kernel_print(k, MT_LANG_OPENCL, &text, perr, sizeof perr), MT_OK);
        if (!strstr(text, ").even, vload") || !strstr(text, ").odd)")) fail_msg("%d lanes: not two vector loads:\n%s", lanes, text);
        free(text);
        mt_program *p = NULL;
        char log[4096];
        mt_status s = mt_program_build(dev, k, &p, log, sizeof log);
        if (s != MT_OK) print_error("build: %s\n", log);
        assert_int_equal(s, MT_OK);
        mt_dbuf *args[2] = {bi, bo};
        const int64_t grid[3] = {N / lanes, 1, 1}, block[3] = {1, 1, 1};
        double t[1];
        char err[256];
        s = mt_program_run(dev, p, args, 2, grid, block, 0, 1, t, err, sizeof err);
        if (s != MT_OK) print_error("run: %s\n", err);
        assert_int_equal(s, MT_OK);
        assert_int_equal(mt_dbuf_read(dev, bo, 0, r, sizeof r), MT_OK);
        for (int i = 0; i < N; i++)
            if (r[i] != h[2 * i]) fail_msg("%d lanes: out[%d] = %g, want in[%d] = %g", lanes, i, r[i], 2 * i, h[2 * i]);
        mt_program_free(p);
        mt_kernel_free(k);
    }
    mt_dbuf_free(bi);
    mt_dbuf_free(bo);
    mt_device_close(dev);
}

/* The OpenCL source of template t's kernel for cfg with epilogue epi
 * (NULL: none; free it). */
static char *kernel_text(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi) {
    mt_kernel *k = NULL;
    char err[256];
    assert_int_equal(epi ? mt_template_build_fused(t, wl, sp, cfg, epi, &k, err, sizeof err) : mt_template_build(t, wl, sp, cfg, &k, err, sizeof err),
                     MT_OK);
    char *text = NULL;
    assert_int_equal(mt_kernel_print(k, MT_LANG_OPENCL, &text, err, sizeof err), MT_OK);
    mt_kernel_free(k);
    return text;
}

/* Prefetch instructions into buffer `buf` ("input", "weight", "residual",
 * "output") in the printed kernel of cfg with epilogue epi (NULL: none):
 * into L1 (prefetcht0), or with outer set into the outer caches only
 * (locality 2: prefetcht1). */
static int count_prefetches(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi,
                            const char *buf, int outer) {
    char *text = kernel_text(t, wl, sp, cfg, epi);
    char needle[64];
    snprintf(needle, sizeof needle, "__builtin_prefetch(%s + ", buf);
    int n = 0;
    for (const char *q = text; (q = strstr(q, needle)) != NULL; q++) {
        const char *end = strchr(q, '\n');
        const int is_outer = end && end - q > 8 && memcmp(end - 8, ", 0, 2);", 8) == 0;
        n += is_outer == outer;
    }
    free(text);
    return n;
}

static int kernel_prefetches(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi,
                             const char *buf) {
    return count_prefetches(t, wl, sp, cfg, epi, buf, 0);
}

/* Parses a case's workload and its config in t's space (free *sp). */
static void parse_case(const mt_template *t, const char *wl_text, const char *config, mt_workload *wl, mt_space *sp, mt_config *cfg) {
    assert_non_null(t);
    assert_int_equal(mt_workload_parse(wl_text, wl, NULL, 0), MT_OK);
    assert_int_equal(mt_template_space(t, wl, sp), MT_OK);
    char err[256];
    if (mt_config_parse(sp, config, cfg, err, sizeof err) != MT_OK) fail_msg("%s %s: %s", wl_text, config, err);
}

/* kvec prefetches the input rows of later channels on planes past 512
 * bytes (14x14 and larger) and on 1x1 layers whatever their planes
 * (ir/tmpl_kvec.c, kvec_prefetches_input), and not on smaller planes of
 * larger kernels. */
static void test_template_prefetch(void **state) {
    (void)state;
    static const struct {
        const char *wl;
        int want;
    } cases[] = {
        {"n=1,c=256,h=56,w=56,k=64,r=1,s=1", 1},
        {"n=1,c=64,h=28,w=28,k=64,r=3,s=3,stride=2,pad=1", 1},
        {"n=1,c=256,h=14,w=14,k=64,r=1,s=1", 1},
        {"n=1,c=256,h=11,w=11,k=64,r=3,s=3,pad=1", 0}, /* 484 bytes a plane */
        {"n=1,c=256,h=11,w=11,k=64,r=1,s=1", 1},
        {"n=1,c=512,h=7,w=7,k=64,r=3,s=3,pad=1", 0},
        {"n=1,c=960,h=7,w=7,k=160,r=1,s=1", 1},
        {"n=1,c=1,h=56,w=56,k=64,r=1,s=1", 0}, /* one channel: nothing ahead */
    };
    const mt_template *t = mt_template_find("kvec");
    assert_non_null(t);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_workload wl;
        assert_int_equal(mt_workload_parse(cases[i].wl, &wl, NULL, 0), MT_OK);
        mt_space sp;
        mt_config cfg;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        assert_int_equal(mt_space_config_from_index(&sp, 0, &cfg), MT_OK);
        if ((kernel_prefetches(t, &wl, &sp, &cfg, NULL, "input") > 0) != cases[i].want)
            fail_msg("%s: input prefetch %s", cases[i].wl, cases[i].want ? "missing" : "unexpected");
        mt_space_free(&sp);
    }
}

/* gemm prefetches on flattened 1x1 layers with planes past 2 KiB and more
 * channels than it looks ahead, unless chunked: one prefetch per cache line
 * of a 32-pixel run (two: runs start lines), and none on 3x3 layers or small
 * planes. */
static void test_gemm_prefetch(void **state) {
    (void)state;
    static const struct {
        const char *wl, *tile_red;
        int want;
    } cases[] = {
        {"n=1,c=144,h=56,w=56,k=24,r=1,s=1", "144x1", 2},
        {"n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1", "64x1", 0},
        {"n=1,c=144,h=14,w=14,k=24,r=1,s=1", "144x1", 0},
        {"n=1,c=8,h=56,w=56,k=24,r=1,s=1", "8x1", 0}, /* nothing 8 channels ahead */
        {"n=1,c=16,h=112,w=112,k=96,r=1,s=1", "16x1", 0}, /* chunked: its input stays in L1 */
    };
    const mt_template *t = mt_template_find("gemm");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_workload wl;
        assert_int_equal(mt_workload_parse(cases[i].wl, &wl, NULL, 0), MT_OK);
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        mt_config cfg;
        char err[512];
        char text_cfg[256];
        snprintf(text_cfg, sizeof text_cfg,
                 "thread_k=1,reg_k=6,thread_y=1,reg_y=1,thread_x=1,reg_x=32,tile_red=%s,vec=16,stage_local=0,auto_unroll_max_step=0,unroll_explicit=1",
                 cases[i].tile_red);
        if (mt_config_parse(&sp, text_cfg, &cfg, err, sizeof err) != MT_OK) fail_msg("%s: %s", cases[i].wl, err);
        int n = kernel_prefetches(t, &wl, &sp, &cfg, NULL, "input");
        if (n != cases[i].want) fail_msg("%s: %d prefetches, want %d", cases[i].wl, n, cases[i].want);
        mt_space_free(&sp);
    }
}

/* gemm prefetches the residual lines of its tile before the reduction,
 * from the residual's own buffer or from the output when the sum is made in
 * place: one per line of each of the tile's 6 channel rows of 32 pixels
 * (two; the runs start lines), and nothing without a residual. */
static void test_gemm_residual_prefetch(void **state) {
    (void)state;
    static const struct {
        mt_epilogue_residual residual;
        const char *buf;
        int want;
    } cases[] = {
        {MT_RESIDUAL_BUFFER, "residual", 12},
        {MT_RESIDUAL_IN_OUTPUT, "output", 12},
        {MT_RESIDUAL_NONE, "output", 0},
    };
    const mt_template *t = mt_template_find("gemm");
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=64,h=56,w=56,k=256,r=1,s=1", &wl, NULL, 0), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    mt_config cfg;
    char err[512];
    if (mt_config_parse(&sp, "thread_k=1,reg_k=6,thread_y=1,reg_y=1,thread_x=1,reg_x=32,tile_red=64x1,vec=16,stage_local=0,auto_unroll_max_step=0,unroll_explicit=1",
                        &cfg, err, sizeof err) != MT_OK)
        fail_msg("%s", err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mt_conv_epilogue epi = {.bias = 1, .residual = cases[i].residual, .act = MT_EPILOGUE_RELU};
        int n = kernel_prefetches(t, &wl, &sp, &cfg, &epi, cases[i].buf);
        if (n != cases[i].want) fail_msg("residual %d: %d prefetches of %s, want %d", (int)cases[i].residual, n, cases[i].buf, cases[i].want);
    }
    mt_space_free(&sp);
}

/* The prefetch of a tile's row segment touches every cache line the
 * segment can span: its first float, every 16 on and its last (14 floats
 * span two lines unless they start a line). */
static void test_template_prefetch_lines(void **state) {
    (void)state;
    static const struct {
        const char *config;
        int want;
    } cases[] = {
        {"thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 2},
        {"thread_k=1,vec=16,reg_k=1,thread_y=1,reg_y=1,thread_x=2,reg_x=1,unroll_rs=1,unroll_explicit=1", 1},
    };
    const mt_template *t = mt_template_find("kvec");
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=256,h=56,w=56,k=64,r=1,s=1", &wl, NULL, 0), MT_OK);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_config cfg;
        char err[256];
        assert_int_equal(mt_config_parse(&sp, cases[i].config, &cfg, err, sizeof err), MT_OK);
        int n = kernel_prefetches(t, &wl, &sp, &cfg, NULL, "input");
        if (n != cases[i].want) fail_msg("%s: %d prefetches, want %d", cases[i].config, n, cases[i].want);
    }
    mt_space_free(&sp);
}

/* kvec and wino prefetch the weights of later input channels, one cache
 * line per 16-channel block a work-item reads (per kernel row: s lines),
 * wherever there are channels ahead to prefetch. */
static void test_weight_prefetch(void **state) {
    (void)state;
    static const struct {
        const char *tmpl, *wl, *config;
        int want;
    } cases[] = {
        {"kvec", "n=1,c=256,h=14,w=14,k=64,r=1,s=1", "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 2},
        /* two vectors of 8 channels: one block, one line */
        {"kvec", "n=1,c=256,h=14,w=14,k=64,r=1,s=1", "thread_k=1,vec=8,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 1},
        /* 3x3, s unrolled: three lines per block and kernel row */
        {"kvec", "n=1,c=64,h=14,w=14,k=64,r=3,s=3,pad=1", "thread_k=1,vec=16,reg_k=1,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 3},
        /* 8 channels: nothing ahead */
        {"kvec", "n=1,c=8,h=14,w=14,k=64,r=1,s=1", "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 0},
        {"wino", "n=1,c=64,h=28,w=28,k=64,r=3,s=3,pad=1", "tile=4,vec=16,reg_k=2,reg_y=1,reg_x=2,split_k=1,unroll=0,blk_y=1,blk_x=1,k_loop=1", 2},
        {"wino", "n=1,c=64,h=28,w=28,k=64,r=3,s=3,pad=1", "tile=4,vec=4,reg_k=2,reg_y=1,reg_x=2,split_k=1,unroll=0,blk_y=1,blk_x=1,k_loop=1", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const mt_template *t = mt_template_find(cases[i].tmpl);
        mt_workload wl;
        mt_space sp;
        mt_config cfg;
        parse_case(t, cases[i].wl, cases[i].config, &wl, &sp, &cfg);
        int n = kernel_prefetches(t, &wl, &sp, &cfg, NULL, "weight");
        if (n != cases[i].want) fail_msg("%s %s %s: %d weight prefetches, want %d", cases[i].tmpl, cases[i].wl, cases[i].config, n, cases[i].want);
        mt_space_free(&sp);
    }
}

/* kvec brings the next channel group's weights into L2 (prefetcht1), one
 * kernel row (s lines) per (c, r), where pixel blocks run first and a
 * group's work-groups are at least its 16-channel blocks, there is a next
 * group, and a group's weights are at most 256 KiB (ir/tmpl_kvec.c,
 * kvec_next_weight_blocks); those work-groups past the blocks skip it. */
static void test_next_weight_prefetch(void **state) {
    (void)state;
    static const struct {
        const char *wl, *config;
        int want, guarded;
    } cases[] = {
        /* ResNet-50's 7x7 1x1 layer: 4 blocks, 7 work-groups per group (7-pixel tiles of the flattened image) */
        {"n=1,c=512,h=7,w=7,k=2048,r=1,s=1", "thread_k=1,vec=16,reg_k=4,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=0,unroll_explicit=0", 1, 1},
        /* a 7x7 3x3 layer on 256 channels: one work-group per group of one block (147 KiB), s = 3 lines */
        {"n=1,c=256,h=7,w=7,k=512,r=3,s=3,pad=1", "thread_k=1,vec=16,reg_k=1,thread_y=2,reg_y=4,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1", 3, 0},
        /* ResNet-50's, on 512 channels: 295 KiB a group, past the limit */
        {"n=1,c=512,h=7,w=7,k=512,r=3,s=3,pad=1", "thread_k=1,vec=16,reg_k=1,thread_y=2,reg_y=4,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1", 0, 0},
        /* channel blocks first (weights 64 KiB, input 784 KiB) */
        {"n=1,c=256,h=28,w=28,k=64,r=1,s=1", "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=14,unroll_rs=1,unroll_explicit=1", 0, 0},
        /* one group: no next */
        {"n=1,c=1024,h=7,w=7,k=32,r=1,s=1", "thread_k=1,vec=16,reg_k=2,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=1,unroll_explicit=1", 0, 0},
        /* vectors of 8 channels, 3 of them: 24 channels a group, blocks not whole */
        {"n=1,c=512,h=7,w=7,k=2048,r=1,s=1", "thread_k=1,vec=8,reg_k=3,thread_y=1,reg_y=1,thread_x=1,reg_x=7,unroll_rs=0,unroll_explicit=0", 0, 0},
    };
    const mt_template *t = mt_template_find("kvec");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_workload wl;
        mt_space sp;
        mt_config cfg;
        parse_case(t, cases[i].wl, cases[i].config, &wl, &sp, &cfg);
        int n = count_prefetches(t, &wl, &sp, &cfg, NULL, "weight", 1);
        if (n != cases[i].want) fail_msg("%s %s: %d next-group weight prefetches, want %d", cases[i].wl, cases[i].config, n, cases[i].want);
        char *text = kernel_text(t, &wl, &sp, &cfg, NULL);
        /* the work-group's place among its group's: bz + bx * n * yo, just
         * bx where the image is one row of blocks (flattened 1x1 layers) */
        const int guarded = strstr(text, "if ((wg_place") != NULL || strstr(text, "if ((bz_") != NULL || strstr(text, "if ((bx_") != NULL;
        free(text);
        if (guarded != cases[i].guarded) fail_msg("%s %s: guard %s", cases[i].wl, cases[i].config, guarded ? "unexpected" : "missing");
        mt_space_free(&sp);
    }
}

static int setup(void **state) {
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "%s/mtgpu-test-opencl-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(g_tmp) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    remove_dir(g_tmp);
    return 0;
}

int main(void) {
    mt_device_info info[8];
    int count = 0;
    char notes[1024] = "";
    mt_status st = mt_device_list(info, 8, &count, notes, sizeof notes);
    for (int i = 0; i < count && i < 8; i++)
        if (info[i].backend == MT_BACKEND_OPENCL) g_have_opencl = 1;
    if (st != MT_OK || !g_have_opencl) {
        printf("test_opencl: skipped: no OpenCL device (%s)\n%s", mt_status_name(st), notes);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_defaults), cmocka_unit_test(test_hash),   cmocka_unit_test(test_list),   cmocka_unit_test(test_pocl_workers_pinned), cmocka_unit_test(test_open_specs),
        cmocka_unit_test(test_build_and_run),      cmocka_unit_test(test_queued_launches), cmocka_unit_test(test_build_error),
        cmocka_unit_test(test_cache),
        cmocka_unit_test(test_buffers),            cmocka_unit_test(test_build_ir), cmocka_unit_test(test_strided_vector_loads),     cmocka_unit_test(test_template_prefetch), cmocka_unit_test(test_gemm_prefetch), cmocka_unit_test(test_gemm_residual_prefetch),
        cmocka_unit_test(test_weight_prefetch),
        cmocka_unit_test(test_next_weight_prefetch),
        cmocka_unit_test(test_template_prefetch_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
