#include "mtgpu/workload.h"
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes above this are rejected at parse time so that later products of two
 * fields cannot overflow 64-bit arithmetic before validation sees them. */
#define MT__FIELD_MAX 1000000

/* Returns 1 on success, 0 if the text is not a decimal integer, -1 if it is
 * one but outside +-MT__FIELD_MAX (so the caller can say MT_RANGE). */
static int parse_int(const char *s, size_t len, int *out) {
    if (len == 0) return 0;
    size_t i = s[0] == '-' ? 1 : 0;
    if (i == len) return 0;
    long long v = 0;
    int big = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        if (!big) {
            v = v * 10 + (s[i] - '0');
            if (v > MT__FIELD_MAX) big = 1;
        }
    }
    if (big) return -1;
    *out = (int)(s[0] == '-' ? -v : v);
    return 1;
}

/* "A" or "AxB" -> (a, b); a single number applies to both. Same returns as parse_int. */
static int parse_pair(const char *s, size_t len, int *a, int *b) {
    const char *x = memchr(s, 'x', len);
    if (!x) {
        int r = parse_int(s, len, a);
        if (r == 1) *b = *a;
        return r;
    }
    int ra = parse_int(s, (size_t)(x - s), a);
    int rb = parse_int(x + 1, len - (size_t)(x - s) - 1, b);
    if (ra == 0 || rb == 0) return 0;
    return ra < 0 || rb < 0 ? -1 : 1;
}

mt_status mt_workload_parse(const char *text, mt_workload *out, char *err, size_t errlen) {
    if (!text || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "workload: NULL argument");
    mt_workload wl = {.n = 1, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .groups = 1};
    unsigned seen = 0;
    enum { F_N, F_C, F_H, F_W, F_K, F_R, F_S, F_STRIDE, F_PAD, F_DIL, F_GROUPS, F_COUNT };
    static const char *names[F_COUNT] = {"n", "c", "h", "w", "k", "r", "s", "stride", "pad", "dilation", "groups"};
    const char *p = text;
    if (!*p) return mt__fail(err, errlen, MT_PARSE, "workload: empty string");
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (!eq) return mt__fail(err, errlen, MT_PARSE, "workload: expected key=value, got '%.*s'", (int)(len > 40 ? 40 : len), p);
        size_t klen = (size_t)(eq - p);
        const char *val = eq + 1;
        size_t vlen = len - klen - 1;
        int field = -1;
        for (int i = 0; i < F_COUNT; i++)
            if (strlen(names[i]) == klen && strncmp(names[i], p, klen) == 0) field = i;
        if (field < 0 && klen == 3 && strncmp(p, "dil", 3) == 0) field = F_DIL;
        if (field < 0)
            return mt__fail(err, errlen, MT_PARSE, "workload: unknown field '%.*s' (fields: n,c,h,w,k,r,s,stride,pad,dilation,groups)",
                            (int)(klen > 40 ? 40 : klen), p);
        if (seen & (1u << field)) return mt__fail(err, errlen, MT_PARSE, "workload: field '%s' given twice", names[field]);
        seen |= 1u << field;
        int ok = 1;
        switch (field) {
        case F_N: ok = parse_int(val, vlen, &wl.n); break;
        case F_C: ok = parse_int(val, vlen, &wl.c); break;
        case F_H: ok = parse_int(val, vlen, &wl.h); break;
        case F_W: ok = parse_int(val, vlen, &wl.w); break;
        case F_K: ok = parse_int(val, vlen, &wl.k); break;
        case F_R: ok = parse_int(val, vlen, &wl.r); break;
        case F_S: ok = parse_int(val, vlen, &wl.s); break;
        case F_STRIDE: ok = parse_pair(val, vlen, &wl.stride_h, &wl.stride_w); break;
        case F_PAD: ok = parse_pair(val, vlen, &wl.pad_h, &wl.pad_w); break;
        case F_DIL: ok = parse_pair(val, vlen, &wl.dil_h, &wl.dil_w); break;
        case F_GROUPS: ok = parse_int(val, vlen, &wl.groups); break;
        }
        if (ok < 0)
            return mt__fail(err, errlen, MT_RANGE, "workload: field '%s' = '%.*s' is out of range (magnitude at most %d)", names[field],
                            (int)(vlen > 40 ? 40 : vlen), val, MT__FIELD_MAX);
        if (!ok)
            return mt__fail(err, errlen, MT_PARSE, "workload: field '%s' has a bad value '%.*s' (expected an integer%s)", names[field],
                            (int)(vlen > 40 ? 40 : vlen), val,
                            field >= F_STRIDE && field <= F_DIL ? " or HxW" : "");
        p += len;
        if (*p == ',') {
            p++;
            if (!*p) return mt__fail(err, errlen, MT_PARSE, "workload: trailing comma");
        }
    }
    static const int required[] = {F_C, F_H, F_W, F_K, F_R, F_S};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!(seen & (1u << required[i])))
            return mt__fail(err, errlen, MT_PARSE, "workload: missing field '%s'", names[required[i]]);
    mt_status st = mt_workload_validate(&wl, err, errlen);
    if (st != MT_OK) return st;
    *out = wl;
    return MT_OK;
}

