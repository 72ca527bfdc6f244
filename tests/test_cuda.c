/* CUDA without a GPU: the module loader, NVRTC + nvJitLink resource reports,
 * the limits (and the CUDA build's rejection of kernels over them), every
 * template's kernels printed as CUDA C, the driver half of the module and
 * the cuDNN reference failing cleanly where there is no driver or no CUDA
 * device. The tests that run kernels are in test_cuda_gpu.
 *
 * Needs no GPU. Where the CUDA module cannot be loaded, the tests that need
 * it are skipped with the reason printed, and the binary still passes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_backend.h"
#include "program.h"
#include "mtgpu/device.h"
#include "measure.h"
#include "reference.h"
#include "template.h"
#include "mtgpu/workload.h"

#include "cuda_module.h"
#include "backend-impl.h"

/* The ptxas log parser is module code with no dependencies; compile it in
 * here so that it is tested on canned logs, with or without CUDA. */
#include "../cuda/module/ptxas_log.c"

#define SM 90

static const char *g_argv0;

/* Skips the calling test, with the reason, when the module cannot load. */
#define REQUIRE_MODULE()                                                   \
    do {                                                                   \
        char why_[2048];                                                   \
        if (mt_cuda_available(why_, sizeof why_) != MT_OK) {               \
            printf("skipped: CUDA module unavailable: %s\n", why_);        \
            fflush(stdout);                                                \
            skip();                                                        \
        }                                                                  \
    } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void print_res(const char *what, const mt_cuda_resources *r) {
    printf("%s: %d registers, %d B smem, %d B local, spills %d/%d B, %d B cmem[0], %d barriers, cubin %zu B\n", what, r->registers,
           r->shared_bytes, r->local_bytes, r->spill_store_bytes, r->spill_load_bytes, r->const_bytes, r->barriers, r->cubin_bytes);
    fflush(stdout);
}

/* ---- the parser, on logs as nvJitLink 13 writes them ---- */

static const char LOG_13[] =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Function properties for _Z6helperPfi\n"
    "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
    "ptxas info    : Compiling entry function 'first' for 'sm_90'\n"
    "ptxas info    : Function properties for first\n"
    "ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem\n"
    "ptxas info    : Compile time = 163.724 ms\n"
    "ptxas info    : Compiling entry function 'second' for 'sm_90'\n"
    "ptxas info    : Function properties for second\n"
    "ptxas         .     0 bytes stack frame, 120 bytes spill stores, 96 bytes spill loads\n"
    "ptxas info    : Used 255 registers, 49152 bytes smem\n"
    "info    : 0 bytes gmem\n"
    "info    : Function properties for 'first':\n"
    "info    : used 40 registers, used 1 barriers, 256 stack, 2048 bytes smem, 544 bytes cmem[0], 0 bytes lmem\n"
    "info    : Function properties for 'second':\n"
    "info    : used 255 registers, used 0 barriers, 0 stack, 50176 bytes smem, 536 bytes cmem[0], 0 bytes lmem\n";

static void test_parse_log(void **state) {
    (void)state;
    mt_cuda_resources r;
    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(LOG_13, "first", &r), 1);
    assert_int_equal(r.registers, 40);
    assert_int_equal(r.shared_bytes, 1024); /* ptxas's, not the finalizer's 2048 with the reserved 1 KiB */
    assert_int_equal(r.local_bytes, 256);
    assert_int_equal(r.spill_store_bytes, 0); /* not the helper's 8 */
    assert_int_equal(r.spill_load_bytes, 0);
    assert_int_equal(r.const_bytes, 544);
    assert_int_equal(r.barriers, 1);

    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(LOG_13, "second", &r), 1);
    assert_int_equal(r.registers, 255);
    assert_int_equal(r.shared_bytes, 49152);
    assert_int_equal(r.spill_store_bytes, 120);
    assert_int_equal(r.spill_load_bytes, 96);
    assert_int_equal(r.const_bytes, 536);

    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(LOG_13, NULL, &r), 1); /* the first kernel */
    assert_int_equal(r.registers, 40);

    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(LOG_13, "third", &r), 0);
    assert_int_equal(mt__cuda_parse_info_log(LOG_13, "firs", &r), 0);
    assert_int_equal(mt__cuda_parse_info_log("", NULL, &r), 0);
    assert_int_equal(mt__cuda_parse_info_log("garbage 12 registers\n\n,,, 99999999999999999999 bytes smem", NULL, &r), 0);
    assert_int_equal(r.registers, 0);

    /* An older ptxas: everything on the "Used" line, lmem instead of a stack frame. */
    static const char old[] = "ptxas info    : Compiling entry function 'k' for 'sm_52'\r\n"
                              "ptxas info    : Used 32 registers, 4096 bytes smem, 352 bytes cmem[0], 64 bytes lmem\r\n";
    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(old, "k", &r), 1);
    assert_int_equal(r.registers, 32);
    assert_int_equal(r.shared_bytes, 4096);
    assert_int_equal(r.const_bytes, 352);
    assert_int_equal(r.local_bytes, 64);

    /* Only the finalizer's report, numbers that overflow int saturate. */
    static const char fin[] = "info    : Function properties for 'k':\n"
                              "info    : used 12 registers, 99999999999999999999 stack, 0 bytes smem\n";
    memset(&r, 0, sizeof r);
    assert_int_equal(mt__cuda_parse_info_log(fin, NULL, &r), 1);
    assert_int_equal(r.registers, 12);
    assert_int_equal(r.local_bytes, INT_MAX);
}

