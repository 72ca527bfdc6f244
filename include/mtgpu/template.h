/* Convolution templates: each maps (workload, config) to a kernel IR.
 *
 * Every template's kernel takes three global buffers in this order: input
 * (NCHW), weights (OIHW), output (NKPQ), all fp32, and writes every output
 * element exactly once (no accumulation into the output buffer). */
#ifndef MTGPU_TEMPLATE_H
#define MTGPU_TEMPLATE_H

#include "mtgpu/ir.h"
#include "mtgpu/space.h"
#include "mtgpu/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_template mt_template;

int mt_template_count(void);
const mt_template *mt_template_at(int i);
/* NULL if no template has that name. */
const mt_template *mt_template_find(const char *name);
const char *mt_template_name(const mt_template *t);
/* Non-zero if the template can compute this workload. */
int mt_template_accepts(const mt_template *t, const mt_workload *wl);
/* Builds the knob space for a workload; free it with mt_space_free.
 * MT_UNSUPPORTED if the template does not accept the workload. */
mt_status mt_template_space(const mt_template *t, const mt_workload *wl, mt_space *out);
/* Builds the kernel for cfg (which must be in `space`); *out is owned by the
 * caller (mt_kernel_free). MT_INVALID_CONFIG for configs the template cannot
 * realise, with the reason in err. */
mt_status mt_template_build(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                            mt_kernel **out, char *err, size_t errlen);

/* A config is valid on a device when the template can realise it and the
 * kernel fits the device's limits: builds the kernel, analyses it and checks
 * it against lim (NULL: no device limits). MT_INVALID_CONFIG with the reason. */
mt_status mt_template_check(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                            const mt_device_limits *lim, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
