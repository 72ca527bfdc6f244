/* mtgpu refine: choose each convolution's config by timing candidates inside
 * the network (net/refine.h); `mtgpu tune NETWORK` ends with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mtgpu/records.h"
#include "refine.h"
#include "strbuf.h"

static void help(void) {
    mt_refine_params d = mt_refine_default_params();
    printf("usage: mtgpu refine MODEL [--db PATH] [--device D] [--batch N] [--candidates K] [--passes P]\n"
           "                    [--no-defaults] [--min-gain F] [--dry-run] [--json]\n"
           "\n"
           "Times each convolution's K fastest records and its default config inside the\n"
           "network, all sets in turns, and keeps per workload the one whose layers took\n"
           "the least device time. Then whole passes of the network with those configs, with\n"
           "every convolution's fastest record and with the default configs run in turns,\n"
           "and the fastest of the three is kept (a layer's time in a pass depends on its\n"
           "neighbours, so configs chosen one by one can lose together). A winner other\n"
           "than the fastest record is stored as a preference in the database, which\n"
           "'mtgpu run', 'mtgpu best' and the embedding API use from then on. 'mtgpu tune\n"
           "MODEL' runs this at its end.\n"
           "\n"
           "MODEL is one of:");
    mt_cli_print_network_names();
    printf("\n\n"
           "  --db PATH         tuning database (default: $MTGPU_DB or ~/.cache/mtgpu/tuning.db)\n"
           "  --device D        opencl:N or N (default: the first device)\n"
           "  --batch N         images per pass (default 1)\n"
           "  --candidates K    records per workload, fastest first (default %d, at most %d)\n"
           "  --passes P        profiled passes of each candidate set (default %d)\n"
           "  --no-defaults     leave the default configs out\n"
           "  --min-gain F      replace the fastest record only when faster by this fraction (default %.2f)\n"
           "  --dry-run         time and report, store nothing (the database is opened read-only)\n"
           "  --json            one JSON object with the results\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n",
           d.candidates, MT_REFINE_MAX_SETS - 1, d.passes, d.min_gain);
}

static const char *set_name(const mt_refine_result *r, int s, char *buf, size_t len) {
    if (r->set_rank[s] > 0) snprintf(buf, len, "rec%d", r->set_rank[s]);
    else snprintf(buf, len, "default");
    return buf;
}

static const char *outcome_name(mt_refine_outcome o) {
    switch (o) {
    case MT_REFINE_KEPT: return "kept";
    case MT_REFINE_FELL_BACK_FASTEST: return "fastest_records";
    case MT_REFINE_FELL_BACK_DEFAULTS: return "defaults";
    default: return "unchecked";
    }
}

static void print_result(const mt_refine_result *r, const char *model, int json) {
    char name[16];
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"type\": \"refine\", \"network\": ");
        mt__sb_json_str(&sb, model);
        mt__sb_append(&sb, ", \"sets\": [");
        for (int s = 0; s < r->nsets; s++) {
            mt__sb_append(&sb, s ? ", " : "");
            mt__sb_json_str(&sb, set_name(r, s, name, sizeof name));
        }
        mt__sb_printf(&sb, "], \"passes\": %d, \"fastest_ms\": %.6g, \"chosen_ms\": %.6g, \"stored\": %d, \"removed\": %d, \"wall_s\": %.3f, \"workloads\": [",
                      r->passes, r->fastest_ms, r->chosen_ms, r->stored, r->removed, r->wall_s);
        for (int w = 0; w < r->nchoices; w++) {
            const mt_refine_choice *c = &r->choices[w];
            char wtext[256];
            mt_workload_format(&c->wl, wtext, sizeof wtext);
            mt__sb_append(&sb, w ? ", {\"workload\": " : "{\"workload\": ");
            mt__sb_json_str(&sb, wtext);
            mt__sb_printf(&sb, ", \"layers\": %d, \"ms\": [", c->layers);
            for (int s = 0; s < r->nsets; s++) mt__sb_printf(&sb, "%s%.6g", s ? ", " : "", c->ms[s]);
            mt__sb_append(&sb, "], \"ratio\": [");
            for (int s = 0; s < r->nsets; s++) mt__sb_printf(&sb, "%s%.6g", s ? ", " : "", c->ratio[s]);
            mt__sb_append(&sb, "], \"same_as\": [");
            for (int s = 0; s < r->nsets; s++) mt__sb_printf(&sb, "%s%d", s ? ", " : "", c->same_as[s]);
            mt__sb_append(&sb, "], \"proposed\": ");
            mt__sb_json_str(&sb, set_name(r, c->proposed, name, sizeof name));
            mt__sb_append(&sb, ", \"kept\": ");
            mt__sb_json_str(&sb, set_name(r, c->chosen, name, sizeof name));
            mt__sb_append(&sb, ", \"template\": ");
            mt__sb_json_str(&sb, c->template_name[c->chosen]);
            mt__sb_append(&sb, ", \"config\": ");
            mt__sb_json_str(&sb, c->config[c->chosen]);
            mt__sb_append(&sb, "}");
        }
        mt__sb_append(&sb, "], \"check\": {\"outcome\": ");
        mt__sb_json_str(&sb, outcome_name(r->outcome));
        mt__sb_printf(&sb, ", \"rounds\": %d, \"kept_pass_ms\": %.6g, \"fastest_pass_ms\": %.6g, \"default_pass_ms\": %.6g, "
                           "\"kept_vs_default\": %.6g, \"fastest_vs_default\": %.6g}}",
                      r->check_rounds, r->kept_pass_ms, r->fastest_pass_ms, r->default_pass_ms, r->kept_vs_default, r->fastest_vs_default);
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
        return;
    }
    printf("\n%-52s %6s", "workload (device ms in the network, all its layers)", "layers");
    for (int s = 0; s < r->nsets; s++) printf(" %8s", set_name(r, s, name, sizeof name));
    printf("  kept\n");
    for (int w = 0; w < r->nchoices; w++) {
        const mt_refine_choice *c = &r->choices[w];
        char wtext[256];
        mt_workload_format(&c->wl, wtext, sizeof wtext);
        printf("%-52s %6d", wtext, c->layers);
        for (int s = 0; s < r->nsets; s++) {
            if (c->same_as[s] != s) printf(" %8s", set_name(r, c->same_as[s], name, sizeof name));
            else printf(" %8.3f", c->ms[s]);
        }
        printf("  %s", set_name(r, c->proposed, name, sizeof name));
        if (c->proposed) printf(" (%.2fx of rec1)", c->ratio[c->proposed]);
        if (c->chosen != c->proposed) printf(" -> %s", set_name(r, c->chosen, name, sizeof name));
        printf("\n");
    }
    printf("kept: the set with the lowest median, over the rounds, of its time / rec1's in the same round\n");
    if (r->outcome != MT_REFINE_UNCHECKED)
        printf("\nwhole passes in turns (%d rounds): the kept configs %.2f ms, the fastest records %.2f, the defaults %.2f; "
               "kept / defaults %.3f, fastest / defaults %.3f: %s\n",
               r->check_rounds, r->kept_pass_ms, r->fastest_pass_ms, r->default_pass_ms, r->kept_vs_default, r->fastest_vs_default,
               r->outcome == MT_REFINE_KEPT            ? "the kept configs stay"
               : r->outcome == MT_REFINE_FELL_BACK_FASTEST ? "every convolution falls back to its fastest record"
                                                         : "every convolution falls back to its default config");
    printf("\n%s convolutions in the network: %.2f ms with the fastest records, %.2f ms with the kept configs (%.3fx; %d passes per set)\n",
           model, r->fastest_ms, r->chosen_ms, r->chosen_ms > 0 ? r->fastest_ms / r->chosen_ms : 0, r->passes);
    printf("preferences: %d stored, %d removed; %.1f s\n", r->stored, r->removed, r->wall_s);
}

int mt_cli_refine_network(const char *model, int batch, const char *db_path, const char *device, const mt_refine_params *rp, int json,
                          int after_tune) {
    char err[4096];
    mt_network *net = NULL;
    int rc = mt_cli_network("refine", model, batch, 0, &net);
    if (rc != MT_EXIT_OK) return rc;
    rc = MT_EXIT_FAIL;
    mt_status st;
    mt_db *db = NULL;
    mt_device *dev = NULL;
    mt_refine_result res;
    memset(&res, 0, sizeof res);
    mt_db_params dbp = mt_db_default_params();
    dbp.readonly = !rp->store;
    dbp.create = 0;
    if ((st = mt_db_open(db_path, &dbp, &db, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "mtgpu refine: %s\n", err);
        goto out;
    }
    if ((rc = mt_cli_device("refine", device, &dev)) != MT_EXIT_OK) goto out;
    rc = MT_EXIT_FAIL;
    if (!json) {
        printf("refining %s on %s: %d candidate set%s (%d fastest records%s), %d profiled passes each\n", model, mt_device_get_info(dev)->name,
               rp->candidates + (rp->defaults != 0), rp->candidates + (rp->defaults != 0) == 1 ? "" : "s", rp->candidates,
               rp->defaults ? " and the defaults" : "", rp->passes);
        fflush(stdout);
    }
    if ((st = mt_network_refine(dev, net, db, rp, &res, err, sizeof err)) != MT_OK) {
        if (after_tune && st == MT_UNSUPPORTED) {
            /* The tuning itself succeeded; the records are kept and used as they are. */
            fprintf(stderr, "mtgpu tune: no in-network refinement on this device: %s\n", err);
            rc = MT_EXIT_OK;
            goto out;
        }
        fprintf(stderr, "mtgpu refine: %s\n", err);
        rc = st == MT_RANGE ? MT_EXIT_USAGE : MT_EXIT_FAIL;
        goto out;
    }
    print_result(&res, model, json);
    rc = MT_EXIT_OK;