static void test_ptx_shared(void **state) {
    (void)state;
    static const char ptx[] = ".version 9.0\n"
                              ".target sm_90\n"
                              ".extern .shared .align 16 .b8 dyn[];\n"
                              ".shared .align 4 .b8 modscope[100]; // module scope\n"
                              ".func  (.param .b32 func_retval0) _Z1ff(\n"
                              "{\n"
                              "\t.shared .align 4 .b8 _ZZ1ffE1s[65536];\n"
                              "}\n"
                              ".visible .entry big(\n"
                              "\t.param .u64 big_param_0\n"
                              ")\n"
                              "{\n"
                              "\t.shared .align 4 .b8 _ZZ3bigE1s[16640];\n"
                              "\t.shared .align 8 .f64 _ZZ3bigE1d[3];\n"
                              "\t.shared .align 16 .v4 .f32 _ZZ3bigE1v[2][3];\n"
                              "\t.shared .align 4 .u32 one;\n"
                              "\tst.shared.f32 \t[%rd11], %f3; // { not a brace\n"
                              "}\n"
                              ".visible .entry other(\n"
                              ")\n"
                              "{\n"
                              "\t.shared .align 4 .b8 _ZZ5otherE1o[40];\n"
                              "}\n";
    assert_int_equal(mt__cuda_ptx_shared_bytes(ptx, "big"), 16640 + 24 + 96 + 4);
    assert_int_equal(mt__cuda_ptx_shared_bytes(ptx, NULL), 16640 + 24 + 96 + 4);
    assert_int_equal(mt__cuda_ptx_shared_bytes(ptx, "other"), 40); /* module scope: not known to be other's */
    assert_int_equal(mt__cuda_ptx_shared_bytes(ptx, "nope"), 0);
    assert_int_equal(mt__cuda_ptx_shared_bytes("", NULL), 0);
    assert_int_equal(mt__cuda_ptx_shared_bytes(".visible .entry k(\n{\n.shared .b8 x[99999999999999999999999];\n}\n", "k"), 1LL << 40);
    static const char one[] = ".shared .align 4 .b8 g[8];\n.visible .entry k(\n)\n{\n\t.shared .b32 t[4];\n}\n";
    assert_int_equal(mt__cuda_ptx_shared_bytes(one, "k"), 8 + 16); /* one entry: module scope is its */
}

/* ---- limits ---- */

static void test_check_limits(void **state) {
    (void)state;
    mt_cuda_resources r = {0};
    char err[256];
    r.registers = 64;
    r.shared_bytes = 48 * 1024;
    r.local_bytes = 256;
    r.spill_store_bytes = 8;
    r.spill_load_bytes = 8;
    assert_int_equal(mt_cuda_check_limits(&r, SM, err, sizeof err), MT_OK);
    r.registers = 256;
    assert_int_equal(mt_cuda_check_limits(&r, SM, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "registers"));
    r.registers = 64;
    r.shared_bytes = 48 * 1024 + 1;
    assert_int_equal(mt_cuda_check_limits(&r, SM, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "shared"));
    r.shared_bytes = 0;
    r.local_bytes = MT_CUDA_MAX_LOCAL_BYTES + 4;
    assert_int_equal(mt_cuda_check_limits(&r, SM, err, sizeof err), MT_INVALID_CONFIG);
    r.local_bytes = 0;
    r.spill_store_bytes = 600;
    r.spill_load_bytes = 600;
    assert_int_equal(mt_cuda_check_limits(&r, SM, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "spill"));
    assert_int_equal(mt_cuda_check_limits(NULL, SM, err, sizeof err), MT_INVALID_ARG);
}

/* ---- loading ---- */

static void test_load_bogus_path(void **state) {
    (void)state;
    void *h = (void *)1;
    const mt_cuda_module *m = (const mt_cuda_module *)1;
    char err[1024] = "";
    assert_int_equal(mt__cuda_load_from("/nonexistent/dir/libmtgpu_cuda.so", &h, &m, err, sizeof err), MT_UNAVAILABLE);
    assert_null(h);
    assert_null(m);
    assert_non_null(strstr(err, "/nonexistent/dir/libmtgpu_cuda.so"));

    /* A library that loads but is not the module: the symbol is missing. */
    err[0] = '\0';
    assert_int_equal(mt__cuda_load_from("libm.so.6", &h, &m, err, sizeof err), MT_UNAVAILABLE);
    assert_null(h);
    assert_non_null(strstr(err, MT_CUDA_MODULE_SYMBOL));

    assert_int_equal(mt__cuda_load_from(NULL, &h, &m, err, sizeof err), MT_INVALID_ARG);
    mt__cuda_unload(NULL);
}

/* Run in a child process (the loader caches per process): with a bogus
 * MTGPU_CUDA_MODULE every entry point fails cleanly. Returns the exit code. */
static int bogus_env_child(void) {
    char why[2048] = "";
    if (mt_cuda_available(why, sizeof why) != MT_UNAVAILABLE) return 10;
    if (!strstr(why, "MTGPU_CUDA_MODULE") || !strstr(why, "/nonexistent/libmtgpu_cuda.so")) return 11;
    mt_cuda_resources r;
    char log[512];
    if (mt_cuda_compile_check("extern \"C\" __global__ void k() {}", "k", SM, &r, log, sizeof log) != MT_UNAVAILABLE) return 12;
    if (log[0] == '\0' || r.registers != 0) return 13;
    char err[2048] = "";
    if (mt__backend_cuda(err, sizeof err) != NULL) return 14;
    if (!strstr(err, "CUDA module not found")) return 15;
    printf("child with bogus MTGPU_CUDA_MODULE: %s\n", err);
    return 0;
}

static void test_load_bogus_env(void **state) {
    (void)state;
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("MTGPU_CUDA_MODULE", "/nonexistent/libmtgpu_cuda.so", 1);
        char *args[] = {(char *)g_argv0, (char *)"--bogus-module-child", NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Skips hide nothing: when the build made a module (it sits in the build
 * directory, one level above this test), it must load. A module that needs
 * libcuda.so.1, for instance, would otherwise skip every test on a machine
 * without the driver. */
static void test_built_module_loads(void **state) {
    (void)state;
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) skip();
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) skip();
    *slash = '\0';
    char path[1200];
    snprintf(path, sizeof path, "%s/../libmtgpu_cuda.so", exe);
    if (access(path, F_OK) != 0) {
        printf("skipped: no CUDA module was built (%s)\n", path);
        skip();
    }
    void *h = NULL;
    const mt_cuda_module *m = NULL;
    char err[2048];
    mt_status s = mt__cuda_load_from(path, &h, &m, err, sizeof err);
    if (s != MT_OK) printf("built module does not load: %s\n", err);
    assert_int_equal(s, MT_OK);
    char why[512];
    m->driver_available(why, sizeof why); /* callable from a separately loaded copy */
    mt__cuda_unload(h);
    if (!getenv("MTGPU_CUDA_MODULE")) assert_int_equal(mt_cuda_available(err, sizeof err), MT_OK);
}

