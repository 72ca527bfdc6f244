/* Isolated measurement (tuner/measurer.h): parallel compiles in
 * compiler processes, timing in a worker process, one kernel at a time.
 *
 * ---- The worker protocol, version 2 ----
 *
 * Transport. The measurer starts mtgpu-worker with posix_spawn (never fork:
 * OpenCL is not fork-safe) as
 *     mtgpu-worker --protocol 2 --in 3 --out 4 --device SPEC [--cache-dir DIR]
 * once to time kernels and once per parallel compile (compiler processes).
 * Requests go down a pipe that is the worker's fd 3, answers come back up a
 * pipe that is its fd 4. The worker's stdin is /dev/null and its stdout is its
 * stderr, so a driver that prints can never corrupt the protocol; stderr is
 * the tuner's. The worker runs in its own process group (a terminal's Ctrl-C
 * reaches the tuner, which decides), with all signals at their defaults and
 * none blocked.
 *
 * Lines. Every message is one line: fields separated by one TAB, ended by LF.
 * Inside a field '\' TAB LF CR are written \\ \t \n \r. Integers are decimal;
 * doubles are the 16 hex digits of their IEEE-754 bits (exact, and no locale
 * can change them); a list of doubles is one field, comma-separated.
 *
 * Worker -> tuner, once, when the device is open:
 *     hello  <version> <pid> <device fingerprint> <device name>
 * or, if it cannot start:
 *     fatal  <status code> <message>            (then it exits)
 * Requests and their answers:
 *     prepare <workload text> <seed>
 *         -> prepared <seconds>                (inputs, CPU reference, buffers built)
 *         -> error <status code> <message>
 *     measure <seq> <template> <config text> <warmup> <min_repeats> <max_repeats>
 *             <min_time_ms> <check> <tolerance> <cold>
 *         -> result <seq> <status code> <median_ms> <min_ms> <gflops> <max_rel_err>
 *                   <build_s> <repeats> <nruns> <run_ms,run_ms,...> <message> <cold>
 *     compile <seq> <workload text> <template> <config text> <warm>
 *         -> compiled <seq> <status code> <build_s> <message>
 *            (builds and compiles into the binary cache, times nothing; warm:
 *            also launch one work-group over scratch buffers, mt_conv_compile)
 *     quit
 *         -> bye                               (then it exits 0; so does EOF on fd 3)
 * A measure request is always answered with a result line, whatever the
 * status (no workload prepared, unknown template, bad config text, ...).
 *
 * Test-only fault hooks of the worker (never set them outside tests):
 * MTGPU_WORKER_HANG_ON=<substring> makes it sleep forever on a measure request
 * whose config text contains the substring; MTGPU_WORKER_CRASH_ON=<substring>
 * makes it die of SIGSEGV; MTGPU_WORKER_COMPILE_HANG_ON and
 * MTGPU_WORKER_COMPILE_CRASH_ON do the same on compile requests. The worker
 * inherits them from the tuner's environment when it is started.
 *
 * ---- SIGPIPE ----
 * Writing to a pipe whose reader died raises SIGPIPE, which by default kills
 * the writer. The measurer never changes the process's signal dispositions:
 * around each write it blocks SIGPIPE in the calling thread (pthread_sigmask);
 * if the write fails with EPIPE, the thread-directed SIGPIPE it raised is
 * still pending on this thread and is consumed with sigtimedwait (zero
 * timeout) before the old mask is restored, unless a SIGPIPE was already
 * pending before the write (then it is left for its owner). */
#define _GNU_SOURCE /* pipe2 */
#include "measurer.h"
#include "program.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "measurer-proto.h"
#include "fail.h"

/* Per-measurement time allowed for first-launch code generation, as a multiple
 * of the tuner-side compile time of the same kernel. */
#define MT__CODEGEN_FACTOR 4.0

extern char **environ;

#ifndef MTGPU_WORKER_BUILD_PATH
#define MTGPU_WORKER_BUILD_PATH ""
#endif
#ifndef MTGPU_WORKER_INSTALL_PATH
#define MTGPU_WORKER_INSTALL_PATH ""
#endif

/* Seconds a worker gets to quit after `quit` before it is killed. */
#define MT__QUIT_GRACE_S 10.0
/* Seconds to wait for a killed worker to be reaped; past this (a process stuck
 * in the driver) it is remembered and reaped later. */
#define MT__REAP_WAIT_S 10.0
#define MT__MAX_STALE 16

/* ------------------------------------------------------------ protocol */

void mt__proto_put(mt_strbuf *sb, const char *field) {
    if (sb->len > 0) mt__sb_append(sb, "\t");
    const char *p = field ? field : "";
    while (*p) {
        size_t run = strcspn(p, "\\\t\n\r");
        if (run > 0) {
            char tmp[256];
            while (run > 0) {
                size_t k = run < sizeof tmp - 1 ? run : sizeof tmp - 1;
                memcpy(tmp, p, k);
                tmp[k] = '\0';
                mt__sb_append(sb, tmp);
                p += k;
                run -= k;
            }
            continue;
        }
        switch (*p) {
        case '\\': mt__sb_append(sb, "\\\\"); break;
        case '\t': mt__sb_append(sb, "\\t"); break;
        case '\n': mt__sb_append(sb, "\\n"); break;
        default: mt__sb_append(sb, "\\r"); break;
        }
        p++;
    }
}

void mt__proto_put_int(mt_strbuf *sb, long long v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", v);
    mt__proto_put(sb, tmp);
}

static void f64_hex(double v, char out[17]) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    snprintf(out, 17, "%016llx", (unsigned long long)bits);
}

void mt__proto_put_f64(mt_strbuf *sb, double v) {
    char tmp[17];
    f64_hex(v, tmp);
    mt__proto_put(sb, tmp);
}

void mt__proto_end(mt_strbuf *sb) { mt__sb_append(sb, "\n"); }

int mt__proto_split(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    for (;;) {
        if (n >= max) return -1;
        fields[n++] = p;
        char *tab = strchr(p, '\t');
        if (tab) *tab = '\0';
        /* Unescape in place. */
        char *w = p;
        for (char *r = p; *r; r++) {
            if (*r != '\\') {
                *w++ = *r;
                continue;
            }
            switch (*++r) {
            case '\\': *w++ = '\\'; break;
            case 't': *w++ = '\t'; break;
            case 'n': *w++ = '\n'; break;
            case 'r': *w++ = '\r'; break;
            default: return -1; /* includes a '\' at the end of the field */
            }
        }
        *w = '\0';
        if (!tab) break;
        p = tab + 1;
    }
    return n;
}

int mt__proto_get_int(const char *s, long long *out) {
    if (!s || !*s) return -1;
    const char *p = s;
    if (*p == '-') p++;
    if (*p < '0' || *p > '9') return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int mt__proto_get_f64(const char *s, double *out) {
    if (!s || strlen(s) != 16) return -1;
    uint64_t bits = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        bits = bits << 4 | (uint64_t)d;
    }
    memcpy(out, &bits, sizeof *out);
    return 0;
}

