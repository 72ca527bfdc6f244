/* GNN model files: the versioned binary format documented in
 * gnn/gnn.h, to and from files and memory.
 *
 * The reader trusts nothing: it checks the length against the header's
 * shapes before it reads a weight, and every read goes through rd_*() with
 * an explicit bound. It never allocates more than the file's own length
 * implies. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail.h"
#include "file.h"
#include "gnn-impl.h"
#include "hash.h"

#define MAGIC "MTGNNMDL"
#define VERSION 2u
#define HEADER_V1 48u
#define HEADER 72u /* version 2 */

uint64_t mt__gnn_fnv64(const unsigned char *p, size_t n) { return mt__hash64(p, n, 0); }

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void putf(unsigned char *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put32(p, u);
}
static float getf(const unsigned char *p) {
    uint32_t u = get32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* R: per-weight rates (Meta-SGD: P, else 0). */
static size_t file_size(unsigned version, size_t F, size_t P, size_t R) { return (version == 1 ? HEADER_V1 : HEADER) + 8 * F + 4 * P + 4 * R + 8; }

mt_status mt_gnn_save_mem(const mt_gnn *m, unsigned char **buf, size_t *len, char *err, size_t errlen) {
    if (!m || !buf || !len) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: save: NULL argument");
    size_t F = (size_t)m->lay.F, P = m->lay.total, R = m->rates ? P : 0, n = file_size(VERSION, F, P, R);
    unsigned char *b = malloc(n);
    if (!b) return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for a %zu-byte model file", n);
    memcpy(b, MAGIC, 8);
    put32(b + 8, VERSION);
    put32(b + 12, (uint32_t)m->p.arch);
    put32(b + 16, (uint32_t)m->lay.H);
    put32(b + 20, (uint32_t)m->lay.L);
    put32(b + 24, (uint32_t)F);
    put32(b + 28, MT_GRAPH_NODE_TYPES);
    put32(b + 32, MT_GRAPH_EDGE_TYPES);
    put32(b + 36, (uint32_t)P);
    put64(b + 40, (uint64_t)m->trained);
    int meta = m->origin != MT_GNN_ORIGIN_POOLED;
    put32(b + 48, (uint32_t)m->origin);
    put32(b + 52, meta ? (uint32_t)m->inner.algorithm : 0);
    put32(b + 56, meta ? (uint32_t)m->inner.steps : 0);
    put32(b + 60, meta ? (uint32_t)m->inner.loss : 0);
    putf(b + 64, meta ? (float)m->inner.lr : 0.0f);
    put32(b + 68, 0);
    unsigned char *q = b + HEADER;
    for (size_t f = 0; f < F; f++, q += 4) putf(q, m->mean[f]);
    for (size_t f = 0; f < F; f++, q += 4) putf(q, m->std[f]);
    for (size_t i = 0; i < P; i++, q += 4) putf(q, m->w[i]);
    for (size_t i = 0; i < R; i++, q += 4) putf(q, m->rates[i]);
    put64(q, mt__gnn_fnv64(b, n - 8));
    *buf = b;
    *len = n;
    return MT_OK;
}

/* Checks version 2's origin and inner procedure (bytes 48..72); sets
 * *rates to the number of per-weight rates that follow the weights. */
static mt_status check_inner(const unsigned char *b, size_t P, size_t *rates, char *err, size_t errlen) {
    uint32_t origin = get32(b + 48), algo = get32(b + 52), steps = get32(b + 56), loss = get32(b + 60), reserved = get32(b + 68);
    float lr = getf(b + 64);
    *rates = 0;
    if (origin > MT_GNN_ORIGIN_ADAPTED) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: unknown origin %u", origin);
    if (reserved != 0) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: reserved field is %u, not 0", reserved);
    if (origin == MT_GNN_ORIGIN_POOLED) {
        if (algo != 0 || steps != 0 || loss != 0 || get32(b + 64) != 0)
            return mt__fail(err, errlen, MT_CORRUPT, "gnn model: a pooled model with an inner procedure (algorithm %u, steps %u, loss %u, rate %g)", algo,
                            steps, loss, (double)lr);
        return MT_OK;
    }
    if (algo != MT_GNN_META_FOMAML && algo != MT_GNN_META_SGD)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: unknown inner algorithm %u", algo);
    if (steps < 1 || steps > MT_GNN_MAX_INNER_STEPS)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: inner steps %u outside [1, %d]", steps, MT_GNN_MAX_INNER_STEPS);
    if (loss > MT_GNN_LOSS_BOTH) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: unknown inner loss %u", loss);
    if (!isfinite(lr) || !(lr > 0)) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: inner rate %g (must be finite and > 0)", (double)lr);
    if (algo == MT_GNN_META_SGD) *rates = P;
    return MT_OK;
}

/* Checks the header of a model file whose first `len` bytes are b[0..len)
 * (at least the header and 8 bytes more, or the whole file) and gives the
 * file's version, its per-weight rate count R and the length the header
 * implies (*want): what a reader must find, and all it may read. */
static mt_status check_header(const unsigned char *b, size_t len, uint32_t *version_out, size_t *R_out, size_t *want, char *err, size_t errlen) {
    if (len < HEADER_V1 + 8) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: %zu bytes, shorter than the %u-byte header", len, HEADER_V1 + 8);
    if (memcmp(b, MAGIC, 8) != 0) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: bad magic (not an mtgpu GNN model file)");
    uint32_t version = get32(b + 8);
    if (version != 1 && version != VERSION)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: format version %u, this build reads versions 1 and %u", version, VERSION);
    const size_t header = version == 1 ? HEADER_V1 : HEADER;
    if (len < header + 8)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: %zu bytes, shorter than the version-%u header of %zu", len, version, header + 8);
    uint32_t arch = get32(b + 12), H = get32(b + 16), L = get32(b + 20), F = get32(b + 24), nt = get32(b + 28), et = get32(b + 32);
    uint32_t P = get32(b + 36);
    if (arch > MT_GNN_MLP) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: unknown architecture %u", arch);
    if (F != MT_GRAPH_FEATS || nt != MT_GRAPH_NODE_TYPES || et != MT_GRAPH_EDGE_TYPES)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: made for %u features, %u node types, %u edge types; this build has %d, %d, %d", F, nt,
                        et, MT_GRAPH_FEATS, MT_GRAPH_NODE_TYPES, MT_GRAPH_EDGE_TYPES);
    if (H < 1 || H > MT__GNN_MAX_HIDDEN || L > MT__GNN_MAX_LAYERS || (arch == MT_GNN_MLP && L < 1))
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: hidden %u / layers %u out of range", H, L);
    mt__gnn_layout lay;
    if (mt__gnn_layout_make((mt_gnn_arch)arch, (int)F, (int)H, (int)L, &lay, NULL, 0) != MT_OK)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: bad shapes");
    if ((size_t)P != lay.total)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: %u parameters, but its shapes need %zu", P, lay.total);
    size_t R = 0;
    if (version != 1) {
        mt_status ist = check_inner(b, P, &R, err, errlen);
        if (ist != MT_OK) return ist;
    }
    *version_out = version;
    *R_out = R;
    *want = file_size(version, F, P, R);
    return MT_OK;
}

