/* mtgpu-worker: times kernels for a measurer (tuner/measurer.h) in a
 * process of its own, so that a kernel that hangs or crashes the driver takes
 * down this process, not the tuner.
 *
 * Started by the measurer with posix_spawn, never by hand:
 *     mtgpu-worker --protocol 2 --in FD --out FD --device SPEC [--cache-dir DIR]
 * It opens the device, says hello on --out, then answers requests read from
 * --in one at a time until `quit` or end of input. The line protocol is
 * described at the top of tuner/measurer.c.
 *
 * The same executable serves as the measurer's compiler processes: those only
 * get `compile` requests (compile into the binary cache, time nothing).
 *
 * Test-only fault hooks (for tests/test_measurer.c; never set them otherwise):
 *   MTGPU_WORKER_HANG_ON=<substring>   a measure request whose config text
 *                                      contains it sleeps forever (until killed,
 *                                      or until the tuner is gone);
 *   MTGPU_WORKER_CRASH_ON=<substring>  ... dies of SIGSEGV (no core dump);
 *   MTGPU_WORKER_KILLED_ON=<substring> ... dies of SIGKILL, as when the
 *                                      out-of-memory killer or an operator
 *                                      kills it (not the config's fault);
 *   MTGPU_WORKER_COMPILE_HANG_ON, MTGPU_WORKER_COMPILE_CRASH_ON,
 *   MTGPU_WORKER_COMPILE_KILLED_ON:    the same for compile requests.
 *
 * A worker never outlives its tuner: a thread watches the request pipe and
 * ends the process the moment the tuner's end of it closes (the tuner
 * exited, was killed, or a second Ctrl-C ended it), even while a kernel
 * hangs. Not PR_SET_PDEATHSIG: Linux sends that signal when the *thread*
 * that started the process ends, and the measurer starts compiler processes
 * from threads that end with each batch. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "measurer-proto.h"
#include "mtgpu/device.h"
#include "measure.h"
#include "template.h"

#define EXIT_USAGE 2

typedef struct worker {
    int out_fd;
    mt_device *dev;
    mt_conv_bench *bench;
    mt_workload wl;
    const mt_template *space_tmpl; /* template whose space `sp` holds; NULL: none */
    mt_space sp;
    /* Compile requests: the workload and template space of the last one. */
    char cwl_text[512];
    mt_workload cwl;
    const mt_template *cspace_tmpl; /* NULL: none */
    mt_space csp;
    const char *hang_on, *crash_on, *killed_on; /* test-only fault hooks */
    const char *compile_hang_on, *compile_crash_on, *compile_killed_on;
    pid_t parent;
} worker;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sends a finished line; the tuner being gone ends this process. */
static void send_line(worker *w, mt_strbuf *sb) {
    if (sb->failed) {
        fprintf(stderr, "mtgpu-worker: out of memory\n");
        exit(1);
    }
    const char *p = sb->data;
    size_t len = sb->len;
    while (len > 0) {
        ssize_t n = write(w->out_fd, p, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            exit(1); /* tuner gone */
        }
        p += n;
        len -= (size_t)n;
    }
    sb->len = 0;
    if (sb->data) sb->data[0] = '\0';
}

static void send_error(worker *w, mt_strbuf *sb, mt_status st, const char *msg) {
    mt__proto_put(sb, "error");
    mt__proto_put_int(sb, st);
    mt__proto_put(sb, msg);
    mt__proto_end(sb);
    send_line(w, sb);
}

static void free_space(worker *w) {
    if (w->space_tmpl) mt_space_free(&w->sp);
    w->space_tmpl = NULL;
}

/* prepare <workload text> <seed> */
static void do_prepare(worker *w, char **f, int nf, mt_strbuf *sb) {
    long long seed;
    char err[1024];
    if (nf != 3 || mt__proto_get_int(f[2], &seed) != 0) {
        send_error(w, sb, MT_PARSE, "malformed prepare request");
        return;
    }
    mt_conv_bench_free(w->bench);
    w->bench = NULL;
    free_space(w);
    mt_workload wl;
    mt_status st = mt_workload_parse(f[1], &wl, err, sizeof err);
    if (st != MT_OK) {
        send_error(w, sb, st, err);
        return;
    }
    double t0 = now_s();
    st = mt_conv_bench_new(w->dev, &wl, (uint64_t)seed, &w->bench, err, sizeof err);
    if (st != MT_OK) {
        w->bench = NULL;
        send_error(w, sb, st, err);
        return;
    }
    w->wl = wl;
    mt__proto_put(sb, "prepared");
    mt__proto_put_f64(sb, now_s() - t0);
    mt__proto_end(sb);
    send_line(w, sb);
}

