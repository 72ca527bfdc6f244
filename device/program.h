/* Programs: kernels of the IR (ir/) or of source text, built for a device
 * through the binary cache, launched queued or timed. Internal: the
 * embedding API (mtgpu/embed.h) is what servers call. */
#ifndef MTGPU_DEVICE_PROGRAM_H
#define MTGPU_DEVICE_PROGRAM_H

#include "ir.h"
#include "mtgpu/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_program mt_program;

/* The launch limits of the device, for mt_kernel_check_limits. */
mt_device_limits mt_device_get_limits(const mt_device *dev);
/* The same limits from a device description alone (e.g. one stored in a database). */
mt_device_limits mt_device_info_limits(const mt_device_info *info);

/* Prints the kernel in the device's language and builds it (through the
 * binary cache). On MT_BUILD the compiler's log is in log. */
mt_status mt_program_build(mt_device *dev, const mt_kernel *k, mt_program **out, char *log, size_t loglen);
/* Builds kernel `kernel_name` from source text in the device's language. */
mt_status mt_program_build_source(mt_device *dev, const char *src, const char *kernel_name, mt_program **out, char *log, size_t loglen);
void mt_program_free(mt_program *p);
/* Seconds spent compiling this program (0 when it came from the cache). */
double mt_program_build_seconds(const mt_program *p);
int mt_program_from_cache(const mt_program *p);

/* Launches p with args (global buffers, in parameter order) over grid x block
 * work-groups, `warmup` times untimed then `repeats` times, each timed on the
 * device (profiling events); times_ms[0..repeats) receives each run's time.
 * Compilation never falls inside a timing. */
mt_status mt_program_run(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                         int warmup, int repeats, double *times_ms, char *err, size_t errlen);

/* Queues one launch of p (as mt_program_run, untimed) without waiting for
 * it: launches on a device run in the order they were queued, and buffer
 * reads and writes wait for the launches queued before them. Argument and
 * limit errors are returned here; a failure of the kernel itself may only be
 * reported by mt_device_finish. Backends that cannot queue run the launch to
 * completion. An inference pass queues all its kernels and waits once. */
mt_status mt_program_launch(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                            char *err, size_t errlen);

/* As mt_program_launch, and timed on the device (profiling events): the next
 * mt_device_finish writes the launch's time, in ms, to *ms, so *ms must stay
 * valid until then. Launches queued back to back this way run as in an
 * untimed pass (no wait on the host between kernels, the device's threads
 * kept busy), which a kernel waited for alone (mt_program_run) does not. */
mt_status mt_program_launch_timed(mt_device *dev, mt_program *p, mt_dbuf **args, int nargs, const int64_t grid[3], const int64_t block[3],
                                  double *ms, char *err, size_t errlen);

/* Takes buffer b out of the caches a kernel of dev would find it in (on a
 * CPU device, every level of the host's: clflush), so that the next launch
 * reads it from memory, as a layer's weights in a network's pass.
 * MT_UNSUPPORTED, with the reason in err, where the backend or device cannot
 * (a GPU, a CPU without clflush). */
mt_status mt_dbuf_evict(mt_device *dev, mt_dbuf *b, char *err, size_t errlen);

/* The allocation that b was cut from by mt_dbuf_view (b itself when b is
 * not a view), with b's first byte in it in *offset: a fused launch passes
 * that one allocation and offsets into it rather than each view. Valid
 * while the allocation lives. */
mt_dbuf *mt__dbuf_root(mt_dbuf *b, size_t *offset);

/* A buffer of `bytes` whose storage is the caller's host memory (aligned to
 * MT_DBUF_VIEW_ALIGN; it must outlive the buffer and change only through
 * mt_dbuf_write), which a CPU device uses in place. MT_UNSUPPORTED where
 * the backend has none (the caller then allocates and uploads). */
mt_status mt__dbuf_alloc_host(mt_device *dev, void *host, size_t bytes, mt_dbuf **out);
/* 1 when devices of this description can evict buffers (an OpenCL CPU
 * device on an x86 host), so that cold measurements are cold there. */
int mt_device_info_can_evict(const mt_device_info *info);

#ifdef __cplusplus
}
#endif
#endif
