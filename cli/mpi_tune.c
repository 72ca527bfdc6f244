/* mtgpu tune under MPI (built with MTGPU_MPI; cli.h): rank 0 runs the
 * tuning loop (scheduler, search, cost model) and is the only writer of the
 * records database; every other rank keeps a measurer (tuner/measurer.h)
 * on its own --device and compiles and times the configs it is dealt.
 *
 * Dealing. Each batch goes out one config per rank; a rank that sends back
 * a result gets the batch's next config, so a fast rank takes more and none
 * waits while configs are left. A rank measures its config as a batch of
 * one: compiled in a compiler process, timed in a timing worker, so a
 * kernel that crashes a remote worker is that config's launch_error there,
 * as it is locally.
 *
 * Messages (MPI_COMM_WORLD, byte strings built with the worker protocol's
 * line helpers, tuner/measurer-proto.h):
 *   rank r -> 0, TAG_HELLO:  hello <protocol> <ok> <fingerprint> <device name> <message>
 *            then, when ok, TAG_INFO: the rank's mt_device_info, as bytes
 *            (every rank runs the same mtgpu build)
 *   0 -> r, TAG_WORK:        measure <seq> <workload text> <template> <config text>
 *   r -> 0, TAG_RESULT:      result <seq> <batch status> <status> <median> <min> <gflops> <max_rel_err>
 *                            <build_s> <repeats> <nruns> <run_ms,...> <message> <wall_s>
 *                            <sent_to_worker> <fingerprint> <batch message> <cold>
 *   0 -> r, TAG_QUIT:        empty; the rank stops its measurer and finalizes
 * The fingerprint travels with every result; the record keeps it.
 *
 * Faults. Open MPI ends the whole job when a rank dies: mpirun names the
 * rank and its signal, and sends every other rank SIGTERM (SIGKILL about a
 * second later). Rank 0 polls for results, so SIGTERM (mt_cli_catch_stop)
 * ends its wait at once: the batch returns with what each rank had in
 * flight in the error, the records already committed stay (each was
 * committed as it came), and a rerun resumes from them. */
#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "fail.h"
#include "farm.h"
#include "measurer-proto.h"
#include "mpi_tune.h"
#include "strbuf.h"

#define MT__MPI_PROTO 2 /* 2: results say whether they were timed cold */
enum { TAG_HELLO = 1, TAG_INFO, TAG_WORK, TAG_RESULT, TAG_QUIT };

static int env_set(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

int mt_cli_mpi_begin(int *rank, int *size) {
    *rank = 0;
    *size = 1;
    /* Only under a launcher: mpirun (Open MPI), srun with PMIx or PMI-2. */
    if (!env_set("OMPI_COMM_WORLD_SIZE") && !env_set("PMIX_RANK") && !env_set("PMI_SIZE")) return 0;
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "mtgpu tune: MPI_Init failed\n");
        return -1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return 1;
}

void mt_cli_mpi_end(int clean) {
    /* After a rank failed, finalizing would wait for it: mpirun ends the job. */
    if (clean) MPI_Finalize();
}

