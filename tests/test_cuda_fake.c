/* The CUDA backend end to end on a fake driver (tests/fake_cuda): the
 * module's driver half, the backend table, the cubin cache, timings and
 * every error path, without a GPU. Kernels are real cubins (NVRTC) that the
 * fake loads but does not execute, so results are not checked here
 * (test_cuda_gpu does that on a GPU); what is checked is how the driver is
 * called: a context current in every thread that needs one, copies and
 * launch parameters inside live allocations, balanced retain/release, and
 * nothing left behind.
 *
 * ctest puts the fake first on LD_LIBRARY_PATH; run otherwise, or where the
 * CUDA module cannot be loaded, the tests skip saying why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_module.h"
#include "program.h"
#include "fake_cuda/fake_cuda.h"
#include "cuda_backend.h"
#include "mtgpu/device.h"
#include "measure.h"
#include "template.h"

static fake_cuda_stats_fn g_stats;
static fake_cuda_fail_fn g_fail;
static char g_skip[1024];
static char g_cache[1024];
static const char *g_argv0;

#define REQUIRE_FAKE()                                 \
    do {                                               \
        if (g_skip[0]) {                               \
            printf("SKIP: %s\n", g_skip);              \
            fflush(stdout);                            \
            skip();                                    \
        }                                              \
    } while (0)

static fake_cuda_stats stats(void) {
    fake_cuda_stats s;
    g_stats(&s);
    return s;
}

/* Every discipline the fake checks, kept so far. */
static void assert_clean_calls(void) {
    fake_cuda_stats s = stats();
    if (s.no_context || s.wrong_context || s.bad_copies || s.bad_params || s.pops_without_push || s.max_depth > 1)
        printf("fake driver: no_context %d, wrong_context %d, bad_copies %d, bad_params %d, pops_without_push %d, max_depth %d\n",
               s.no_context, s.wrong_context, s.bad_copies, s.bad_params, s.pops_without_push, s.max_depth);
    assert_int_equal(s.no_context, 0);
    assert_int_equal(s.wrong_context, 0);
    assert_int_equal(s.bad_copies, 0);
    assert_int_equal(s.bad_params, 0);
    assert_int_equal(s.pops_without_push, 0);
    assert_true(s.max_depth <= 1); /* never nested */
}

/* Nothing of the device left once every handle is gone. */
static void assert_all_released(void) {
    fake_cuda_stats s = stats();
    if (s.ctx_refs || s.live_allocs || s.live_modules || s.live_streams || s.live_events)
        printf("fake driver: ctx_refs %d, allocs %d, modules %d, streams %d, events %d live\n", s.ctx_refs, s.live_allocs, s.live_modules,
               s.live_streams, s.live_events);
    assert_int_equal(s.ctx_refs, 0);
    assert_int_equal(s.live_allocs, 0);
    assert_int_equal(s.live_modules, 0);
    assert_int_equal(s.live_streams, 0);
    assert_int_equal(s.live_events, 0);
    assert_clean_calls();
}

static mt_device *open_dev(const char *cache_dir, int use_cache) {
    mt_device_params p = mt_device_default_params();
    p.cache_dir = cache_dir;
    p.use_cache = use_cache;
    mt_device *d = NULL;
    char err[2048];
    mt_status st = mt_device_open("cuda:0", &p, &d, err, sizeof err);
    if (st != MT_OK) printf("open cuda:0: %s\n", err);
    assert_int_equal(st, MT_OK);
    return d;
}

