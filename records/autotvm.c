/* AutoTVM log import and export: see records/autotvm.h.
 *
 * Every line is outside input: it goes through the bounded JSON parser and
 * every field is type- and range-checked before it is used. A line that does
 * not convert is counted under one reason and skipped; only a database or
 * read error stops an import. */
#include "autotvm.h"
#include "template.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "hash.h"
#include "fail.h"
#include "json.h"
#include "store-impl.h"
#include "strbuf.h"

/* Longest line read; longer ones are consumed and counted as malformed. */
#define MT__AUTOTVM_LINE_MAX ((size_t)1 << 20)
/* A line running on past this many bytes ends the import: no log has one,
 * and a stream without newlines (a device, a pipe) would never end. */
#define MT__AUTOTVM_RUNAWAY_MAX ((size_t)64 << 20)
/* Longest target string kept (device name and record source must hold it). */
#define MT__AUTOTVM_TARGET_MAX 128
/* Largest tensor dimension or conv attribute accepted from a log. */
#define MT__AUTOTVM_DIM_MAX 1000000
/* The cost AutoTVM writes for a failed measurement (seconds). */
#define MT__AUTOTVM_ERROR_COST 1e9

static const char *const outcome_names[] = {
#define MT__AUTOTVM_NAME(name, token, text) token,
    MT_AUTOTVM_OUTCOME_MAP(MT__AUTOTVM_NAME)
#undef MT__AUTOTVM_NAME
};
static const char *const outcome_texts[] = {
#define MT__AUTOTVM_TEXT(name, token, text) text,
    MT_AUTOTVM_OUTCOME_MAP(MT__AUTOTVM_TEXT)
#undef MT__AUTOTVM_TEXT
};

const char *mt_autotvm_outcome_name(mt_autotvm_outcome o) {
    return (int)o >= 0 && o < MT_AUTOTVM_OUTCOME_COUNT ? outcome_names[o] : "unknown";
}

const char *mt_autotvm_outcome_str(mt_autotvm_outcome o) {
    return (int)o >= 0 && o < MT_AUTOTVM_OUTCOME_COUNT ? outcome_texts[o] : "unknown";
}