/* A status code received from the worker, or `otherwise` if it is no code we know. */
static mt_status status_from_code(long long code, mt_status otherwise) {
#define MT__STATUS_CASE(name, c, token, text) \
    if (code == (c)) return MT_##name;
    MT_STATUS_MAP(MT__STATUS_CASE)
#undef MT__STATUS_CASE
    return otherwise;
}

/* ------------------------------------------------------------- handles */

/* One mtgpu-worker process and its pipes. */
typedef struct proc {
    pid_t pid;         /* -1 when none */
    int req_fd;        /* we write requests here */
    int ans_fd;        /* we read answers here */
    char *buf;         /* answer bytes read and not yet consumed */
    size_t blen, bcap, bpos;
    char prepared[512]; /* workload text this worker has prepared; "" none */
    int start_failed;   /* compiler processes: one could not start, so this slot compiles in the tuner's process */
    int lost_signal;    /* the signal that ended the worker worker_lost last reaped; 0: none (it exited) */
    const char *spec;   /* the device it opens (owned by the measurer) */
} proc;

struct mt_measurer {
    mt_measurer_params p;
    char *device_spec; /* copies of p's strings (p's pointers point at these); the whole list when several */
    char **specs;      /* each listed device's spec: specs[0..ntimers) */
    char *worker_path; /* resolved */
    char *cache_dir;
    mt_device *dev;    /* the tuner's own handle: limits, and compiles when no compiler process runs */
    mt_device_info info;
    int warm_launch;   /* compilers also make the first launch (OpenCL: PoCL generates code there) */

    /* The workers that time, one per listed device, each one kernel at a
     * time: timers[0..ntimers). */
    proc *timers;
    int ntimers;
    /* Compiler processes, one per parallel compile, started on first use.
     * Processes rather than threads: PoCL compiles one kernel at a time per
     * process, and a compiler that crashes takes only its own process down. */
    proc *compilers;
    int ncompilers;
    int compile_here;  /* params.compile_in_process: compile in this process's threads, no compiler processes */
    _Atomic long long seq; /* request numbers; compile and timing threads draw them */

