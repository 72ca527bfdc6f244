/* bench/tune_curves: search efficiency per cost model. For three ResNet-50
 * convolutions, tunes one task at a time with mt_tune for every cost model and
 * seed, each run on a fresh records database, and records the best GFLOP/s
 * found after each measurement (the best-so-far curve over the trial number).
 *
 *   bench_tune_curves [--trials T] [--seeds S] [--layers LIST] [--models LIST] [--out DIR]
 *                     [--time-limit-per-run SEC] [--early-stop N] [--batch N] [--device D]
 *                     [--keep-dbs | --db-dir DIR] [--resume] [--templates LIST]
 *
 * LIST is comma-separated: layers by name (see `layers` below) or index, models
 * among random, xgb, gnn. Runs are ordered seed by seed, layer by layer, with the
 * models of one seed and layer next to each other, so that on a noisy machine
 * the runs being compared are close in time.
 *
 * Writes DIR/tune_curves.csv, one row per measurement:
 *   layer,model,seed,trial,gflops_best,gflops,elapsed_s,device
 * (gflops: that measurement's, 0 when it failed; elapsed_s: seconds since the
 * run started; device: the device's fingerprint), a run's rows as soon as it
 * ends, and DIR/tune_curves.md: per layer and model, the mean best
 * GFLOP/s across seeds at trials 25/50/100/200/300 (those <= T, and T), and the
 * trials needed to reach 90% of the best any run found on that layer.
 * bench/tune_curves/plot.py draws the CSV. A run that ends before T (time limit, space
 * exhausted, early stop) keeps its last best for the later checkpoints; the
 * summary says how many runs did.
 *
 * --resume keeps the runs already in DIR/tune_curves.csv (they must be of
 * this device: a CSV of another one is refused) and does only the missing
 * ones, so the full set can be measured over several sittings; the summary
 * covers all of them. Without it the CSV is started afresh.
 *
 * Templates: direct, depthwise and gemm by default (--templates), the set the
 * committed curves were started with, so that runs added by --resume in a
 * later sitting search the same spaces.
 *
 * The runs leave out mt_tune's first measurement of each template's default
 * config (start_from_default = 0): the curves are of the searches alone.
 *
 * Early stopping is off by default (--early-stop 0) so that every run can use
 * its T trials; mt_tune's own default is 64. The databases are deleted after
 * each run unless --keep-dbs (then their directory is printed) or --db-dir
 * DIR (kept there as LAYER_MODEL_SEED.db: the random runs' records are a
 * data set of random configs).
 *
 * elapsed_s includes compile time, and compiled kernels are cached on disk
 * across runs (and processes: the device's default cache), so a run that meets
 * configs an earlier run compiled is faster in wall time; compare curves by
 * trial, not by time. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "mtgpu/device.h"
#include "mtgpu/tuner.h"

static const struct {
    const char *name;
    const char *label;
    const char *workload;
    double onednn_gflops; /* "dnnl any" (oneDNN 2.6.3) on the 2-core AMD EPYC development machine, 2026-11-29 */
} layers[] = {
    {"3x3_64_56", "ResNet-50 3x3 64->64 @56 pad 1", "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1", 238},
    {"1x1_256_56", "ResNet-50 1x1 256->64 @56", "n=1,c=256,h=56,w=56,k=64,r=1,s=1", 233},
    {"3x3_256_14", "ResNet-50 3x3 256->256 @14 pad 1", "n=1,c=256,h=14,w=14,k=256,r=3,s=3,pad=1", 256},
};
#define NLAYERS (int)(sizeof layers / sizeof layers[0])

static const char *const models[] = {"random", "xgb", "gnn"};
#define NMODELS (int)(sizeof models / sizeof models[0])

static const int checkpoints[] = {25, 50, 100, 200, 300};
#define NCHECK (int)(sizeof checkpoints / sizeof checkpoints[0])

static volatile sig_atomic_t stop_requested;
static void on_sigint(int sig) {
    (void)sig;
    stop_requested = 1;
}

