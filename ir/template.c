/* The template registry and the checks every template call goes through. */
#include <string.h>

#include "template-impl.h"
#include "fail.h"

/* Kernels larger than this once unrolled take PoCL 20 s to minutes to compile
 * (tuning records: 2,300-3,400 statements took 50-100 s); the fastest configs
 * known on CPUs and GPUs (bench/common/known_configs.txt, TopHub) unroll to under 900. */
#define MT__MAX_UNROLLED_STMTS 2048

static const mt_template *const templates[] = {&mt__template_direct, &mt__template_depthwise, &mt__template_gemm, &mt__template_kvec,
                                              &mt__template_wino, &mt__template_dwrow, &mt__template_stem};

int mt_template_count(void) { return (int)(sizeof templates / sizeof templates[0]); }

const mt_template *mt_template_at(int i) { return i >= 0 && i < mt_template_count() ? templates[i] : NULL; }

const mt_template *mt_template_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < mt_template_count(); i++)
        if (strcmp(templates[i]->name, name) == 0) return templates[i];
    return NULL;
}

const char *mt_template_name(const mt_template *t) { return t ? t->name : "(null)"; }

mt_weight_layout mt_template_weight_layout(const mt_template *t) { return t ? t->weights : MT_WEIGHTS_OIHW; }

mt_weight_layout mt_template_config_weight_layout(const mt_template *t, const mt_space *sp, const mt_config *cfg) {
    if (!t) return MT_WEIGHTS_OIHW;
    if (!t->weights_for || !sp || !cfg) return t->weights;
    mt_weight_layout l = t->weights_for(sp, cfg);
    return (unsigned)l < MT_WEIGHT_LAYOUT_COUNT ? l : t->weights;
}

unsigned mt_template_weight_layouts(const mt_template *t) {
    if (!t) return 0;
    return t->weights_for ? t->weights_all : 1u << t->weights;
}

int mt_template_accepts(const mt_template *t, const mt_workload *wl) {
    return t && wl && mt_workload_validate(wl, NULL, 0) == MT_OK && t->accepts(wl);
}

mt_status mt_template_space(const mt_template *t, const mt_workload *wl, mt_space *out) {
    if (!t || !wl || !out) return MT_INVALID_ARG;
    mt_status st = mt_workload_validate(wl, NULL, 0);
    if (st != MT_OK) return st;
    if (!t->accepts(wl)) return MT_UNSUPPORTED;
    mt_space_init(out, t->name);
    st = t->space(wl, out);
    if (st != MT_OK) mt_space_free(out);
    return st;
}

mt_status mt_template_build(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg, mt_kernel **out,
                            char *err, size_t errlen) {
    return mt_template_build_fused(t, wl, space, cfg, NULL, out, err, errlen);
}

mt_status mt_template_build_fused(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                                  const mt_conv_epilogue *epi, mt_kernel **out, char *err, size_t errlen) {
    if (!t || !wl || !space || !cfg || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "template: NULL argument");
    mt_status st = mt_workload_validate(wl, err, errlen);
    if (st != MT_OK) return st;
    if (!t->accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "template '%s' does not accept this workload", t->name);
    if (strcmp(space->template_name, t->name) != 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "space of template '%s' given to template '%s'", space->template_name, t->name);
    if (mt_space_check(space, cfg) != MT_OK) return mt__fail(err, errlen, MT_INVALID_CONFIG, "config is not in the space of '%s'", t->name);
    if (epi && ((unsigned)epi->act > MT_EPILOGUE_RELU6 || (unsigned)epi->residual > MT_RESIDUAL_IN_OUTPUT))
        return mt__fail(err, errlen, MT_INVALID_ARG, "template: unknown epilogue (activation %d, residual %d)", (int)epi->act, (int)epi->residual);
    if (epi && !epi->bias && epi->residual == MT_RESIDUAL_NONE && epi->act == MT_EPILOGUE_NONE) epi = NULL;
    mt_kernel *k = NULL;
    st = t->build(wl, space, cfg, epi, &k, err, errlen);
    if (st != MT_OK) {
        mt_kernel_free(k);
        return st;
    }
    if (!k || !k->body) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_NOMEM, "template '%s': out of memory while building the kernel", t->name);
    }
    *out = k;
    return MT_OK;
}

mt_status mt_template_check(const mt_template *t, const mt_workload *wl, const mt_space *space, const mt_config *cfg,
                            const mt_device_limits *lim, char *err, size_t errlen) {
    mt_kernel *k = NULL;
    mt_status st = mt_template_build(t, wl, space, cfg, &k, err, errlen);
    if (st == MT_OK) {
        mt_kernel_resources res;
        st = mt_kernel_analyze(k, &res, err, errlen);
        if (st != MT_OK) st = MT_INVALID_CONFIG; /* a template that builds malformed IR rejects the config */
        else if (lim) st = mt_kernel_check_limits(&res, lim, err, errlen);
        int64_t size = st == MT_OK ? mt_kernel_unrolled_size(k) : 0;
        if (size > MT__MAX_UNROLLED_STMTS)
            st = mt__fail(err, errlen, MT_INVALID_CONFIG, "kernel unrolls to %lld statements, over %d: it would take minutes to compile",
                          (long long)size, MT__MAX_UNROLLED_STMTS);
    }
    mt_kernel_free(k);
    return st;
}
