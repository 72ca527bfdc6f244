/* A deterministic generator of convolution workloads, for collecting
 * cost-model training data (tuner/collect.h). */
#ifndef MTGPU_CONV_WORKLOAD_GEN_H
#define MTGPU_CONV_WORKLOAD_GEN_H

#include "mtgpu/workload.h"

/* Random workloads for collecting tuning data (mtgpu collect): workload
 * `index` of the family `seed`, with useful FLOPs in [min_flops, max_flops].
 * The same (params, index) always gives the same workload. */
typedef struct mt_workload_gen_params {
    uint64_t seed;
    double min_flops, max_flops; /* defaults 2e6 and 4e8 */
} mt_workload_gen_params;

mt_workload_gen_params mt_workload_gen_default_params(void);
mt_status mt_workload_generate(const mt_workload_gen_params *p, int index, mt_workload *out, char *err, size_t errlen);

#endif
