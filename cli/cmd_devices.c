#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "mtgpu/device.h"
#include "device-info-json.h"
#include "strbuf.h"

#define MAX_DEVICES 64

static void help(void) {
    printf("usage: mtgpu devices [--json]\n"
           "\n"
           "Lists the devices of every available backend, with their fingerprints.\n"
           "Backends that are not available say why.\n"
           "\n"
           "  --json   one JSON object per device on its own line, then one line\n"
           "           {\"notes\": [...]} with the unavailable backends\n");
}

int mt_cmd_devices(int argc, char **argv) {
    mt_opt opts[] = {{.name = "json"}};
    int rc = mt_cli_begin("devices", argc, argv, opts, 1, NULL, 0, 0, "no arguments", help);
    if (rc >= 0) return rc;
    int json = opts[0].given;
    static mt_device_info infos[MAX_DEVICES];
    char notes[2048] = "";
    int count = 0;
    mt_status st = mt_device_list(infos, MAX_DEVICES, &count, notes, sizeof notes);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu devices: %s\n", mt_status_str(st));
        return MT_EXIT_FAIL;
    }
    if (count > MAX_DEVICES) count = MAX_DEVICES;
    for (int i = 0; i < count; i++) {
        const mt_device_info *d = &infos[i];
        if (json) {
            /* The stored description with the spec that opens the device in front. */
            mt_strbuf sb = {0};
            mt__sb_printf(&sb, "{\"device\": \"%s:%d\", ", mt_backend_name(d->backend), d->index);
            mt_strbuf obj = {0};
            mt__device_info_json(&obj, d);
            if (!obj.failed) mt__sb_append(&sb, obj.data + 1);
            else sb.failed = 1;
            mt__sb_free(&obj);
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
        } else {
            printf("%s:%d  %s (%s)\n", mt_backend_name(d->backend), d->index, d->name, d->platform);
            printf("    driver %s; %d compute units at %d MHz; %.1f GiB global, %llu KiB local memory\n", d->driver, d->compute_units,
                   d->clock_mhz, (double)d->global_mem_bytes / (1 << 30), (unsigned long long)d->local_mem_bytes / 1024);
            printf("    max work-group %lld; float vector width %d; peak ~%.0f GFLOP/s; fingerprint %s\n", (long long)d->max_work_group_size,
                   d->native_vector_width, d->peak_gflops, d->fingerprint);
        }
    }
    /* Notes are one line per unavailable backend. */
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"notes\": [");
        int first = 1;
        for (char *line = strtok(notes, "\n"); line; line = strtok(NULL, "\n")) {
            if (!first) mt__sb_append(&sb, ", ");
            mt__sb_json_str(&sb, line);
            first = 0;
        }
        mt__sb_append(&sb, "]}");
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
    } else {
        if (count == 0) printf("no devices found\n");
        if (notes[0]) printf("%s%s", notes, notes[strlen(notes) - 1] == '\n' ? "" : "\n");
    }
    return count > 0 ? MT_EXIT_OK : MT_EXIT_FAIL;
}
