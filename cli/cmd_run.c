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
    int count = 0;
    const char *const *names = mt_network_names(&count);
    printf("usage: mtgpu run MODEL [--db PATH] [--device D] [--batch N] [--image-size S] [--repeat N]\n"
           "                 [--warmup N] [--profile] [--reference] [--weights FILE] [--json]\n"
           "\n"
           "Builds MODEL on the device with each convolution's best config from the\n"
           "tuning database (the default config where none is tuned), then times\n"
           "forward passes: the median wall time of N passes after the warm-up.\n"
           "\n"
           "MODEL is one of:");
    for (int i = 0; i < count; i++) printf(" %s", names[i]);
    printf("\n\n"
           "  --db PATH         tuning database (default: $MTGPU_DB or ~/.cache/mtgpu/tuning.db when present)\n"
           "  --device D        opencl:N, cuda:N or N (default: the first device)\n"
           "  --batch N         images per pass (default 1)\n"
           "  --image-size S    input height and width (default 224)\n"
           "  --repeat N        timed passes (default 10)\n"
           "  --warmup N        untimed passes first (default 2)\n"
           "  --profile         device time per layer and per operation kind (median pass)\n"
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

int mt_cmd_run(int argc, char **argv) {
    enum { O_DB, O_DEVICE, O_BATCH, O_SIZE, O_REPEAT, O_WARMUP, O_PROFILE, O_REFERENCE, O_WEIGHTS, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_BATCH] = {.name = "batch", .short_name = 'b', .takes_value = 1},
        [O_SIZE] = {.name = "image-size", .takes_value = 1},
        [O_REPEAT] = {.name = "repeat", .short_name = 'n', .takes_value = 1},
        [O_WARMUP] = {.name = "warmup", .takes_value = 1},
        [O_PROFILE] = {.name = "profile"},
        [O_REFERENCE] = {.name = "reference"},
        [O_WEIGHTS] = {.name = "weights", .takes_value = 1},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int npos, want_help;
    int rc = mt_opt_parse("run", argc, argv, opts, O_COUNT, pos, 1, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        help();
        return MT_EXIT_OK;
    }
    if (npos != 1) {
        fprintf(stderr, "mtgpu run: expected one MODEL argument (see 'mtgpu run --help')\n");
        return MT_EXIT_USAGE;
    }
    long long batch = 1, size = 0, repeat = 10, warmup = 2;
    if (opts[O_BATCH].given && (batch = mt_opt_int("run", &opts[O_BATCH], 1, 4096)) < 0) return MT_EXIT_USAGE;
    if (opts[O_SIZE].given && (size = mt_opt_int("run", &opts[O_SIZE], 1, 8192)) < 0) return MT_EXIT_USAGE;
    if (opts[O_REPEAT].given && (repeat = mt_opt_int("run", &opts[O_REPEAT], 1, 100000)) < 0) return MT_EXIT_USAGE;
    if (opts[O_WARMUP].given && (warmup = mt_opt_int("run", &opts[O_WARMUP], 0, 100000)) < 0) return MT_EXIT_USAGE;
    int json = opts[O_JSON].given, profile = opts[O_PROFILE].given;

    char err[4096];
    mt_network *net = NULL;
    mt_status st = mt_network_create(pos[0], (int)batch, (int)size, &net, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        return st == MT_NOT_FOUND || st == MT_RANGE ? MT_EXIT_USAGE : MT_EXIT_FAIL;
    }
    rc = MT_EXIT_FAIL;
    mt_db *db = NULL;
    mt_device *dev = NULL;
    mt_weights *weights = NULL;
    mt_executor *ex = NULL;
    double *wall = NULL;
    mt_layer_time *lt = NULL;
    double *layer_runs = NULL;
    float *out = NULL, *ref = NULL, *input = NULL;
    int nl = mt_network_num_layers(net);

    char dbpath[4096] = "";
    if (opts[O_DB].given) snprintf(dbpath, sizeof dbpath, "%s", opts[O_DB].value);
    else if (mt_db_default_path(dbpath, sizeof dbpath, NULL, 0) != MT_OK) dbpath[0] = '\0';
    if (dbpath[0] && (opts[O_DB].given || access(dbpath, F_OK) == 0)) {
        mt_db_params p = mt_db_default_params();
        p.readonly = 1;
        if ((st = mt_db_open(dbpath, &p, &db, err, sizeof err)) != MT_OK) {
            fprintf(stderr, "mtgpu run: %s\n", err);
            goto out;
        }
    }
    mt_device_params dp = mt_device_default_params();
    if ((st = mt_device_open(opts[O_DEVICE].value, &dp, &dev, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        rc = st == MT_INVALID_ARG ? MT_EXIT_USAGE : MT_EXIT_FAIL;
        goto out;
    }
    if (opts[O_WEIGHTS].given) st = mt_weights_load(opts[O_WEIGHTS].value, net, &weights, err, sizeof err);
    else st = mt_weights_random(net, 1, &weights, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        goto out;
    }
    const mt_device_info *di = mt_device_get_info(dev);
    if (!json) {
        printf("%s: batch %lld, %dx%d, %d layers, %d convolutions, %.2f GFLOP on %s:%d (%s)\n", mt_network_name(net), batch,
               mt_network_layer(net, 0)->out.h, mt_network_layer(net, 0)->out.w, nl, mt_network_num_convs(net), mt_network_conv_flops(net) / 1e9,
               mt_backend_name(di->backend), di->index, di->name);
        printf("database: %s\n", db ? dbpath : "none (default configs)");
        fflush(stdout);
    }
    mt_executor_params ep = mt_executor_default_params();
    ep.db = db;
    ep.weights = weights;
    if ((st = mt_executor_build(dev, net, &ep, &ex, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        goto out;
    }
    mt_executor_stats s;
    mt_executor_get_stats(ex, &s);
    int64_t in_count = 1;
    {
        mt_shape is = mt_network_layer(net, 0)->out;
        in_count = (int64_t)is.n * is.c * is.h * is.w;
    }
    input = malloc(sizeof(float) * (size_t)in_count);
    mt_shape os = mt_executor_output_shape(ex);
    int64_t out_count = (int64_t)os.n * os.c * os.h * os.w;
    out = malloc(sizeof(float) * (size_t)out_count);
    wall = malloc(sizeof(double) * (size_t)repeat);
    lt = calloc((size_t)nl, sizeof *lt);
    layer_runs = calloc((size_t)nl * (size_t)repeat, sizeof(double));
    if (!input || !out || !wall || !lt || !layer_runs) {
        fprintf(stderr, "mtgpu run: out of memory\n");
        goto out;
    }
    mt_fill_random(input, in_count, 1);
    if ((st = mt_executor_set_input(ex, input, in_count, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        goto out;
    }
    if (!json) {
        printf("built in %.1f s: %d convolutions (%d tuned, %d default), %d conv kernels, %d programs from the cache, %d launches per pass\n",
               s.build_s, s.nconvs, s.convs_from_db, s.nconvs - s.convs_from_db, s.conv_programs, s.programs_from_cache, s.launches);
        fflush(stdout);
    }
    for (long long i = 0; i < warmup; i++)
        if ((st = mt_executor_run(ex, NULL, err, sizeof err)) != MT_OK) {
            fprintf(stderr, "mtgpu run: %s\n", err);
            goto out;
        }
    for (long long r = 0; r < repeat; r++) {
        double t0 = now_ms();
        st = mt_executor_run(ex, profile ? lt : NULL, err, sizeof err);
        wall[r] = now_ms() - t0;
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu run: %s\n", err);
            goto out;
        }
        if (profile)
            for (int i = 0; i < nl; i++) layer_runs[(size_t)i * (size_t)repeat + (size_t)r] = lt[i].kernel_ms;
    }
    if ((st = mt_executor_output(ex, out, out_count, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "mtgpu run: %s\n", err);
        goto out;
    }
    for (int64_t i = 0; i < out_count; i++)
        if (!isfinite(out[i])) {
            fprintf(stderr, "mtgpu run: output element %lld is not finite\n", (long long)i);
            goto out;
        }
    double min_ms = wall[0];
    for (long long r = 1; r < repeat; r++) min_ms = wall[r] < min_ms ? wall[r] : min_ms;
    double med = median(wall, (int)repeat);

    /* Per layer and per kind: medians over the passes. */
    double kind_ms[MT_LAYER_KIND_COUNT] = {0};
    int kind_n[MT_LAYER_KIND_COUNT] = {0};
    double device_total = 0;
    if (profile)
        for (int i = 0; i < nl; i++) {
            const mt_layer *l = mt_network_layer(net, i);
            lt[i].kernel_ms = median(layer_runs + (size_t)i * (size_t)repeat, (int)repeat);
            kind_ms[l->kind] += lt[i].kernel_ms;
            kind_n[l->kind]++;
            device_total += lt[i].kernel_ms;
        }

    double ref_ms = 0, max_err = -1;
    if (opts[O_REFERENCE].given) {
        ref = malloc(sizeof(float) * (size_t)out_count);
        if (!ref) {
            fprintf(stderr, "mtgpu run: out of memory\n");
            goto out;
        }
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        double t0 = now_ms();
        st = mt_network_reference(net, weights, input, ref, ncpu > 0 ? (int)ncpu : 1, err, sizeof err);
        ref_ms = now_ms() - t0;
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu run: reference: %s\n", err);
            goto out;
        }
        int64_t bad = -1;
        if (mt_compare(out, ref, out_count, &max_err, &bad) != MT_OK) {
            fprintf(stderr, "mtgpu run: the output differs from the reference at element %lld (NaN/Inf)\n", (long long)bad);
            goto out;
        }
    }

    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"model\": ");
        mt__sb_json_str(&sb, mt_network_name(net));
        mt__sb_printf(&sb, ", \"device\": \"%s:%d\", \"device_name\": ", mt_backend_name(di->backend), di->index);
        mt__sb_json_str(&sb, di->name);
        mt__sb_printf(&sb, ", \"batch\": %lld, \"image_size\": %d, \"database\": ", batch, mt_network_layer(net, 0)->out.h);
        if (db) mt__sb_json_str(&sb, dbpath);
        else mt__sb_append(&sb, "null");
        mt__sb_printf(&sb,
                      ", \"repeat\": %lld, \"warmup\": %lld, \"median_ms\": %.6g, \"min_ms\": %.6g, \"gflops\": %.4g, \"build_s\": %.3f"
                      ", \"convs\": %d, \"convs_tuned\": %d, \"conv_kernels\": %d, \"launches\": %d"
                      ", \"weight_bytes\": %lld, \"activation_bytes\": %lld, \"workspace_bytes\": %lld, \"peak_device_bytes\": %lld"
                      ", \"largest_live_bytes\": %lld, \"two_largest_activation_bytes\": %lld",
                      repeat, warmup, med, min_ms, mt_network_conv_flops(net) / (med * 1e6), s.build_s, s.nconvs, s.convs_from_db,
                      s.conv_programs, s.launches, (long long)s.weight_bytes, (long long)s.activation_bytes, (long long)s.workspace_bytes,
                      (long long)s.device_bytes, (long long)s.largest_live_bytes, (long long)s.two_largest_bytes);
        if (opts[O_REFERENCE].given) mt__sb_printf(&sb, ", \"reference_ms\": %.6g, \"max_rel_err\": %.3g", ref_ms, max_err);
        if (profile) {
            mt__sb_printf(&sb, ", \"device_ms\": %.6g, \"kinds\": {", device_total);
            int first = 1;
            for (int k = 0; k < MT_LAYER_KIND_COUNT; k++) {
                if (!kind_n[k] || k == MT_LAYER_INPUT || k == MT_LAYER_FLATTEN) continue;
                mt__sb_printf(&sb, "%s\"%s\": %.6g", first ? "" : ", ", mt_layer_kind_name((mt_layer_kind)k), kind_ms[k]);
                first = 0;
            }
            mt__sb_append(&sb, "}, \"layers\": [");
            for (int i = 0; i < nl; i++) {
                const mt_layer *l = mt_network_layer(net, i);
                mt__sb_append(&sb, i ? ", {\"name\": " : "{\"name\": ");
                mt__sb_json_str(&sb, l->name);
                mt__sb_printf(&sb, ", \"kind\": \"%s\", \"ms\": %.6g", mt_layer_kind_name(l->kind), lt[i].kernel_ms);
                if (l->kind == MT_LAYER_CONV2D) {
                    char wtext[256];
                    mt_workload_format(&l->conv.wl, wtext, sizeof wtext);
                    mt__sb_append(&sb, ", \"workload\": ");
                    mt__sb_json_str(&sb, wtext);
                }
                const char *tn, *cfg;
                int fdb;
                if (mt_executor_conv_choice(ex, i, &tn, &cfg, &fdb) == MT_OK) {
                    mt__sb_append(&sb, ", \"template\": ");
                    mt__sb_json_str(&sb, tn);
                    mt__sb_append(&sb, ", \"config\": ");
                    mt__sb_json_str(&sb, cfg);
                    mt__sb_printf(&sb, ", \"tuned\": %s", fdb ? "true" : "false");
                }
                mt__sb_append(&sb, "}");
            }
            mt__sb_append(&sb, "]");
        }
        mt__sb_append(&sb, "}");
        if (sb.failed) {
            mt__sb_free(&sb);
            fprintf(stderr, "mtgpu run: out of memory\n");
            goto out;
        }
        puts(sb.data);
        mt__sb_free(&sb);
    } else {
        if (profile) {
            printf("\n%-28s %-16s %10s  %s\n", "layer", "kind", "ms", "kernel");
            for (int i = 0; i < nl; i++) {
                const mt_layer *l = mt_network_layer(net, i);
                if (l->kind == MT_LAYER_INPUT || l->kind == MT_LAYER_FLATTEN) continue;
                const char *tn = "", *cfg = "";
                int fdb = 0;
                char what[64] = "";
                if (mt_executor_conv_choice(ex, i, &tn, &cfg, &fdb) == MT_OK) snprintf(what, sizeof what, "%s (%s)", tn, fdb ? "tuned" : "default");
                printf("%-28s %-16s %10.3f  %s\n", l->name, mt_layer_kind_name(l->kind), lt[i].kernel_ms, what);
            }
            printf("\n%-20s %10s %7s %6s\n", "operation kind", "ms", "share", "layers");
            for (int k = 0; k < MT_LAYER_KIND_COUNT; k++) {
                if (!kind_n[k] || (k == MT_LAYER_INPUT) || k == MT_LAYER_FLATTEN) continue;
                printf("%-20s %10.3f %6.1f%% %6d\n", mt_layer_kind_name((mt_layer_kind)k), kind_ms[k],
                       device_total > 0 ? 100.0 * kind_ms[k] / device_total : 0.0, kind_n[k]);
            }
            printf("%-20s %10.3f (device time; wall time adds launch and synchronisation)\n\n", "total", device_total);
        }
        printf("latency: median %.3f ms, min %.3f ms over %lld passes after %lld warm-up (%.1f GFLOP/s)\n", med, min_ms, repeat, warmup,
               mt_network_conv_flops(net) / (med * 1e6));
        printf("device memory: %.1f MiB peak = weights %.1f MiB + activations %.1f MiB in %d buffers + workspace %.3f MiB\n",
               (double)s.device_bytes / 1048576.0, (double)s.weight_bytes / 1048576.0, (double)s.activation_bytes / 1048576.0,
               s.activation_buffers, (double)s.workspace_bytes / 1048576.0);
        printf("               (largest live activations at once %.1f MiB; two largest activations %.1f MiB)\n",
               (double)s.largest_live_bytes / 1048576.0, (double)s.two_largest_bytes / 1048576.0);
        if (opts[O_REFERENCE].given)
            printf("reference (CPU, double accumulation): %.1f ms, max relative error %.3g, time ratio reference/executor %.2f\n", ref_ms, max_err,
                   med > 0 ? ref_ms / med : 0.0);
    }
    rc = MT_EXIT_OK;
out:
    free(input);
    free(out);
    free(ref);
    free(wall);
    free(lt);
    free(layer_runs);
    mt_executor_free(ex);
    mt_weights_free(weights);
    mt_device_close(dev);
    mt_db_close(db);
    mt_network_free(net);
    return rc;
}
