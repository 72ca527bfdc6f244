/* Network weights: the tensors a network needs, random generation, and the
 * weights file (format in net/WEIGHTS.md). */
#include "mtgpu/weights.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"
#include "hash.h"
#include "reference.h"
#include "fail.h"

#define WT_MAGIC "MTGPUWT\0"
#define WT_MAGIC_LEN 8
#define WT_HEADER_LEN 16 /* magic, u32 version, u32 count */
#define WT_TRAILER_LEN 8 /* u64 checksum */

typedef struct wt_tensor {
    char name[MT_WEIGHT_NAME_MAX];
    int ndim;
    int64_t dims[MT_WEIGHT_MAX_DIMS];
    int64_t count;
    float *data;
} wt_tensor;

struct mt_weights {
    int n;
    wt_tensor *t;
};

/* What a network needs: names and shapes, no data. */
typedef struct wt_spec {
    int n, cap;
    wt_tensor *t;
} wt_spec;

void mt_weights_bn_prefix(const mt_layer *l, char *buf, size_t len) {
    if (l->conv.bn_name[0])
        snprintf(buf, len, "%s", l->conv.bn_name);
    else
        snprintf(buf, len, "%s.bn", l->name);
}

static int spec_push(wt_spec *s, const char *prefix, const char *suffix, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        wt_tensor *t = realloc(s->t, sizeof *t * (size_t)cap);
        if (!t) return -1;
        s->t = t;
        s->cap = cap;
    }
    wt_tensor *t = &s->t[s->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, suffix);
    t->ndim = ndim;
    int64_t d[4] = {d0, d1, d2, d3};
    t->count = 1;
    for (int i = 0; i < ndim; i++) {
        t->dims[i] = d[i];
        t->count *= d[i];
    }
    return 0;
}

/* Fills *s with the tensors net needs, in layer order. */
static mt_status spec_of(const mt_network *net, wt_spec *s, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    mt_status st = mt_network_status(net, err, errlen);
    if (st != MT_OK) return st;
    int bad = 0;
    for (int i = 0; i < mt_network_num_layers(net); i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (l->kind == MT_LAYER_CONV2D) {
            const mt_workload *wl = &l->conv.wl;
            bad |= spec_push(s, l->name, ".weight", 4, wl->k, wl->c / wl->groups, wl->r, wl->s);
            if (l->conv.bias) bad |= spec_push(s, l->name, ".bias", 1, wl->k, 0, 0, 0);
            if (l->conv.batch_norm) {
                char bn[MT_WEIGHT_NAME_MAX];
                mt_weights_bn_prefix(l, bn, sizeof bn);
                bad |= spec_push(s, bn, ".weight", 1, wl->k, 0, 0, 0);
                bad |= spec_push(s, bn, ".bias", 1, wl->k, 0, 0, 0);
                bad |= spec_push(s, bn, ".running_mean", 1, wl->k, 0, 0, 0);
                bad |= spec_push(s, bn, ".running_var", 1, wl->k, 0, 0, 0);
            }
        } else if (l->kind == MT_LAYER_DENSE) {
            bad |= spec_push(s, l->name, ".weight", 2, l->dense.out_features, l->dense.in_features, 0, 0);
            if (l->dense.bias) bad |= spec_push(s, l->name, ".bias", 1, l->dense.out_features, 0, 0, 0);
        }
    }
    if (bad) {
        free(s->t);
        memset(s, 0, sizeof *s);
        return mt__fail(err, errlen, MT_NOMEM, "weights: out of memory");
    }
    return MT_OK;
}

void mt_weights_free(mt_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].data);
    free(w->t);
    free(w);
}

int mt_weights_count(const mt_weights *w) { return w ? w->n : 0; }

int64_t mt_weights_bytes(const mt_weights *w) {
    int64_t b = 0;
    for (int i = 0; w && i < w->n; i++) b += w->t[i].count * (int64_t)sizeof(float);
    return b;
}

mt_status mt_weights_tensor(const mt_weights *w, int i, const char **name, int *ndim, int64_t dims[MT_WEIGHT_MAX_DIMS], const float **data) {
    if (!w || i < 0 || i >= w->n) return MT_RANGE;
    const wt_tensor *t = &w->t[i];
    if (name) *name = t->name;
    if (ndim) *ndim = t->ndim;
    if (dims) memcpy(dims, t->dims, sizeof t->dims);
    if (data) *data = t->data;
    return MT_OK;
}

