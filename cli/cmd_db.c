/* mtgpu best, import-autotvm, export-autotvm, merge-db: the tuning database
 * from the command line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "autotvm.h"
#include "file.h"
#include "mtgpu/records.h"
#include "select.h"
#include "template.h"
#include "mtgpu/device.h"
#include "mtgpu/net.h"
#include "strbuf.h"

int mt_cmd_best(int argc, char **argv);
int mt_cmd_import_autotvm(int argc, char **argv);
int mt_cmd_export_autotvm(int argc, char **argv);

#define MAX_FILES 256

static int is_hex16(const char *s) {
    if (!s || strlen(s) != 16) return 0;
    for (int i = 0; i < 16; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i])) return 0;
    return 1;
}

/* ---- best ---- */

static void best_help(void) {
    int count = 0;
    const char *const *names = mt_network_names(&count);
    printf("usage: mtgpu best TARGET [--db PATH] [--device D] [--batch N] [--json]\n"
           "\n"
           "Shows the config an inference server would run for each convolution of\n"
           "TARGET on a device: the config chosen inside the network by 'mtgpu refine'\n"
           "where there is one (source in-network:NETWORK), else the fastest valid record\n"
           "of the tuning database, or a default config that fits the device when the\n"
           "database has none.\n"
           "TARGET is a workload (e.g. c=64,h=56,w=56,k=64,r=3,s=3,pad=1) or a network:");
    for (int i = 0; i < count; i++) printf(" %s", names[i]);
    printf("\n"
           "\n"
           "  --db PATH    tuning database (default: $MTGPU_DB, else ~/.cache/mtgpu/tuning.db);\n"
           "               opened read-only; a missing default database means defaults only\n"
           "  --device D   opencl:N, cuda:N or N (a local device), or the 16-hex-digit\n"
           "               fingerprint of a device in the database (e.g. an imported AutoTVM\n"
           "               target); default: the first local device\n"
           "  --batch N    batch size of a network's workloads (default 1)\n"
           "  --json       one JSON object per workload: workload, count, template, config,\n"
           "               median_ms (null for defaults), gflops, from_db, source, device\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

static void print_best_row(const mt_workload *wl, int count, const mt_template *t, const mt_record *rec, int from_db, const char *fp,
                           int json) {
    char wtext[256];
    mt_workload_format(wl, wtext, sizeof wtext);
    double gflops = from_db && rec->median_ms > 0 ? mt_workload_flops(wl) / (rec->median_ms * 1e6) : 0;
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"workload\": ");
        mt__sb_json_str(&sb, wtext);
        mt__sb_printf(&sb, ", \"count\": %d, \"template\": ", count);
        mt__sb_json_str(&sb, mt_template_name(t));
        mt__sb_append(&sb, ", \"config\": ");
        mt__sb_json_str(&sb, rec->config);
        if (from_db) mt__sb_printf(&sb, ", \"median_ms\": %.6g, \"gflops\": %.4g", rec->median_ms, gflops);
        else mt__sb_append(&sb, ", \"median_ms\": null, \"gflops\": null");
        mt__sb_printf(&sb, ", \"from_db\": %s, \"source\": ", from_db ? "true" : "false");
        mt__sb_json_str(&sb, rec->source);
        mt__sb_append(&sb, ", \"device\": ");
        mt__sb_json_str(&sb, fp);
        mt__sb_append(&sb, "}");
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
        return;
    }
    if (from_db)
        printf("%-52s x%-3d %-9s %10.4f ms %8.1f GFLOP/s  db (%s)\n", wtext, count, mt_template_name(t), rec->median_ms, gflops, rec->source);
    else
        printf("%-52s x%-3d %-9s %13s %16s  default\n", wtext, count, mt_template_name(t), "-", "-");
    printf("    %s\n", rec->config);
}