typedef struct {
    int layer, model, seed;
    int n;              /* measurements recorded */
    double *best;       /* best GFLOP/s after trial i+1 */
    double *gflops;     /* trial i+1's own GFLOP/s, 0 when it failed */
    double *elapsed;    /* seconds since the run started */
    double flops;
    double wall_s;
    int errors;
    int failed;         /* mt_tune returned an error */
    char best_template[16];
} run;

typedef struct {
    run *r;
    int cap;
} progress_ctx;

static void on_progress(const mt_tune_progress *p, void *user) {
    progress_ctx *ctx = user;
    run *r = ctx->r;
    for (int i = 0; i < p->nrecords && r->n < ctx->cap; i++) {
        const mt_record *rec = &p->records[i];
        double gf = rec->status == MT_OK && rec->median_ms > 0 ? r->flops / (rec->median_ms * 1e6) : 0;
        if (rec->status != MT_OK) r->errors++;
        double prev = r->n > 0 ? r->best[r->n - 1] : 0;
        r->gflops[r->n] = gf;
        r->best[r->n] = gf > prev ? gf : prev;
        r->elapsed[r->n] = p->elapsed_s;
        r->n++;
    }
}

/* Best after `trial` trials (1-based), carrying the last value forward past
 * the end of a run that stopped early; 0 before the first valid one. */
static double best_at(const run *r, int trial) {
    if (r->n == 0) return 0;
    return r->best[(trial < r->n ? trial : r->n) - 1];
}

/* Splits a comma-separated list into indices of names[] (or decimal indices);
 * returns the count, -1 on an unknown entry (named in *bad). */
static int parse_list(const char *list, const char *const *names, int nnames, int *out, char *bad, size_t badlen) {
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int idx = -1;
        for (int i = 0; i < nnames; i++)
            if (!strcmp(tok, names[i])) idx = i;
        if (idx < 0) {
            char *end;
            long v = strtol(tok, &end, 10);
            if (*tok && !*end && v >= 0 && v < nnames) idx = (int)v;
        }
        if (idx < 0) {
            snprintf(bad, badlen, "%s", tok);
            return -1;
        }
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= out[i] == idx;
        if (!dup && n < nnames) out[n++] = idx;
    }
    return n;
}

static void remove_db(const char *path) {
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char p[1100];
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        snprintf(p, sizeof p, "%s%s", path, suffix[i]);
        unlink(p);
    }
}

/* Loads the complete runs of csv_path (rows of device `fp` only) into runs[]
 * for the selected layers and models and seeds <= nseeds, at most `trials`
 * rows each. Returns the number loaded, 0 when there is no file, -1 on a
 * malformed file or one of another device (reason in err). */
static int load_runs(const char *csv_path, const char *fp, int trials, int nseeds, const int *lsel, int nl, const int *msel, int nm,
                     run *runs, int cap, char *err, size_t errlen) {
    FILE *f = fopen(csv_path, "r");
    if (!f) return 0;
    char line[512];
    int n = 0, lineno = 0, rc = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, "layer,model,seed,trial,gflops_best,gflops,elapsed_s,device", 58) != 0) {
        snprintf(err, errlen, "%s has no device column (an older format): move it away or run without --resume", csv_path);
        fclose(f);
        return -1;
    }
    lineno = 1;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char lname[64], mname[64], dev[64];
        int seed, trial;
        double best, gf, el;
        if (sscanf(line, "%63[^,],%63[^,],%d,%d,%lf,%lf,%lf,%63[^,\n]", lname, mname, &seed, &trial, &best, &gf, &el, dev) != 8 || trial < 1) {
            snprintf(err, errlen, "%s:%d: malformed row", csv_path, lineno);
            rc = -1;
            break;
        }
        if (strcmp(dev, fp) != 0) {
            snprintf(err, errlen, "%s:%d: a run of device %s, not this one (%s): resume only on the device that started the file", csv_path,
                     lineno, dev, fp);
            rc = -1;
            break;
        }
        int l = -1, m = -1;
        for (int i = 0; i < nl; i++)
            if (!strcmp(layers[lsel[i]].name, lname)) l = lsel[i];
        for (int i = 0; i < nm; i++)
            if (!strcmp(models[msel[i]], mname)) m = msel[i];
        if (l < 0 || m < 0 || seed < 1 || seed > nseeds || trial > trials) continue; /* not part of this selection */
        run *r = NULL;
        for (int i = 0; i < n; i++)
            if (runs[i].layer == l && runs[i].model == m && runs[i].seed == seed) r = &runs[i];
        if (!r) {
            if (n >= cap) continue;
            r = &runs[n++];
            memset(r, 0, sizeof *r);
            r->layer = l;
            r->model = m;
            r->seed = seed;
            r->best = calloc((size_t)trials, sizeof *r->best);
            r->gflops = calloc((size_t)trials, sizeof *r->gflops);
            r->elapsed = calloc((size_t)trials, sizeof *r->elapsed);
            if (!r->best || !r->gflops || !r->elapsed) {
                snprintf(err, errlen, "out of memory");
                rc = -1;
                break;
            }
        }
        if (trial != r->n + 1) {
            snprintf(err, errlen, "%s:%d: trial %d of %s %s seed %d out of order", csv_path, lineno, trial, lname, mname, seed);
            rc = -1;
            break;
        }
        r->best[r->n] = best;
        r->gflops[r->n] = gf;
        r->elapsed[r->n] = el;
        if (gf <= 0) r->errors++;
        r->wall_s = el;
        r->n++;
    }
    fclose(f);
    return rc < 0 ? -1 : n;
}