static void send_result(worker *w, mt_strbuf *sb, const char *seq, const mt_measure_result *r) {
    mt__proto_put(sb, "result");
    mt__proto_put(sb, seq);
    mt__proto_put_int(sb, r->status);
    mt__proto_put_f64(sb, r->median_ms);
    mt__proto_put_f64(sb, r->min_ms);
    mt__proto_put_f64(sb, r->gflops);
    mt__proto_put_f64(sb, r->max_rel_err);
    mt__proto_put_f64(sb, r->build_s);
    mt__proto_put_int(sb, r->repeats);
    int nruns = r->nruns < 0 ? 0 : r->nruns > MT_MEASURE_MAX_RUNS ? MT_MEASURE_MAX_RUNS : r->nruns;
    mt__proto_put_int(sb, nruns);
    mt__sb_append(sb, "\t");
    for (int i = 0; i < nruns; i++) {
        uint64_t bits;
        memcpy(&bits, &r->run_ms[i], sizeof bits);
        mt__sb_printf(sb, "%s%016llx", i ? "," : "", (unsigned long long)bits);
    }
    mt__proto_put(sb, r->message);
    mt__proto_put_int(sb, r->cold);
    mt__proto_end(sb);
    send_line(w, sb);
}

/* Test-only: sleep until killed, or until the tuner that started us is gone. */
static void hang_forever(worker *w) {
    for (;;) {
        sleep(1);
        if (getppid() != w->parent) _exit(3);
    }
}

/* Test-only: die the way a driver fault would, without a core file. */
static void crash_now(void) {
#ifdef __linux__
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
#endif
    signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn the signal into exit(1) */
    raise(SIGSEGV);
    _exit(4);
}

/* Test-only: die as the out-of-memory killer or an operator would kill us. */
static void killed_now(void) {
    raise(SIGKILL);
    _exit(4);
}

/* Ends the process when the tuner's end of the request pipe closes:
 * poll() reports POLLHUP on our end then, without reading a byte of it. */
static void *watch_tuner(void *arg) {
    int fd = *(const int *)arg;
    for (;;) {
        struct pollfd p = {fd, 0, 0};
        int r = poll(&p, 1, -1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL))) _exit(5);
    }
    return NULL;
}

/* measure <seq> <template> <config> <warmup> <min_repeats> <max_repeats> <min_time_ms> <check> <tolerance> <cold> */
static void do_measure(worker *w, char **f, int nf, mt_strbuf *sb) {
    mt_measure_result r;
    memset(&r, 0, sizeof r);
    r.max_rel_err = -1;
    long long warmup, minr, maxr, check, cold;
    mt_measure_params mp = mt_measure_default_params();
    if (nf != 11 || mt__proto_get_int(f[4], &warmup) != 0 || mt__proto_get_int(f[5], &minr) != 0 ||
        mt__proto_get_int(f[6], &maxr) != 0 || mt__proto_get_f64(f[7], &mp.min_time_ms) != 0 || mt__proto_get_int(f[8], &check) != 0 ||
        mt__proto_get_f64(f[9], &mp.tolerance) != 0 || warmup < 0 || warmup > 1000000 || minr < 0 || minr > 1000000 || maxr < 0 ||
        maxr > 1000000 || mt__proto_get_int(f[10], &cold) != 0) {
        r.status = MT_PARSE;
        snprintf(r.message, sizeof r.message, "malformed measure request");
        send_result(w, sb, nf > 1 ? f[1] : "0", &r);
        return;
    }
    mp.warmup = (int)warmup;
    mp.min_repeats = (int)minr;
    mp.max_repeats = (int)maxr;
    mp.check = check != 0;
    mp.cold = cold != 0;
    const char *cfgtext = f[3];

    if (w->hang_on && *w->hang_on && strstr(cfgtext, w->hang_on)) hang_forever(w);
    if (w->crash_on && *w->crash_on && strstr(cfgtext, w->crash_on)) crash_now();
    if (w->killed_on && *w->killed_on && strstr(cfgtext, w->killed_on)) killed_now();

    if (!w->bench) {
        r.status = MT_INVALID_ARG;
        snprintf(r.message, sizeof r.message, "no workload prepared in the worker");
        send_result(w, sb, f[1], &r);
        return;
    }
    const mt_template *t = mt_template_find(f[2]);
    if (!t) {
        r.status = MT_NOT_FOUND;
        snprintf(r.message, sizeof r.message, "the worker has no template '%s'", f[2]);
        send_result(w, sb, f[1], &r);
        return;
    }
    if (w->space_tmpl != t) {
        free_space(w);
        mt_status st = mt_template_space(t, &w->wl, &w->sp);
        if (st != MT_OK) {
            r.status = st;
            snprintf(r.message, sizeof r.message, "template %s has no space for this workload", f[2]);
            send_result(w, sb, f[1], &r);
            return;
        }
        w->space_tmpl = t;
    }
    mt_config cfg;
    mt_status st = mt_config_parse(&w->sp, cfgtext, &cfg, r.message, sizeof r.message);
    if (st != MT_OK) {
        r.status = MT_INVALID_CONFIG;
        send_result(w, sb, f[1], &r);
        return;
    }
    mt_conv_bench_measure(w->bench, t, &w->sp, &cfg, &mp, &r);
    send_result(w, sb, f[1], &r);
}