mt_status mt_gnn_load_mem(const void *data, size_t len, mt_gnn **out, char *err, size_t errlen) {
    if (!out || (!data && len > 0)) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: load: NULL argument");
    *out = NULL;
    const unsigned char *b = data;
    uint32_t version;
    size_t R, want;
    mt_status hst = check_header(b, len, &version, &R, &want, err, errlen);
    if (hst != MT_OK) return hst;
    const size_t header = version == 1 ? HEADER_V1 : HEADER;
    uint32_t arch = get32(b + 12), H = get32(b + 16), L = get32(b + 20), F = get32(b + 24), P = get32(b + 36);
    if (len != want)
        return mt__fail(err, errlen, MT_CORRUPT, "gnn model: %zu bytes, its header implies %zu (%s)", len, want, len < want ? "truncated" : "trailing data");
    if (get64(b + len - 8) != mt__gnn_fnv64(b, len - 8)) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: checksum mismatch");
    const unsigned char *q = b + header;
    for (size_t i = 0; i < 2 * (size_t)F + P + R; i++) {
        float v = getf(q + 4 * i);
        if (!isfinite(v)) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: non-finite value at byte %zu", header + 4 * i);
        if (i >= F && i < 2 * (size_t)F && !(v > 0))
            return mt__fail(err, errlen, MT_CORRUPT, "gnn model: feature %zu has standard deviation %g", i - F, (double)v);
        if (i >= 2 * (size_t)F + P && v < 0)
            return mt__fail(err, errlen, MT_CORRUPT, "gnn model: inner rate of weight %zu is %g (must be >= 0)", i - 2 * (size_t)F - P, (double)v);
    }
    if (get64(b + 40) > (uint64_t)INT64_MAX) return mt__fail(err, errlen, MT_CORRUPT, "gnn model: trained-sample count out of range");
    mt_gnn_params p = mt_gnn_default_params();
    p.arch = (mt_gnn_arch)arch, p.hidden = (int)H, p.layers = (int)L;
    mt_gnn *m;
    mt_status st = mt__gnn_alloc(&p, &m, err, errlen);
    if (st != MT_OK) return st;
    if (R > 0 && !(m->rates = malloc(sizeof(float) * R))) {
        mt_gnn_free(m);
        return mt__fail(err, errlen, MT_NOMEM, "gnn: out of memory for %zu rates", R);
    }
    for (size_t f = 0; f < F; f++, q += 4) m->mean[f] = getf(q);
    for (size_t f = 0; f < F; f++, q += 4) {
        m->std[f] = getf(q);
        m->istd[f] = 1.0f / m->std[f];
    }
    for (size_t i = 0; i < P; i++, q += 4) m->w[i] = getf(q);
    for (size_t i = 0; i < R; i++, q += 4) m->rates[i] = getf(q);
    m->trained = (int64_t)get64(b + 40);
    if (version != 1 && get32(b + 48) != MT_GNN_ORIGIN_POOLED) {
        m->origin = (mt_gnn_origin)get32(b + 48);
        m->inner = (mt_gnn_inner){.algorithm = (mt_gnn_meta_algo)get32(b + 52), .steps = (int)get32(b + 56), .lr = getf(b + 64),
                                  .loss = (mt_gnn_loss)get32(b + 60)};
        /* the loss the model was meta-trained with is also its training loss */
        m->p.loss = m->inner.loss;
    }
    *out = m;
    return MT_OK;
}