    pthread_mutex_t stale_mu;
    pid_t stale[MT__MAX_STALE]; /* killed workers not reaped yet */
    int nstale;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static char *dup_str(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

mt_measurer_params mt_measurer_default_params(void) {
    mt_measurer_params p;
    memset(&p, 0, sizeof p);
    p.device = NULL;
    p.worker_path = NULL;
    p.cache_dir = NULL;
    p.timeout_s = 20.0;
    p.prepare_timeout_s = 600.0;
    p.start_timeout_s = 120.0;
    p.compile_threads = 0;
    p.compile_timeout_s = 600.0;
    p.compile_in_process = 0;
    p.max_consecutive_failures = 3;
    p.measure = mt_measure_default_params();
    p.seed = 42;
    return p;
}

/* ------------------------------------------------------ child processes */

/* Waits up to `wait_s` for pid to end; 1 with its wait status in *wstatus
 * when reaped (or already gone: ECHILD gives status 0), 0 when still running. */
static int reap(pid_t pid, double wait_s, int *wstatus) {
    double deadline = now_s() + wait_s;
    double nap = 0.001;
    for (;;) {
        int ws = 0;
        pid_t r = waitpid(pid, &ws, WNOHANG);
        if (r == pid) {
            if (wstatus) *wstatus = ws;
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            /* ECHILD: someone else reaped it (SIGCHLD ignored, or a broad waitpid). */
            if (wstatus) *wstatus = 0;
            return 1;
        }
        if (now_s() >= deadline) return 0;
        sleep_s(nap);
        if (nap < 0.05) nap *= 2;
    }
}

/* Reaps killed workers that have ended since. */
static void reap_stale(mt_measurer *m, double wait_s) {
    pthread_mutex_lock(&m->stale_mu);
    int k = 0;
    for (int i = 0; i < m->nstale; i++)
        if (!reap(m->stale[i], wait_s, NULL)) m->stale[k++] = m->stale[i];
    m->nstale = k;
    pthread_mutex_unlock(&m->stale_mu);
}

static void proc_init(proc *w) {
    memset(w, 0, sizeof *w);
    w->pid = -1;
    w->req_fd = w->ans_fd = -1;
}

static void close_fds(proc *w) {
    if (w->req_fd >= 0) close(w->req_fd);
    if (w->ans_fd >= 0) close(w->ans_fd);
    w->req_fd = w->ans_fd = -1;
    w->blen = w->bpos = 0;
    w->prepared[0] = '\0';
}

/* Kills the worker (if any) and reaps it; *wstatus (may be NULL) gets its
 * wait status. A worker that will not die in MT__REAP_WAIT_S is remembered. */
static void worker_kill(mt_measurer *m, proc *w, int *wstatus) {
    if (wstatus) *wstatus = 0;
    close_fds(w);
    if (w->pid <= 0) return;
    kill(w->pid, SIGKILL);
    if (!reap(w->pid, MT__REAP_WAIT_S, wstatus)) {
        pthread_mutex_lock(&m->stale_mu);
        if (m->nstale < MT__MAX_STALE) m->stale[m->nstale++] = w->pid;
        pthread_mutex_unlock(&m->stale_mu);
    }
    w->pid = -1;
}

/* The worker closed its end: reaps it (killing it if it lingers) and
 * describes how it ended into why. */
static void worker_lost(mt_measurer *m, proc *w, char *why, size_t whylen) {
    pid_t pid = w->pid;
    close_fds(w);
    int ws = 0;
    w->lost_signal = 0;
    if (pid > 0 && !reap(pid, 2.0, &ws)) {
        w->pid = pid;
        worker_kill(m, w, &ws);
        snprintf(why, whylen, "worker closed its pipe and did not exit; killed");
        return;
    }
    w->pid = -1;
    w->lost_signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
    if (WIFSIGNALED(ws))
        snprintf(why, whylen, "worker crashed (signal %d)", WTERMSIG(ws));
    else if (WIFEXITED(ws))
        snprintf(why, whylen, "worker exited unexpectedly (status %d)", WEXITSTATUS(ws));
    else
        snprintf(why, whylen, "worker ended unexpectedly");
}

/* 1 when sig is one that comes from outside the process (the out-of-memory
 * killer's SIGKILL, an operator's kill or terminal) rather than from what the
 * process ran (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT of a kernel or a
 * driver). */
static int signal_from_outside(int sig) {
    return sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

/* The message of a config whose worker died twice, once of signal `first`,
 * then of `second` (0: exited): the config's fault only when both deaths
 * were its own crashes; otherwise the environment's, marked as such
 * (MT_RECORD_ENV_FAILURE_PREFIX) so that a resumed tune measures it again. */
static mt_status twice_lost(int first, int second, const char *what, const char *last, char *msg, size_t msglen, mt_status crash_status) {
    if (first >= 0 && second >= 0 && !signal_from_outside(first) && !signal_from_outside(second)) {
        snprintf(msg, msglen, "%s", last);
        return crash_status;
    }
    if (second >= 0)
        snprintf(msg, msglen,
                 MT_RECORD_ENV_FAILURE_PREFIX "the %s died while working on this config (signal %d, then signal %d in a fresh one): "
                 "killed from outside, not a crash of the config's own; a resumed tune measures it again",
                 what, first, second);
    else
        snprintf(msg, msglen,
                 MT_RECORD_ENV_FAILURE_PREFIX "the %s died while working on this config (signal %d) and no fresh one could be "
                 "started to try again: not shown to be the config's fault; a resumed tune measures it again",
                 what, first);
    return MT_UNAVAILABLE;
}

/* Writes all of data to the worker, with SIGPIPE blocked in this thread
 * (see the top of this file). 0 on success, -1 with errno set. */
static int write_all_nosigpipe(int fd, const char *data, size_t len) {
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int rc = 0, saved = 0;
    while (len > 0) {
        ssize_t w = write(fd, data, len);
        if (w < 0) {
            if (errno == EINTR) continue;
            rc = -1;
            saved = errno;
            break;
        }
        data += w;
        len -= (size_t)w;
    }
    if (rc != 0 && saved == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return rc;
}

/* Sends a built line; 0 on success, -1 when the worker is gone. */
static int send_line(proc *w, mt_strbuf *sb) {
    if (sb->failed || w->req_fd < 0) {
        errno = sb->failed ? ENOMEM : EPIPE;
        return -1;
    }
    return write_all_nosigpipe(w->req_fd, sb->data, sb->len);
}

enum { LINE_OK = 1, LINE_EOF = 0, LINE_TIMEOUT = -1, LINE_ERROR = -2 };

/* Reads the next answer line before `deadline` (now_s() seconds). LINE_OK:
 * *line is the line without its LF, NUL-terminated, valid until the next
 * call. LINE_EOF: the worker closed its end. LINE_TIMEOUT. LINE_ERROR: a read
 * error, or a line longer than MT__PROTO_MAX_LINE. */
static int read_line(proc *m, double deadline, char **line) {
    if (m->bpos > 0) {
        memmove(m->buf, m->buf + m->bpos, m->blen - m->bpos);
        m->blen -= m->bpos;
        m->bpos = 0;
    }
    size_t scanned = 0;
    for (;;) {
        char *nl = m->blen > scanned ? memchr(m->buf + scanned, '\n', m->blen - scanned) : NULL;
        if (nl) {
            *nl = '\0';
            *line = m->buf;
            m->bpos = (size_t)(nl - m->buf) + 1;
            return LINE_OK;
        }
        scanned = m->blen;
        if (m->blen >= MT__PROTO_MAX_LINE) return LINE_ERROR;
        double left = deadline - now_s();
        if (left <= 0) return LINE_TIMEOUT;
        struct pollfd pfd = {m->ans_fd, POLLIN, 0};
        double ms = ceil(left * 1000.0);
        int pr = poll(&pfd, 1, ms > INT_MAX ? INT_MAX : (int)ms);
        if (pr < 0) {
            if (errno == EINTR) continue;
            return LINE_ERROR;
        }
        if (pr == 0) continue; /* the deadline check above decides */
        if (m->bcap - m->blen < 4096) {
            size_t cap = m->bcap ? m->bcap * 2 : 8192;
            char *nb = realloc(m->buf, cap + 1);
            if (!nb) return LINE_ERROR;
            m->buf = nb;
            m->bcap = cap;
        }
        ssize_t r = read(m->ans_fd, m->buf + m->blen, m->bcap - m->blen);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return LINE_ERROR;
        }
        if (r == 0) return LINE_EOF;
        m->blen += (size_t)r;
    }
}

/* Moves fd to a number >= 5 (close-on-exec), so that the file actions that
 * put the child's ends at 3 and 4 can never overwrite one with the other. */
static int fd_above_4(int fd) {
    if (fd > 4) return fd;
    int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 5);
    close(fd);
    return nfd;
}

/* Where the worker executable is: params, $MTGPU_WORKER, the build tree, the
 * install prefix. MT_UNAVAILABLE when none of them is an executable file. */
static mt_status resolve_worker(const char *requested, char **out, char *err, size_t errlen) {
    *out = NULL;
    const char *env = getenv("MTGPU_WORKER");
    const char *explicit_path = requested && *requested ? requested : env && *env ? env : NULL;
    if (explicit_path) {
        if (access(explicit_path, X_OK) != 0)
            return mt__fail(err, errlen, MT_UNAVAILABLE, "measurement worker '%s' (from %s) is not an executable file: %s", explicit_path,
                            requested && *requested ? "the measurer's parameters" : "MTGPU_WORKER", strerror(errno));
        *out = dup_str(explicit_path);
        return *out ? MT_OK : mt__fail(err, errlen, MT_NOMEM, "out of memory");
    }
    const char *candidates[2] = {MTGPU_WORKER_BUILD_PATH, MTGPU_WORKER_INSTALL_PATH};
    for (int i = 0; i < 2; i++) {
        if (candidates[i][0] && access(candidates[i], X_OK) == 0) {
            *out = dup_str(candidates[i]);
            return *out ? MT_OK : mt__fail(err, errlen, MT_NOMEM, "out of memory");
        }
    }
    return mt__fail(err, errlen, MT_UNAVAILABLE,
                    "no measurement worker found: mtgpu-worker is neither at '%s' (build tree) nor at '%s' (install); "
                    "set MTGPU_WORKER to its path",
                    MTGPU_WORKER_BUILD_PATH, MTGPU_WORKER_INSTALL_PATH);
}

/* Starts a worker and reads its hello. On failure nothing is left running. */
static mt_status worker_start(mt_measurer *m, proc *w, char *err, size_t errlen) {
    reap_stale(m, 0);
    int req[2] = {-1, -1}, ans[2] = {-1, -1};
    if (pipe2(req, O_CLOEXEC) != 0 || pipe2(ans, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (req[i] >= 0) close(req[i]);
            if (ans[i] >= 0) close(ans[i]);
        }
        return mt__fail(err, errlen, MT_UNAVAILABLE, "cannot create pipes for the worker: %s", strerror(e));
    }
    req[0] = fd_above_4(req[0]);
    ans[1] = fd_above_4(ans[1]);
    if (req[0] < 0 || ans[1] < 0) {
        int e = errno;
        int fds[4] = {req[0], req[1], ans[0], ans[1]};
        for (int i = 0; i < 4; i++)
            if (fds[i] >= 0) close(fds[i]);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "cannot set up pipes for the worker: %s", strerror(e));
    }

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int fa_ok = posix_spawn_file_actions_init(&fa) == 0;
    int attr_ok = posix_spawnattr_init(&attr) == 0;
    int rc = fa_ok && attr_ok ? 0 : ENOMEM;
    if (!rc) rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, 2, 1);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, req[0], 3);
    if (!rc) rc = posix_spawn_file_actions_adddup2(&fa, ans[1], 4);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (!rc) rc = posix_spawnattr_setsigmask(&attr, &none);
    if (!rc) rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (!rc) rc = posix_spawnattr_setpgroup(&attr, 0);
    if (!rc) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

    const char *argv[12];
    int argc = 0;
    argv[argc++] = m->worker_path;
    argv[argc++] = "--protocol";
    argv[argc++] = MT__PROTO_VERSION_TEXT;
    argv[argc++] = "--in";
    argv[argc++] = "3";
    argv[argc++] = "--out";
    argv[argc++] = "4";
    argv[argc++] = "--device";
    argv[argc++] = w->spec ? w->spec : "";
    if (m->cache_dir) {
        argv[argc++] = "--cache-dir";
        argv[argc++] = m->cache_dir;
    }
    argv[argc] = NULL;

    pid_t pid = -1;
    if (!rc) rc = posix_spawn(&pid, m->worker_path, &fa, &attr, (char *const *)argv, environ);
    if (fa_ok) posix_spawn_file_actions_destroy(&fa);
    if (attr_ok) posix_spawnattr_destroy(&attr);
    close(req[0]);
    close(ans[1]);
    if (rc != 0) {
        close(req[1]);
        close(ans[0]);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "cannot start the measurement worker '%s': %s", m->worker_path, strerror(rc));
    }
    w->pid = pid;
    w->req_fd = req[1];
    w->ans_fd = ans[0];
    w->blen = w->bpos = 0;
    w->prepared[0] = '\0';

    char *line = NULL;
    int lr = read_line(w, now_s() + m->p.start_timeout_s, &line);
    if (lr != LINE_OK) {
        char why[256];
        if (lr == LINE_EOF)
            worker_lost(m, w, why, sizeof why);
        else {
            worker_kill(m, w, NULL);
            if (lr == LINE_TIMEOUT)
                snprintf(why, sizeof why, "no hello within %.0f s", m->p.start_timeout_s);
            else
                snprintf(why, sizeof why, "unreadable hello line");
        }
        return mt__fail(err, errlen, MT_UNAVAILABLE, "measurement worker '%s' did not start: %s", m->worker_path, why);
    }
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
    long long v = 0;
    if (nf == 3 && strcmp(f[0], "fatal") == 0 && mt__proto_get_int(f[1], &v) == 0) {
        mt_status st = status_from_code(v, MT_DEVICE);
        char msg[768];
        snprintf(msg, sizeof msg, "%s", f[2]);
        worker_kill(m, w, NULL);
        return mt__fail(err, errlen, st == MT_OK ? MT_DEVICE : st, "measurement worker could not start: %s", msg);
    }
    if (nf < 5 || strcmp(f[0], "hello") != 0 || mt__proto_get_int(f[1], &v) != 0) {
        worker_kill(m, w, NULL);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "measurement worker '%s' sent no valid hello line", m->worker_path);
    }
    if (v != MT__PROTO_VERSION) {
        worker_kill(m, w, NULL);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "measurement worker '%s' speaks protocol %lld, this library %d (mismatched install?)",
                        m->worker_path, v, MT__PROTO_VERSION);
    }
    if (strcmp(f[3], m->info.fingerprint) != 0) {
        char name[160], fp[17];
        snprintf(name, sizeof name, "%s", f[4]);
        snprintf(fp, sizeof fp, "%s", f[3]);
        worker_kill(m, w, NULL);
        if (m->ntimers > 1 && w->spec && strcmp(w->spec, m->specs[0]) != 0)
            return mt__fail(err, errlen, MT_INVALID_ARG,
                            "device %s ('%s', fingerprint %s) differs from %s ('%s', fingerprint %s): only devices of one fingerprint "
                            "measure for the same records",
                            w->spec, name, fp, m->specs[0], m->info.name, m->info.fingerprint);
        return mt__fail(err, errlen, MT_DEVICE, "measurement worker opened another device ('%s', fingerprint %s) than this process ('%s', %s)",
                        name, fp, m->info.name, m->info.fingerprint);
    }
    return MT_OK;
}

