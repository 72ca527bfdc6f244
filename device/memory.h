/* What a piece of work needs in memory against what the device and the host
 * have, checked before anything is allocated: an enormous but valid
 * workload or network is refused with the figures (MT_RANGE) instead of
 * allocating for minutes or waking the out-of-memory killer. */
#ifndef MTGPU_DEVICE_MEMORY_H
#define MTGPU_DEVICE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_mem_need {
    uint64_t host_bytes;     /* host memory the work will allocate */
    uint64_t device_bytes;   /* device memory, every buffer together */
    uint64_t largest_buffer; /* the largest single device buffer */
} mt_mem_need;

/* Bytes the host can give now without swapping: MemAvailable of
 * /proc/meminfo where there is one, else sysinfo's free and buffer memory;
 * 0 when it cannot be told. */
uint64_t mt__host_available_bytes(void);

/* MT_OK when `need` fits: its largest buffer within dev->max_alloc_bytes,
 * its device bytes within dev->global_mem_bytes, its host bytes within nine
 * tenths of host_available (the rest of the system keeps a tenth, at least
 * 256 MiB); on a CPU device (dev->is_cpu) the device's buffers come out of
 * the host's memory too, so host and device bytes together must fit. A limit of 0 is unknown and not checked. MT_RANGE
 * otherwise, with `what` (e.g. "workload n=1,c=...") and the figures in err.
 * A pure function of its arguments, so that tests can give any figures. */
mt_status mt__memory_fits(const mt_device_info *dev, uint64_t host_available, const char *what, const mt_mem_need *need, char *err,
                          size_t errlen);

/* mt__memory_fits with what the host has now (mt__host_available_bytes). */
mt_status mt__check_memory(const mt_device_info *dev, const char *what, const mt_mem_need *need, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