/* Non-zero when this machine has a usable CUDA driver (the GPU tests are in
 * test_cuda_gpu); the tests below check what happens without one. */
static int have_driver(void) { return mt__backend_cuda(NULL, 0) != NULL; }

static void test_backend_reason(void **state) {
    (void)state;
    char err[2048] = "";
    const mt_backend_i *be = mt__backend_cuda(err, sizeof err);
    if (be) {
        printf("mt__backend_cuda: available (GPU machine)\n");
        assert_int_equal(be->kind, MT_BACKEND_CUDA);
        assert_int_equal(be->lang, MT_LANG_CUDA);
        return;
    }
    assert_true(strlen(err) > 0);
    printf("mt__backend_cuda: %s\n", err);
    if (mt_cuda_available(NULL, 0) == MT_OK) {
        assert_null(strstr(err, "module not found"));
        assert_non_null(strstr(err, "CUDA driver")); /* the module loads: the driver is what is missing */
    }
}

/* The driver half of the module on a machine without a driver: every member
 * that needs one fails cleanly, with a reason. */
static void test_module_driver_members(void **state) {
    (void)state;
    REQUIRE_MODULE();
    const mt_cuda_module *m;
    char err[2048];
    assert_int_equal(mt__cuda_module(&m, err, sizeof err), MT_OK);
    assert_true(mt__cuda_module_can_run(m));
    assert_true(MT_CUDA_MODULE_HAS(m, cudnn_conv));
    if (have_driver()) {
        int n = 0;
        assert_int_equal(m->dev_list(NULL, 0, &n, err, sizeof err), MT_OK);
        printf("driver present: %d CUDA device(s); the GPU tests are in test_cuda_gpu\n", n);
        assert_true(n > 0);
        return;
    }
    int n = -1;
    mt_device_info info[2];
    memset(err, 0, sizeof err);
    assert_int_equal(m->dev_list(info, 2, &n, err, sizeof err), MT_UNAVAILABLE);
    assert_int_equal(n, 0);
    assert_true(strlen(err) > 0);
    printf("dev_list: %s\n", err);
    char why[1024] = "";
    assert_int_equal(m->driver_available(why, sizeof why), 0);
    assert_string_equal(why, err); /* one reason, however it is asked */
    assert_int_equal(m->dev_list(NULL, 0, NULL, err, sizeof err), MT_INVALID_ARG);

    void *dev = (void *)1;
    char err2[2048] = "";
    assert_int_equal(m->dev_open(0, &dev, info, err2, sizeof err2), MT_UNAVAILABLE);
    assert_null(dev);
    assert_string_equal(err2, why);
    m->dev_close(NULL);
    m->prog_free(NULL);
    m->buf_free(NULL);
    assert_int_equal(m->dev_props(NULL, NULL), MT_INVALID_ARG);
    assert_int_equal(m->prog_info(NULL, NULL), MT_INVALID_ARG);
    double t = 0;
    int64_t one[3] = {1, 1, 1};
    assert_int_equal(m->run(NULL, NULL, NULL, 0, one, one, 0, 1, &t, err, sizeof err), MT_INVALID_ARG);
    void *buf = (void *)1;
    assert_int_equal(m->alloc(NULL, 16, &buf), MT_INVALID_ARG);
    assert_null(buf);
}

/* Opening cuda:0 through the public API fails cleanly, saying why, and the
 * listing notes the backend as unavailable with the same reason. */
static void test_open_cuda0_fails(void **state) {
    (void)state;
    if (have_driver()) {
        printf("skipped: a CUDA driver is present (test_cuda_gpu opens cuda:0)\n");
        skip();
    }
    char err[2048] = "";
    mt_device *dev = (mt_device *)1;
    assert_int_equal(mt_device_open("cuda:0", NULL, &dev, err, sizeof err), MT_UNAVAILABLE);
    assert_null(dev);
    printf("mt_device_open(cuda:0): %s\n", err);
    assert_non_null(strstr(err, "cuda"));
    assert_true(strlen(err) > strlen("cuda backend unavailable: "));
    assert_int_equal(mt_device_open("cuda", NULL, &dev, err, sizeof err), MT_UNAVAILABLE);
    assert_null(dev);

    mt_device_info infos[8];
    int count = 0;
    char notes[4096] = "";
    assert_int_equal(mt_device_list(infos, 8, &count, notes, sizeof notes), MT_OK);
    for (int i = 0; i < count && i < 8; i++) assert_int_not_equal(infos[i].backend, MT_BACKEND_CUDA);
    printf("device notes: %s", notes);
    assert_non_null(strstr(notes, "cuda: "));
}

/* A description of an H200 (sm_90, 132 SMs) as dev_props gives it. */
static mt_cuda_device_props h200_props(void) {
    mt_cuda_device_props p;
    memset(&p, 0, sizeof p);
    p.cc_major = 9;
    p.cc_minor = 0;
    p.sm_count = 132;
    p.warp_size = 32;
    p.max_threads_per_block = 1024;
    p.max_threads_per_sm = 2048;
    p.max_regs_per_block = 65536;
    p.max_regs_per_sm = 65536;
    p.max_shared_per_block = 48 * 1024;
    p.max_shared_per_block_optin = 227 * 1024;
    p.reserved_shared_per_block = 1024;
    p.max_shared_per_sm = 228 * 1024;
    p.clock_khz = 1980000;
    p.driver_version = 13000;
    return p;
}

