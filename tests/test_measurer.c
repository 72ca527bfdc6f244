/* Isolated measurement (tuner/measurer.h): a batch of configs is
 * compiled here and timed in mtgpu-worker; a config that hangs the worker
 * costs one `timeout` result, one that crashes it one error result, and the
 * rest of the batch is measured by a restarted worker. The faults come from
 * the worker's test-only hooks MTGPU_WORKER_HANG_ON / MTGPU_WORKER_CRASH_ON;
 * a compile that hangs or crashes a compiler process (MTGPU_WORKER_COMPILE_*)
 * costs that config a build error. A crash counts against a config only
 * when it repeats in a fresh worker; a worker killed from outside
 * (MTGPU_WORKER_KILLED_ON, MTGPU_WORKER_COMPILE_KILLED_ON: SIGKILL, as the
 * out-of-memory killer sends) costs the config nothing when the fresh one
 * measures it, and a failure of the environment when it is killed again.
 *
 * Skips (with the reason printed) when there is no device or no worker binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "measurer-proto.h"
#include "program.h"
#include "mtgpu/device.h"
#include "measurer.h"
#include "template.h"

#define WORKLOAD "n=1,c=8,h=12,w=12,k=8,r=3,s=3,pad=1"
#define NCFG 4

static mt_device *device;
static char skip_reason[2048];
static mt_workload wl;
static const mt_template *tmpl;
static mt_space space;
static int have_space;
static mt_config cfgs[NCFG];
static char texts[NCFG][1024];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Every child this process started has been reaped. */
static void assert_no_children(void) {
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static mt_measurer_params test_params(double timeout_s) {
    mt_measurer_params p = mt_measurer_default_params();
    p.timeout_s = timeout_s;
    p.prepare_timeout_s = 60;
    p.start_timeout_s = 60;
    p.measure.warmup = 0;
    p.measure.min_repeats = 2;
    p.measure.max_repeats = 3;
    p.measure.min_time_ms = 0;
    return p;
}

/* Starts a measurer, or skips the test when there is no device or worker. */
static mt_measurer *start_or_skip(const mt_measurer_params *p) {
    if (!device) {
        print_message("skipped: %s\n", skip_reason);
        skip();
    }
    mt_measurer *m = NULL;
    char err[1024];
    double t0 = now_s();
    mt_status st = mt_measurer_start(p, &m, NULL, err, sizeof err);
    if (st == MT_UNAVAILABLE && strstr(err, "no measurement worker found")) {
        print_message("skipped: %s\n", err);
        skip();
    }
    if (st != MT_OK) fail_msg("mt_measurer_start: %s: %s", mt_status_name(st), err);
    print_message("measurer started in %.2f s (worker pid %ld)\n", now_s() - t0, mt_measurer_worker_pid(m));
    return m;
}

static void assert_ok_result(const mt_measurer_result *r, int i) {
    if (r->m.status != MT_OK) fail_msg("config %d [%s]: %s: %s", i, texts[i], mt_status_name(r->m.status), r->m.message);
    assert_true(r->sent_to_worker);
    assert_true(r->m.median_ms > 0);
    assert_true(r->m.min_ms > 0 && r->m.min_ms <= r->m.median_ms);
    assert_true(r->m.gflops > 0);
    assert_true(r->m.max_rel_err >= 0 && r->m.max_rel_err <= 1e-4);
    assert_int_equal(r->m.repeats, 2);
    assert_int_equal(r->m.nruns, 2);
    double lo = INFINITY;
    for (int k = 0; k < r->m.nruns; k++) {
        assert_true(r->m.run_ms[k] > 0);
        if (r->m.run_ms[k] < lo) lo = r->m.run_ms[k];
    }
    assert_true(lo == r->m.min_ms);
    assert_true(r->m.build_s >= 0);
    assert_true(r->wall_s > 0);
}

/* ---- the protocol's helpers ---- */

static void test_proto_roundtrip(void **state) {
    (void)state;
    mt_strbuf sb = {0};
    const char *nasty = "tab\there\nnewline\\backslash\rcr \\t not an escape";
    mt__proto_put(&sb, "kw");
    mt__proto_put(&sb, nasty);
    mt__proto_put(&sb, "");
    mt__proto_put_int(&sb, -42);
    double vals[] = {0.0, -0.0, 1.5e-300, 3.141592653589793, INFINITY, NAN};
    for (int i = 0; i < 6; i++) mt__proto_put_f64(&sb, vals[i]);
    assert_false(sb.failed);
    assert_null(strchr(sb.data, '\n'));
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(sb.data, f, MT__PROTO_MAX_FIELDS);
    assert_int_equal(nf, 10);
    assert_string_equal(f[0], "kw");
    assert_string_equal(f[1], nasty);
    assert_string_equal(f[2], "");
    long long v;
    assert_int_equal(mt__proto_get_int(f[3], &v), 0);
    assert_int_equal(v, -42);
    for (int i = 0; i < 6; i++) {
        double d;
        assert_int_equal(mt__proto_get_f64(f[4 + i], &d), 0);
        assert_memory_equal(&d, &vals[i], sizeof d);
    }
    mt__sb_free(&sb);

    char bad1[] = "a\tb\\x";
    assert_int_equal(mt__proto_split(bad1, f, MT__PROTO_MAX_FIELDS), -1);
    char bad2[] = "trailing\\";
    assert_int_equal(mt__proto_split(bad2, f, MT__PROTO_MAX_FIELDS), -1);
    char many[] = "a\tb\tc";
    assert_int_equal(mt__proto_split(many, f, 2), -1);
    assert_int_equal(mt__proto_get_int("12x", &v), -1);
    assert_int_equal(mt__proto_get_int("", &v), -1);
    double d;
    assert_int_equal(mt__proto_get_f64("3ff000000000000", &d), -1);
    assert_int_equal(mt__proto_get_f64("3ff000000000000g", &d), -1);
    assert_int_equal(mt__proto_get_f64("3FF0000000000000", &d), -1); /* lower case only */
}

/* ---- a missing worker ---- */

static void test_missing_worker(void **state) {
    (void)state;
    mt_measurer *m = (mt_measurer *)1;
    char err[1024] = "";
    mt_measurer_params p = test_params(5);
    p.worker_path = "/nonexistent/mtgpu-worker";
    assert_int_equal(mt_measurer_start(&p, &m, NULL, err, sizeof err), MT_UNAVAILABLE);
    assert_null(m);
    assert_non_null(strstr(err, "/nonexistent/mtgpu-worker"));

    setenv("MTGPU_WORKER", "/nonexistent/from-env", 1);
    p.worker_path = NULL;
    m = (mt_measurer *)1;
    assert_int_equal(mt_measurer_start(&p, &m, NULL, err, sizeof err), MT_UNAVAILABLE);
    unsetenv("MTGPU_WORKER");
    assert_null(m);
    assert_non_null(strstr(err, "MTGPU_WORKER"));
    assert_no_children();
}

/* ---- a batch of valid configs ---- */

static void test_batch_ok(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    double t0 = now_s();
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    print_message("batch of %d (compiles included): %.2f s\n", NCFG, now_s() - t0);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) {
        print_message("  [%s] compile %.2f s, in the worker %.2f s, median %.4f ms\n", texts[i], res[i].m.build_s, res[i].wall_s,
                      res[i].m.median_ms);
        assert_ok_result(&res[i], i);
    }
    long pid = mt_measurer_worker_pid(m);
    assert_true(pid > 0);
    long cpids[4];
    int ncomp = mt_measurer_compiler_pids(m, cpids, 4);
    assert_true(ncomp >= 1);
    for (int i = 0; i < ncomp && i < 4; i++) assert_true(cpids[i] > 0 && cpids[i] != pid);

    /* Again: same worker, workload already prepared, every binary from the cache. */
    t0 = now_s();
    st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    print_message("same batch again: %.2f s\n", now_s() - t0);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) {
        assert_ok_result(&res[i], i);
        assert_true(res[i].m.build_s == 0);
    }
    assert_int_equal(mt_measurer_worker_pid(m), pid);
    /* An empty batch is fine. */
    assert_int_equal(mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, 0, res, err, sizeof err), MT_OK);
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- two devices of one fingerprint: every config timed once, by either ---- */