static int out_dim(int in, int pad, int dil, int k, int stride) {
    if (stride <= 0) return 0;
    long eff = (long)dil * (k - 1) + 1;
    long span = (long)in + 2L * pad - eff;
    if (span < 0) return 0;
    return (int)(span / stride + 1);
}

int mt_workload_out_h(const mt_workload *wl) { return out_dim(wl->h, wl->pad_h, wl->dil_h, wl->r, wl->stride_h); }
int mt_workload_out_w(const mt_workload *wl) { return out_dim(wl->w, wl->pad_w, wl->dil_w, wl->s, wl->stride_w); }

int mt_workload_equal(const mt_workload *a, const mt_workload *b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k && a->r == b->r && a->s == b->s &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h && a->pad_w == b->pad_w && a->dil_h == b->dil_h &&
           a->dil_w == b->dil_w && a->groups == b->groups;
}

int mt_workload_is_depthwise(const mt_workload *wl) { return wl->groups > 1 && wl->groups == wl->c && wl->groups == wl->k; }

int mt_workload_is_pointwise(const mt_workload *wl) {
    return wl->r == 1 && wl->s == 1 && wl->stride_h == 1 && wl->stride_w == 1 && wl->pad_h == 0 && wl->pad_w == 0;
}

/* a*b*c*d for positive factors, saturating at lim (0 if a factor is not positive). */
static int64_t prod4(int64_t a, int64_t b, int64_t c, int64_t d, int64_t lim) {
    const int64_t f[4] = {a, b, c, d};
    int64_t p = 1;
    for (int i = 0; i < 4; i++) {
        if (f[i] <= 0) return 0;
        if (p >= lim || f[i] >= lim || p > lim / f[i]) return lim;
        p *= f[i];
    }
    return p;
}