/* The same limits on the driver's figures (a cubin from the cache). */
static void test_check_resources(void **state) {
    (void)state;
    mt_cuda_device_props h200 = h200_props();
    mt_cuda_resources r;
    memset(&r, 0, sizeof r);
    char err[256];
    r.registers = 128;
    r.shared_bytes = 48 * 1024;
    assert_int_equal(mt__cuda_check_resources(&r, &h200, err, sizeof err), MT_OK);
    r.registers = 256;
    assert_int_equal(mt__cuda_check_resources(&r, &h200, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "registers"));
    r.registers = 32;
    r.shared_bytes = 48 * 1024 + 4;
    assert_int_equal(mt__cuda_check_resources(&r, &h200, err, sizeof err), MT_INVALID_CONFIG);
    assert_non_null(strstr(err, "shared"));
    assert_int_equal(mt__cuda_check_resources(NULL, &h200, err, sizeof err), MT_INVALID_ARG);
}

/* A CUDA device's description gives launch limits that reject, before any
 * compile, the configs a CUDA GPU cannot take: grids over 65535 blocks in y
 * and z, blocks over 1024 threads, shared memory over 48 KiB, and more
 * private floats than registers. */
static void test_cuda_device_limits(void **state) {
    (void)state;
    mt_device_info info;
    memset(&info, 0, sizeof info);
    info.backend = MT_BACKEND_CUDA;
    info.max_work_group_size = 1024;
    info.max_work_item_sizes[0] = 1024;
    info.max_work_item_sizes[1] = 1024;
    info.max_work_item_sizes[2] = 64;
    info.local_mem_bytes = 48 * 1024;
    info.max_registers_per_thread = MT_CUDA_MAX_REGISTERS;
    mt_device_limits lim = mt_device_info_limits(&info);
    assert_int_equal(lim.max_grid_dim[0], 2147483647);
    assert_int_equal(lim.max_grid_dim[1], 65535);
    assert_int_equal(lim.max_grid_dim[2], 65535);
    assert_int_equal(lim.max_threads_per_block, 1024);
    assert_int_equal(lim.local_mem_bytes, 48 * 1024);
    assert_int_equal(lim.max_private_floats, MT_CUDA_MAX_REGISTERS);
    info.backend = MT_BACKEND_OPENCL;
    assert_int_equal(mt_device_info_limits(&info).max_grid_dim[1], 0); /* OpenCL has no such limit */

    /* Random direct configs of a large layer: some are over the shared
     * memory or the register budget, and the template check says which. */
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=256,h=14,w=14,k=256,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    const mt_template *t = mt_template_find("direct");
    assert_non_null(t);
    mt_space sp;
    assert_int_equal(mt_template_space(t, &wl, &sp), MT_OK);
    uint64_t rng = 77;
    int ok = 0, shared = 0, regs = 0, threads = 0;
    char err[512];
    for (int i = 0; i < 3000 && (!ok || !shared || !regs); i++) {
        mt_config cfg;
        mt_space_random(&sp, &rng, &cfg);
        mt_status s = mt_template_check(t, &wl, &sp, &cfg, &lim, err, sizeof err);
        if (s == MT_OK) ok++;
        else if (s == MT_INVALID_CONFIG && strstr(err, "local memory")) shared++;
        else if (s == MT_INVALID_CONFIG && strstr(err, "private floats")) regs++;
        else if (s == MT_INVALID_CONFIG && strstr(err, "work-items")) threads++;
    }
    mt_space_free(&sp);
    printf("direct on a CUDA device's limits: %d valid, rejected: %d over shared memory, %d over registers, %d over threads\n", ok,
           shared, regs, threads);
    assert_true(ok > 0);
    assert_true(shared > 0);
    assert_true(regs > 0);
}

/* cuDNN is a reference for CUDA devices only: on any other device it is
 * MT_UNAVAILABLE with the reason, never a crash. */
static void test_cudnn_on_other_device(void **state) {
    (void)state;
    char why[1024] = "";
    int dnn = mt_cudnn_available(why, sizeof why);
    printf("mt_cudnn_available: %d (%s)\n", dnn, why);
    assert_true(strlen(why) > 0);
    mt_cudnn_params p = mt_cudnn_default_params();
    assert_int_equal(p.warmup, 3);
    assert_int_equal(p.repeats, 20);

    mt_device *dev = NULL;
    char err[1024];
    if (mt_device_open("opencl:0", NULL, &dev, err, sizeof err) != MT_OK) {
        printf("skipped: no OpenCL device to try cuDNN on: %s\n", err);
        skip();
    }
    mt_workload wl;
    assert_int_equal(mt_workload_parse("n=1,c=4,h=6,w=6,k=4,r=3,s=3,pad=1", &wl, NULL, 0), MT_OK);
    float in[4 * 36], wt[4 * 4 * 9], out[4 * 36];
    mt_fill_random(in, 4 * 36, 1);
    mt_fill_random(wt, 4 * 4 * 9, 2);
    mt_cudnn_result res;
    memset(&res, 0x5a, sizeof res);
    err[0] = '\0';
    assert_int_equal(mt_cudnn_reference(dev, &wl, NULL, in, wt, out, &res, err, sizeof err), MT_UNAVAILABLE);
    printf("mt_cudnn_reference on opencl:0: %s\n", err);
    assert_non_null(strstr(err, "no vendor reference"));
    assert_true(res.strict_ms == 0 && res.version[0] == '\0'); /* zeroed */

    mt_conv_bench *b = NULL;
    assert_int_equal(mt_conv_bench_new(dev, &wl, 3, &b, err, sizeof err), MT_OK);
    double e = 0;
    assert_int_equal(mt_conv_bench_cudnn(b, NULL, NULL, &res, &e, err, sizeof err), MT_UNAVAILABLE);
    assert_non_null(strstr(err, "opencl:0"));
    assert_true(e < 0);
    mt_conv_bench_free(b);
    assert_int_equal(mt_cudnn_reference(dev, &wl, NULL, NULL, wt, out, &res, err, sizeof err), MT_INVALID_ARG);
    mt_device_close(dev);
}

/* ---- compiling ---- */

