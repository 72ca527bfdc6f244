/* --device of mtgpu tune as a list of devices (cli.h): one spec, a
 * comma-separated list, or `all` of one backend, resolved against the
 * devices there are and grouped by fingerprint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Most devices mt_device_list is asked for. */
#define MAX_LISTED 256

/* "all", "opencl:all", "cuda:all": the backend it names into *kind
 * (MT_BACKEND_COUNT: the first device's); 0 when text is not of that form. */
static int all_of(const char *text, mt_backend_kind *kind) {
    if (strcmp(text, "all") == 0) {
        *kind = MT_BACKEND_COUNT;
        return 1;
    }
    for (int b = 0; b < MT_BACKEND_COUNT; b++) {
        const char *name = mt_backend_name((mt_backend_kind)b);
        size_t n = strlen(name);
        if (strncmp(text, name, n) == 0 && strcmp(text + n, ":all") == 0) {
            *kind = (mt_backend_kind)b;
            return 1;
        }
    }
    return 0;
}

/* The listed device a well-formed spec names (an index into list), or -1. */
static int find_device(const char *spec, const mt_device_info *list, int count) {
    int want = -1;
    mt_backend_kind kind = MT_BACKEND_COUNT;
    for (int b = 0; b < MT_BACKEND_COUNT; b++) {
        const char *name = mt_backend_name((mt_backend_kind)b);
        size_t n = strlen(name);
        if (strncmp(spec, name, n) == 0 && (spec[n] == ':' || spec[n] == '\0')) {
            kind = (mt_backend_kind)b;
            want = spec[n] ? atoi(spec + n + 1) : 0;
        }
    }
    if (kind == MT_BACKEND_COUNT) {
        /* "N": the Nth device of the combined list, backends in order. */
        int n = atoi(spec), seen = 0;
        for (int b = 0; b < MT_BACKEND_COUNT; b++)
            for (int i = 0; i < count; i++)
                if (list[i].backend == (mt_backend_kind)b && seen++ == n) return i;
        return -1;
    }
    for (int i = 0; i < count; i++)
        if (list[i].backend == kind && list[i].index == want) return i;
    return -1;
}

/* Adds device d to out, in the group of its fingerprint, unless it is there already (then -1). */
static int add_device(mt_cli_devices *out, const mt_device_info *d) {
    char spec[32];
    snprintf(spec, sizeof spec, "%s:%d", mt_backend_name(d->backend), d->index);
    for (int k = 0; k < out->n; k++)
        if (strcmp(out->dev[k].spec, spec) == 0) return -1;
    mt_cli_device_entry *e = &out->dev[out->n++];
    snprintf(e->spec, sizeof e->spec, "%s", spec);
    snprintf(e->name, sizeof e->name, "%s", d->name);
    snprintf(e->fingerprint, sizeof e->fingerprint, "%s", d->fingerprint);
    e->group = -1;
    for (int k = 0; k < out->n - 1 && e->group < 0; k++)
        if (strcmp(out->dev[k].fingerprint, e->fingerprint) == 0) e->group = out->dev[k].group;
    if (e->group < 0) e->group = out->ngroups++;
    return 0;
}

int mt_cli_device_list(const char *cmd, const char *text, mt_cli_devices *out) {
    memset(out, 0, sizeof *out);
    mt_backend_kind kind;
    int every = text && all_of(text, &kind);
    /* One device: checked as ever, and opened later by the library. */
    if (!text || (!every && !strchr(text, ','))) return mt_cli_device_spec(cmd, text);
    if (!every) {
        for (const char *p = text; *p;) {
            char spec[64];
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= sizeof spec) {
                fprintf(stderr, "mtgpu %s: bad device list '%s': expected specs separated by commas (opencl:0,opencl:1)\n", cmd, text);
                return MT_EXIT_USAGE;
            }
            memcpy(spec, p, len);
            spec[len] = '\0';
            if (mt_cli_device_spec(cmd, spec) != MT_EXIT_OK) return MT_EXIT_USAGE;
            p += len + (p[len] == ',');
            if (p[-1] == ',' && !*p) {
                fprintf(stderr, "mtgpu %s: bad device list '%s': it ends with a comma\n", cmd, text);
                return MT_EXIT_USAGE;
            }
        }
    }
    mt_device_info *list = calloc(MAX_LISTED, sizeof *list);
    if (!list) {
        fprintf(stderr, "mtgpu %s: out of memory\n", cmd);
        return MT_EXIT_FAIL;
    }
    int count = 0;
    char notes[2048] = "";
    mt_status st = mt_device_list(list, MAX_LISTED, &count, notes, sizeof notes);
    if (count > MAX_LISTED) count = MAX_LISTED;
    int rc = MT_EXIT_OK;
    if (st != MT_OK || count == 0) {
        fprintf(stderr, "mtgpu %s: no device to list (%s)\n", cmd, notes[0] ? notes : mt_status_str(st));
        rc = MT_EXIT_FAIL;
    } else if (every) {
        if (kind == MT_BACKEND_COUNT) kind = list[0].backend;
        for (int i = 0; i < count && out->n < MT_CLI_MAX_DEVICES; i++)
            if (list[i].backend == kind) add_device(out, &list[i]);
        if (out->n == 0) {
            fprintf(stderr, "mtgpu %s: --device %s: no %s device is there\n", cmd, text, mt_backend_name(kind));
            rc = MT_EXIT_FAIL;
        }
    } else {
        for (const char *p = text; *p && rc == MT_EXIT_OK;) {
            char spec[64];
            size_t len = strcspn(p, ",");
            memcpy(spec, p, len);
            spec[len] = '\0';
            p += len + (p[len] == ',');
            int i = find_device(spec, list, count);
            if (i < 0) {
                fprintf(stderr, "mtgpu %s: no device %s (%d device%s: 'mtgpu devices' lists them)\n", cmd, spec, count, count == 1 ? "" : "s");
                rc = MT_EXIT_FAIL;
            } else if (out->n >= MT_CLI_MAX_DEVICES) {
                fprintf(stderr, "mtgpu %s: more than %d devices listed\n", cmd, MT_CLI_MAX_DEVICES);
                rc = MT_EXIT_USAGE;
            } else if (add_device(out, &list[i]) != 0) {
                fprintf(stderr, "mtgpu %s: --device %s names %s twice\n", cmd, text, spec);
                rc = MT_EXIT_USAGE;
            }
        }
    }
    free(list);
    if (rc != MT_EXIT_OK) out->n = out->ngroups = 0;
    return rc;
}

int mt_cli_device_group(const mt_cli_devices *d, int group, char *specs, size_t len) {
    size_t o = 0;
    int n = 0;
    specs[0] = '\0';
    for (int k = 0; k < d->n; k++) {
        if (d->dev[k].group != group) continue;
        int w = snprintf(specs + o, len - o, "%s%s", n ? "," : "", d->dev[k].spec);
        if (w < 0 || (size_t)w >= len - o) return -1;
        o += (size_t)w;
        n++;
    }
    return n;
}

void mt_cli_device_print_groups(FILE *f, const mt_cli_devices *d) {
    for (int g = 0; g < d->ngroups; g++) {
        int first = -1;
        for (int k = 0; k < d->n && first < 0; k++)
            if (d->dev[k].group == g) first = k;
        fprintf(f, "  fingerprint %s ('%s'):", d->dev[first].fingerprint, d->dev[first].name);
        for (int k = 0; k < d->n; k++)
            if (d->dev[k].group == g) fprintf(f, " %s", d->dev[k].spec);
        fprintf(f, "\n");
    }
}
