/* What the commands run on: a network of the zoo or one workload, and the device (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int mt_cli_network(const char *cmd, const char *name, int batch, int image_size, mt_network **out) {
    char err[4096] = "";
    mt_status st = mt_network_create(name, batch, image_size, out, err, sizeof err);
    if (st == MT_OK) return MT_EXIT_OK;
    fprintf(stderr, "mtgpu %s: %s\n", cmd, err[0] ? err : mt_status_str(st));
    /* An unknown network, or sizes it cannot take, are the caller's mistake. */
    return st == MT_NOT_FOUND || st == MT_RANGE || st == MT_INVALID_ARG ? MT_EXIT_USAGE : MT_EXIT_FAIL;
}

void mt_cli_print_network_names(void) {
    int count = 0;
    const char *const *names = mt_network_names(&count);
    for (int i = 0; i < count; i++) printf(" %s", names[i]);
}

int mt_cli_device(const char *cmd, const char *spec, mt_device **out) {
    char err[1024];
    mt_device_params dp = mt_device_default_params();
    mt_status st = mt_device_open(spec, &dp, out, err, sizeof err);
    if (st == MT_OK) return MT_EXIT_OK;
    fprintf(stderr, "mtgpu %s: %s\n", cmd, err);
    return st == MT_INVALID_ARG ? MT_EXIT_USAGE : MT_EXIT_FAIL;
}

int mt_cli_device_spec(const char *cmd, const char *spec) {
    char err[512];
    if (mt_device_spec_check(spec, err, sizeof err) == MT_OK) return MT_EXIT_OK;
    fprintf(stderr, "mtgpu %s: %s\n", cmd, err);
    return MT_EXIT_USAGE;
}

int mt_cli_target_open(const char *cmd, const char *text, int batch, mt_cli_target *t) {
    memset(t, 0, sizeof *t);
    if (strchr(text, '=')) {
        char err[1024];
        if (mt_workload_parse(text, &t->single.wl, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu %s: %s\n", cmd, err);
            return MT_EXIT_USAGE;
        }
        t->single.count = 1;
        t->single.flops = mt_workload_flops(&t->single.wl);
        t->tasks = &t->single;
        t->ntasks = 1;
        return MT_EXIT_OK;
    }
    mt_network *net = NULL;
    int rc = mt_cli_network(cmd, text, batch, 0, &net);
    if (rc != MT_EXIT_OK) return rc;
    mt_status st = mt_network_tasks(net, &t->owned, &t->ntasks);
    mt_network_free(net);
    if (st != MT_OK || t->ntasks == 0) {
        fprintf(stderr, "mtgpu %s: %s has no convolution tasks (%s)\n", cmd, text, mt_status_str(st));
        mt_cli_target_free(t);
        return MT_EXIT_FAIL;
    }
    t->tasks = t->owned;
    t->is_network = 1;
    return MT_EXIT_OK;
}

void mt_cli_target_free(mt_cli_target *t) {
    mt_tasks_free(t->owned);
    memset(t, 0, sizeof *t);
}