static const char SAXPY_TILE[] =
    "extern \"C\" __global__ void __launch_bounds__(256) tile(const float *__restrict__ a, const float *__restrict__ b,\n"
    "                                                    float *__restrict__ c, int n) {\n"
    "    __shared__ float s[256];\n"
    "    float acc[8];\n"
    "    int t = threadIdx.x, i = blockIdx.x * 256 + t;\n"
    "    s[t] = i < n ? a[i] : 0.0f;\n"
    "    __syncthreads();\n"
    "    #pragma unroll\n"
    "    for (int j = 0; j < 8; j++) acc[j] = s[(t + j * 31) & 255] * b[j];\n"
    "    float r = 0.0f;\n"
    "    #pragma unroll\n"
    "    for (int j = 0; j < 8; j++) r = fmaf(acc[j], b[8 + j], r);\n"
    "    if (i < n) c[i] = r;\n"
    "}\n";

static void test_compile_ok(void **state) {
    (void)state;
    REQUIRE_MODULE();
    mt_cuda_resources r;
    char log[8192];
    double t0 = now_s();
    mt_status s = mt_cuda_compile_check(SAXPY_TILE, "tile", SM, &r, log, sizeof log);
    if (s != MT_OK) printf("log:\n%s\n", log);
    assert_int_equal(s, MT_OK);
    print_res("tile (sm_90)", &r);
    printf("  compile check took %.2f s\n", now_s() - t0);
    assert_true(r.registers > 0);
    assert_int_equal(r.shared_bytes, 1024);
    assert_int_equal(r.barriers, 1);
    assert_true(r.cubin_bytes > 0);
    assert_non_null(strstr(log, "registers")); /* the report comes back in the log */
    assert_int_equal(mt_cuda_check_limits(&r, SM, log, sizeof log), MT_OK);

    /* The first kernel when no name is given; another architecture. */
    assert_int_equal(mt_cuda_compile_check(SAXPY_TILE, NULL, 80, &r, log, sizeof log), MT_OK);
    assert_true(r.registers > 0);
}

static void test_syntax_error(void **state) {
    (void)state;
    REQUIRE_MODULE();
    mt_cuda_resources r;
    char log[4096];
    mt_status s = mt_cuda_compile_check("extern \"C\" __global__ void k(float *p) { p[0] = 1.0f }\n", "k", SM, &r, log, sizeof log);
    assert_int_equal(s, MT_BUILD);
    assert_true(strlen(log) > 0);
    assert_int_equal(r.registers, 0);
    printf("syntax error log: %s", log);
}

static void test_big_shared(void **state) {
    (void)state;
    REQUIRE_MODULE();
    static const char src[] = "extern \"C\" __global__ void big(float *p) {\n"
                              "    __shared__ float s[16384]; /* 64 KiB */\n"
                              "    s[threadIdx.x] = p[threadIdx.x];\n"
                              "    __syncthreads();\n"
                              "    p[threadIdx.x] = s[(threadIdx.x * 97) & 16383];\n"
                              "}\n";
    mt_cuda_resources r;
    char log[4096];
    mt_status s = mt_cuda_compile_check(src, "big", SM, &r, log, sizeof log);
    printf("64 KiB static shared: %s: %s\n", mt_status_name(s), log);
    assert_int_equal(s, MT_INVALID_CONFIG); /* seen in the PTX, before linking */
    assert_non_null(strstr(log, "shared"));
    assert_int_equal(r.shared_bytes, 65536);
    assert_int_equal(mt_cuda_check_limits(&r, SM, log, sizeof log), MT_INVALID_CONFIG);

    /* Shared memory the PTX check does not attribute (a non-inlined device
     * function's): nvJitLink's finalizer rejects it, still a clean error. */
    static const char hidden[] = "__device__ __noinline__ float f(float x) {\n"
                                 "    __shared__ float s[16384];\n"
                                 "    s[threadIdx.x] = x;\n"
                                 "    __syncthreads();\n"
                                 "    return s[(threadIdx.x * 97) & 16383];\n"
                                 "}\n"
                                 "extern \"C\" __global__ void big(float *p) { p[threadIdx.x] = f(p[threadIdx.x]); }\n";
    s = mt_cuda_compile_check(hidden, "big", SM, &r, log, sizeof log);
    printf("64 KiB shared in a device function: %s: %s", mt_status_name(s), log);
    assert_int_equal(s, MT_INVALID_CONFIG);
    assert_non_null(strstr(log, "too much shared data"));
}

static void test_bad_inputs(void **state) {
    (void)state;
    REQUIRE_MODULE();
    mt_cuda_resources r;
    char log[1024];
    assert_int_equal(mt_cuda_compile_check(SAXPY_TILE, "nope", SM, &r, log, sizeof log), MT_NOT_FOUND);
    assert_non_null(strstr(log, "nope"));
    assert_int_equal(mt_cuda_compile_check(SAXPY_TILE, "tile", 35, &r, log, sizeof log), MT_UNSUPPORTED);
    assert_non_null(strstr(log, "sm_35"));
    assert_int_equal(mt_cuda_compile_check(NULL, "tile", SM, &r, log, sizeof log), MT_INVALID_ARG);
    assert_int_equal(mt_cuda_compile_check(SAXPY_TILE, "tile", 0, &r, log, sizeof log), MT_INVALID_ARG);
    assert_int_equal(mt_cuda_kernel_check(NULL, SM, &r, log, sizeof log), MT_INVALID_ARG);
    /* Tiny buffers and no buffers at all are fine. */
    char one[1];
    assert_int_equal(mt_cuda_compile_check("int x = ;", NULL, SM, NULL, one, sizeof one), MT_BUILD);
    assert_int_equal(one[0], '\0');
    assert_int_equal(mt_cuda_compile_check("int x = ;", NULL, SM, NULL, NULL, 0), MT_BUILD);
}

