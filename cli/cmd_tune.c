/* mtgpu tune: tune a network's convolutions, or one workload, on the device. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mtgpu/costmodel.h"
#include "mtgpu/refine.h"
#include "mtgpu/template.h"
#include "mtgpu/tuner.h"
#include "strbuf.h"

/* Trials per task when --trials is not given, and the default time limit:
 * together they keep `mtgpu tune resnet50` within 30 minutes on 2 cores. */
#define DEFAULT_TRIALS_PER_TASK 32
#define DEFAULT_TIME_LIMIT_S 1680

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig) {
    if (stop_requested) {
        /* Second Ctrl-C: stop now. */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_requested = 1;
}

static void help(void) {
    printf("usage: mtgpu tune TARGET [--trials N] [--cost-model M] [--model FILE] [--adapt-steps N] [--adapt-lr R]\n"
           "                  [--device D] [--db PATH] [--seed S] [--time-limit SEC] [--batch N] [--early-stop N]\n"
           "                  [--timeout SEC] [--batch-size N] [--templates LIST] [--refine K] [--json]\n"
           "\n"
           "Tunes every convolution of a network (TARGET = resnet18, resnet34, resnet50, vgg16,\n"
           "mobilenet_v2, squeezenet1_1) or one workload (TARGET = n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1)\n"
           "on the device, storing every measurement in the records database as it is taken.\n"
           "Rerunning with the same database resumes: measured configs count towards --trials.\n"
           "\n"
           "  --trials N        total measurements over all tasks (default %d per task)\n"
           "  --cost-model M    the model guiding simulated annealing: xgb (XGBoost on loop features,\n"
           "                    the default), gnn (graph network on the kernel's loop nest, learnt from\n"
           "                    the task's records), gnn-shared, mlp; gnn-meta (a meta-trained --model,\n"
           "                    adapted to each task's records as it was meta-trained to be), gnn-transfer\n"
           "                    (a pooled-trained --model, fine-tuned on the records); or random\n"
           "  --model FILE      the model file of gnn-meta or gnn-transfer ('mtgpu train [--meta]');\n"
           "                    with gnn, gnn-shared or mlp: fine-tuned as gnn-transfer\n"
           "  --adapt-steps N   gnn-transfer: Adam steps per update (default %d)\n"
           "  --adapt-lr R      gnn-transfer: their step size (default %g)\n"
           "  --device D        opencl:N, cuda:N or N (default: the first device)\n"
           "  --db PATH         records database (default $MTGPU_DB or ~/.cache/mtgpu/tuning.db)\n"
           "  --seed S          search seed (default 1)\n"
           "  --time-limit SEC  stop starting new rounds after SEC seconds (default %d; 0: none)\n"
           "  --batch N         configs per round (default 8)\n"
           "  --early-stop N    stop a task's template after N trials without improvement (default 64; 0: never)\n"
           "  --timeout SEC     per measurement, after which the kernel counts as hung (default 20,\n"
           "                    plus 4x its compile time for the first launch's code generation)\n"
           "  --batch-size N    the network's batch size (default 1)\n"
           "  --templates LIST  comma-separated templates to tune (direct, depthwise, gemm, kvec;\n"
           "                    default: every template that accepts a task)\n"
           "  --refine K        for a network, then time each convolution's K fastest records and its\n"
           "                    default config inside the network and keep the fastest there as a\n"
           "                    preference (mtgpu refine; default %d, 0: skip)\n"
           "  --json            one JSON object per measurement, then a summary object (and a refine object)\n"
           "\n"
           "Ctrl-C stops after the measurement in flight and prints the summary; a second Ctrl-C exits at once.\n",
           DEFAULT_TRIALS_PER_TASK, mt_costmodel_default_params().gnn_adapt_steps, mt_costmodel_default_params().gnn_adapt_lr,
           DEFAULT_TIME_LIMIT_S, mt_refine_default_params().candidates);
}

typedef struct {
    int json;
    int tty;
    double last_print;
} progress_ctx;

static void short_workload(const mt_workload *wl, char *buf, size_t len) {
    snprintf(buf, len, "%dx%dx%d k%d %dx%d/%d", wl->c, wl->h, wl->w, wl->k, wl->r, wl->s, wl->stride_h);
}

static void print_progress(const mt_tune_progress *p, void *user) {
    progress_ctx *ctx = user;
    if (ctx->json) {
        for (int i = 0; i < p->nrecords; i++) {
            const mt_record *r = &p->records[i];
            char wtext[256];
            mt_workload_format(&r->wl, wtext, sizeof wtext);
            mt_strbuf sb = {0};
            mt__sb_printf(&sb, "{\"type\": \"record\", \"task\": %d, \"workload\": ", p->task);
            mt__sb_json_str(&sb, wtext);
            mt__sb_append(&sb, ", \"template\": ");
            mt__sb_json_str(&sb, r->template_name);
            mt__sb_append(&sb, ", \"config\": ");
            mt__sb_json_str(&sb, r->config);
            double gf = r->median_ms > 0 ? mt_workload_flops(&r->wl) / (r->median_ms * 1e6) : 0;
            mt__sb_printf(&sb, ", \"ms\": %.6g, \"gflops\": %.4g, \"status\": ", r->median_ms, gf);
            mt__sb_json_str(&sb, mt_status_name(r->status));
            mt__sb_printf(&sb, ", \"trials_done\": %d, \"trials_total\": %d, \"network_ms\": %.6g}", p->trials_done, p->trials_total,
                          p->network_ms);
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
        }
        fflush(stdout);
        return;
    }
    if (p->task < 0) {
        if (p->trials_done > 0) printf("resuming: %d measurements already in the database\n", p->trials_done);
        return;
    }
    const mt_tune_task_result *t = &p->tasks[p->task];
    char ws[96];
    short_workload(&t->wl, ws, sizeof ws);
    double task_gf = t->best_ms > 0 ? t->flops / (t->best_ms * 1e6) : 0;
    char eta[32] = "?";
    if (p->eta_s >= 0) snprintf(eta, sizeof eta, "%d:%02d", (int)(p->eta_s / 60), (int)fmod(p->eta_s, 60));
    char net[32] = "-";
    if (p->network_ms > 0) snprintf(net, sizeof net, "%.2f ms", p->network_ms);
    if (ctx->tty) {
        printf("\r\033[K[%4d/%d] task %2d/%d %-22s %-9s best %7.1f GFLOP/s | network %s | ETA %s", p->trials_done, p->trials_total, p->task + 1,
               p->ntasks, ws, p->template_name, task_gf, net, eta);
    } else {
        printf("[%d/%d] task %d/%d (%s) %s: best %.4f ms, %.1f GFLOP/s; network %s; elapsed %.0f s; ETA %s\n", p->trials_done, p->trials_total,
               p->task + 1, p->ntasks, ws, p->template_name, t->best_ms, task_gf, net, p->elapsed_s, eta);
    }
    fflush(stdout);
}

static void print_summary(const mt_tune_summary *s, const char *target, int json) {
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"type\": \"summary\", \"target\": ");
        mt__sb_json_str(&sb, target);
        mt__sb_append(&sb, ", \"device\": ");
        mt__sb_json_str(&sb, s->device.name);
        mt__sb_printf(&sb, ", \"fingerprint\": \"%s\", \"trials_done\": %d, \"measured_this_run\": %d, \"resumed\": %d, \"wall_s\": %.3f, "
                           "\"network_ms\": %.6g, \"interrupted\": %s, \"timed_out\": %s, \"tasks\": [",
                      s->device.fingerprint, s->trials_done, s->measured_this_run, s->resumed, s->wall_s, s->network_ms,
                      s->interrupted ? "true" : "false", s->timed_out ? "true" : "false");
        for (int i = 0; i < s->ntasks; i++) {
            const mt_tune_task_result *t = &s->tasks[i];
            char wtext[256];
            mt_workload_format(&t->wl, wtext, sizeof wtext);
            mt__sb_append(&sb, i ? ", {\"workload\": " : "{\"workload\": ");
            mt__sb_json_str(&sb, wtext);
            mt__sb_printf(&sb, ", \"count\": %d, \"flops\": %.6g, \"trials\": %d, \"errors\": %d, \"best_ms\": %.6g, \"gflops\": %.4g, \"template\": ",
                          t->count, t->flops, t->trials, t->errors, t->best_ms, t->best_ms > 0 ? t->flops / (t->best_ms * 1e6) : 0);
            mt__sb_json_str(&sb, t->best_template);
            mt__sb_append(&sb, ", \"config\": ");
            mt__sb_json_str(&sb, t->best_config);
            mt__sb_append(&sb, "}");
        }
        mt__sb_append(&sb, "]}");
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
        return;
    }
    printf("\n%-4s %-44s %5s %6s %6s %10s %9s %s\n", "task", "workload", "count", "trials", "errors", "best ms", "GFLOP/s", "template");
    for (int i = 0; i < s->ntasks; i++) {
        const mt_tune_task_result *t = &s->tasks[i];
        char wtext[256];
        mt_workload_format(&t->wl, wtext, sizeof wtext);
        printf("%-4d %-44s %5d %6d %6d %10.4f %9.1f %s\n", i, wtext, t->count, t->trials, t->errors, t->best_ms,
               t->best_ms > 0 ? t->flops / (t->best_ms * 1e6) : 0, t->best_template[0] ? t->best_template : "-");
    }
    printf("\n%s on %s (%s): %d measurements (%d this run, %d resumed) in %.0f s%s\n", target, s->device.name, s->device.fingerprint, s->trials_done,
           s->measured_this_run, s->resumed, s->wall_s, s->interrupted ? " — interrupted" : s->timed_out ? " — time limit reached" : "");
    if (s->network_ms > 0) printf("estimated network convolution time (sum of best time x count): %.3f ms\n", s->network_ms);
    else printf("estimated network convolution time: unknown (some task has no valid config yet)\n");
}