static void test_two_devices(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    p.device = "opencl:0,opencl:1";
    if (device) {
        mt_device_info list[4];
        int count = 0;
        mt_device_list(list, 4, &count, NULL, 0);
        int opencl = 0;
        for (int i = 0; i < count && i < 4; i++) opencl += list[i].backend == MT_BACKEND_OPENCL;
        if (opencl < 2) {
            print_message("skipped: %d OpenCL device (PoCL lists two with POCL_DEVICES=\"pthread pthread\")\n", opencl);
            skip();
        }
    }
    mt_measurer *m = start_or_skip(&p);
    assert_int_equal(mt_measurer_device_count(m), 2);
    long pids[2];
    assert_int_equal(mt_measurer_worker_pids(m, pids, 2), 2);
    assert_true(pids[0] > 0 && pids[1] > 0 && pids[0] != pids[1]);
    enum { N = 2 * NCFG };
    mt_config many[N];
    for (int i = 0; i < N; i++) many[i] = cfgs[i % NCFG];
    mt_measurer_result res[N];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, many, N, res, err, sizeof err);
    assert_int_equal(st, MT_OK);
    int by[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        assert_ok_result(&res[i], i % NCFG);
        assert_true(res[i].timer == 0 || res[i].timer == 1);
        by[res[i].timer]++;
    }
    print_message("%d configs: %d timed on opencl:0, %d on opencl:1\n", N, by[0], by[1]);
    /* Each worker takes the next config when it is done: both take some. */
    assert_true(by[0] > 0 && by[1] > 0);
    mt_measurer_stop(m);
    assert_no_children();

    /* A list that names a device twice is refused before anything starts. */
    p.device = "opencl:0,opencl:0";
    assert_int_equal(mt_measurer_start(&p, &m, NULL, err, sizeof err), MT_INVALID_ARG);
    assert_non_null(strstr(err, "twice"));
    assert_no_children();
}

