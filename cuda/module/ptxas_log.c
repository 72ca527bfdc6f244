/* Parsing the resource report of ptxas and the nvJitLink finalizer.
 *
 * With -verbose, nvJitLink's info log holds two reports per kernel:
 *
 *   ptxas info    : Compiling entry function 'k' for 'sm_90'
 *   ptxas info    : Function properties for k
 *   ptxas         .     256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem
 *   info    : Function properties for 'k':
 *   info    : used 40 registers, used 1 barriers, 256 stack, 2048 bytes smem, 544 bytes cmem[0], 0 bytes lmem
 *
 * ptxas's figures are preferred: the finalizer's smem includes the 1 KiB per
 * block that the driver reserves on sm_80+, which does not count against the
 * 48 KiB static limit. The finalizer's line supplies cmem[0] and lmem, and
 * stands in for ptxas's where those are missing (older or newer formats).
 * "Function properties for" also appears for non-inlined device functions;
 * a stack-frame line belongs to the function named last, a register line to
 * the entry function compiled last. */
#include "ptxas_log.h"

#include <limits.h>
#include <string.h>

enum {
    F_REG = 1 << 0,
    F_BAR = 1 << 1,
    F_SMEM = 1 << 2,
    F_STACK = 1 << 3,
    F_SPST = 1 << 4,
    F_SPLD = 1 << 5,
    F_CMEM = 1 << 6,
    F_LMEM = 1 << 7,
};

typedef struct figures {
    int v[8];      /* indexed by the bit number of the F_ flag */
    unsigned seen; /* F_ flags */
} figures;

typedef struct span {
    const char *p;
    size_t n;
} span;

static const struct {
    const char *key;
    unsigned flag;
} keys[] = {
    {"registers", F_REG},         {"barriers", F_BAR},          {"bytes smem", F_SMEM},      {"bytes stack frame", F_STACK},
    {"stack", F_STACK},           {"bytes spill stores", F_SPST}, {"bytes spill loads", F_SPLD}, {"bytes cmem[0]", F_CMEM},
    {"bytes lmem", F_LMEM},
};