void mt_autotvm_fingerprint(const char *target, char out[17]) {
    static const char tag[] = "autotvm-target";
    uint64_t h = mt__hash64(tag, sizeof tag, 0);
    h = mt__hash64(target ? target : "", target ? strlen(target) : 0, h);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* AutoTVM's MeasureErrorNo and our statuses. */
static mt_status status_of_error_no(int64_t e) {
    switch (e) {
    case 0: return MT_OK;
    case 1: return MT_INVALID_CONFIG; /* INSTANTIATION_ERROR */
    case 2:                           /* COMPILE_HOST */
    case 3: return MT_BUILD;          /* COMPILE_DEVICE */
    case 4: return MT_LAUNCH;         /* RUNTIME_DEVICE */
    case 5: return MT_WRONG_RESULT;   /* WRONG_ANSWER */
    case 6:                           /* BUILD_TIMEOUT */
    case 7: return MT_TIMEOUT;        /* RUN_TIMEOUT */
    default: return MT_DEVICE;        /* UNKNOWN_ERROR and anything newer */
    }
}

static int error_no_of_status(mt_status s) {
    switch (s) {
    case MT_OK: return 0;
    case MT_INVALID_CONFIG:
    case MT_UNSUPPORTED: return 1;
    case MT_BUILD: return 3;
    case MT_LAUNCH: return 4;
    case MT_WRONG_RESULT: return 5;
    case MT_TIMEOUT: return 7;
    default: return 8;
    }
}

static const char *error_no_name(int64_t e) {
    static const char *const names[] = {"NO_ERROR",       "INSTANTIATION_ERROR", "COMPILE_HOST",  "COMPILE_DEVICE", "RUNTIME_DEVICE",
                                        "WRONG_ANSWER",   "BUILD_TIMEOUT",       "RUN_TIMEOUT",   "UNKNOWN_ERROR"};
    return e >= 0 && e < (int64_t)(sizeof names / sizeof names[0]) ? names[e] : "unknown";
}

/* ---- decoding one line ---- */

typedef struct decoded {
    mt_autotvm_outcome outcome;
    char task[64];
} decoded;

static mt_autotvm_outcome skip(mt_autotvm_outcome o, char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static mt_autotvm_outcome skip(mt_autotvm_outcome o, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return o;
}

/* An int in 1..MT__AUTOTVM_DIM_MAX (0..max when allow_zero). */
static int dim(const mt_json *v, int allow_zero, int *out) {
    int64_t x;
    if (!mt__json_int(v, allow_zero ? 0 : 1, MT__AUTOTVM_DIM_MAX, &x)) return 0;
    *out = (int)x;
    return 1;
}

/* ["TENSOR", [a, b, c, d], dtype]: 1 ok, 0 malformed, -1 dtype not float32. */
static int tensor4(const mt_json *t, int out[4]) {
    const mt_json *kind = mt__json_at(t, 0), *shape = mt__json_at(t, 1), *dtype = mt__json_at(t, 2);
    if (!mt__json_is(t, MT_JSON_ARRAY) || !mt__json_is(kind, MT_JSON_STRING) || strcmp(kind->str, "TENSOR") != 0) return 0;
    if (!mt__json_is(shape, MT_JSON_ARRAY) || shape->count != 4 || !mt__json_is(dtype, MT_JSON_STRING)) return 0;
    for (int i = 0; i < 4; i++)
        if (!dim(mt__json_at(shape, (size_t)i), 0, &out[i])) return 0;
    return strcmp(dtype->str, "float32") == 0 ? 1 : -1;
}

/* An int or a list of n ints (n in {1, 2}, or 4 for padding): fills v[0..4). */
static int int_list(const mt_json *x, int allow_zero, int allow4, int v[4], int *n) {
    if (mt__json_is(x, MT_JSON_NUMBER)) {
        if (!dim(x, allow_zero, &v[0])) return 0;
        v[1] = v[2] = v[3] = v[0];
        *n = 1;
        return 1;
    }
    if (!mt__json_is(x, MT_JSON_ARRAY) || !(x->count == 1 || x->count == 2 || (allow4 && x->count == 4))) return 0;
    for (size_t i = 0; i < x->count; i++)
        if (!dim(mt__json_at(x, i), allow_zero, &v[i])) return 0;
    if (x->count == 1) v[1] = v[0];
    if (x->count <= 2) v[2] = v[0], v[3] = v[1];
    *n = (int)x->count;
    return 1;
}

/* The AutoTVM value of one of our knobs. */
typedef struct knob_value {
    const mt_json *v; /* the entity's value: an array for "sp", a number for "ot" */
    int split;
} knob_value;

/* Finds the entity named name; NULL if absent. */
static const mt_json *entity(const mt_json *ents, const char *name, size_t *pos) {
    size_t i = 0;
    for (const mt_json *e = ents->child; e; e = e->next, i++) {
        const mt_json *n = mt__json_at(e, 0);
        if (mt__json_is(n, MT_JSON_STRING) && strcmp(n->str, name) == 0) {
            if (pos) *pos = i;
            return e;
        }
    }
    return NULL;
}

/* Writes the value of split entity e for our knob k (resolving one -1 part)
 * to sb. Returns the outcome (IMPORTED when fine). */
static mt_autotvm_outcome split_value(const mt_json *e, const mt_knob *k, mt_strbuf *sb, char *err, size_t errlen) {
    const mt_json *kind = mt__json_at(e, 1), *val = mt__json_at(e, 2);
    if (!mt__json_is(kind, MT_JSON_STRING) || strcmp(kind->str, "sp") != 0 || !mt__json_is(val, MT_JSON_ARRAY))
        return skip(MT_AUTOTVM_UNSUPPORTED_TEMPLATE, err, errlen, "knob '%s' is not a split", k->name);
    if ((int)val->count != k->nparts)
        return skip(MT_AUTOTVM_NOT_IN_SPACE, err, errlen, "knob '%s' has %zu parts, our space %d", k->name, val->count, k->nparts);
    int64_t parts[MT_MAX_SPLIT_PARTS];
    int derive = -1;
    int64_t prod = 1;
    for (int i = 0; i < k->nparts; i++) {
        if (!mt__json_int(mt__json_at(val, (size_t)i), -1, MT__AUTOTVM_DIM_MAX, &parts[i]) || parts[i] == 0)
            return skip(MT_AUTOTVM_MALFORMED, err, errlen, "knob '%s': split parts must be positive integers or -1", k->name);
        if (parts[i] == -1) {
            if (derive >= 0) return skip(MT_AUTOTVM_MALFORMED, err, errlen, "knob '%s': more than one -1 part", k->name);
            derive = i;
        } else {
            prod *= parts[i];
            if (prod > MT__AUTOTVM_DIM_MAX) return skip(MT_AUTOTVM_NOT_IN_SPACE, err, errlen, "knob '%s': split too large", k->name);
        }
    }
    if (derive >= 0) {
        /* The extent is the product of any option of our (exact-factor) split. */
        int64_t extent = 1;
        for (int i = 0; i < k->nparts; i++) extent *= k->values[i];
        if (extent % prod)
            return skip(MT_AUTOTVM_NOT_IN_SPACE, err, errlen, "knob '%s': parts do not divide the extent %lld", k->name, (long long)extent);
        parts[derive] = extent / prod;
    }
    mt__sb_printf(sb, "%s=", k->name);
    for (int i = 0; i < k->nparts; i++) mt__sb_printf(sb, i ? "x%lld" : "%lld", (long long)parts[i]);
    return MT_AUTOTVM_IMPORTED;
}

static mt_autotvm_outcome other_value(const mt_json *e, const mt_knob *k, mt_strbuf *sb, char *err, size_t errlen) {
    const mt_json *kind = mt__json_at(e, 1), *val = mt__json_at(e, 2);
    int64_t v;
    if (!mt__json_is(kind, MT_JSON_STRING) || strcmp(kind->str, "ot") != 0)
        return skip(MT_AUTOTVM_UNSUPPORTED_TEMPLATE, err, errlen, "knob '%s' is not an 'ot' knob", k->name);
    if (!mt__json_int(val, INT32_MIN, INT32_MAX, &v)) return skip(MT_AUTOTVM_MALFORMED, err, errlen, "knob '%s': value is not an integer", k->name);
    mt__sb_printf(sb, "%s=%lld", k->name, (long long)v);
    return MT_AUTOTVM_IMPORTED;
}

/* Converts the entity list into our config text for space sp. */
static mt_autotvm_outcome convert_config(const mt_json *ents, int is_direct, const mt_space *sp, mt_strbuf *sb, char *err, size_t errlen) {
    static const char *const direct_knobs[] = {"tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx", "auto_unroll_max_step", "unroll_explicit"};
    static const char *const dw_knobs[] = {"tile_f", "tile_y", "tile_x", "auto_unroll_max_step", "unroll_explicit"};
    const char *const *names = is_direct ? direct_knobs : dw_knobs;
    size_t nnames = is_direct ? 8 : 5;
    if (ents->count != nnames)
        return skip(MT_AUTOTVM_UNSUPPORTED_TEMPLATE, err, errlen, "%zu knobs, AutoTVM's CUDA schedule has %zu", ents->count, nnames);
    for (const mt_json *e = ents->child; e; e = e->next)
        if (!mt__json_is(e, MT_JSON_ARRAY) || e->count != 3 || !mt__json_is(mt__json_at(e, 0), MT_JSON_STRING))
            return skip(MT_AUTOTVM_MALFORMED, err, errlen, "config entity is not [name, kind, value]");
    const mt_json *found[8] = {0};
    size_t pos[8] = {0};
    for (size_t i = 0; i < nnames; i++) {
        found[i] = entity(ents, names[i], &pos[i]);
        if (!found[i]) return skip(MT_AUTOTVM_UNSUPPORTED_TEMPLATE, err, errlen, "no knob '%s': not AutoTVM's CUDA schedule", names[i]);
    }
    if (is_direct && pos[4] > pos[5]) {
        /* The window splits map by position: the first splits the kernel
         * height (TVM 0.7.dev0 logs call it "tile_rx"). */
        const mt_json *t = found[4];
        found[4] = found[5];
        found[5] = t;
    }
    int first = 1;
    for (int i = 0; i < sp->nknobs; i++) {
        const mt_knob *k = &sp->knobs[i];
        if (!first) mt__sb_append(sb, ",");
        first = 0;
        if (strcmp(k->name, "vec") == 0 || strcmp(k->name, "stage_local") == 0) {
            /* AutoTVM's schedules: scalar inner loops, shared-memory stages. */
            mt__sb_printf(sb, "%s=1", k->name);
            continue;
        }
        const mt_json *e = NULL;
        for (size_t j = 0; j < nnames; j++)
            if (strcmp(names[j], k->name) == 0) e = found[j];
        if (!e) return skip(MT_AUTOTVM_NOT_IN_SPACE, err, errlen, "our knob '%s' has no AutoTVM counterpart", k->name);
        mt_autotvm_outcome o = k->kind == MT_KNOB_SPLIT ? split_value(e, k, sb, err, errlen) : other_value(e, k, sb, err, errlen);
        if (o != MT_AUTOTVM_IMPORTED) return o;
    }
    return MT_AUTOTVM_IMPORTED;
}

static mt_autotvm_outcome decode(const char *line, size_t len, mt_record *rec, char *target, size_t targetlen, decoded *d, char *err,
                                 size_t errlen) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    size_t start = 0;
    while (start < len && (line[start] == ' ' || line[start] == '\t')) start++;
    if (start == len) return skip(MT_AUTOTVM_BLANK, err, errlen, "blank line");
    if (line[start] == '#') return skip(MT_AUTOTVM_COMMENT, err, errlen, "comment");

    mt_json_limits lim = mt__json_default_limits();
    lim.max_bytes = MT__AUTOTVM_LINE_MAX;
    lim.max_depth = 16;
    lim.max_nodes = 20000;
    mt_json_doc *doc = NULL;
    char jerr[160];
    if (mt__json_parse(line + start, len - start, &lim, &doc, jerr, sizeof jerr) != MT_OK)
        return skip(MT_AUTOTVM_MALFORMED, err, errlen, "%s", jerr);
    mt_autotvm_outcome o = MT_AUTOTVM_MALFORMED;
    mt_space sp;
    mt_space_init(&sp, NULL);
    mt_strbuf cfgtext = {0};

    const mt_json *root = mt__json_root(doc);
    const mt_json *input = mt__json_get(root, "input"), *config = mt__json_get(root, "config"), *result = mt__json_get(root, "result");
    const mt_json *jtarget = mt__json_at(input, 0), *jtask = mt__json_at(input, 1), *args = mt__json_at(input, 2);
    const mt_json *ents = mt__json_get(config, "entity");
    const mt_json *costs = mt__json_at(result, 0), *jerrno = mt__json_at(result, 1), *allcost = mt__json_at(result, 2),
                  *stamp = mt__json_at(result, 3);
    const mt_json *tvmver = mt__json_get(root, "tvm_version");
    if (!mt__json_is(root, MT_JSON_OBJECT) || !mt__json_is(input, MT_JSON_ARRAY) || !mt__json_is(jtarget, MT_JSON_STRING) ||
        !mt__json_is(jtask, MT_JSON_STRING) || !mt__json_is(args, MT_JSON_ARRAY) || !mt__json_is(config, MT_JSON_OBJECT) ||
        !mt__json_is(ents, MT_JSON_ARRAY) || !mt__json_is(result, MT_JSON_ARRAY) || !mt__json_is(costs, MT_JSON_ARRAY) ||
        !mt__json_is(jerrno, MT_JSON_NUMBER) || !mt__json_is(allcost, MT_JSON_NUMBER) || !mt__json_is(stamp, MT_JSON_NUMBER)) {
        o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "not an AutoTVM record (needs input [target, task, args], config.entity, result [costs, error_no, all_cost, timestamp])");
        goto done;
    }
    snprintf(d->task, sizeof d->task, "%s", jtask->str);
    int is_direct = strncmp(jtask->str, "conv2d_nchw.", 12) == 0;
    int is_dw = strncmp(jtask->str, "depthwise_conv2d_nchw.", 22) == 0;
    if (!is_direct && !is_dw) {
        o = skip(MT_AUTOTVM_UNSUPPORTED_TEMPLATE, err, errlen, "task '%.60s' has no mtgpu template", jtask->str);
        goto done;
    }
    if (jtarget->len == 0 || jtarget->len > MT__AUTOTVM_TARGET_MAX) {
        o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "target string empty or longer than %d characters", MT__AUTOTVM_TARGET_MAX);
        goto done;
    }

    /* ---- the workload ---- */
    int in[4], w[4], stride[4], pad[4], dil[4], n;
    int ti = tensor4(mt__json_at(args, 0), in), tw = tensor4(mt__json_at(args, 1), w);
    if (args->count < 5 || !ti || !tw || !int_list(mt__json_at(args, 2), 0, 0, stride, &n) || !int_list(mt__json_at(args, 3), 1, 1, pad, &n) ||
        !int_list(mt__json_at(args, 4), 0, 0, dil, &n)) {
        o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "task arguments are not [data, kernel, strides, padding, dilation, out_dtype]");
        goto done;
    }
    const mt_json *odt = mt__json_at(args, 5);
    if (ti < 0 || tw < 0 || (odt && (!mt__json_is(odt, MT_JSON_STRING) || strcmp(odt->str, "float32") != 0))) {
        o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "only float32 tensors are supported");
        goto done;
    }
    if (pad[0] != pad[2] || pad[1] != pad[3]) {
        o = skip(MT_AUTOTVM_ASYMMETRIC_PADDING, err, errlen, "padding [%d, %d, %d, %d] is not symmetric", pad[0], pad[1], pad[2], pad[3]);
        goto done;
    }
    mt_workload wl = {.n = in[0], .c = in[1], .h = in[2], .w = in[3], .r = w[2], .s = w[3], .stride_h = stride[0], .stride_w = stride[1],
                      .pad_h = pad[0], .pad_w = pad[1], .dil_h = dil[0], .dil_w = dil[1]};
    if (is_direct) {
        /* weight [K, C/groups, R, S] */
        if (in[1] % w[1]) {
            o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "input channels %d not a multiple of the kernel's %d", in[1], w[1]);
            goto done;
        }
        wl.k = w[0];
        wl.groups = in[1] / w[1];
    } else {
        /* weight [C, multiplier, R, S] */
        if (w[0] != in[1] || (int64_t)w[1] * in[1] > MT__AUTOTVM_DIM_MAX) {
            o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "depthwise kernel [%d, %d, ...] does not match %d input channels", w[0], w[1], in[1]);
            goto done;
        }
        wl.k = in[1] * w[1];
        wl.groups = in[1];
    }
    char why[256];
    if (mt_workload_validate(&wl, why, sizeof why) != MT_OK) {
        o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "%s", why);
        goto done;
    }
    const mt_template *t = mt_template_find(is_direct ? "direct" : "depthwise");
    if (!t || !mt_template_accepts(t, &wl)) {
        o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "template '%s' does not accept this workload%s", is_direct ? "direct" : "depthwise",
                 is_dw && w[1] != 1 ? " (channel multiplier > 1)" : "");
        goto done;
    }
    if (mt_template_space(t, &wl, &sp) != MT_OK) {
        o = skip(MT_AUTOTVM_UNSUPPORTED_WORKLOAD, err, errlen, "template '%s' has no space for this workload", mt_template_name(t));
        goto done;
    }

    /* ---- the config ---- */
    o = convert_config(ents, is_direct, &sp, &cfgtext, err, errlen);
    if (o != MT_AUTOTVM_IMPORTED) goto done;
    if (cfgtext.failed) {
        o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "out of memory");
        goto done;
    }
    mt_config cfg;
    if (mt_config_parse(&sp, cfgtext.data, &cfg, why, sizeof why) != MT_OK) {
        o = skip(MT_AUTOTVM_NOT_IN_SPACE, err, errlen, "%s", why);
        goto done;
    }

    /* ---- the result ---- */
    int64_t eno;
    if (!mt__json_int(jerrno, 0, INT32_MAX, &eno) || !isfinite(stamp->num) || stamp->num < 0 || !isfinite(allcost->num)) {
        o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "result: bad error_no, all_cost or timestamp");
        goto done;
    }
    mt_record_init(rec);
    rec->wl = wl;
    snprintf(rec->template_name, sizeof rec->template_name, "%s", mt_template_name(t));
    mt_config_format(&sp, &cfg, rec->config, sizeof rec->config);
    uint64_t idx = mt_space_config_index(&sp, &cfg);
    rec->config_index = idx > (uint64_t)INT64_MAX ? -1 : (int64_t)idx;
    mt_autotvm_fingerprint(jtarget->str, rec->device);
    rec->status = status_of_error_no(eno);
    if (eno == 0) {
        if (costs->count == 0) {
            o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "result: no costs for a successful measurement");
            goto done;
        }
        for (const mt_json *c = costs->child; c; c = c->next) {
            if (!mt__json_is(c, MT_JSON_NUMBER) || !(c->num > 0) || !isfinite(c->num * 1e3)) {
                o = skip(MT_AUTOTVM_MALFORMED, err, errlen, "result: costs must be positive numbers");
                goto done;
            }
            if (rec->ncosts < MT_RECORD_MAX_COSTS) rec->costs_ms[rec->ncosts++] = c->num * 1e3;
        }
        rec->median_ms = mt__median(rec->costs_ms, rec->ncosts);
    } else {
        snprintf(rec->message, sizeof rec->message, "AutoTVM error_no %lld (%s)", (long long)eno, error_no_name(eno));
    }
    rec->timestamp = stamp->num;
    if (mt__json_is(tvmver, MT_JSON_STRING)) snprintf(rec->version, sizeof rec->version, "tvm %.26s", tvmver->str);
    else snprintf(rec->version, sizeof rec->version, "tvm");
    snprintf(rec->source, sizeof rec->source, "autotvm:%s", jtarget->str);
    if (target && targetlen) snprintf(target, targetlen, "%s", jtarget->str);
    o = MT_AUTOTVM_IMPORTED;