/* mkdir -p: 0 on success (also when it exists). */
static int make_dirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--trials T] [--seeds S] [--layers LIST] [--models LIST] [--out DIR]\n"
            "          [--time-limit-per-run SEC] [--early-stop N] [--batch N] [--device D]\n"
            "          [--keep-dbs | --db-dir DIR] [--resume]\n"
            "  --trials T               measurements per run (default 300)\n"
            "  --seeds S                seeds 1..S per layer and model (default 3)\n"
            "  --layers LIST            comma-separated, by name or index (default all):",
            argv0);
    for (int i = 0; i < NLAYERS; i++) fprintf(stderr, " %s", layers[i].name);
    fprintf(stderr, "\n"
                    "  --models LIST            comma-separated among random, xgb, gnn (default all)\n"
                    "  --out DIR                where the CSV and markdown go (default bench/tune_curves/results)\n"
                    "  --time-limit-per-run SEC stop a run after SEC seconds (default: none)\n"
                    "  --early-stop N           mt_tune's early stop (default 0: never)\n"
                    "  --batch N                configs per round (default mt_tune's, 8)\n"
                    "  --device D               opencl:N, cuda:N or N (default: the first device)\n"
                    "  --keep-dbs               keep each run's records database (default: deleted after the run)\n"
                    "  --db-dir DIR             keep them in DIR as LAYER_MODEL_SEED.db\n"
                    "  --resume                 keep the runs already in DIR/tune_curves.csv and do the missing ones\n"
                    "  --templates LIST         templates to tune (default direct,depthwise,gemm, those of the committed\n"
                    "                           curves; \"\" for every template)\n");
}