static int count_cubins(const char *dir, char *last, size_t len) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".cubin") == 0) {
            n++;
            if (last) snprintf(last, len, "%s/%s", dir, e->d_name);
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
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static const char SAXPY[] = "extern \"C\" __global__ void saxpy(const float *__restrict__ x, float *__restrict__ y) {\n"
                            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                            "    if (i < 1000) y[i] = 2.0f * x[i] + y[i];\n"
                            "}\n";

/* ------------------------------------------------------------ tests */

static void test_fake_devices(void **state) {
    (void)state;
    REQUIRE_FAKE();
    mt_device_info infos[8];
    int count = 0;
    char notes[2048];
    assert_int_equal(mt_device_list(infos, 8, &count, notes, sizeof notes), MT_OK);
    const mt_device_info *d = NULL;
    for (int i = 0; i < count && i < 8; i++)
        if (infos[i].backend == MT_BACKEND_CUDA) d = &infos[i];
    assert_non_null(d);
    printf("listed: cuda:%d %s (%s), driver %s, %d SMs at %d MHz, peak %.0f GFLOP/s, fingerprint %s\n", d->index, d->name, d->platform,
           d->driver, d->compute_units, d->clock_mhz, d->peak_gflops, d->fingerprint);
    assert_string_equal(d->name, "Fake NVIDIA H200");
    assert_string_equal(d->platform, "CUDA sm_90");
    assert_non_null(strstr(d->driver, "CUDA 13.0"));
    assert_int_equal(d->compute_units, 132);
    assert_int_equal(d->clock_mhz, 1980);
    assert_int_equal(d->local_mem_bytes, 49152);
    assert_int_equal(d->max_work_group_size, 1024);
    assert_int_equal(d->max_work_item_sizes[2], 64);
    assert_true(d->peak_gflops > 66908 && d->peak_gflops < 66909); /* 132 SMs x 128 lanes x 2 x 1.98 GHz */
    assert_int_equal((int)strlen(d->fingerprint), 16);
    assert_null(strstr(notes, "cuda:"));

    mt_device *dev = open_dev(g_cache, 1);
    const mt_device_info *o = mt_device_get_info(dev);
    assert_string_equal(o->fingerprint, d->fingerprint);
    assert_true(stats().ctx_refs == 1 && stats().live_streams == 1);
    mt_device *two = open_dev(g_cache, 1); /* the same primary context, retained twice */
    assert_int_equal(stats().ctx_refs, 2);
    mt_device_close(two);
    mt_device_close(dev);
    char err[512];
    assert_int_equal(mt_device_open("cuda:1", NULL, &dev, err, sizeof err), MT_NOT_FOUND);
    printf("cuda:1: %s\n", err);
    assert_all_released();
}

static void test_fake_buffers_and_runs(void **state) {
    (void)state;
    REQUIRE_FAKE();
    mt_device *dev = open_dev(g_cache, 0);
    float x[1000], y[1000], back[1000];
    for (int i = 0; i < 1000; i++) x[i] = (float)i, y[i] = -1;
    mt_dbuf *dx = NULL, *dy = NULL;
    assert_int_equal(mt_dbuf_alloc(dev, sizeof x, &dx), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, sizeof y, &dy), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, dx, 0, x, sizeof x), MT_OK);
    assert_int_equal(mt_dbuf_write(dev, dy, 0, y, sizeof y), MT_OK);
    assert_int_equal(mt_dbuf_read(dev, dx, 0, back, sizeof back), MT_OK);
    assert_memory_equal(back, x, sizeof x);
    assert_int_equal(mt_dbuf_read(dev, dx, 4, back, 8), MT_OK);
    assert_true(back[0] == 1 && back[1] == 2);
    assert_int_equal(mt_dbuf_read(dev, dx, sizeof x - 4, back, 8), MT_INVALID_ARG);
    mt_dbuf *huge = NULL;
    assert_int_equal(mt_dbuf_alloc(dev, (size_t)1 << 40, &huge), MT_NOMEM);

    char log[8192], err[2048];
    mt_program *p = NULL;
    mt_status st = mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log);
    if (st != MT_OK) printf("build: %s\n", log);
    assert_int_equal(st, MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_dbuf *args[2] = {dx, dy};
    int64_t grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
    double t[150];
    int before = stats().launches;
    st = mt_program_run(dev, p, args, 2, grid, block, 2, 150, t, err, sizeof err);
    if (st != MT_OK) printf("run: %s\n", err);
    assert_int_equal(st, MT_OK);
    assert_int_equal(stats().launches - before, 152); /* warm-ups, then more repeats than one batch of events */
    for (int i = 0; i < 150; i++) assert_true(t[i] > 0.015 && t[i] < 1000);
    assert_int_equal(stats().live_events, 0);

    /* Launches the device cannot take, caught before the driver sees them. */
    int64_t b2048[3] = {2048, 1, 1}, bz[3] = {1, 1, 65}, gy[3] = {1, 65536, 1}, g0[3] = {0, 1, 1};
    before = stats().launches;
    assert_int_equal(mt_program_run(dev, p, args, 2, grid, b2048, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "2048"));
    assert_int_equal(mt_program_run(dev, p, args, 2, grid, bz, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    assert_int_equal(mt_program_run(dev, p, args, 2, gy, block, 0, 1, t, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "65535"));
    assert_int_equal(mt_program_run(dev, p, args, 2, g0, block, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    /* The driver counts saxpy's parameters: one argument is refused. */
    assert_int_equal(mt_program_run(dev, p, args, 1, grid, block, 0, 1, t, err, sizeof err), MT_INVALID_ARG);
    printf("1 argument for saxpy: %s\n", err);
    assert_int_equal(stats().launches, before);

    /* A kernel whose parameters the driver cannot count runs with what it is given. */
    static const char unknown[] = "extern \"C\" __global__ void unknown_params(float *y) { y[threadIdx.x] = 1.0f; }\n";
    mt_program *pu = NULL;
    assert_int_equal(mt_program_build_source(dev, unknown, "unknown_params", &pu, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_run(dev, pu, args + 1, 1, grid, block, 0, 1, t, err, sizeof err), MT_OK);
    mt_program_free(pu);

    /* A program and a buffer outlive their device handle. */
    mt_device_close(dev);
    assert_true(stats().ctx_refs == 1);
    mt_program_free(p);
    mt_dbuf_free(dx);
    mt_dbuf_free(dy);
    assert_all_released();
}

static void test_fake_cache(void **state) {
    (void)state;
    REQUIRE_FAKE();
    char dir[1100], entry[1400], log[4096];
    snprintf(dir, sizeof dir, "%s/cache", g_cache);
    mt_device *dev = open_dev(dir, 1);
    mt_program *p = NULL;
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    assert_int_equal(count_cubins(dir, entry, sizeof entry), 1);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);
    mt_device_close(dev);
    dev = open_dev(dir, 1);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);

    /* A cached cubin the driver refuses is rebuilt, and the new one cached. */
    g_fail("cuModuleLoadData", 1, FAKE_CUDA_ERROR_INVALID_IMAGE);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    /* A truncated entry likewise. */
    assert_int_equal(truncate(entry, 40), 0);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 0);
    mt_program_free(p);
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    assert_int_equal(mt_program_from_cache(p), 1);
    mt_program_free(p);
    assert_int_equal(count_cubins(dir, NULL, 0), 1);
    mt_device_close(dev);
    remove_dir(dir);
    assert_all_released();
}

static void test_fake_faults(void **state) {
    (void)state;
    REQUIRE_FAKE();
    mt_device *dev = open_dev(g_cache, 0);
    char log[8192], err[2048];
    mt_program *p = NULL;
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &p, log, sizeof log), MT_OK);
    mt_dbuf *b[2] = {NULL, NULL};
    assert_int_equal(mt_dbuf_alloc(dev, 4000, &b[0]), MT_OK);
    assert_int_equal(mt_dbuf_alloc(dev, 4000, &b[1]), MT_OK);
    int64_t grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
    double t[10];

    /* Too many resources at launch: a config this device cannot run. */
    g_fail("cuLaunchKernel", 3, FAKE_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    assert_int_equal(mt_program_run(dev, p, b, 2, grid, block, 1, 5, t, err, sizeof err), MT_INVALID_CONFIG);
    printf("out of resources: %s\n", err);
    assert_non_null(strstr(err, "cuLaunchKernel"));
    assert_non_null(strstr(err, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"));
    assert_int_equal(stats().live_events, 0);

    /* A kernel that faults: named, and said to leave the context unusable. */
    g_fail("cuEventSynchronize", 1, FAKE_CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(mt_program_run(dev, p, b, 2, grid, block, 0, 5, t, err, sizeof err), MT_LAUNCH);
    printf("fault: %s\n", err);
    assert_non_null(strstr(err, "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
    assert_non_null(strstr(err, "unusable"));
    g_fail("cuStreamSynchronize", 1, FAKE_CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(mt_program_run(dev, p, b, 2, grid, block, 2, 1, t, err, sizeof err), MT_LAUNCH);
    assert_non_null(strstr(err, "warm-up"));
    g_fail("cuStreamSynchronize", 1, FAKE_CUDA_ERROR_ILLEGAL_ADDRESS);
    float host[4];
    assert_int_equal(mt_dbuf_read(dev, b[0], 0, host, sizeof host), MT_DEVICE);
    assert_int_equal(stats().live_events, 0);

    /* Memory and images the driver refuses. */
    g_fail("cuMemAlloc_v2", 1, FAKE_CUDA_ERROR_OUT_OF_MEMORY);
    mt_dbuf *x = NULL;
    assert_int_equal(mt_dbuf_alloc(dev, 64, &x), MT_NOMEM);
    assert_null(x);
    g_fail("cuModuleLoadData", 1, FAKE_CUDA_ERROR_INVALID_IMAGE);
    mt_program *q = NULL;
    assert_int_equal(mt_program_build_source(dev, SAXPY, "saxpy", &q, log, sizeof log), MT_BUILD);
    printf("image refused: %s\n", log);
    assert_non_null(strstr(log, "cuModuleLoadData"));
    assert_non_null(strstr(log, "sm_90"));
    assert_null(q);
    /* A kernel the image does not have. */
    assert_int_equal(mt_program_build_source(dev, SAXPY, "nope", &q, log, sizeof log), MT_NOT_FOUND);
    g_fail("", 0, 0);

    /* cuDNN's arguments are checked before anything runs. */
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=16,h=16,w=16,k=16,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK); /* 16 KiB tensors */
    mt_cudnn_result r;
    assert_int_equal(mt_cudnn_reference_dbuf(dev, &wl, NULL, b[0], b[1], b[1], &r, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "smaller"));
    mt_cudnn_params cp = mt_cudnn_default_params();
    cp.repeats = 0;
    mt_dbuf *big = NULL;
    assert_int_equal(mt_dbuf_alloc(dev, 16 * 16 * 16 * 9 * 4, &big), MT_OK);
    assert_int_equal(mt_cudnn_reference_dbuf(dev, &wl, &cp, big, big, big, &r, err, sizeof err), MT_INVALID_ARG);
    mt_dbuf_free(big);

    mt_dbuf_free(b[0]);
    mt_dbuf_free(b[1]);
    mt_program_free(p);
    mt_device_close(dev);
    assert_all_released();
}

/* The measurement path on a CUDA device: a template's kernel through
 * mt_conv_bench. The fake computes nothing, so the check sees the sentinel
 * it wrote: a wrong result, reported as such (not a crash, not a launch
 * error); timings are skipped for it. */
static void test_fake_bench(void **state) {
    (void)state;
    REQUIRE_FAKE();
    mt_device *dev = open_dev(g_cache, 1);
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=16,h=20,w=20,k=24,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    char err[1024];
    mt_conv_bench *bench = NULL;
    assert_int_equal(mt_conv_bench_new(dev, &wl, 1, &bench, err, sizeof err), MT_OK);
    mt_device_limits lim = mt_device_get_limits(dev);
    for (int ti = 0; ti < mt_template_count(); ti++) {
        const mt_template *t = mt_template_at(ti);
        if (!mt_template_accepts(t, &wl)) continue;
        mt_space sp;
        assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
        uint64_t rng = 17 + ti;
        mt_config cfg;
        int found = 0;
        for (int i = 0; i < 4000 && !found; i++) {
            mt_space_random(&sp, &rng, &cfg);
            found = mt_template_check(t, &wl, &sp, &cfg, &lim, NULL, 0) == MT_OK;
        }
        assert_true(found);
        mt_measure_result r;
        mt_conv_bench_measure(bench, t, &sp, &cfg, NULL, &r);
        printf("%s on the fake: %s: %s\n", mt_template_name(t), mt_status_name(r.status), r.message);
        for (int i = 0; i < 4000 && r.status == MT_INVALID_CONFIG; i++) {
            /* Over a limit ptxas found (spills): another config. */
            mt_space_random(&sp, &rng, &cfg);
            if (mt_template_check(t, &wl, &sp, &cfg, &lim, NULL, 0) != MT_OK) continue;
            mt_conv_bench_measure(bench, t, &sp, &cfg, NULL, &r);
        }
        assert_int_equal(r.status, MT_WRONG_RESULT);
        assert_non_null(strstr(r.message, "unwritten"));
        /* Unchecked, it is timed. */
        mt_measure_params mp = mt_measure_default_params();
        mp.check = 0;
        mp.min_time_ms = 0;
        mt_conv_bench_measure(bench, t, &sp, &cfg, &mp, &r);
        assert_int_equal(r.status, MT_OK);
        assert_true(r.median_ms > 0);
        mt_space_free(&sp);
    }
    mt_conv_bench_free(bench);
    mt_device_close(dev);
    assert_all_released();
}

typedef struct job {
    mt_device *dev;
    int i;
    mt_status st;
    char msg[2048];
} job;

static void *thread_main(void *arg) {
    job *j = arg;
    char src[512];
    snprintf(src, sizeof src,
             "extern \"C\" __global__ void saxpy(const float *__restrict__ x, float *__restrict__ y) {\n"
             "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
             "    if (i < 1000) y[i] = %d.0f * x[i] + y[i];\n"
             "}\n",
             j->i + 2);
    mt_program *p = NULL;
    mt_dbuf *b[2] = {NULL, NULL};
    j->st = mt_program_build_source(j->dev, src, "saxpy", &p, j->msg, sizeof j->msg);
    if (j->st == MT_OK) j->st = mt_dbuf_alloc(j->dev, 4000, &b[0]);
    if (j->st == MT_OK) j->st = mt_dbuf_alloc(j->dev, 4000, &b[1]);
    float host[1000] = {0};
    for (int round = 0; j->st == MT_OK && round < 5; round++) {
        j->st = mt_dbuf_write(j->dev, b[0], 0, host, sizeof host);
        int64_t grid[3] = {4, 1, 1}, block[3] = {256, 1, 1};
        double t[3];
        if (j->st == MT_OK) j->st = mt_program_run(j->dev, p, b, 2, grid, block, 1, 3, t, j->msg, sizeof j->msg);
        if (j->st == MT_OK) j->st = mt_dbuf_read(j->dev, b[1], 0, host, sizeof host);
    }
    mt_dbuf_free(b[0]);
    mt_dbuf_free(b[1]);
    mt_program_free(p);
    return NULL;
}

/* Builds, copies and runs from several threads on one handle: each call
 * pushes the context in its own thread. */
static void test_fake_threads(void **state) {
    (void)state;
    REQUIRE_FAKE();
    enum { NT = 4 };
    mt_device *dev = open_dev(g_cache, 1);
    job jobs[NT];
    pthread_t tid[NT];
    for (int i = 0; i < NT; i++) {
        jobs[i] = (job){.dev = dev, .i = i};
        assert_int_equal(pthread_create(&tid[i], NULL, thread_main, &jobs[i]), 0);
    }
    for (int i = 0; i < NT; i++) pthread_join(tid[i], NULL);
    for (int i = 0; i < NT; i++) {
        if (jobs[i].st != MT_OK) printf("thread %d: %s: %s\n", i, mt_status_name(jobs[i].st), jobs[i].msg);
        assert_int_equal(jobs[i].st, MT_OK);
    }
    mt_device_close(dev);
    assert_all_released();
}

/* ------------------------------------------------ the other driver states */

/* In a child (the driver is loaded once per process): FAKE_CUDA_MODE set,
 * opening cuda:0 must fail cleanly with the driver's reason. */
static int mode_child(const char *mode) {
    char err[2048] = "", notes[2048] = "";
    mt_device *dev = (mt_device *)1;
    if (mt_device_open("cuda:0", NULL, &dev, err, sizeof err) != MT_UNAVAILABLE || dev) return 10;
    printf("FAKE_CUDA_MODE=%s: mt_device_open(cuda:0): %s\n", mode, err);
    const char *want = strcmp(mode, "nodevice") == 0 ? "cuInit: CUDA_ERROR_NO_DEVICE (100)" : "reports no device";
    if (!strstr(err, want)) return 11;
    mt_device_info infos[4];
    int count = 0;
    if (mt_device_list(infos, 4, &count, notes, sizeof notes) != MT_OK) return 12;
    if (!strstr(notes, "cuda: ") || !strstr(notes, want)) return 13;
    for (int i = 0; i < count && i < 4; i++)
        if (infos[i].backend == MT_BACKEND_CUDA) return 14;
    return 0;
}

static void run_mode(const char *mode) {
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("FAKE_CUDA_MODE", mode, 1);
        char *args[] = {(char *)g_argv0, (char *)"--mode", (char *)mode, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_fake_no_device(void **state) {
    (void)state;
    REQUIRE_FAKE();
    run_mode("nodevice");
    run_mode("zero");
}

/* ---------------------------------------------------------------- main */

static int group_setup(void **state) {
    (void)state;
    char why[2048];
    if (mt_cuda_available(why, sizeof why) != MT_OK) {
        snprintf(g_skip, sizeof g_skip, "CUDA module unavailable: %.900s", why);
        return 0;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *s = h ? dlsym(h, "fake_cuda_stats_get") : NULL, *f = h ? dlsym(h, "fake_cuda_fail") : NULL;
    if (!s || !f) {
        snprintf(g_skip, sizeof g_skip, "the fake driver is not first on LD_LIBRARY_PATH (ctest puts it there)");
        return 0;
    }
    memcpy(&g_stats, &s, sizeof g_stats);
    memcpy(&g_fail, &f, sizeof g_fail);
    const char *base = getenv("MTGPU_CACHE_DIR");
    snprintf(g_cache, sizeof g_cache, "%s/cuda-fake-XXXXXX", base && *base ? base : "/tmp");
    if (base && *base) mkdir(base, 0700);
    if (!mkdtemp(g_cache)) snprintf(g_skip, sizeof g_skip, "no temporary directory for the cache");
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (g_cache[0]) remove_dir(g_cache);
    return 0;
}

int main(int argc, char **argv) {
    g_argv0 = argv[0];
    if (argc > 2 && strcmp(argv[1], "--mode") == 0) return mode_child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fake_devices), cmocka_unit_test(test_fake_buffers_and_runs), cmocka_unit_test(test_fake_cache),
        cmocka_unit_test(test_fake_faults),  cmocka_unit_test(test_fake_bench),           cmocka_unit_test(test_fake_threads),
        cmocka_unit_test(test_fake_no_device),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