const float *mt_weights_find(const mt_weights *w, const char *name, int64_t *count) {
    for (int i = 0; w && name && i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            if (count) *count = w->t[i].count;
            return w->t[i].data;
        }
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Values of one tensor: uniform in [lo, hi) from a stream keyed by (seed, name). */
static void fill_uniform(wt_tensor *t, uint64_t seed, float lo, float hi) {
    mt_fill_random(t->data, t->count, seed ^ mt__hash64(t->name, strlen(t->name), 0));
    float mid = 0.5f * (lo + hi), half = 0.5f * (hi - lo);
    for (int64_t i = 0; i < t->count; i++) t->data[i] = mid + half * t->data[i];
}

mt_status mt_weights_random(const mt_network *net, uint64_t seed, mt_weights **out, char *err, size_t errlen) {
    if (!net || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "weights: NULL argument");
    wt_spec s;
    mt_status st = spec_of(net, &s, err, errlen);
    if (st != MT_OK) return st;
    mt_weights *w = calloc(1, sizeof *w);
    if (!w) {
        free(s.t);
        return mt__fail(err, errlen, MT_NOMEM, "weights: out of memory");
    }
    w->t = s.t;
    w->n = s.n;
    for (int i = 0; i < w->n; i++) {
        wt_tensor *t = &w->t[i];
        t->data = malloc(sizeof(float) * (size_t)t->count);
        if (!t->data) {
            for (int j = i; j < w->n; j++) w->t[j].data = NULL;
            mt_weights_free(w);
            return mt__fail(err, errlen, MT_NOMEM, "weights: out of memory for '%s' (%lld floats)", t->name, (long long)t->count);
        }
        if (ends_with(t->name, ".weight") && t->ndim >= 2) {
            /* He: variance 2 / fan_in; uniform on [-a, a) has variance a^2 / 3. */
            int64_t fan_in = t->count / t->dims[0];
            float a = (float)sqrt(6.0 / (double)fan_in);
            fill_uniform(t, seed, -a, a);
        } else if (ends_with(t->name, ".running_var")) {
            fill_uniform(t, seed, 0.5f, 1.5f);
        } else if (ends_with(t->name, ".weight")) { /* batch-norm scale */
            fill_uniform(t, seed, 0.5f, 1.0f);
        } else { /* biases, batch-norm shifts and means */
            fill_uniform(t, seed, -0.1f, 0.1f);
        }
    }
    *out = w;
    return MT_OK;
}

/* ---- the file ---- */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The checksum is FNV-1a 64 over every byte before the trailer, in one
 * running state (*h) so that the writer can feed it block by block. */
static int write_block(FILE *f, const void *data, size_t len, uint64_t *h) {
    *h = mt__hash64_update(*h, data, len);
    return fwrite(data, 1, len, f) == len ? 0 : -1;
}

mt_status mt_weights_save(const mt_weights *w, const char *path, char *err, size_t errlen) {
    if (!w || !path) return mt__fail(err, errlen, MT_INVALID_ARG, "weights: NULL argument");
    mt__atomic_file af;
    char why[1024] = "";
    mt_status st = mt__atomic_open(&af, path, why, sizeof why);
    if (st != MT_OK) return mt__fail(err, errlen, st, "weights: %s", why);
    FILE *f = af.f;
    uint64_t h = MT__HASH64_INIT;
    unsigned char hdr[WT_HEADER_LEN];
    memcpy(hdr, WT_MAGIC, WT_MAGIC_LEN);
    put_u32(hdr + 8, MT_WEIGHTS_VERSION);
    put_u32(hdr + 12, (uint32_t)w->n);
    int bad = write_block(f, hdr, sizeof hdr, &h);
    for (int i = 0; !bad && i < w->n; i++) {
        const wt_tensor *t = &w->t[i];
        unsigned char th[8 + 8 * MT_WEIGHT_MAX_DIMS];
        uint32_t nlen = (uint32_t)strlen(t->name);
        put_u32(th, nlen);
        bad |= write_block(f, th, 4, &h);
        bad |= write_block(f, t->name, nlen, &h);
        put_u32(th, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(th + 4 + 8 * d, (uint64_t)t->dims[d]);
        bad |= write_block(f, th, 4 + 8 * (size_t)t->ndim, &h);
        /* Data as little-endian fp32: byte-swap on big-endian hosts. */
        const unsigned char *raw = (const unsigned char *)t->data;
        unsigned char buf[4096];
        size_t total = sizeof(float) * (size_t)t->count;
        for (size_t off = 0; !bad && off < total; off += sizeof buf) {
            size_t len = total - off < sizeof buf ? total - off : sizeof buf;
            for (size_t j = 0; j < len; j += 4) {
                uint32_t v;
                memcpy(&v, raw + off + j, 4);
                put_u32(buf + j, v);
            }
            bad |= write_block(f, buf, len, &h);
        }
    }
    unsigned char tr[WT_TRAILER_LEN];
    put_u64(tr, h);
    if (!bad) bad = fwrite(tr, 1, sizeof tr, f) != sizeof tr;
    /* A write that failed (bad) fails the commit too, with its reason. */
    if ((st = mt__atomic_commit(&af, why, sizeof why)) != MT_OK) return mt__fail(err, errlen, st, "weights: %s", why);
    return bad ? mt__fail(err, errlen, MT_IO, "weights: cannot write %s", path) : MT_OK;
}

/* The size of the one file that holds exactly the tensors of s: a valid
 * file for the network is this long, so no read needs to go further. */
static uint64_t expected_file_size(const wt_spec *s) {
    uint64_t n = WT_HEADER_LEN + WT_TRAILER_LEN;
    for (int i = 0; i < s->n; i++)
        n += 4 + strlen(s->t[i].name) + 4 + 8 * (uint64_t)s->t[i].ndim + sizeof(float) * (uint64_t)s->t[i].count;
    return n;
}

/* Reads the file into memory: a regular file of at most `most` bytes (other
 * files, FIFOs and devices that may never end, are refused unread). */
static mt_status read_all(const char *path, const mt_network *net, uint64_t most, unsigned char **data, size_t *len, char *err,
                          size_t errlen) {
    char why[1024] = "";
    size_t bound = most > (uint64_t)SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)most;
    mt_status st = mt__read_file_bounded(path, bound, data, len, why, sizeof why);
    if (st == MT_RANGE)
        return mt__fail(err, errlen, MT_CORRUPT, "weights: %s (the weights file of the network %s)", why, mt_network_name(net));
    if (st == MT_NOT_FOUND) st = MT_IO;
    if (st != MT_OK) return mt__fail(err, errlen, st, "weights: %s", why);
    return MT_OK;
}

static int find_spec(const wt_spec *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->t[i].name, name) == 0) return i;
    return -1;
}

