/* mtgpu: the command-line front end. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mtgpu/version.h"

static const mt_cli_cmd commands[] = {
    {"devices", "list the devices of every available backend", mt_cmd_devices},
    {"conv", "build, check and time configs of one convolution", mt_cmd_conv},
    {"tasks", "list the unique convolution workloads of a network", mt_cmd_tasks},
    {"tune", "tune a network's convolutions (or one workload) and store every measurement", mt_cmd_tune},
    {"collect", "measure configs of generated workloads: training data for the cost models", mt_cmd_collect},
    {"best", "the config an inference server would use for a workload or network", mt_cmd_best},
    {"import-autotvm", "import AutoTVM tuning logs into the tuning database", mt_cmd_import_autotvm},
    {"export-autotvm", "write tuning records as an AutoTVM log", mt_cmd_export_autotvm},
    {"merge-db", "copy the devices and records of tuning databases into another", mt_cmd_merge_db},
    {"train", "train a GNN cost model (pooled, or meta-trained with --meta) on the records of a database", mt_cmd_train},
    {"eval-model", "rank held-out records with a cost model: pairwise accuracy, top-k", mt_cmd_eval_model},
    {"refine", "choose each convolution's config among its fastest records inside the network", mt_cmd_refine},
    {"run", "run a whole network forward with its tuned kernels and time it", mt_cmd_run},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtgpu COMMAND [OPTIONS]\n"
            "\n"
            "mtgpu generates convolution kernels (OpenCL C, CUDA C), compiles and times\n"
            "them on the device, and checks them against a reference.\n"
            "\n"
            "commands:\n");
    for (int i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-15s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "'mtgpu COMMAND --help' describes a command. Exit status, for every command:\n"
            "0 success, 1 failure, 2 bad usage (an empty option value included),\n"
            "130 interrupted (Ctrl-C).\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return MT_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return MT_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("mtgpu %s\n", MT_VERSION_STRING);
        return MT_EXIT_OK;
    }
    for (int i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "mtgpu: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return MT_EXIT_USAGE;
}
