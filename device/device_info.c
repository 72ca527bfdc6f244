/* What can be said of a device from its description alone: its backend's
 * name, its launch limits, its JSON form. Kept apart from device/device.c so that
 * code without a backend (the database, fuzzers) can use it. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-impl.h"
#include "program.h"
#include "device-info-json.h"
#include "mtgpu/device.h"

#define MT__CPU_MAX_WORK_GROUP 256

const char *mt_backend_name(mt_backend_kind b) {
    switch (b) {
    case MT_BACKEND_OPENCL: return "opencl";
    case MT_BACKEND_CUDA: return "cuda";
    case MT_BACKEND_COUNT: break;
    }
    return "unknown";
}

static uint64_t hash_str(const char *s, uint64_t h) { return mt__hash64(s, strlen(s) + 1, h); }
static uint64_t hash_u64(uint64_t v, uint64_t h) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    return mt__hash64(b, sizeof b, h);
}

/* The fields hashed are those of the first OpenCL release: changing them
 * would orphan every record of every database, keyed by this value. */
void mt__device_fingerprint(mt_device_info *info) {
    uint64_t h = hash_u64((uint64_t)info->backend, 0);
    h = hash_str(info->platform, h);
    h = hash_str(info->name, h);
    h = hash_str(info->vendor, h);
    h = hash_str(info->driver, h);
    h = hash_u64((uint64_t)info->compute_units, h);
    h = hash_u64((uint64_t)info->local_mem_bytes, h);
    h = hash_u64((uint64_t)info->max_work_group_size, h);
    snprintf(info->fingerprint, sizeof info->fingerprint, "%016llx", (unsigned long long)h);
}

double mt__env_peak_gflops(void) {
    const char *s = getenv("MTGPU_PEAK_GFLOPS");
    if (!s || !*s) return 0;
    char *end;
    double v = strtod(s, &end);
    while (*end && isspace((unsigned char)*end)) end++;
    if (end == s || *end || !isfinite(v) || v <= 0) return 0;
    return v;
}

mt_device_limits mt_device_info_limits(const mt_device_info *in) {
    mt_device_limits lim;
    memset(&lim, 0, sizeof lim);
    if (!in) return lim;
    lim.max_threads_per_block = in->max_work_group_size;
    /* A CPU runs a work-group on one core, looping over its work-items, so
     * big groups buy no parallelism; past a few hundred work-items PoCL's
     * compile time of the work-item loops grows to minutes (tuning records:
     * 896-item groups took 220 s to build) without a faster kernel. */
    if (in->is_cpu && (lim.max_threads_per_block <= 0 || lim.max_threads_per_block > MT__CPU_MAX_WORK_GROUP))
        lim.max_threads_per_block = MT__CPU_MAX_WORK_GROUP;
    for (int i = 0; i < 3; i++) {
        lim.max_block_dim[i] = in->max_work_item_sizes[i];
        lim.max_grid_dim[i] = 0;
    }
    if (in->backend == MT_BACKEND_CUDA) {
        /* Every compute capability CUDA 13 supports (and every one since 3.0):
         * mt_device_info has no field for them, OpenCL has no such limit. */
        lim.max_grid_dim[0] = 2147483647;
        lim.max_grid_dim[1] = 65535;
        lim.max_grid_dim[2] = 65535;
    }
    lim.local_mem_bytes = (int64_t)in->local_mem_bytes;
    /* CPUs spill to cache without a cliff, so no register budget applies;
     * on CUDA devices the register file per thread bounds private arrays. */
    lim.max_private_floats = (!in->is_cpu && in->backend == MT_BACKEND_CUDA) ? in->max_registers_per_thread : 0;
    return lim;
}

/* `, "key": <value as a JSON string>`. */
static void json_str_member(mt_strbuf *sb, const char *key, const char *value) {
    mt__sb_printf(sb, ", \"%s\": ", key);
    mt__sb_json_str(sb, value);
}

void mt__device_info_json(mt_strbuf *sb, const mt_device_info *d) {
    mt__sb_append(sb, "{\"backend\": ");
    mt__sb_json_str(sb, mt_backend_name(d->backend));
    mt__sb_printf(sb, ", \"index\": %d", d->index);
    json_str_member(sb, "platform", d->platform);
    json_str_member(sb, "name", d->name);
    json_str_member(sb, "vendor", d->vendor);
    json_str_member(sb, "driver", d->driver);
    mt__sb_printf(sb,
                  ", \"is_cpu\": %d, \"compute_units\": %d, \"clock_mhz\": %d, \"global_mem_bytes\": %llu, \"local_mem_bytes\": %llu,"
                  " \"max_alloc_bytes\": %llu, \"max_work_group_size\": %lld, \"max_work_item_sizes\": [%lld, %lld, %lld],"
                  " \"pref_vector_width\": %d, \"native_vector_width\": %d, \"max_registers_per_thread\": %d, \"peak_gflops\": %.17g",
                  d->is_cpu, d->compute_units, d->clock_mhz, (unsigned long long)d->global_mem_bytes, (unsigned long long)d->local_mem_bytes,
                  (unsigned long long)d->max_alloc_bytes, (long long)d->max_work_group_size, (long long)d->max_work_item_sizes[0],
                  (long long)d->max_work_item_sizes[1], (long long)d->max_work_item_sizes[2], d->pref_vector_width, d->native_vector_width,
                  d->max_registers_per_thread, isfinite(d->peak_gflops) ? d->peak_gflops : 0.0);
    char fp[sizeof d->fingerprint];
    memcpy(fp, d->fingerprint, sizeof fp - 1);
    fp[sizeof fp - 1] = '\0';
    json_str_member(sb, "fingerprint", fp);
    mt__sb_append(sb, "}");
}
