/* A small, strict, bounded JSON parser: see json.h.
 *
 * The parser is a loop over an explicit stack of open containers (at most
 * max_depth deep), so hostile nesting cannot overflow the C stack. Every read
 * of the input goes through a bounds check against len. Nodes and strings come
 * from an arena owned by the document, freed in one call. */
#include "json.h"
#include "fail.h"

#include <locale.h>
#include <math.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define MT__JSON_DEFAULT_BYTES ((size_t)1 << 20)
#define MT__JSON_DEFAULT_DEPTH 64
#define MT__JSON_DEFAULT_NODES 100000
/* Longest number token; a longer one is almost certainly hostile and would
 * only make strtod slow. */
#define MT__JSON_NUMBER_MAX 400
#define MT__JSON_BLOCK 8192

typedef struct arena_block arena_block;
struct arena_block {
    arena_block *next;
    size_t used, cap;
    alignas(max_align_t) unsigned char data[];
};

struct mt_json_doc {
    mt_json *root;
    arena_block *blocks;
};

mt_json_limits mt__json_default_limits(void) {
    mt_json_limits l;
    l.max_bytes = MT__JSON_DEFAULT_BYTES;
    l.max_depth = MT__JSON_DEFAULT_DEPTH;
    l.max_nodes = MT__JSON_DEFAULT_NODES;
    return l;
}

static void *arena_alloc(mt_json_doc *doc, size_t size) {
    const size_t align = alignof(max_align_t);
    size = (size + align - 1) / align * align;
    arena_block *b = doc->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > MT__JSON_BLOCK ? size : MT__JSON_BLOCK;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = doc->blocks;
        b->used = 0;
        b->cap = cap;
        doc->blocks = b;
    }
    void *p = b->data + b->used;
    b->used += size;
    return p;
}

void mt__json_free(mt_json_doc *doc) {
    if (!doc) return;
    arena_block *b = doc->blocks;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(doc);
}

const mt_json *mt__json_root(const mt_json_doc *doc) { return doc ? doc->root : NULL; }

typedef struct parser {
    const unsigned char *s;
    size_t len, pos;
    size_t nodes;
    mt_json_limits lim;
    mt_json_doc *doc;
    char *err;
    size_t errlen;
} parser;

static int peek(const parser *p) { return p->pos < p->len ? p->s[p->pos] : -1; }

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        unsigned char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static mt_status fail(parser *p, mt_status st, const char *what) {
    if (p->pos >= p->len)
        return mt__fail(p->err, p->errlen, st, "json: %s at the end of the input (byte %zu)", what, p->pos);
    int c = p->s[p->pos];
    if (c >= 0x20 && c < 0x7f) return mt__fail(p->err, p->errlen, st, "json: %s at byte %zu ('%c')", what, p->pos, c);
    return mt__fail(p->err, p->errlen, st, "json: %s at byte %zu (0x%02x)", what, p->pos, c);
}

