/* mtgpu tune: tune a network's convolutions, or one workload, on the device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "costmodel.h"
#include "refine.h"
#include "template.h"
#include "mtgpu/tuner.h"
#include "strbuf.h"
#ifdef MTGPU_HAVE_MPI
#include "mpi_tune.h"
#endif

/* Trials per task when --trials is not given, and the default time limit:
 * together they keep `mtgpu tune resnet50` within 30 minutes on 2 cores. */
#define DEFAULT_TRIALS_PER_TASK 32
#define DEFAULT_TIME_LIMIT_S 1680

static void help(void) {
    printf("usage: mtgpu tune TARGET [--trials N] [--cost-model M] [--model FILE] [--adapt-steps N] [--adapt-lr R]\n"
           "                  [--device D[,D...] | --device all [--per-device-records]] [--db PATH | --no-db] [--seed S] [--time-limit SEC] [--batch N]\n"
           "                  [--early-stop N] [--timeout SEC] [--measure warm|cold] [--batch-size N] [--templates LIST] [--refine K]\n"
           "                  [--json]\n"
           "                  [--simulate DB [--simulate-device FP]]\n"
           "\n"
           "Tunes every convolution of a network (TARGET = resnet18, resnet34, resnet50, vgg16,\n"
           "mobilenet_v2, squeezenet1_1) or one workload (TARGET = n=1,c=64,h=56,w=56,k=64,r=3,s=3,pad=1)\n"
           "on the device, storing every measurement in the records database as it is taken.\n"
           "Rerunning with the same database resumes: measured configs count towards --trials.\n"
           "\n"
           "  --trials N        total measurements over all tasks (default %d per task)\n"
           "  --cost-model M    the model guiding simulated annealing: gnn-meta (the default: a meta-trained\n"
           "                    graph network, adapted to each task's records as it was meta-trained to\n"
           "                    be; xgb where no model file is found), xgb (XGBoost on loop features),\n"
           "                    gnn (graph network on the kernel's loop nest, learnt from the task's\n"
           "                    records alone), gnn-shared, mlp, gnn-transfer (a pooled-trained model,\n"
           "                    fine-tuned on the records); or random\n"
           "  --model FILE      the model file of gnn-meta or gnn-transfer ('mtgpu train [--meta]'; default:\n"
           "                    the shipped opencl_gnn_meta.model or opencl_gnn_pooled.model, from\n"
           "                    $MTGPU_MODEL_DIR, the source tree's data/ or the installed share/mtgpu);\n"
           "                    with gnn, gnn-shared or mlp: fine-tuned as gnn-transfer\n"
           "  --adapt-steps N   gnn-transfer: Adam steps per update (default %d)\n"
           "  --adapt-lr R      gnn-transfer: their step size (default %g)\n"
           "  --device D        opencl:N, cuda:N or N (default: the first device); a comma-separated list\n"
           "                    (opencl:0,opencl:1) or all (every device of the first device's backend;\n"
           "                    opencl:all, cuda:all) times each round's configs on every device at once,\n"
           "                    one timing worker per device, compiler processes shared; each config is\n"
           "                    timed once. Devices tune one record set together only when they share a\n"
           "                    fingerprint ('mtgpu devices'): a list that mixes fingerprints is refused\n"
           "  --per-device-records  with a mixed list: tune each fingerprint's devices into records of\n"
           "                    their own, one fingerprint after the other\n"
           "  --db PATH         records database (default $MTGPU_DB or ~/.cache/mtgpu/tuning.db); a missing\n"
           "                    file is created, its directory must exist\n"
           "  --no-db           store no records and resume from none (no refinement either)\n"
           "  --seed S          search seed (default 1)\n"
           "  --time-limit SEC  stop starting new rounds after SEC seconds (default %d; 0: none)\n"
           "  --batch N         configs per round (default 8)\n"
           "  --early-stop N    stop a task's template after N trials without improvement (default 64; 0: never)\n"
           "  --timeout SEC     per measurement, after which the kernel counts as hung (default 20,\n"
           "                    plus 4x its compile time for the first launch's code generation)\n"
           "  --measure M       cold (the default): before every timed run take the weights out of the\n"
           "                    caches, as a network's pass finds them (weight-heavy configs, e.g.\n"
           "                    Winograd's on 14x14 layers, run up to 2x slower there than back to back);\n"
           "                    records say measured-cold, and a cold tuning resumes from cold records\n"
           "                    only. warm: back-to-back runs, the weights left in the caches. Devices\n"
           "                    that cannot evict (GPUs) time warm\n"
           "  --batch-size N    the network's batch size (default 1)\n"
           "  --templates LIST  comma-separated templates to tune (direct, depthwise, gemm, kvec, wino,\n"
           "                    dwrow, stem; default: every template that accepts a task)\n"
           "  --refine K        for a network, then time each convolution's K fastest records and its\n"
           "                    default config inside the network and keep the fastest there as a\n"
           "                    preference (mtgpu refine; default %d, 0: skip)\n"
           "  --json            one JSON object per measurement, then a summary object (and a refine object)\n"
           "  --simulate DB     replay: answer each measurement from the records DB holds instead of the\n"
           "                    device (no device, no worker: seconds, for comparing cost models and\n"
           "                    seeds). The search proposes only configs recorded for the task and\n"
           "                    template, each comes back with its recorded time and status, and a task\n"
           "                    ends when its recorded configs are used up. Its records, marked with\n"
           "                    source replay:FINGERPRINT, go to --db PATH (a database of their own) or,\n"
           "                    with --no-db, nowhere; one of the two is required. No refinement.\n"
           "  --simulate-device FP  the recorded device to replay (default: the one with the most\n"
           "                    records of these tasks; when two tie, the error lists them)\n"
           "\n"
           "Under mpirun (or srun) with more than one rank, rank 0 runs the search and the cost model and\n"
           "writes the database; every other rank compiles and times the configs it is dealt on its own\n"
           "--device and sends the results back (docs/distributed.md).\n"
           "\n"
           "Ctrl-C stops after the measurement in flight and prints the summary; a second Ctrl-C exits at once,\n"
           "ending the workers too. Exit status: 0 success, 1 failure, 2 bad usage, 130 interrupted.\n",
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
    if (p->note) {
        fflush(stdout);
        fprintf(stderr, "mtgpu tune: note: %s\n", p->note);
    }
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

/* The summary of the run; replay: the recording replayed, or NULL. */
static void print_summary(const mt_tune_summary *s, const char *target, const char *replay, int json) {
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"type\": \"summary\", \"target\": ");
        mt__sb_json_str(&sb, target);
        mt__sb_append(&sb, ", \"replay\": ");
        if (replay) mt__sb_json_str(&sb, replay);
        else mt__sb_append(&sb, "null");
        mt__sb_append(&sb, ", \"device\": ");
        mt__sb_json_str(&sb, s->device.name);
        mt__sb_printf(&sb, ", \"fingerprint\": \"%s\", \"trials_done\": %d, \"measured_this_run\": %d, \"resumed\": %d, \"wall_s\": %.3f, "
                           "\"network_ms\": %.6g, \"cold\": %s, \"interrupted\": %s, \"timed_out\": %s, \"search_s\": %.4f, \"measure_s\": %.4f, "
                           "\"commit_s\": %.4f, \"model_s\": %.4f, \"tasks\": [",
                      s->device.fingerprint, s->trials_done, s->measured_this_run, s->resumed, s->wall_s, s->network_ms,
                      s->cold ? "true" : "false", s->interrupted ? "true" : "false", s->timed_out ? "true" : "false", s->search_s, s->measure_s, s->commit_s, s->model_s);
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
    const char *stopped = s->interrupted ? " — interrupted" : s->timed_out ? " — time limit reached" : "";
    if (replay)
        printf("\n%s replayed from %s, device %s (%s): %d measurements (%d this run, %d resumed) in %.2f s%s\n", target, replay, s->device.name,
               s->device.fingerprint, s->trials_done, s->measured_this_run, s->resumed, s->wall_s, stopped);
    else
        printf("\n%s on %s (%s): %d measurements (%d this run, %d resumed) in %.0f s%s\n", target,
               s->device.name[0] ? s->device.name : "an unopened device", s->device.fingerprint[0] ? s->device.fingerprint : "-",
               s->trials_done, s->measured_this_run, s->resumed, s->wall_s, stopped);
    if (s->network_ms > 0)
        printf("estimated network convolution time (sum of best time x count): %.3f ms%s\n", s->network_ms,
               s->cold ? " (timed cold: each layer's weights out of the caches, as in the network)" : "");
    else printf("estimated network convolution time: unknown (some task has no valid config yet)\n");
}

/* What the command line asks for. */
typedef struct {
    const char *target;
    mt_tune_params tp;  /* trials < 0: the default for the target */
    mt_refine_params rp;
    int batch_size;
    int json;
    char model_path[4096]; /* the shipped model file when --model is not given */
    mt_cli_devices devices; /* --device as a list (n = 0: one spec, or none) */
    char device_list[MT_CLI_MAX_DEVICES * 32]; /* the devices tuned together, comma-separated */
    int mpi_size;       /* > 1: rank 0 of an MPI job of that many ranks */
    int mpi_clean;      /* 0: a rank was lost with a measurement in flight */
} tune_request;

/* 1 when m names a cost model (or random search); prints why not. */
static int known_cost_model(const char *m) {
    int known = strcmp(m, "random") == 0;
    for (int i = 0; i < mt_costmodel_kind_count(); i++)
        if (strcmp(m, mt_costmodel_kind_at(i)) == 0 && strcmp(m, "random") != 0) known = 1;
    if (!known) fprintf(stderr, "mtgpu tune: unknown cost model '%s' (cost models: xgb, gnn, gnn-shared, mlp, gnn-meta, gnn-transfer, random)\n", m);
    return known;
}

/* Options that exclude or need each other; prints the first conflict. */
static int check_combinations(const mt_opt *simulate, const mt_opt *sim_device, const mt_opt *device, const mt_opt *timeout, const mt_opt *db,
                              const mt_opt *no_db, const mt_opt *refine) {
    const char *why = NULL;
    if (sim_device->given && !simulate->given) why = "--simulate-device needs --simulate";
    else if (db->given && no_db->given) why = "--db and --no-db exclude each other";
    else if (simulate->given && (device->given || timeout->given)) why = "--simulate opens no device: no --device or --timeout";
    else if ((simulate->given || no_db->given) && refine->given) why = "--refine times records on the device: not with --simulate or --no-db";
    else if (simulate->given && !db->given && !no_db->given)
        why = "--simulate stores its records in --db PATH (a database of their own, never the default one) or, with --no-db, nowhere";
    if (why) fprintf(stderr, "mtgpu tune: %s\n", why);
    return why == NULL;
}

/* Parses the options into *rq. Returns -1 to go on, else the exit status. */
static int parse_tune_options(int argc, char **argv, tune_request *rq) {
    enum { O_TRIALS, O_MODEL, O_MODEL_FILE, O_ASTEPS, O_ALR, O_DEVICE, O_DB, O_NO_DB, O_SEED, O_TIME, O_BATCH, O_EARLY, O_TIMEOUT, O_BSIZE, O_TEMPLATES, O_REFINE, O_MEASURE,
           O_JSON, O_SIMULATE, O_SIM_DEVICE, O_PER_DEVICE, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_TRIALS] = {.name = "trials", .short_name = 'n', .takes_value = 1},
        [O_MODEL] = {.name = "cost-model", .takes_value = 1},
        [O_MODEL_FILE] = {.name = "model", .takes_value = 1},
        [O_ASTEPS] = {.name = "adapt-steps", .takes_value = 1},
        [O_ALR] = {.name = "adapt-lr", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_DB] = {.name = "db", .takes_value = 1},
        [O_NO_DB] = {.name = "no-db"},
        [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_TIME] = {.name = "time-limit", .takes_value = 1},
        [O_BATCH] = {.name = "batch", .takes_value = 1},
        [O_EARLY] = {.name = "early-stop", .takes_value = 1},
        [O_TIMEOUT] = {.name = "timeout", .takes_value = 1},
        [O_BSIZE] = {.name = "batch-size", .takes_value = 1},
        [O_TEMPLATES] = {.name = "templates", .takes_value = 1},
        [O_REFINE] = {.name = "refine", .takes_value = 1},
        [O_MEASURE] = {.name = "measure", .takes_value = 1},
        [O_JSON] = {.name = "json"},
        [O_SIMULATE] = {.name = "simulate", .takes_value = 1},
        [O_SIM_DEVICE] = {.name = "simulate-device", .takes_value = 1},
        [O_PER_DEVICE] = {.name = "per-device-records"},
    };
    const char *pos[1];
    int rc = mt_cli_begin("tune", argc, argv, opts, O_COUNT, pos, 1, 1, "one TARGET, a network name or a workload", help);
    if (rc >= 0) return rc;
    rq->target = pos[0];
    mt_tune_params *tp = &rq->tp;
    *tp = mt_tune_default_params();
    tp->trials = -1;
    tp->time_limit_s = DEFAULT_TIME_LIMIT_S;
    rq->rp = mt_refine_default_params();
    rq->batch_size = 1;
    if (mt_opt_set_int("tune", &opts[O_BSIZE], 1, 4096, &rq->batch_size) || mt_opt_set_u64("tune", &opts[O_SEED], 0, (long long)1 << 62, &tp->seed) ||
        mt_opt_set_secs("tune", &opts[O_TIME], 0, 100000000, &tp->time_limit_s) || mt_opt_set_int("tune", &opts[O_BATCH], 1, 1024, &tp->batch) ||
        mt_opt_set_int("tune", &opts[O_EARLY], 0, 100000000, &tp->early_stop) ||
        mt_opt_set_secs("tune", &opts[O_TIMEOUT], 1, 86400, &tp->measurer.timeout_s) ||
        mt_opt_set_int("tune", &opts[O_TRIALS], 1, 100000000, &tp->trials) ||
        mt_opt_set_int("tune", &opts[O_REFINE], 0, MT_REFINE_MAX_SETS - 1, &rq->rp.candidates))
        return MT_EXIT_USAGE;
    if (opts[O_MODEL].given) {
        if (!known_cost_model(opts[O_MODEL].value)) return MT_EXIT_USAGE;
        tp->cost_model = opts[O_MODEL].value;
    } else if (opts[O_MODEL_FILE].given) {
        /* The default: the meta-trained model (bench/meta_table/results), from
         * --model or the shipped file; XGBoost where neither is there. */
        tp->cost_model = "gnn-meta";
    } else if (mt_cli_default_model("gnn-meta", rq->model_path, sizeof rq->model_path) == 0) {
        tp->cost_model = "gnn-meta";
        tp->cost_model_file = rq->model_path;
    } else {
        fprintf(stderr, "mtgpu tune: no shipped %s in $MTGPU_MODEL_DIR, the source tree's data/ or the installed share/mtgpu: "
                        "guiding the search with xgb\n", mt_cli_model_file_name("gnn-meta"));
    }
    int file_kind = strcmp(tp->cost_model, "gnn-meta") == 0 || strcmp(tp->cost_model, "gnn-transfer") == 0;
    if (opts[O_MODEL_FILE].given) {
        if (strncmp(tp->cost_model, "gnn", 3) != 0 && strcmp(tp->cost_model, "mlp") != 0) {
            fprintf(stderr, "mtgpu tune: --model needs --cost-model gnn-meta, gnn-transfer, gnn, gnn-shared or mlp\n");
            return MT_EXIT_USAGE;
        }
        tp->cost_model_file = opts[O_MODEL_FILE].value;
    } else if (file_kind && !tp->cost_model_file) {
        /* The shipped model of this kind (data/README.md), where one is found. */
        if (mt_cli_default_model(tp->cost_model, rq->model_path, sizeof rq->model_path) != 0) {
            fprintf(stderr,
                    "mtgpu tune: --cost-model %s needs --model FILE (from 'mtgpu train%s'); no shipped %s was found in $MTGPU_MODEL_DIR, "
                    "the source tree's data/ or the installed share/mtgpu\n",
                    tp->cost_model, strcmp(tp->cost_model, "gnn-meta") == 0 ? " --meta" : "", mt_cli_model_file_name(tp->cost_model));
            return MT_EXIT_FAIL;
        }
        tp->cost_model_file = rq->model_path;
    }
    if ((opts[O_ASTEPS].given || opts[O_ALR].given) && (!tp->cost_model_file || strcmp(tp->cost_model, "gnn-meta") == 0)) {
        fprintf(stderr, "mtgpu tune: --adapt-steps and --adapt-lr are for fine-tuning a --model file (gnn-transfer); gnn-meta adapts with "
                        "the inner procedure stored in its model file\n");
        return MT_EXIT_USAGE;
    }
    if (mt_opt_set_int("tune", &opts[O_ASTEPS], 1, 100000, &tp->gnn_adapt_steps) ||
        mt_opt_set_double("tune", &opts[O_ALR], 1e-9, 1, &tp->gnn_adapt_lr))
        return MT_EXIT_USAGE;
    if (!check_combinations(&opts[O_SIMULATE], &opts[O_SIM_DEVICE], &opts[O_DEVICE], &opts[O_TIMEOUT], &opts[O_DB], &opts[O_NO_DB], &opts[O_REFINE]))
        return MT_EXIT_USAGE;
    if (opts[O_MEASURE].given) {
        if (strcmp(opts[O_MEASURE].value, "warm") != 0 && strcmp(opts[O_MEASURE].value, "cold") != 0) {
            fprintf(stderr, "mtgpu tune: --measure takes warm or cold, not '%s'\n", opts[O_MEASURE].value);
            return MT_EXIT_USAGE;
        }
        if (opts[O_SIMULATE].given) {
            fprintf(stderr, "mtgpu tune: --simulate replays recorded times: no --measure\n");
            return MT_EXIT_USAGE;
        }
        tp->measurer.measure.cold = strcmp(opts[O_MEASURE].value, "cold") == 0;
    }
    tp->db_path = opts[O_DB].value;
    tp->no_db = opts[O_NO_DB].given;
    tp->simulate_db = opts[O_SIMULATE].value;
    tp->simulate_device = opts[O_SIM_DEVICE].value;
    int drc = mt_cli_device_list("tune", opts[O_DEVICE].value, &rq->devices);
    if (drc != MT_EXIT_OK) return drc;
    tp->measurer.device = opts[O_DEVICE].value;
    if (rq->devices.ngroups > 1 && !opts[O_PER_DEVICE].given) {
        fprintf(stderr, "mtgpu tune: the devices of --device %s have %d different fingerprints:\n", opts[O_DEVICE].value, rq->devices.ngroups);
        mt_cli_device_print_groups(stderr, &rq->devices);
        fprintf(stderr, "mtgpu tune: devices tune one record set together only when they share a fingerprint (their kernels' speed "
                        "may differ); list devices of one fingerprint, or add --per-device-records to tune each fingerprint's devices "
                        "into records of their own\n");
        return MT_EXIT_USAGE;
    }
    if (rq->devices.ngroups == 1) {
        mt_cli_device_group(&rq->devices, 0, rq->device_list, sizeof rq->device_list);
        tp->measurer.device = rq->device_list;
    }
    if (opts[O_TEMPLATES].given) {
        char terr[256];
        if (mt_tune_check_templates(opts[O_TEMPLATES].value, terr, sizeof terr) != MT_OK) {
            fprintf(stderr, "mtgpu tune: --templates: %s (templates:", terr);
            for (int i = 0; i < mt_template_count(); i++) fprintf(stderr, " %s", mt_template_name(mt_template_at(i)));
            fprintf(stderr, ")\n");
            return MT_EXIT_USAGE;
        }
        tp->templates = opts[O_TEMPLATES].value;
    }
    rq->json = opts[O_JSON].given;
    return -1;
}