int mt_cmd_best(int argc, char **argv) {
    mt_opt opts[] = {{.name = "db", .takes_value = 1}, {.name = "device", .takes_value = 1}, {.name = "batch", .takes_value = 1}, {.name = "json"}};
    const char *pos[1];
    int npos, want_help;
    int rc = mt_opt_parse("best", argc, argv, opts, 4, pos, 1, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        best_help();
        return MT_EXIT_OK;
    }
    if (npos != 1) {
        fprintf(stderr, "mtgpu best: expected one TARGET (a workload or a network; see 'mtgpu best --help')\n");
        return MT_EXIT_USAGE;
    }
    int json = opts[3].given;
    int batch = 1;
    if (opts[2].given) {
        long long b = mt_opt_int("best", &opts[2], 1, 4096);
        if (b < 0) return MT_EXIT_USAGE;
        batch = (int)b;
    }
    char err[1024] = "";

    /* The workloads. */
    mt_task *tasks = NULL;
    int ntasks = 0, free_tasks = 0;
    mt_task single;
    memset(&single, 0, sizeof single);
    if (strchr(pos[0], '=')) {
        mt_status st = mt_workload_parse(pos[0], &single.wl, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu best: %s\n", err);
            return MT_EXIT_USAGE;
        }
        single.count = 1;
        tasks = &single;
        ntasks = 1;
    } else {
        mt_network *net = NULL;
        mt_status st = mt_network_create(pos[0], batch, 0, &net, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu best: %s\n", err);
            return st == MT_NOT_FOUND || st == MT_RANGE ? MT_EXIT_USAGE : MT_EXIT_FAIL;
        }
        st = mt_network_tasks(net, &tasks, &ntasks);
        mt_network_free(net);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu best: %s: cannot list its convolutions: %s\n", pos[0], mt_status_str(st));
            return MT_EXIT_FAIL;
        }
        free_tasks = 1;
    }

    /* The database, read-only. */
    mt_db *db = NULL;
    char dbpath[4096] = "";
    if (opts[0].given) snprintf(dbpath, sizeof dbpath, "%s", opts[0].value);
    else if (mt_db_default_path(dbpath, sizeof dbpath, NULL, 0) != MT_OK) dbpath[0] = '\0';
    int ret = MT_EXIT_OK;
    if (dbpath[0] && (opts[0].given || access(dbpath, F_OK) == 0)) {
        mt_db_params p = mt_db_default_params();
        p.readonly = 1;
        mt_status st = mt_db_open(dbpath, &p, &db, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu best: %s\n", err);
            ret = MT_EXIT_FAIL;
            goto out;
        }
    } else if (!json) {
        printf("(no tuning database%s%s: default configs only)\n", dbpath[0] ? " at " : "", dbpath);
    }

    /* The device: a fingerprint in the database, else a local device. */
    mt_device_info info;
    memset(&info, 0, sizeof info);
    mt_device *dev = NULL;
    const char *spec = opts[1].given ? opts[1].value : NULL;
    if (spec && is_hex16(spec) && db && mt_db_get_device(db, spec, NULL, &info, NULL, 0) == MT_OK) {
        /* info rebuilt from the database */
    } else if (!(spec && is_hex16(spec)) && mt_cli_device_spec("best", spec) != MT_EXIT_OK) {
        ret = MT_EXIT_USAGE; /* neither a fingerprint nor a device spec */
        goto out;
    } else {
        mt_device_params dp = mt_device_default_params();
        mt_status st = mt_device_open(spec, &dp, &dev, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu best: cannot open device %s: %s%s\n", spec ? spec : "(first)", err,
                    spec && is_hex16(spec) ? " (no device with that fingerprint in the database either)" : "; give --device FINGERPRINT of a device in the database");
            ret = MT_EXIT_FAIL;
            goto out;
        }
        info = *mt_device_get_info(dev);
    }
    char fp[17];
    memcpy(fp, info.fingerprint, 16);
    fp[16] = '\0';
    if (!json) printf("device %s  %s\n", fp, info.name);

    double total_ms = 0;
    int all_db = 1;
    mt_select_result *sel = malloc(sizeof *sel);
    if (!sel) {
        fprintf(stderr, "mtgpu best: out of memory\n");
        ret = MT_EXIT_FAIL;
        ntasks = 0;
    }
    for (int i = 0; i < ntasks; i++) {
        mt_select_query q = mt_select_query_default(db, &tasks[i].wl, &info);
        mt_status st = mt_select_config(&q, sel, err, sizeof err);
        if (st != MT_OK) {
            char wtext[256];
            mt_workload_format(&tasks[i].wl, wtext, sizeof wtext);
            fprintf(stderr, "mtgpu best: %s: %s\n", wtext, err);
            ret = MT_EXIT_FAIL;
            continue;
        }
        if (sel->db_note[0]) fprintf(stderr, "mtgpu best: note: %s\n", sel->db_note);
        int from_db = sel->from != MT_SELECT_FROM_DEFAULT;
        print_best_row(&tasks[i].wl, tasks[i].count > 0 ? tasks[i].count : 1, sel->t, &sel->rec, from_db, fp, json);
        if (from_db) total_ms += sel->rec.median_ms * (tasks[i].count > 0 ? tasks[i].count : 1);
        else all_db = 0;
        mt_select_result_free(sel);
    }
    free(sel);
    if (!json && ntasks > 1) {
        if (all_db) printf("all %d workloads from the database: %.4f ms of convolutions per inference\n", ntasks, total_ms);
        else printf("%d workloads; some use default configs (not measured)\n", ntasks);
    }
    mt_device_close(dev);
