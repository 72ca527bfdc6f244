/* mtgpu train, mtgpu eval-model: cost models on the records of a database. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "costmodel.h"
#include "dataset.h"
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

/* Marks the workloads named in list (separated by ';') as held out;
 * returns -1 (after a message) when one is malformed or not in the data. */
static int mark_holdout(const char *cmd, const mt_dataset *ds, const char *list, int *holdout) {
    char *copy = strdup(list);
    if (!copy) return -1;
    int rc = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        mt_workload wl;
        char err[256], a[256], b[256];
        if (mt_workload_parse(tok, &wl, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu %s: --holdout: %s\n", cmd, err);
            rc = -1;
            break;
        }
        mt_workload_format(&wl, a, sizeof a);
        int found = 0;
        for (int w = 0; w < mt_dataset_nworkloads(ds); w++) {
            mt_workload_format(mt_dataset_workload(ds, w), b, sizeof b);
            if (strcmp(a, b) == 0) holdout[w] = found = 1;
        }
        if (!found) {
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
    printf("usage: mtgpu train --db PATH --out MODEL [--cost-model gnn|gnn-shared|mlp] [--device FP]\n"
           "                   [--epochs N] [--hidden N] [--layers N] [--seed S] [--holdout-frac F] [--json]\n"
           "\n"
           "Trains a GNN cost model on the measured records of a tuning database (every\n"
           "workload, template and device in it) and writes a model file that\n"
           "'mtgpu tune --cost-model gnn --model MODEL' adapts to each new task and\n"
           "'mtgpu eval-model --model MODEL' evaluates. The file is written through a\n"
           "temporary file and a rename: MODEL is never left half-written.\n"
           "\n"
           "  --db PATH          tuning database (opened read-only)\n"
           "  --out MODEL        model file to write\n"
           "  --cost-model M     gnn (default), gnn-shared or mlp\n"
           "  --device FP        only records of the device with this fingerprint\n"
           "  --epochs N         passes over the records (default 30)\n"
           "  --hidden N         width (default 32)\n"
           "  --layers N         message-passing rounds (default 3)\n"
           "  --seed S           initial weights and minibatch order (default 1)\n"
           "  --holdout-frac F   leave this share of the workloads out of training, as\n"
           "                     'mtgpu eval-model --holdout-frac F --seed S' holds them out\n"
           "  --json             print the result as one JSON object\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int mt_cmd_train(int argc, char **argv) {
    enum { O_DB, O_OUT, O_KIND, O_DEVICE, O_EPOCHS, O_HIDDEN, O_LAYERS, O_SEED, O_HOLD, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},         [O_OUT] = {.name = "out", .short_name = 'o', .takes_value = 1},
        [O_KIND] = {.name = "cost-model", .takes_value = 1}, [O_DEVICE] = {.name = "device", .takes_value = 1},
        [O_EPOCHS] = {.name = "epochs", .takes_value = 1}, [O_HIDDEN] = {.name = "hidden", .takes_value = 1},
        [O_LAYERS] = {.name = "layers", .takes_value = 1}, [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_HOLD] = {.name = "holdout-frac", .takes_value = 1}, [O_JSON] = {.name = "json"},
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
    mt_costmodel_params cp = mt_costmodel_default_params();
    long long v;
    if (opts[O_EPOCHS].given && (v = mt_opt_int("train", &opts[O_EPOCHS], 1, 100000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_EPOCHS].given) cp.gnn_epochs = (int)v;
    if (opts[O_HIDDEN].given && (v = mt_opt_int("train", &opts[O_HIDDEN], 1, 1024)) < 0) return MT_EXIT_USAGE;
    if (opts[O_HIDDEN].given) cp.gnn_hidden = (int)v;
    if (opts[O_LAYERS].given && (v = mt_opt_int("train", &opts[O_LAYERS], 1, 16)) < 0) return MT_EXIT_USAGE;
    if (opts[O_LAYERS].given) cp.gnn_layers = (int)v;
    if (opts[O_SEED].given && (v = mt_opt_int("train", &opts[O_SEED], 0, (long long)1 << 62)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SEED].given) cp.seed = (uint64_t)v;
    double hold = 0;
    if (opts[O_HOLD].given && (hold = parse_frac("train", &opts[O_HOLD], 0, 0.95)) < 0) return MT_EXIT_USAGE;

    mt_db *db = open_db("train", opts[O_DB].value);
    if (!db) return MT_EXIT_FAIL;
    char err[1024];
    mt_dataset *ds = NULL;
    mt_costmodel *cm = NULL;
    mt_cm_sample *train = NULL;
    int ntrain = 0, *holdout = NULL;
    rc = MT_EXIT_FAIL;
    if (mt_dataset_load(db, opts[O_DEVICE].value, &ds, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    holdout = calloc((size_t)mt_dataset_nworkloads(ds), sizeof *holdout);
    if (!holdout) goto out;
    if (hold > 0) mt_dataset_split(ds, hold, cp.seed, holdout);
    if (mt_dataset_select(ds, holdout, 0, 1.0, cp.seed, &train, &ntrain) != MT_OK || ntrain == 0) {
        fprintf(stderr, "mtgpu train: no training records\n");
        goto out;
    }
    if (mt_costmodel_create(kind, &cp, &cm, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    double t0 = now_s();
    if (mt_costmodel_fit(cm, train, ntrain) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", mt_costmodel_last_error(cm));
        goto out;
    }
    double train_s = now_s() - t0;
    if (mt_costmodel_save(cm, opts[O_OUT].value, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu train: %s\n", err);
        goto out;
    }
    int nheld = 0;
    for (int w = 0; w < mt_dataset_nworkloads(ds); w++) nheld += holdout[w];
    if (opts[O_JSON].given)
        printf("{\"model\": \"%s\", \"kind\": \"%s\", \"samples\": %d, \"workloads\": %d, \"held_out_workloads\": %d, \"skipped\": %d, "
               "\"params\": %lld, \"train_s\": %.3f}\n",
               opts[O_OUT].value, kind, ntrain, mt_dataset_nworkloads(ds) - nheld, nheld, mt_dataset_skipped(ds),
               (long long)mt_costmodel_param_count(cm), train_s);
    else
        printf("trained %s on %d records of %d workloads (%d held out, %d records skipped) in %.1f s: %lld parameters -> %s\n", kind, ntrain,
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
    printf("usage: mtgpu eval-model --db PATH (--model FILE | --cost-model KIND) [--holdout W1;W2;...]\n"
           "                        [--holdout-frac F] [--train-frac F] [--device FP] [--seed S] [--json]\n"
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
           "  --db PATH          tuning database (opened read-only)\n"
           "  --model FILE       a trained GNN model file\n"
           "  --cost-model KIND  xgb, gnn, gnn-shared, mlp or random: fitted on the training split\n"
           "  --holdout LIST     the held-out workloads, separated by ';'\n"
           "  --holdout-frac F   otherwise this share of the workloads, picked by a seeded\n"
           "                     hash (default 0.25; 'mtgpu train' takes the same option)\n"
           "  --train-frac F     fit on this share of the training records (default 1)\n"
           "  --device FP        only records of the device with this fingerprint\n"
           "  --seed S           split, subsample and model seed (default 1)\n"
           "  --json             one JSON object\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int mt_cmd_eval_model(int argc, char **argv) {
    enum { O_DB, O_MODEL, O_KIND, O_HOLD, O_HOLDF, O_TRAINF, O_DEVICE, O_SEED, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},          [O_MODEL] = {.name = "model", .takes_value = 1},
        [O_KIND] = {.name = "cost-model", .takes_value = 1}, [O_HOLD] = {.name = "holdout", .takes_value = 1},
        [O_HOLDF] = {.name = "holdout-frac", .takes_value = 1}, [O_TRAINF] = {.name = "train-frac", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .takes_value = 1},  [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    int npos, want_help;
    int rc = mt_opt_parse("eval-model", argc, argv, opts, O_COUNT, NULL, 0, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        eval_help();
        return MT_EXIT_OK;
    }
    if (!opts[O_DB].given || opts[O_MODEL].given == opts[O_KIND].given) {
        fprintf(stderr, "mtgpu eval-model: give --db and exactly one of --model and --cost-model (see 'mtgpu eval-model --help')\n");
        return MT_EXIT_USAGE;
    }
    if (opts[O_KIND].given && !known_kind(opts[O_KIND].value)) {
        fprintf(stderr, "mtgpu eval-model: unknown cost model '%s' (xgb, gnn, gnn-shared, mlp, random)\n", opts[O_KIND].value);
        return MT_EXIT_USAGE;
    }
    if (opts[O_HOLD].given && opts[O_HOLDF].given) {
        fprintf(stderr, "mtgpu eval-model: give --holdout or --holdout-frac, not both\n");
        return MT_EXIT_USAGE;
    }
    double hold = 0.25, trainf = 1.0;
    if (opts[O_HOLDF].given && (hold = parse_frac("eval-model", &opts[O_HOLDF], 0, 0.95)) < 0) return MT_EXIT_USAGE;
    if (opts[O_TRAINF].given && (trainf = parse_frac("eval-model", &opts[O_TRAINF], 0, 1)) < 0) return MT_EXIT_USAGE;
    mt_costmodel_params cp = mt_costmodel_default_params();
    long long v;
    if (opts[O_SEED].given && (v = mt_opt_int("eval-model", &opts[O_SEED], 0, (long long)1 << 62)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SEED].given) cp.seed = (uint64_t)v;
    const char *kind = opts[O_KIND].given ? opts[O_KIND].value : "gnn";
    if (opts[O_MODEL].given) cp.gnn_model = opts[O_MODEL].value;

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
        if (mark_holdout("eval-model", ds, opts[O_HOLD].value, holdout) != 0) {
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
    if (ntest == 0 || (ntrain == 0 && !opts[O_MODEL].given)) {
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
    if (!opts[O_MODEL].given) {
        double t0 = now_s();
        if (mt_costmodel_fit(cm, train, ntrain) != MT_OK) {
            fprintf(stderr, "mtgpu eval-model: %s\n", mt_costmodel_last_error(cm));
            goto out;
        }
        train_s = now_s() - t0;
    }
    mt_cm_eval ev;
    if (mt_cm_evaluate(cm, test, ntest, &ev, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu eval-model: %s\n", err);
        goto out;
    }
    const char *name = opts[O_MODEL].given ? opts[O_MODEL].value : kind;
    if (opts[O_JSON].given) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"model\": ");
        mt__sb_json_str(&sb, name);
        mt__sb_printf(&sb,
                      ", \"kind\": \"%s\", \"params\": %lld, \"train_samples\": %d, \"train_workloads\": %d, \"test_samples\": %lld, "
                      "\"test_workloads\": %d, \"groups\": %d, \"pairs\": %lld, \"pairwise_acc\": %.5f, \"spearman\": %.5f, \"top1\": %.5f, "
                      "\"top5\": %.5f, \"train_s\": %.3f, \"predict_s\": %.3f}",
                      mt_costmodel_kind(cm), (long long)mt_costmodel_param_count(cm), opts[O_MODEL].given ? 0 : ntrain, nw - nheld,
                      (long long)ev.samples, nheld, ev.groups, (long long)ev.pairs, ev.pairwise_acc, ev.spearman, ev.top1, ev.top5, train_s,
                      ev.predict_s);
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
    } else {
        printf("%s: trained on %d records of %d workloads%s; evaluated on %lld records of %d held-out workloads (%d groups, %lld pairs)\n",
               name, opts[O_MODEL].given ? 0 : ntrain, nw - nheld, opts[O_MODEL].given ? " (model file: as trained)" : "",
               (long long)ev.samples, nheld, ev.groups, (long long)ev.pairs);
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
