/* mtgpu conv: build, check and time configs of one convolution. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "program.h"
#include "cuda_backend.h"
#include "mtgpu/device.h"
#include "measure.h"
#include "select.h"
#include "template.h"
#include "strbuf.h"

static void help(void) {
    printf("usage: mtgpu conv WORKLOAD [--template T] [--config CFG | --random N] [--seed S]\n"
           "                  [--device D] [--repeats N] [--cold] [--reference] [--source] [--json]\n"
           "\n"
           "Builds the kernel of each config, checks its output against the CPU\n"
           "reference and times it. WORKLOAD is e.g. n=1,c=64,h=56,w=56,k=64,r=3,s=3,stride=1,pad=1\n"
           "(n, stride, pad, dilation, groups optional; stride/pad/dilation take A or HxW).\n"
           "\n"
           "  --template T  direct, depthwise, gemm, kvec, wino, dwrow or stem (default: every template that accepts WORKLOAD)\n"
           "  --config CFG  one config in text form, e.g. as printed by this command; 'default':\n"
           "                each template's default config on the device (what the tuner measures\n"
           "                first and a network runs where nothing is tuned)\n"
           "  --random N    N random valid configs, drawn in turn from each template (default 3)\n"
           "  --seed S      random seed for configs and input data (default 1)\n"
           "  --device D    opencl:N, cuda:N or N (default: the first device)\n"
           "  --repeats N   timed runs at most (default 20; at least 3, until 30 ms are timed)\n"
           "  --cold        before every timed run take the weights out of the caches (a CPU device:\n"
           "                clflush), as a network's pass finds them; input and output stay warm, as the\n"
           "                layers before leave them. A device that cannot evict times warm (the JSON's\n"
           "                cold is then false)\n"
           "  --reference   also time the vendor library on the same data: on a CUDA device, cuDNN's\n"
           "                fastest algorithm with strict fp32 math (CUDNN_FMA_MATH, no TF32) and with\n"
           "                default math (TF32 tensor cores allowed); each config's line then shows\n"
           "                ratio = its ms / cuDNN's strict ms (above 1: slower than cuDNN), and cuDNN's\n"
           "                strict output is checked against the CPU reference too. Other devices have\n"
           "                no vendor reference: that is said, and the configs run as without it\n"
           "                (neither that nor a missing cuDNN changes the exit status)\n"
           "  --source      print each config's kernel source (OpenCL C and CUDA C) and its launch (work-groups\n"
           "                and work-items per axis) instead of running it\n"
           "  --json        one JSON object per config: template, config, index, ms, gflops,\n"
           "                max_rel_err, status (ok, build_error, launch_error, wrong_result,\n"
           "                invalid_config, ...), message; with --reference also cudnn_ms,\n"
           "                cudnn_default_ms, ratio (null where there is no reference) and reference\n"
           "                (cuDNN's version and algorithms, or why there is no reference)\n"
           "\n"
           "Exit status: 0 when every config ran correctly, 1 when one failed (or cuDNN failed on a\n"
           "CUDA device, or its output disagreed with the CPU reference), 2 on bad usage.\n");
}

typedef struct {
    const mt_template *t;
    mt_space space;
    int have_space;
} tmpl_space;

/* The vendor reference of this run, when --reference was given. */
typedef struct {
    int asked;
    int have;         /* cuDNN ran: res is valid */
    mt_cudnn_result res;
    char note[1100];  /* what ran, or why nothing did */
} vendor_ref;

static void json_ms_or_null(mt_strbuf *sb, const char *key, int have, double v) {
    if (have) mt__sb_printf(sb, ", \"%s\": %.6g", key, v);
    else mt__sb_printf(sb, ", \"%s\": null", key);
}