/* A compile that runs past its time limit stops with MT_TIMEOUT. */
static void test_timeout(void **state) {
    (void)state;
    REQUIRE_MODULE();
    mt_cuda_check_params p = mt_cuda_check_default_params();
    p.timeout_s = 1e-6;
    mt_cuda_resources r;
    char log[1024];
    double t0 = now_s();
    mt_status s = mt_cuda_compile_check_ex(SAXPY_TILE, "tile", &p, &r, log, sizeof log);
    printf("timeout 1 us: %s after %.2f s: %s\n", mt_status_name(s), now_s() - t0, log);
    assert_int_equal(s, MT_TIMEOUT);
    assert_non_null(strstr(log, "time limit"));
    assert_int_equal(r.registers, 0);
    p.timeout_s = 60.0;
    assert_int_equal(mt_cuda_compile_check_ex(SAXPY_TILE, "tile", &p, &r, log, sizeof log), MT_OK);
    assert_true(r.registers > 0);
    assert_int_equal(mt_cuda_compile_check_ex(SAXPY_TILE, "tile", NULL, &r, log, sizeof log), MT_OK); /* defaults: sm_90 */
}

/* The module's compile member: PTX and cubin, as the backend will load them. */
static void test_module_compile(void **state) {
    (void)state;
    REQUIRE_MODULE();
    const mt_cuda_module *m;
    char log[4096];
    assert_int_equal(mt__cuda_module(&m, log, sizeof log), MT_OK);
    assert_int_equal(m->abi_version, MT_CUDA_MODULE_ABI);
    assert_true(m->struct_size >= MT_CUDA_MODULE_V1_SIZE);
    char ver[128] = "";
    m->toolkit_version(ver, sizeof ver);
    printf("toolkit: %s\n", ver);
    assert_non_null(strstr(ver, "NVRTC"));

    mt_cuda_check_params p = mt_cuda_check_default_params();
    assert_int_equal(p.sm_arch, 90);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(m->compile(SAXPY_TILE, "tile", &p, MT_CUDA_OUTPUT_PTX, &out, &len, log, sizeof log), MT_OK);
    assert_non_null(out);
    assert_true(len > 0);
    assert_non_null(strstr(out, ".entry tile"));
    m->free_buffer(out);

    assert_int_equal(m->compile(SAXPY_TILE, "tile", &p, MT_CUDA_OUTPUT_CUBIN, &out, &len, log, sizeof log), MT_OK);
    assert_non_null(out);
    assert_true(len > 4);
    assert_memory_equal(out, "\177ELF", 4);
    m->free_buffer(out);

    assert_int_equal(m->compile("broken(", "tile", &p, MT_CUDA_OUTPUT_CUBIN, &out, &len, log, sizeof log), MT_BUILD);
    assert_null(out);

    /* ptxas inside NVRTC refuses 64 KiB of static shared memory: a config over the limits. */
    static const char big[] = "extern \"C\" __global__ void big(float *p) {\n"
                              "    __shared__ float s[16384];\n"
                              "    s[threadIdx.x] = p[threadIdx.x];\n"
                              "    __syncthreads();\n"
                              "    p[threadIdx.x] = s[(threadIdx.x * 97) & 16383];\n"
                              "}\n";
    assert_int_equal(m->compile(big, "big", &p, MT_CUDA_OUTPUT_CUBIN, &out, &len, log, sizeof log), MT_INVALID_CONFIG);
    assert_null(out);
    assert_non_null(strstr(log, "shared"));

    /* resources can hand back the linked cubin too. */
    mt_cuda_resources r;
    assert_int_equal(m->resources(SAXPY_TILE, "tile", &p, &r, &out, &len, log, sizeof log), MT_OK);
    assert_non_null(out);
    assert_int_equal(len, r.cubin_bytes);
    m->free_buffer(out);
    m->free_buffer(NULL);

    char why[512];
    int drv = m->driver_available(why, sizeof why);
    printf("driver: %s\n", drv ? "present" : why);
}

/* So many live accumulators under __launch_bounds__(1024) (64 registers a
 * thread) that ptxas spills most of them. */
static const char REG_STARVED[] =
    "extern \"C\" __global__ void __launch_bounds__(1024) starved(const float *__restrict__ a, float *__restrict__ c) {\n"
    "    float acc[192];\n"
    "    int t = blockIdx.x * 1024 + threadIdx.x;\n"
    "    #pragma unroll\n"
    "    for (int j = 0; j < 192; j++) acc[j] = a[t + j];\n"
    "    for (int it = 0; it < 64; it++) {\n"
    "        #pragma unroll\n"
    "        for (int j = 0; j < 192; j++) acc[j] = fmaf(acc[j], acc[(j + 1) % 192], a[it]);\n"
    "    }\n"
    "    float r = 0.0f;\n"
    "    #pragma unroll\n"
    "    for (int j = 0; j < 192; j++) r += acc[j];\n"
    "    c[t] = r;\n"
    "}\n";

/* Kernels over a limit are rejected by the CUDA build before anything is
 * loaded, from ptxas's report: shared memory and register pressure. */