out:
    mt_db_close(db);
    if (free_tasks) mt_tasks_free(tasks);
    return ret;
}

/* ---- import-autotvm ---- */

static void import_help(void) {
    printf("usage: mtgpu import-autotvm FILE... [--db PATH] [--json]\n"
           "\n"
           "Imports AutoTVM tuning logs (JSON lines, '-' for stdin) into the tuning\n"
           "database. conv2d_nchw records become `direct` records, depthwise_conv2d_nchw\n"
           "records `depthwise` ones, each on a device named after its AutoTVM target.\n"
           "Other lines are counted by reason and skipped; records already stored are\n"
           "counted as duplicates.\n"
           "\n"
           "  --db PATH   tuning database (default: $MTGPU_DB, else ~/.cache/mtgpu/tuning.db); a\n"
           "              missing file is created, its directory must exist\n"
           "  --json      one JSON object per file: file, lines, and a count per outcome\n"
           "\n"
           "Exit status: 0 when every file was read, 1 otherwise, 2 on bad usage.\n");
}

static void print_import(const char *file, const mt_autotvm_stats *s, mt_status st, const char *err, int json) {
    if (json) {
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"file\": ");
        mt__sb_json_str(&sb, file);
        mt__sb_printf(&sb, ", \"status\": \"%s\", \"lines\": %lld", mt_status_name(st), (long long)s->lines);
        for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++)
            mt__sb_printf(&sb, ", \"%s\": %lld", mt_autotvm_outcome_name((mt_autotvm_outcome)o), (long long)s->count[o]);
        mt__sb_append(&sb, ", \"unsupported_tasks\": {");
        for (int i = 0; i < s->ntasks; i++) {
            if (i) mt__sb_append(&sb, ", ");
            mt__sb_json_str(&sb, s->task_name[i]);
            mt__sb_printf(&sb, ": %lld", (long long)s->task_count[i]);
        }
        mt__sb_append(&sb, "}");
        if (st != MT_OK) {
            mt__sb_append(&sb, ", \"error\": ");
            mt__sb_json_str(&sb, err);
        }
        mt__sb_append(&sb, "}");
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
        return;
    }
    printf("%s: %lld lines", file, (long long)s->lines);
    for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++)
        if (s->count[o]) printf(", %s %lld", mt_autotvm_outcome_name((mt_autotvm_outcome)o), (long long)s->count[o]);
    printf("\n");
    for (int i = 0; i < s->ntasks; i++) printf("    unsupported task %s: %lld\n", s->task_name[i], (long long)s->task_count[i]);
    if (s->first_skip_line) printf("    first skipped line %lld: %s\n", (long long)s->first_skip_line, s->first_skip);
}