static void shape_text(const wt_tensor *t, char *buf, size_t len) {
    size_t o = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && o < len; d++) o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
    if (t->ndim == 0) snprintf(buf, len, "scalar");
}

mt_status mt_weights_load(const char *path, const mt_network *net, mt_weights **out, char *err, size_t errlen) {
    if (!path || !net || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "weights: NULL argument");
    wt_spec s;
    mt_status st = spec_of(net, &s, err, errlen);
    if (st != MT_OK) return st;
    unsigned char *buf = NULL;
    size_t len = 0;
    st = read_all(path, net, expected_file_size(&s), &buf, &len, err, errlen);
    if (st != MT_OK) {
        free(s.t);
        return st;
    }
    mt_weights *w = NULL;
    char *seen = calloc((size_t)(s.n ? s.n : 1), 1);
    if (!seen) {
        st = mt__fail(err, errlen, MT_NOMEM, "weights: out of memory");
        goto done;
    }
    if (len < WT_HEADER_LEN + WT_TRAILER_LEN || memcmp(buf, WT_MAGIC, WT_MAGIC_LEN) != 0) {
        st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s is not an mtgpu weights file (%s)", path,
                      len < WT_HEADER_LEN + WT_TRAILER_LEN ? "too short" : "bad magic");
        goto done;
    }
    uint32_t version = get_u32(buf + 8);
    if (version != MT_WEIGHTS_VERSION) {
        st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s has format version %u; this library reads version %d", path, version,
                      MT_WEIGHTS_VERSION);
        goto done;
    }
    /* The checksum covers every byte before the trailer. A truncated file
     * fails it too, but walking the tensors first names what was cut. */
    uint32_t count = get_u32(buf + 12);
    size_t end = len - WT_TRAILER_LEN, off = WT_HEADER_LEN;
    /* A tensor takes at least 21 bytes (name length, 1-byte name, rank, one dim, one float). */
    if (count > (end - off) / 21) {
        st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s claims %u tensors but holds %zu bytes: truncated or damaged", path, count, len);
        goto done;
    }
    w = calloc(1, sizeof *w);
    if (!w || !(w->t = calloc(count ? count : 1, sizeof *w->t))) {
        st = mt__fail(err, errlen, MT_NOMEM, "weights: out of memory for %u tensors", count);
        goto done;
    }
    uint32_t cur = 0;
    for (uint32_t i = 0; i < count; i++, cur = i) {
        wt_tensor *t = &w->t[i];
        if (end - off < 4) goto truncated;
        uint32_t nlen = get_u32(buf + off);
        off += 4;
        if (nlen == 0 || nlen >= MT_WEIGHT_NAME_MAX) {
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor %u has a name of %u bytes (1..%d allowed)", path, i, nlen,
                          MT_WEIGHT_NAME_MAX - 1);
            goto done;
        }
        if (end - off < nlen) goto truncated;
        memcpy(t->name, buf + off, nlen);
        t->name[nlen] = '\0';
        off += nlen;
        if (strlen(t->name) != nlen) {
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor %u has a NUL in its name", path, i);
            goto done;
        }
        if (end - off < 4) goto truncated;
        uint32_t ndim = get_u32(buf + off);
        off += 4;
        if (ndim < 1 || ndim > MT_WEIGHT_MAX_DIMS) {
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor '%s' has rank %u (1..%d allowed)", path, t->name, ndim, MT_WEIGHT_MAX_DIMS);
            goto done;
        }
        if (end - off < 8 * (size_t)ndim) goto truncated;
        t->ndim = (int)ndim;
        t->count = 1;
        for (uint32_t d = 0; d < ndim; d++) {
            uint64_t v = get_u64(buf + off + 8 * d);
            if (v < 1 || v > ((uint64_t)1 << 31)) {
                st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor '%s' has dimension %u of size %llu (1..2^31 allowed)", path, t->name,
                              d, (unsigned long long)v);
                goto done;
            }
            /* Divided, not multiplied: 2^34 x 2^31 passes 64 bits. */
            if (v > ((uint64_t)1 << 34) / (uint64_t)t->count) {
                char product[32] = "more than 2^64";
                if (v <= UINT64_MAX / (uint64_t)t->count) snprintf(product, sizeof product, "%llu", (unsigned long long)((uint64_t)t->count * v));
                st = mt__fail(err, errlen, MT_CORRUPT,
                              "weights: %s: tensor '%s' has more than 2^34 elements (dimensions 0..%u multiply to %s): out of range", path,
                              t->name, d, product);
                goto done;
            }
            t->dims[d] = (int64_t)v;
            t->count *= (int64_t)v;
        }
        off += 8 * (size_t)ndim;
        size_t bytes = sizeof(float) * (size_t)t->count;
        w->n = (int)i + 1; /* t->name is set: mt_weights_free handles it */
        if (end - off < bytes) goto truncated;
        int si = find_spec(&s, t->name);
        if (si < 0) {
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: unexpected tensor '%s' (the network %s has no such parameter)", path, t->name,
                          mt_network_name(net));
            goto done;
        }
        if (seen[si]) {
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor '%s' appears twice", path, t->name);
            goto done;
        }
        seen[si] = 1;
        const wt_tensor *want = &s.t[si];
        if (want->ndim != t->ndim || memcmp(want->dims, t->dims, sizeof(int64_t) * (size_t)t->ndim) != 0) {
            char a[96], b[96];
            shape_text(t, a, sizeof a);
            shape_text(want, b, sizeof b);
            st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor '%s' has shape %s, the network needs %s", path, t->name, a, b);
            goto done;
        }
        t->data = malloc(bytes);
        if (!t->data) {
            st = mt__fail(err, errlen, MT_NOMEM, "weights: out of memory for '%s'", t->name);
            goto done;
        }
        for (size_t j = 0; j < (size_t)t->count; j++) {
            uint32_t v = get_u32(buf + off + 4 * j);
            memcpy(&t->data[j], &v, 4);
        }
        off += bytes;
    }
    if (off != end) {
        st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: %zu stray bytes after the last tensor", path, end - off);
        goto done;
    }
    uint64_t want_sum = get_u64(buf + end), have_sum = mt__hash64(buf, end, 0);
    if (want_sum != have_sum) {
        st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: checksum mismatch (stored %016llx, computed %016llx): the file is damaged", path,
                      (unsigned long long)want_sum, (unsigned long long)have_sum);
        goto done;
    }
    for (int i = 0; i < s.n; i++)
        if (!seen[i]) {
            st = mt__fail(err, errlen, MT_NOT_FOUND, "weights: %s: tensor '%s' of the network %s is missing", path, s.t[i].name,
                          mt_network_name(net));
            goto done;
        }
    /* Every value must be finite: a NaN in a weight poisons the whole output. */
    for (int i = 0; i < w->n; i++)
        for (int64_t j = 0; j < w->t[i].count; j++)
            if (!isfinite(w->t[i].data[j])) {
                st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s: tensor '%s' element %lld is not finite", path, w->t[i].name, (long long)j);
                goto done;
            }
    *out = w;
    w = NULL;
    st = MT_OK;
    goto done;
truncated:
    st = mt__fail(err, errlen, MT_CORRUPT, "weights: %s is truncated (%zu bytes; tensor %u of %u runs past the end)", path, len, cur + 1,
                  count);
done:
    mt_weights_free(w);
    free(seen);
    free(buf);
    free(s.t);
    return st;
}
