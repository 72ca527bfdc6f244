/* The device dispatcher: mtgpu's public device API (include/mtgpu/device.h)
 * on top of the backend tables (device/backend-impl.h).
 *
 * Devices are listed OpenCL first, then CUDA; "N" numbers that combined list,
 * "opencl:N" / "cuda:N" number within one backend. Every handle remembers the
 * backend table and the device it came from, so a buffer or program can never
 * be handed to another device's backend. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-impl.h"
#include "program.h"
#include "fail.h"

struct mt_device {
    const mt_backend_i *be;
    void *h;
    mt_device_info info;
};

struct mt_program {
    const mt_backend_i *be;
    const mt_device *dev;
    void *h;
    int nparams; /* parameters the kernel takes; -1 when unknown (built from source text) */
    int from_cache;
    double build_seconds;
};

struct mt_dbuf {
    const mt_backend_i *be;
    const mt_device *dev;
    void *h;
    size_t size;
    mt_dbuf *root;      /* the allocation a view was cut from (NULL: this is one) */
    size_t root_offset; /* a view's first byte in root */
};

/* Most arguments mt_program_run accepts; OpenCL guarantees at least 128. */
#define MT__MAX_RUN_ARGS 128

mt_device_params mt_device_default_params(void) {
    mt_device_params p;
    p.cache_dir = NULL;
    p.use_cache = 1;
    return p;
}


/* The backend table of kind b, or NULL with the reason in why. */
static const mt_backend_i *backend_get(mt_backend_kind b, char *why, size_t whylen) {
    if (why && whylen) why[0] = '\0';
    if (b == MT_BACKEND_OPENCL) {
#ifdef MTGPU_OPENCL
        const mt_backend_i *be = mt__backend_opencl();
        if (!be) mt__fail(why, whylen, MT_UNAVAILABLE, "not available");
        return be;
#else
        mt__fail(why, whylen, MT_UNAVAILABLE, "not built in (configured with MTGPU_OPENCL=OFF)");
        return NULL;
#endif
    }
    if (b == MT_BACKEND_CUDA) {
        const mt_backend_i *be = mt__backend_cuda(why, whylen);
        if (!be && why && whylen && !why[0]) mt__fail(why, whylen, MT_UNAVAILABLE, "not available");
        return be;
    }
    mt__fail(why, whylen, MT_INVALID_ARG, "no such backend");
    return NULL;
}

/* Appends a formatted line to notes (truncating, always terminated). */
static void note_append(char *notes, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void note_append(char *notes, size_t len, const char *fmt, ...) {
    if (!notes || len == 0) return;
    size_t used = strnlen(notes, len);
    if (used >= len - 1) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + used, len - used, fmt, ap);
    va_end(ap);
}

/* Number of devices backend b has (0 when unavailable, with the reason in why). */
static int backend_count(mt_backend_kind b, const mt_backend_i **bep, char *why, size_t whylen) {
    const mt_backend_i *be = backend_get(b, why, whylen);
    if (bep) *bep = be;
    if (!be) return 0;
    int n = 0;
    if (be->list(NULL, 0, &n, why, whylen) != MT_OK) return 0;
    return n;
}

mt_status mt_device_list(mt_device_info *out, int max, int *count, char *notes, size_t noteslen) {
    if (notes && noteslen) notes[0] = '\0';
    if (!count || max < 0 || (max > 0 && !out)) return MT_INVALID_ARG;
    *count = 0;
    int total = 0;
    for (int b = 0; b < MT_BACKEND_COUNT; b++) {
        char why[1024];
        const mt_backend_i *be = backend_get((mt_backend_kind)b, why, sizeof why);
        if (!be) {
            note_append(notes, noteslen, "%s: %s\n", mt_backend_name((mt_backend_kind)b), why);
            continue;
        }
        int room = total < max ? max - total : 0;
        int n = 0;
        mt_status st = be->list(room > 0 ? out + total : NULL, room, &n, why, sizeof why);
        if (st != MT_OK) {
            note_append(notes, noteslen, "%s: %s\n", mt_backend_name((mt_backend_kind)b), why);
            continue;
        }
        if (n > INT_MAX - total) n = INT_MAX - total;
        total += n;
    }
    *count = total;
    return MT_OK;
}