int mt_cmd_import_autotvm(int argc, char **argv) {
    mt_opt opts[] = {{.name = "db", .takes_value = 1}, {.name = "json"}};
    const char *pos[MAX_FILES];
    int npos, want_help;
    int rc = mt_opt_parse("import-autotvm", argc, argv, opts, 2, pos, MAX_FILES, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        import_help();
        return MT_EXIT_OK;
    }
    if (npos < 1) {
        fprintf(stderr, "mtgpu import-autotvm: expected at least one FILE (see 'mtgpu import-autotvm --help')\n");
        return MT_EXIT_USAGE;
    }
    int json = opts[1].given;
    char err[1024] = "";
    mt_db *db = NULL;
    mt_status st = mt_db_open(opts[0].given ? opts[0].value : NULL, NULL, &db, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu import-autotvm: %s\n", err);
        return MT_EXIT_FAIL;
    }
    if (!json) printf("database %s\n", mt_db_path(db));
    int ret = MT_EXIT_OK;
    mt_autotvm_stats total;
    memset(&total, 0, sizeof total);
    mt_autotvm_stats *s = malloc(sizeof *s);
    if (!s) {
        mt_db_close(db);
        return MT_EXIT_FAIL;
    }
    for (int i = 0; i < npos; i++) {
        err[0] = '\0';
        st = mt_autotvm_import(db, pos[i], s, err, sizeof err);
        print_import(pos[i], s, st, err, json);
        if (st != MT_OK) {
            fflush(stdout);
            fprintf(stderr, "mtgpu import-autotvm: %s\n", err);
            ret = MT_EXIT_FAIL;
        }
        total.lines += s->lines;
        for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++) total.count[o] += s->count[o];
    }
    if (!json && npos > 1) {
        printf("total: %lld lines", (long long)total.lines);
        for (int o = 0; o < MT_AUTOTVM_OUTCOME_COUNT; o++)
            if (total.count[o]) printf(", %s %lld", mt_autotvm_outcome_name((mt_autotvm_outcome)o), (long long)total.count[o]);
        printf("\n");
    }
    free(s);
    mt_db_close(db);
    return ret;
}

/* ---- export-autotvm ---- */