/* Tunes the target's tasks, Ctrl-C stopping after the measurement in
 * flight, and prints the summary. *interrupted says whether it was stopped. */
static int run_tune(tune_request *rq, const mt_cli_target *target, int *interrupted) {
    mt_tune_params *tp = &rq->tp;
    progress_ctx pc = {.json = rq->json, .tty = isatty(STDOUT_FILENO)};
    tp->progress = print_progress;
    tp->user = &pc;
    mt_cli_signals saved;
    tp->stop = mt_cli_catch_stop(&saved);
    if (!pc.json)
        printf("%s %s: %d task%s, %d trials, cost model %s%s%s%s\n", tp->simulate_db ? "replaying" : "tuning", rq->target, target->ntasks,
               target->ntasks == 1 ? "" : "s", tp->trials, tp->cost_model, tp->cost_model_file ? " from " : "",
               tp->cost_model_file ? tp->cost_model_file : "", tp->time_limit_s > 0 ? "" : ", no time limit");
    fflush(stdout);
    char err[2048];
    mt_tune_summary sum;
    mt_status st;
#ifdef MTGPU_HAVE_MPI
    if (rq->mpi_size > 1)
        st = mt_cli_mpi_tune(target->tasks, target->ntasks, tp, rq->mpi_size, &sum, &rq->mpi_clean, err, sizeof err);
    else
#endif
        st = mt_tune(target->tasks, target->ntasks, tp, &sum, err, sizeof err);
    mt_cli_release_stop(&saved);
    if (pc.tty && !pc.json) printf("\n");
    if (st != MT_OK) fprintf(stderr, "mtgpu tune: %s\n", err);
    /* A run that failed before it measured anything has no summary worth printing. */
    if (sum.tasks && (st == MT_OK || sum.measured_this_run > 0 || sum.resumed > 0)) print_summary(&sum, rq->target, tp->simulate_db, pc.json);
    *interrupted = sum.interrupted;
    mt_tune_summary_free(&sum);
    return st != MT_OK ? MT_EXIT_FAIL : *interrupted ? MT_EXIT_INTERRUPTED : MT_EXIT_OK;
}