/* Parses a non-negative decimal integer that fills all of s. */
static int parse_index(const char *s, int *out) {
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p)) return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

/* Parses a device spec into a backend (MT_BACKEND_COUNT: the combined list)
 * and an index. "opencl" and "cuda" alone mean index 0 of that backend. */
static mt_status parse_spec(const char *spec, mt_backend_kind *kind, int *index, char *err, size_t errlen) {
    *kind = MT_BACKEND_COUNT;
    *index = 0;
    if (!spec || !*spec) return MT_OK;
    for (int b = 0; b < MT_BACKEND_COUNT; b++) {
        const char *name = mt_backend_name((mt_backend_kind)b);
        size_t n = strlen(name);
        if (strncmp(spec, name, n) != 0) continue;
        if (spec[n] == '\0') {
            *kind = (mt_backend_kind)b;
            return MT_OK;
        }
        if (spec[n] == ':' && parse_index(spec + n + 1, index) == 0) {
            *kind = (mt_backend_kind)b;
            return MT_OK;
        }
        return mt__fail(err, errlen, MT_INVALID_ARG, "bad device spec '%s': expected %s:N with N a device number", spec, name);
    }
    if (parse_index(spec, index) == 0) return MT_OK;
    return mt__fail(err, errlen, MT_INVALID_ARG, "bad device spec '%s': expected opencl:N, cuda:N, N, or empty for the first device",
                    spec);
}

mt_status mt_device_spec_check(const char *spec, char *err, size_t errlen) {
    mt_backend_kind kind;
    int index;
    return parse_spec(spec, &kind, &index, err, errlen);
}

mt_status mt_device_open(const char *spec, const mt_device_params *params, mt_device **out, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_device_open: NULL output");
    *out = NULL;
    mt_backend_kind kind;
    int index;
    mt_status st = parse_spec(spec, &kind, &index, err, errlen);
    if (st != MT_OK) return st;
    mt_device_params defaults = mt_device_default_params();
    if (!params) params = &defaults;

    const mt_backend_i *be = NULL;
    if (kind == MT_BACKEND_COUNT) {
        /* Index into the combined list. */
        int counts[MT_BACKEND_COUNT], total = 0;
        char why[MT_BACKEND_COUNT][1024];
        for (int b = 0; b < MT_BACKEND_COUNT; b++) {
            const mt_backend_i *bb = NULL;
            counts[b] = backend_count((mt_backend_kind)b, &bb, why[b], sizeof why[b]);
            if (!be && index >= total && index < total + counts[b]) {
                be = bb;
                kind = (mt_backend_kind)b;
                index -= total;
            }
            total += counts[b];
        }
        if (!be) {
            if (total == 0)
                return mt__fail(err, errlen, MT_NOT_FOUND, "no device found (opencl: %s; cuda: %s)", counts[0] ? "ok" : why[0],
                                counts[1] ? "ok" : why[1]);
            return mt__fail(err, errlen, MT_NOT_FOUND, "no device %s: %d device%s available (%d OpenCL, %d CUDA)", spec ? spec : "0",
                            total, total == 1 ? "" : "s", counts[0], counts[1]);
        }
    } else {
        char why[1024];
        be = backend_get(kind, why, sizeof why);
        if (!be) return mt__fail(err, errlen, MT_UNAVAILABLE, "%s backend unavailable: %s", mt_backend_name(kind), why);
        int n = 0;
        st = be->list(NULL, 0, &n, why, sizeof why);
        if (st != MT_OK) return mt__fail(err, errlen, st, "%s backend: %s", mt_backend_name(kind), why);
        if (index >= n)
            return mt__fail(err, errlen, MT_NOT_FOUND, "no device %s:%d: %d %s device%s available", mt_backend_name(kind), index, n,
                            kind == MT_BACKEND_OPENCL ? "OpenCL" : "CUDA", n == 1 ? "" : "s");
    }

    mt_device *dev = calloc(1, sizeof *dev);
    if (!dev) return mt__fail(err, errlen, MT_NOMEM, "out of memory opening a device");
    dev->be = be;
    st = be->open(index, params, &dev->h, &dev->info, err, errlen);
    if (st != MT_OK) {
        free(dev);
        return st;
    }
    *out = dev;
    return MT_OK;
}