/* Asks the worker to quit, then reaps it (killing it past the grace period). */
static void worker_quit(mt_measurer *m, proc *w) {
    if (w->pid <= 0) {
        close_fds(w);
        return;
    }
    mt_strbuf sb = {0};
    mt__proto_put(&sb, "quit");
    mt__proto_end(&sb);
    double deadline = now_s() + MT__QUIT_GRACE_S;
    if (send_line(w, &sb) == 0) {
        char *line;
        /* "bye", then EOF; anything else is ignored. */
        while (read_line(w, deadline, &line) == LINE_OK) {
        }
    }
    mt__sb_free(&sb);
    close_fds(w);
    double left = deadline - now_s();
    if (reap(w->pid, left > 0.1 ? left : 0.1, NULL))
        w->pid = -1;
    else
        worker_kill(m, w, NULL);
}

/* Makes sure timing worker w is running with workload `wltext` prepared. */
static mt_status worker_ready(mt_measurer *m, proc *w, const char *wltext, char *err, size_t errlen) {
    if (w->pid <= 0) {
        mt_status st = worker_start(m, w, err, errlen);
        if (st != MT_OK) return st;
    }
    if (strcmp(w->prepared, wltext) == 0) return MT_OK;
    mt_strbuf sb = {0};
    mt__proto_put(&sb, "prepare");
    mt__proto_put(&sb, wltext);
    mt__proto_put_int(&sb, (long long)m->p.seed);
    mt__proto_end(&sb);
    int sent = send_line(w, &sb);
    mt__sb_free(&sb);
    char why[256];
    if (sent != 0) {
        if (errno == ENOMEM) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
        worker_lost(m, w, why, sizeof why);
        return mt__fail(err, errlen, MT_DEVICE, "preparing workload %s: %s", wltext, why);
    }
    char *line;
    int lr = read_line(w, now_s() + m->p.prepare_timeout_s, &line);
    if (lr == LINE_TIMEOUT) {
        worker_kill(m, w, NULL);
        return mt__fail(err, errlen, MT_TIMEOUT, "preparing workload %s took over %.0f s; worker killed", wltext, m->p.prepare_timeout_s);
    }
    if (lr != LINE_OK) {
        if (lr == LINE_EOF)
            worker_lost(m, w, why, sizeof why);
        else {
            worker_kill(m, w, NULL);
            snprintf(why, sizeof why, "unreadable answer from the worker");
        }
        return mt__fail(err, errlen, MT_DEVICE, "preparing workload %s: %s", wltext, why);
    }
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
    long long code;
    if (nf == 2 && strcmp(f[0], "prepared") == 0) {
        snprintf(w->prepared, sizeof w->prepared, "%s", wltext);
        return MT_OK;
    }
    if (nf == 3 && strcmp(f[0], "error") == 0 && mt__proto_get_int(f[1], &code) == 0) {
        mt_status st = status_from_code(code, MT_DEVICE);
        return mt__fail(err, errlen, st == MT_OK ? MT_DEVICE : st, "preparing workload %s in the worker: %s", wltext, f[2]);
    }
    worker_kill(m, w, NULL);
    return mt__fail(err, errlen, MT_DEVICE, "preparing workload %s: unexpected answer from the worker", wltext);
}

