/* Knob spaces and configs: see conv/space.h.
 *
 * Option order follows AutoTVM's SplitSpace so that indices agree with
 * AutoTVM's for the same knobs: the inner parts are enumerated depth-first
 * with the LAST part varying slowest and the second part fastest, each over
 * its candidates in ascending order, and the first (outer) part is derived
 * (extent / product, or its ceiling for POW2). For extent 8 in 2 parts that is
 * [8,1], [4,2], [2,4], [1,8]. */
#include "space.h"
#include "fail.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most options one knob may have; more is almost certainly a mistake (an
 * extent with very many divisors split many ways) and would make the option
 * tables and linear lookups slow. */
#define MT__MAX_OPTIONS 100000
/* Longest config text mt_config_parse looks at. A legitimate text is at most
 * MT_MAX_KNOBS * (31 + 1 + 4 * 11 + 3 + 1) = 1280 characters. */
#define MT__CONFIG_TEXT_MAX 4096
/* Largest power of two that fits in an int: POW2 parts never exceed it. */
#define MT__POW2_MAX (1 << 30)

/* strlen that looks at no more than max bytes (strnlen without needing POSIX). */
static size_t bounded_len(const char *s, size_t max) {
    size_t n = 0;
    while (n < max && s[n]) n++;
    return n;
}

void mt_space_init(mt_space *sp, const char *template_name) {
    if (!sp) return;
    memset(sp, 0, sizeof *sp);
    if (template_name) snprintf(sp->template_name, sizeof sp->template_name, "%s", template_name);
}

void mt_space_free(mt_space *sp) {
    if (!sp) return;
    for (int i = 0; i < sp->nknobs && i < MT_MAX_KNOBS; i++) {
        free(sp->knobs[i].values);
        sp->knobs[i].values = NULL;
        sp->knobs[i].noptions = 0;
    }
    sp->nknobs = 0;
}

/* Knob names are identifiers, so that the text form "a=1,b=2x3" is never
 * ambiguous. */
