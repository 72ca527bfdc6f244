/* mtgpu tasks: the unique convolution workloads of a zoo network. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mtgpu/net.h"
#include "strbuf.h"

static void help(void) {
    printf("usage: mtgpu tasks MODEL [--batch N] [--image-size S] [--layers] [--json]\n"
           "\n"
           "Lists the unique convolution workloads (tasks) of a network in order of\n"
           "first occurrence, with how many conv layers share each and their FLOPs\n"
           "(2 * multiply-adds), then the totals over all conv layers.\n"
           "\n"
           "models:");
    mt_cli_print_network_names();
    printf("\n"
           "\n"
           "  --batch N       images per batch (default 1); part of every workload\n"
           "  --image-size S  input height and width (default 224)\n"
           "  --layers        list every layer (kind, inputs, output shape) instead of the tasks\n"
           "  --json          one JSON object per line: per task {\"index\", \"workload\", \"count\",\n"
           "                  \"flops\" (one occurrence), \"first_layer\"}, then a summary {\"model\",\n"
           "                  \"batch\", \"image_size\", \"unique_tasks\", \"conv_layers\", \"flops\" (all conv layers)};\n"
           "                  with --layers, one object per layer\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage (an unknown model included).\n");
}

static void print_layers(const mt_network *net, int json) {
    int n = mt_network_num_layers(net);
    for (int i = 0; i < n; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        char wtext[256] = "";
        if (l->kind == MT_LAYER_CONV2D) mt_workload_format(&l->conv.wl, wtext, sizeof wtext);
        if (json) {
            mt_strbuf sb = {0};
            mt__sb_printf(&sb, "{\"index\": %d, \"name\": ", i);
            mt__sb_json_str(&sb, l->name);
            mt__sb_printf(&sb, ", \"kind\": \"%s\", \"inputs\": [", mt_layer_kind_name(l->kind));
            for (int j = 0; j < l->ninputs; j++) mt__sb_printf(&sb, "%s%d", j ? ", " : "", l->inputs[j]);
            mt__sb_printf(&sb, "], \"shape\": [%d, %d, %d, %d], \"act\": \"%s\"", l->out.n, l->out.c, l->out.h, l->out.w,
                          mt_activation_name(l->act));
            if (l->kind == MT_LAYER_CONV2D) {
                mt__sb_append(&sb, ", \"workload\": ");
                mt__sb_json_str(&sb, wtext);
                mt__sb_printf(&sb, ", \"bias\": %s, \"batch_norm\": %s, \"residual\": %d", l->conv.bias ? "true" : "false",
                              l->conv.batch_norm ? "true" : "false", l->conv.residual);
            }
            mt__sb_append(&sb, "}");
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
            continue;
        }
        char ins[64] = "";
        size_t used = 0;
        for (int j = 0; j < l->ninputs && used < sizeof ins; j++)
            used += (size_t)snprintf(ins + used, sizeof ins - used, "%s%d", j ? "," : "", l->inputs[j]);
        printf("%4d  %-32s %-16s %-10s %5d x %4d x %4d x %4d", i, l->name, mt_layer_kind_name(l->kind), ins, l->out.n, l->out.c, l->out.h,
               l->out.w);
        switch (l->kind) {
        case MT_LAYER_CONV2D:
            printf("  %s%s%s", wtext, l->conv.bias ? " +bias" : "", l->conv.batch_norm ? " +bn" : "");
            if (l->conv.residual >= 0) printf(" +residual(%d)", l->conv.residual);
            break;
        case MT_LAYER_MAXPOOL:
        case MT_LAYER_AVGPOOL:
            printf("  %dx%d/%d pad %d%s", l->pool.kernel_h, l->pool.kernel_w, l->pool.stride_h, l->pool.pad_h, l->pool.ceil_mode ? " ceil" : "");
            break;
        case MT_LAYER_DENSE: printf("  %d -> %d%s", l->dense.in_features, l->dense.out_features, l->dense.bias ? " +bias" : ""); break;
        default: break;
        }
        if (l->act != MT_ACT_NONE) printf(" -> %s", mt_activation_name(l->act));
        printf("\n");
    }
}

static void print_tasks(const mt_network *net, const mt_task *tasks, int ntasks, int image_size, int json) {
    int nconv = mt_network_num_convs(net);
    double total = mt_network_conv_flops(net);
    if (json) {
        for (int i = 0; i < ntasks; i++) {
            char wtext[256];
            mt_workload_format(&tasks[i].wl, wtext, sizeof wtext);
            mt_strbuf sb = {0};
            mt__sb_printf(&sb, "{\"index\": %d, \"workload\": ", i);
            mt__sb_json_str(&sb, wtext);
            mt__sb_printf(&sb, ", \"count\": %d, \"flops\": %.0f, \"first_layer\": ", tasks[i].count, tasks[i].flops);
            mt__sb_json_str(&sb, mt_network_layer(net, tasks[i].first_layer)->name);
            mt__sb_append(&sb, "}");
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
        }
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"model\": ");
        mt__sb_json_str(&sb, mt_network_name(net));
        mt__sb_printf(&sb, ", \"batch\": %d, \"image_size\": %d, \"unique_tasks\": %d, \"conv_layers\": %d, \"flops\": %.0f}",
                      mt_network_batch(net), image_size, ntasks, nconv, total);
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
        return;
    }
    int width = (int)strlen("workload");
    for (int i = 0; i < ntasks; i++) {
        char wtext[256];
        int n = mt_workload_format(&tasks[i].wl, wtext, sizeof wtext);
        if (n > width) width = n;
    }
    printf("%s: batch %d, %dx%d\n", mt_network_name(net), mt_network_batch(net), image_size, image_size);
    printf("%5s  %-*s  %5s  %11s  %11s\n", "index", width, "workload", "count", "MFLOP each", "MFLOP total");
    for (int i = 0; i < ntasks; i++) {
        char wtext[256];
        mt_workload_format(&tasks[i].wl, wtext, sizeof wtext);
        printf("%5d  %-*s  %5d  %11.2f  %11.2f\n", i, width, wtext, tasks[i].count, tasks[i].flops / 1e6, tasks[i].flops * tasks[i].count / 1e6);
    }
    printf("%d unique convolution workloads over %d conv layers, %.3f GFLOP\n", ntasks, nconv, total / 1e9);
}

int mt_cmd_tasks(int argc, char **argv) {
    enum { O_BATCH, O_IMAGE, O_LAYERS, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_BATCH] = {.name = "batch", .short_name = 'b', .takes_value = 1},
        [O_IMAGE] = {.name = "image-size", .takes_value = 1},
        [O_LAYERS] = {.name = "layers"},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int rc = mt_cli_begin("tasks", argc, argv, opts, O_COUNT, pos, 1, 1, "one MODEL", help);
    if (rc >= 0) return rc;
    int batch = 1, image_size = 224;
    if (mt_opt_set_int("tasks", &opts[O_BATCH], 1, 1000000, &batch) || mt_opt_set_int("tasks", &opts[O_IMAGE], 1, 1000000, &image_size))
        return MT_EXIT_USAGE;
    mt_network *net = NULL;
    if ((rc = mt_cli_network("tasks", pos[0], batch, image_size, &net)) != MT_EXIT_OK) return rc;
    int json = opts[O_JSON].given;
    if (opts[O_LAYERS].given) {
        print_layers(net, json);
        mt_network_free(net);
        return MT_EXIT_OK;
    }
    mt_task *tasks = NULL;
    int ntasks = 0;
    mt_status st = mt_network_tasks(net, &tasks, &ntasks);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu tasks: %s\n", mt_status_str(st));
        mt_network_free(net);
        return MT_EXIT_FAIL;
    }
    print_tasks(net, tasks, ntasks, image_size, json);
    mt_tasks_free(tasks);
    mt_network_free(net);
    return MT_EXIT_OK;
}