/* ---- a config that hangs the worker ---- */

static void test_hang(void **state) {
    (void)state;
    const double timeout = 10.0; /* generous: a loaded machine may need seconds for a first launch */
    setenv("MTGPU_WORKER_HANG_ON", texts[1], 1);
    mt_measurer_params p = test_params(timeout);
    mt_measurer *m = start_or_skip(&p);
    unsetenv("MTGPU_WORKER_HANG_ON");
    long pid = mt_measurer_worker_pid(m);
    mt_measurer_result res[NCFG];
    char err[1024];
    double t0 = now_s();
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    double el = now_s() - t0;
    print_message("batch with a hang: %.2f s (timeout %.1f s, sum of timeouts %.1f s)\n", el, timeout, NCFG * timeout);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) {
        if (i == 1) continue;
        assert_ok_result(&res[i], i);
    }
    assert_int_equal(res[1].m.status, MT_TIMEOUT);
    assert_true(res[1].sent_to_worker);
    assert_true(res[1].wall_s >= timeout * 0.99);
    assert_non_null(strstr(res[1].m.message, "worker killed"));
    assert_true(el < 0.7 * NCFG * timeout);
    assert_true(mt_measurer_worker_pid(m) != pid); /* restarted */
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- a config that crashes the worker ---- */

static void test_crash(void **state) {
    (void)state;
    /* Set for the whole batch: the fresh worker that tries config 2 again
     * crashes on it too, and a crash that repeats is the config's. */
    setenv("MTGPU_WORKER_CRASH_ON", texts[2], 1);
    mt_measurer_params p = test_params(20);
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    double t0 = now_s();
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    unsetenv("MTGPU_WORKER_CRASH_ON");
    print_message("batch with a crash: %.2f s; crash reported as: %s\n", now_s() - t0, res[2].m.message);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) {
        if (i == 2) continue;
        assert_ok_result(&res[i], i);
    }
    assert_int_equal(res[2].m.status, MT_LAUNCH);
    assert_true(res[2].sent_to_worker);
    assert_string_equal(res[2].m.message, "worker crashed (signal 11)");
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- a worker killed from outside (the out-of-memory killer, an operator) ---- */