static void send_compiled(worker *w, mt_strbuf *sb, const char *seq, const mt_measure_result *r) {
    mt__proto_put(sb, "compiled");
    mt__proto_put(sb, seq);
    mt__proto_put_int(sb, r->status);
    mt__proto_put_f64(sb, r->build_s);
    mt__proto_put(sb, r->message);
    mt__proto_end(sb);
    send_line(w, sb);
}

/* compile <seq> <workload text> <template> <config> <warm>: builds and
 * compiles into the binary cache, nothing timed (mt_conv_compile). */
static void do_compile(worker *w, char **f, int nf, mt_strbuf *sb) {
    mt_measure_result r;
    memset(&r, 0, sizeof r);
    r.max_rel_err = -1;
    long long warm;
    if (nf != 6 || mt__proto_get_int(f[5], &warm) != 0) {
        r.status = MT_PARSE;
        snprintf(r.message, sizeof r.message, "malformed compile request");
        send_compiled(w, sb, nf > 1 ? f[1] : "0", &r);
        return;
    }
    const char *cfgtext = f[4];
    if (w->compile_hang_on && *w->compile_hang_on && strstr(cfgtext, w->compile_hang_on)) hang_forever(w);
    if (w->compile_crash_on && *w->compile_crash_on && strstr(cfgtext, w->compile_crash_on)) crash_now();
    if (w->compile_killed_on && *w->compile_killed_on && strstr(cfgtext, w->compile_killed_on)) killed_now();
    const mt_template *t = mt_template_find(f[3]);
    if (!t) {
        r.status = MT_NOT_FOUND;
        snprintf(r.message, sizeof r.message, "the worker has no template '%s'", f[3]);
        send_compiled(w, sb, f[1], &r);
        return;
    }
    if (strcmp(w->cwl_text, f[2]) != 0 || w->cspace_tmpl != t) {
        if (w->cspace_tmpl) mt_space_free(&w->csp);
        w->cspace_tmpl = NULL;
        w->cwl_text[0] = '\0';
        mt_status st = mt_workload_parse(f[2], &w->cwl, r.message, sizeof r.message);
        if (st == MT_OK && (st = mt_template_space(t, &w->cwl, &w->csp)) != MT_OK)
            snprintf(r.message, sizeof r.message, "template %s has no space for this workload", f[3]);
        if (st != MT_OK) {
            r.status = st;
            send_compiled(w, sb, f[1], &r);
            return;
        }
        w->cspace_tmpl = t;
        snprintf(w->cwl_text, sizeof w->cwl_text, "%s", f[2]);
    }
    mt_config cfg;
    if (mt_config_parse(&w->csp, cfgtext, &cfg, r.message, sizeof r.message) != MT_OK) {
        r.status = MT_INVALID_CONFIG;
        send_compiled(w, sb, f[1], &r);
        return;
    }
    mt_conv_compile(w->dev, &w->cwl, t, &w->csp, &cfg, warm != 0, &r);
    send_compiled(w, sb, f[1], &r);
}

static int usage(void) {
    fprintf(stderr,
            "usage: mtgpu-worker --protocol 2 --in FD --out FD --device SPEC [--cache-dir DIR]\n"
            "\n"
            "The measurement worker of libmtgpu: it is started by the library, which\n"
            "talks to it over the two file descriptors; it is not meant to be run by hand.\n");
    return EXIT_USAGE;
}

static int parse_fd(const char *s) {
    long long v;
    if (mt__proto_get_int(s, &v) != 0 || v < 0 || v > 65535) return -1;
    return (int)v;
}