/* One tuning run on the devices of rq->tp.measurer.device, then, for a
 * network, its refinement on the first of them. Returns the exit status. */
static int tune_and_refine(tune_request *rq, const mt_cli_target *target) {
    int interrupted = 0;
    int rc = run_tune(rq, target, &interrupted);
    if (rc != MT_EXIT_OK) return rc; /* interrupted: no refinement either */
    /* A network's convolutions are then chosen inside the network (not in a
     * replay, which has no device, nor without a database to choose from). */
    if (target->is_network && rq->rp.candidates > 0 && !interrupted && !rq->tp.simulate_db && !rq->tp.no_db && rq->mpi_size > 1) {
        fprintf(stderr, "mtgpu tune: no refinement under MPI (rank 0 may have no device): run 'mtgpu refine %s' on a machine of the "
                        "tuned device\n", rq->target);
        return MT_EXIT_OK;
    }
    if (target->is_network && rq->rp.candidates > 0 && !interrupted && !rq->tp.simulate_db && !rq->tp.no_db) {
        char first[64] = "";
        const char *dev = rq->tp.measurer.device;
        if (dev) snprintf(first, sizeof first, "%.*s", (int)strcspn(dev, ","), dev);
        return mt_cli_refine_network(rq->target, rq->batch_size, rq->tp.db_path, dev ? first : NULL, &rq->rp, rq->json, 1);
    }
    return MT_EXIT_OK;
}

