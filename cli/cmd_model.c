/* mtgpu train, mtgpu eval-model: cost models on the records of a database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "costmodel.h"
#include "dataset.h"
#include "device-info-json.h"
#include "file.h"
#include "gnn.h"
#include "mtgpu/net.h"
#include "mtgpu/records.h"
#include "strbuf.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int known_kind(const char *k) {
    for (int i = 0; i < mt_costmodel_kind_count(); i++)
        if (strcmp(k, mt_costmodel_kind_at(i)) == 0) return 1;
    return 0;
}

static int is_gnn_kind(const char *k) { return strcmp(k, "gnn") == 0 || strcmp(k, "gnn-shared") == 0 || strcmp(k, "mlp") == 0; }
/* The kinds that start from a model file. */
static int is_file_kind(const char *k) { return strcmp(k, "gnn-meta") == 0 || strcmp(k, "gnn-transfer") == 0; }

static mt_db *open_db(const char *cmd, const char *path) {
    mt_db_params dp = mt_db_default_params();
    dp.readonly = 1;
    mt_db *db = NULL;
    char err[512];
    if (mt_db_open(path, &dp, &db, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu %s: %s\n", cmd, err);
        return NULL;
    }
    return db;
}

static double parse_frac(const char *cmd, const mt_opt *o, double lo_excl, double hi) {
    char *end;
    double v = strtod(o->value, &end);
    if (*o->value == '\0' || *end || !(v > lo_excl) || v > hi) {
        fprintf(stderr, "mtgpu %s: --%s must be a number in (%g, %g], got '%s'\n", cmd, o->name, lo_excl, hi, o->value);
        return -1;
    }
    return v;
}

/* Marks workload w (text form a) as held out; 1 when the data set has it. */
static int mark_one(const mt_dataset *ds, const char *a, int *holdout) {
    char b[256];
    int found = 0;
    for (int w = 0; w < mt_dataset_nworkloads(ds); w++) {
        mt_workload_format(mt_dataset_workload(ds, w), b, sizeof b);
        if (strcmp(a, b) == 0) holdout[w] = found = 1;
    }
    return found;
}

/* Marks the workloads named in list (separated by ';') as held out: a
 * workload, or a network's name for every convolution of that network that
 * has records; returns -1 (after a message) when one is malformed, or has
 * no records and need_records is set (an evaluation on nothing). Training
 * passes 0: a network absent from one platform's records is held out by
 * being absent. */
static int mark_holdout(const char *cmd, const mt_dataset *ds, const char *list, int need_records, int *holdout) {
    char *copy = strdup(list);
    if (!copy) return -1;
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        mt_workload wl;
        char err[512], a[256];
        if (!strchr(tok, '=')) {
            /* a network: its convolutions at batch 1, 224x224 */
            mt_network *net = NULL;
            mt_task *tasks = NULL;
            int ntasks = 0, found = 0;
            if (mt_network_create(tok, 1, 224, &net, err, sizeof err) != MT_OK || mt_network_tasks(net, &tasks, &ntasks) != MT_OK) {
                fprintf(stderr, "mtgpu %s: --holdout: '%s' is neither a workload nor a network (%s)\n", cmd, tok, err);
                mt_network_free(net);
                rc = -1;
                break;
            }
            for (int i = 0; i < ntasks; i++) {
                mt_workload_format(&tasks[i].wl, a, sizeof a);
                found += mark_one(ds, a, holdout);
            }
            mt_tasks_free(tasks);
            mt_network_free(net);
            if (!found && need_records) {
                fprintf(stderr, "mtgpu %s: --holdout: no convolution of %s has records in the database\n", cmd, tok);
                rc = -1;
                break;
            }
            continue;
        }
        if (mt_workload_parse(tok, &wl, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu %s: --holdout: %s\n", cmd, err);
            rc = -1;
            break;
        }
        mt_workload_format(&wl, a, sizeof a);
        if (!mark_one(ds, a, holdout) && need_records) {
            fprintf(stderr, "mtgpu %s: --holdout: workload %s has no records in the database\n", cmd, a);
            rc = -1;
            break;
        }
    }
    free(copy);
    return rc;
}

/* ---- train ---- */

static void train_help(void) {
    mt_gnn_meta_params mp = mt_gnn_meta_default_params();
    printf("usage: mtgpu train --db PATH --out MODEL [--cost-model gnn|gnn-shared|mlp] [--device FP]\n"
           "                   [--epochs N] [--hidden N] [--layers N] [--seed S] [--holdout LIST | --holdout-frac F]\n"
           "                   [--meta [--algorithm A] [--support K] [--query Q] [--inner-steps N] [--inner-lr R]\n"
           "                           [--meta-batch T] [--outer-lr R] [--rate-lr R] [--iterations N]\n"
           "                           [--init scratch|pooled | --init-model FILE]]\n"
           "                   [--manifest FILE] [--json]\n"
           "\n"
           "Trains a GNN cost model on the measured records of a tuning database (every\n"
           "workload, template and device in it, less the held-out workloads) and writes\n"
           "a model file. Without --meta the model is pooled-trained: supervised on all\n"
           "records at once; 'mtgpu tune --cost-model gnn-transfer --model MODEL' fine-tunes\n"
           "it on each new task. With --meta it is meta-trained (MAML): each (workload,\n"
           "template, device) is a task, and the model learns initial weights from which a\n"
           "few gradient steps on a task's first measurements rank the rest of it;\n"
           "'mtgpu tune --cost-model gnn-meta --model MODEL' adapts it exactly so, and the\n"
           "file records how. 'mtgpu eval-model' measures either on held-out workloads.\n"
           "The file is written through a temporary file and a rename: MODEL is never\n"
           "left half-written.\n"
           "\n"
           "  --db PATH          tuning database (opened read-only)\n"
           "  --out MODEL        model file to write\n"
           "  --cost-model M     gnn (default), gnn-shared or mlp: the architecture\n"
           "  --device FP        only records of the device with this fingerprint\n"
           "  --epochs N         pooled training (also before --meta): passes over the records\n"
           "                     (default 30)\n"
           "  --hidden N         width (default 32)\n"
           "  --layers N         message-passing rounds (default 3)\n"
           "  --seed S           initial weights, minibatch order and task draws (default 1)\n"
           "  --holdout LIST     leave these workloads out of training, separated by ';': a\n"
           "                     workload, or a network name for all its convolutions\n"
           "  --holdout-frac F   or this share of the workloads, as 'mtgpu eval-model\n"
           "                     --holdout-frac F --seed S' holds them out\n"
           "  --meta             meta-train (MAML) instead of pooled training; then:\n"
           "  --algorithm A        fomaml (first-order MAML, one inner rate) or meta-sgd\n"
           "                       (a meta-learned inner rate per weight) (default %s)\n"
           "  --support K          configs a task adapts on per meta-iteration (default %d)\n"
           "  --query Q            configs its adapted weights are scored on (default %d)\n"
           "  --inner-steps N      gradient steps of the inner procedure (default %d)\n"
           "  --inner-lr R         their rate, or Meta-SGD's initial rates (default %g)\n"
           "  --meta-batch T       tasks per meta-iteration (default %d)\n"
           "  --outer-lr R         Adam's step size on the initial weights (default %g)\n"
           "  --rate-lr R          meta-sgd: Adam's step size on the log rates (default %g)\n"
           "  --iterations N       meta-iterations (default %d)\n"
           "  --init I             pooled (default: pooled training for --epochs first, then\n"
           "                       meta-training from its weights) or scratch (weights drawn\n"
           "                       from the seed)\n"
           "  --init-model FILE    start from this model file's weights (and architecture),\n"
           "                       e.g. a pooled model trained without the held-out workloads\n"
           "  --manifest FILE    also write a JSON manifest: the data set (path, FNV-1a 64\n"
           "                     of the file, records, tasks, held-out workloads, devices),\n"
           "                     the hyper-parameters and the date\n"
           "  --json             print the result as one JSON object\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n",
           mp.algorithm == MT_GNN_META_SGD ? "meta-sgd" : "fomaml", mp.support, mp.query, mp.inner_steps, mp.inner_lr, mp.tasks_per_batch,
           mp.outer_lr, mp.rate_lr, mp.iterations);
}

/* Meta-training progress on stderr: the mean query loss of the last 100
 * meta-iterations. */
typedef struct meta_progress {
    int total;
    double sum;
    int n;
} meta_progress;

static void on_meta_progress(int it, double qloss, void *user) {
    meta_progress *p = user;
    p->sum += qloss, p->n++;
    if ((it + 1) % 100 == 0 || it + 1 == p->total) {
        fprintf(stderr, "mtgpu train: meta-iteration %d/%d: query loss %.4f\n", it + 1, p->total, p->sum / p->n);
        p->sum = 0, p->n = 0;
    }
}

/* The manifest of a training run (--manifest): what it was trained on and how. */
static int write_manifest(const char *path, const char *db_path, const char *device, const char *out, const char *kind, int meta, const char *init,
                          const char *holdout_spec,
                          const mt_costmodel_params *cp, const mt_gnn_meta_params *mp, const mt_dataset *ds, const int *holdout,
                          const mt_cm_sample *train, int ntrain, int64_t params, double train_s) {
    char err[512], date[64], hex[32];
    uint64_t h;
    long long bytes;
    if (mt_cli_hash_file(db_path, &h, &bytes, err, sizeof err) != 0) {
        fprintf(stderr, "mtgpu train: --manifest: %s\n", err);
        return -1;
    }
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    mt_cli_utc_now(date, sizeof date);
    mt_strbuf sb = {0};
    mt__sb_printf(&sb, "{\n  \"model\": ");
    mt__sb_json_str(&sb, out);
    mt__sb_printf(&sb, ",\n  \"training\": \"%s\",\n  \"cost_model\": \"%s\",\n  \"params\": %lld,\n  \"created_utc\": \"%s\",\n  \"train_s\": %.3f,\n",
                  meta ? "meta-trained" : "pooled", kind, (long long)params, date, train_s);
    mt__sb_append(&sb, "  \"dataset\": {\n    \"path\": ");
    mt__sb_json_str(&sb, db_path);
    mt__sb_printf(&sb, ",\n    \"fnv1a64\": \"%s\",\n    \"bytes\": %lld,\n    \"records\": %d,\n    \"skipped\": %d,\n    \"device_filter\": ", hex, bytes,
                  mt_dataset_nsamples(ds), mt_dataset_skipped(ds));
    if (device) mt__sb_json_str(&sb, device);
    else mt__sb_append(&sb, "null");
    mt__sb_append(&sb, ",\n    \"device_fingerprints\": [");
    /* distinct devices, tasks (groups) of the training records */
    const mt_device_info **devs = calloc((size_t)(ntrain > 0 ? ntrain : 1), sizeof *devs);
    int *first = malloc(sizeof(int) * (size_t)(ntrain > 0 ? ntrain : 1)), *count = calloc((size_t)(ntrain > 0 ? ntrain : 1), sizeof(int));
    if (!devs || !first || !count) {
        free(devs), free(first), free(count);
        mt__sb_free(&sb);
        fprintf(stderr, "mtgpu train: out of memory\n");
        return -1;
    }
    int ndev = 0, ntask = 0;
    for (int i = 0; i < ntrain; i++) {
        int d = 0;
        while (d < ndev && devs[d] != train[i].dev) d++;
        if (d == ndev) {
            devs[ndev++] = train[i].dev;
            mt__sb_append(&sb, d ? ", " : "");
            mt__sb_json_str(&sb, train[i].dev ? train[i].dev->fingerprint : "");
        }
        int t = 0;
        while (t < ntask && !(train[first[t]].wl == train[i].wl && train[first[t]].tmpl == train[i].tmpl && train[first[t]].dev == train[i].dev)) t++;
        if (t == ntask) first[ntask++] = i;
        count[t]++;
    }
    /* the split as asked (networks by name), beside the workloads it held out of these records */
    mt__sb_printf(&sb, "],\n    \"training_records\": %d,\n    \"holdout\": ", ntrain);
    if (holdout_spec) mt__sb_json_str(&sb, holdout_spec);
    else mt__sb_append(&sb, "null");
    mt__sb_append(&sb, ",\n    \"held_out_workloads\": [");
    for (int w = 0, k = 0; w < mt_dataset_nworkloads(ds); w++) {
        if (!holdout[w]) continue;
        char text[256];
        mt_workload_format(mt_dataset_workload(ds, w), text, sizeof text);
        mt__sb_append(&sb, k++ ? ",\n      " : "\n      ");
        mt__sb_json_str(&sb, text);
    }
    /* what each device was, as the context node saw it: the cost model's device features */
    mt__sb_append(&sb, "],\n    \"devices\": [");
    for (int d = 0; d < ndev; d++) {
        if (!devs[d]) continue;
        mt__sb_append(&sb, d ? ",\n      " : "\n      ");
        mt__device_info_json(&sb, devs[d]);
    }
    mt__sb_printf(&sb, "],\n    \"tasks\": %d,\n    \"task_list\": [", ntask);
    for (int t = 0; t < ntask; t++) {
        const mt_cm_sample *x = &train[first[t]];
        char text[256];
        mt_workload_format(x->wl, text, sizeof text);
        mt__sb_append(&sb, t ? ",\n      {\"workload\": " : "\n      {\"workload\": ");
        mt__sb_json_str(&sb, text);
        mt__sb_printf(&sb, ", \"template\": \"%s\", \"device\": ", mt_template_name(x->tmpl));
        mt__sb_json_str(&sb, x->dev ? x->dev->fingerprint : "");
        mt__sb_printf(&sb, ", \"records\": %d}", count[t]);
    }
    free(devs), free(first), free(count);
    mt__sb_printf(&sb, "]\n  },\n  \"hyper_parameters\": {\"hidden\": %d, \"layers\": %d, \"seed\": %llu, \"epochs\": %d", cp->gnn_hidden,
                  cp->gnn_layers, (unsigned long long)cp->seed, cp->gnn_epochs);
    if (meta)
        mt__sb_printf(&sb,
                      ", \"algorithm\": \"%s\", \"init\": %s, \"support\": %d, \"query\": %d, \"inner_steps\": %d, \"inner_lr\": %g, "
                      "\"meta_batch\": %d, \"outer_lr\": %g, \"rate_lr\": %g, \"iterations\": %d",
                      mp->algorithm == MT_GNN_META_SGD ? "meta-sgd" : "fomaml", init, mp->support, mp->query,
                      mp->inner_steps, mp->inner_lr, mp->tasks_per_batch, mp->outer_lr, mp->rate_lr, mp->iterations);
    mt__sb_append(&sb, "}\n}\n");
    int rc = 0;
    if (sb.failed) {
        fprintf(stderr, "mtgpu train: out of memory\n");
        rc = -1;
    } else if (mt__write_file_atomic(path, sb.data, sb.len, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: --manifest: %s\n", err);
        rc = -1;
    }
    mt__sb_free(&sb);
    return rc;
}

int mt_cmd_train(int argc, char **argv) {
    enum {
        O_DB, O_OUT, O_KIND, O_DEVICE, O_EPOCHS, O_HIDDEN, O_LAYERS, O_SEED, O_HOLD, O_HOLDF, O_META, O_ALGO, O_SUPPORT, O_QUERY, O_ISTEPS,
        O_ILR, O_MBATCH, O_OLR, O_RLR, O_ITERS, O_INIT, O_INIT_MODEL, O_MANIFEST, O_JSON, O_COUNT
    };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},         [O_OUT] = {.name = "out", .short_name = 'o', .takes_value = 1},
        [O_KIND] = {.name = "cost-model", .takes_value = 1}, [O_DEVICE] = {.name = "device", .takes_value = 1},
        [O_EPOCHS] = {.name = "epochs", .takes_value = 1}, [O_HIDDEN] = {.name = "hidden", .takes_value = 1},
        [O_LAYERS] = {.name = "layers", .takes_value = 1}, [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_HOLD] = {.name = "holdout", .takes_value = 1},  [O_HOLDF] = {.name = "holdout-frac", .takes_value = 1},
        [O_META] = {.name = "meta"},                       [O_ALGO] = {.name = "algorithm", .takes_value = 1},
        [O_SUPPORT] = {.name = "support", .takes_value = 1}, [O_QUERY] = {.name = "query", .takes_value = 1},
        [O_ISTEPS] = {.name = "inner-steps", .takes_value = 1}, [O_ILR] = {.name = "inner-lr", .takes_value = 1},
        [O_MBATCH] = {.name = "meta-batch", .takes_value = 1}, [O_OLR] = {.name = "outer-lr", .takes_value = 1},
        [O_RLR] = {.name = "rate-lr", .takes_value = 1},   [O_ITERS] = {.name = "iterations", .takes_value = 1},
        [O_INIT] = {.name = "init", .takes_value = 1},     [O_INIT_MODEL] = {.name = "init-model", .takes_value = 1},
        [O_MANIFEST] = {.name = "manifest", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    int npos, want_help;
    int rc = mt_opt_parse("train", argc, argv, opts, O_COUNT, NULL, 0, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        train_help();
        return MT_EXIT_OK;
    }
    if (!opts[O_DB].given || !opts[O_OUT].given) {
        fprintf(stderr, "mtgpu train: --db and --out are required (see 'mtgpu train --help')\n");
        return MT_EXIT_USAGE;
    }
    const char *kind = opts[O_KIND].given ? opts[O_KIND].value : "gnn";
    if (!is_gnn_kind(kind)) {
        fprintf(stderr, "mtgpu train: --cost-model must be gnn, gnn-shared or mlp, got '%s'\n", kind);
        return MT_EXIT_USAGE;
    }
    if (opts[O_HOLD].given && opts[O_HOLDF].given) {
        fprintf(stderr, "mtgpu train: give --holdout or --holdout-frac, not both\n");
        return MT_EXIT_USAGE;
    }
    int meta = opts[O_META].given;
    for (int o = O_ALGO; o <= O_INIT_MODEL; o++)
        if (opts[o].given && !meta) {
            fprintf(stderr, "mtgpu train: --%s is an option of meta-training: add --meta\n", opts[o].name);
            return MT_EXIT_USAGE;
        }
    mt_costmodel_params cp = mt_costmodel_default_params();
    mt_gnn_meta_params mp = mt_gnn_meta_default_params();
    long long v;
    double d;
    if (opts[O_EPOCHS].given && (v = mt_opt_int("train", &opts[O_EPOCHS], 1, 100000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_EPOCHS].given) cp.gnn_epochs = (int)v;
    if (opts[O_HIDDEN].given && (v = mt_opt_int("train", &opts[O_HIDDEN], 1, 1024)) < 0) return MT_EXIT_USAGE;
    if (opts[O_HIDDEN].given) cp.gnn_hidden = (int)v;
    if (opts[O_LAYERS].given && (v = mt_opt_int("train", &opts[O_LAYERS], 1, 16)) < 0) return MT_EXIT_USAGE;
    if (opts[O_LAYERS].given) cp.gnn_layers = (int)v;
    if (opts[O_SEED].given && (v = mt_opt_int("train", &opts[O_SEED], 0, (long long)1 << 62)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SEED].given) cp.seed = mp.seed = (uint64_t)v;
    if (opts[O_ALGO].given) {
        if (strcmp(opts[O_ALGO].value, "fomaml") == 0) mp.algorithm = MT_GNN_META_FOMAML;
        else if (strcmp(opts[O_ALGO].value, "meta-sgd") == 0) mp.algorithm = MT_GNN_META_SGD;
        else {
            fprintf(stderr, "mtgpu train: --algorithm must be fomaml or meta-sgd, got '%s'\n", opts[O_ALGO].value);
            return MT_EXIT_USAGE;
        }
    }
    /* pooled training first: meta-training from it ranked held-out workloads
     * better than meta-training from drawn weights (gnn/gnn.h) */
    int init_pooled = !opts[O_INIT_MODEL].given;
    if (opts[O_INIT].given) {
        if (strcmp(opts[O_INIT].value, "scratch") == 0) init_pooled = 0;
        else if (strcmp(opts[O_INIT].value, "pooled") != 0) {
            fprintf(stderr, "mtgpu train: --init must be scratch or pooled, got '%s'\n", opts[O_INIT].value);
            return MT_EXIT_USAGE;
        }
    }
    if (opts[O_INIT].given && opts[O_INIT_MODEL].given) {
        fprintf(stderr, "mtgpu train: give --init or --init-model, not both\n");
        return MT_EXIT_USAGE;
    }
    if (opts[O_INIT_MODEL].given) {
        /* the file's architecture wins: read it for the manifest */
        mt_gnn *g = NULL;
        char gerr[512];
        if (mt_gnn_load(opts[O_INIT_MODEL].value, &g, gerr, sizeof gerr) != MT_OK) {
            fprintf(stderr, "mtgpu train: --init-model: %s\n", gerr);
            return MT_EXIT_FAIL;
        }
        cp.gnn_hidden = mt_gnn_get_params(g).hidden;
        cp.gnn_layers = mt_gnn_get_params(g).layers;
        mt_gnn_free(g);
        cp.gnn_model = opts[O_INIT_MODEL].value;
    }
    if (opts[O_SUPPORT].given && (v = mt_opt_int("train", &opts[O_SUPPORT], 1, 4096)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SUPPORT].given) mp.support = (int)v;
    if (opts[O_QUERY].given && (v = mt_opt_int("train", &opts[O_QUERY], 1, 4096)) < 0) return MT_EXIT_USAGE;
    if (opts[O_QUERY].given) mp.query = (int)v;
    if (opts[O_ISTEPS].given && (v = mt_opt_int("train", &opts[O_ISTEPS], 1, MT_GNN_MAX_INNER_STEPS)) < 0) return MT_EXIT_USAGE;
    if (opts[O_ISTEPS].given) mp.inner_steps = (int)v;
    if (opts[O_MBATCH].given && (v = mt_opt_int("train", &opts[O_MBATCH], 1, 4096)) < 0) return MT_EXIT_USAGE;
    if (opts[O_MBATCH].given) mp.tasks_per_batch = (int)v;
    if (opts[O_ITERS].given && (v = mt_opt_int("train", &opts[O_ITERS], 1, 10000000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_ITERS].given) mp.iterations = (int)v;
    if (opts[O_ILR].given && mt_opt_double("train", &opts[O_ILR], 1e-9, 10, &d) < 0) return MT_EXIT_USAGE;
    if (opts[O_ILR].given) mp.inner_lr = d;
    if (opts[O_OLR].given && mt_opt_double("train", &opts[O_OLR], 1e-9, 1, &d) < 0) return MT_EXIT_USAGE;
    if (opts[O_OLR].given) mp.outer_lr = d;
    if (opts[O_RLR].given && mt_opt_double("train", &opts[O_RLR], 1e-9, 1, &d) < 0) return MT_EXIT_USAGE;
    if (opts[O_RLR].given) mp.rate_lr = d;
    mp.from_current = init_pooled || opts[O_INIT_MODEL].given;
    double hold = 0;
    if (opts[O_HOLDF].given && (hold = parse_frac("train", &opts[O_HOLDF], 0, 0.95)) < 0) return MT_EXIT_USAGE;

    mt_db *db = open_db("train", opts[O_DB].value);
    if (!db) return MT_EXIT_FAIL;
    char err[1024];
    mt_dataset *ds = NULL;
    mt_costmodel *cm = NULL;
    mt_cm_sample *train = NULL;
    int ntrain = 0, *holdout = NULL;
    meta_progress prog = {.total = mp.iterations};
    rc = MT_EXIT_FAIL;
    if (mt_dataset_load(db, opts[O_DEVICE].value, &ds, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    holdout = calloc((size_t)mt_dataset_nworkloads(ds), sizeof *holdout);
    if (!holdout) goto out;
    if (opts[O_HOLD].given) {
        if (mark_holdout("train", ds, opts[O_HOLD].value, 0, holdout) != 0) {
            rc = MT_EXIT_USAGE;
            goto out;
        }
    } else if (hold > 0) mt_dataset_split(ds, hold, cp.seed, holdout);
    if (mt_dataset_select(ds, holdout, 0, 1.0, cp.seed, &train, &ntrain) != MT_OK || ntrain == 0) {
        fprintf(stderr, "mtgpu train: no training records\n");
        goto out;
    }
    if (mt_costmodel_create(kind, &cp, &cm, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    double t0 = now_s();
    if ((!meta || init_pooled) && mt_costmodel_fit(cm, train, ntrain, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    if (meta) {
        mp.progress = on_meta_progress;
        mp.user = &prog;
        if (mt_costmodel_meta_train(cm, train, ntrain, &mp, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu train: %s\n", err);
            goto out;
        }
    }
    double train_s = now_s() - t0;
    if (mt_costmodel_save(cm, opts[O_OUT].value, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    if (opts[O_MANIFEST].given) {
        mt_strbuf init = {0};
        if (opts[O_INIT_MODEL].given) {
            mt__sb_append(&init, "{\"model\": ");
            mt__sb_json_str(&init, opts[O_INIT_MODEL].value);
            mt__sb_append(&init, "}");
        } else mt__sb_append(&init, init_pooled ? "\"pooled\"" : "\"scratch\"");
        int bad = init.failed || write_manifest(opts[O_MANIFEST].value, opts[O_DB].value, opts[O_DEVICE].value, opts[O_OUT].value, kind, meta,
                                                init.data, opts[O_HOLD].given ? opts[O_HOLD].value : NULL, &cp, &mp, ds, holdout, train, ntrain, mt_costmodel_param_count(cm), train_s) != 0;
        mt__sb_free(&init);
        if (bad) goto out;
    }
    int nheld = 0;
    for (int w = 0; w < mt_dataset_nworkloads(ds); w++) nheld += holdout[w];
    const char *how = meta ? "meta-trained" : "pooled-trained";
    if (opts[O_JSON].given)
        printf("{\"model\": \"%s\", \"kind\": \"%s\", \"training\": \"%s\", \"samples\": %d, \"workloads\": %d, \"held_out_workloads\": %d, "
               "\"skipped\": %d, \"params\": %lld, \"train_s\": %.3f}\n",
               opts[O_OUT].value, kind, meta ? "meta-trained" : "pooled", ntrain, mt_dataset_nworkloads(ds) - nheld, nheld,
               mt_dataset_skipped(ds), (long long)mt_costmodel_param_count(cm), train_s);
    else
        printf("%s %s on %d records of %d workloads (%d held out, %d records skipped) in %.1f s: %lld parameters -> %s\n", how, kind, ntrain,
               mt_dataset_nworkloads(ds) - nheld, nheld, mt_dataset_skipped(ds), train_s, (long long)mt_costmodel_param_count(cm),
               opts[O_OUT].value);
    rc = MT_EXIT_OK;
out:
    free(train);
    free(holdout);
    mt_costmodel_free(cm);
    mt_dataset_free(ds);
    mt_db_close(db);
    return rc;
}

/* ---- eval-model ---- */

static void eval_help(void) {
    mt_cm_fewshot_params fp = mt_cm_fewshot_default_params();
    printf("usage: mtgpu eval-model --db PATH (--model FILE | --cost-model KIND [--model FILE]) [--holdout LIST]\n"
           "                        [--holdout-frac F] [--train-frac F] [--device FP] [--seed S]\n"
           "                        [--adapt-k K [--adapt-repeats R] [--adapt-steps N] [--adapt-lr R]] [--json]\n"
           "\n"
           "How well a cost model ranks the measured configs of workloads it was not\n"
           "trained on. The records of a database are split by workload; a --cost-model\n"
           "is fitted on the training workloads, a --model file (mtgpu train) is used as\n"
           "it is; both are scored on the held-out workloads, per (workload, template):\n"
           "  pairwise   share of config pairs ordered like their measured times\n"
           "  spearman   rank correlation of score and speed, mean over groups\n"
           "  top-k      best measured time / best time among the model's k top picks,\n"
           "             averaged with FLOP weights (1.0: the picks contain the best)\n"
           "\n"
           "With --adapt-k K, few-shot instead: for each held-out (workload, template,\n"
           "device) group, the model adapts on K of its measured configs drawn at random\n"
           "and ranks the rest, --adapt-repeats times; the figures are means over groups\n"
           "and draws (top-k unweighted). How a model adapts is its kind's: gnn-meta (a\n"
           "meta-trained --model) runs the file's inner procedure, gnn-transfer (a pooled\n"
           "--model) fine-tunes with --adapt-steps Adam steps at --adapt-lr, and xgb, gnn,\n"
           "gnn-shared and mlp learn from the K alone. K = 0 is zero-shot: the file's\n"
           "weights as they are; the from-scratch kinds then rank at random.\n"
           "\n"
           "  --db PATH          tuning database (opened read-only)\n"
           "  --model FILE       a model file: alone, evaluated as it is (or, with --adapt-k,\n"
           "                     adapted as gnn-meta if meta-trained, else as gnn-transfer)\n"
           "  --cost-model KIND  xgb, gnn, gnn-shared, mlp or random: fitted on the training split\n"
           "                     (with --adapt-k: on the K); gnn-meta or gnn-transfer: with --model\n"
           "  --holdout LIST     the held-out workloads, separated by ';': a workload, or a\n"
           "                     network name for all of its convolutions\n"
           "  --holdout-frac F   otherwise this share of the workloads, picked by a seeded\n"
           "                     hash (default 0.25; 'mtgpu train' takes the same option)\n"
           "  --train-frac F     fit on this share of the training records (default 1)\n"
           "  --device FP        only records of the device with this fingerprint\n"
           "  --seed S           split, subsample, draw and model seed (default 1)\n"
           "  --adapt-k K        few-shot: configs per held-out group to adapt on (0..1000)\n"
           "  --adapt-repeats R  draws of them per group (default %d)\n"
           "  --adapt-steps N    gnn-transfer: Adam steps per fit (default %d)\n"
           "  --adapt-lr R       gnn-transfer: their step size (default %g)\n"
           "  --json             one JSON object\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n",
           fp.repeats, mt_costmodel_default_params().gnn_adapt_steps, mt_costmodel_default_params().gnn_adapt_lr);
}

/* The kind that adapts a model file as it was trained to be adapted:
 * gnn-meta for a meta-trained file, gnn-transfer for any other; NULL
 * (after a message) when it cannot be read. */
static const char *kind_of_file(const char *path) {
    mt_gnn *g = NULL;
    char err[512];
    if (mt_gnn_load(path, &g, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: %s\n", err);
        return NULL;
    }
    const char *k = mt_gnn_get_origin(g) == MT_GNN_ORIGIN_META ? "gnn-meta" : "gnn-transfer";
    mt_gnn_free(g);
    return k;
}

int mt_cmd_eval_model(int argc, char **argv) {
    enum { O_DB, O_MODEL, O_KIND, O_HOLD, O_HOLDF, O_TRAINF, O_DEVICE, O_SEED, O_K, O_REPEATS, O_STEPS, O_LR, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},          [O_MODEL] = {.name = "model", .takes_value = 1},
        [O_KIND] = {.name = "cost-model", .takes_value = 1}, [O_HOLD] = {.name = "holdout", .takes_value = 1},
        [O_HOLDF] = {.name = "holdout-frac", .takes_value = 1}, [O_TRAINF] = {.name = "train-frac", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .takes_value = 1},  [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_K] = {.name = "adapt-k", .takes_value = 1},      [O_REPEATS] = {.name = "adapt-repeats", .takes_value = 1},
        [O_STEPS] = {.name = "adapt-steps", .takes_value = 1}, [O_LR] = {.name = "adapt-lr", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    int npos, want_help;
    int rc = mt_opt_parse("eval-model", argc, argv, opts, O_COUNT, NULL, 0, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        eval_help();
        return MT_EXIT_OK;
    }
    const char *given_kind = opts[O_KIND].given ? opts[O_KIND].value : NULL;
    int file_kind = given_kind && is_file_kind(given_kind);
    if (!opts[O_DB].given || (!opts[O_MODEL].given && !given_kind) || (opts[O_MODEL].given && given_kind && !file_kind)) {
        fprintf(stderr, "mtgpu eval-model: give --db and --model or --cost-model, both only for gnn-meta and gnn-transfer "
                        "(see 'mtgpu eval-model --help')\n");
        return MT_EXIT_USAGE;
    }
    if (given_kind && !known_kind(given_kind)) {
        fprintf(stderr, "mtgpu eval-model: unknown cost model '%s' (xgb, gnn, gnn-shared, mlp, random, gnn-meta, gnn-transfer)\n", given_kind);
        return MT_EXIT_USAGE;
    }
    if (file_kind && !opts[O_MODEL].given) {
        fprintf(stderr, "mtgpu eval-model: --cost-model %s needs --model FILE\n", given_kind);
        return MT_EXIT_USAGE;
    }
    if (opts[O_HOLD].given && opts[O_HOLDF].given) {
        fprintf(stderr, "mtgpu eval-model: give --holdout or --holdout-frac, not both\n");
        return MT_EXIT_USAGE;
    }
    int fewshot = opts[O_K].given;
    for (int o = O_REPEATS; o <= O_LR; o++)
        if (opts[o].given && !fewshot) {
            fprintf(stderr, "mtgpu eval-model: --%s is an option of few-shot evaluation: add --adapt-k K\n", opts[o].name);
            return MT_EXIT_USAGE;
        }
    double hold = 0.25, trainf = 1.0;
    if (opts[O_HOLDF].given && (hold = parse_frac("eval-model", &opts[O_HOLDF], 0, 0.95)) < 0) return MT_EXIT_USAGE;
    if (opts[O_TRAINF].given && (trainf = parse_frac("eval-model", &opts[O_TRAINF], 0, 1)) < 0) return MT_EXIT_USAGE;
    mt_costmodel_params cp = mt_costmodel_default_params();
    mt_cm_fewshot_params fp = mt_cm_fewshot_default_params();
    long long v;
    double d;
    if (opts[O_SEED].given && (v = mt_opt_int("eval-model", &opts[O_SEED], 0, (long long)1 << 62)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SEED].given) cp.seed = fp.seed = (uint64_t)v;
    if (fewshot && (v = mt_opt_int("eval-model", &opts[O_K], 0, 1000)) < 0) return MT_EXIT_USAGE;
    if (fewshot) fp.k = (int)v;
    if (opts[O_REPEATS].given && (v = mt_opt_int("eval-model", &opts[O_REPEATS], 1, 1000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_REPEATS].given) fp.repeats = (int)v;
    if (opts[O_STEPS].given && (v = mt_opt_int("eval-model", &opts[O_STEPS], 1, 100000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_STEPS].given) cp.gnn_adapt_steps = (int)v;
    if (opts[O_LR].given && mt_opt_double("eval-model", &opts[O_LR], 1e-9, 1, &d) < 0) return MT_EXIT_USAGE;
    if (opts[O_LR].given) cp.gnn_adapt_lr = d;
    const char *kind = given_kind ? given_kind : "gnn";
    if (opts[O_MODEL].given) cp.gnn_model = opts[O_MODEL].value;
    if (fewshot && opts[O_MODEL].given && !given_kind && !(kind = kind_of_file(opts[O_MODEL].value))) return MT_EXIT_FAIL;

    mt_db *db = open_db("eval-model", opts[O_DB].value);
    if (!db) return MT_EXIT_FAIL;
    char err[1024];
    mt_dataset *ds = NULL;
    mt_costmodel *cm = NULL;
    mt_cm_sample *train = NULL, *test = NULL;
    int ntrain = 0, ntest = 0, *holdout = NULL;
    rc = MT_EXIT_FAIL;
    if (mt_dataset_load(db, opts[O_DEVICE].value, &ds, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: %s\n", err);
        goto out;
    }
    int nw = mt_dataset_nworkloads(ds);
    holdout = calloc((size_t)nw, sizeof *holdout);
    if (!holdout) goto out;
    if (opts[O_HOLD].given) {
        if (mark_holdout("eval-model", ds, opts[O_HOLD].value, 1, holdout) != 0) {
            rc = MT_EXIT_USAGE;
            goto out;
        }
    } else mt_dataset_split(ds, hold, cp.seed, holdout);
    if (mt_dataset_select(ds, holdout, 1, 1.0, cp.seed, &test, &ntest) != MT_OK ||
        mt_dataset_select(ds, holdout, 0, trainf, cp.seed, &train, &ntrain) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: out of memory\n");
        goto out;
    }
    int nheld = 0;
    for (int w = 0; w < nw; w++) nheld += holdout[w];
    const char *name = opts[O_MODEL].given ? opts[O_MODEL].value : kind;
    if (fewshot) {
        if (ntest == 0) {
            fprintf(stderr, "mtgpu eval-model: no held-out records\n");
            goto out;
        }
        mt_cm_fewshot fs;
        if (mt_cm_evaluate_fewshot(kind, &cp, test, ntest, &fp, &fs, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu eval-model: %s\n", err);
            goto out;
        }
        if (opts[O_JSON].given) {
            mt_strbuf sb = {0};
            mt__sb_append(&sb, "{\"model\": ");
            mt__sb_json_str(&sb, name);
            mt__sb_printf(&sb,
                          ", \"kind\": \"%s\", \"adapt_k\": %d, \"adapt_repeats\": %d, \"test_samples\": %d, \"test_workloads\": %d, "
                          "\"groups\": %d, \"runs\": %d, \"pairwise_acc\": %.5f, \"spearman\": %.5f, \"top1\": %.5f, \"top5\": %.5f, "
                          "\"adapt_s\": %.3f, \"predict_s\": %.3f",
                          kind, fp.k, fp.repeats, ntest, nheld, fs.groups, fs.runs, fs.pairwise_acc, fs.spearman, fs.top1, fs.top5, fs.adapt_s,
                          fs.predict_s);
            if (strcmp(kind, "gnn-transfer") == 0)
                mt__sb_printf(&sb, ", \"adapt_steps\": %d, \"adapt_lr\": %g", cp.gnn_adapt_steps, cp.gnn_adapt_lr);
            mt__sb_append(&sb, "}");
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
        } else {
            printf("%s (%s): %d-shot on %d groups of %d held-out workloads, %d draws each\n", name, kind, fp.k, fs.groups, nheld, fp.repeats);
            printf("  pairwise accuracy %.3f   spearman %.3f   top-1 %.3f   top-5 %.3f   (adapt %.1f s, predict %.2f s)\n", fs.pairwise_acc,
                   fs.spearman, fs.top1, fs.top5, fs.adapt_s, fs.predict_s);
        }
        rc = MT_EXIT_OK;
        goto out;
    }
    int from_file = opts[O_MODEL].given;
    if (ntest == 0 || (ntrain == 0 && !from_file)) {
        fprintf(stderr, "mtgpu eval-model: the split left %d training and %d held-out records; %s\n", ntrain, ntest,
                ntest > 0 && nheld < nw && trainf < 1 ? "--train-frac kept none of the training records (raise it)"
                                        : "the database needs records of at least two workloads, and some must be left for training");
        goto out;
    }
    if (mt_costmodel_create(kind, &cp, &cm, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: %s\n", err);
        goto out;
    }
    double train_s = 0;
    if (!from_file) {
        double t0 = now_s();
        if (mt_costmodel_fit(cm, train, ntrain, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu eval-model: %s\n", err);
            goto out;
        }
        train_s = now_s() - t0;
    }
    mt_cm_eval ev;
    if (mt_cm_evaluate(cm, test, ntest, &ev, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: %s\n", err);
        goto out;
    }
    if (opts[O_JSON].given) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"model\": ");
        mt__sb_json_str(&sb, name);
        mt__sb_printf(&sb,
                      ", \"kind\": \"%s\", \"params\": %lld, \"train_samples\": %d, \"train_workloads\": %d, \"test_samples\": %lld, "
                      "\"test_workloads\": %d, \"groups\": %d, \"pairs\": %lld, \"pairwise_acc\": %.5f, \"spearman\": %.5f, \"top1\": %.5f, "
                      "\"top5\": %.5f, \"train_s\": %.3f, \"predict_s\": %.3f}",
                      mt_costmodel_kind(cm), (long long)mt_costmodel_param_count(cm), from_file ? 0 : ntrain, nw - nheld, (long long)ev.samples,
                      nheld, ev.groups, (long long)ev.pairs, ev.pairwise_acc, ev.spearman, ev.top1, ev.top5, train_s, ev.predict_s);
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
    } else {
        printf("%s: trained on %d records of %d workloads%s; evaluated on %lld records of %d held-out workloads (%d groups, %lld pairs)\n", name,
               from_file ? 0 : ntrain, nw - nheld, from_file ? " (model file: as trained)" : "", (long long)ev.samples, nheld, ev.groups,
               (long long)ev.pairs);
        printf("  pairwise accuracy %.3f   spearman %.3f   top-1 %.3f   top-5 %.3f   (fit %.1f s, predict %.2f s)\n", ev.pairwise_acc,
               ev.spearman, ev.top1, ev.top5, train_s, ev.predict_s);
    }
    rc = MT_EXIT_OK;
out:
    free(train);
    free(test);
    free(holdout);
    mt_costmodel_free(cm);
    mt_dataset_free(ds);
    mt_db_close(db);
    return rc;
}