static int bit_of(unsigned flag) {
    int b = 0;
    while (flag > 1) {
        flag >>= 1;
        b++;
    }
    return b;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Reads "N key" items (separated by commas) from one line. A number glued to
 * a word, a bracket or a decimal point ("sm_90", "cmem[0]", "1.5 ms") is not
 * an item's count. */
static void parse_items(span line, figures *f) {
    const char *s = line.p;
    size_t n = line.n, i = 0;
    while (i < n) {
        if (!is_digit(s[i]) || (i > 0 && (is_word(s[i - 1]) || s[i - 1] == '[' || s[i - 1] == '.'))) {
            i++;
            continue;
        }
        long long v = 0;
        while (i < n && is_digit(s[i])) {
            if (v < INT_MAX) v = v * 10 + (s[i] - '0');
            i++;
        }
        if (v > INT_MAX) v = INT_MAX;
        if (i < n && (s[i] == '.' || is_word(s[i]))) continue; /* "163.724", "12ms" */
        while (i < n && is_space(s[i])) i++;
        size_t k = i;
        while (i < n && s[i] != ',') i++;
        size_t e = i;
        while (e > k && is_space(s[e - 1])) e--;
        for (size_t j = 0; j < sizeof keys / sizeof keys[0]; j++) {
            if (strlen(keys[j].key) == e - k && memcmp(keys[j].key, s + k, e - k) == 0) {
                f->v[bit_of(keys[j].flag)] = (int)v;
                f->seen |= keys[j].flag;
                break;
            }
        }
    }
}

/* The first occurrence of needle in the line, or NULL. */
static const char *find(span line, const char *needle) {
    size_t m = strlen(needle);
    if (m > line.n) return NULL;
    for (size_t i = 0; i + m <= line.n; i++)
        if (memcmp(line.p + i, needle, m) == 0) return line.p + i;
    return NULL;
}

/* The name after `after` in the line: quoted ('k' or 'k':) or bare to the end. */
static span name_after(span line, const char *after) {
    span r = {NULL, 0};
    const char *at = find(line, after);
    if (!at) return r;
    const char *p = at + strlen(after), *end = line.p + line.n;
    while (p < end && is_space(*p)) p++;
    if (p < end && *p == '\'') {
        const char *q = memchr(p + 1, '\'', (size_t)(end - p - 1));
        if (!q) return r;
        r.p = p + 1;
        r.n = (size_t)(q - p - 1);
        return r;
    }
    const char *e = end;
    while (e > p && (is_space(e[-1]) || e[-1] == ':')) e--;
    r.p = p;
    r.n = (size_t)(e - p);
    return r;
}

static int span_is(span s, const char *name) { return s.p && strlen(name) == s.n && memcmp(s.p, name, s.n) == 0; }

static int starts_with(span line, const char *prefix) {
    size_t i = 0, m = strlen(prefix);
    while (i < line.n && is_space(line.p[i])) i++;
    return line.n - i >= m && memcmp(line.p + i, prefix, m) == 0;
}

/* Steps *cur over one line of text; 0 at the end. */
static int next_line(const char **cur, span *line) {
    const char *p = *cur;
    if (!*p) return 0;
    size_t n = strcspn(p, "\n");
    line->p = p;
    line->n = n;
    *cur = p[n] ? p + n + 1 : p + n;
    return 1;
}

int mt__cuda_parse_info_log(const char *log, const char *name, mt_cuda_resources *out) {
    if (!log || !out) return 0;
    char first[256];
    if (!name || !*name) {
        /* The first entry function ptxas compiled, else the first the finalizer reported. */
        span fin = {NULL, 0}, ent = {NULL, 0};
        const char *cur = log;
        span line;
        while (next_line(&cur, &line)) {
            if (!ent.p && starts_with(line, "ptxas")) ent = name_after(line, "Compiling entry function");
            if (!fin.p && starts_with(line, "info")) fin = name_after(line, "Function properties for");
        }
        span pick = ent.p ? ent : fin;
        if (!pick.p || pick.n >= sizeof first) return 0;
        memcpy(first, pick.p, pick.n);
        first[pick.n] = '\0';
        name = first;
    }

    figures P = {{0}, 0}, F = {{0}, 0};
    span entry = {NULL, 0}, props = {NULL, 0}, fprops = {NULL, 0};
    const char *cur = log;
    span line;
    while (next_line(&cur, &line)) {
        if (starts_with(line, "ptxas")) {
            span s = name_after(line, "Compiling entry function");
            if (s.p) entry = s;
            s = name_after(line, "Function properties for");
            if (s.p) props = s;
            if (find(line, "stack frame") && span_is(props, name)) parse_items(line, &P);
            if (find(line, "Used ") && find(line, "registers") && span_is(entry, name)) parse_items(line, &P);
        } else if (starts_with(line, "info")) {
            span s = name_after(line, "Function properties for");
            if (s.p) fprops = s;
            else if (find(line, "registers") && span_is(fprops, name)) parse_items(line, &F);
        }
    }

#define PICK(flag, field)                                    \
    do {                                                     \
        if (P.seen & (flag)) (field) = P.v[bit_of(flag)];    \
        else if (F.seen & (flag)) (field) = F.v[bit_of(flag)]; \
    } while (0)
    PICK(F_REG, out->registers);
    PICK(F_BAR, out->barriers);
    PICK(F_SMEM, out->shared_bytes);
    PICK(F_SPST, out->spill_store_bytes);
    PICK(F_SPLD, out->spill_load_bytes);
    PICK(F_CMEM, out->const_bytes);
    int stack = -1, lmem = -1;
    PICK(F_STACK, stack);
    PICK(F_LMEM, lmem);
#undef PICK
    if (stack >= 0 || lmem >= 0) out->local_bytes = stack > lmem ? stack : lmem;
    return ((P.seen | F.seen) & F_REG) != 0;
}

/* ---- static shared memory declared in PTX ---- */

/* Bytes of one ".shared [.align N] [.vK] .tW name[d0][d1]...;" line; 0 when
 * the line is not such a declaration or cannot be read. */
static long long shared_decl_bytes(span line) {
    const char *p = line.p, *end = line.p + line.n;
    while (p < end && is_space(*p)) p++;
    if ((size_t)(end - p) < 8 || memcmp(p, ".shared", 7) != 0 || !is_space(p[7])) return 0;
    p += 7;
    long long width = 0, lanes = 1;
    for (;;) {
        while (p < end && is_space(*p)) p++;
        if (p >= end || *p != '.') break;
        const char *w = ++p;
        while (p < end && is_word(*p)) p++;
        size_t n = (size_t)(p - w);
        if (n == 5 && memcmp(w, "align", 5) == 0) {
            while (p < end && is_space(*p)) p++;
            while (p < end && is_digit(*p)) p++;
        } else if (n >= 2 && w[0] == 'v' && is_digit(w[1])) {
            lanes = w[1] - '0';
        } else if (n >= 2 && (w[0] == 'b' || w[0] == 'u' || w[0] == 's' || w[0] == 'f') && is_digit(w[1])) {
            long long bits = 0;
            for (size_t i = 1; i < n && is_digit(w[i]) && bits < 1024; i++) bits = bits * 10 + (w[i] - '0');
            width = bits / 8;
        } else {
            return 0;
        }
    }
    if (width <= 0) return 0;
    while (p < end && (is_word(*p) || *p == '$')) p++; /* the name */
    long long total = width * lanes;
    while (p < end && *p == '[') {
        long long d = 0;
        p++;
        if (p >= end || !is_digit(*p)) return 0; /* "[]": extern, dynamic */
        while (p < end && is_digit(*p)) {
            if (d < (1LL << 40)) d = d * 10 + (*p - '0');
            p++;
        }
        if (p >= end || *p != ']') return 0;
        p++;
        total = d > 0 && total <= (1LL << 40) / d ? total * d : (1LL << 40);
    }
    return total;
}

/* The name of the entry a ".entry name(" line declares. */
static span entry_name(span line) {
    span r = {NULL, 0};
    const char *at = find(line, ".entry");
    if (!at) return r;
    const char *p = at + 6, *end = line.p + line.n;
    if (p >= end || !is_space(*p)) return r;
    while (p < end && is_space(*p)) p++;
    const char *q = p;
    while (q < end && *q != '(' && !is_space(*q)) q++;
    r.p = p;
    r.n = (size_t)(q - p);
    return r;
}

long long mt__cuda_ptx_shared_bytes(const char *ptx, const char *name) {
    if (!ptx) return 0;
    long long module_scope = 0, mine = 0;
    int entries = 0, in_target = 0, depth = 0;
    const char *cur = ptx;
    span line;
    while (next_line(&cur, &line)) {
        const char *c = find(line, "//");
        if (c) line.n = (size_t)(c - line.p);
        if (depth == 0) {
            span e = entry_name(line);
            if (e.p) {
                entries++;
                in_target = (!name || !*name) ? entries == 1 : span_is(e, name);
            } else if (find(line, ".func")) {
                in_target = 0; /* a device function's body is no entry's */
            }
        }
        long long b = shared_decl_bytes(line);
        if (b && depth == 0) module_scope += b;
        else if (b && in_target) mine += b;
        for (size_t i = 0; i < line.n; i++) {
            if (line.p[i] == '{') depth++;
            else if (line.p[i] == '}' && depth > 0) depth--;
        }
    }
    return entries == 1 ? mine + module_scope : mine;
}