int mt_cmd_tune(int argc, char **argv) {
    /* Zeroed: parse_tune_options sets only what the options name, and a
     * stale mpi_size above 1 would send to MPI ranks that do not exist. */
    tune_request rq = {0};
    int rc = parse_tune_options(argc, argv, &rq);
    if (rc >= 0) return rc;
    rq.mpi_clean = 1;
#ifdef MTGPU_HAVE_MPI
    int rank = 0, size = 1;
    int in_job = mt_cli_mpi_begin(&rank, &size);
    if (in_job < 0) return MT_EXIT_FAIL;
    if (in_job && size > 1 && (rq.devices.ngroups > 1 || rq.tp.simulate_db)) {
        if (rank == 0)
            fprintf(stderr, "mtgpu tune: under MPI each rank measures on its own --device, one fingerprint for the job: no %s\n",
                    rq.tp.simulate_db ? "--simulate" : "--per-device-records");
        mt_cli_mpi_end(1);
        return MT_EXIT_USAGE;
    }
    if (in_job && size > 1 && rank > 0) {
        rc = mt_cli_mpi_serve(&rq.tp.measurer, rank);
        mt_cli_mpi_end(1);
        return rc;
    }
    if (in_job && size == 1) mt_cli_mpi_end(1); /* one rank measures here, as without MPI */
    if (in_job && size > 1) rq.mpi_size = size;
#endif
    mt_cli_target target;
    if ((rc = mt_cli_target_open("tune", rq.target, rq.batch_size, &target)) != MT_EXIT_OK) {
#ifdef MTGPU_HAVE_MPI
        if (rq.mpi_size > 1) {
            char err[256];
            mt_tune_summary sum;
            mt_tune_params none = rq.tp;
            /* The ranks wait for work: a run with no tasks tells them to quit. */
            mt_cli_mpi_tune(NULL, 0, &none, rq.mpi_size, &sum, &rq.mpi_clean, err, sizeof err);
            mt_cli_mpi_end(1);
        }
#endif
        return rc;
    }
    if (rq.tp.trials < 0) rq.tp.trials = DEFAULT_TRIALS_PER_TASK * target.ntasks;
    /* Per-device records: each fingerprint's devices tune in turn. */
    int ngroups = rq.devices.ngroups > 1 ? rq.devices.ngroups : 1;
    for (int g = 0; g < ngroups && rc == MT_EXIT_OK; g++) {
        if (rq.devices.ngroups > 1) {
            mt_cli_device_group(&rq.devices, g, rq.device_list, sizeof rq.device_list);
            rq.tp.measurer.device = rq.device_list;
            if (!rq.json) printf("%sdevices %s (fingerprint %d of %d)\n", g ? "\n" : "", rq.device_list, g + 1, ngroups);
        }
        rc = tune_and_refine(&rq, &target);
    }
    mt_cli_target_free(&target);
#ifdef MTGPU_HAVE_MPI
    if (rq.mpi_size > 1) mt_cli_mpi_end(rq.mpi_clean);
#endif
    return rc;
}
