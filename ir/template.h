/* Convolution templates: each maps (workload, config) to a kernel IR.
 *
 * Every template's kernel takes three global buffers in this order: input
 * (NCHW), weights (in the template's weight layout, mt_template_weight_layout:
 * OIHW for all but `kvec` and `wino`), output (NKPQ), all fp32, and writes every output
 * element exactly once (no accumulation into the output buffer). A fused
 * kernel (mt_template_build_fused) takes, after those, the buffers its
 * epilogue reads: bias (k floats) if any, then the residual (output-sized). */
#ifndef MTGPU_TEMPLATE_H
#define MTGPU_TEMPLATE_H

#include "ir.h"
#include "space.h"
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

/* What a fused convolution does to each output value before storing it, in
 * this order: add bias[channel], add residual[same index], apply act. An
 * inference executor fuses a layer's bias (or folded batch norm), residual
 * add and activation this way instead of running a second pass over the
 * output. The tuner measures the plain kernel: the epilogue's cost is the
 * same for every config of a workload. */
typedef enum mt_epilogue_act { MT_EPILOGUE_NONE, MT_EPILOGUE_RELU, MT_EPILOGUE_RELU6 } mt_epilogue_act;

typedef enum mt_epilogue_residual {
    MT_RESIDUAL_NONE,
    MT_RESIDUAL_BUFFER,    /* a "residual" parameter of output size follows the output (and the bias) */
    MT_RESIDUAL_IN_OUTPUT, /* the output buffer holds the residual on entry and is updated in place:
                              each element is read and then written by the same work-item */
} mt_epilogue_residual;

typedef struct mt_conv_epilogue {
    int bias; /* non-zero: a "bias" parameter of k floats follows the output */
    mt_epilogue_residual residual;
    mt_epilogue_act act;
} mt_conv_epilogue;

/* mt_template_build with an epilogue (NULL or all-zero: the plain kernel). */
mt_status mt_template_build_fused(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                                  const mt_conv_epilogue *epi, mt_kernel **out, char *err, size_t errlen);

/* How the template's kernels read the weights (mtgpu/workload.h): the layout
 * of most configs. wino's layout depends on its tile knob: use
 * mt_template_config_weight_layout where the config is known. */
mt_weight_layout mt_template_weight_layout(const mt_template *t);
/* The layout the kernel of cfg reads its weights in. */
mt_weight_layout mt_template_config_weight_layout(const mt_template *t, const mt_space *sp, const mt_config *cfg);
/* Every layout some config of t reads (a mask of 1 << mt_weight_layout). */
unsigned mt_template_weight_layouts(const mt_template *t);

/* A config is valid on a device when the template can realise it and the
 * kernel fits the device's limits: builds the kernel, analyses it and checks
 * it against lim (NULL: no device limits). MT_INVALID_CONFIG with the reason. */
mt_status mt_template_check(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                            const mt_device_limits *lim, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
