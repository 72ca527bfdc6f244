/* Devices and their buffers, across backends.
 *
 * A backend (OpenCL built in, CUDA as a run-time module) sits behind one table
 * of function pointers (device/backend-impl.h). A backend that is not present on
 * the machine reports itself unavailable; it never makes these calls fail for
 * the others. Handles are independent: there is no global "current device". */
#ifndef MTGPU_DEVICE_H
#define MTGPU_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mt_backend_kind { MT_BACKEND_OPENCL, MT_BACKEND_CUDA, MT_BACKEND_COUNT } mt_backend_kind;

typedef struct mt_device_info {
    mt_backend_kind backend;
    int index;                 /* position within its backend, as in "opencl:0" */
    char platform[128];
    char name[128];
    char vendor[128];
    char driver[128];          /* driver / runtime version */
    int is_cpu;
    int compute_units;
    int clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;
    uint64_t max_alloc_bytes;
    int64_t max_work_group_size;
    int64_t max_work_item_sizes[3];
    int pref_vector_width;     /* float */
    int native_vector_width;   /* float */
    int max_registers_per_thread; /* 0 where unknown */
    double peak_gflops;        /* fp32 FMA peak estimate; 0 where unknown */
    char fingerprint[17];      /* hex of a 64-bit hash of the fields that change kernel speed */
} mt_device_info;

typedef struct mt_device_params {
    const char *cache_dir; /* compiled-binary cache; NULL: $MTGPU_CACHE_DIR, else $XDG_CACHE_HOME/mtgpu/kernels, else ~/.cache/mtgpu/kernels */
    int use_cache;         /* default 1 */
} mt_device_params;

mt_device_params mt_device_default_params(void);

const char *mt_backend_name(mt_backend_kind b);

/* Lists the devices of every available backend into out[0..max) and sets
 * *count to the number found (which may exceed max). A backend that is not
 * available contributes none; its reason goes to `notes` (may be NULL), one
 * line per backend. */
mt_status mt_device_list(mt_device_info *out, int max, int *count, char *notes, size_t noteslen);

typedef struct mt_device mt_device;

/* Opens a device by spec: "opencl:N", "cuda:N", "N" (the Nth listed device),
 * or NULL/"" (the first device). MT_INVALID_ARG for a malformed spec;
 * MT_NOT_FOUND or MT_UNAVAILABLE when no such device is there. */
mt_status mt_device_open(const char *spec, const mt_device_params *params, mt_device **out, char *err, size_t errlen);
/* MT_OK when spec is a well-formed device spec (as mt_device_open takes),
 * MT_INVALID_ARG with the reason otherwise; opens nothing, so that a caller
 * can tell a mistake in the spec from a device that is not there. */
mt_status mt_device_spec_check(const char *spec, char *err, size_t errlen);
void mt_device_close(mt_device *dev);
const mt_device_info *mt_device_get_info(const mt_device *dev);

typedef struct mt_dbuf mt_dbuf;


mt_status mt_dbuf_alloc(mt_device *dev, size_t bytes, mt_dbuf **out);
mt_status mt_dbuf_write(mt_device *dev, mt_dbuf *b, size_t offset, const void *src, size_t bytes);
mt_status mt_dbuf_read(mt_device *dev, mt_dbuf *b, size_t offset, void *dst, size_t bytes);
void mt_dbuf_free(mt_dbuf *b);
/* Offsets of mt_dbuf_view are multiples of this (every backend's base-address
 * alignment divides it). */
#define MT_DBUF_VIEW_ALIGN 4096
/* A buffer that aliases bytes [offset, offset + bytes) of parent, for kernels
 * that take whole buffers rather than offsets: an inference executor packs
 * activations whose lifetimes do not overlap into one allocation this way.
 * Free it with mt_dbuf_free, before or after parent (the memory lives until
 * both are freed). MT_INVALID_ARG for a range outside parent or an offset
 * that is not a multiple of MT_DBUF_VIEW_ALIGN; MT_UNSUPPORTED where the
 * backend has no views (the caller then allocates separately). */
mt_status mt_dbuf_view(mt_dbuf *parent, size_t offset, size_t bytes, mt_dbuf **out);
/* The size in bytes the buffer was allocated with (0 for NULL). */
size_t mt_dbuf_size(const mt_dbuf *b);

/* Waits for every launch queued on dev; MT_LAUNCH when one of them failed. */
mt_status mt_device_finish(mt_device *dev, char *err, size_t errlen);

/* How a kernel is timed and checked (mtgpu tune, mtgpu conv). */
typedef struct mt_measure_params {
    int warmup;            /* untimed runs before timing (default 1) */
    int min_repeats;       /* timed runs at least (default 3) */
    int max_repeats;       /* timed runs at most (default 20) */
    double min_time_ms;    /* keep repeating until this much kernel time is timed (default 30) */
    int check;             /* compare with the reference (default 1) */
    double tolerance;      /* largest accepted normalised error (default 1e-4) */
    /* Before every timed run, take the weights out of the device's caches
     * (mt_dbuf_evict), as a network's pass finds them, every other layer's
     * weights having gone through the caches since; input and output stay
     * where the warm-up left them, as a network's activations do in their
     * arena. Devices that cannot evict time warm (and
     * mt_measure_result.cold says 0). Default 0. */
    int cold;
} mt_measure_params;

mt_measure_params mt_measure_default_params(void);

/* Measures the device's fp32 FMA throughput with a kernel of independent
 * vector FMA chains (device/peak.c): best of 5 runs, in GFLOP/s. */
mt_status mt_device_measure_peak(mt_device *dev, double *gflops, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