void mt_device_close(mt_device *dev) {
    if (!dev) return;
    dev->be->close(dev->h);
    free(dev);
}

const mt_device_info *mt_device_get_info(const mt_device *dev) { return dev ? &dev->info : NULL; }

void *mt__device_backend_handle(const mt_device *dev) { return dev ? dev->h : NULL; }

void *mt__dbuf_backend_handle(const mt_dbuf *b) { return b ? b->h : NULL; }

const mt_device *mt__dbuf_device(const mt_dbuf *b) { return b ? b->dev : NULL; }

mt_device_limits mt_device_get_limits(const mt_device *dev) {
    if (!dev) {
        mt_device_limits none;
        memset(&none, 0, sizeof none);
        return none;
    }
    return mt_device_info_limits(&dev->info);
}


static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Builds src into a new program with nparams recorded (-1: unknown). */
static mt_status program_build(mt_device *dev, const char *src, const char *kernel_name, int nparams, mt_program **out, char *log,
                               size_t loglen) {
    mt_program *p = calloc(1, sizeof *p);
    if (!p) return mt__fail(log, loglen, MT_NOMEM, "out of memory building '%s'", kernel_name);
    p->be = dev->be;
    p->dev = dev;
    p->nparams = nparams;
    double t0 = now_seconds();
    int from_cache = 0;
    mt_status st = dev->be->build(dev->h, src, kernel_name, &p->h, &from_cache, log, loglen);
    double t1 = now_seconds();
    if (st != MT_OK) {
        free(p);
        return st;
    }
    p->from_cache = from_cache != 0;
    p->build_seconds = p->from_cache ? 0.0 : t1 - t0;
    *out = p;
    return MT_OK;
}

mt_status mt_program_build(mt_device *dev, const mt_kernel *k, mt_program **out, char *log, size_t loglen) {
    if (log && loglen) log[0] = '\0';
    if (!out) return mt__fail(log, loglen, MT_INVALID_ARG, "mt_program_build: NULL output");
    *out = NULL;
    if (!dev || !k) return mt__fail(log, loglen, MT_INVALID_ARG, "mt_program_build: NULL %s", dev ? "kernel" : "device");
    char *src = NULL;
    mt_status st = mt_kernel_print(k, dev->be->lang, &src, log, loglen);
    if (st != MT_OK) {
        free(src);
        return st;
    }
    if (!src) return mt__fail(log, loglen, MT_INVALID_ARG, "kernel '%s' printed no source", k->name);
    st = program_build(dev, src, k->name, k->nparams, out, log, loglen);
    free(src);
    return st;
}

mt_status mt_program_build_source(mt_device *dev, const char *src, const char *kernel_name, mt_program **out, char *log, size_t loglen) {
    if (log && loglen) log[0] = '\0';
    if (!out) return mt__fail(log, loglen, MT_INVALID_ARG, "mt_program_build_source: NULL output");
    *out = NULL;
    if (!dev || !src || !kernel_name || !*kernel_name)
        return mt__fail(log, loglen, MT_INVALID_ARG, "mt_program_build_source: missing device, source or kernel name");
    return program_build(dev, src, kernel_name, -1, out, log, loglen);
}

void mt_program_free(mt_program *p) {
    if (!p) return;
    p->be->prog_free(p->h);
    free(p);
}

double mt_program_build_seconds(const mt_program *p) { return p ? p->build_seconds : 0.0; }

int mt_program_from_cache(const mt_program *p) { return p ? p->from_cache : 0; }