/* Sends sb (a built line, or "" for none) to rank dest; 0 on success. */
static int send_sb(const mt_strbuf *sb, int dest, int tag) {
    if (sb->failed) return -1;
    return MPI_Send(sb->data ? sb->data : "", (int)sb->len, MPI_CHAR, dest, tag, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* Receives the message `st` announced (MPI_Probe or MPI_Iprobe) into a new
 * NUL-terminated buffer; NULL on failure. */
static char *recv_probed(const MPI_Status *st) {
    int len = 0;
    MPI_Get_count(st, MPI_CHAR, &len);
    char *buf = malloc((size_t)len + 1);
    if (!buf) return NULL;
    if (MPI_Recv(buf, len, MPI_CHAR, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    if (len > 0 && buf[len - 1] == '\n') buf[len - 1] = '\0';
    return buf;
}

/* ------------------------------------------------------- ranks 1..N-1 */

/* The space of the last (workload, template) a rank was dealt. */
typedef struct serve_space {
    char wltext[512];
    const mt_template *t;
    mt_workload wl;
    mt_space sp;
    int have;
} serve_space;

/* Measures one dealt config ("measure" line f[0..nf)) into res; the
 * batch's own status and message into *bst, bmsg. */
static void serve_one(mt_measurer *m, serve_space *ss, char **f, int nf, mt_measurer_result *res, mt_status *bst, char *bmsg, size_t blen) {
    memset(res, 0, sizeof *res);
    res->m.max_rel_err = -1;
    *bst = MT_OK;
    bmsg[0] = '\0';
    if (nf != 5) {
        res->m.status = MT_PARSE;
        snprintf(res->m.message, sizeof res->m.message, "malformed work message");
        return;
    }
    if (!ss->have || strcmp(ss->wltext, f[2]) != 0 || strcmp(mt_template_name(ss->t), f[3]) != 0) {
        if (ss->have) mt_space_free(&ss->sp);
        ss->have = 0;
        const mt_template *t = mt_template_find(f[3]);
        char why[512] = "";
        if (!t || mt_workload_parse(f[2], &ss->wl, why, sizeof why) != MT_OK || mt_template_space(t, &ss->wl, &ss->sp) != MT_OK) {
            res->m.status = MT_INVALID_ARG;
            snprintf(res->m.message, sizeof res->m.message, "cannot take workload %s with template %s here%s%s", f[2], f[3], why[0] ? ": " : "",
                     why);
            return;
        }
        ss->t = t;
        ss->have = 1;
        snprintf(ss->wltext, sizeof ss->wltext, "%s", f[2]);
    }
    mt_config cfg;
    if (mt_config_parse(&ss->sp, f[4], &cfg, res->m.message, sizeof res->m.message) != MT_OK) {
        res->m.status = MT_INVALID_CONFIG;
        return;
    }
    *bst = mt_measurer_measure_batch(m, &ss->wl, ss->t, &ss->sp, &cfg, 1, res, bmsg, blen);
}

static void put_result(mt_strbuf *sb, long long seq, mt_status bst, const mt_measurer_result *r, const char *fp, const char *bmsg) {
    mt__proto_put(sb, "result");
    mt__proto_put_int(sb, seq);
    mt__proto_put_int(sb, bst);
    mt__proto_put_int(sb, r->m.status);
    mt__proto_put_f64(sb, r->m.median_ms);
    mt__proto_put_f64(sb, r->m.min_ms);
    mt__proto_put_f64(sb, r->m.gflops);
    mt__proto_put_f64(sb, r->m.max_rel_err);
    mt__proto_put_f64(sb, r->m.build_s);
    mt__proto_put_int(sb, r->m.repeats);
    mt__proto_put_int(sb, r->m.nruns);
    mt_strbuf runs = {0};
    for (int i = 0; i < r->m.nruns; i++) {
        uint64_t bits;
        memcpy(&bits, &r->m.run_ms[i], sizeof bits);
        mt__sb_printf(&runs, "%s%016llx", i ? "," : "", (unsigned long long)bits);
    }
    mt__proto_put(sb, runs.data ? runs.data : "");
    mt__sb_free(&runs);
    mt__proto_put(sb, r->m.message);
    mt__proto_put_f64(sb, r->wall_s);
    mt__proto_put_int(sb, r->sent_to_worker);
    mt__proto_put(sb, fp);
    mt__proto_put(sb, bmsg);
    mt__proto_put_int(sb, r->m.cold);
    mt__proto_end(sb);
}

int mt_cli_mpi_serve(const mt_measurer_params *mp, int rank) {
    mt_measurer *m = NULL;
    mt_device_info info;
    memset(&info, 0, sizeof info);
    char err[1024] = "";
    mt_status st = mt_measurer_start(mp, &m, &info, err, sizeof err);
    mt_strbuf sb = {0};
    mt__proto_put(&sb, "hello");
    mt__proto_put_int(&sb, MT__MPI_PROTO);
    mt__proto_put_int(&sb, st == MT_OK);
    mt__proto_put(&sb, info.fingerprint);
    mt__proto_put(&sb, info.name);
    mt__proto_put(&sb, err);
    mt__proto_end(&sb);
    int ok = send_sb(&sb, 0, TAG_HELLO) == 0;
    mt__sb_free(&sb);
    if (ok && st == MT_OK) ok = MPI_Send(&info, (int)sizeof info, MPI_BYTE, 0, TAG_INFO, MPI_COMM_WORLD) == MPI_SUCCESS;
    serve_space ss = {0};
    while (ok) {
        MPI_Status ps;
        if (MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &ps) != MPI_SUCCESS) break;
        char *line = recv_probed(&ps);
        if (!line || ps.MPI_TAG != TAG_WORK) {
            free(line);
            break; /* TAG_QUIT */
        }
        char *f[MT__PROTO_MAX_FIELDS];
        int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
        long long seq = -1;
        if (nf < 2 || mt__proto_get_int(f[1], &seq) != 0) nf = 0;
        mt_measurer_result res;
        memset(&res, 0, sizeof res);
        /* Without a measurer (its start failed, as the hello said) work is answered as failed. */
        mt_status bst = MT_UNAVAILABLE;
        char bmsg[1024];
        snprintf(bmsg, sizeof bmsg, "this rank has no measurer: %s", err);
        if (m) serve_one(m, &ss, f, nf, &res, &bst, bmsg, sizeof bmsg);
        mt_strbuf out = {0};
        put_result(&out, seq, bst, &res, info.fingerprint, bmsg);
        free(line);
        ok = send_sb(&out, 0, TAG_RESULT) == 0;
        mt__sb_free(&out);
    }
    if (ss.have) mt_space_free(&ss.sp);
    mt_measurer_stop(m);
    if (st != MT_OK) fprintf(stderr, "mtgpu tune: rank %d: %s\n", rank, err);
    return st == MT_OK && ok ? MT_EXIT_OK : MT_EXIT_FAIL;
}

/* ------------------------------------------------------------ rank 0 */

typedef struct farm_ctx {
    int size;
    const volatile sig_atomic_t *stop;
    char fingerprint[17];
    long long seq;
    /* What each rank was dealt and has not answered: cfg index, -1 none. */
    int *inflight;
    double *sent_at;
    int started;
    int lost;  /* a batch ended with ranks' measurements in flight: they may never answer */
} farm_ctx;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

/* Waits for a message of `tag` from any rank, polling the stop flag.
 * 1 with it probed into *st, 0 when stop was set first, -1 on an MPI error. */
static int wait_for(farm_ctx *c, int tag, MPI_Status *st) {
    for (;;) {
        int flag = 0;
        if (MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, st) != MPI_SUCCESS) return -1;
        if (flag) return 1;
        if (c->stop && *c->stop) return 0;
        nap();
    }
}

static void quit_all(farm_ctx *c) {
    mt_strbuf none = {0};
    for (int r = 1; r < c->size; r++) send_sb(&none, r, TAG_QUIT);
}

static mt_status farm_start(void *ctx, const mt_measurer_params *p, mt_device_info *info, char *err, size_t errlen) {
    farm_ctx *c = ctx;
    c->stop = p->stop;
    c->inflight = malloc(sizeof *c->inflight * (size_t)c->size);
    c->sent_at = calloc((size_t)c->size, sizeof *c->sent_at);
    if (!c->inflight || !c->sent_at) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    for (int r = 0; r < c->size; r++) c->inflight[r] = -1;
    c->started = 1;
    /* Every rank's hello: its device, or why it has none. */
    mt_status ret = MT_OK;
    size_t o = 0;
    char fps[4096] = "";
    int mixed = 0;
    for (int got = 1; got < c->size; got++) {
        MPI_Status ps;
        int w = wait_for(c, TAG_HELLO, &ps);
        c->lost = w <= 0;
        if (w <= 0) return mt__fail(err, errlen, MT_UNAVAILABLE, "waiting for the ranks to start: %s",
                                         w == 0 ? "stopped" : "MPI error");
        char *line = recv_probed(&ps);
        char *f[MT__PROTO_MAX_FIELDS];
        int nf = line ? mt__proto_split(line, f, MT__PROTO_MAX_FIELDS) : 0;
        long long proto = 0, ok = 0;
        if (nf != 6 || strcmp(f[0], "hello") != 0 || mt__proto_get_int(f[1], &proto) != 0 || proto != MT__MPI_PROTO ||
            mt__proto_get_int(f[2], &ok) != 0) {
            if (ret == MT_OK) mt__fail(err, errlen, MT_UNAVAILABLE, "rank %d sent no valid hello (another mtgpu version?)", ps.MPI_SOURCE);
            ret = MT_UNAVAILABLE;
        } else if (!ok) {
            if (ret == MT_OK) mt__fail(err, errlen, MT_UNAVAILABLE, "rank %d could not start measuring: %s", ps.MPI_SOURCE, f[5]);
            ret = MT_UNAVAILABLE;
        } else {
            mt_device_info ri;
            if (MPI_Recv(&ri, (int)sizeof ri, MPI_BYTE, ps.MPI_SOURCE, TAG_INFO, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) ret = MT_UNAVAILABLE;
            if (!c->fingerprint[0]) {
                snprintf(c->fingerprint, sizeof c->fingerprint, "%s", f[3]);
                *info = ri;
            } else if (strcmp(c->fingerprint, f[3]) != 0) {
                mixed = 1;
            }
            if (o < sizeof fps) o += (size_t)snprintf(fps + o, sizeof fps - o, "%srank %d: %s ('%s')", o ? ", " : "", ps.MPI_SOURCE, f[3], f[4]);
        }
        free(line);
    }
    if (ret == MT_OK && mixed)
        ret = mt__fail(err, errlen, MT_INVALID_ARG,
                           "the ranks' devices have different fingerprints (%s): ranks tune one record set together only when their devices "
                           "share one; start one job per fingerprint, each with its own --db, and merge them with mtgpu merge-db",
                           fps);
    if (ret != MT_OK) quit_all(c);
    return ret;
}

/* Parses a result line into *r; 0 on success. */
static int parse_result(char *line, long long *seq, mt_status *bst, mt_measurer_result *r, char *bmsg, size_t blen) {
    char *f[MT__PROTO_MAX_FIELDS];
    int nf = mt__proto_split(line, f, MT__PROTO_MAX_FIELDS);
    long long b, code, repeats, nruns, sent, cold;
    mt_measure_result *m = &r->m;
    if (nf != 18 || strcmp(f[0], "result") != 0 || mt__proto_get_int(f[1], seq) != 0 || mt__proto_get_int(f[2], &b) != 0 ||
        mt__proto_get_int(f[3], &code) != 0 || mt__proto_get_f64(f[4], &m->median_ms) != 0 || mt__proto_get_f64(f[5], &m->min_ms) != 0 ||
        mt__proto_get_f64(f[6], &m->gflops) != 0 || mt__proto_get_f64(f[7], &m->max_rel_err) != 0 ||
        mt__proto_get_f64(f[8], &m->build_s) != 0 || mt__proto_get_int(f[9], &repeats) != 0 || mt__proto_get_int(f[10], &nruns) != 0 ||
        nruns < 0 || nruns > MT_MEASURE_MAX_RUNS || repeats < 0 || repeats > 1000000000 || mt__proto_get_f64(f[13], &r->wall_s) != 0 ||
        mt__proto_get_int(f[14], &sent) != 0 || strlen(f[15]) >= sizeof r->device || mt__proto_get_int(f[17], &cold) != 0)
        return -1;
    const char *p = f[11];
    for (long long i = 0; i < nruns; i++) {
        char hex[17];
        if (strcspn(p, ",") != 16) return -1;
        memcpy(hex, p, 16);
        hex[16] = '\0';
        if (mt__proto_get_f64(hex, &m->run_ms[i]) != 0) return -1;
        p += 16 + (p[16] == ',');
    }
    if (*p) return -1;
    m->status = (mt_status)code;
    m->repeats = (int)repeats;
    m->cold = cold != 0;
    m->nruns = (int)nruns;
    snprintf(m->message, sizeof m->message, "%s", f[12]);
    r->sent_to_worker = sent != 0;
    snprintf(r->device, sizeof r->device, "%s", f[15]);
    *bst = (mt_status)b;
    snprintf(bmsg, blen, "%s", f[16]);
    return 0;
}

/* What the ranks had in flight, into msg. */
static void describe_inflight(const farm_ctx *c, const mt_template *t, const mt_space *sp, const mt_config *cfgs, const char *wltext,
                              char *msg, size_t len) {
    size_t o = 0;
    double now = now_s();
    int any = 0;
    for (int r = 1; r < c->size && o < len; r++) {
        if (c->inflight[r] < 0) continue;
        char cfg[1024];
        mt_config_format(sp, &cfgs[c->inflight[r]], cfg, sizeof cfg);
        o += (size_t)snprintf(msg + o, len - o, "%srank %d: %s %s on %s (sent %.1f s before)", any ? "; " : "", r, mt_template_name(t), cfg,
                              wltext, now - c->sent_at[r]);
        any = 1;
    }
    if (!any) snprintf(msg, len, "nothing");
}

/* Deals config *next to rank r and counts it (*next, *outstanding);
 * MT_UNAVAILABLE (why in msg) when it cannot be sent. */
static mt_status deal(farm_ctx *c, int r, const char *wltext, const mt_template *t, const mt_space *sp, const mt_config *cfgs, int *next,
                      int *outstanding, long long *seqs, char *msg, size_t msglen) {
    int i = *next;
    char cfgtext[2048];
    mt_config_format(sp, &cfgs[i], cfgtext, sizeof cfgtext);
    mt_strbuf sb = {0};
    seqs[i] = ++c->seq;
    mt__proto_put(&sb, "measure");
    mt__proto_put_int(&sb, seqs[i]);
    mt__proto_put(&sb, wltext);
    mt__proto_put(&sb, mt_template_name(t));
    mt__proto_put(&sb, cfgtext);
    mt__proto_end(&sb);
    int rc = send_sb(&sb, r, TAG_WORK);
    mt__sb_free(&sb);
    if (rc != 0) {
        snprintf(msg, msglen, "cannot send work to rank %d", r);
        return MT_UNAVAILABLE;
    }
    c->inflight[r] = i;
    c->sent_at[r] = now_s();
    (*next)++;
    (*outstanding)++;
    return MT_OK;
}

static mt_status farm_measure(void *ctx, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs, int n,
                              mt_measurer_result *results, char *err, size_t errlen) {
    farm_ctx *c = ctx;
    char wltext[512];
    mt_workload_format(wl, wltext, sizeof wltext);
    for (int i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        results[i].m.max_rel_err = -1;
    }
    long long *seqs = calloc((size_t)n + 1, sizeof *seqs);
    if (!seqs) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    int next = 0, outstanding = 0;
    mt_status ret = MT_OK, worst = MT_OK; /* worst: the first rank's measurer failure */
    char first_msg[1024] = "";
    for (int r = 1; r < c->size && next < n && ret == MT_OK; r++) ret = deal(c, r, wltext, t, sp, cfgs, &next, &outstanding, seqs, first_msg, sizeof first_msg);
    int stopped = 0;
    while (outstanding > 0 && ret == MT_OK) {
        MPI_Status ps;
        int w = wait_for(c, TAG_RESULT, &ps);
        if (w <= 0) {
            stopped = w == 0;
            c->lost = 1;
            char what[4096];
            describe_inflight(c, t, sp, cfgs, wltext, what, sizeof what);
            ret = MT_UNAVAILABLE;
            snprintf(first_msg, sizeof first_msg, "%s with measurements in flight (a rank failed, or the job was ended): %.900s",
                     stopped ? "stopped" : "MPI error", what);
            break;
        }
        char *line = recv_probed(&ps);
        int r = ps.MPI_SOURCE;
        int i = r > 0 && r < c->size ? c->inflight[r] : -1;
        long long seq = -1;
        mt_status bst = MT_OK;
        mt_measurer_result res;
        char bmsg[1024] = "";
        memset(&res, 0, sizeof res);
        if (!line || i < 0 || parse_result(line, &seq, &bst, &res, bmsg, sizeof bmsg) != 0 || seq != seqs[i]) {
            free(line);
            ret = MT_PARSE;
            c->lost = 1; /* what the others have in flight is not waited for */
            snprintf(first_msg, sizeof first_msg, "rank %d sent a malformed or unexpected result (another mtgpu version?)", r);
            break;
        }
        free(line);
        c->inflight[r] = -1;
        outstanding--;
        results[i] = res;
        /* A rank whose measurer fails says so; the config keeps what it got
         * (unrecorded when it never reached a worker, as locally). */
        if (bst != MT_OK && worst == MT_OK) {
            worst = bst;
            snprintf(first_msg, sizeof first_msg, "rank %d: %.1000s", r, bmsg);
        }
        if (next < n && !(c->stop && *c->stop)) ret = deal(c, r, wltext, t, sp, cfgs, &next, &outstanding, seqs, first_msg, sizeof first_msg);
    }
    /* Not dealt, or dealt and not answered: nothing to record. */
    for (int k = 0; k < n; k++) {
        int answered = 1;
        for (int r = 1; r < c->size; r++)
            if (c->inflight[r] == k) answered = 0;
        if (k >= next || !answered) {
            results[k].skipped = 1;
            results[k].m.status = MT_UNAVAILABLE;
            snprintf(results[k].m.message, sizeof results[k].m.message, "not measured: %s", stopped ? "stop requested" : "rank lost");
        }
    }
    free(seqs);
    if (ret == MT_OK) ret = worst;
    if (ret != MT_OK) return mt__fail(err, errlen, ret, "%s", first_msg);
    return MT_OK;
}

static void farm_stop(void *ctx) {
    farm_ctx *c = ctx;
    int busy = 0;
    for (int r = 1; c->inflight && r < c->size; r++) busy |= c->inflight[r] >= 0;
    /* Ranks still measuring would take a quit for their next work: leave them to mpirun. */
    if (!busy) quit_all(c);
    free(c->inflight);
    free(c->sent_at);
    c->inflight = NULL;
    c->sent_at = NULL;
}

static const mt__farm_i farm_iface = {
    /* .start = */ farm_start,
    /* .measure_batch = */ farm_measure,
    /* .stop = */ farm_stop,
};

mt_status mt_cli_mpi_tune(const mt_task *tasks, int ntasks, const mt_tune_params *p, int size, mt_tune_summary *out, int *clean, char *err,
                    size_t errlen) {
    farm_ctx c = {.size = size};
    mt__farm farm = {&farm_iface, &c};
    mt_status st = mt__tune_farmed(tasks, ntasks, p, &farm, out, err, errlen);
    /* Not started (a bad database path, ...): the ranks still wait for work. */
    if (!c.started) quit_all(&c);
    *clean = !c.lost;
    return st;
}