static void print_result(const mt_workload *wl, const mt_device_info *di, const char *tname, const char *cfg, uint64_t index,
                         const mt_measure_result *r, const vendor_ref *ref, int json) {
    int have_ratio = ref->have && r->status == MT_OK && r->median_ms > 0 && ref->res.strict_ms > 0;
    double ratio = have_ratio ? r->median_ms / ref->res.strict_ms : 0;
    if (json) {
        char wtext[256];
        mt_workload_format(wl, wtext, sizeof wtext);
        mt_strbuf sb = {0};
        mt__sb_append(&sb, "{\"workload\": ");
        mt__sb_json_str(&sb, wtext);
        mt__sb_printf(&sb, ", \"device\": \"%s:%d\", \"template\": ", mt_backend_name(di->backend), di->index);
        mt__sb_json_str(&sb, tname);
        mt__sb_append(&sb, ", \"config\": ");
        mt__sb_json_str(&sb, cfg);
        mt__sb_printf(&sb, ", \"index\": %llu, \"ms\": %.6g, \"min_ms\": %.6g, \"gflops\": %.4g, \"max_rel_err\": %.3g, \"build_s\": %.3f, \"repeats\": %d, \"cold\": %s, \"status\": ",
                      (unsigned long long)index, r->median_ms, r->min_ms, r->gflops, r->max_rel_err, r->build_s, r->repeats,
                      r->cold ? "true" : "false");
        mt__sb_json_str(&sb, mt_status_name(r->status));
        mt__sb_append(&sb, ", \"message\": ");
        mt__sb_json_str(&sb, r->message);
        if (ref->asked) {
            json_ms_or_null(&sb, "cudnn_ms", ref->have, ref->res.strict_ms);
            json_ms_or_null(&sb, "cudnn_default_ms", ref->have, ref->res.default_ms);
            json_ms_or_null(&sb, "ratio", have_ratio, ratio);
            mt__sb_append(&sb, ", \"reference\": ");
            mt__sb_json_str(&sb, ref->note);
        }
        mt__sb_append(&sb, "}");
        if (!sb.failed) puts(sb.data);
        mt__sb_free(&sb);
    } else {
        char vs[32] = "";
        if (ref->have) {
            if (have_ratio) snprintf(vs, sizeof vs, "%6.2fx cuDNN ", ratio);
            else snprintf(vs, sizeof vs, "%13s", "");
        }
        char status[40];
        snprintf(status, sizeof status, "%s%s", mt_status_name(r->status), r->cold ? " cold" : "");
        printf("%-9s %10.4f ms %8.1f GFLOP/s  err %-9.2g %-14s %s%s\n", tname, r->median_ms, r->gflops, r->max_rel_err, status, vs, cfg);
        if (r->status != MT_OK && r->message[0]) {
            /* First lines of the reason, indented. */
            char msg[sizeof r->message];
            snprintf(msg, sizeof msg, "%s", r->message);
            int lines = 0;
            for (char *line = strtok(msg, "\n"); line && lines < 8; line = strtok(NULL, "\n"), lines++) printf("          | %s\n", line);
        }
    }
    fflush(stdout);
}

static int print_source(const mt_template *t, const mt_workload *wl, const mt_space *sp, const mt_config *cfg) {
    char err[1024];
    mt_kernel *k = NULL;
    mt_status st = mt_template_build(t, wl, sp, cfg, &k, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "mtgpu conv: %s: %s\n", mt_status_str(st), err);
        return MT_EXIT_FAIL;
    }
    /* The launch, which the source alone does not say: what a program that
     * runs the printed kernel needs (bench/kernel_anatomy). */
    mt_kernel_resources res;
    if (mt_kernel_analyze(k, &res, err, sizeof err) == MT_OK)
        printf("// launch: %lldx%lldx%lld work-groups of %lldx%lldx%lld work-items\n", (long long)res.grid[0], (long long)res.grid[1],
               (long long)res.grid[2], (long long)res.block[0], (long long)res.block[1], (long long)res.block[2]);
    int rc = MT_EXIT_OK;
    for (int lang = MT_LANG_OPENCL; lang <= MT_LANG_CUDA; lang++) {
        char *src = NULL;
        st = mt_kernel_print(k, (mt_lang)lang, &src, err, sizeof err);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu conv: printing failed: %s\n", err);
            rc = MT_EXIT_FAIL;
            continue;
        }
        printf("// ---- %s ----\n%s\n", lang == MT_LANG_OPENCL ? "OpenCL C" : "CUDA C", src);
        free(src);
    }
    mt_kernel_free(k);
    return rc;
}