int mt_cmd_tune(int argc, char **argv) {
    enum {
        O_TRIALS, O_MODEL, O_MODEL_FILE, O_ASTEPS, O_ALR, O_DEVICE, O_DB, O_SEED, O_TIME, O_BATCH, O_EARLY, O_TIMEOUT, O_BSIZE, O_TEMPLATES, O_REFINE,
        O_JSON, O_COUNT
    };
    mt_opt opts[O_COUNT] = {
        [O_TRIALS] = {.name = "trials", .short_name = 'n', .takes_value = 1},
        [O_MODEL] = {.name = "cost-model", .takes_value = 1},
        [O_MODEL_FILE] = {.name = "model", .takes_value = 1},
        [O_ASTEPS] = {.name = "adapt-steps", .takes_value = 1},
        [O_ALR] = {.name = "adapt-lr", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_DB] = {.name = "db", .takes_value = 1},
        [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_TIME] = {.name = "time-limit", .takes_value = 1},
        [O_BATCH] = {.name = "batch", .takes_value = 1},
        [O_EARLY] = {.name = "early-stop", .takes_value = 1},
        [O_TIMEOUT] = {.name = "timeout", .takes_value = 1},
        [O_BSIZE] = {.name = "batch-size", .takes_value = 1},
        [O_TEMPLATES] = {.name = "templates", .takes_value = 1},
        [O_REFINE] = {.name = "refine", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int npos, want_help;
    int rc = mt_opt_parse("tune", argc, argv, opts, O_COUNT, pos, 1, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        help();
        return MT_EXIT_OK;
    }
    if (npos != 1) {
        fprintf(stderr, "mtgpu tune: expected one TARGET, a network name or a workload (see 'mtgpu tune --help')\n");
        return MT_EXIT_USAGE;
    }
    mt_tune_params tp = mt_tune_default_params();
    long long v;
    long long batch_size = 1;
    if (opts[O_BSIZE].given && (batch_size = mt_opt_int("tune", &opts[O_BSIZE], 1, 4096)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SEED].given) {
        if ((v = mt_opt_int("tune", &opts[O_SEED], 0, (long long)1 << 62)) < 0) return MT_EXIT_USAGE;
        tp.seed = (uint64_t)v;
    }
    tp.time_limit_s = DEFAULT_TIME_LIMIT_S;
    if (opts[O_TIME].given) {
        if ((v = mt_opt_int("tune", &opts[O_TIME], 0, 100000000)) < 0) return MT_EXIT_USAGE;
        tp.time_limit_s = (double)v;
    }
    if (opts[O_BATCH].given) {
        if ((v = mt_opt_int("tune", &opts[O_BATCH], 1, 1024)) < 0) return MT_EXIT_USAGE;
        tp.batch = (int)v;
    }
    if (opts[O_EARLY].given) {
        if ((v = mt_opt_int("tune", &opts[O_EARLY], 0, 100000000)) < 0) return MT_EXIT_USAGE;
        tp.early_stop = (int)v;
    }
    if (opts[O_TIMEOUT].given) {
        if ((v = mt_opt_int("tune", &opts[O_TIMEOUT], 1, 86400)) < 0) return MT_EXIT_USAGE;
        tp.measurer.timeout_s = (double)v;
    }
    if (opts[O_MODEL].given) {
        const char *m = opts[O_MODEL].value;
        int known = strcmp(m, "random") == 0;
        for (int i = 0; i < mt_costmodel_kind_count(); i++)
            if (strcmp(m, mt_costmodel_kind_at(i)) == 0 && strcmp(m, "random") != 0) known = 1;
        if (!known) {
            fprintf(stderr, "mtgpu tune: unknown cost model '%s' (cost models: xgb, gnn, gnn-shared, mlp, gnn-meta, gnn-transfer, random)\n", m);
            return MT_EXIT_USAGE;
        }
        tp.cost_model = m;
    }
    int file_kind = strcmp(tp.cost_model, "gnn-meta") == 0 || strcmp(tp.cost_model, "gnn-transfer") == 0;
    if (opts[O_MODEL_FILE].given) {
        if (strncmp(tp.cost_model, "gnn", 3) != 0 && strcmp(tp.cost_model, "mlp") != 0) {
            fprintf(stderr, "mtgpu tune: --model needs --cost-model gnn-meta, gnn-transfer, gnn, gnn-shared or mlp\n");
            return MT_EXIT_USAGE;
        }
        tp.cost_model_file = opts[O_MODEL_FILE].value;
    } else if (file_kind) {
        fprintf(stderr, "mtgpu tune: --cost-model %s needs --model FILE (from 'mtgpu train%s')\n", tp.cost_model,
                strcmp(tp.cost_model, "gnn-meta") == 0 ? " --meta" : "");
        return MT_EXIT_USAGE;
    }
    if ((opts[O_ASTEPS].given || opts[O_ALR].given) && (!opts[O_MODEL_FILE].given || strcmp(tp.cost_model, "gnn-meta") == 0)) {
        fprintf(stderr, "mtgpu tune: --adapt-steps and --adapt-lr are for fine-tuning a --model file (gnn-transfer); gnn-meta adapts with "
                        "the inner procedure stored in its model file\n");
        return MT_EXIT_USAGE;
    }
    if (opts[O_ASTEPS].given) {
        if ((v = mt_opt_int("tune", &opts[O_ASTEPS], 1, 100000)) < 0) return MT_EXIT_USAGE;
        tp.gnn_adapt_steps = (int)v;
    }
    if (opts[O_ALR].given) {
        double d;
        if (mt_opt_double("tune", &opts[O_ALR], 1e-9, 1, &d) < 0) return MT_EXIT_USAGE;
        tp.gnn_adapt_lr = d;
    }
    mt_refine_params rp = mt_refine_default_params();
    if (opts[O_REFINE].given) {
        if ((v = mt_opt_int("tune", &opts[O_REFINE], 0, MT_REFINE_MAX_SETS - 1)) < 0) return MT_EXIT_USAGE;
        rp.candidates = (int)v;
    }
    tp.db_path = opts[O_DB].value;
    tp.measurer.device = opts[O_DEVICE].value;
    if (opts[O_TEMPLATES].given) {
        char terr[256];
        if (mt_tune_check_templates(opts[O_TEMPLATES].value, terr, sizeof terr) != MT_OK) {
            fprintf(stderr, "mtgpu tune: --templates: %s (templates:", terr);
            for (int i = 0; i < mt_template_count(); i++) fprintf(stderr, " %s", mt_template_name(mt_template_at(i)));
            fprintf(stderr, ")\n");
            return MT_EXIT_USAGE;
        }
        tp.templates = opts[O_TEMPLATES].value;
    }

    /* TARGET: a network, else a workload. */
    char err[2048];
    mt_task *tasks = NULL;
    int ntasks = 0;
    mt_task single;
    const char *target = pos[0];
    if (strchr(target, '=')) {
        mt_workload wl;
        if (mt_workload_parse(target, &wl, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu tune: %s\n", err);
            return MT_EXIT_USAGE;
        }
        single = (mt_task){.wl = wl, .count = 1, .flops = mt_workload_flops(&wl)};
        ntasks = 1;
    } else {
        mt_network *net = NULL;
        mt_status st = mt_network_create(target, (int)batch_size, 0, &net, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu tune: %s\n", err);
            return st == MT_NOT_FOUND || st == MT_RANGE || st == MT_INVALID_ARG ? MT_EXIT_USAGE : MT_EXIT_FAIL;
        }
        st = mt_network_tasks(net, &tasks, &ntasks);
        mt_network_free(net);
        if (st != MT_OK || ntasks == 0) {
            fprintf(stderr, "mtgpu tune: %s has no convolution tasks (%s)\n", target, mt_status_str(st));
            mt_tasks_free(tasks);
            return MT_EXIT_FAIL;
        }
    }
    tp.trials = DEFAULT_TRIALS_PER_TASK * ntasks;
    if (opts[O_TRIALS].given) {
        if ((v = mt_opt_int("tune", &opts[O_TRIALS], 1, 100000000)) < 0) {
            mt_tasks_free(tasks);
            return MT_EXIT_USAGE;
        }
        tp.trials = (int)v;
    }
    progress_ctx pc = {.json = opts[O_JSON].given, .tty = isatty(STDOUT_FILENO)};
    tp.progress = print_progress;
    tp.user = &pc;
    tp.stop = &stop_requested;
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    if (!pc.json)
        printf("tuning %s: %d task%s, %d trials, cost model %s%s\n", target, ntasks, ntasks == 1 ? "" : "s", tp.trials, tp.cost_model,
               tp.time_limit_s > 0 ? "" : ", no time limit");
    fflush(stdout);
    mt_tune_summary sum;
    mt_status st = mt_tune(tasks ? tasks : &single, ntasks, &tp, &sum, err, sizeof err);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (pc.tty && !pc.json) printf("\n");
    int tasks_of_network = tasks != NULL;
    mt_tasks_free(tasks);
    if (st != MT_OK) fprintf(stderr, "mtgpu tune: %s\n", err);
    if (sum.tasks) print_summary(&sum, target, pc.json);
    int interrupted = sum.interrupted;
    mt_tune_summary_free(&sum);
    if (st != MT_OK) return MT_EXIT_FAIL;
    /* A network's convolutions are then chosen inside the network. */
    if (tasks_of_network && rp.candidates > 0 && !interrupted)
        return mt_cli_refine_network(target, (int)batch_size, tp.db_path, tp.measurer.device, &rp, pc.json, 1);
    return MT_EXIT_OK;
}
