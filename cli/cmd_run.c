/* mtgpu run: a whole network forward on the device with its tuned kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mtgpu/records.h"
#include "mtgpu/executor.h"
#include "reference.h"
#include "strbuf.h"

static void help(void) {
    printf("usage: mtgpu run MODEL [--db PATH] [--device D] [--batch N] [--image-size S] [--repeat N]\n"
           "                 [--warmup N] [--profile] [--no-fuse] [--reference] [--weights FILE] [--json]\n"
           "\n"
           "Builds MODEL on the device with each convolution's best config from the\n"
           "tuning database (the default config where none is tuned), then times\n"
           "forward passes: the median wall time of N passes after the warm-up.\n"
           "\n"
           "MODEL is one of:");
    mt_cli_print_network_names();
    printf("\n\n"
           "  --db PATH         tuning database (default: $MTGPU_DB or ~/.cache/mtgpu/tuning.db when present)\n"
           "  --device D        opencl:N, cuda:N or N (default: the first device)\n"
           "  --batch N         images per pass (default 1)\n"
           "  --image-size S    input height and width (default 224)\n"
           "  --repeat N        timed passes (default 10)\n"
           "  --warmup N        untimed passes first (default 2)\n"
           "  --profile         device time per layer and per operation kind (median pass); each\n"
           "                    convolution's GFLOP/s (direct-convolution FLOPs, also for Winograd)\n"
           "                    and fraction of the device's FMA peak, measured after the passes.\n"
           "                    A fused pass (the default on a CPU device) is timed as it runs,\n"
           "                    from its threads' clock readings: a layer's time is the longest any\n"
           "                    thread took for its share, its wait the mean time the threads then\n"
           "                    waited for each other; with --no-fuse each kernel runs as its own\n"
           "                    launch, timed on the device\n"
           "  --no-fuse         on a CPU device, run every kernel as its own launch (by default runs\n"
           "                    of consecutive kernels go as one launch each, which saves the device's\n"
           "                    threads falling asleep and waking between kernels)\n"
           "  --reference       also run the CPU reference and print the max relative error\n"
           "                    (normalised by the largest reference value) and the time ratio\n"
           "  --weights FILE    weights file (net/WEIGHTS.md); default: seeded random He weights\n"
           "  --json            one JSON object with the results\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* What the command line asks for. */
typedef struct {
    const char *model;
    const char *db;       /* --db, or NULL: the default database when it exists */
    const char *device;
    const char *weights;  /* NULL: seeded random weights */
    long long batch, size, repeat, warmup;
    int profile, reference, json, no_fuse;
} run_request;

/* What a run opens, and what it measured. */
typedef struct {
    mt_network *net;
    int nl;               /* layers */
    char dbpath[4096];
    mt_db *db;            /* NULL: default configs only */
    mt_device *dev;
    mt_weights *weights;
    mt_executor *ex;
    mt_executor_stats stats;
    float *input, *out, *ref;
    int64_t in_count, out_count;
    double *wall;         /* repeat wall times */
    mt_layer_time *lt;    /* per layer: the median pass's kernel time (with --profile) */
    double *layer_runs;   /* nl x repeat kernel times */
    double *wait_runs;    /* nl x repeat waits at the layer's end (fused passes) */
    double *pass_runs;    /* 5 x repeat: mt_pass_time's parts (profiled fused passes) */
    mt_pass_time pass;    /* their medians; valid when every pass had them */
    double wait_ms;       /* sum of the layers' median waits */
    double med_ms, min_ms;
    double kind_ms[MT_LAYER_KIND_COUNT];
    int kind_n[MT_LAYER_KIND_COUNT];
    double device_ms;     /* sum of the layers' medians */
    double peak_gflops;   /* --profile: the device's FMA peak, measured in this run (0: the probe failed) */
    double conv_ms, conv_flops; /* --profile: the convolutions' summed medians and useful FLOPs */
    double ref_ms, max_err;
} run_state;