static mt_status check_new_knob(const mt_space *sp, const char *name) {
    if (!sp || !name) return MT_INVALID_ARG;
    size_t len = bounded_len(name, MT_KNOB_NAME_LEN);
    if (len == 0 || len >= MT_KNOB_NAME_LEN) return MT_INVALID_ARG;
    for (size_t i = 0; i < len; i++) {
        char ch = name[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_')) return MT_INVALID_ARG;
    }
    if (sp->nknobs < 0 || sp->nknobs > MT_MAX_KNOBS) return MT_INVALID_ARG;
    for (int i = 0; i < sp->nknobs; i++)
        if (strcmp(sp->knobs[i].name, name) == 0) return MT_INVALID_ARG;
    if (sp->nknobs == MT_MAX_KNOBS) return MT_RANGE;
    return MT_OK;
}

/* ---- SPLIT enumeration ---- */

typedef struct split_gen {
    mt_split_policy policy;
    int64_t extent;
    int nparts;
    int64_t limit;     /* POW2: bound on the product of the inner parts */
    const int *cand;   /* ascending candidates for each inner part */
    int ncand;
    int stack[MT_MAX_SPLIT_PARTS]; /* stack[j]: part nparts-1-j (AutoTVM's tmp_stack) */
    int *out;          /* NULL: count only */
    int64_t count;
} split_gen;

static void split_emit(split_gen *g, int64_t prod) {
    if (g->out) {
        int *o = g->out + g->count * g->nparts;
        o[0] = (int)(g->policy == MT_SPLIT_FACTOR ? g->extent / prod : (g->extent + prod - 1) / prod);
        for (int j = 0; j < g->nparts - 1; j++) o[g->nparts - 1 - j] = g->stack[j];
    }
    g->count++;
}

/* Depth-first over the inner parts; stops counting past the cap. */
static void split_dfs(split_gen *g, int depth, int64_t prod) {
    if (g->count > MT__MAX_OPTIONS) return;
    if (depth == g->nparts - 1) {
        split_emit(g, prod);
        return;
    }
    for (int i = 0; i < g->ncand; i++) {
        int64_t p = prod * g->cand[i];
        if (g->policy == MT_SPLIT_FACTOR) {
            if (p > g->extent) break; /* candidates ascend */
            if (g->extent % p) continue;
        } else if (p > g->limit) {
            break;
        }
        g->stack[depth] = g->cand[i];
        split_dfs(g, depth + 1, p);
        if (g->count > MT__MAX_OPTIONS) return;
    }
}

/* Number of ordered factorizations of x into m factors:
 * the product over primes p^e of C(e + m - 1, m - 1); saturates above the cap. */
static int64_t count_factorizations(int64_t x, int m) {
    int64_t total = 1;
    for (int64_t p = 2; p * p <= x; p++) {
        if (x % p) continue;
        int e = 0;
        while (x % p == 0) x /= p, e++;
        int64_t c = 1;
        for (int i = 1; i < m; i++) c = c * (e + i) / i; /* C(e+m-1, m-1) built up exactly */
        total *= c;
        if (total > MT__MAX_OPTIONS) return MT__MAX_OPTIONS + 1;
    }
    if (x > 1) total *= m; /* one prime left, exponent 1: C(m, m-1) = m */
    return total > MT__MAX_OPTIONS ? MT__MAX_OPTIONS + 1 : total;
}

static mt_status push_knob(mt_space *sp, const char *name, mt_knob_kind kind, int nparts, int noptions, int *values) {
    mt_knob *k = &sp->knobs[sp->nknobs];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    k->kind = kind;
    k->nparts = nparts;
    k->noptions = noptions;
    k->values = values;
    sp->nknobs++;
    return MT_OK;
}

mt_status mt_space_add_split(mt_space *sp, const char *name, int extent, int nparts, mt_split_policy policy, int max_inner) {
    mt_status st = check_new_knob(sp, name);
    if (st != MT_OK) return st;
    if (extent < 1 || nparts < 1 || nparts > MT_MAX_SPLIT_PARTS) return MT_INVALID_ARG;
    if (policy != MT_SPLIT_FACTOR && policy != MT_SPLIT_POW2) return MT_INVALID_ARG;

    split_gen g = {.policy = policy, .extent = extent, .nparts = nparts};
    int *cand = NULL;
    int ncand = 0;
    if (policy == MT_SPLIT_FACTOR) {
        if (count_factorizations(extent, nparts) > MT__MAX_OPTIONS) return MT_RANGE;
        /* Divisors of extent in ascending order: small ones up to sqrt, then
         * their cofactors in reverse. An int has at most 1600 divisors. */
        int small[1600], nsmall = 0, ndiv = 0;
        for (int64_t d = 1; d * d <= extent; d++)
            if (extent % d == 0) small[nsmall++] = (int)d;
        cand = malloc(sizeof(int) * 2 * (size_t)nsmall);
        if (!cand) return MT_NOMEM;
        for (int i = 0; i < nsmall; i++) cand[ndiv++] = small[i];
        for (int i = nsmall - 1; i >= 0; i--) {
            int co = extent / small[i];
            if (co != small[i]) cand[ndiv++] = co;
        }
        ncand = ndiv;
    } else {
        int64_t limit;
        if (max_inner > 0) {
            limit = max_inner;
        } else {
            limit = 1;
            while (limit < extent) limit <<= 1;
        }
        if (limit > MT__POW2_MAX) limit = MT__POW2_MAX;
        g.limit = limit;
        cand = malloc(sizeof(int) * 32);
        if (!cand) return MT_NOMEM;
        for (int64_t v = 1; v <= limit; v <<= 1) cand[ncand++] = (int)v;
    }
    g.cand = cand;
    g.ncand = ncand;

    split_dfs(&g, 0, 1);
    if (g.count > MT__MAX_OPTIONS) {
        free(cand);
        return MT_RANGE;
    }
    int64_t noptions = g.count;
    int *values = malloc(sizeof(int) * (size_t)noptions * (size_t)nparts);
    if (!values) {
        free(cand);
        return MT_NOMEM;
    }
    g.out = values;
    g.count = 0;
    split_dfs(&g, 0, 1);
    free(cand);
    return push_knob(sp, name, MT_KNOB_SPLIT, nparts, (int)noptions, values);
}

mt_status mt_space_add_enum(mt_space *sp, const char *name, const int *values, int n) {
    mt_status st = check_new_knob(sp, name);
    if (st != MT_OK) return st;
    if (!values || n < 1) return MT_INVALID_ARG;
    if (n > MT__MAX_OPTIONS) return MT_RANGE;
    /* Duplicate values would make the text form ambiguous (two indices, one text). */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (values[i] == values[j]) return MT_INVALID_ARG;
    int *copy = malloc(sizeof(int) * (size_t)n);
    if (!copy) return MT_NOMEM;
    memcpy(copy, values, sizeof(int) * (size_t)n);
    return push_knob(sp, name, MT_KNOB_ENUM, 1, n, copy);
}

/* ---- indexing ---- */

uint64_t mt_space_size(const mt_space *sp) {
    if (!sp) return 0;
    uint64_t size = 1;
    for (int i = 0; i < sp->nknobs; i++) {
        uint64_t n = (uint64_t)sp->knobs[i].noptions;
        if (n == 0) return 0;
        if (size > UINT64_MAX / n) return UINT64_MAX;
        size *= n;
    }
    return size;
}

/* MT_RANGE when index >= mt_space_size (for a saturated size, any index
 * below UINT64_MAX decodes). */
mt_status mt_space_config_from_index(const mt_space *sp, uint64_t index, mt_config *cfg) {
    if (!sp || !cfg) return MT_INVALID_ARG;
    if (index >= mt_space_size(sp)) return MT_RANGE;
    mt_config c;
    memset(&c, 0, sizeof c);
    c.nknobs = sp->nknobs;
    for (int i = 0; i < sp->nknobs; i++) {
        uint64_t n = (uint64_t)sp->knobs[i].noptions;
        c.choice[i] = (int)(index % n);
        index /= n;
    }
    *cfg = c;
    return MT_OK;
}

/* UINT64_MAX for a config outside the space, or one whose index does not fit
 * in 64 bits (only possible when mt_space_size saturates). */
uint64_t mt_space_config_index(const mt_space *sp, const mt_config *cfg) {
    if (mt_space_check(sp, cfg) != MT_OK) return UINT64_MAX;
    uint64_t index = 0;
    for (int i = sp->nknobs - 1; i >= 0; i--) {
        uint64_t n = (uint64_t)sp->knobs[i].noptions;
        if (index > (UINT64_MAX - (uint64_t)cfg->choice[i]) / n) return UINT64_MAX;
        index = index * n + (uint64_t)cfg->choice[i];
    }
    return index;
}

mt_status mt_space_check(const mt_space *sp, const mt_config *cfg) {
    if (!sp || !cfg) return MT_INVALID_ARG;
    if (cfg->nknobs != sp->nknobs) return MT_INVALID_CONFIG;
    for (int i = 0; i < sp->nknobs; i++)
        if (cfg->choice[i] < 0 || cfg->choice[i] >= sp->knobs[i].noptions) return MT_INVALID_CONFIG;
    return MT_OK;
}

/* Independent uniform choices per knob are uniform over the product space. */
void mt_space_random(const mt_space *sp, uint64_t *rng, mt_config *cfg) {
    if (!sp || !rng || !cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->nknobs = sp->nknobs;
    for (int i = 0; i < sp->nknobs; i++) cfg->choice[i] = (int)mt_rng_below(rng, (uint64_t)sp->knobs[i].noptions);
}

/* Neighbours come knob by knob, options in index order. A cfg outside the
 * space has no neighbours (returns 0). */
int mt_space_neighbours(const mt_space *sp, const mt_config *cfg, mt_config *out, int max) {
    if (mt_space_check(sp, cfg) != MT_OK) return 0;
    int total = 0;
    for (int i = 0; i < sp->nknobs; i++) {
        for (int j = 0; j < sp->knobs[i].noptions; j++) {
            if (j == cfg->choice[i]) continue;
            if (out && total < max) {
                out[total] = *cfg;
                out[total].choice[i] = j;
            }
            total++;
        }
    }
    return total;
}

/* ---- text form ---- */

static int find_knob(const mt_space *sp, const char *name, size_t len) {
    if (len == 0 || len >= MT_KNOB_NAME_LEN) return -1;
    for (int i = 0; i < sp->nknobs; i++)
        if (strncmp(sp->knobs[i].name, name, len) == 0 && sp->knobs[i].name[len] == '\0') return i;
    return -1;
}

const int *mt_config_get(const mt_space *sp, const mt_config *cfg, const char *name) {
    if (!sp || !cfg || !name) return NULL;
    int i = find_knob(sp, name, bounded_len(name, MT_KNOB_NAME_LEN));
    if (i < 0 || i >= cfg->nknobs) return NULL;
    const mt_knob *k = &sp->knobs[i];
    if (cfg->choice[i] < 0 || cfg->choice[i] >= k->noptions) return NULL;
    return k->values + (size_t)cfg->choice[i] * (size_t)k->nparts;
}

/* 0 when the knob does not exist (a bug in the caller's template). */
int mt_config_value(const mt_space *sp, const mt_config *cfg, const char *name) {
    const int *v = mt_config_get(sp, cfg, name);
    return v ? v[0] : 0;
}

/* Appends like snprintf at offset *pos, tracking the full length. */
static void append(char *buf, size_t len, size_t *pos, const char *fmt, int a, const char *s) {
    char tmp[64];
    int n = s ? snprintf(tmp, sizeof tmp, fmt, s) : snprintf(tmp, sizeof tmp, fmt, a);
    if (n < 0) return;
    if (buf && *pos < len) {
        size_t room = len - *pos;
        size_t copy = (size_t)n < room - 1 ? (size_t)n : room - 1;
        memcpy(buf + *pos, tmp, copy);
        buf[*pos + copy] = '\0';
    }
    *pos += (size_t)n;
}

static void format_option(const mt_knob *k, int opt, char *buf, size_t len, size_t *pos) {
    const int *v = k->values + (size_t)opt * (size_t)k->nparts;
    for (int j = 0; j < k->nparts; j++) append(buf, len, pos, j ? "x%d" : "%d", v[j], NULL);
}

/* Writes "name=v,name=AxBxC" in knob order; returns the full length (as
 * snprintf does: truncated output is still NUL-terminated), or -1 (writing
 * "") for a config outside the space. */
int mt_config_format(const mt_space *sp, const mt_config *cfg, char *buf, size_t len) {
    if (buf && len > 0) buf[0] = '\0';
    if (mt_space_check(sp, cfg) != MT_OK) return -1;
    size_t pos = 0;
    for (int i = 0; i < sp->nknobs; i++) {
        const mt_knob *k = &sp->knobs[i];
        append(buf, len, &pos, i ? ",%s=" : "%s=", 0, k->name);
        format_option(k, cfg->choice[i], buf, len, &pos);
    }
    return pos > INT_MAX ? INT_MAX : (int)pos;
}

/* A decimal int: optional '-', digits, nothing else. */
static int parse_int(const char *s, size_t len, int *out) {
    size_t i = 0;
    int neg = 0;
    if (len > 0 && s[0] == '-') neg = 1, i = 1;
    if (i == len) return 0;
    int64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
        if (v > (int64_t)INT_MAX + 1) return 0;
    }
    if (neg) v = -v;
    if (v > INT_MAX || v < INT_MIN) return 0;
    *out = (int)v;
    return 1;
}

/* Parses the value of knob k; on success *opt is its option index, or -1 when
 * the value is well formed but not an option. Returns 0 if malformed. */
static int parse_value(const mt_knob *k, const char *s, size_t len, int *opt, int *nparts_seen) {
    int v[MT_MAX_SPLIT_PARTS];
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == 'x') {
            if (n == MT_MAX_SPLIT_PARTS) return 0;
            if (!parse_int(s + start, i - start, &v[n])) return 0;
            n++;
            start = i + 1;
        }
    }
    *nparts_seen = n;
    *opt = -1;
    if (n != k->nparts) return 1;
    for (int o = 0; o < k->noptions; o++) {
        const int *ov = k->values + (size_t)o * (size_t)k->nparts;
        if (memcmp(ov, v, sizeof(int) * (size_t)n) == 0) {
            *opt = o;
            break;
        }
    }
    return 1;
}

