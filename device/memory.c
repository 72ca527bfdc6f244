/* Memory needs against the device's and the host's memory (memory.h). */
#include "memory.h"

#include <stdio.h>
#include <string.h>
#if defined(__linux__)
#include <sys/sysinfo.h>
#endif

#include "fail.h"

uint64_t mt__host_available_bytes(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb = 0;
        int found = 0;
        while (!found && fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) found = 1;
        fclose(f);
        if (found) return (uint64_t)kb * 1024;
    }
#if defined(__linux__)
    struct sysinfo si;
    if (sysinfo(&si) == 0) return ((uint64_t)si.freeram + (uint64_t)si.bufferram) * si.mem_unit;
#endif
    return 0;
}

/* bytes as "12.3 GiB" (or MiB, KiB, B). */
static const char *human(uint64_t bytes, char *buf, size_t len) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) v /= 1024, u++;
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
    return buf;
}

mt_status mt__memory_fits(const mt_device_info *dev, uint64_t host_available, const char *what, const mt_mem_need *need, char *err,
                          size_t errlen) {
    if (!dev || !need) return mt__fail(err, errlen, MT_INVALID_ARG, "memory check: NULL argument");
    char a[32], b[32], c[32], d[32], e[32];
    const char *w = what ? what : "this work";
    if (dev->max_alloc_bytes && need->largest_buffer > dev->max_alloc_bytes)
        return mt__fail(err, errlen, MT_RANGE, "%s needs a device buffer of %s, more than the largest the device allocates (%s on %s)", w,
                        human(need->largest_buffer, a, sizeof a), human(dev->max_alloc_bytes, b, sizeof b), dev->name);
    if (dev->global_mem_bytes && need->device_bytes > dev->global_mem_bytes)
        return mt__fail(err, errlen, MT_RANGE, "%s needs %s of device memory, more than the device has (%s on %s)", w,
                        human(need->device_bytes, a, sizeof a), human(dev->global_mem_bytes, b, sizeof b), dev->name);
    uint64_t host = need->host_bytes + (dev->is_cpu ? need->device_bytes : 0);
    /* The rest of the system keeps a tenth (at least 256 MiB): taking the
     * last byte of available memory wakes the out-of-memory killer, which
     * may pick another process. */
    uint64_t reserve = host_available / 10 > ((uint64_t)256 << 20) ? host_available / 10 : (uint64_t)256 << 20;
    uint64_t usable = host_available > reserve ? host_available - reserve : 0;
    if (host_available && host > usable) {
        if (dev->is_cpu)
            return mt__fail(err, errlen, MT_RANGE,
                            "%s needs %s of host memory (%s of buffers here and %s on the device, which is this host's CPU), more than "
                            "can be taken (%s: nine tenths of the %s available)",
                            w, human(host, a, sizeof a), human(need->host_bytes, b, sizeof b), human(need->device_bytes, c, sizeof c),
                            human(usable, d, sizeof d), human(host_available, e, sizeof e));
        return mt__fail(err, errlen, MT_RANGE, "%s needs %s of host memory, more than can be taken (%s: nine tenths of the %s available)", w,
                        human(host, a, sizeof a), human(usable, b, sizeof b), human(host_available, c, sizeof c));
    }
    return MT_OK;
}

mt_status mt__check_memory(const mt_device_info *dev, const char *what, const mt_mem_need *need, char *err, size_t errlen) {
    return mt__memory_fits(dev, mt__host_available_bytes(), what, need, err, errlen);
}