static void export_help(void) {
    printf("usage: mtgpu export-autotvm [--db PATH] [--device FP] [--workload W] [--out FILE]\n"
           "\n"
           "Writes the `direct` and `depthwise` records of the tuning database as an\n"
           "AutoTVM log (JSON lines) that TVM's autotvm.apply_history_best reads.\n"
           "Records of other templates, or with vec != 1 or stage_local != 1 (schedules\n"
           "AutoTVM does not have), are left out; counts go to stderr.\n"
           "\n"
           "  --db PATH      tuning database (default: $MTGPU_DB, else ~/.cache/mtgpu/tuning.db)\n"
           "  --device FP    only this device (16-hex-digit fingerprint)\n"
           "  --workload W   only this workload\n"
           "  --out FILE     write to FILE (default: stdout), through a temporary file in the\n"
           "                 same directory renamed into place: a failed export leaves FILE as it was\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int mt_cmd_export_autotvm(int argc, char **argv) {
    mt_opt opts[] = {{.name = "db", .takes_value = 1}, {.name = "device", .takes_value = 1}, {.name = "workload", .takes_value = 1},
                     {.name = "out", .short_name = 'o', .takes_value = 1}};
    const char *pos[1];
    int npos, want_help;
    int rc = mt_opt_parse("export-autotvm", argc, argv, opts, 4, pos, 0, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        export_help();
        return MT_EXIT_OK;
    }
    char err[1024] = "";
    mt_db_filter f;
    memset(&f, 0, sizeof f);
    if (opts[1].given) {
        if (!is_hex16(opts[1].value)) {
            fprintf(stderr, "mtgpu export-autotvm: --device expects a 16-hex-digit fingerprint, got '%s'\n", opts[1].value);
            return MT_EXIT_USAGE;
        }
        f.device = opts[1].value;
    }
    mt_workload wl;
    if (opts[2].given) {
        if (mt_workload_parse(opts[2].value, &wl, err, sizeof err) != MT_OK) {
            fprintf(stderr, "mtgpu export-autotvm: %s\n", err);
            return MT_EXIT_USAGE;
        }
        f.wl = &wl;
    }
    mt_db_params p = mt_db_default_params();
    p.readonly = 1;
    mt_db *db = NULL;
    mt_status st = mt_db_open(opts[0].given ? opts[0].value : NULL, &p, &db, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu export-autotvm: %s\n", err);
        return MT_EXIT_FAIL;
    }
    /* A file is written whole or not at all: a failed export (a full disk)
     * leaves the previous file as it was. */
    FILE *out = stdout;
    mt__atomic_file af;
    memset(&af, 0, sizeof af);
    if (opts[3].given && strcmp(opts[3].value, "-") != 0) {
        if ((st = mt__atomic_open(&af, opts[3].value, err, sizeof err)) != MT_OK) {
            fprintf(stderr, "mtgpu export-autotvm: %s\n", err);
            mt_db_close(db);
            return MT_EXIT_FAIL;
        }
        out = af.f;
    }
    mt_autotvm_export_stats es;
    st = mt_autotvm_export(db, out, &f, &es, err, sizeof err);
    const char *kept = "";
    if (af.f) {
        if (st == MT_OK) {
            st = mt__atomic_commit(&af, err, sizeof err); /* its message says the file was kept */
        } else {
            mt__atomic_abort(&af);
            kept = " (the output file is left as it was)";
        }
    }
    int ret = st == MT_OK ? MT_EXIT_OK : MT_EXIT_FAIL;
    if (st != MT_OK) fprintf(stderr, "mtgpu export-autotvm: %s%s\n", err, kept);
    fprintf(stderr, "exported %lld records; left out: %lld of other templates, %lld not expressible in AutoTVM, %lld unreadable\n",
            (long long)es.written, (long long)es.other_template, (long long)es.not_expressible, (long long)es.bad);
    mt_db_close(db);
    return ret;
}

/* ---- merge-db ---- */

static void merge_help(void) {
    printf("usage: mtgpu merge-db SOURCE... [--db PATH] [--json]\n"
           "\n"
           "Copies every device and record of the SOURCE tuning databases into the\n"
           "database at PATH (created if missing), e.g. to combine the records of\n"
           "several tuning runs or machines into one data set for `mtgpu train`.\n"
           "Records whose key (workload, template, config, device) is already there are\n"
           "left as they are; each record is committed as it is copied, so an\n"
           "interrupted merge can simply be run again. Sources are opened read-only.\n"
           "Damaged records (rows that do not decode, an unknown template, a config\n"
           "outside its template's space: those 'mtgpu best' passes over) are skipped,\n"
           "counted and named in a note on stderr.\n"
           "\n"
           "  --db PATH   the database to merge into (default: $MTGPU_DB, else\n"
           "              ~/.cache/mtgpu/tuning.db); a missing file is created, its\n"
           "              directory must exist\n"
           "  --json      one JSON object per source: path, records, inserted, present,\n"
           "              skipped, devices\n"
           "\n"
           "Exit status: 0 success, 1 failure (a source that cannot be opened or read,\n"
           "a record the destination refuses), 2 bad usage.\n");
}

typedef struct merge_ctx {
    mt_db *src, *dst;
    int64_t records, inserted, present;
    int64_t skipped;     /* damaged records left out: rows that do not decode, and records best would not use */
    char first_skip[512];
    int devices;
    mt_status st;
    char err[1024];
} merge_ctx;

/* Why rec is damaged (best would not read it: an unknown template, one that
 * does not take the workload, a config outside the template's space), or
 * NULL when it is sound. why holds the detail. */
static const char *record_damage(const mt_record *rec, char *why, size_t whylen) {
    const mt_template *t = mt_template_find(rec->template_name);
    if (!t) return snprintf(why, whylen, "unknown template '%s'", rec->template_name), why;
    if (!mt_template_accepts(t, &rec->wl)) return snprintf(why, whylen, "template '%s' does not take its workload", rec->template_name), why;
    mt_space sp;
    if (mt_template_space(t, &rec->wl, &sp) != MT_OK) return snprintf(why, whylen, "no space of '%s' for its workload", rec->template_name), why;
    mt_config cfg;
    char perr[256] = "";
    mt_status st = mt_config_parse(&sp, rec->config, &cfg, perr, sizeof perr);
    mt_space_free(&sp);
    if (st != MT_OK) return snprintf(why, whylen, "its config is not in the space of '%s': %s", rec->template_name, perr), why;
    return NULL;
}

static int merge_device(const mt_db_device *dev, void *user) {
    merge_ctx *c = user;
    mt_device_info info;
    mt_db_device row;
    if (mt_db_get_device(c->src, dev->fingerprint, &row, &info, NULL, 0) != MT_OK || !strcmp(row.backend, "unknown")) return 0;
    snprintf(info.fingerprint, sizeof info.fingerprint, "%s", dev->fingerprint);
    char why[512] = "";
    mt_status st = mt_db_put_device(c->dst, &info, why, sizeof why);
    if (st != MT_OK) {
        c->st = st;
        snprintf(c->err, sizeof c->err, "storing device %s: %s", dev->fingerprint, why);
        return 1;
    }
    c->devices++;
    return 0;
}

static int merge_record(const mt_record *rec, void *user) {
    merge_ctx *c = user;
    int inserted = 0;
    char why[512] = "";
    if (record_damage(rec, why, sizeof why)) {
        if (!c->skipped) snprintf(c->first_skip, sizeof c->first_skip, "record %lld: %s", (long long)rec->id, why);
        c->skipped++;
        return 0;
    }
    mt_status st = mt_db_put_record(c->dst, rec, &inserted, why, sizeof why);
    if (st != MT_OK) {
        c->st = st;
        snprintf(c->err, sizeof c->err, "storing record %lld: %s: %s", (long long)rec->id, mt_status_str(st), why);
        return 1;
    }
    c->records++;
    if (inserted) c->inserted++;
    else c->present++;
    return 0;
}

int mt_cmd_merge_db(int argc, char **argv) {
    mt_opt opts[] = {{.name = "db", .takes_value = 1}, {.name = "json"}};
    const char *pos[MAX_FILES];
    int npos, want_help;
    int rc = mt_opt_parse("merge-db", argc, argv, opts, 2, pos, MAX_FILES, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        merge_help();
        return MT_EXIT_OK;
    }
    if (npos < 1) {
        fprintf(stderr, "mtgpu merge-db: no source database given (see --help)\n");
        return MT_EXIT_USAGE;
    }
    int json = opts[1].given;
    char err[1024] = "";
    mt_db *dst = NULL;
    mt_status st = mt_db_open(opts[0].given ? opts[0].value : NULL, NULL, &dst, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu merge-db: %s\n", err);
        return MT_EXIT_FAIL;
    }
    int ret = MT_EXIT_OK;
    for (int i = 0; i < npos && ret == MT_EXIT_OK; i++) {
        mt_db_params sp = mt_db_default_params();
        sp.readonly = 1;
        merge_ctx c;
        memset(&c, 0, sizeof c);
        c.dst = dst;
        c.st = MT_OK;
        if ((st = mt_db_open(pos[i], &sp, &c.src, err, sizeof err)) != MT_OK) {
            fprintf(stderr, "mtgpu merge-db: %s\n", err);
            ret = MT_EXIT_FAIL;
            break;
        }
        struct stat s1, s2;
        if (stat(mt_db_path(c.src), &s1) == 0 && stat(mt_db_path(dst), &s2) == 0 && s1.st_dev == s2.st_dev && s1.st_ino == s2.st_ino) {
            fprintf(stderr, "mtgpu merge-db: %s is the destination itself\n", pos[i]);
            mt_db_close(c.src);
            ret = MT_EXIT_FAIL;
            break;
        }
        st = mt_db_for_each_device(c.src, merge_device, &c, err, sizeof err);
        int64_t undecodable = 0;
        if (st == MT_OK && c.st == MT_OK) st = mt_db_for_each_counted(c.src, NULL, merge_record, &c, &undecodable, err, sizeof err);
        /* Rows that do not decode were passed over, as best passes them: counted, not a failure. */
        if (st == MT_CORRUPT && undecodable > 0) {
            if (!c.skipped) snprintf(c.first_skip, sizeof c.first_skip, "%s", err);
            c.skipped += undecodable;
            st = MT_OK;
        }
        if (c.st != MT_OK) {
            fprintf(stderr, "mtgpu merge-db: %s: %s\n", pos[i], c.err);
            ret = MT_EXIT_FAIL;
        } else if (st != MT_OK) {
            fprintf(stderr, "mtgpu merge-db: reading %s: %s: %s\n", pos[i], mt_status_str(st), err);
            ret = MT_EXIT_FAIL;
        }
        if (json) {
            mt_strbuf sb = {0};
            mt__sb_append(&sb, "{\"path\": ");
            mt__sb_json_str(&sb, pos[i]);
            mt__sb_printf(&sb, ", \"records\": %lld, \"inserted\": %lld, \"present\": %lld, \"skipped\": %lld, \"devices\": %d, \"ok\": %s}",
                          (long long)c.records, (long long)c.inserted, (long long)c.present, (long long)c.skipped, c.devices,
                          ret == MT_EXIT_OK ? "true" : "false");
            if (!sb.failed) puts(sb.data);
            mt__sb_free(&sb);
        } else {
            printf("%s: %lld records, %lld new, %lld already there; %d devices\n", pos[i], (long long)c.records, (long long)c.inserted,
                   (long long)c.present, c.devices);
        }
        if (c.skipped) {
            fflush(stdout);
            fprintf(stderr, "mtgpu merge-db: note: %s: %lld damaged record%s skipped (first: %s)\n", pos[i], (long long)c.skipped,
                    c.skipped == 1 ? "" : "s", c.first_skip);
        }
        mt_db_close(c.src);
    }
    mt_db_close(dst);
    return ret;
}