done:
    mt__sb_free(&cfgtext);
    mt_space_free(&sp);
    mt__json_free(doc);
    return o;
}

mt_autotvm_outcome mt_autotvm_decode(const char *line, size_t len, mt_record *rec, char *target, size_t targetlen, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!line || !rec) return skip(MT_AUTOTVM_MALFORMED, err, errlen, "NULL argument");
    decoded d;
    memset(&d, 0, sizeof d);
    mt_record *tmp = malloc(sizeof *tmp);
    if (!tmp) return skip(MT_AUTOTVM_MALFORMED, err, errlen, "out of memory");
    mt_autotvm_outcome o = decode(line, len, tmp, target, targetlen, &d, err, errlen);
    if (o == MT_AUTOTVM_IMPORTED) *rec = *tmp;
    free(tmp);
    return o;
}

/* ---- import ---- */

enum { LINE_READ = 1, LINE_END = 0, LINE_IOERR = -1, LINE_BINARY = -2, LINE_RUNAWAY = -3 };

/* Reads one line, keeping at most MT__AUTOTVM_LINE_MAX bytes of it: *len
 * gets the bytes kept, *toolong is set when the line was longer (the rest is
 * consumed, up to MT__AUTOTVM_RUNAWAY_MAX). Returns LINE_READ, LINE_END at
 * the end of the file, LINE_IOERR on a read error, LINE_BINARY at a NUL byte
 * (a JSON-lines log has none: /dev/zero, a binary file) and LINE_RUNAWAY for
 * a line past MT__AUTOTVM_RUNAWAY_MAX; the last two end the import, so that
 * no input keeps it reading for ever. */