static void test_build_rejects_limits(void **state) {
    (void)state;
    REQUIRE_MODULE();
    const mt_cuda_module *m;
    char log[16384];
    assert_int_equal(mt__cuda_module(&m, log, sizeof log), MT_OK);
    mt_cuda_device_props h200 = h200_props();
    char *cubin = (char *)1;
    size_t len = 1;
    mt_cuda_resources r;

    /* Within every limit: a cubin for the device's own sm_90. */
    assert_int_equal(mt__cuda_build_cubin(m, SAXPY_TILE, "tile", &h200, 60, &cubin, &len, &r, log, sizeof log), MT_OK);
    assert_non_null(cubin);
    assert_true(len > 4);
    assert_memory_equal(cubin, "\177ELF", 4);
    assert_int_equal(r.shared_bytes, 1024);
    assert_string_equal(log, "");
    m->free_buffer(cubin);

    /* 64 KiB of static shared memory. */
    static const char big[] = "extern \"C\" __global__ void big(float *p) {\n"
                              "    __shared__ float s[16384];\n"
                              "    s[threadIdx.x] = p[threadIdx.x];\n"
                              "    __syncthreads();\n"
                              "    p[threadIdx.x] = s[(threadIdx.x * 97) & 16383];\n"
                              "}\n";
    cubin = (char *)1;
    assert_int_equal(mt__cuda_build_cubin(m, big, "big", &h200, 60, &cubin, &len, &r, log, sizeof log), MT_INVALID_CONFIG);
    assert_null(cubin);
    assert_int_equal(len, 0);
    assert_non_null(strstr(log, "shared"));
    printf("64 KiB shared: %s\n", log);

    /* Register pressure: ptxas spills, over the spill policy. */
    mt_status s = mt__cuda_build_cubin(m, REG_STARVED, "starved", &h200, 120, &cubin, &len, &r, log, sizeof log);
    print_res("starved (sm_90, launch bounds 1024)", &r);
    printf("  %s: %s\n", mt_status_name(s), log);
    assert_int_equal(s, MT_INVALID_CONFIG);
    assert_null(cubin);
    assert_true(r.registers <= 64);
    assert_true(r.spill_store_bytes + r.spill_load_bytes > MT_CUDA_MAX_SPILL_BYTES);
    assert_non_null(strstr(log, "spill"));

    /* The device's own shared-memory limit, below the 48 KiB every sm_xx has. */
    static const char forty[] = "extern \"C\" __global__ void forty(float *p) {\n"
                                "    __shared__ float s[10240];\n"
                                "    s[threadIdx.x] = p[threadIdx.x];\n"
                                "    __syncthreads();\n"
                                "    p[threadIdx.x] = s[(threadIdx.x * 97) % 10240];\n"
                                "}\n";
    mt_cuda_device_props small = h200;
    small.max_shared_per_block = 32 * 1024;
    assert_int_equal(mt__cuda_build_cubin(m, forty, "forty", &h200, 60, &cubin, &len, &r, log, sizeof log), MT_OK);
    m->free_buffer(cubin);
    assert_int_equal(mt__cuda_build_cubin(m, forty, "forty", &small, 60, &cubin, &len, &r, log, sizeof log), MT_INVALID_CONFIG);
    assert_null(cubin);
    assert_non_null(strstr(log, "this device"));

    /* A broken source is a build error, not an invalid config. */
    assert_int_equal(mt__cuda_build_cubin(m, "broken(", "k", &h200, 60, &cubin, &len, &r, log, sizeof log), MT_BUILD);
    assert_int_equal(mt__cuda_build_cubin(m, SAXPY_TILE, "tile", NULL, 60, &cubin, &len, &r, log, sizeof log), MT_INVALID_ARG);
}

/* ---- every template, printed as CUDA C ---- */

/* One (template, workload) pair of test_templates. */
typedef struct tmpl_job {
    const mt_template *t;
    const char *wl_text;
    mt_workload wl;
    mt_space sp;
    int got;
} tmpl_job;

/* Samples random configs of job until one builds and fits the launch limits
 * (at most `attempts` tries, none after `deadline`) and compile-checks it
 * for sm_90. Returns 1 when a kernel was checked, 0 when no try gave one. */
static int check_one_config(tmpl_job *job, const mt_device_limits *lim, uint64_t *rng, int attempts, double deadline,
                            int *rejected, int *timeouts) {
    char err[1024];
    for (int attempt = 0; attempt < attempts && now_s() < deadline; attempt++) {
        mt_config cfg;
        mt_space_random(&job->sp, rng, &cfg);
        char cfgtext[512];
        mt_config_format(&job->sp, &cfg, cfgtext, sizeof cfgtext);
        mt_kernel *k = NULL;
        mt_status s = mt_template_build(job->t, &job->wl, &job->sp, &cfg, &k, err, sizeof err);
        if (s == MT_INVALID_CONFIG) {
            (*rejected)++;
            continue;
        }
        if (s != MT_OK) printf("%s %s [%s]: build: %s: %s\n", mt_template_name(job->t), job->wl_text, cfgtext, mt_status_name(s), err);
        assert_int_equal(s, MT_OK);
        mt_kernel_resources kr;
        assert_int_equal(mt_kernel_analyze(k, &kr, err, sizeof err), MT_OK);
        if (mt_kernel_check_limits(&kr, lim, err, sizeof err) != MT_OK) {
            (*rejected)++;
            mt_kernel_free(k);
            continue;
        }
        mt_cuda_resources r;
        char log[16384];
        double t0 = now_s();
        mt_cuda_check_params p = mt_cuda_check_default_params();
        p.sm_arch = SM;
        p.timeout_s = 10.0; /* some configs unroll into minutes of NVRTC */
        s = mt_cuda_kernel_check_ex(k, &p, &r, log, sizeof log);
        if (s == MT_TIMEOUT) {
            printf("%s %s [%s]: over the %.0f s compile limit, another config\n", mt_template_name(job->t), job->wl_text, cfgtext,
                   p.timeout_s);
            (*timeouts)++;
            mt_kernel_free(k);
            continue;
        }
        if (s != MT_OK) {
            char *src = NULL;
            if (mt_kernel_print(k, MT_LANG_CUDA, &src, err, sizeof err) == MT_OK) printf("source:\n%s\n", src);
            free(src);
            printf("%s %s [%s]: %s\n%s\n", mt_template_name(job->t), job->wl_text, cfgtext, mt_status_name(s), log);
        }
        mt_kernel_free(k);
        assert_int_equal(s, MT_OK);
        assert_true(r.registers > 0);
        char what[768];
        snprintf(what, sizeof what, "%s %s [%s] (%.1f s)", mt_template_name(job->t), job->wl_text, cfgtext, now_s() - t0);
        print_res(what, &r);
        return 1;
    }
    return 0;
}

/* Up to 3 random configs of every template on each workload it accepts,
 * printed as CUDA C and compiled for sm_90: the printer's output must
 * compile and ptxas must report registers. Round-robin over the pairs, so
 * that every template is checked before the time budget can run out. */
/* Every GNN kernel (cuda/module/gnn_kernels.c) compiles with NVRTC for sm_90 and
 * links with nvJitLink, whose report is printed; cuBLAS's presence is
 * reported (no GPU needed for either). */
