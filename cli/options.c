/* The option parser of the mtgpu commands and the start every command shares (cli.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int mt_opt_parse(const char *cmd, int argc, char **argv, mt_opt *opts, int nopts, const char **positional, int max_positional,
                 int *npositional, int *help) {
    *npositional = 0;
    *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = 1;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            for (i++; i < argc; i++) {
                if (*npositional >= max_positional) {
                    fprintf(stderr, "mtgpu %s: unexpected argument '%s'\n", cmd, argv[i]);
                    return MT_EXIT_USAGE;
                }
                positional[(*npositional)++] = argv[i];
            }
            break;
        }
        if (a[0] == '-' && a[1] != '\0') {
            mt_opt *o = NULL;
            const char *inline_val = NULL;
            if (a[1] == '-') {
                const char *name = a + 2;
                const char *eq = strchr(name, '=');
                size_t len = eq ? (size_t)(eq - name) : strlen(name);
                for (int j = 0; j < nopts; j++)
                    if (strlen(opts[j].name) == len && strncmp(opts[j].name, name, len) == 0) o = &opts[j];
                if (eq) inline_val = eq + 1;
            } else if (a[2] == '\0') {
                for (int j = 0; j < nopts; j++)
                    if (opts[j].short_name && opts[j].short_name == a[1]) o = &opts[j];
            }
            if (!o) {
                fprintf(stderr, "mtgpu %s: unknown option '%s' (see 'mtgpu %s --help')\n", cmd, a, cmd);
                return MT_EXIT_USAGE;
            }
            if (o->given) {
                fprintf(stderr, "mtgpu %s: option --%s given twice\n", cmd, o->name);
                return MT_EXIT_USAGE;
            }
            o->given = 1;
            if (o->takes_value) {
                if (inline_val) o->value = inline_val;
                else if (i + 1 < argc) o->value = argv[++i];
                else {
                    fprintf(stderr, "mtgpu %s: option --%s needs a value\n", cmd, o->name);
                    return MT_EXIT_USAGE;
                }
                /* An empty value never means "the default" or "none": leave the option out for that. */
                if (!o->value[0]) {
                    fprintf(stderr, "mtgpu %s: option --%s needs a value, got an empty one (leave the option out for its default)\n", cmd,
                            o->name);
                    return MT_EXIT_USAGE;
                }
            } else if (inline_val) {
                fprintf(stderr, "mtgpu %s: option --%s takes no value\n", cmd, o->name);
                return MT_EXIT_USAGE;
            }
            continue;
        }
        if (*npositional >= max_positional) {
            fprintf(stderr, "mtgpu %s: unexpected argument '%s' (see 'mtgpu %s --help')\n", cmd, a, cmd);
            return MT_EXIT_USAGE;
        }
        positional[(*npositional)++] = a;
    }
    return 0;
}

long long mt_opt_int(const char *cmd, const mt_opt *opt, long long min, long long max) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(opt->value, &end, 10);
    if (errno || !end || *end || end == opt->value || v < min || v > max) {
        fprintf(stderr, "mtgpu %s: --%s expects an integer in %lld..%lld, got '%s'\n", cmd, opt->name, min, max, opt->value);
        return -1;
    }
    return v;
}

int mt_opt_double(const char *cmd, const mt_opt *opt, double min, double max, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(opt->value, &end);
    if (errno || !end || *end || end == opt->value || !(v >= min && v <= max)) {
        fprintf(stderr, "mtgpu %s: --%s expects a number in [%g, %g], got '%s'\n", cmd, opt->name, min, max, opt->value);
        return -1;
    }
    *out = v;
    return 0;
}

/* 1 with the value in *v when opt was given and is valid, 0 when it was
 * not given, -1 (message printed) when malformed. */
static int given_int(const char *cmd, const mt_opt *opt, long long min, long long max, long long *v) {
    if (!opt->given) return 0;
    *v = mt_opt_int(cmd, opt, min, max);
    return *v < 0 ? -1 : 1;
}

int mt_opt_set_int(const char *cmd, const mt_opt *opt, long long min, long long max, int *out) {
    long long v;
    int r = given_int(cmd, opt, min, max, &v);
    if (r > 0) *out = (int)v;
    return r < 0 ? -1 : 0;
}

int mt_opt_set_ll(const char *cmd, const mt_opt *opt, long long min, long long max, long long *out) {
    long long v;
    int r = given_int(cmd, opt, min, max, &v);
    if (r > 0) *out = v;
    return r < 0 ? -1 : 0;
}

int mt_opt_set_u64(const char *cmd, const mt_opt *opt, long long min, long long max, uint64_t *out) {
    long long v;
    int r = given_int(cmd, opt, min, max, &v);
    if (r > 0) *out = (uint64_t)v;
    return r < 0 ? -1 : 0;
}

int mt_opt_set_secs(const char *cmd, const mt_opt *opt, long long min, long long max, double *out) {
    long long v;
    int r = given_int(cmd, opt, min, max, &v);
    if (r > 0) *out = (double)v;
    return r < 0 ? -1 : 0;
}

int mt_opt_set_double(const char *cmd, const mt_opt *opt, double min, double max, double *out) {
    return opt->given ? mt_opt_double(cmd, opt, min, max, out) : 0;
}

int mt_cli_begin(const char *cmd, int argc, char **argv, mt_opt *opts, int nopts, const char **positional, int max_positional,
                 int npositional, const char *expected, void (*help)(void)) {
    int npos, want_help;
    int rc = mt_opt_parse(cmd, argc, argv, opts, nopts, positional, max_positional, &npos, &want_help);
    if (rc) return rc;
    if (want_help) {
        help();
        return MT_EXIT_OK;
    }
    if (npositional >= 0 && npos != npositional) {
        fprintf(stderr, "mtgpu %s: expected %s (see 'mtgpu %s --help')\n", cmd, expected, cmd);
        return MT_EXIT_USAGE;
    }
    return -1;
}