static mt_json *new_node(parser *p, mt_json_type t, mt_status *st) {
    if (p->nodes >= p->lim.max_nodes) {
        *st = fail(p, MT_RANGE, "too many values (limit reached)");
        return NULL;
    }
    mt_json *n = arena_alloc(p->doc, sizeof *n);
    if (!n) {
        *st = mt__fail(p->err, p->errlen, MT_NOMEM, "json: out of memory");
        return NULL;
    }
    memset(n, 0, sizeof *n);
    n->type = t;
    p->nodes++;
    return n;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at s[pos..pos+4); -1 when short or malformed. */
static long hex4(const parser *p, size_t pos) {
    if (p->len - pos < 4 || pos > p->len) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(p->s[pos + (size_t)i]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Length of the valid UTF-8 sequence at s[pos] (a byte >= 0x80), or 0. */
static size_t utf8_len(const parser *p, size_t pos) {
    const unsigned char *s = p->s + pos;
    size_t avail = p->len - pos;
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* bounds of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xec) n = 3;
    else if (c == 0xed) n = 3, hi = 0x9f; /* no encoded surrogates */
    else if (c >= 0xee && c <= 0xef) n = 3;
    else if (c == 0xf0) n = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else if (c == 0xf4) n = 4, hi = 0x8f;
    else return 0;
    if (avail < n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return n;
}

static size_t put_utf8(char *o, unsigned long cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Parses the string starting at the opening quote; *out is arena memory.
 * The decoded text is never longer than the raw text, so one allocation of
 * the raw length suffices. */
static mt_status parse_string(parser *p, const char **out, size_t *outlen) {
    size_t start = p->pos + 1, end = start;
    /* Find the closing quote first (skipping the byte after each backslash). */
    for (;;) {
        if (end >= p->len) {
            p->pos = end;
            return fail(p, MT_PARSE, "unterminated string");
        }
        unsigned char c = p->s[end];
        if (c == '"') break;
        if (c == '\\') end++;
        end++;
    }
    char *o = arena_alloc(p->doc, end - start + 1);
    if (!o) return mt__fail(p->err, p->errlen, MT_NOMEM, "json: out of memory");
    size_t n = 0, i = start;
    while (i < end) {
        unsigned char c = p->s[i];
        if (c < 0x20) {
            p->pos = i;
            return fail(p, MT_PARSE, "control character in string");
        }
        if (c >= 0x80) {
            size_t k = utf8_len(p, i);
            if (k == 0 || i + k > end) {
                p->pos = i;
                return fail(p, MT_PARSE, "invalid UTF-8 in string");
            }
            memcpy(o + n, p->s + i, k);
            n += k, i += k;
            continue;
        }
        if (c != '\\') {
            o[n++] = (char)c;
            i++;
            continue;
        }
        /* i + 1 < end: a backslash's successor was skipped over above. */
        unsigned char e = p->s[i + 1];
        switch (e) {
        case '"': o[n++] = '"'; i += 2; continue;
        case '\\': o[n++] = '\\'; i += 2; continue;
        case '/': o[n++] = '/'; i += 2; continue;
        case 'b': o[n++] = '\b'; i += 2; continue;
        case 'f': o[n++] = '\f'; i += 2; continue;
        case 'n': o[n++] = '\n'; i += 2; continue;
        case 'r': o[n++] = '\r'; i += 2; continue;
        case 't': o[n++] = '\t'; i += 2; continue;
        case 'u': break;
        default: p->pos = i; return fail(p, MT_PARSE, "bad escape in string");
        }
        long cp = i + 6 <= end ? hex4(p, i + 2) : -1;
        if (cp < 0) {
            p->pos = i;
            return fail(p, MT_PARSE, "bad \\u escape in string");
        }
        i += 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            long lo = (i + 6 <= end && p->s[i] == '\\' && p->s[i + 1] == 'u') ? hex4(p, i + 2) : -1;
            if (lo < 0xdc00 || lo > 0xdfff) {
                p->pos = i - 6;
                return fail(p, MT_PARSE, "unpaired surrogate in \\u escape");
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            i += 6;
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            p->pos = i - 6;
            return fail(p, MT_PARSE, "unpaired surrogate in \\u escape");
        } else if (cp == 0) {
            p->pos = i - 6;
            return fail(p, MT_PARSE, "\\u0000 is not accepted in strings");
        }
        n += put_utf8(o + n, (unsigned long)cp);
    }
    o[n] = '\0';
    p->pos = end + 1;
    *out = o;
    *outlen = n;
    return MT_OK;
}

static int is_digit(int c) { return c >= '0' && c <= '9'; }

static mt_status parse_number(parser *p, mt_json *node) {
    size_t start = p->pos, i = p->pos;
    int integral = 1;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || !is_digit(p->s[i])) {
        p->pos = i;
        return fail(p, MT_PARSE, "expected a digit");
    }
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && is_digit(p->s[i])) {
            p->pos = i;
            return fail(p, MT_PARSE, "leading zero in number");
        }
    } else {
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && p->s[i] == '.') {
        integral = 0;
        i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            p->pos = i;
            return fail(p, MT_PARSE, "expected a digit after '.'");
        }
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = 0;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || !is_digit(p->s[i])) {
            p->pos = i;
            return fail(p, MT_PARSE, "expected a digit in the exponent");
        }
        while (i < p->len && is_digit(p->s[i])) i++;
    }
    size_t n = i - start;
    if (n > MT__JSON_NUMBER_MAX) return fail(p, MT_RANGE, "number token too long");
    char buf[MT__JSON_NUMBER_MAX + 8];
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    /* strtod follows LC_NUMERIC: swap '.' for the locale's decimal point. */
    const struct lconv *lc = localeconv();
    char dp = (lc && lc->decimal_point && lc->decimal_point[0] && !lc->decimal_point[1]) ? lc->decimal_point[0] : '.';
    if (dp != '.') {
        char *d = memchr(buf, '.', n);
        if (d) *d = dp;
    }
    char *endp = NULL;
    double v = strtod(buf, &endp);
    if (!endp || (size_t)(endp - buf) != n) return fail(p, MT_PARSE, "malformed number");
    if (!isfinite(v)) return fail(p, MT_RANGE, "number out of range");
    node->num = v;
    if (integral) {
        /* Exact int64 when it fits. */
        size_t j = start + (p->s[start] == '-');
        uint64_t mag = 0;
        int fits = 1;
        for (; j < i; j++) {
            unsigned d = (unsigned)(p->s[j] - '0');
            if (mag > (UINT64_MAX - d) / 10) {
                fits = 0;
                break;
            }
            mag = mag * 10 + d;
        }
        if (fits) {
            if (p->s[start] == '-') {
                if (mag <= (uint64_t)INT64_MAX + 1) {
                    node->is_int = 1;
                    node->ival = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
                }
            } else if (mag <= (uint64_t)INT64_MAX) {
                node->is_int = 1;
                node->ival = (int64_t)mag;
            }
        }
    }
    p->pos = i;
    return MT_OK;
}