static void test_gnn_kernels_compile(void **state) {
    (void)state;
    REQUIRE_MODULE();
    const mt_cuda_module *m = NULL;
    char log[8192];
    assert_int_equal(mt__cuda_module(&m, log, sizeof log), MT_OK);
    if (!MT_CUDA_MODULE_HAS(m, gnn_free)) fail_msg("the CUDA module has no GNN members: rebuild it");
    const char *const *names = NULL;
    int count = 0;
    const char *src = m->gnn_kernels(&names, &count);
    assert_non_null(src);
    assert_true(count >= 9);
    mt_cuda_check_params p = mt_cuda_check_default_params();
    p.sm_arch = SM;
    for (int i = 0; i < count; i++) {
        mt_cuda_resources r;
        mt_status st = m->resources(src, names[i], &p, &r, NULL, NULL, log, sizeof log);
        if (st != MT_OK) fail_msg("%s for sm_%d: %s: %s", names[i], SM, mt_status_str(st), log);
        print_res(names[i], &r);
        assert_true(r.registers > 0 && r.registers <= MT_CUDA_MAX_REGISTERS);
        assert_int_equal(r.spill_store_bytes + r.spill_load_bytes, 0);
        assert_int_equal(mt_cuda_check_limits(&r, SM, log, sizeof log), MT_OK);
    }
    /* and the whole program as one cubin, as cuda/module/gnn.c builds it */
    char *bin = NULL;
    size_t len = 0;
    assert_int_equal(m->compile(src, NULL, &p, MT_CUDA_OUTPUT_CUBIN, &bin, &len, log, sizeof log), MT_OK);
    assert_true(len > 0);
    m->free_buffer(bin);
    char why[1024];
    int cb = m->gnn_available(why, sizeof why);
    printf("cuBLAS for the GNN: %s\n", cb ? why : "unavailable");
    if (!cb) printf("  (%s)\n", why);
}

static void test_templates(void **state) {
    (void)state;
    REQUIRE_MODULE();
    if (mt_template_count() <= 0) {
        printf("skipped: no templates yet\n");
        skip();
    }
    static const char *const workloads[] = {
        "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1",
        "n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1,groups=32",
        "n=1,c=64,h=56,w=56,k=256,r=1,s=1",
    };
    enum { NWL = sizeof workloads / sizeof workloads[0], MAX_JOBS = 64, PER_PAIR = 3 };
    /* sm_90 launch limits: configs that could never launch are left out
     * before paying for a compile. */
    mt_device_limits lim = {0};
    lim.max_threads_per_block = 1024;
    lim.max_block_dim[0] = 1024;
    lim.max_block_dim[1] = 1024;
    lim.max_block_dim[2] = 64;
    lim.max_grid_dim[0] = 2147483647;
    lim.max_grid_dim[1] = 65535;
    lim.max_grid_dim[2] = 65535;
    lim.local_mem_bytes = MT_CUDA_MAX_STATIC_SHARED;

    tmpl_job *jobs = calloc(MAX_JOBS, sizeof *jobs);
    assert_non_null(jobs);
    int njobs = 0;
    for (int ti = 0; ti < mt_template_count(); ti++) {
        for (int wi = 0; wi < NWL && njobs < MAX_JOBS; wi++) {
            tmpl_job *j = &jobs[njobs];
            char err[512];
            j->t = mt_template_at(ti);
            j->wl_text = workloads[wi];
            assert_int_equal(mt_workload_parse(workloads[wi], &j->wl, err, sizeof err), MT_OK);
            if (!mt_template_accepts(j->t, &j->wl)) continue;
            assert_int_equal(mt_template_space(j->t, &j->wl, &j->sp), MT_OK);
            njobs++;
        }
    }

    const double budget_s = 40.0;
    double t0 = now_s();
    uint64_t rng = 0x5eed;
    int checked = 0, rejected = 0, timeouts = 0, out_of_time = 0;
    for (int round = 0; round < PER_PAIR && !out_of_time; round++) {
        for (int i = 0; i < njobs; i++) {
            if (now_s() - t0 > budget_s) {
                out_of_time = 1;
                break;
            }
            if (jobs[i].got < round) continue; /* found no valid config before */
            if (check_one_config(&jobs[i], &lim, &rng, 60, t0 + budget_s, &rejected, &timeouts)) {
                jobs[i].got++;
                checked++;
            }
        }
    }
    int untested = 0;
    for (int ti = 0; ti < mt_template_count(); ti++) {
        int n = 0;
        for (int i = 0; i < njobs; i++) n += jobs[i].t == mt_template_at(ti) ? jobs[i].got : 0;
        printf("  %s: %d kernels\n", mt_template_name(mt_template_at(ti)), n);
        untested += n == 0;
    }
    printf("templates: %d kernels compiled for sm_%d, %d configs rejected before compiling, %d over the compile time limit, "
           "%.1f s%s\n",
           checked, SM, rejected, timeouts, now_s() - t0, out_of_time ? " (stopped at the time budget)" : "");
    for (int i = 0; i < njobs; i++) mt_space_free(&jobs[i].sp);
    free(jobs);
    assert_true(checked > 0);
    if (!out_of_time) assert_int_equal(untested, 0); /* every template gave at least one kernel */
}

int main(int argc, char **argv) {
    g_argv0 = argv[0];
    if (argc > 1 && strcmp(argv[1], "--bogus-module-child") == 0) return bogus_env_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_log),
        cmocka_unit_test(test_ptx_shared),
        cmocka_unit_test(test_check_limits),
        cmocka_unit_test(test_load_bogus_path),
        cmocka_unit_test(test_load_bogus_env),
        cmocka_unit_test(test_built_module_loads),
        cmocka_unit_test(test_backend_reason),
        cmocka_unit_test(test_module_driver_members),
        cmocka_unit_test(test_open_cuda0_fails),
        cmocka_unit_test(test_check_resources),
        cmocka_unit_test(test_cuda_device_limits),
        cmocka_unit_test(test_cudnn_on_other_device),
        cmocka_unit_test(test_compile_ok),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_big_shared),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_module_compile),
        cmocka_unit_test(test_build_rejects_limits),
        cmocka_unit_test(test_templates),
        cmocka_unit_test(test_gnn_kernels_compile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