static int read_line(FILE *f, char **buf, size_t *cap, size_t *len, int *toolong) {
    *len = 0;
    *toolong = 0;
    int c, any = 0;
    size_t total = 0;
    while ((c = getc(f)) != EOF) {
        any = 1;
        if (c == '\0') return LINE_BINARY;
        if (++total > MT__AUTOTVM_RUNAWAY_MAX) return LINE_RUNAWAY;
        if (*len < MT__AUTOTVM_LINE_MAX) {
            if (*len + 1 >= *cap) {
                size_t ncap = *cap ? *cap * 2 : 4096;
                if (ncap > MT__AUTOTVM_LINE_MAX + 1) ncap = MT__AUTOTVM_LINE_MAX + 1;
                char *nb = realloc(*buf, ncap);
                if (!nb) return LINE_IOERR;
                *buf = nb;
                *cap = ncap;
            }
            (*buf)[(*len)++] = (char)c;
        } else {
            *toolong = 1;
        }
        if (c == '\n') break;
    }
    if (ferror(f)) return LINE_IOERR;
    return any ? LINE_READ : LINE_END;
}

static void note_task(mt_autotvm_stats *s, const char *task) {
    for (int i = 0; i < s->ntasks; i++)
        if (strcmp(s->task_name[i], task) == 0) {
            s->task_count[i]++;
            return;
        }
    if (s->ntasks < MT_AUTOTVM_MAX_TASK_NAMES) {
        snprintf(s->task_name[s->ntasks], sizeof s->task_name[0], "%s", task);
        s->task_count[s->ntasks++] = 1;
    }
}