static int match_word(parser *p, const char *w) {
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n) != 0) return 0;
    p->pos += n;
    return 1;
}

typedef struct frame {
    mt_json *node;
    mt_json *last;
} frame;

static void attach(frame *f, mt_json *child, const char *key) {
    child->key = key;
    if (f->last) f->last->next = child;
    else f->node->child = child;
    f->last = child;
    f->node->count++;
}

/* After '{' or ',' in an object: a member name, then ':'. */
static mt_status parse_key(parser *p, const char **key) {
    skip_ws(p);
    if (peek(p) != '"') return fail(p, MT_PARSE, "expected a member name");
    size_t klen;
    mt_status st = parse_string(p, key, &klen);
    if (st != MT_OK) return st;
    skip_ws(p);
    if (peek(p) != ':') return fail(p, MT_PARSE, "expected ':'");
    p->pos++;
    return MT_OK;
}

mt_status mt__json_parse(const char *text, size_t len, const mt_json_limits *limits, mt_json_doc **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!out || (!text && len)) return mt__fail(err, errlen, MT_INVALID_ARG, "json: NULL argument");
    parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.len = len;
    p.lim = limits ? *limits : mt__json_default_limits();
    if (p.lim.max_depth == 0) p.lim.max_depth = 1;
    p.err = err;
    p.errlen = errlen;
    if (len > p.lim.max_bytes) return mt__fail(err, errlen, MT_RANGE, "json: input of %zu bytes exceeds the limit of %zu", len, p.lim.max_bytes);
    p.doc = calloc(1, sizeof *p.doc);
    if (!p.doc) return mt__fail(err, errlen, MT_NOMEM, "json: out of memory");
    /* Nesting can never exceed the number of input bytes: size the stack by
     * the smaller of the two, which also keeps a huge max_depth from
     * overflowing the allocation size. */
    size_t frames = len < p.lim.max_depth ? len + 1 : p.lim.max_depth;
    frame *stack = malloc(sizeof(frame) * frames);
    if (!stack) {
        mt__json_free(p.doc);
        return mt__fail(err, errlen, MT_NOMEM, "json: out of memory");
    }
    size_t depth = 0;
    const char *key = NULL; /* name of the member whose value comes next */
    mt_status st = MT_OK;

    for (;;) {
        /* ---- one value ---- */
        skip_ws(&p);
        int c = peek(&p);
        mt_json *node = NULL;
        if (c == '[' || c == '{') {
            node = new_node(&p, c == '[' ? MT_JSON_ARRAY : MT_JSON_OBJECT, &st);
            if (!node) goto done;
            if (depth == p.lim.max_depth) {
                st = fail(&p, MT_RANGE, "nesting too deep");
                goto done;
            }
            if (depth) attach(&stack[depth - 1], node, key);
            else p.doc->root = node;
            key = NULL;
            stack[depth].node = node;
            stack[depth].last = NULL;
            depth++;
            p.pos++;
            skip_ws(&p);
            if (peek(&p) == (c == '[' ? ']' : '}')) {
                p.pos++;
                depth--;
            } else {
                if (c == '{' && (st = parse_key(&p, &key)) != MT_OK) goto done;
                continue; /* the first element */
            }
        } else {
            if (c == '"') {
                node = new_node(&p, MT_JSON_STRING, &st);
                if (!node) goto done;
                if ((st = parse_string(&p, &node->str, &node->len)) != MT_OK) goto done;
            } else if (c == '-' || is_digit(c)) {
                node = new_node(&p, MT_JSON_NUMBER, &st);
                if (!node) goto done;
                if ((st = parse_number(&p, node)) != MT_OK) goto done;
            } else if (c == 't' || c == 'f' || c == 'n') {
                mt_json_type t = c == 't' ? MT_JSON_TRUE : c == 'f' ? MT_JSON_FALSE : MT_JSON_NULL;
                if (!match_word(&p, c == 't' ? "true" : c == 'f' ? "false" : "null")) {
                    st = fail(&p, MT_PARSE, "unknown literal");
                    goto done;
                }
                node = new_node(&p, t, &st);
                if (!node) goto done;
            } else {
                st = fail(&p, MT_PARSE, "expected a value");
                goto done;
            }
            if (depth) attach(&stack[depth - 1], node, key);
            else p.doc->root = node;
            key = NULL;
        }
        /* ---- after a value: separators and closing brackets ---- */
        for (;;) {
            skip_ws(&p);
            if (depth == 0) {
                if (p.pos != p.len) {
                    st = fail(&p, MT_PARSE, "trailing characters after the value");
                    goto done;
                }
                goto done;
            }
            frame *f = &stack[depth - 1];
            int is_obj = f->node->type == MT_JSON_OBJECT;
            c = peek(&p);
            if (c == ',') {
                p.pos++;
                if (is_obj && (st = parse_key(&p, &key)) != MT_OK) goto done;
                break; /* the next element */
            }
            if (c == (is_obj ? '}' : ']')) {
                p.pos++;
                depth--;
                continue;
            }
            st = fail(&p, MT_PARSE, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
            goto done;
        }
    }
done:
    free(stack);
    if (st != MT_OK) {
        mt__json_free(p.doc);
        return st;
    }
    *out = p.doc;
    return MT_OK;
}

const mt_json *mt__json_get(const mt_json *obj, const char *key) {
    if (!obj || obj->type != MT_JSON_OBJECT || !key) return NULL;
    for (const mt_json *c = obj->child; c; c = c->next)
        if (c->key && strcmp(c->key, key) == 0) return c;
    return NULL;
}

const mt_json *mt__json_at(const mt_json *arr, size_t i) {
    if (!arr || (arr->type != MT_JSON_ARRAY && arr->type != MT_JSON_OBJECT)) return NULL;
    const mt_json *c = arr->child;
    while (c && i--) c = c->next;
    return c;
}

int mt__json_is(const mt_json *v, mt_json_type t) { return v && v->type == t; }

int mt__json_int(const mt_json *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || v->type != MT_JSON_NUMBER || !v->is_int || v->ival < lo || v->ival > hi) return 0;
    if (out) *out = v->ival;
    return 1;
}