/* ------------------------------------------------------- start and stop */

/* m->device_spec, a device spec or a comma-separated list of them, into
 * m->specs and one (not yet started) timing worker each. A list names each
 * device once; "" (the first device) stands alone. */
static mt_status split_devices(mt_measurer *m, char *err, size_t errlen) {
    int n = 1;
    for (const char *c = m->device_spec; *c; c++) n += *c == ',';
    if (n > MT_MEASURER_MAX_DEVICES)
        return mt__fail(err, errlen, MT_INVALID_ARG, "%d devices listed; a measurer times on at most %d", n, MT_MEASURER_MAX_DEVICES);
    m->specs = calloc((size_t)n, sizeof *m->specs);
    m->timers = calloc((size_t)n, sizeof *m->timers);
    if (!m->specs || !m->timers) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    const char *p = m->device_spec;
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(p, ",");
        m->specs[i] = malloc(len + 1);
        if (!m->specs[i]) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
        memcpy(m->specs[i], p, len);
        m->specs[i][len] = '\0';
        proc_init(&m->timers[i]);
        m->timers[i].spec = m->specs[i];
        m->ntimers = i + 1;
        p += len + (p[len] == ',');
        if (n > 1 && len == 0) return mt__fail(err, errlen, MT_INVALID_ARG, "device list '%s' has an empty entry", m->device_spec);
        for (int k = 0; k < i; k++)
            if (strcmp(m->specs[k], m->specs[i]) == 0)
                return mt__fail(err, errlen, MT_INVALID_ARG, "device list '%s' names %s twice", m->device_spec, m->specs[i]);
    }
    return MT_OK;
}

mt_status mt_measurer_start(const mt_measurer_params *params, mt_measurer **out, mt_device_info *info_out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_measurer_start: NULL output");
    *out = NULL;
    mt_measurer_params p = params ? *params : mt_measurer_default_params();
    if (!(p.timeout_s > 0) || !(p.prepare_timeout_s > 0) || !(p.start_timeout_s > 0) || !(p.compile_timeout_s > 0))
        return mt__fail(err, errlen, MT_INVALID_ARG,
                        "measurer timeouts must be positive (timeout %g s, prepare %g s, start %g s, compile %g s)", p.timeout_s,
                        p.prepare_timeout_s, p.start_timeout_s, p.compile_timeout_s);
    if (p.compile_threads <= 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        p.compile_threads = ncpu > 0 ? (int)(ncpu < 256 ? ncpu : 256) : 1;
    }
    if (p.max_consecutive_failures < 1) p.max_consecutive_failures = 1;

    mt_measurer *m = calloc(1, sizeof *m);
    if (!m) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    pthread_mutex_init(&m->stale_mu, NULL);
    mt_status st = resolve_worker(p.worker_path, &m->worker_path, err, errlen);
    if (st != MT_OK) {
        pthread_mutex_destroy(&m->stale_mu);
        free(m);
        return st;
    }
    m->device_spec = dup_str(p.device ? p.device : "");
    m->cache_dir = p.cache_dir && *p.cache_dir ? dup_str(p.cache_dir) : NULL;
    if (!m->device_spec || (p.cache_dir && *p.cache_dir && !m->cache_dir)) {
        mt_measurer_stop(m);
        return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    }
    if ((st = split_devices(m, err, errlen)) != MT_OK) {
        mt_measurer_stop(m);
        return st;
    }
    p.device = m->device_spec;
    p.worker_path = m->worker_path;
    p.cache_dir = m->cache_dir;
    m->p = p;

    mt_device_params dp = mt_device_default_params();
    dp.cache_dir = m->cache_dir;
    st = mt_device_open(m->specs[0], &dp, &m->dev, err, errlen);
    if (st != MT_OK) {
        mt_measurer_stop(m);
        return st;
    }
    m->info = *mt_device_get_info(m->dev);
    m->warm_launch = m->info.backend == MT_BACKEND_OPENCL;
    m->compile_here = p.compile_in_process;
    m->compilers = calloc((size_t)p.compile_threads, sizeof *m->compilers);
    if (!m->compilers) {
        mt_measurer_stop(m);
        return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    }
    m->ncompilers = p.compile_threads;
    for (int i = 0; i < m->ncompilers; i++) {
        proc_init(&m->compilers[i]);
        m->compilers[i].spec = m->specs[0];
    }
    for (int i = 0; i < m->ntimers; i++) {
        if ((st = worker_start(m, &m->timers[i], err, errlen)) != MT_OK) {
            mt_measurer_stop(m);
            return st;
        }
    }
    if (info_out) *info_out = m->info;
    *out = m;
    return MT_OK;
}

long mt_measurer_worker_pid(const mt_measurer *m) { return m && m->ntimers > 0 && m->timers[0].pid > 0 ? (long)m->timers[0].pid : -1; }

int mt_measurer_device_count(const mt_measurer *m) { return m ? m->ntimers : 0; }

int mt_measurer_worker_pids(const mt_measurer *m, long *pids, int max) {
    int n = 0;
    for (int i = 0; m && i < m->ntimers && i < max; i++) pids[n++] = m->timers[i].pid > 0 ? (long)m->timers[i].pid : -1;
    return n;
}

int mt_measurer_compiler_pids(const mt_measurer *m, long *pids, int max) {
    int n = 0;
    for (int i = 0; m && i < m->ncompilers; i++)
        if (m->compilers[i].pid > 0) {
            if (n < max && pids) pids[n] = (long)m->compilers[i].pid;
            n++;
        }
    return n;
}

void mt_measurer_stop(mt_measurer *m) {
    if (!m) return;
    for (int i = 0; i < m->ntimers; i++) {
        worker_quit(m, &m->timers[i]);
        free(m->timers[i].buf);
    }
    for (int i = 0; i < m->ncompilers; i++) {
        worker_quit(m, &m->compilers[i]);
        free(m->compilers[i].buf);
    }
    free(m->compilers);
    reap_stale(m, 2.0);
    pthread_mutex_destroy(&m->stale_mu);
    mt_device_close(m->dev);
    free(m->timers);
    for (int i = 0; m->specs && i < m->ntimers; i++) free(m->specs[i]);
    free(m->specs);
    free(m->device_spec);
    free(m->worker_path);
    free(m->cache_dir);
    free(m);
}

/* ---------------------------------------------------- parallel compiles */

/* cfg's text for a request into buf; -1 (r set to invalid_config) when it
 * does not fit the protocol's limit. */
static int config_text(const mt_space *sp, const mt_config *cfg, char *buf, size_t len, mt_measure_result *r) {
    int clen = mt_config_format(sp, cfg, buf, len);
    if (clen >= 0 && (size_t)clen < len) return 0;
    r->status = MT_INVALID_CONFIG;
    snprintf(r->message, sizeof r->message, "config text does not fit the protocol's limit");
    return -1;
}