/* Returns -1 to go on, else the exit status. */
static int parse_run_options(int argc, char **argv, run_request *rq) {
    enum { O_DB, O_DEVICE, O_BATCH, O_SIZE, O_REPEAT, O_WARMUP, O_PROFILE, O_NO_FUSE, O_REFERENCE, O_WEIGHTS, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_BATCH] = {.name = "batch", .short_name = 'b', .takes_value = 1},
        [O_SIZE] = {.name = "image-size", .takes_value = 1},
        [O_REPEAT] = {.name = "repeat", .short_name = 'n', .takes_value = 1},
        [O_WARMUP] = {.name = "warmup", .takes_value = 1},
        [O_PROFILE] = {.name = "profile"},
        [O_NO_FUSE] = {.name = "no-fuse"},
        [O_REFERENCE] = {.name = "reference"},
        [O_WEIGHTS] = {.name = "weights", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int rc = mt_cli_begin("run", argc, argv, opts, O_COUNT, pos, 1, 1, "one MODEL argument", help);
    if (rc >= 0) return rc;
    *rq = (run_request){.model = pos[0], .db = opts[O_DB].value, .device = opts[O_DEVICE].value, .weights = opts[O_WEIGHTS].value, .batch = 1,
                        .size = 0, .repeat = 10, .warmup = 2, .profile = opts[O_PROFILE].given, .reference = opts[O_REFERENCE].given,
                        .json = opts[O_JSON].given, .no_fuse = opts[O_NO_FUSE].given};
    if (mt_opt_set_ll("run", &opts[O_BATCH], 1, 4096, &rq->batch) || mt_opt_set_ll("run", &opts[O_SIZE], 1, 8192, &rq->size) ||
        mt_opt_set_ll("run", &opts[O_REPEAT], 1, 100000, &rq->repeat) || mt_opt_set_ll("run", &opts[O_WARMUP], 0, 100000, &rq->warmup))
        return MT_EXIT_USAGE;
    return -1;
}

/* The database, read-only: --db, else the default one when it exists, else none. */
static int open_database(const run_request *rq, run_state *rs) {
    if (rq->db) snprintf(rs->dbpath, sizeof rs->dbpath, "%s", rq->db);
    else if (mt_db_default_path(rs->dbpath, sizeof rs->dbpath, NULL, 0) != MT_OK) rs->dbpath[0] = '\0';
    if (!rs->dbpath[0] || (!rq->db && access(rs->dbpath, F_OK) != 0)) return MT_EXIT_OK;
    char err[4096];
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    if (mt_db_open(rs->dbpath, &p, &rs->db, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}

/* The device, the weights, the executor with its kernels, and the buffers of one pass. */
static int build_network(const run_request *rq, run_state *rs) {
    char err[4096];
    int rc = mt_cli_device("run", rq->device, &rs->dev);
    if (rc != MT_EXIT_OK) return rc;
    mt_status st;
    if (rq->weights) st = mt_weights_load(rq->weights, rs->net, &rs->weights, err, sizeof err);
    else st = mt_weights_random(rs->net, 1, &rs->weights, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return MT_EXIT_FAIL;
    }
    const mt_device_info *di = mt_device_get_info(rs->dev);
    if (!rq->json) {
        printf("%s: batch %lld, %dx%d, %d layers, %d convolutions, %.2f GFLOP on %s:%d (%s)\n", mt_network_name(rs->net), rq->batch,
               mt_network_layer(rs->net, 0)->out.h, mt_network_layer(rs->net, 0)->out.w, rs->nl, mt_network_num_convs(rs->net),
               mt_network_conv_flops(rs->net) / 1e9, mt_backend_name(di->backend), di->index, di->name);
        printf("database: %s\n", rs->db ? rs->dbpath : "none (default configs)");
        fflush(stdout);
    }
    mt_executor_params ep = mt_executor_default_params();
    ep.db = rs->db;
    ep.weights = rs->weights;
    ep.fuse = !rq->no_fuse;
    if (mt_executor_build(rs->dev, rs->net, &ep, &rs->ex, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return MT_EXIT_FAIL;
    }
    mt_executor_get_stats(rs->ex, &rs->stats);
    mt_shape is = mt_network_layer(rs->net, 0)->out;
    rs->in_count = (int64_t)is.n * is.c * is.h * is.w;
    mt_shape os = mt_executor_output_shape(rs->ex);
    rs->out_count = (int64_t)os.n * os.c * os.h * os.w;
    rs->input = malloc(sizeof(float) * (size_t)rs->in_count);
    rs->out = malloc(sizeof(float) * (size_t)rs->out_count);
    rs->wall = malloc(sizeof(double) * (size_t)rq->repeat);
    rs->lt = calloc((size_t)rs->nl, sizeof *rs->lt);
    rs->layer_runs = calloc((size_t)rs->nl * (size_t)rq->repeat, sizeof(double));
    rs->wait_runs = calloc((size_t)rs->nl * (size_t)rq->repeat, sizeof(double));
    rs->pass_runs = calloc(5 * (size_t)rq->repeat, sizeof(double));
    if (!rs->input || !rs->out || !rs->wall || !rs->lt || !rs->layer_runs || !rs->wait_runs || !rs->pass_runs) {
        fprintf(stderr, "mtgpu run: out of memory\n");
        return MT_EXIT_FAIL;
    }
    mt_fill_random(rs->input, rs->in_count, 1);
    if (mt_executor_set_input(rs->ex, rs->input, rs->in_count, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return MT_EXIT_FAIL;
    }
    if (!rq->json) {
        const mt_executor_stats *s = &rs->stats;
        printf("built in %.1f s: %d convolutions (%d tuned, %d default), %d conv kernels, %d programs from the cache, %d launches per pass",
               s->build_s, s->nconvs, s->convs_from_db, s->nconvs - s->convs_from_db, s->conv_programs, s->programs_from_cache, s->launches);
        if (s->launches_fused < s->launches)
            printf(" (fused into %d%s)", s->launches_fused,
                   !rq->profile ? "" : s->profile_in_pass ? "; profiled from its threads' clocks" : "; profiled passes run them unfused");
        printf("%s\n", s->input_in_place ? "; the input read where it was set (no upload per pass)" : "");
        fflush(stdout);
    }
    return MT_EXIT_OK;
}

/* The warm-up and the timed passes (each layer's kernel time too with
 * --profile), then the output, which must be finite; medians over the passes. */
static int time_passes(const run_request *rq, run_state *rs) {
    char err[4096];
    for (long long i = 0; i < rq->warmup; i++)
        if (mt_executor_run(rs->ex, NULL, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu run: %s\n", err);
            return MT_EXIT_FAIL;
        }
    for (long long r = 0; r < rq->repeat; r++) {
        double t0 = now_ms();
        mt_status st = mt_executor_run(rs->ex, rq->profile ? rs->lt : NULL, err, sizeof err);
        rs->wall[r] = now_ms() - t0;
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu run: %s\n", err);
            return MT_EXIT_FAIL;
        }
        if (rq->profile) {
            for (int i = 0; i < rs->nl; i++) {
                rs->layer_runs[(size_t)i * (size_t)rq->repeat + (size_t)r] = rs->lt[i].kernel_ms;
                rs->wait_runs[(size_t)i * (size_t)rq->repeat + (size_t)r] = rs->lt[i].wait_ms;
            }
            mt_pass_time pt;
            mt_executor_pass_time(rs->ex, &pt);
            const double parts[5] = {pt.upload_ms, pt.queue_ms, pt.start_ms, pt.late_ms, pt.return_ms};
            for (int j = 0; j < 5; j++) rs->pass_runs[(size_t)j * (size_t)rq->repeat + (size_t)r] = parts[j];
            rs->pass.valid = r == 0 ? pt.valid : rs->pass.valid && pt.valid;
        }
    }
    if (mt_executor_output(rs->ex, rs->out, rs->out_count, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return MT_EXIT_FAIL;
    }
    for (int64_t i = 0; i < rs->out_count; i++)
        if (!isfinite(rs->out[i])) {
            fprintf(stderr, "mtgpu run: output element %lld is not finite\n", (long long)i);
            return MT_EXIT_FAIL;
        }
    rs->min_ms = rs->wall[0];
    for (long long r = 1; r < rq->repeat; r++) rs->min_ms = rs->wall[r] < rs->min_ms ? rs->wall[r] : rs->min_ms;
    rs->med_ms = median(rs->wall, (int)rq->repeat);
    /* Per layer and per kind: medians over the passes. */
    if (rq->profile && rs->pass.valid) {
        double *m[5] = {&rs->pass.upload_ms, &rs->pass.queue_ms, &rs->pass.start_ms, &rs->pass.late_ms, &rs->pass.return_ms};
        for (int j = 0; j < 5; j++) *m[j] = median(rs->pass_runs + (size_t)j * (size_t)rq->repeat, (int)rq->repeat);
    }
    if (rq->profile)
        for (int i = 0; i < rs->nl; i++) {
            const mt_layer *l = mt_network_layer(rs->net, i);
            rs->lt[i].kernel_ms = median(rs->layer_runs + (size_t)i * (size_t)rq->repeat, (int)rq->repeat);
            rs->lt[i].wait_ms = median(rs->wait_runs + (size_t)i * (size_t)rq->repeat, (int)rq->repeat);
            rs->wait_ms += rs->lt[i].wait_ms;
            rs->kind_ms[l->kind] += rs->lt[i].kernel_ms;
            rs->kind_n[l->kind]++;
            rs->device_ms += rs->lt[i].kernel_ms;
            if (l->kind == MT_LAYER_CONV2D) {
                rs->conv_ms += rs->lt[i].kernel_ms;
                rs->conv_flops += mt_workload_flops(&l->conv.wl);
            }
        }
    /* The FMA peak, measured after the passes in the same window of the
     * machine: each convolution's speed as a fraction of it. */
    if (rq->profile && mt_device_measure_peak(rs->dev, &rs->peak_gflops, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu run: measuring the FMA peak failed (no fractions of peak): %s\n", err);
        rs->peak_gflops = 0;
    }
    return MT_EXIT_OK;
}

/* --reference: the CPU reference on the same input and weights, its time and the largest error. */
static int compare_reference(run_state *rs) {
    char err[4096];
    rs->ref = malloc(sizeof(float) * (size_t)rs->out_count);
    if (!rs->ref) {
        fprintf(stderr, "mtgpu run: out of memory\n");
        return MT_EXIT_FAIL;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double t0 = now_ms();
    mt_status st = mt_network_reference(rs->net, rs->weights, rs->input, rs->ref, ncpu > 0 ? (int)ncpu : 1, err, sizeof err);
    rs->ref_ms = now_ms() - t0;
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu run: reference: %s\n", err);
        return MT_EXIT_FAIL;
    }
    int64_t bad = -1;
    if (mt_compare(rs->out, rs->ref, rs->out_count, &rs->max_err, &bad) != MT_OK) {
        fprintf(stderr, "mtgpu run: the output differs from the reference at element %lld (NaN/Inf)\n", (long long)bad);
        return MT_EXIT_FAIL;
    }
    return MT_EXIT_OK;
}

/* --profile's part of the JSON object: device time per kind and per layer. */
static void json_profile(mt_strbuf *sb, const run_state *rs) {
    mt__sb_printf(sb, ", \"profile\": \"%s\"", rs->stats.profile_in_pass ? "in_pass" : "per_launch");
    if (rs->stats.profile_in_pass) mt__sb_printf(sb, ", \"wait_ms\": %.6g", rs->wait_ms);
    if (rs->pass.valid)
        mt__sb_printf(sb, ", \"pass\": {\"upload_ms\": %.6g, \"queue_ms\": %.6g, \"start_ms\": %.6g, \"late_ms\": %.6g, \"return_ms\": %.6g}",
                      rs->pass.upload_ms, rs->pass.queue_ms, rs->pass.start_ms, rs->pass.late_ms, rs->pass.return_ms);
    mt__sb_printf(sb, ", \"device_ms\": %.6g, \"conv_ms\": %.6g, \"conv_gflop\": %.6g", rs->device_ms, rs->conv_ms, rs->conv_flops * 1e-9);
    if (rs->peak_gflops > 0)
        mt__sb_printf(sb, ", \"peak_gflops\": %.6g, \"conv_peak_bound_ms\": %.6g", rs->peak_gflops, rs->conv_flops / (rs->peak_gflops * 1e6));
    mt__sb_append(sb, ", \"kinds\": {");
    int first = 1;
    for (int k = 0; k < MT_LAYER_KIND_COUNT; k++) {
        if (!rs->kind_n[k] || k == MT_LAYER_INPUT || k == MT_LAYER_FLATTEN) continue;
        mt__sb_printf(sb, "%s\"%s\": %.6g", first ? "" : ", ", mt_layer_kind_name((mt_layer_kind)k), rs->kind_ms[k]);
        first = 0;
    }
    mt__sb_append(sb, "}, \"layers\": [");
    for (int i = 0; i < rs->nl; i++) {
        const mt_layer *l = mt_network_layer(rs->net, i);
        mt__sb_append(sb, i ? ", {\"name\": " : "{\"name\": ");
        mt__sb_json_str(sb, l->name);
        mt__sb_printf(sb, ", \"kind\": \"%s\", \"ms\": %.6g", mt_layer_kind_name(l->kind), rs->lt[i].kernel_ms);
        if (rs->stats.profile_in_pass) mt__sb_printf(sb, ", \"wait_ms\": %.6g", rs->lt[i].wait_ms);
        if (l->kind == MT_LAYER_CONV2D) {
            char wtext[256];
            mt_workload_format(&l->conv.wl, wtext, sizeof wtext);
            mt__sb_append(sb, ", \"workload\": ");
            mt__sb_json_str(sb, wtext);
            const double gf = rs->lt[i].kernel_ms > 0 ? mt_workload_flops(&l->conv.wl) / (rs->lt[i].kernel_ms * 1e6) : 0;
            mt__sb_printf(sb, ", \"gflops\": %.6g", gf);
            if (rs->peak_gflops > 0) mt__sb_printf(sb, ", \"peak_fraction\": %.4g", gf / rs->peak_gflops);
        }
        const char *tn, *cfg;
        int fdb;
        if (mt_executor_conv_choice(rs->ex, i, &tn, &cfg, &fdb) == MT_OK) {
            mt__sb_append(sb, ", \"template\": ");
            mt__sb_json_str(sb, tn);
            mt__sb_append(sb, ", \"config\": ");
            mt__sb_json_str(sb, cfg);
            mt__sb_printf(sb, ", \"tuned\": %s", fdb ? "true" : "false");
        }
        mt__sb_append(sb, "}");
    }
    mt__sb_append(sb, "]");
}

static int print_run_json(const run_request *rq, const run_state *rs) {
    const mt_device_info *di = mt_device_get_info(rs->dev);
    const mt_executor_stats *s = &rs->stats;
    mt_strbuf sb = {0};
    mt__sb_append(&sb, "{\"model\": ");
    mt__sb_json_str(&sb, mt_network_name(rs->net));
    mt__sb_printf(&sb, ", \"device\": \"%s:%d\", \"device_name\": ", mt_backend_name(di->backend), di->index);
    mt__sb_json_str(&sb, di->name);
    mt__sb_printf(&sb, ", \"batch\": %lld, \"image_size\": %d, \"database\": ", rq->batch, mt_network_layer(rs->net, 0)->out.h);
    if (rs->db) mt__sb_json_str(&sb, rs->dbpath);
    else mt__sb_append(&sb, "null");
    mt__sb_printf(&sb,
                  ", \"repeat\": %lld, \"warmup\": %lld, \"median_ms\": %.6g, \"min_ms\": %.6g, \"gflops\": %.4g, \"build_s\": %.3f"
                  ", \"convs\": %d, \"convs_tuned\": %d, \"conv_kernels\": %d, \"launches\": %d, \"launches_fused\": %d"
                  ", \"weight_bytes\": %lld, \"activation_bytes\": %lld, \"workspace_bytes\": %lld, \"peak_device_bytes\": %lld"
                  ", \"largest_live_bytes\": %lld, \"two_largest_activation_bytes\": %lld",
                  rq->repeat, rq->warmup, rs->med_ms, rs->min_ms, mt_network_conv_flops(rs->net) / (rs->med_ms * 1e6), s->build_s, s->nconvs,
                  s->convs_from_db, s->conv_programs, s->launches, rq->profile && !s->profile_in_pass ? s->launches : s->launches_fused, (long long)s->weight_bytes, (long long)s->activation_bytes,
                  (long long)s->workspace_bytes, (long long)s->device_bytes, (long long)s->largest_live_bytes, (long long)s->two_largest_bytes);
    mt__sb_printf(&sb, ", \"input_in_place\": %s", s->input_in_place ? "true" : "false");
    if (rq->reference) mt__sb_printf(&sb, ", \"reference_ms\": %.6g, \"max_rel_err\": %.3g", rs->ref_ms, rs->max_err);
    if (rq->profile) json_profile(&sb, rs);
    mt__sb_append(&sb, "}");
    if (sb.failed) {
        mt__sb_free(&sb);
        fprintf(stderr, "mtgpu run: out of memory\n");
        return MT_EXIT_FAIL;
    }
    puts(sb.data);
    mt__sb_free(&sb);
    return MT_EXIT_OK;
}

/* --profile's tables: each layer's kernel time (a convolution's also as
 * GFLOP/s, counting its direct-convolution FLOPs whatever the algorithm, and
 * as a fraction of the measured FMA peak), then per kind. */
static void print_profile(const run_state *rs) {
    const int in_pass = rs->stats.profile_in_pass;
    printf("\n%-28s %-16s %10s %9s %6s %8s  %s\n", "layer", "kind", "ms", "GFLOP/s", "peak", in_pass ? "wait ms" : "", "kernel");
    for (int i = 0; i < rs->nl; i++) {
        const mt_layer *l = mt_network_layer(rs->net, i);
        if (l->kind == MT_LAYER_INPUT || l->kind == MT_LAYER_FLATTEN) continue;
        const char *tn = "", *cfg = "";
        int fdb = 0;
        char what[64] = "";
        if (mt_executor_conv_choice(rs->ex, i, &tn, &cfg, &fdb) == MT_OK) snprintf(what, sizeof what, "%s (%s)", tn, fdb ? "tuned" : "default");
        char gf[16] = "", frac[16] = "";
        if (l->kind == MT_LAYER_CONV2D && rs->lt[i].kernel_ms > 0) {
            const double g = mt_workload_flops(&l->conv.wl) / (rs->lt[i].kernel_ms * 1e6);
            snprintf(gf, sizeof gf, "%.1f", g);
            if (rs->peak_gflops > 0) snprintf(frac, sizeof frac, "%.0f%%", 100.0 * g / rs->peak_gflops);
        }
        char wait[16] = "";
        if (in_pass) snprintf(wait, sizeof wait, "%.3f", rs->lt[i].wait_ms);
        printf("%-28s %-16s %10.3f %9s %6s %8s  %s\n", l->name, mt_layer_kind_name(l->kind), rs->lt[i].kernel_ms, gf, frac, wait, what);
    }
    printf("\n%-20s %10s %7s %6s\n", "operation kind", "ms", "share", "layers");
    for (int k = 0; k < MT_LAYER_KIND_COUNT; k++) {
        if (!rs->kind_n[k] || (k == MT_LAYER_INPUT) || k == MT_LAYER_FLATTEN) continue;
        printf("%-20s %10.3f %6.1f%% %6d\n", mt_layer_kind_name((mt_layer_kind)k), rs->kind_ms[k],
               rs->device_ms > 0 ? 100.0 * rs->kind_ms[k] / rs->device_ms : 0.0, rs->kind_n[k]);
    }
    if (in_pass)
        printf("%-20s %10.3f (the threads' longest shares, timed inside the fused pass; they waited\n"
               "%-20s %10s  %.3f ms more for each other at the layers' ends)\n",
               "total", rs->device_ms, "", "", rs->wait_ms);
    else
        printf("%-20s %10.3f (device time; wall time adds launch and synchronisation)\n", "total", rs->device_ms);
    if (rs->pass.valid)
        printf("outside the layers (ms): input upload %.3f, queueing the first launch %.3f, queued to the first thread's start %.3f,\n"
               "                         the other threads' late starts %.3f, last thread's end to the host's return %.3f\n",
               rs->pass.upload_ms, rs->pass.queue_ms, rs->pass.start_ms, rs->pass.late_ms, rs->pass.return_ms);
    if (rs->peak_gflops > 0)
        printf("convolutions: %.3f ms for %.2f GFLOP = %.1f GFLOP/s, %.0f%% of the FMA peak measured now (%.1f GFLOP/s);\n"
               "              at that peak they would take %.3f ms (direct-convolution FLOPs)\n",
               rs->conv_ms, rs->conv_flops * 1e-9, rs->conv_ms > 0 ? rs->conv_flops / (rs->conv_ms * 1e6) : 0.0,
               rs->conv_ms > 0 ? 100.0 * rs->conv_flops / (rs->conv_ms * 1e6) / rs->peak_gflops : 0.0, rs->peak_gflops,
               rs->conv_flops / (rs->peak_gflops * 1e6));
    printf("\n");
}

static void print_run_text(const run_request *rq, const run_state *rs) {
    const mt_executor_stats *s = &rs->stats;
    if (rq->profile) print_profile(rs);
    printf("latency: median %.3f ms, min %.3f ms over %lld passes after %lld warm-up (%.1f GFLOP/s)\n", rs->med_ms, rs->min_ms, rq->repeat,
           rq->warmup, mt_network_conv_flops(rs->net) / (rs->med_ms * 1e6));
    printf("device memory: %.1f MiB peak = weights %.1f MiB + activations %.1f MiB in %d buffers + workspace %.3f MiB\n",
           (double)s->device_bytes / 1048576.0, (double)s->weight_bytes / 1048576.0, (double)s->activation_bytes / 1048576.0,
           s->activation_buffers, (double)s->workspace_bytes / 1048576.0);
    printf("               (largest live activations at once %.1f MiB; two largest activations %.1f MiB)\n",
           (double)s->largest_live_bytes / 1048576.0, (double)s->two_largest_bytes / 1048576.0);
    if (rq->reference)
        printf("reference (CPU, double accumulation): %.1f ms, max relative error %.3g, time ratio reference/executor %.2f\n", rs->ref_ms, rs->max_err,
               rs->med_ms > 0 ? rs->ref_ms / rs->med_ms : 0.0);
}

static void run_state_free(run_state *rs) {
    free(rs->input);
    free(rs->out);
    free(rs->ref);
    free(rs->wall);
    free(rs->lt);
    free(rs->layer_runs);
    free(rs->wait_runs);
    free(rs->pass_runs);
    mt_executor_free(rs->ex);
    mt_weights_free(rs->weights);
    mt_device_close(rs->dev);
    mt_db_close(rs->db);
    mt_network_free(rs->net);
}

int mt_cmd_run(int argc, char **argv) {
    run_request rq;
    int rc = parse_run_options(argc, argv, &rq);
    if (rc >= 0) return rc;
    run_state rs;
    memset(&rs, 0, sizeof rs);
    if ((rc = mt_cli_network("run", rq.model, (int)rq.batch, (int)rq.size, &rs.net)) != MT_EXIT_OK) return rc;
    rs.nl = mt_network_num_layers(rs.net);
    rs.max_err = -1;
    if ((rc = open_database(&rq, &rs)) == MT_EXIT_OK && (rc = build_network(&rq, &rs)) == MT_EXIT_OK && (rc = time_passes(&rq, &rs)) == MT_EXIT_OK &&
        (!rq.reference || (rc = compare_reference(&rs)) == MT_EXIT_OK)) {
        if (rq.json) rc = print_run_json(&rq, &rs);
        else print_run_text(&rq, &rs);
    }
    run_state_free(&rs);
    return rc;
}