int main(int argc, char **argv) {
    int trials = 300, nseeds = 3, early_stop = 0, batch = 0, keep_dbs = 0, resume = 0;
    double time_limit = 0;
    const char *outdir = "bench/tune_curves/results", *device = NULL, *layer_list = NULL, *model_list = NULL, *db_dir = NULL;
    /* The templates the committed curves were measured with: a resumed CSV
     * must keep them (kvec came later; --templates "" for all). */
    const char *templates = "direct,depthwise,gemm";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--trials") && has) trials = atoi(argv[++i]);
        else if (!strcmp(a, "--seeds") && has) nseeds = atoi(argv[++i]);
        else if (!strcmp(a, "--layers") && has) layer_list = argv[++i];
        else if (!strcmp(a, "--models") && has) model_list = argv[++i];
        else if (!strcmp(a, "--out") && has) outdir = argv[++i];
        else if (!strcmp(a, "--time-limit-per-run") && has) time_limit = atof(argv[++i]);
        else if (!strcmp(a, "--early-stop") && has) early_stop = atoi(argv[++i]);
        else if (!strcmp(a, "--batch") && has) batch = atoi(argv[++i]);
        else if (!strcmp(a, "--device") && has) device = argv[++i];
        else if (!strcmp(a, "--keep-dbs")) keep_dbs = 1;
        else if (!strcmp(a, "--db-dir") && has) db_dir = argv[++i];
        else if (!strcmp(a, "--resume")) resume = 1;
        else if (!strcmp(a, "--templates") && has) templates = argv[++i];
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(argv[0]);
            return 0;
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (trials < 1 || nseeds < 1 || batch < 0 || time_limit < 0) {
        usage(argv[0]);
        return 2;
    }
    int lsel[NLAYERS], msel[NMODELS], nl = NLAYERS, nm = NMODELS;
    for (int i = 0; i < NLAYERS; i++) lsel[i] = i;
    for (int i = 0; i < NMODELS; i++) msel[i] = i;
    char bad[512];
    if (layer_list) {
        const char *names[NLAYERS];
        for (int i = 0; i < NLAYERS; i++) names[i] = layers[i].name;
        if ((nl = parse_list(layer_list, names, NLAYERS, lsel, bad, sizeof bad)) <= 0) {
            fprintf(stderr, "tune_curves: unknown layer '%s'\n", nl < 0 ? bad : layer_list);
            usage(argv[0]);
            return 2;
        }
    }
    if (model_list && (nm = parse_list(model_list, models, NMODELS, msel, bad, sizeof bad)) <= 0) {
        fprintf(stderr, "tune_curves: unknown cost model '%s'\n", nm < 0 ? bad : model_list);
        usage(argv[0]);
        return 2;
    }

    /* The device's fingerprint labels every row (and decides what --resume may keep). */
    char fp[32];
    {
        mt_device *d = NULL;
        char err[1024];
        mt_device_params dp = mt_device_default_params();
        if (mt_device_open(device, &dp, &d, err, sizeof err) != MT_OK) {
            fprintf(stderr, "tune_curves: %s\n", err);
            return 1;
        }
        snprintf(fp, sizeof fp, "%s", mt_device_get_info(d)->fingerprint);
        mt_device_close(d);
    }
    /* Fresh databases in a private temporary directory, or in --db-dir. */
    const char *tmp = getenv("TMPDIR");
    char tmpdir[1024];
    if (db_dir) {
        snprintf(tmpdir, sizeof tmpdir, "%s", db_dir);
        keep_dbs = 1;
        if (make_dirs(tmpdir) != 0) {
            fprintf(stderr, "tune_curves: cannot create %s: %s\n", tmpdir, strerror(errno));
            return 1;
        }
    } else {
        snprintf(tmpdir, sizeof tmpdir, "%s/mtgpu-curves-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(tmpdir)) {
            fprintf(stderr, "tune_curves: cannot make a temporary directory: %s\n", strerror(errno));
            return 1;
        }
    }
    if (make_dirs(outdir) != 0) {
        fprintf(stderr, "tune_curves: cannot create %s: %s\n", outdir, strerror(errno));
        rmdir(tmpdir);
        return 1;
    }
    char csv_path[1024], md_path[1024];
    snprintf(csv_path, sizeof csv_path, "%s/tune_curves.csv", outdir);
    snprintf(md_path, sizeof md_path, "%s/tune_curves.md", outdir);
    int nruns = nseeds * nl * nm;
    run *runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs) {
        fprintf(stderr, "tune_curves: out of memory\n");
        return 1;
    }
    int done_runs = 0;
    if (resume) {
        char err[4096];
        done_runs = load_runs(csv_path, fp, trials, nseeds, lsel, nl, msel, nm, runs, nruns, err, sizeof err);
        if (done_runs < 0) {
            fprintf(stderr, "tune_curves: --resume: %s\n", err);
            return 1;
        }
        fprintf(stderr, "tune_curves: resuming: %d of %d runs already in %s\n", done_runs, nruns, csv_path);
    }
    int resumed_runs = done_runs;
    FILE *csv = NULL;
    if (resume && done_runs > 0) {
        csv = fopen(csv_path, "a");
    } else if ((csv = fopen(csv_path, "w")) != NULL) {
        fprintf(csv, "layer,model,seed,trial,gflops_best,gflops,elapsed_s,device\n");
        fflush(csv);
    }
    if (!csv) {
        fprintf(stderr, "tune_curves: cannot write %s: %s\n", csv_path, strerror(errno));
        if (!db_dir) rmdir(tmpdir);
        return 1;
    }

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    mt_device_info dev = {0};
    int have_dev = 0, rc = 0;
    double t_start = (double)time(NULL);
    fprintf(stderr, "tune_curves: %d runs (%d layer%s x %d model%s x %d seed%s), %d trials each; databases in %s\n", nruns, nl, nl == 1 ? "" : "s",
            nm, nm == 1 ? "" : "s", nseeds, nseeds == 1 ? "" : "s", trials, tmpdir);
    /* Seed, then layer, then model: the models' runs of one seed and layer are adjacent. */
    for (int s = 0; s < nseeds && !stop_requested; s++) {
        for (int li = 0; li < nl && !stop_requested; li++) {
            for (int mi = 0; mi < nm && !stop_requested; mi++) {
                int have = 0;
                for (int i = 0; i < resumed_runs; i++) have |= runs[i].layer == lsel[li] && runs[i].model == msel[mi] && runs[i].seed == s + 1;
                if (have) continue;
                run *r = &runs[done_runs];
                r->layer = lsel[li];
                r->model = msel[mi];
                r->seed = s + 1;
                r->best = calloc((size_t)trials, sizeof *r->best);
                r->gflops = calloc((size_t)trials, sizeof *r->gflops);
                r->elapsed = calloc((size_t)trials, sizeof *r->elapsed);
                if (!r->best || !r->gflops || !r->elapsed) {
                    fprintf(stderr, "tune_curves: out of memory\n");
                    return 1;
                }
                char err[2048];
                mt_task task = {.count = 1};
                if (mt_workload_parse(layers[r->layer].workload, &task.wl, err, sizeof err) != MT_OK) {
                    fprintf(stderr, "tune_curves: %s\n", err);
                    return 1;
                }
                task.flops = r->flops = mt_workload_flops(&task.wl);
                char db_path[1100];
                snprintf(db_path, sizeof db_path, "%s/%s_%s_%d.db", tmpdir, layers[r->layer].name, models[r->model], r->seed);
                remove_db(db_path); /* a fresh database: a run cut short before left its records */
                progress_ctx ctx = {.r = r, .cap = trials};
                mt_tune_params tp = mt_tune_default_params();
                tp.trials = trials;
                tp.cost_model = models[r->model];
                tp.seed = (uint64_t)r->seed;
                tp.early_stop = early_stop;
                /* The search alone: a default config measured first would put
                 * every model's curve at the default's speed from trial 1. */
                tp.start_from_default = 0;
                tp.templates = templates;
                if (batch > 0) tp.batch = batch;
                tp.time_limit_s = time_limit;
                tp.db_path = db_path;
                tp.measurer.device = device;
                tp.stop = &stop_requested;
                tp.progress = on_progress;
                tp.user = &ctx;
                mt_tune_summary sum;
                mt_status st = mt_tune(&task, 1, &tp, &sum, err, sizeof err);
                done_runs++;
                if (st != MT_OK) {
                    fprintf(stderr, "tune_curves: %s %s seed %d: %s\n", layers[r->layer].name, models[r->model], r->seed, err);
                    r->failed = 1;
                    rc = 1;
                } else {
                    r->wall_s = sum.wall_s;
                    if (!have_dev) dev = sum.device;
                    have_dev = 1;
                    if (sum.ntasks > 0) snprintf(r->best_template, sizeof r->best_template, "%s", sum.tasks[0].best_template);
                    mt_tune_summary_free(&sum);
                }
                if (!keep_dbs) remove_db(db_path);
                if (stop_requested && r->n < trials) {
                    /* Cut short by Ctrl-C: not a run of its own length; --resume redoes it. */
                    fprintf(stderr, "tune_curves: %s %s seed %d interrupted after %d trials; not kept\n", layers[r->layer].name,
                            models[r->model], r->seed, r->n);
                    free(r->best);
                    free(r->gflops);
                    free(r->elapsed);
                    memset(r, 0, sizeof *r);
                    done_runs--;
                    break;
                }
                for (int t = 0; t < r->n; t++)
                    fprintf(csv, "%s,%s,%d,%d,%.4f,%.4f,%.3f,%s\n", layers[r->layer].name, models[r->model], r->seed, t + 1, r->best[t],
                            r->gflops[t], r->elapsed[t], fp);
                fflush(csv);
                fprintf(stderr, "[%d/%d] %-11s %-6s seed %d: %d trials (%d failed), best %.1f GFLOP/s (%s) in %.0f s\n", done_runs, nruns,
                        layers[r->layer].name, models[r->model], r->seed, r->n, r->errors, r->n ? r->best[r->n - 1] : 0.0,
                        r->best_template[0] ? r->best_template : "-", r->wall_s);
            }
        }
    }
    if (keep_dbs) fprintf(stderr, "tune_curves: databases kept in %s\n", tmpdir);
    else rmdir(tmpdir);
    int measured_runs = done_runs - resumed_runs;
    fclose(csv);
    if (stop_requested) {
        fprintf(stderr, "tune_curves: interrupted after %d of %d runs; the summary covers those\n", done_runs, nruns);
        rc = 1;
    }

    /* Summary: whole or not at all (the CSV above is the resumable log). */
    mt__atomic_file mdf;
    char werr[1024];
    if (mt__atomic_open(&mdf, md_path, werr, sizeof werr) != MT_OK) {
        fprintf(stderr, "tune_curves: %s\n", werr);
        return 1;
    }
    FILE *md = mdf.f;
    int cps[NCHECK + 1], ncp = 0;
    for (int c = 0; c < NCHECK; c++)
        if (checkpoints[c] < trials) cps[ncp++] = checkpoints[c];
    cps[ncp++] = trials;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(md, "# Tuning curves: best GFLOP/s found against measurements, per cost model\n\n");
    fprintf(md, "Generated %s by `bench/tune_curves/run.sh` (`bench_tune_curves --trials %d --seeds %d", date, trials, nseeds);
    if (layer_list) fprintf(md, " --layers %s", layer_list);
    if (model_list) fprintf(md, " --models %s", model_list);
    if (time_limit > 0) fprintf(md, " --time-limit-per-run %g", time_limit);
    if (early_stop) fprintf(md, " --early-stop %d", early_stop);
    if (batch) fprintf(md, " --batch %d", batch);
    if (resume) fprintf(md, " --resume");
    fprintf(md, " --templates %s", templates && *templates ? templates : "\"\"");
    fprintf(md, "`): %d runs", done_runs);
    if (resumed_runs > 0) fprintf(md, " (%d from earlier sittings in the CSV, %d measured now in %.0f s)", resumed_runs, measured_runs, (double)time(NULL) - t_start);
    else fprintf(md, " in %.0f s", (double)time(NULL) - t_start);
    fprintf(md, " of the %d selected.\n", nruns);
    if (have_dev) fprintf(md, "Device: %s (%s), driver %s, fingerprint %s.\n", dev.name, dev.platform, dev.driver, fp);
    else fprintf(md, "Device fingerprint %s.\n", fp);
    fprintf(md, "\nEach run tunes one convolution alone with `mt_tune` (every template that accepts it) on a fresh records\n"
                "database, without the default-config first measurement (the search alone picks every config); a trial\n"
                "is one measurement (failed ones included). Cells: mean over seeds of the best GFLOP/s found\n"
                "after that many trials (min-max in brackets). \"To 90%%\": trials until a run first reached 90%% of the best\n"
                "GFLOP/s any run found on that layer, mean over the runs that reached it (how many did). Curves:\n"
                "`tune_curves.png` (bench/tune_curves/plot.py), data: `tune_curves.csv` (its elapsed_s includes compile time, and\n"
                "compiled kernels are cached across runs, so compare the models by trial, not by time).\n\n");
    fprintf(md, "| layer | model |");
    for (int c = 0; c < ncp; c++) fprintf(md, " @%d |", cps[c]);
    fprintf(md, " to 90%% | runs short of %d trials |\n|---|---|", trials);
    for (int c = 0; c < ncp; c++) fprintf(md, "---|");
    fprintf(md, "---|---|\n");
    printf("%-11s %-6s", "layer", "model");
    for (int c = 0; c < ncp; c++) {
        char h[16];
        snprintf(h, sizeof h, "@%d", cps[c]);
        printf(" %8s", h);
    }
    printf(" %12s\n", "to 90%");
    for (int li = 0; li < nl; li++) {
        int l = lsel[li];
        double layer_best = 0;
        for (int i = 0; i < done_runs; i++)
            if (runs[i].layer == l && runs[i].n > 0 && runs[i].best[runs[i].n - 1] > layer_best) layer_best = runs[i].best[runs[i].n - 1];
        double mean_at[NMODELS][NCHECK + 1] = {{0}};
        for (int mi = 0; mi < nm; mi++) {
            int m = msel[mi];
            int k = 0, short_runs = 0, reached = 0;
            double sum_reach = 0;
            double sum[NCHECK + 1] = {0}, lo[NCHECK + 1], hi[NCHECK + 1];
            for (int c = 0; c < ncp; c++) lo[c] = 1e300, hi[c] = 0;
            for (int i = 0; i < done_runs; i++) {
                const run *r = &runs[i];
                if (r->layer != l || r->model != m || r->failed) continue;
                k++;
                if (r->n < trials) short_runs++;
                for (int c = 0; c < ncp; c++) {
                    double b = best_at(r, cps[c]);
                    sum[c] += b;
                    if (b < lo[c]) lo[c] = b;
                    if (b > hi[c]) hi[c] = b;
                }
                for (int t = 0; t < r->n; t++)
                    if (layer_best > 0 && r->best[t] >= 0.9 * layer_best) {
                        sum_reach += t + 1;
                        reached++;
                        break;
                    }
            }
            if (k == 0) continue;
            fprintf(md, "| %s | %s |", layers[l].label, models[m]);
            printf("%-11s %-6s", layers[l].name, models[m]);
            for (int c = 0; c < ncp; c++) {
                mean_at[mi][c] = sum[c] / k;
                fprintf(md, " %.1f (%.1f-%.1f) |", sum[c] / k, lo[c], hi[c]);
                printf(" %8.1f", sum[c] / k);
            }
            char reach[32];
            if (reached) snprintf(reach, sizeof reach, "%.0f (%d/%d)", sum_reach / reached, reached, k);
            else snprintf(reach, sizeof reach, "never (0/%d)", k);
            fprintf(md, " %s | %d |\n", reach, short_runs);
            printf(" %12s\n", reach);
        }
        /* The models side by side: ratio of the means, the first selected model over the others. */
        for (int mi = 1; mi < nm; mi++) {
            fprintf(md, "| %s | %s / %s |", layers[l].label, models[msel[mi]], models[msel[0]]);
            for (int c = 0; c < ncp; c++) {
                if (mean_at[0][c] > 0) fprintf(md, " %.2fx |", mean_at[mi][c] / mean_at[0][c]);
                else fprintf(md, " - |");
            }
            fprintf(md, " | |\n");
        }
    }
    fprintf(md, "\nFor scale, oneDNN (\"dnnl any\", 2.6.3) on the 2-core AMD EPYC development machine "
                "(2026-11-29):");
    for (int li = 0; li < nl; li++) fprintf(md, "%s %s %.0f GFLOP/s", li ? ";" : "", layers[lsel[li]].name, layers[lsel[li]].onednn_gflops);
    fprintf(md, ".\n");
    if (mt__atomic_commit(&mdf, werr, sizeof werr) != MT_OK) {
        fprintf(stderr, "tune_curves: %s\n", werr);
        return 1;
    }
    printf("wrote %s and %s\n", csv_path, md_path);
    for (int i = 0; i < nruns; i++) {
        free(runs[i].best);
        free(runs[i].gflops);
        free(runs[i].elapsed);
    }
    free(runs);
    return rc;
}