/* A config not measured because stop was requested: nothing is recorded for it. */
static void mark_skipped(mt_measurer_result *res) {
    res->skipped = 1;
    res->m.status = MT_UNAVAILABLE;
    snprintf(res->m.message, sizeof res->m.message, "not measured: stop requested");
}

typedef struct compile_job {
    mt_measurer *m;
    const mt_workload *wl;
    const char *wltext;
    const mt_template *t;
    const mt_space *sp;
    const mt_config *cfgs;
    mt_measurer_result *res;
    int *ready; /* ready[i]: compiled, to be timed */
    int n;
    pthread_mutex_t mu;
    int next;
} compile_job;

/* Compiles config i in this process (the fallback when no compiler process runs). */
static void compile_here(compile_job *j, int i) {
    mt_measure_result *r = &j->res[i].m;
    mt_status st = mt_conv_compile(j->m->dev, j->wl, j->t, j->sp, &j->cfgs[i], 0, r);
    if (st == MT_OK) j->ready[i] = 1;
}

/* Parses a `compiled` answer for request seq into r; 0 on success. */
static int parse_compiled(char *line, long long seq, mt_measure_result *r) {
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
    long long s, code;
    double build_s;
    if (nf != 5 || strcmp(f[0], "compiled") != 0 || mt__proto_get_int(f[1], &s) != 0 || s != seq ||
        mt__proto_get_int(f[2], &code) != 0 || mt__proto_get_f64(f[3], &build_s) != 0)
        return -1;
    r->status = status_from_code(code, MT_BUILD);
    r->build_s = build_s;
    snprintf(r->message, sizeof r->message, "%s", f[4]);
    return 0;
}

/* Compiles config i in compiler process w, starting it if needed. Returns -1
 * (nothing done to r) when no compiler process can be started; the caller
 * then compiles here. A compiler that hangs past compile_timeout_s or dies
 * costs this config a build error and is restarted for the next one. */
static int compile_in(compile_job *j, proc *w, long long seq, int i) {
    mt_measurer *m = j->m;
    mt_measure_result *r = &j->res[i].m;
    char cfgtext[2048];
    if (config_text(j->sp, &j->cfgs[i], cfgtext, sizeof cfgtext, r) != 0) return 0;
    mt_strbuf sb = {0};
    mt__proto_put(&sb, "compile");
    mt__proto_put_int(&sb, seq);
    mt__proto_put(&sb, j->wltext);
    mt__proto_put(&sb, mt_template_name(j->t));
    mt__proto_put(&sb, cfgtext);
    mt__proto_put_int(&sb, m->warm_launch);
    mt__proto_end(&sb);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (w->pid <= 0) {
            char why[1024];
            if (w->start_failed || worker_start(m, w, why, sizeof why) != MT_OK) {
                w->start_failed = 1;
                mt__sb_free(&sb);
                return -1;
            }
        }
        if (send_line(w, &sb) == 0) break;
        if (sb.failed) {
            mt__sb_free(&sb);
            r->status = MT_NOMEM;
            snprintf(r->message, sizeof r->message, "out of memory");
            return 0;
        }
        /* It died between requests: start another and resend, once. */
        char why[256];
        worker_lost(m, w, why, sizeof why);
    }
    if (w->pid <= 0) {
        mt__sb_free(&sb);
        return -1;
    }
    char *line;
    int lr = read_line(w, now_s() + m->p.compile_timeout_s, &line);
    /* A compiler that dies may have been killed from outside: the config
     * goes once more to a fresh one; only a crash that repeats is its own.
     * first, second: the signals that ended the two (0: it exited; -1: no
     * second one could be started). */
    int first = -1, second = -1;
    char why[256] = "";
    if (lr == LINE_EOF) {
        worker_lost(m, w, why, sizeof why);
        first = w->lost_signal;
        char serr[1024];
        if (worker_start(m, w, serr, sizeof serr) == MT_OK) {
            if (send_line(w, &sb) == 0) lr = read_line(w, now_s() + m->p.compile_timeout_s, &line);
            if (lr == LINE_EOF) {
                worker_lost(m, w, why, sizeof why);
                second = w->lost_signal;
            }
        } else {
            w->start_failed = 1; /* the next configs compile here */
        }
    }
    mt__sb_free(&sb);
    if (lr == LINE_OK && parse_compiled(line, seq, r) == 0) {
        if (r->status == MT_OK) j->ready[i] = 1;
        return 0;
    }
    memset(r, 0, sizeof *r);
    r->max_rel_err = -1;
    r->status = MT_BUILD;
    if (lr == LINE_TIMEOUT) {
        worker_kill(m, w, NULL);
        snprintf(r->message, sizeof r->message, "compiling took over %.0f s; compiler process killed", m->p.compile_timeout_s);
    } else if (lr == LINE_EOF) {
        char last[300];
        snprintf(last, sizeof last, "the compiler process died: %s", why);
        r->status = twice_lost(first, second, "compiler process", last, r->message, sizeof r->message, MT_BUILD);
    } else {
        worker_kill(m, w, NULL);
        snprintf(r->message, sizeof r->message, "compiler process protocol error: %s", lr == LINE_OK ? "malformed answer" : "unreadable answer");
    }
    return 0;
}

/* Checks config i against the space and the device's limits here (cheap, and
 * no process needed to reject it), then compiles it. */
static void compile_one(compile_job *j, proc *w, long long seq, int i) {
    mt_measure_result *r = &j->res[i].m;
    mt_status st = mt_space_check(j->sp, &j->cfgs[i]);
    if (st != MT_OK) {
        snprintf(r->message, sizeof r->message, "config is not in the space of template %s", mt_template_name(j->t));
        r->status = MT_INVALID_CONFIG;
        return;
    }
    mt_device_limits lim = mt_device_get_limits(j->m->dev);
    st = mt_template_check(j->t, j->wl, j->sp, &j->cfgs[i], &lim, r->message, sizeof r->message);
    if (st != MT_OK) {
        r->status = st;
        return;
    }
    if (w && compile_in(j, w, seq, i) == 0) return;
    compile_here(j, i);
}

typedef struct compile_thread {
    compile_job *job;
    proc *w; /* NULL: compile in this process */
} compile_thread;

static void *compile_worker(void *arg) {
    compile_thread *ct = arg;
    compile_job *j = ct->job;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next < j->n ? j->next++ : -1;
        long long seq = ++j->m->seq; /* atomic */
        pthread_mutex_unlock(&j->mu);
        if (i < 0) return NULL;
        compile_one(j, ct->w, seq, i);
    }
}

/* Compiles every config with up to ncompilers threads (this one included),
 * each feeding its own compiler process. */
static void compile_all(compile_job *j) {
    mt_measurer *m = j->m;
    int threads = m->ncompilers < j->n ? m->ncompilers : j->n;
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    pthread_t tids[256];
    compile_thread cts[256];
    for (int i = 0; i < threads; i++) cts[i] = (compile_thread){j, m->compile_here ? NULL : &m->compilers[i]};
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tids[started], NULL, compile_worker, &cts[i]) != 0) break; /* fewer threads then */
        started++;
    }
    compile_worker(&cts[0]);
    for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
}