mt_status mt_workload_validate(const mt_workload *wl, char *err, size_t errlen) {
    if (!wl) return mt__fail(err, errlen, MT_INVALID_ARG, "workload: NULL");
    const struct { const char *name; int v; int min; } f[] = {
        {"n", wl->n, 1},           {"c", wl->c, 1},           {"h", wl->h, 1},         {"w", wl->w, 1},
        {"k", wl->k, 1},           {"r", wl->r, 1},           {"s", wl->s, 1},         {"stride (h)", wl->stride_h, 1},
        {"stride (w)", wl->stride_w, 1}, {"pad (h)", wl->pad_h, 0}, {"pad (w)", wl->pad_w, 0}, {"dilation (h)", wl->dil_h, 1},
        {"dilation (w)", wl->dil_w, 1},  {"groups", wl->groups, 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < f[i].min || f[i].v > MT__FIELD_MAX)
            return mt__fail(err, errlen, MT_RANGE, "workload: field '%s' = %d is out of range (%d..%d)", f[i].name, f[i].v, f[i].min,
                            MT__FIELD_MAX);
    if (wl->c % wl->groups) return mt__fail(err, errlen, MT_RANGE, "workload: field 'c' = %d is not divisible by groups = %d", wl->c, wl->groups);
    if (wl->k % wl->groups) return mt__fail(err, errlen, MT_RANGE, "workload: field 'k' = %d is not divisible by groups = %d", wl->k, wl->groups);
    int oh = mt_workload_out_h(wl), ow = mt_workload_out_w(wl);
    if (oh < 1) return mt__fail(err, errlen, MT_RANGE, "workload: field 'r' (with h, pad, dilation, stride) gives output height < 1");
    if (ow < 1) return mt__fail(err, errlen, MT_RANGE, "workload: field 's' (with w, pad, dilation, stride) gives output width < 1");
    /* Fields are at most 1e6 (output sizes 3e6), so a product of four can
     * overflow int64: multiply with saturation at the limit. */
    const int64_t lim = INT32_MAX;
    const struct { const char *name; int64_t v; } t[] = {
        {"input (n*c*h*w)", prod4(wl->n, wl->c, wl->h, wl->w, lim)},
        {"weights (k*c/groups*r*s)", prod4(wl->k, wl->c / wl->groups, wl->r, wl->s, lim)},
        {"output (n*k*out_h*out_w)", prod4(wl->n, wl->k, oh, ow, lim)},
        {"padded input (n*c*(h+2*pad)*(w+2*pad))", prod4(wl->n, wl->c, wl->h + 2 * (int64_t)wl->pad_h, wl->w + 2 * (int64_t)wl->pad_w, lim)},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].v >= lim)
            return mt__fail(err, errlen, MT_RANGE, "workload: %s has %lld or more elements, over the 2^31 limit of 32-bit index arithmetic",
                            t[i].name, (long long)lim);
    return MT_OK;
}

static int fmt_pair(char *buf, size_t len, const char *key, int a, int b) {
    return a == b ? snprintf(buf, len, ",%s=%d", key, a) : snprintf(buf, len, ",%s=%dx%d", key, a, b);
}

int mt_workload_format(const mt_workload *wl, char *buf, size_t len) {
    char tmp[256];
    int n = snprintf(tmp, sizeof tmp, "n=%d,c=%d,h=%d,w=%d,k=%d,r=%d,s=%d", wl->n, wl->c, wl->h, wl->w, wl->k, wl->r, wl->s);
    n += fmt_pair(tmp + n, sizeof tmp - (size_t)n, "stride", wl->stride_h, wl->stride_w);
    n += fmt_pair(tmp + n, sizeof tmp - (size_t)n, "pad", wl->pad_h, wl->pad_w);
    if (wl->dil_h != 1 || wl->dil_w != 1) n += fmt_pair(tmp + n, sizeof tmp - (size_t)n, "dilation", wl->dil_h, wl->dil_w);
    if (wl->groups != 1) n += snprintf(tmp + n, sizeof tmp - (size_t)n, ",groups=%d", wl->groups);
    return snprintf(buf, len, "%s", tmp);
}

double mt_workload_flops(const mt_workload *wl) {
    return 2.0 * wl->n * wl->k * mt_workload_out_h(wl) * mt_workload_out_w(wl) * (double)(wl->c / wl->groups) * wl->r * wl->s;
}
int64_t mt_workload_input_elems(const mt_workload *wl) { return (int64_t)wl->n * wl->c * wl->h * wl->w; }
int64_t mt_workload_weight_elems(const mt_workload *wl) { return (int64_t)wl->k * (wl->c / wl->groups) * wl->r * wl->s; }
int64_t mt_workload_output_elems(const mt_workload *wl) {
    return (int64_t)wl->n * wl->k * mt_workload_out_h(wl) * mt_workload_out_w(wl);
}

int mt_workload_unit_stride(const mt_workload *wl, mt_workload *out) {
    if (!wl || !out || wl->r != 1 || wl->s != 1 || wl->pad_h || wl->pad_w || (wl->stride_h == 1 && wl->stride_w == 1)) return 0;
    mt_workload u = *wl;
    u.h = mt_workload_out_h(wl);
    u.w = mt_workload_out_w(wl);
    u.stride_h = u.stride_w = 1;
    u.dil_h = u.dil_w = 1;
    *out = u;
    return 1;
}
