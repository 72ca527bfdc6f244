/* bench_cm_speed: how fast each cost model scores candidates, and the memory
 * it needs, on the machine's cores.
 *
 * For a ResNet-50 layer (3x3 64->64 at 56x56) and each template that accepts
 * it, every model kind is fitted on 200 random configs (with costs from a
 * fixed pseudo-random function of the config: the scoring speed does not
 * depend on what the weights learned), then asked to score batches of 1,000
 * and 100,000 random configs in one predict call each, as the search does
 * (the 1k rate is the median of 5 calls).
 * Reported: candidates per second (encoding or feature extraction included),
 * the fit time, the share of the large batch that the template can build
 * (the others get the invalid score; the graph models do not run their
 * network on them), the rate on a large batch of buildable configs only
 * (every candidate encoded and scored, as in a search's neighbourhoods), and
 * the peak resident memory while scoring the large random batch (VmHWM after
 * resetting it through /proc/self/clear_refs; on kernels without that it is
 * the process's peak so far, said in the output).
 *
 *   bench_cm_speed [--out DIR] [--threads N] [--models a,b,...] [--big N] [--note TEXT]
 *
 * --note adds TEXT to the markdown (say, what else the machine was running).
 *
 * Where a CUDA device is usable, the gnn, gnn-shared and mlp models score on
 * it (gnn/gnn_gpu.h; MTGPU_GNN_DEVICE=cpu forces the CPU), and a
 * second table times the GNN's scoring alone (features encoded once, 4096
 * buildable graphs scored over and over up to the large batch) on the CPU
 * (mt_gnn_score, --threads threads) and on the GPU, with the largest
 * difference between their scores. Without a device the output says why.
 *
 * Writes DIR/cm_speed.json and DIR/cm_speed.md (default bench/cm_speed/results). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "costmodel.h"
#include "file.h"
#include "gnn.h"
#include "gnn_gpu.h"
#include "graph_enc.h"
#include "template.h"
#include "mtgpu/workload.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* kB of the named /proc/self/status field, or -1. */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return (fclose(f) == 0) && ok;
}

typedef struct row {
    char model[16], tmpl[16];
    double fit_s, small_per_s, big_per_s, buildable, valid_per_s;
    long rss_before_kb, peak_kb;
    int big;
    long long params;
} row;