/* ------------------------------------------------------------- batches */

enum { ANSWERED, LOST, TIMED_OUT, GARBLED, NOT_SENT };

/* Parses a result line for request `seq` into r (keeping r->build_s).
 * 0 on success, -1 when it is not a well-formed result for seq. */
static int parse_result(char *line, long long seq, mt_measure_result *r) {
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
    long long s, code, repeats, nruns;
    double median, min, gflops, relerr, wbuild;
    long long cold;
    if (nf != 13 || strcmp(f[0], "result") != 0 || mt__proto_get_int(f[1], &s) != 0 || s != seq ||
        mt__proto_get_int(f[2], &code) != 0 || mt__proto_get_f64(f[3], &median) != 0 || mt__proto_get_f64(f[4], &min) != 0 ||
        mt__proto_get_f64(f[5], &gflops) != 0 || mt__proto_get_f64(f[6], &relerr) != 0 || mt__proto_get_f64(f[7], &wbuild) != 0 ||
        mt__proto_get_int(f[8], &repeats) != 0 || mt__proto_get_int(f[9], &nruns) != 0 || nruns < 0 || nruns > MT_MEASURE_MAX_RUNS ||
        repeats < 0 || repeats > INT_MAX || mt__proto_get_int(f[12], &cold) != 0)
        return -1;
    double runs[MT_MEASURE_MAX_RUNS];
    char *p = f[10];
    for (long long i = 0; i < nruns; i++) {
        char hex[17];
        size_t len = strcspn(p, ",");
        if (len != 16) return -1;
        memcpy(hex, p, 16);
        hex[16] = '\0';
        if (mt__proto_get_f64(hex, &runs[i]) != 0) return -1;
        p += 16;
        if (i + 1 < nruns) {
            if (*p != ',') return -1;
            p++;
        }
    }
    if (*p) return -1;
    r->status = status_from_code(code, MT_DEVICE);
    r->median_ms = median;
    r->min_ms = min;
    r->gflops = gflops;
    r->max_rel_err = relerr;
    r->repeats = (int)repeats;
    r->cold = cold != 0;
    r->nruns = (int)nruns;
    memcpy(r->run_ms, runs, sizeof(double) * (size_t)nruns);
    snprintf(r->message, sizeof r->message, "%s", f[11]);
    (void)wbuild; /* the worker's build is a cache hit; build_s is the tuner's compile time */
    return 0;
}

/* Sends one config to timing worker w and waits for its answer. Returns
 * ANSWERED (r filled), NOT_SENT (the worker was gone before the request), or
 * LOST / TIMED_OUT / GARBLED with the worker killed and reaped and r set to
 * the error. */
static int measure_one(mt_measurer *m, proc *w, const mt_template *t, const char *cfgtext, mt_measurer_result *res) {
    mt_measure_result *r = &res->m;
    const mt_measure_params *mp = &m->p.measure;
    long long seq = ++m->seq;
    mt_strbuf sb = {0};
    mt__proto_put(&sb, "measure");
    mt__proto_put_int(&sb, seq);
    mt__proto_put(&sb, mt_template_name(t));
    mt__proto_put(&sb, cfgtext);
    mt__proto_put_int(&sb, mp->warmup);
    mt__proto_put_int(&sb, mp->min_repeats);
    mt__proto_put_int(&sb, mp->max_repeats);
    mt__proto_put_f64(&sb, mp->min_time_ms);
    mt__proto_put_int(&sb, mp->check);
    mt__proto_put_f64(&sb, mp->tolerance);
    mt__proto_put_int(&sb, mp->cold);
    mt__proto_end(&sb);
    double t0 = now_s();
    int sent = send_line(w, &sb);
    mt__sb_free(&sb);
    if (sent != 0) {
        char why[256];
        worker_lost(m, w, why, sizeof why);
        return NOT_SENT;
    }
    res->sent_to_worker = 1;
    char *line;
    /* PoCL generates a kernel's work-group code at its first launch, in the
     * worker: kernels that were slow to compile here get time for that too. */
    double limit = m->p.timeout_s + MT__CODEGEN_FACTOR * r->build_s;
    int lr = read_line(w, t0 + limit, &line);
    res->wall_s = now_s() - t0;
    double build_s = r->build_s;
    if (lr == LINE_OK && parse_result(line, seq, r) == 0) {
        r->build_s = build_s;
        return ANSWERED;
    }
    memset(r, 0, sizeof *r);
    r->build_s = build_s;
    r->max_rel_err = -1;
    if (lr == LINE_TIMEOUT) {
        worker_kill(m, w, NULL);
        r->status = MT_TIMEOUT;
        snprintf(r->message, sizeof r->message, "no answer within %.3g s; worker killed", limit);
        return TIMED_OUT;
    }
    if (lr == LINE_EOF) {
        worker_lost(m, w, r->message, sizeof r->message);
        r->status = MT_LAUNCH;
        return LOST;
    }
    worker_kill(m, w, NULL);
    r->status = MT_DEVICE;
    snprintf(r->message, sizeof r->message, "worker protocol error: %s", lr == LINE_OK ? "malformed result line" : "unreadable answer");
    return GARBLED;
}

static void result_init(mt_measurer_result *res) {
    memset(res, 0, sizeof *res);
    res->m.max_rel_err = -1;
}

/* The timing of one batch, shared by one thread per timing worker: each
 * takes the next compiled config, so a device that finishes early takes
 * more, and every config is timed once, on one device. */
typedef struct timing_job {
    mt_measurer *m;
    const char *wltext;
    const mt_template *t;
    const mt_space *sp;
    const mt_config *cfgs;
    mt_measurer_result *res;
    const int *ready;
    int n;
    pthread_mutex_t mu;
    int next;          /* configs [0, next) were taken */
    int *returned;     /* configs a failed worker gave back, for the others: returned[0..nreturned) */
    int nreturned;
    mt_status failed;  /* the last failure that stopped a worker's thread; MT_OK: none */
    char abort_msg[1024];
} timing_job;

/* The next compiled config to time, or -1 when none is left. */
static int timing_take(timing_job *j) {
    pthread_mutex_lock(&j->mu);
    int i = -1;
    if (j->nreturned > 0) i = j->returned[--j->nreturned];
    while (i < 0 && j->next < j->n) {
        int k = j->next++;
        if (j->ready[k]) i = k;
    }
    pthread_mutex_unlock(&j->mu);
    return i;
}

/* Times config i in worker w. Returns MT_OK, or the failure that ends this
 * worker's part of the batch (its message in msg): the worker could not be
 * (re)started or prepared (config i then goes back, unmeasured), or failed
 * max_consecutive_failures times in a row (config i keeps its result).
 * *failures counts w's crashes and timeouts since its last answer. */