/* Times cuDNN for the bench's workload into ref and says what happened
 * (human output: one line; JSON: in each config's object). A device with
 * no vendor reference, or no cuDNN, is a note; cuDNN failing or computing
 * a wrong result on a CUDA device is a failure. */
static int run_reference(mt_conv_bench *bench, const mt_measure_params *mp, vendor_ref *ref, int json) {
    char err[1024];
    double e = -1;
    mt_cudnn_params cp = mt_cudnn_default_params();
    mt_status st = mt_conv_bench_cudnn(bench, &cp, mp, &ref->res, &e, err, sizeof err);
    const mt_cudnn_result *c = &ref->res;
    if (st == MT_OK) {
        ref->have = 1;
        snprintf(ref->note, sizeof ref->note, "cuDNN %s: strict %s (%d algorithms ran), default %s with %s math (%d ran); strict output error %.2g",
                 c->version, c->strict_algo, c->strict_algos_tried, c->default_algo, c->default_math, c->default_algos_tried, e);
        if (!json)
            printf("reference: cuDNN %s: %.4f ms strict fp32 (%s), %.4f ms default math (%s, %s); strict output err %.2g\n", c->version,
                   c->strict_ms, c->strict_algo, c->default_ms, c->default_algo, c->default_math, e);
        return MT_EXIT_OK;
    }
    int failure = st != MT_UNAVAILABLE && st != MT_UNSUPPORTED;
    snprintf(ref->note, sizeof ref->note, "%s%s", failure ? "cuDNN failed: " : "", err);
    if (failure) fprintf(stderr, "mtgpu conv: --reference: %s: %s\n", mt_status_str(st), err);
    else if (!json) printf("reference: %s\n", err);
    return failure ? MT_EXIT_FAIL : MT_EXIT_OK;
}

/* What the command line asks for. */
typedef struct {
    mt_workload wl;
    const char *template_name; /* NULL: every template that accepts wl */
    const char *config;        /* one config's text, or NULL: nrandom random ones */
    long long nrandom, seed, repeats;
    const char *device;
    int reference, source, json, cold;
} conv_request;