/* Killed once while measuring config 1 (the hook is in the first worker's
 * environment only): the config is measured again in a fresh worker, and
 * nothing is recorded against it. */
static void test_killed_once(void **state) {
    (void)state;
    setenv("MTGPU_WORKER_KILLED_ON", texts[1], 1);
    mt_measurer_params p = test_params(20);
    mt_measurer *m = start_or_skip(&p);
    unsetenv("MTGPU_WORKER_KILLED_ON");
    long pid = mt_measurer_worker_pid(m);
    mt_measurer_result res[NCFG];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) assert_ok_result(&res[i], i);
    assert_true(mt_measurer_worker_pid(m) != pid); /* the killed one was replaced */
    mt_measurer_stop(m);
    assert_no_children();
}

/* Killed every time it measures config 1: a failure of the environment,
 * marked so that a resumed tune measures it again, not a launch error. */
static void test_killed_always(void **state) {
    (void)state;
    setenv("MTGPU_WORKER_KILLED_ON", texts[1], 1);
    mt_measurer_params p = test_params(20);
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    unsetenv("MTGPU_WORKER_KILLED_ON");
    print_message("killed twice: %s: %s\n", mt_status_name(res[1].m.status), res[1].m.message);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++)
        if (i != 1) assert_ok_result(&res[i], i);
    assert_int_equal(res[1].m.status, MT_UNAVAILABLE);
    assert_true(res[1].sent_to_worker);
    assert_non_null(strstr(res[1].m.message, "signal 9, then signal 9"));
    mt_record rec;
    mt_record_init(&rec);
    rec.status = res[1].m.status;
    snprintf(rec.message, sizeof rec.message, "%s", res[1].m.message);
    assert_true(mt_record_env_failure(&rec));
    mt_measurer_stop(m);
    assert_no_children();
}

/* The same for a compiler process: killed once, the config compiles in a
 * fresh one; killed every time, a failure of the environment. */
static void test_compile_killed(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    p.compile_threads = 1;
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    /* Compiler processes start with the first batch: the hook is in the
     * first one's environment, not in the fresh one's. */
    setenv("MTGPU_WORKER_COMPILE_KILLED_ON", texts[2], 1);
    assert_int_equal(mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, 2, res, err, sizeof err), MT_OK);
    assert_int_equal(mt_measurer_compiler_pids(m, NULL, 0), 1);
    unsetenv("MTGPU_WORKER_COMPILE_KILLED_ON");
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++) assert_ok_result(&res[i], i);
    mt_measurer_stop(m);
    assert_no_children();
    /* Every compiler killed on config 2. */
    m = start_or_skip(&p);
    setenv("MTGPU_WORKER_COMPILE_KILLED_ON", texts[2], 1);
    st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    unsetenv("MTGPU_WORKER_COMPILE_KILLED_ON");
    print_message("compiler killed twice: %s: %s\n", mt_status_name(res[2].m.status), res[2].m.message);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++)
        if (i != 2) assert_ok_result(&res[i], i);
    assert_int_equal(res[2].m.status, MT_UNAVAILABLE);
    assert_false(res[2].sent_to_worker);
    assert_non_null(strstr(res[2].m.message, MT_RECORD_ENV_FAILURE_PREFIX "the compiler process"));
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- a worker that crashes on everything: the batch gives up ---- */

static void test_repeated_crash(void **state) {
    (void)state;
    setenv("MTGPU_WORKER_CRASH_ON", "=", 1); /* every config text has one */
    mt_measurer_params p = test_params(20);
    p.max_consecutive_failures = 2;
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    unsetenv("MTGPU_WORKER_CRASH_ON");
    print_message("crash on everything: %s: %s\n", mt_status_name(st), err);
    assert_int_equal(st, MT_DEVICE);
    assert_int_equal(res[0].m.status, MT_LAUNCH);
    assert_int_equal(res[1].m.status, MT_LAUNCH);
    for (int i = 2; i < NCFG; i++) {
        assert_int_equal(res[i].m.status, MT_DEVICE);
        assert_false(res[i].sent_to_worker);
        assert_non_null(strstr(res[i].m.message, "in a row"));
    }
    /* The next batch starts a fresh worker (without the hook now) and works. */
    st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, 2, res, err, sizeof err);
    assert_int_equal(st, MT_OK);
    assert_ok_result(&res[0], 0);
    assert_ok_result(&res[1], 1);
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- compiler processes: one that hangs, one that crashes, none at all ---- */