static mt_status put_target_device(mt_db *db, const char *target, const char *fp, char *err, size_t errlen) {
    mt_strbuf info = {0};
    mt__sb_append(&info, "{\"target\": ");
    mt__sb_json_str(&info, target);
    mt__sb_append(&info, "}");
    char platform[32];
    size_t k = strcspn(target, " ");
    snprintf(platform, sizeof platform, "%.*s", (int)(k < 31 ? k : 31), target);
    mt_status st = info.failed ? mt__fail(err, errlen, MT_NOMEM, "autotvm import: out of memory")
                               : mt__db_put_device_row(db, fp, "autotvm", platform, target, "", info.data, err, errlen);
    mt__sb_free(&info);
    return st;
}

mt_status mt_autotvm_import(mt_db *db, const char *path, mt_autotvm_stats *stats, char *err, size_t errlen) {
    mt_autotvm_stats local;
    mt_autotvm_stats *s = stats ? stats : &local;
    memset(s, 0, sizeof *s);
    if (!db || !path) return mt__fail(err, errlen, MT_INVALID_ARG, "autotvm import: NULL argument");
    int is_stdin = strcmp(path, "-") == 0;
    FILE *f = stdin;
    if (!is_stdin) {
        /* A path must name a regular file: a FIFO or a device may never end. */
        int fd = -1;
        char why[1024] = "";
        mt_status ost = mt__open_regular(path, &fd, NULL, why, sizeof why);
        if (ost != MT_OK) return mt__fail(err, errlen, MT_IO, "%s", why);
        if (!(f = fdopen(fd, "rb"))) {
            int e = errno;
            close(fd);
            return mt__fail(err, errlen, MT_IO, "cannot open %s: %s", path, strerror(e));
        }
    }
    char *buf = NULL;
    size_t cap = 0, len = 0;
    int toolong = 0, r = LINE_END;
    mt_status st = MT_OK;
    mt_record *rec = malloc(sizeof *rec);
    char last_fp[17] = "";
    if (!rec) st = mt__fail(err, errlen, MT_NOMEM, "autotvm import: out of memory");
    while (st == MT_OK && (r = read_line(f, &buf, &cap, &len, &toolong)) > 0) {
        s->lines++;
        /* A UTF-8 byte-order mark (editors on Windows write one) is not part of line 1's JSON. */
        if (s->lines == 1 && len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0) {
            memmove(buf, buf + 3, len - 3);
            len -= 3;
        }
        char why[256] = "";
        char target[MT__AUTOTVM_TARGET_MAX + 1] = "";
        decoded d;
        memset(&d, 0, sizeof d);
        mt_autotvm_outcome o;
        if (toolong) o = skip(MT_AUTOTVM_MALFORMED, why, sizeof why, "line longer than %zu bytes", MT__AUTOTVM_LINE_MAX);
        else o = decode(buf, len, rec, target, sizeof target, &d, why, sizeof why);
        if (o == MT_AUTOTVM_IMPORTED) {
            if (strcmp(last_fp, rec->device) != 0) {
                st = put_target_device(db, target, rec->device, err, errlen);
                if (st != MT_OK) break;
                memcpy(last_fp, rec->device, sizeof last_fp);
            }
            int inserted = 0;
            char dberr[512] = "";
            st = mt_db_put_record(db, rec, &inserted, dberr, sizeof dberr);
            if (st != MT_OK) {
                mt__fail(err, errlen, st, "%s (line %lld of %s)", dberr, (long long)s->lines, path);
                s->lines--;
                break;
            }
            if (!inserted) o = MT_AUTOTVM_DUPLICATE;
        }
        s->count[o]++;
        if (o == MT_AUTOTVM_UNSUPPORTED_TEMPLATE && d.task[0]) note_task(s, d.task);
        if (o != MT_AUTOTVM_IMPORTED && o != MT_AUTOTVM_DUPLICATE && o != MT_AUTOTVM_BLANK && o != MT_AUTOTVM_COMMENT && !s->first_skip_line) {
            s->first_skip_line = s->lines;
            snprintf(s->first_skip, sizeof s->first_skip, "%s: %.200s", mt_autotvm_outcome_str(o), why);
        }
    }
    if (st == MT_OK && r == LINE_IOERR)
        st = mt__fail(err, errlen, MT_IO, "reading %s failed after line %lld: %s", path, (long long)s->lines, strerror(errno));
    else if (st == MT_OK && r == LINE_BINARY)
        st = mt__fail(err, errlen, MT_PARSE, "%s: a NUL byte in line %lld: binary data, not an AutoTVM log (JSON lines); stopped there", path,
                      (long long)s->lines + 1);
    else if (st == MT_OK && r == LINE_RUNAWAY)
        st = mt__fail(err, errlen, MT_PARSE, "%s: line %lld runs past %zu MiB without a newline: not an AutoTVM log; stopped there", path,
                      (long long)s->lines + 1, MT__AUTOTVM_RUNAWAY_MAX >> 20);
    free(rec);
    free(buf);
    if (!is_stdin) fclose(f);
    return st;
}

