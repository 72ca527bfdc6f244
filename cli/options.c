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