static void test_compile_hang(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    p.compile_timeout_s = 4.0;
    mt_measurer *m = start_or_skip(&p);
    /* Compiler processes start with the first batch and inherit the hook. */
    setenv("MTGPU_WORKER_COMPILE_HANG_ON", texts[1], 1);
    mt_measurer_result res[NCFG];
    char err[1024];
    double t0 = now_s();
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    double el = now_s() - t0;
    unsetenv("MTGPU_WORKER_COMPILE_HANG_ON");
    print_message("batch with a compile that hangs: %.2f s (compile timeout %.1f s): %s\n", el, p.compile_timeout_s, res[1].m.message);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++)
        if (i != 1) assert_ok_result(&res[i], i);
    assert_int_equal(res[1].m.status, MT_BUILD);
    assert_false(res[1].sent_to_worker);
    assert_non_null(strstr(res[1].m.message, "compiler process killed"));
    assert_true(el >= p.compile_timeout_s * 0.99 && el < p.compile_timeout_s + 15);
    mt_measurer_stop(m);
    assert_no_children();
}

static void test_compile_crash(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    p.compile_threads = 1; /* one compiler: the crash and the restart happen within the batch */
    mt_measurer *m = start_or_skip(&p);
    setenv("MTGPU_WORKER_COMPILE_CRASH_ON", texts[2], 1);
    mt_measurer_result res[NCFG];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err);
    unsetenv("MTGPU_WORKER_COMPILE_CRASH_ON");
    print_message("batch with a compiler crash: %s\n", res[2].m.message);
    assert_int_equal(st, MT_OK);
    for (int i = 0; i < NCFG; i++)
        if (i != 2) assert_ok_result(&res[i], i);
    assert_int_equal(res[2].m.status, MT_BUILD);
    assert_false(res[2].sent_to_worker);
    assert_non_null(strstr(res[2].m.message, "compiler process died"));
    assert_non_null(strstr(res[2].m.message, "signal 11"));
    assert_int_equal(mt_measurer_compiler_pids(m, NULL, 0), 1); /* restarted for config 3 */
    mt_measurer_stop(m);
    assert_no_children();
}

static void test_compile_in_process(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    p.compile_in_process = 1;
    mt_measurer *m = start_or_skip(&p);
    mt_measurer_result res[NCFG];
    char err[1024];
    assert_int_equal(mt_measurer_measure_batch(m, &wl, tmpl, &space, cfgs, NCFG, res, err, sizeof err), MT_OK);
    for (int i = 0; i < NCFG; i++) assert_ok_result(&res[i], i);
    assert_int_equal(mt_measurer_compiler_pids(m, NULL, 0), 0);
    mt_measurer_stop(m);
    assert_no_children();
}

/* ---- invalid configs never reach the worker ---- */

static void test_invalid_config(void **state) {
    (void)state;
    mt_measurer_params p = test_params(20);
    mt_measurer *m = start_or_skip(&p);
    long pid = mt_measurer_worker_pid(m);
    mt_config batch[3] = {cfgs[0], cfgs[0], cfgs[3]};
    batch[1].choice[0] = space.knobs[0].noptions; /* outside the space */
    mt_measurer_result res[3];
    char err[1024];
    mt_status st = mt_measurer_measure_batch(m, &wl, tmpl, &space, batch, 3, res, err, sizeof err);
    assert_int_equal(st, MT_OK);
    assert_ok_result(&res[0], 0);
    assert_ok_result(&res[2], 3);
    assert_int_equal(res[1].m.status, MT_INVALID_CONFIG);
    assert_false(res[1].sent_to_worker);
    assert_true(res[1].m.message[0] != '\0');
    assert_int_equal(mt_measurer_worker_pid(m), pid);

    /* Bad arguments. */
    assert_int_equal(mt_measurer_measure_batch(m, &wl, tmpl, &space, NULL, 1, res, err, sizeof err), MT_INVALID_ARG);
    assert_int_equal(mt_measurer_measure_batch(m, NULL, tmpl, &space, batch, 1, res, err, sizeof err), MT_INVALID_ARG);
    mt_measurer_stop(m);
    mt_measurer_stop(NULL);
    assert_no_children();
}