/* ---- export ---- */

typedef struct export_ctx {
    mt_db *db;
    FILE *out;
    mt_autotvm_export_stats *stats;
    char fp[17];                          /* device of `target` */
    char target[MT__AUTOTVM_TARGET_MAX + 64];
    mt_status st;
} export_ctx;

/* The AutoTVM target a device's records are written under. */
static void target_of_device(mt_db *db, const char *fp, char *out, size_t len) {
    mt_db_device d;
    if (mt_db_get_device(db, fp, &d, NULL, NULL, 0) != MT_OK || strcmp(d.backend, "unknown") == 0) {
        snprintf(out, len, "opencl -model=device_%s", fp);
        return;
    }
    if (strcmp(d.backend, "autotvm") == 0) {
        snprintf(out, len, "%s", d.name);
        return;
    }
    char model[96];
    size_t n = 0;
    for (const char *p = d.name; *p && n + 1 < sizeof model; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        model[n++] = ok ? c : '_';
    }
    model[n] = '\0';
    snprintf(out, len, "%s -model=%s", strcmp(d.backend, "cuda") == 0 ? "cuda" : "opencl", n ? model : "unknown");
}

static int export_one(const mt_record *rec, void *user) {
    export_ctx *c = user;
    int is_direct = strcmp(rec->template_name, "direct") == 0, is_dw = strcmp(rec->template_name, "depthwise") == 0;
    if (!is_direct && !is_dw) {
        c->stats->other_template++;
        return 0;
    }
    const mt_template *t = mt_template_find(rec->template_name);
    mt_space sp;
    mt_config cfg;
    if (!t || mt_template_space(t, &rec->wl, &sp) != MT_OK) {
        c->stats->bad++;
        return 0;
    }
    if (mt_config_parse(&sp, rec->config, &cfg, NULL, 0) != MT_OK) {
        c->stats->bad++;
        mt_space_free(&sp);
        return 0;
    }
    if (mt_config_value(&sp, &cfg, "vec") != 1 || mt_config_value(&sp, &cfg, "stage_local") != 1) {
        c->stats->not_expressible++;
        mt_space_free(&sp);
        return 0;
    }
    if (strcmp(c->fp, rec->device) != 0) {
        target_of_device(c->db, rec->device, c->target, sizeof c->target);
        memcpy(c->fp, rec->device, sizeof c->fp);
    }
    const mt_workload *wl = &rec->wl;
    mt_strbuf sb = {0};
    mt__sb_append(&sb, "{\"input\": [");
    mt__sb_json_str(&sb, c->target);
    mt__sb_printf(&sb, ", \"%s\", [[\"TENSOR\", [%d, %d, %d, %d], \"float32\"], ", is_direct ? "conv2d_nchw.cuda" : "depthwise_conv2d_nchw.cuda",
                  wl->n, wl->c, wl->h, wl->w);
    if (is_direct) mt__sb_printf(&sb, "[\"TENSOR\", [%d, %d, %d, %d], \"float32\"], ", wl->k, wl->c / wl->groups, wl->r, wl->s);
    else mt__sb_printf(&sb, "[\"TENSOR\", [%d, %d, %d, %d], \"float32\"], ", wl->c, wl->k / wl->c, wl->r, wl->s);
    mt__sb_printf(&sb, "[%d, %d], [%d, %d, %d, %d], [%d, %d], \"float32\"], {}], ", wl->stride_h, wl->stride_w, wl->pad_h, wl->pad_w, wl->pad_h,
                  wl->pad_w, wl->dil_h, wl->dil_w);
    /* AutoTVM's index: mixed radix over its knobs (ours minus vec and stage_local), first fastest. */
    uint64_t index = 0, radix = 1;
    mt__sb_append(&sb, "\"config\": {\"index\": ");
    mt_strbuf ent = {0};
    int first = 1;
    for (int i = 0; i < sp.nknobs; i++) {
        const mt_knob *k = &sp.knobs[i];
        if (strcmp(k->name, "vec") == 0 || strcmp(k->name, "stage_local") == 0) continue;
        index += (uint64_t)cfg.choice[i] * radix;
        radix *= (uint64_t)k->noptions;
        const int *v = mt_config_get(&sp, &cfg, k->name);
        mt__sb_printf(&ent, "%s[\"%s\", \"%s\", ", first ? "" : ", ", k->name, k->kind == MT_KNOB_SPLIT ? "sp" : "ot");
        if (k->kind == MT_KNOB_SPLIT) {
            mt__sb_append(&ent, "[");
            for (int j = 0; j < k->nparts; j++) mt__sb_printf(&ent, "%s%d", j ? ", " : "", v[j]);
            mt__sb_append(&ent, "]]");
        } else {
            mt__sb_printf(&ent, "%d]", v[0]);
        }
        first = 0;
    }
    mt__sb_printf(&sb, "%llu, \"code_hash\": null, \"entity\": [%s]}, ", (unsigned long long)index, ent.data ? ent.data : "");
    mt__sb_free(&ent);
    double all = rec->build_s;
    mt__sb_append(&sb, "\"result\": [[");
    if (rec->status == MT_OK) {
        int n = rec->ncosts;
        for (int i = 0; i < n; i++) {
            mt__sb_printf(&sb, "%s%.17g", i ? ", " : "", rec->costs_ms[i] / 1e3);
            all += rec->costs_ms[i] / 1e3;
        }
        if (n == 0) {
            mt__sb_printf(&sb, "%.17g", rec->median_ms / 1e3);
            all += rec->median_ms / 1e3;
        }
    } else {
        mt__sb_printf(&sb, "%.17g", MT__AUTOTVM_ERROR_COST);
    }
    const char *tvmver = strncmp(rec->version, "tvm ", 4) == 0 && rec->version[4] ? rec->version + 4 : "0.7.dev0";
    mt__sb_printf(&sb, "], %d, %.17g, %.17g], \"version\": 0.2, \"tvm_version\": ", error_no_of_status(rec->status), all, rec->timestamp);
    mt__sb_json_str(&sb, tvmver);
    mt__sb_append(&sb, "}\n");
    mt_space_free(&sp);
    if (sb.failed) {
        mt__sb_free(&sb);
        c->st = MT_NOMEM;
        return 1;
    }
    if (fwrite(sb.data, 1, sb.len, c->out) != sb.len) {
        mt__sb_free(&sb);
        c->st = MT_IO;
        return 1;
    }
    mt__sb_free(&sb);
    c->stats->written++;
    return 0;
}

mt_status mt_autotvm_export(mt_db *db, FILE *out, const mt_db_filter *filter, mt_autotvm_export_stats *stats, char *err, size_t errlen) {
    mt_autotvm_export_stats local;
    export_ctx *c = calloc(1, sizeof *c);
    if (!c) return mt__fail(err, errlen, MT_NOMEM, "autotvm export: out of memory");
    c->stats = stats ? stats : &local;
    memset(c->stats, 0, sizeof *c->stats);
    if (!db || !out) {
        free(c);
        return mt__fail(err, errlen, MT_INVALID_ARG, "autotvm export: NULL argument");
    }
    c->db = db;
    c->out = out;
    c->st = MT_OK;
    mt_db_filter f;
    if (filter) f = *filter;
    else memset(&f, 0, sizeof f);
    f.order_by_median = 0;
    mt_status st = mt_db_for_each(db, &f, export_one, c, err, errlen);
    if (c->st != MT_OK) st = mt__fail(err, errlen, c->st, "autotvm export: %s", c->st == MT_IO ? strerror(errno) : "out of memory");
    if (st == MT_OK && fflush(out) != 0) st = mt__fail(err, errlen, MT_IO, "autotvm export: %s", strerror(errno));
    free(c);
    return st;
}