int main(int argc, char **argv) {
    const char *out = "bench/cm_speed/results", *models = "xgb,gnn,gnn-shared,mlp", *note = NULL;
    int threads = 2, big = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else if (strcmp(argv[i], "--models") == 0 && i + 1 < argc) models = argv[++i];
        else if (strcmp(argv[i], "--big") == 0 && i + 1 < argc) big = atoi(argv[++i]);
        else if (strcmp(argv[i], "--note") == 0 && i + 1 < argc) note = argv[++i];
        else {
            fprintf(stderr, "usage: bench_cm_speed [--out DIR] [--threads N] [--models a,b,...] [--big N] [--note TEXT]\n");
            return 2;
        }
    }
    if (threads < 1 || big < 1000) {
        fprintf(stderr, "bench_cm_speed: --threads must be >= 1 and --big >= 1000\n");
        return 2;
    }
    const char *wtext = "n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1";
    mt_workload wl;
    char err[1024];
    if (mt_workload_parse(wtext, &wl, err, sizeof err) != MT_OK) return 1;
    int can_reset = reset_peak_rss();
    row rows[32];
    int nrows = 0;
    mt_config *cfgs = malloc(sizeof *cfgs * (size_t)big), *valid = malloc(sizeof *valid * (size_t)big);
    double *scores = malloc(sizeof *scores * (size_t)big);
    if (!cfgs || !valid || !scores) return 1;
    char mlist[256];
    snprintf(mlist, sizeof mlist, "%s", models);
    for (int ti = 0; ti < mt_template_count(); ti++) {
        const mt_template *t = mt_template_at(ti);
        if (!mt_template_accepts(t, &wl)) continue;
        mt_space sp;
        if (mt_template_space(t, &wl, &sp) != MT_OK) return 1;
        enum { NTRAIN = 200 };
        mt_cm_sample train[NTRAIN];
        uint64_t rng = 7;
        for (int i = 0; i < NTRAIN; i++) {
            mt_config c;
            mt_space_random(&sp, &rng, &c);
            uint64_t h = mt_space_config_index(&sp, &c) * 0x9e3779b97f4a7c15ULL;
            train[i] = (mt_cm_sample){.wl = &wl, .tmpl = t, .space = &sp, .cfg = c, .cost_ms = 1.0 + (double)(mt_rng_next(&h) % 1000) / 100.0};
        }
        rng = 99;
        for (int i = 0; i < big; i++) mt_space_random(&sp, &rng, &cfgs[i]);
        /* A batch of buildable configs only, as a search's neighbourhoods mostly
         * are: NVALID distinct ones (the template builds them), repeated up to
         * the large batch, so every candidate is encoded and scored. */
        enum { NVALID = 4096 };
        int nvalid = 0;
        uint64_t vrng = 123;
        for (int tries = 0; nvalid < NVALID && nvalid < big && tries < 400 * NVALID; tries++) {
            mt_space_random(&sp, &vrng, &valid[nvalid]);
            if (mt_template_check(t, &wl, &sp, &valid[nvalid], NULL, NULL, 0) == MT_OK) nvalid++;
        }
        for (int i = nvalid; nvalid > 0 && i < big; i++) valid[i] = valid[i % nvalid];
        char copy[256], *save = NULL;
        snprintf(copy, sizeof copy, "%s", mlist);
        for (char *kind = strtok_r(copy, ",", &save); kind && nrows < 32; kind = strtok_r(NULL, ",", &save)) {
            mt_costmodel_params p = mt_costmodel_default_params();
            p.threads = threads;
            mt_costmodel *m = NULL;
            if (mt_costmodel_create(kind, &p, &m, err, sizeof err) != MT_OK) {
                fprintf(stderr, "bench_cm_speed: %s\n", err);
                return 1;
            }
            row *r = &rows[nrows++];
            memset(r, 0, sizeof *r);
            snprintf(r->model, sizeof r->model, "%s", kind);
            snprintf(r->tmpl, sizeof r->tmpl, "%s", mt_template_name(t));
            r->big = big;
            double t0 = now_s();
            if (mt_costmodel_fit(m, train, NTRAIN, err, sizeof err) != MT_OK) {
                fprintf(stderr, "bench_cm_speed: fit %s: %s\n", kind, err);
                return 1;
            }
            r->fit_s = now_s() - t0;
            r->params = (long long)mt_costmodel_param_count(m);
            mt_cm_query q = {&wl, t, &sp, NULL};
            /* warm-up: first-call plans and workspaces */
            if (mt_costmodel_predict(m, &q, cfgs, 100, scores, NULL, 0) != MT_OK) return 1;
            /* A 1k call takes tens of milliseconds, so one descheduling on a
             * shared machine would move it a lot: the median of 5 calls. */
            double small[5];
            for (int k = 0; k < 5; k++) {
                t0 = now_s();
                if (mt_costmodel_predict(m, &q, cfgs, 1000, scores, NULL, 0) != MT_OK) return 1;
                small[k] = 1000 / (now_s() - t0);
            }
            qsort(small, 5, sizeof small[0], cmp_double);
            r->small_per_s = small[2];
            r->rss_before_kb = status_kb("VmRSS");
            if (can_reset) reset_peak_rss();
            t0 = now_s();
            if (mt_costmodel_predict(m, &q, cfgs, big, scores, err, sizeof err) != MT_OK) {
                fprintf(stderr, "bench_cm_speed: predict %s: %s\n", kind, err);
                return 1;
            }
            r->big_per_s = big / (now_s() - t0);
            r->peak_kb = status_kb("VmHWM");
            int nb = 0;
            for (int i = 0; i < big; i++) nb += scores[i] > MT_COSTMODEL_INVALID_SCORE;
            r->buildable = (double)nb / big;
            if (nvalid > 0) {
                t0 = now_s();
                if (mt_costmodel_predict(m, &q, valid, big, scores, err, sizeof err) != MT_OK) {
                    fprintf(stderr, "bench_cm_speed: predict %s: %s\n", kind, err);
                    return 1;
                }
                r->valid_per_s = big / (now_s() - t0);
            }
            fprintf(stderr, "%-10s %-9s fit %.2f s, %8.0f/s (1k), %8.0f/s (%dk), %.0f%% buildable, %8.0f/s (%dk buildable), peak RSS %.0f MiB\n",
                    r->model, r->tmpl, r->fit_s, r->small_per_s, r->big_per_s, big / 1000, 100 * r->buildable, r->valid_per_s, big / 1000,
                    r->peak_kb / 1024.0);
            mt_costmodel_free(m);
        }
        mt_space_free(&sp);
    }
    /* the GNN's scoring alone, CPU against GPU */
    char gpu_why[2048];
    int have_gpu = mt_gnn_gpu_available(gpu_why, sizeof gpu_why) == MT_OK;
    fprintf(stderr, "GNN scoring device: %s\n", have_gpu ? gpu_why : "CPU only");
    if (!have_gpu) fprintf(stderr, "no GPU rows: %s\n", gpu_why);
    typedef struct srow {
        char tmpl[16];
        int arch;
        double cpu_per_s, gpu_per_s, maxdiff, maxabs;
    } srow;
    srow srows[16];
    int nsrows = 0;
    enum { NENC = 4096 };
    for (int ti = 0; ti < mt_template_count() && have_gpu; ti++) {
        const mt_template *t = mt_template_at(ti);
        if (!mt_template_accepts(t, &wl)) continue;
        mt_space sp;
        mt_graph_encoder *enc = NULL;
        if (mt_template_space(t, &wl, &sp) != MT_OK || mt_graph_encoder_create(t, &enc, err, sizeof err) != MT_OK) return 1;
        const mt_graph_shape *shape = mt_graph_encoder_shape(enc);
        size_t per = (size_t)shape->n_nodes * MT_GRAPH_FEATS;
        float *x = malloc(sizeof(float) * per * NENC), *sc = malloc(sizeof(float) * NENC), *sg = malloc(sizeof(float) * NENC);
        mt_gnn_sample *smp = calloc(NENC, sizeof *smp);
        if (!x || !sc || !sg || !smp) return 1;
        int nv = 0;
        uint64_t rng = 5;
        for (int tries = 0; nv < NENC && tries < 200; tries++) {
            mt_config c[256];
            int got = 0;
            for (int i = 0; i < 256; i++) mt_space_random(&sp, &rng, &c[i]);
            int room = NENC - nv < 256 ? NENC - nv : 256;
            if (mt_graph_encode_packed(enc, &wl, &sp, c, room, NULL, x + (size_t)nv * per, NULL, &got, err, sizeof err) != MT_OK) return 1;
            nv += got;
        }
        for (int i = 0; i < nv; i++) smp[i] = (mt_gnn_sample){.shape = shape, .feats = x + (size_t)i * per, .target = (float)(i % 7), .group = 0};
        for (int arch = 0; arch < 3 && nv > 0 && nsrows < 16; arch++) {
            mt_gnn_params gp = mt_gnn_default_params();
            gp.arch = (mt_gnn_arch)arch, gp.epochs = 1, gp.threads = threads;
            mt_gnn *g = NULL;
            mt_gnn_gpu_scorer *gs = NULL;
            int fitn = nv < 256 ? nv : 256;
            if (mt_gnn_create(&gp, &g, err, sizeof err) != MT_OK || mt_gnn_fit(g, smp, fitn, err, sizeof err) != MT_OK) return 1;
            if (mt_gnn_gpu_scorer_create(g, shape, &gs, err, sizeof err) != MT_OK || mt_gnn_gpu_scorer_run(gs, nv, x, sg, err, sizeof err) != MT_OK) {
                fprintf(stderr, "bench_cm_speed: GPU scorer: %s\n", err);
                mt_gnn_gpu_scorer_free(gs);
                mt_gnn_free(g);
                continue;
            }
            srow *r = &srows[nsrows++];
            snprintf(r->tmpl, sizeof r->tmpl, "%s", mt_template_name(t));
            r->arch = arch;
            int reps = (big + nv - 1) / nv;
            double t0 = now_s();
            for (int k = 0; k < reps; k++)
                if (mt_gnn_score(g, shape, nv, x, sc, err, sizeof err) != MT_OK) return 1;
            r->cpu_per_s = (double)reps * nv / (now_s() - t0);
            t0 = now_s();
            for (int k = 0; k < reps; k++)
                if (mt_gnn_gpu_scorer_run(gs, nv, x, sg, err, sizeof err) != MT_OK) {
                    fprintf(stderr, "bench_cm_speed: GPU scorer: %s\n", err);
                    return 1;
                }
            r->gpu_per_s = (double)reps * nv / (now_s() - t0);
            for (int i = 0; i < nv; i++) {
                double d = sg[i] - (double)sc[i];
                r->maxdiff = d > r->maxdiff ? d : (-d > r->maxdiff ? -d : r->maxdiff);
                r->maxabs = sc[i] > r->maxabs ? sc[i] : (-sc[i] > r->maxabs ? -sc[i] : r->maxabs);
            }
            fprintf(stderr, "scoring only: %-9s arch %d: CPU %8.0f/s, GPU %9.0f/s (x%.1f), max|gpu-cpu| %.3g (max|cpu| %.3g)\n", r->tmpl, arch,
                    r->cpu_per_s, r->gpu_per_s, r->gpu_per_s / r->cpu_per_s, r->maxdiff, r->maxabs);
            mt_gnn_gpu_scorer_free(gs);
            mt_gnn_free(g);
        }
        free(x), free(sc), free(sg), free(smp);
        mt_graph_encoder_free(enc);
        mt_space_free(&sp);
    }
    /* Each report appears whole or not at all (a temporary file renamed). */
    char path[1024], werr[1024] = "";
    mt__atomic_file jf, mdf;
    memset(&mdf, 0, sizeof mdf);
    snprintf(path, sizeof path, "%s/cm_speed.json", out);
    int opened = mt__atomic_open(&jf, path, werr, sizeof werr) == MT_OK;
    snprintf(path, sizeof path, "%s/cm_speed.md", out);
    if (opened && mt__atomic_open(&mdf, path, werr, sizeof werr) != MT_OK) {
        mt__atomic_abort(&jf);
        opened = 0;
    }
    if (!opened) {
        fprintf(stderr, "bench_cm_speed: cannot write to %s: %s\n", out, werr);
        return 1;
    }
    FILE *j = jf.f, *md = mdf.f;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(j, "{\"date\": \"%s\", \"workload\": \"%s\", \"threads\": %d, \"peak_rss_reset\": %s, \"rows\": [", date, wtext, threads,
            can_reset ? "true" : "false");
    fprintf(md, "# Cost-model scoring speed\n\nGenerated %s by `bench/cm_speed/run.sh` (`bench_cm_speed --threads %d --big %d`). Workload `%s`; "
                "each model fitted on 200 random configs, then one predict call per batch of random configs (graph encoding or "
                "feature extraction included; the 1k rate is the median of 5 calls), %d threads. Peak memory: the process's "
                "resident high-water mark while scoring the large batch%s. Buildable: the share of the large batch that the "
                "template can build; the others get the invalid score (the graph models encode and score only the buildable "
                "ones). Scored/s, buildable: a batch of buildable configs only (4096 distinct, repeated), as the search's "
                "neighbourhoods mostly are, so every candidate is encoded and scored.%s%s\n\n",
            date, threads, big, wtext, threads, can_reset ? " (reset just before it)" : " (not resettable here: the process's peak so far)",
            note ? " " : "", note ? note : "");
    fprintf(md, "| model | template | parameters | fit 200 (s) | scored/s, 1k batch | scored/s, %dk batch | buildable | scored/s, %dk buildable | peak RSS (MiB) |\n"
                "|---|---|---|---|---|---|---|---|---|\n",
            big / 1000, big / 1000);
    for (int i = 0; i < nrows; i++) {
        row *r = &rows[i];
        fprintf(j, "%s{\"model\": \"%s\", \"template\": \"%s\", \"params\": %lld, \"fit_s\": %.4f, \"per_s_1k\": %.1f, \"per_s_big\": %.1f, "
                   "\"big\": %d, \"buildable\": %.4f, \"per_s_big_buildable\": %.1f, \"rss_before_kb\": %ld, \"peak_rss_kb\": %ld}",
                i ? ", " : "", r->model, r->tmpl, r->params, r->fit_s, r->small_per_s, r->big_per_s, r->big, r->buildable, r->valid_per_s,
                r->rss_before_kb, r->peak_kb);
        char params[32];
        if (r->params >= 0) snprintf(params, sizeof params, "%lld", r->params);
        else snprintf(params, sizeof params, "-");
        fprintf(md, "| %s | %s | %s | %.2f | %.0f | %.0f | %.0f%% | %.0f | %.0f |\n", r->model, r->tmpl, params, r->fit_s, r->small_per_s,
                r->big_per_s, 100 * r->buildable, r->valid_per_s, r->peak_kb / 1024.0);
    }
    fprintf(j, "], \"gnn_device\": \"%s\", \"scoring_only\": [", have_gpu ? "gpu" : "cpu");
    for (int i = 0; i < nsrows; i++)
        fprintf(j, "%s{\"template\": \"%s\", \"arch\": %d, \"cpu_per_s\": %.1f, \"gpu_per_s\": %.1f, \"max_diff\": %.3g, \"max_abs\": %.3g}",
                i ? ", " : "", srows[i].tmpl, srows[i].arch, srows[i].cpu_per_s, srows[i].gpu_per_s, srows[i].maxdiff, srows[i].maxabs);
    fprintf(j, "]}\n");
    static const char *arch_names[] = {"gnn", "gnn-shared", "mlp"};
    if (have_gpu) {
        fprintf(md, "\nThe graph models above scored on the GPU (%s).\n\nScoring only (features encoded once; 4096 buildable graphs scored "
                    "repeatedly up to %d; CPU: mt_gnn_score on %d threads; GPU: the same weights through cuBLAS and the module's kernels):\n\n"
                    "| model | template | CPU scored/s | GPU scored/s | GPU / CPU | max abs diff | max abs score |\n|---|---|---|---|---|---|---|\n",
                gpu_why, big, threads);
        for (int i = 0; i < nsrows; i++)
            fprintf(md, "| %s | %s | %.0f | %.0f | %.1f | %.3g | %.3g |\n", arch_names[srows[i].arch], srows[i].tmpl, srows[i].cpu_per_s,
                    srows[i].gpu_per_s, srows[i].gpu_per_s / srows[i].cpu_per_s, srows[i].maxdiff, srows[i].maxabs);
        fprintf(md, "\nGoal: GNN scoring on the GPU at least 10x the CPU's candidates per second for batches of 100k.\n");
    } else {
        fprintf(md, "\nNo GPU rows: %s.\n", gpu_why);
    }
    fprintf(md, "\nGoal: at least 20,000 candidates a second on 2 cores for 1k and 100k batches; under 2 GiB while scoring 100k.\n");
    int wrote = mt__atomic_commit(&jf, werr, sizeof werr) == MT_OK;
    if (!wrote) mt__atomic_abort(&mdf);
    else wrote = mt__atomic_commit(&mdf, werr, sizeof werr) == MT_OK;
    if (!wrote) {
        fprintf(stderr, "bench_cm_speed: %s\n", werr);
        return 1;
    }
    free(cfgs);
    free(valid);
    free(scores);
    printf("wrote %s/cm_speed.md and %s/cm_speed.json\n", out, out);
    return 0;
}