static mt_status time_config(timing_job *j, proc *w, int i, int *failures, char *msg, size_t msglen, int *give_back) {
    mt_measurer *m = j->m;
    mt_measure_result *r = &j->res[i].m;
    *give_back = 0;
    char cfgtext[2048];
    if (config_text(j->sp, &j->cfgs[i], cfgtext, sizeof cfgtext, r) != 0) return MT_OK;
    mt_status ret = MT_OK;
    int outcome = NOT_SENT;
    int first_lost = -1; /* the signal that ended the worker the first time it died on this config (0: it exited) */
    int retried = 0;     /* the config went to a fresh worker after that */
    while (ret == MT_OK) {
        char why[1024];
        mt_status st = worker_ready(m, w, j->wltext, why, sizeof why);
        if (st != MT_OK) {
            ret = st;
            snprintf(msg, msglen, "%s", why);
            break;
        }
        retried = first_lost >= 0;
        j->res[i].timer = (int)(w - m->timers);
        outcome = measure_one(m, w, j->t, cfgtext, &j->res[i]);
        if (outcome == ANSWERED) {
            *failures = 0;
            break;
        }
        /* The worker died while measuring: the kernel, or a kill from
         * outside (the out-of-memory killer, an operator). Once more in a
         * fresh worker; only a crash that repeats is the config's. */
        if (outcome == LOST && first_lost < 0) {
            first_lost = w->lost_signal; /* measure_one kept r->build_s */
            continue;
        }
        if (outcome == LOST) {
            char last[sizeof r->message];
            snprintf(last, sizeof last, "%s", r->message);
            r->status = twice_lost(first_lost, w->lost_signal, "measurement worker", last, r->message, sizeof r->message, MT_LAUNCH);
        }
        if (++*failures >= m->p.max_consecutive_failures) {
            ret = MT_DEVICE;
            snprintf(msg, msglen, "the measurement worker failed %d times in a row (last: %.900s); batch abandoned", *failures,
                     outcome == NOT_SENT ? "gone before a request" : r->message);
        }
        if (outcome != NOT_SENT) break;
        /* The worker died between requests: start another and resend. */
    }
    /* It died on the config and no fresh worker could try it again: not
     * shown to be the config's fault. */
    if (outcome == LOST && first_lost >= 0 && !retried) {
        char last[sizeof r->message];
        snprintf(last, sizeof last, "%s", r->message);
        r->status = twice_lost(first_lost, -1, "measurement worker", last, r->message, sizeof r->message, MT_LAUNCH);
    }
    *give_back = outcome == NOT_SENT;
    return ret;
}

typedef struct timing_thread {
    timing_job *job;
    proc *w;
} timing_thread;

/* One timing worker's part of the batch: configs until none is left, the
 * stop flag is set (the rest come back skipped) or the worker fails. */
static void *timing_worker(void *arg) {
    timing_thread *tt = arg;
    timing_job *j = tt->job;
    mt_measurer *m = j->m;
    int failures = 0;
    for (;;) {
        int i = timing_take(j);
        if (i < 0) return NULL;
        if (m->p.stop && *m->p.stop) {
            mark_skipped(&j->res[i]);
            continue;
        }
        char msg[1024] = "";
        int give_back = 0;
        mt_status st = time_config(j, tt->w, i, &failures, msg, sizeof msg, &give_back);
        if (st == MT_OK) continue;
        pthread_mutex_lock(&j->mu);
        if (give_back) j->returned[j->nreturned++] = i;
        j->failed = st;
        snprintf(j->abort_msg, sizeof j->abort_msg, "%s", msg);
        pthread_mutex_unlock(&j->mu);
        return NULL;
    }
}

/* Times every compiled config with one thread per timing worker (this one
 * included). Configs no worker could take (every one failed) come back
 * with the failure, or skipped when stop was requested. MT_OK when every
 * compiled config got its own result. */
static mt_status time_all(timing_job *j) {
    mt_measurer *m = j->m;
    int threads = m->ntimers;
    j->returned = calloc((size_t)threads, sizeof *j->returned);
    if (!j->returned) {
        snprintf(j->abort_msg, sizeof j->abort_msg, "out of memory");
        j->failed = MT_NOMEM;
    } else {
        timing_thread tts[MT_MEASURER_MAX_DEVICES];
        pthread_t tids[MT_MEASURER_MAX_DEVICES];
        for (int i = 0; i < threads; i++) tts[i] = (timing_thread){j, &m->timers[i]};
        int started = 0;
        for (int i = 1; i < threads; i++) {
            if (pthread_create(&tids[started], NULL, timing_worker, &tts[i]) != 0) break; /* fewer devices then */
            started++;
        }
        timing_worker(&tts[0]);
        for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
    }
    /* What is left: every worker failed. */
    int left = 0;
    for (int i; (i = timing_take(j)) >= 0;) {
        mt_measure_result *r = &j->res[i].m;
        left++;
        if (m->p.stop && *m->p.stop) {
            mark_skipped(&j->res[i]);
            continue;
        }
        r->status = j->failed;
        snprintf(r->message, sizeof r->message, "not measured: %.1000s", j->abort_msg);
    }
    free(j->returned);
    return left > 0 || (threads == 1 && j->failed != MT_OK) ? j->failed : MT_OK;
}

mt_status mt_measurer_measure_batch(mt_measurer *m, const mt_workload *wl, const mt_template *t, const mt_space *sp,
                                    const mt_config *cfgs, int n, mt_measurer_result *results, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!m || !wl || !t || !sp || n < 0 || (n > 0 && (!cfgs || !results)))
        return mt__fail(err, errlen, MT_INVALID_ARG, "mt_measurer_measure_batch: bad arguments");
    for (int i = 0; i < n; i++) result_init(&results[i]);
    if (n == 0) return MT_OK;
    char wltext[512];
    int wlen = mt_workload_format(wl, wltext, sizeof wltext);
    mt_status st = mt_workload_validate(wl, NULL, 0);
    if (wlen <= 0 || (size_t)wlen >= sizeof wltext || st != MT_OK) {
        for (int i = 0; i < n; i++) {
            results[i].m.status = MT_INVALID_ARG;
            snprintf(results[i].m.message, sizeof results[i].m.message, "invalid workload");
        }
        return mt__fail(err, errlen, MT_INVALID_ARG, "mt_measurer_measure_batch: invalid workload");
    }
    int *ready = calloc((size_t)n, sizeof *ready);
    if (!ready) return mt__fail(err, errlen, MT_NOMEM, "out of memory");

    /* 1: compile everything in parallel here; this fills the binary cache. */
    compile_job job = {m, wl, wltext, t, sp, cfgs, results, ready, n, PTHREAD_MUTEX_INITIALIZER, 0};
    compile_all(&job);
    pthread_mutex_destroy(&job.mu);

    /* 2: time the ones that compiled, one at a time per device, in the timing workers. */
    timing_job tj = {m, wltext, t, sp, cfgs, results, ready, n, PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, MT_OK, ""};
    mt_status ret = time_all(&tj);
    pthread_mutex_destroy(&tj.mu);
    char abort_msg[1024];
    snprintf(abort_msg, sizeof abort_msg, "%s", tj.abort_msg);
    free(ready);
    if (ret != MT_OK) mt__fail(err, errlen, ret, "%s", abort_msg);
    return ret;
}
