/* Launch limits from a device description: kept apart from src/device.c so
 * that code without a backend (the database's default-config rule, fuzzers)
 * can use it. */
#include <string.h>

#include "mtgpu/device.h"

mt_device_limits mt_device_info_limits(const mt_device_info *in) {
    mt_device_limits lim;
    memset(&lim, 0, sizeof lim);
    if (!in) return lim;
    lim.max_threads_per_block = in->max_work_group_size;
    for (int i = 0; i < 3; i++) {
        lim.max_block_dim[i] = in->max_work_item_sizes[i];
        lim.max_grid_dim[i] = 0;
    }
    lim.local_mem_bytes = (int64_t)in->local_mem_bytes;
    /* CPUs spill to cache without a cliff, so no register budget applies;
     * on CUDA devices the register file per thread bounds private arrays. */
    lim.max_private_floats = (!in->is_cpu && in->backend == MT_BACKEND_CUDA) ? in->max_registers_per_thread : 0;
    return lim;
}