/* Wraps the backend's buffer from alloc (host NULL) or alloc_host. */
static mt_status dbuf_new(mt_device *dev, void *host, size_t bytes, mt_dbuf **out) {
    mt_dbuf *b = calloc(1, sizeof *b);
    if (!b) return MT_NOMEM;
    b->be = dev->be;
    b->dev = dev;
    b->size = bytes;
    mt_status st = host ? dev->be->alloc_host(dev->h, host, bytes, &b->h) : dev->be->alloc(dev->h, bytes, &b->h);
    if (st != MT_OK) {
        free(b);
        return st;
    }
    *out = b;
    return MT_OK;
}

mt_status mt_dbuf_alloc(mt_device *dev, size_t bytes, mt_dbuf **out) {
    if (!out) return MT_INVALID_ARG;
    *out = NULL;
    if (!dev || bytes == 0) return MT_INVALID_ARG;
    return dbuf_new(dev, NULL, bytes, out);
}

static int dbuf_ok(const mt_device *dev, const mt_dbuf *b, size_t offset, size_t bytes) {
    return dev && b && b->dev == dev && offset <= b->size && bytes <= b->size - offset;
}

mt_status mt_dbuf_write(mt_device *dev, mt_dbuf *b, size_t offset, const void *src, size_t bytes) {
    if (!dbuf_ok(dev, b, offset, bytes) || (bytes > 0 && !src)) return MT_INVALID_ARG;
    if (bytes == 0) return MT_OK;
    return dev->be->write(dev->h, b->h, offset, src, bytes);
}

mt_status mt_dbuf_read(mt_device *dev, mt_dbuf *b, size_t offset, void *dst, size_t bytes) {
    if (!dbuf_ok(dev, b, offset, bytes) || (bytes > 0 && !dst)) return MT_INVALID_ARG;
    if (bytes == 0) return MT_OK;
    return dev->be->read(dev->h, b->h, offset, dst, bytes);
}

int mt_device_info_can_evict(const mt_device_info *info) {
#if defined(__x86_64__) || defined(__i386__)
    return info && info->backend == MT_BACKEND_OPENCL && info->is_cpu;
#else
    (void)info;
    return 0;
#endif
}

mt_status mt_dbuf_evict(mt_device *dev, mt_dbuf *b, char *err, size_t errlen) {
    if (!dbuf_ok(dev, b, 0, 0)) return mt__fail(err, errlen, MT_INVALID_ARG, "evict: no such buffer on this device");
    if (!dev->be->evict) return mt__fail(err, errlen, MT_UNSUPPORTED, "evict: the %s backend cannot take buffers out of caches", mt_backend_name(dev->be->kind));
    return dev->be->evict(dev->h, b->h, err, errlen);
}

mt_status mt__dbuf_alloc_host(mt_device *dev, void *host, size_t bytes, mt_dbuf **out) {
    if (!out) return MT_INVALID_ARG;
    *out = NULL;
    if (!dev || !host || bytes == 0 || (uintptr_t)host % MT_DBUF_VIEW_ALIGN != 0) return MT_INVALID_ARG;
    if (!dev->be->alloc_host) return MT_UNSUPPORTED;
    return dbuf_new(dev, host, bytes, out);
}

mt_status mt_dbuf_view(mt_dbuf *parent, size_t offset, size_t bytes, mt_dbuf **out) {
    if (!out) return MT_INVALID_ARG;
    *out = NULL;
    if (!parent || bytes == 0 || offset % MT_DBUF_VIEW_ALIGN != 0 || offset > parent->size || bytes > parent->size - offset)
        return MT_INVALID_ARG;
    if (!parent->be->view) return MT_UNSUPPORTED;
    mt_dbuf *b = calloc(1, sizeof *b);
    if (!b) return MT_NOMEM;
    b->be = parent->be;
    b->dev = parent->dev;
    b->size = bytes;
    b->root = parent->root ? parent->root : parent;
    b->root_offset = parent->root_offset + offset;
    mt_status st = parent->be->view(parent->dev->h, parent->h, offset, bytes, &b->h);
    if (st != MT_OK) {
        free(b);
        return st;
    }
    *out = b;
    return MT_OK;
}

void mt_dbuf_free(mt_dbuf *b) {
    if (!b) return;
    b->be->buf_free(b->h);
    free(b);
}