/* Errors: MT_PARSE for text that is not a well-formed config (garbage, empty
 * items, bad numbers, a knob given twice, overlong input); MT_INVALID_CONFIG
 * for well-formed text that does not belong to this space (unknown or missing
 * knob, wrong number of parts, a value that is not one of the knob's options).
 * Knobs may come in any order. */
mt_status mt_config_parse(const mt_space *sp, const char *text, mt_config *cfg, char *err, size_t errlen) {
    if (!sp || !text || !cfg) return mt__fail(err, errlen, MT_INVALID_ARG, "config: NULL argument");
    if (sp->nknobs < 0 || sp->nknobs > MT_MAX_KNOBS) return mt__fail(err, errlen, MT_INVALID_ARG, "config: corrupt space");
    size_t total = bounded_len(text, MT__CONFIG_TEXT_MAX + 1);
    if (total > MT__CONFIG_TEXT_MAX)
        return mt__fail(err, errlen, MT_PARSE, "config: text longer than %d characters", MT__CONFIG_TEXT_MAX);
    mt_config c;
    memset(&c, 0, sizeof c);
    c.nknobs = sp->nknobs;
    unsigned seen = 0;
    if (total == 0) {
        if (sp->nknobs == 0) {
            *cfg = c;
            return MT_OK;
        }
        return mt__fail(err, errlen, MT_PARSE, "config: empty text (knob '%s' missing)", sp->knobs[0].name);
    }
    size_t pos = 0;
    while (pos <= total) {
        const char *item = text + pos;
        const char *comma = memchr(item, ',', total - pos);
        size_t len = comma ? (size_t)(comma - item) : total - pos;
        const char *eq = memchr(item, '=', len);
        if (!eq)
            return mt__fail(err, errlen, MT_PARSE, "config: expected knob=value, got '%.*s'", (int)(len > 40 ? 40 : len), item);
        size_t klen = (size_t)(eq - item);
        int ki = find_knob(sp, item, klen);
        if (ki < 0) {
            char names[160] = "";
            size_t np = 0;
            for (int i = 0; i < sp->nknobs && np < sizeof names; i++)
                np += (size_t)snprintf(names + np, sizeof names - np, "%s%s", i ? "," : "", sp->knobs[i].name);
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "config: unknown knob '%.*s' (knobs: %s)", (int)(klen > 40 ? 40 : klen), item, names);
        }
        const mt_knob *k = &sp->knobs[ki];
        if (seen & (1u << ki)) return mt__fail(err, errlen, MT_PARSE, "config: knob '%s' given twice", k->name);
        seen |= 1u << ki;
        const char *val = eq + 1;
        size_t vlen = len - klen - 1;
        int opt = -1, nseen = 0;
        if (!parse_value(k, val, vlen, &opt, &nseen))
            return mt__fail(err, errlen, MT_PARSE, "config: knob '%s' has a bad value '%.*s' (expected %s)", k->name, (int)(vlen > 40 ? 40 : vlen),
                            val, k->kind == MT_KNOB_SPLIT ? "integers joined by 'x'" : "an integer");
        if (opt < 0) {
            char ex[96];
            size_t ep = 0;
            int shown = k->noptions < 3 ? k->noptions : 3;
            for (int o = 0; o < shown; o++) {
                if (o) append(ex, sizeof ex, &ep, "%s", 0, ", ");
                format_option(k, o, ex, sizeof ex, &ep);
            }
            if (nseen != k->nparts)
                return mt__fail(err, errlen, MT_INVALID_CONFIG, "config: knob '%s' takes %d part%s, got %d (e.g. %s)", k->name, k->nparts,
                                k->nparts == 1 ? "" : "s", nseen, ex);
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "config: knob '%s' has no option '%.*s' (%d options, e.g. %s%s)", k->name,
                            (int)(vlen > 40 ? 40 : vlen), val, k->noptions, ex, k->noptions > shown ? ", ..." : "");
        }
        c.choice[ki] = opt;
        if (!comma) break;
        pos += len + 1;
        if (pos == total) return mt__fail(err, errlen, MT_PARSE, "config: trailing comma");
    }
    for (int i = 0; i < sp->nknobs; i++)
        if (!(seen & (1u << i))) return mt__fail(err, errlen, MT_INVALID_CONFIG, "config: missing knob '%s'", sp->knobs[i].name);
    *cfg = c;
    return MT_OK;
}

/* ---- random numbers ---- */

uint64_t mt_rng_next(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Rejection sampling: draws below 2^64 mod n are redrawn, so every residue is
 * equally likely. n == 0 returns 0. */
uint64_t mt_rng_below(uint64_t *state, uint64_t n) {
    if (n == 0) return 0;
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n */
    for (;;) {
        uint64_t r = mt_rng_next(state);
        if (r >= threshold) return r % n;
    }
}