/* ---- setup: a device, a template, NCFG valid configs with distinct texts ---- */

static int group_setup(void **state) {
    (void)state;
    char err[1024];
    if (mt_workload_parse(WORKLOAD, &wl, err, sizeof err) != MT_OK) {
        fprintf(stderr, "bad workload: %s\n", err);
        return -1;
    }
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(NULL, &dp, &device, err, sizeof err) != MT_OK) {
        snprintf(skip_reason, sizeof skip_reason, "no device: %s", err);
        device = NULL;
        return 0;
    }
    tmpl = mt_template_find("direct");
    if (!tmpl || !mt_template_accepts(tmpl, &wl)) {
        tmpl = NULL;
        for (int i = 0; i < mt_template_count() && !tmpl; i++)
            if (mt_template_accepts(mt_template_at(i), &wl)) tmpl = mt_template_at(i);
    }
    if (!tmpl || mt_template_space(tmpl, &wl, &space) != MT_OK) {
        snprintf(skip_reason, sizeof skip_reason, "no template accepts %s", WORKLOAD);
        mt_device_close(device);
        device = NULL;
        return 0;
    }
    have_space = 1;
    mt_device_limits lim = mt_device_get_limits(device);
    uint64_t rng = 0x5eed;
    int n = 0;
    for (int draws = 0; n < NCFG && draws < 10000; draws++) {
        mt_config c;
        mt_space_random(&space, &rng, &c);
        mt_kernel *k = NULL;
        mt_kernel_resources kr;
        /* Small kernels only: PoCL compiles large unrolled ones for minutes. */
        int ok = mt_template_build(tmpl, &wl, &space, &c, &k, err, sizeof err) == MT_OK && mt_kernel_analyze(k, &kr, err, sizeof err) == MT_OK &&
                 mt_kernel_check_limits(&kr, &lim, err, sizeof err) == MT_OK && mt_kernel_unrolled_size(k) <= 300;
        mt_kernel_free(k);
        if (!ok) continue;
        char t[1024];
        mt_config_format(&space, &c, t, sizeof t);
        /* The fault hooks match substrings: no text may contain another. */
        int clash = 0;
        for (int j = 0; j < n; j++)
            if (strstr(t, texts[j]) || strstr(texts[j], t)) clash = 1;
        if (clash) continue;
        cfgs[n] = c;
        snprintf(texts[n], sizeof texts[n], "%s", t);
        n++;
    }
    if (n < NCFG) {
        snprintf(skip_reason, sizeof skip_reason, "only %d valid configs of %s found for %s", n, mt_template_name(tmpl), WORKLOAD);
        mt_device_close(device);
        device = NULL;
    }
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    if (have_space) mt_space_free(&space);
    mt_device_close(device);
    return 0;
}

int main(void) {
    /* PoCL lists two CPU devices (one fingerprint) for test_two_devices;
     * a device list set from outside is kept. */
    setenv("POCL_DEVICES", "pthread pthread", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proto_roundtrip),
        cmocka_unit_test(test_missing_worker),
        cmocka_unit_test(test_batch_ok),
        cmocka_unit_test(test_two_devices),
        cmocka_unit_test(test_hang),
        cmocka_unit_test(test_crash),
        cmocka_unit_test(test_killed_once),
        cmocka_unit_test(test_killed_always),
        cmocka_unit_test(test_repeated_crash),
        cmocka_unit_test(test_invalid_config),
        cmocka_unit_test(test_compile_hang),
        cmocka_unit_test(test_compile_crash),
        cmocka_unit_test(test_compile_killed),
        cmocka_unit_test(test_compile_in_process),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