/* Returns -1 to go on, else the exit status. */
static int parse_conv_options(int argc, char **argv, conv_request *rq) {
    enum { O_TEMPLATE, O_CONFIG, O_RANDOM, O_SEED, O_DEVICE, O_REPEATS, O_COLD, O_REFERENCE, O_SOURCE, O_JSON, O_COUNT };
    mt_opt opts[O_COUNT] = {
        [O_TEMPLATE] = {.name = "template", .short_name = 't', .takes_value = 1},
        [O_CONFIG] = {.name = "config", .short_name = 'c', .takes_value = 1},
        [O_RANDOM] = {.name = "random", .short_name = 'n', .takes_value = 1},
        [O_SEED] = {.name = "seed", .takes_value = 1},
        [O_DEVICE] = {.name = "device", .short_name = 'd', .takes_value = 1},
        [O_REPEATS] = {.name = "repeats", .takes_value = 1},
        [O_COLD] = {.name = "cold"},
        [O_REFERENCE] = {.name = "reference"},
        [O_SOURCE] = {.name = "source"},
        [O_JSON] = {.name = "json"},
    };
    const char *pos[1];
    int rc = mt_cli_begin("conv", argc, argv, opts, O_COUNT, pos, 1, 1, "one WORKLOAD argument", help);
    if (rc >= 0) return rc;
    if (opts[O_CONFIG].given && opts[O_RANDOM].given) {
        fprintf(stderr, "mtgpu conv: --config and --random exclude each other\n");
        return MT_EXIT_USAGE;
    }
    if (opts[O_REFERENCE].given && opts[O_SOURCE].given) {
        fprintf(stderr, "mtgpu conv: --reference times the vendor library on a device; --source runs nothing\n");
        return MT_EXIT_USAGE;
    }
    char err[1024];
    if (mt_workload_parse(pos[0], &rq->wl, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu conv: %s\n", err);
        return MT_EXIT_USAGE;
    }
    rq->template_name = opts[O_TEMPLATE].value;
    rq->config = opts[O_CONFIG].value;
    rq->nrandom = 3, rq->seed = 1, rq->repeats = 20;
    rq->device = opts[O_DEVICE].value;
    rq->reference = opts[O_REFERENCE].given;
    rq->source = opts[O_SOURCE].given;
    rq->cold = opts[O_COLD].given;
    rq->json = opts[O_JSON].given;
    if (mt_opt_set_ll("conv", &opts[O_RANDOM], 1, 100000, &rq->nrandom) || mt_opt_set_ll("conv", &opts[O_SEED], 0, (long long)1 << 62, &rq->seed) ||
        mt_opt_set_ll("conv", &opts[O_REPEATS], 1, 100000, &rq->repeats))
        return MT_EXIT_USAGE;
    return -1;
}

#define MAX_TEMPLATES 8

/* The templates to draw from (--template, else every one that accepts the
 * workload) with their spaces. Returns the exit status; ts[0..*nts) hold
 * what was made, also on failure. */
static int template_spaces(const conv_request *rq, tmpl_space ts[MAX_TEMPLATES], int *nts) {
    *nts = 0;
    if (rq->template_name) {
        const mt_template *t = mt_template_find(rq->template_name);
        if (!t) {
            fprintf(stderr, "mtgpu conv: unknown template '%s' (templates:", rq->template_name);
            for (int i = 0; i < mt_template_count(); i++) fprintf(stderr, " %s", mt_template_name(mt_template_at(i)));
            fprintf(stderr, ")\n");
            return MT_EXIT_USAGE;
        }
        if (!mt_template_accepts(t, &rq->wl)) {
            fprintf(stderr, "mtgpu conv: template '%s' does not accept this workload\n", mt_template_name(t));
            return MT_EXIT_USAGE;
        }
        ts[(*nts)++] = (tmpl_space){.t = t};
    } else {
        for (int i = 0; i < mt_template_count() && *nts < MAX_TEMPLATES; i++)
            if (mt_template_accepts(mt_template_at(i), &rq->wl)) ts[(*nts)++] = (tmpl_space){.t = mt_template_at(i)};
    }
    if (*nts == 0) {
        fprintf(stderr, "mtgpu conv: no template accepts this workload\n");
        return MT_EXIT_FAIL;
    }
    for (int i = 0; i < *nts; i++) {
        mt_status st = mt_template_space(ts[i].t, &rq->wl, &ts[i].space);
        if (st != MT_OK) {
            fprintf(stderr, "mtgpu conv: could not build the space of '%s': %s\n", mt_template_name(ts[i].t), mt_status_str(st));
            return MT_EXIT_FAIL;
        }
        ts[i].have_space = 1;
    }
    return MT_EXIT_OK;
}

/* The configs to run: (template index, config) pairs. */
typedef struct {
    int *which;
    mt_config *cfgs;
    int n, cap;
} config_list;

/* --config: the first template whose space the text belongs to. */
static int parse_config(const conv_request *rq, const tmpl_space *ts, int nts, config_list *cl) {
    char errs[MAX_TEMPLATES][256];
    for (int i = 0; i < nts && cl->n == 0; i++) {
        if (mt_config_parse(&ts[i].space, rq->config, &cl->cfgs[0], errs[i], sizeof errs[i]) == MT_OK) {
            cl->which[0] = i;
            cl->n = 1;
        }
    }
    if (cl->n) return MT_EXIT_OK;
    fprintf(stderr, "mtgpu conv: the config does not belong to the space of %s:\n", nts > 1 ? "any accepting template" : "this template");
    for (int i = 0; i < nts; i++) fprintf(stderr, "  %s: %s\n", mt_template_name(ts[i].t), errs[i]);
    return MT_EXIT_USAGE;
}

/* --config default: each template's default config on dev (mt_default_config),
 * the one the tuner measures first and an executor runs without records. */
static int default_configs(const conv_request *rq, const tmpl_space *ts, int nts, mt_device *dev, config_list *cl) {
    for (int i = 0; i < nts; i++) {
        char err[512];
        if (mt_default_config(ts[i].t, &rq->wl, mt_device_get_info(dev), &ts[i].space, &cl->cfgs[cl->n], err, sizeof err) == MT_OK)
            cl->which[cl->n++] = i;
        else
            fprintf(stderr, "mtgpu conv: %s has no default config for this workload: %s\n", mt_template_name(ts[i].t), err);
    }
    return cl->n ? MT_EXIT_OK : MT_EXIT_FAIL;
}

/* --random: valid configs drawn from the templates in turn, giving up on a
 * template after many invalid draws; valid on dev, or without a device (to
 * print sources) any the template realises. */
static void draw_configs(const conv_request *rq, const tmpl_space *ts, int nts, mt_device *dev, config_list *cl) {
    mt_device_limits limits;
    const mt_device_limits *lim = NULL;
    if (dev) {
        limits = mt_device_get_limits(dev);
        lim = &limits;
    }
    uint64_t rng = (uint64_t)rq->seed * 0x9e3779b97f4a7c15ull + 1;
    int tries[MAX_TEMPLATES] = {0};
    const int max_tries = 2000;
    for (int turn = 0; cl->n < cl->cap; turn++) {
        int i = turn % nts, alive = 0;
        for (int j = 0; j < nts; j++) alive += tries[j] < max_tries;
        if (!alive) break;
        if (tries[i] >= max_tries) continue;
        mt_config c;
        for (;;) {
            tries[i]++;
            mt_space_random(&ts[i].space, &rng, &c);
            if (mt_template_check(ts[i].t, &rq->wl, &ts[i].space, &c, lim, NULL, 0) == MT_OK) {
                cl->which[cl->n] = i;
                cl->cfgs[cl->n++] = c;
                break;
            }
            if (tries[i] >= max_tries) break;
        }
    }
    if (cl->n < cl->cap) fprintf(stderr, "mtgpu conv: found only %d valid configs in %d draws per template\n", cl->n, max_tries);
}

/* Prints each config's source (--source), or measures it on the bench and
 * prints the result. Returns MT_EXIT_FAIL when one failed. */
static int run_configs(const conv_request *rq, const tmpl_space *ts, const config_list *cl, mt_device *dev, mt_conv_bench *bench,
                       const mt_measure_params *mp, const vendor_ref *ref) {
    int rc = MT_EXIT_OK;
    for (int j = 0; j < cl->n; j++) {
        const tmpl_space *s = &ts[cl->which[j]];
        char ctext[1024];
        mt_config_format(&s->space, &cl->cfgs[j], ctext, sizeof ctext);
        if (rq->source) {
            printf("// %s %s\n", mt_template_name(s->t), ctext);
            if (print_source(s->t, &rq->wl, &s->space, &cl->cfgs[j]) != MT_EXIT_OK) rc = MT_EXIT_FAIL;
            continue;
        }
        mt_measure_result r;
        mt_conv_bench_measure(bench, s->t, &s->space, &cl->cfgs[j], mp, &r);
        print_result(&rq->wl, mt_device_get_info(dev), mt_template_name(s->t), ctext, mt_space_config_index(&s->space, &cl->cfgs[j]), &r, ref,
                     rq->json);
        if (r.status != MT_OK) rc = MT_EXIT_FAIL;
    }
    return cl->n == 0 ? MT_EXIT_FAIL : rc;
}

/* The bench of the workload on dev (inputs, the reference output), and
 * the vendor library's time with --reference. Returns the exit status;
 * *ref_rc is MT_EXIT_FAIL when the vendor library failed (the configs still run). */
static int open_bench(const conv_request *rq, const mt_measure_params *mp, mt_device *dev, mt_conv_bench **bench, vendor_ref *ref, int *ref_rc) {
    char err[1024];
    if (mt_conv_bench_new(dev, &rq->wl, (uint64_t)rq->seed, bench, err, sizeof err) != MT_OK) {
        fprintf(stderr, "mtgpu conv: %s\n", err);
        return MT_EXIT_FAIL;
    }
    if (!rq->json) {
        char wtext[256];
        mt_workload_format(&rq->wl, wtext, sizeof wtext);
        const mt_device_info *di = mt_device_get_info(dev);
        printf("workload %s: %.1f MFLOP on %s:%d (%s)\n", wtext, mt_workload_flops(&rq->wl) / 1e6, mt_backend_name(di->backend), di->index, di->name);
    }
    *ref_rc = ref->asked ? run_reference(*bench, mp, ref, rq->json) : MT_EXIT_OK;
    return MT_EXIT_OK;
}

int mt_cmd_conv(int argc, char **argv) {
    conv_request rq = {0}; /* parse_conv_options sets only the fields its options name */
    int rc = parse_conv_options(argc, argv, &rq);
    if (rc >= 0) return rc;
    tmpl_space ts[MAX_TEMPLATES];
    int nts = 0;
    mt_device *dev = NULL;
    mt_conv_bench *bench = NULL;
    const int want_defaults = rq.config && strcmp(rq.config, "default") == 0;
    config_list cl = {.cap = want_defaults ? MAX_TEMPLATES : rq.config ? 1 : (int)rq.nrandom};
    rc = template_spaces(&rq, ts, &nts);
    if (rc == MT_EXIT_OK) {
        cl.which = calloc((size_t)cl.cap, sizeof *cl.which);
        cl.cfgs = calloc((size_t)cl.cap, sizeof *cl.cfgs);
        if (!cl.which || !cl.cfgs) {
            fprintf(stderr, "mtgpu conv: out of memory\n");
            rc = MT_EXIT_FAIL;
        }
    }
    /* A device to run configs (its limits decide which drawn configs are valid) or to give its default configs. */
    if (rc == MT_EXIT_OK && (!rq.source || want_defaults)) rc = mt_cli_device("conv", rq.device, &dev);
    if (rc == MT_EXIT_OK) {
        if (want_defaults) rc = default_configs(&rq, ts, nts, dev, &cl);
        else if (rq.config) rc = parse_config(&rq, ts, nts, &cl);
        else draw_configs(&rq, ts, nts, dev, &cl);
    }
    if (rc == MT_EXIT_OK) {
        mt_measure_params mp = mt_measure_default_params();
        mp.max_repeats = (int)rq.repeats;
        mp.cold = rq.cold;
        if (mp.min_repeats > mp.max_repeats) mp.min_repeats = mp.max_repeats;
        vendor_ref ref;
        memset(&ref, 0, sizeof ref);
        ref.asked = rq.reference;
        int ref_rc = MT_EXIT_OK;
        if (!rq.source) rc = open_bench(&rq, &mp, dev, &bench, &ref, &ref_rc);
        if (rc == MT_EXIT_OK) {
            rc = run_configs(&rq, ts, &cl, dev, bench, &mp, &ref);
            if (ref_rc != MT_EXIT_OK) rc = ref_rc;
        }
    }
    free(cl.which);
    free(cl.cfgs);
    mt_conv_bench_free(bench);
    mt_device_close(dev);
    for (int i = 0; i < nts; i++)
        if (ts[i].have_space) mt_space_free(&ts[i].space);
    return rc;
}
