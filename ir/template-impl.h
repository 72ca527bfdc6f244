/* Private: the table each template fills in, and the list of templates. */
#ifndef MTGPU_TEMPLATE_IMPL_H
#define MTGPU_TEMPLATE_IMPL_H

#include "template.h"

struct mt_template {
    /* .name    = */ const char *name;
    /* .accepts = */ int (*accepts)(const mt_workload *wl);
    /* .space   = */ mt_status (*space)(const mt_workload *wl, mt_space *out);
    /* .build   = */ mt_status (*build)(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi,
                                        mt_kernel **out, char *err, size_t errlen); /* epi: NULL for none */
    /* .weights = */ mt_weight_layout weights; /* how the kernel reads its weight parameter (0: OIHW) */
    /* .weights_for = */ mt_weight_layout (*weights_for)(const mt_space *sp, const mt_config *cfg);
    /* NULL: every config reads `weights`; else the layout of one config (wino's depends on its tile) */
    /* .weights_all = */ unsigned weights_all; /* with weights_for: every layout it can return (a mask) */
};

extern const mt_template mt__template_direct;
extern const mt_template mt__template_depthwise;
extern const mt_template mt__template_gemm;
extern const mt_template mt__template_kvec;
extern const mt_template mt__template_wino;
extern const mt_template mt__template_dwrow;
extern const mt_template mt__template_stem;

#endif