mt_status mt_gnn_save(const mt_gnn *m, const char *path, char *err, size_t errlen) {
    if (!m || !path) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: save: NULL argument");
    unsigned char *buf;
    size_t len;
    mt_status st = mt_gnn_save_mem(m, &buf, &len, err, errlen);
    if (st != MT_OK) return st;
    st = mt__write_file_atomic(path, buf, len, err, errlen);
    free(buf);
    return st;
}

mt_status mt_gnn_load(const char *path, mt_gnn **out, char *err, size_t errlen) {
    if (!path || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "gnn: load: NULL argument");
    *out = NULL;
    /* The header first, then exactly the length it implies: a FIFO, a
     * device or a file of another length is refused before its body is
     * read, so nothing is ever buffered beyond one valid model's size. */
    int fd;
    int64_t size;
    mt_status st = mt__open_regular(path, &fd, &size, err, errlen);
    if (st != MT_OK) return st;
    unsigned char head[HEADER + 8];
    size_t got = 0;
    while (got < sizeof head) {
        ssize_t r = read(fd, head + got, sizeof head - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return mt__fail(err, errlen, MT_IO, "gnn: cannot read %s: %s", path, strerror(e));
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    close(fd);
    uint32_t version;
    size_t R, want;
    char why[512];
    if ((st = check_header(head, got < sizeof head ? got : sizeof head, &version, &R, &want, why, sizeof why)) != MT_OK)
        return mt__fail(err, errlen, st, "%s: %s", path, why);
    if ((uint64_t)size != (uint64_t)want)
        return mt__fail(err, errlen, MT_CORRUPT, "%s: gnn model: %lld bytes, its header implies %zu (%s)", path, (long long)size, want,
                        (uint64_t)size < (uint64_t)want ? "truncated" : "trailing data");
    unsigned char *buf = NULL;
    size_t len = 0;
    if ((st = mt__read_file_bounded(path, want, &buf, &len, err, errlen)) != MT_OK) return st;
    st = mt_gnn_load_mem(buf, len, out, err, errlen);
    free(buf);
    return st;
}