out:
    mt_refine_result_free(&res);
    mt_device_close(dev);
    mt_db_close(db);
    mt_network_free(net);
    return rc;
}

int mt_cmd_refine(int argc, char **argv) {
    enum { O_DB, O_DEVICE, O_BATCH, O_CAND, O_PASSES, O_NODEF, O_GAIN, O_DRY, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_DB] = {.name = "db", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_BATCH] = {.name = "batch", .short_name = 'b', .takes_value = 1},
        [O_CAND] = {.name = "candidates", .short_name = 'k', .takes_value = 1},
        [O_PASSES] = {.name = "passes", .takes_value = 1},
        [O_NODEF] = {.name = "no-defaults"},
        [O_GAIN] = {.name = "min-gain", .takes_value = 1},
        [O_DRY] = {.name = "dry-run"},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int rc = mt_cli_begin("refine", argc, argv, opts, O_COUNT, pos, 1, 1, "one MODEL argument", help);
    if (rc >= 0) return rc;
    mt_refine_params rp = mt_refine_default_params();
    int batch = 1;
    if (mt_opt_set_int("refine", &opts[O_BATCH], 1, 4096, &batch) || mt_opt_set_int("refine", &opts[O_CAND], 1, MT_REFINE_MAX_SETS - 1, &rp.candidates) ||
        mt_opt_set_int("refine", &opts[O_PASSES], 1, 1000, &rp.passes))
        return MT_EXIT_USAGE;
    if (opts[O_GAIN].given) {
        char *end = NULL;
        double g = strtod(opts[O_GAIN].value, &end);
        if (!end || *end || end == opts[O_GAIN].value || !(g >= 0 && g < 1)) {
            fprintf(stderr, "mtgpu refine: --min-gain '%s' is not a fraction in [0, 1)\n", opts[O_GAIN].value);
            return MT_EXIT_USAGE;
        }
        rp.min_gain = g;
    }
    rp.defaults = !opts[O_NODEF].given;
    rp.store = !opts[O_DRY].given;
    return mt_cli_refine_network(pos[0], batch, opts[O_DB].value, opts[O_DEVICE].value, &rp, opts[O_JSON].given, 0);
}