int main(int argc, char **argv) {
    int in_fd = -1, out_fd = -1;
    long long protocol = -1;
    const char *device = NULL, *cache_dir = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        if (strcmp(a, "--in") == 0) in_fd = parse_fd(v);
        else if (strcmp(a, "--out") == 0) out_fd = parse_fd(v);
        else if (strcmp(a, "--device") == 0) device = v;
        else if (strcmp(a, "--cache-dir") == 0) cache_dir = v;
        else if (strcmp(a, "--protocol") == 0) {
            if (mt__proto_get_int(v, &protocol) != 0) return usage();
        } else
            return usage();
    }
    if (in_fd < 0 || out_fd < 0 || !device || protocol < 0) return usage();

    worker w;
    memset(&w, 0, sizeof w);
    w.out_fd = out_fd;
    w.parent = getppid();
    w.hang_on = getenv("MTGPU_WORKER_HANG_ON");
    w.crash_on = getenv("MTGPU_WORKER_CRASH_ON");
    w.compile_hang_on = getenv("MTGPU_WORKER_COMPILE_HANG_ON");
    w.compile_crash_on = getenv("MTGPU_WORKER_COMPILE_CRASH_ON");
    w.killed_on = getenv("MTGPU_WORKER_KILLED_ON");
    w.compile_killed_on = getenv("MTGPU_WORKER_COMPILE_KILLED_ON");
    mt_strbuf sb = {0};
    static int watched_fd;
    watched_fd = in_fd;
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, watch_tuner, &watched_fd) != 0) {
        fprintf(stderr, "mtgpu-worker: cannot start the thread that watches the tuner\n");
        return 1;
    }
    pthread_detach(watcher);

    if (protocol != MT__PROTO_VERSION) {
        char msg[128];
        snprintf(msg, sizeof msg, "protocol %lld requested, this worker speaks %d", protocol, MT__PROTO_VERSION);
        mt__proto_put(&sb, "fatal");
        mt__proto_put_int(&sb, MT_UNSUPPORTED);
        mt__proto_put(&sb, msg);
        mt__proto_end(&sb);
        send_line(&w, &sb);
        mt__sb_free(&sb);
        return 1;
    }
    FILE *in = fdopen(in_fd, "r");
    if (!in) {
        fprintf(stderr, "mtgpu-worker: cannot read fd %d: %s\n", in_fd, strerror(errno));
        return 1;
    }

    char err[1024];
    mt_device_params dp = mt_device_default_params();
    dp.cache_dir = cache_dir;
    mt_status st = mt_device_open(device, &dp, &w.dev, err, sizeof err);
    if (st != MT_OK) {
        mt__proto_put(&sb, "fatal");
        mt__proto_put_int(&sb, st);
        mt__proto_put(&sb, err);
        mt__proto_end(&sb);
        send_line(&w, &sb);
        mt__sb_free(&sb);
        fclose(in);
        return 1;
    }
    const mt_device_info *info = mt_device_get_info(w.dev);
    mt__proto_put(&sb, "hello");
    mt__proto_put_int(&sb, MT__PROTO_VERSION);
    mt__proto_put_int(&sb, (long long)getpid());
    mt__proto_put(&sb, info->fingerprint);
    mt__proto_put(&sb, info->name);
    mt__proto_end(&sb);
    send_line(&w, &sb);

    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        ssize_t len = getline(&line, &cap, in);
        if (len < 0) break; /* the tuner closed its end: done */
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        char *f[MT__PROTO_MAX_FIELDS];
        int nf = (size_t)len > MT__PROTO_MAX_LINE ? -1 : mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
        if (nf < 1) {
            send_error(&w, &sb, MT_PARSE, "malformed request line");
            continue;
        }
        if (strcmp(f[0], "measure") == 0) {
            do_measure(&w, f, nf, &sb);
        } else if (strcmp(f[0], "compile") == 0) {
            do_compile(&w, f, nf, &sb);
        } else if (strcmp(f[0], "prepare") == 0) {
            do_prepare(&w, f, nf, &sb);
        } else if (strcmp(f[0], "quit") == 0) {
            mt__proto_put(&sb, "bye");
            mt__proto_end(&sb);
            send_line(&w, &sb);
            break;
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown request '%.100s'", f[0]);
            send_error(&w, &sb, MT_PARSE, msg);
        }
    }
    free(line);
    fclose(in);
    mt__sb_free(&sb);
    free_space(&w);
    if (w.cspace_tmpl) mt_space_free(&w.csp);
    mt_conv_bench_free(w.bench);
    mt_device_close(w.dev);
    close(out_fd);
    return rc;
}
