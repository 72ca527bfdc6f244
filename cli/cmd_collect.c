/* mtgpu collect: measure configs of generated workloads, the training data of
 * the cost models (mtgpu train). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "collect.h"
#include "strbuf.h"

static void help(void) {
    mt_collect_params d = mt_collect_default_params();
    printf("usage: mtgpu collect [--workloads M] [--first I] [--seed S] [--configs N] [--random-frac F]\n"
           "                     [--templates LIST] [--one-template] [--min-mflops X] [--max-mflops Y]\n"
           "                     [--db PATH] [--device D] [--batch N] [--timeout SEC] [--time-limit SEC]\n"
           "                     [--list] [--json]\n"
           "\n"
           "Measures N configs of each of M generated convolution workloads (the shapes of\n"
           "classification and detection networks: 1x1 to 7x7 and 1xN kernels, strides,\n"
           "dilation, groups, depthwise, batches of 1-4), per template, storing every\n"
           "measurement in the records database: training data for `mtgpu train`. The first\n"
           "share of each task's configs is drawn at random, the rest picked by XGBoost fitted\n"
           "on them. Workload I of seed S is always the same; rerunning resumes.\n"
           "\n"
           "  --workloads M     how many workloads (default %d)\n"
           "  --first I         index of the first (default 0): --first 100 --workloads 100 extends a run of 100\n"
           "  --seed S          the workload family (default %llu)\n"
           "  --configs N       measurements per workload and template (default %d)\n"
           "  --random-frac F   share of them drawn at random (default %.2g; 1: all random)\n"
           "  --templates LIST  comma-separated templates (default: every template that accepts a workload)\n"
           "  --one-template    one template per workload, taking turns, instead of each that accepts it\n"
           "  --min-mflops X    smallest workload, in useful MFLOP (default %g)\n"
           "  --max-mflops Y    largest workload (default %g)\n"
           "  --db PATH         records database (default $MTGPU_DB or ~/.cache/mtgpu/tuning.db); a missing\n"
           "                    file is created, its directory must exist\n"
           "  --device D        opencl:N, cuda:N or N (default: the first device)\n"
           "  --batch N         configs per round (default %d)\n"
           "  --timeout SEC     per measurement, after which the kernel counts as hung (default 20)\n"
           "  --time-limit SEC  stop starting new tasks after SEC seconds (default: none)\n"
           "  --list            print the workloads and exit, measuring nothing\n"
           "  --json            one JSON object per task and phase, then a summary object\n"
           "\n"
           "Ctrl-C stops after the measurement in flight; a second Ctrl-C exits at once, ending the\n"
           "workers too. Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n",
           d.count, (unsigned long long)d.gen.seed, d.configs, d.random_frac, d.gen.min_flops / 1e6, d.gen.max_flops / 1e6, d.batch);
}

typedef struct {
    int json;
} progress_ctx;

static void print_progress(const mt_collect_progress *p, void *user) {
    const progress_ctx *ctx = user;
    char wtext[256];
    mt_workload_format(&p->wl, wtext, sizeof wtext);
    if (ctx->json) {
        mt_strbuf sb = {0};
        mt__sb_printf(&sb, "{\"type\": \"task\", \"index\": %d, \"workload\": ", p->index);
        mt__sb_json_str(&sb, wtext);
        mt__sb_append(&sb, ", \"template\": ");
        mt__sb_json_str(&sb, p->template_name);
        mt__sb_append(&sb, ", \"phase\": ");
        mt__sb_json_str(&sb, p->phase);
        mt__sb_printf(&sb, ", \"records\": %d, \"errors\": %d, \"best_ms\": %.6g, \"measured_this_run\": %d, \"elapsed_s\": %.3f}", p->records,
                      p->errors, p->best_ms, p->measured_this_run, p->elapsed_s);
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
    } else {
        printf("[%d] %s %s (%s): %d records, %d errors, best %.4f ms; %d measured, %.0f s\n", p->index, wtext, p->template_name, p->phase,
               p->records, p->errors, p->best_ms, p->measured_this_run, p->elapsed_s);
    }
    fflush(stdout);
}

int mt_cmd_collect(int argc, char **argv) {
    enum { O_COUNT_, O_FIRST, O_SEED, O_CONFIGS, O_RFRAC, O_TEMPLATES, O_ONE, O_MIN, O_MAX, O_DB, O_DEVICE, O_BATCH, O_TIMEOUT, O_TIME, O_LIST,
           O_JSON, O_N };
    mt_opt opts[O_N] = {
        [O_COUNT_] = {.name = "workloads", .takes_value = 1}, [O_FIRST] = {.name = "first", .takes_value = 1},
        [O_SEED] = {.name = "seed", .takes_value = 1},        [O_CONFIGS] = {.name = "configs", .takes_value = 1},
        [O_RFRAC] = {.name = "random-frac", .takes_value = 1}, [O_TEMPLATES] = {.name = "templates", .takes_value = 1},
        [O_ONE] = {.name = "one-template"},                    [O_MIN] = {.name = "min-mflops", .takes_value = 1},
        [O_MAX] = {.name = "max-mflops", .takes_value = 1},    [O_DB] = {.name = "db", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1}, [O_BATCH] = {.name = "batch", .takes_value = 1},
        [O_TIMEOUT] = {.name = "timeout", .takes_value = 1},   [O_TIME] = {.name = "time-limit", .takes_value = 1},
        [O_LIST] = {.name = "list"},                           [O_JSON] = {.name = "json"},
    };
    int rc = mt_cli_begin("collect", argc, argv, opts, O_N, NULL, 0, 0, "no arguments", help);
    if (rc >= 0) return rc;
    mt_collect_params cp = mt_collect_default_params();
    double min_mf = cp.gen.min_flops / 1e6, max_mf = cp.gen.max_flops / 1e6;
    if (mt_opt_set_int("collect", &opts[O_COUNT_], 1, 1000000, &cp.count) || mt_opt_set_int("collect", &opts[O_FIRST], 0, 100000000, &cp.first) ||
        mt_opt_set_u64("collect", &opts[O_SEED], 0, (long long)1 << 62, &cp.gen.seed) ||
        mt_opt_set_int("collect", &opts[O_CONFIGS], 1, 100000, &cp.configs) || mt_opt_set_int("collect", &opts[O_BATCH], 1, 1024, &cp.batch) ||
        mt_opt_set_secs("collect", &opts[O_TIMEOUT], 1, 86400, &cp.measurer.timeout_s) ||
        mt_opt_set_secs("collect", &opts[O_TIME], 0, 100000000, &cp.time_limit_s) ||
        mt_opt_set_double("collect", &opts[O_RFRAC], 0, 1, &cp.random_frac) || mt_opt_set_double("collect", &opts[O_MIN], 0, 1e9, &min_mf) ||
        mt_opt_set_double("collect", &opts[O_MAX], 0, 1e9, &max_mf))
        return MT_EXIT_USAGE;
    if (opts[O_MIN].given) cp.gen.min_flops = min_mf * 1e6;
    if (opts[O_MAX].given) cp.gen.max_flops = max_mf * 1e6;
    if (!(cp.gen.max_flops > cp.gen.min_flops)) {
        fprintf(stderr, "mtgpu collect: --max-mflops must be above --min-mflops\n");
        return MT_EXIT_USAGE;
    }
    char err[2048];
    if (opts[O_TEMPLATES].given) {
        if (mt_tune_check_templates(opts[O_TEMPLATES].value, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu collect: --templates: %s\n", err);
            return MT_EXIT_USAGE;
        }
        cp.templates = opts[O_TEMPLATES].value;
    }
    cp.one_template = opts[O_ONE].given;
    cp.db_path = opts[O_DB].value;
    if (mt_cli_device_spec("collect", opts[O_DEVICE].value) != MT_EXIT_OK) return MT_EXIT_USAGE;
    cp.measurer.device = opts[O_DEVICE].value;
    int json = opts[O_JSON].given;

    if (opts[O_LIST].given) {
        for (int i = cp.first; i < cp.first + cp.count; i++) {
            mt_workload wl;
            if (mt_workload_generate(&cp.gen, i, &wl, err, sizeof err) != MT_OK) {
                fprintf(stderr, "mtgpu collect: %s\n", err);
                return MT_EXIT_FAIL;
            }
            char wtext[256];
            mt_workload_format(&wl, wtext, sizeof wtext);
            if (json) printf("{\"index\": %d, \"workload\": \"%s\", \"mflops\": %.4g}\n", i, wtext, mt_workload_flops(&wl) / 1e6);
            else printf("%d %s %.1f MFLOP\n", i, wtext, mt_workload_flops(&wl) / 1e6);
        }
        return MT_EXIT_OK;
    }

    progress_ctx pc = {.json = json};
    cp.progress = print_progress;
    cp.user = &pc;
    mt_cli_signals saved;
    cp.stop = mt_cli_catch_stop(&saved);
    if (!json)
        printf("collecting: workloads %d..%d of seed %llu, %d configs per template (%.0f%% random)\n", cp.first, cp.first + cp.count - 1,
               (unsigned long long)cp.gen.seed, cp.configs, 100 * cp.random_frac);
    fflush(stdout);
    mt_collect_summary sum;
    mt_status st = mt_collect(&cp, &sum, err, sizeof err);
    mt_cli_release_stop(&saved);
    if (st != MT_OK) fprintf(stderr, "mtgpu collect: %s\n", err);
    if (json)
        printf("{\"type\": \"summary\", \"workloads\": %d, \"tasks\": %d, \"measured_this_run\": %d, \"wall_s\": %.3f, \"fingerprint\": \"%s\", "
               "\"interrupted\": %s, \"timed_out\": %s}\n",
               sum.workloads, sum.units, sum.measured_this_run, sum.wall_s, sum.device.fingerprint, sum.interrupted ? "true" : "false",
               sum.timed_out ? "true" : "false");
    else
        printf("%d workloads, %d tasks, %d measurements this run in %.0f s on %s (%s)%s\n", sum.workloads, sum.units, sum.measured_this_run,
               sum.wall_s, sum.device.name[0] ? sum.device.name : "an unopened device", sum.device.fingerprint[0] ? sum.device.fingerprint : "-",
               sum.interrupted ? " — interrupted" : sum.timed_out ? " — time limit reached" : "");
    return st != MT_OK ? MT_EXIT_FAIL : sum.interrupted ? MT_EXIT_INTERRUPTED : MT_EXIT_OK;
}
