/* bench/template_space: how good are the template spaces on this device?
 *
 * For two ResNet-50 layers (1x1 64->256 and 3x3 64->64 at 56x56), samples
 * random valid configs of every template that accepts the layer, builds,
 * checks and times each, and writes the best / median / worst GFLOP/s per
 * template, with the best as a fraction of the device's measured and nominal
 * peak. Writes OUT/template_space.csv (every config) and OUT/template_space.md.
 *
 * With --known FILE it also measures, in the same run, the configs listed
 * there (one "WORKLOAD TEMPLATE CONFIG" per line, '#' comments): the best
 * configs that directed searches of the spaces found, so the table shows what
 * the spaces contain beside what random sampling finds.
 *
 *   bench_template_space [--configs N] [--known FILE] [--device D] [--out DIR] [--seed S] */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "file.h"
#include "mtgpu/device.h"
#include "program.h"
#include "measure.h"
#include "measurer.h"
#include "template.h"

static const struct {
    const char *label;
    const char *workload;
} layers[] = {
    {"resnet50 1x1 64->256 @56", "n=1,c=64,h=56,w=56,k=256,r=1,s=1"},
    {"resnet50 3x3 64->64 @56", "n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1"},
};
#define NLAYERS (int)(sizeof layers / sizeof layers[0])

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int main(int argc, char **argv) {
    int nconfigs = 200;
    const char *device_spec = NULL, *outdir = "bench/template_space/results", *known = NULL;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--configs") && i + 1 < argc) nconfigs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device_spec = argv[++i];
        else if (!strcmp(argv[i], "--known") && i + 1 < argc) known = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) outdir = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: %s [--configs N] [--known FILE] [--device D] [--out DIR] [--seed S]\n", argv[0]);
            return 2;
        }
    }
    if (nconfigs < 1) nconfigs = 1;
    char err[2048];
    mt_device *dev = NULL;
    mt_device_params dp = mt_device_default_params();
    if (mt_device_open(device_spec, &dp, &dev, err, sizeof err) != MT_OK) {
        fprintf(stderr, "template_space: %s\n", err);
        return 1;
    }
    const mt_device_info *di = mt_device_get_info(dev);
    double measured_peak = 0;
    if (mt_device_measure_peak(dev, &measured_peak, err, sizeof err) != MT_OK) fprintf(stderr, "template_space: peak: %s\n", err);
    /* The nominal figure: the device's own estimate (cores x clock x FMA
     * lanes); MTGPU_PEAK_GFLOPS overrides. */
    double nominal_peak = getenv("MTGPU_PEAK_GFLOPS") ? atof(getenv("MTGPU_PEAK_GFLOPS")) : di->peak_gflops;
    mkdir(outdir, 0755);
    char path[1024];
    /* The CSV is a log, flushed after each batch so that a killed run keeps
     * its rows; the report appears whole at the end or not at all. */
    snprintf(path, sizeof path, "%s/template_space.csv", outdir);
    FILE *csv = fopen(path, "w");
    snprintf(path, sizeof path, "%s/template_space.md", outdir);
    mt__atomic_file mdf;
    if (!csv || mt__atomic_open(&mdf, path, err, sizeof err) != MT_OK) {
        fprintf(stderr, "template_space: cannot write to %s: %s\n", outdir, csv ? err : strerror(errno));
        return 1;
    }
    FILE *md = mdf.f;
    fprintf(csv, "layer,workload,template,config,status,median_ms,gflops,max_rel_err,build_s\n");
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(md, "# Template spaces on %s\n\n", di->name);
    fprintf(md, "Generated %s by `bench/template_space/run.sh` (`bench_template_space --configs %d --seed %llu`).\n", date, nconfigs, seed);
    fprintf(md, "%d random valid configs per template and layer, each built, checked against the CPU reference and timed\n", nconfigs);
    fprintf(md, "(median of >= 3 runs; compiled in parallel, timed one at a time in the measurement worker). Device: %s (%s), driver %s. Peak: measured %.0f GFLOP/s (FMA microkernel), nominal %.0f GFLOP/s.\n\n",
            di->name, di->platform, di->driver, measured_peak, nominal_peak);
    fprintf(md, "| layer | template | measured | failed | best GFLOP/s | median | worst | best %% of measured peak | best %% of nominal peak | best config |\n");
    fprintf(md, "|---|---|---|---|---|---|---|---|---|---|\n");
    printf("%-28s %-9s %5s %5s %8s %8s %8s %7s %7s\n", "layer", "template", "ok", "fail", "best", "median", "worst", "%meas", "%nom");
    int rc = 0;
    /* Compiles run in parallel (one thread per core) and timing one kernel at a
     * time in the measurement worker, as when tuning. */
    mt_measurer_params mpar = mt_measurer_default_params();
    mpar.device = device_spec;
    mpar.measure.min_time_ms = 20;
    mpar.measure.max_repeats = 10;
    mt_measurer *meas = NULL;
    if (mt_measurer_start(&mpar, &meas, NULL, err, sizeof err) != MT_OK) {
        fprintf(stderr, "template_space: %s\n", err);
        mt__atomic_abort(&mdf);
        return 1;
    }
    mt_device_limits lim = mt_device_get_limits(dev);
    enum { BATCH = 8 };
    for (int l = 0; l < NLAYERS; l++) {
        mt_workload wl;
        if (mt_workload_parse(layers[l].workload, &wl, err, sizeof err) != MT_OK) {
            mt__atomic_abort(&mdf);
            return 1;
        }
        for (int ti = 0; ti < mt_template_count(); ti++) {
            const mt_template *t = mt_template_at(ti);
            if (!mt_template_accepts(t, &wl)) continue;
            mt_space sp;
            if (mt_template_space(t, &wl, &sp) != MT_OK) continue;
            double *gf = calloc((size_t)nconfigs, sizeof *gf);
            char best_cfg[1024] = "";
            int ok = 0, failed = 0, draws = 0;
            uint64_t rng = seed * 7919 + (uint64_t)ti * 104729 + (uint64_t)l;
            while (ok + failed < nconfigs && draws < 200 * nconfigs) {
                mt_config cfgs[BATCH];
                int n = 0;
                while (n < BATCH && ok + failed + n < nconfigs && draws < 200 * nconfigs) {
                    mt_space_random(&sp, &rng, &cfgs[n]);
                    draws++;
                    if (mt_template_check(t, &wl, &sp, &cfgs[n], &lim, err, sizeof err) == MT_OK) n++;
                }
                mt_measurer_result res[BATCH];
                if (n == 0) break;
                if (mt_measurer_measure_batch(meas, &wl, t, &sp, cfgs, n, res, err, sizeof err) != MT_OK)
                    fprintf(stderr, "template_space: batch: %s\n", err);
                for (int j = 0; j < n; j++) {
                    const mt_measure_result *r = &res[j].m;
                    char ctext[1024];
                    mt_config_format(&sp, &cfgs[j], ctext, sizeof ctext);
                    fprintf(csv, "\"%s\",\"%s\",%s,\"%s\",%s,%.6f,%.3f,%.3g,%.3f\n", layers[l].label, layers[l].workload, mt_template_name(t),
                            ctext, mt_status_name(r->status), r->median_ms, r->gflops, r->max_rel_err, r->build_s);
                    if (r->status == MT_OK) {
                        if (ok == 0 || r->gflops > gf[0]) snprintf(best_cfg, sizeof best_cfg, "%s", ctext);
                        gf[ok++] = r->gflops;
                        qsort(gf, (size_t)ok, sizeof *gf, cmp_desc);
                    } else {
                        failed++;
                        fprintf(stderr, "template_space: %s %s: %s: %s\n", mt_template_name(t), ctext, mt_status_name(r->status), r->message);
                    }
                }
                fflush(csv);
            }
            if (failed) rc = 1; /* a valid config that fails is a bug */
            double best = ok ? gf[0] : 0, med = ok ? gf[ok / 2] : 0, worst = ok ? gf[ok - 1] : 0;
            printf("%-28s %-9s %5d %5d %8.1f %8.1f %8.2f %6.0f%% %6.0f%%\n", layers[l].label, mt_template_name(t), ok, failed, best, med, worst,
                   measured_peak > 0 ? 100 * best / measured_peak : 0, nominal_peak > 0 ? 100 * best / nominal_peak : 0);
            fprintf(md, "| %s | %s | %d | %d | %.1f | %.1f | %.2f | %.0f%% | %.0f%% | `%s` |\n", layers[l].label, mt_template_name(t), ok, failed, best,
                    med, worst, measured_peak > 0 ? 100 * best / measured_peak : 0, nominal_peak > 0 ? 100 * best / nominal_peak : 0, best_cfg);
            fflush(stdout);
            free(gf);
            mt_space_free(&sp);
        }
    }
    if (known) {
        FILE *kf = fopen(known, "r");
        if (!kf) {
            fprintf(stderr, "template_space: cannot read %s\n", known);
            rc = 1;
        } else {
            fprintf(md, "\nConfigs found by directed searches of the spaces (`%s`), measured in the same run:\n\n", known);
            fprintf(md, "| workload | template | status | GFLOP/s | %% of measured peak | %% of nominal peak | config |\n|---|---|---|---|---|---|---|\n");
            char line[4096];
            while (fgets(line, sizeof line, kf)) {
                char wtext[512], tname[64], ctext[2048];
                if (line[0] == '#' || sscanf(line, "%511s %63s %2047s", wtext, tname, ctext) != 3) continue;
                mt_workload wl;
                const mt_template *t = mt_template_find(tname);
                mt_space sp;
                mt_config cfg;
                if (mt_workload_parse(wtext, &wl, err, sizeof err) != MT_OK || !t || mt_template_space(t, &wl, &sp) != MT_OK) {
                    fprintf(stderr, "template_space: bad known line: %s", line);
                    rc = 1;
                    continue;
                }
                mt_measurer_result res;
                if (mt_config_parse(&sp, ctext, &cfg, err, sizeof err) != MT_OK) {
                    fprintf(stderr, "template_space: known config not in the space: %s\n", err);
                    rc = 1;
                } else {
                    mt_measurer_measure_batch(meas, &wl, t, &sp, &cfg, 1, &res, err, sizeof err);
                    const mt_measure_result *r = &res.m;
                    printf("known %-40s %-9s %8.1f GFLOP/s %s\n", wtext, tname, r->gflops, mt_status_name(r->status));
                    fprintf(md, "| `%s` | %s | %s | %.1f | %.0f%% | %.0f%% | `%s` |\n", wtext, tname, mt_status_name(r->status), r->gflops,
                            measured_peak > 0 ? 100 * r->gflops / measured_peak : 0, nominal_peak > 0 ? 100 * r->gflops / nominal_peak : 0, ctext);
                    if (r->status != MT_OK) rc = 1;
                }
                mt_space_free(&sp);
            }
            fclose(kf);
        }
    }
    mt_measurer_stop(meas);
    fprintf(md, "\nReference (oneDNN 2.6.3 on the 2-core AMD EPYC development machine, 2026-11-29): oneDNN runs these layers at about 227 and 238 GFLOP/s.\n");
    fclose(csv);
    if (mt__atomic_commit(&mdf, err, sizeof err) != MT_OK) {
        fprintf(stderr, "template_space: %s\n", err);
        rc = 1;
    }
    mt_device_close(dev);
    return rc;
}