size_t mt_dbuf_size(const mt_dbuf *b) { return b ? b->size : 0; }

mt_dbuf *mt__dbuf_root(mt_dbuf *b, size_t *offset) {
    if (offset) *offset = b && b->root ? b->root_offset : 0;
    return b && b->root ? b->root : b;
}

/* The checks every launch passes before it reaches the backend; fills
 * handles[0..nargs) with the backends' buffers. */
static mt_status launch_args(const mt_device *dev, const mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3],
                             const int64_t block[3], void **handles, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!dev || !p) return mt__fail(err, errlen, MT_INVALID_ARG, "launch: NULL %s", dev ? "program" : "device");
    if (p->dev != dev) return mt__fail(err, errlen, MT_INVALID_ARG, "program was built for another device");
    if (nargs < 0 || nargs > MT__MAX_RUN_ARGS || (nargs > 0 && !args))
        return mt__fail(err, errlen, MT_INVALID_ARG, "bad argument list (nargs=%d)", nargs);
    if (p->nparams >= 0 && nargs != p->nparams)
        return mt__fail(err, errlen, MT_INVALID_ARG, "kernel takes %d buffer%s, got %d", p->nparams, p->nparams == 1 ? "" : "s", nargs);
    if (!grid || !block) return mt__fail(err, errlen, MT_INVALID_ARG, "launch: NULL grid or block");
    for (int i = 0; i < 3; i++)
        if (grid[i] < 1 || block[i] < 1)
            return mt__fail(err, errlen, MT_INVALID_ARG, "grid[%d]=%lld and block[%d]=%lld must be at least 1", i, (long long)grid[i], i,
                            (long long)block[i]);
    for (int i = 0; i < nargs; i++) {
        if (!args[i]) return mt__fail(err, errlen, MT_INVALID_ARG, "argument %d is NULL", i);
        if (args[i]->dev != dev) return mt__fail(err, errlen, MT_INVALID_ARG, "argument %d belongs to another device", i);
        handles[i] = args[i]->h;
    }
    return MT_OK;
}

mt_status mt_program_run(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                         int warmup, int repeats, double *times_ms, char *err, size_t errlen) {
    void *handles[MT__MAX_RUN_ARGS];
    mt_status st = launch_args(dev, p, args, nargs, grid, block, handles, err, errlen);
    if (st != MT_OK) return st;
    if (warmup < 0 || repeats < 1 || !times_ms)
        return mt__fail(err, errlen, MT_INVALID_ARG, "need warmup >= 0, repeats >= 1 and a times array (warmup=%d, repeats=%d)", warmup,
                        repeats);
    return dev->be->run(dev->h, p->h, handles, nargs, grid, block, warmup, repeats, times_ms, err, errlen);
}

/* One launch queued (timed into *ms when ms is not NULL), or run to
 * completion on backends that cannot queue. */
static mt_status launch_queued(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                               double *ms, char *err, size_t errlen) {
    void *handles[MT__MAX_RUN_ARGS];
    mt_status st = launch_args(dev, p, args, nargs, grid, block, handles, err, errlen);
    if (st != MT_OK) return st;
    if (dev->be->launch && dev->be->finish) return dev->be->launch(dev->h, p->h, handles, nargs, grid, block, ms, err, errlen);
    double own;
    return dev->be->run(dev->h, p->h, handles, nargs, grid, block, 0, 1, ms ? ms : &own, err, errlen);
}

mt_status mt_program_launch(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                            char *err, size_t errlen) {
    return launch_queued(dev, p, args, nargs, grid, block, NULL, err, errlen);
}

mt_status mt_program_launch_timed(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                  double *ms, char *err, size_t errlen) {
    if (!ms) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_program_launch_timed: NULL time");
    return launch_queued(dev, p, args, nargs, grid, block, ms, err, errlen);
}

mt_status mt_device_finish(mt_device *dev, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (!dev) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_device_finish: NULL device");
    if (dev->be->launch && dev->be->finish) return dev->be->finish(dev->h, err, errlen);
    return MT_OK;
}
