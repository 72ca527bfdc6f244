/* Weight layouts: OIHW as given, and OIHW16o for kernels that load the
 * weights of 16 output channels as one vector (mtgpu/workload.h). */
#include <string.h>

#include "mtgpu/workload.h"

const char *mt_weight_layout_name(mt_weight_layout l) {
    switch (l) {
    case MT_WEIGHTS_OIHW: return "oihw";
    case MT_WEIGHTS_OIHW16O: return "oihw16o";
    default: return "unknown";
    }
}

int64_t mt_weight_layout_elems(mt_weight_layout l, const mt_workload *wl) {
    if (!wl) return 0;
    switch (l) {
    case MT_WEIGHTS_OIHW: return mt_workload_weight_elems(wl);
    case MT_WEIGHTS_OIHW16O: return wl->groups == 1 ? (int64_t)(wl->k + 15) / 16 * 16 * wl->c * wl->r * wl->s : 0;
    default: return 0;
    }
}

mt_status mt_weights_to_layout(mt_weight_layout l, const mt_workload *wl, const float *oihw, float *dst) {
    if (!wl || !oihw || !dst) return MT_INVALID_ARG;
    int64_t n = mt_weight_layout_elems(l, wl);
    if (n <= 0) return MT_UNSUPPORTED;
    if (l == MT_WEIGHTS_OIHW) {
        memcpy(dst, oihw, sizeof(float) * (size_t)n);
        return MT_OK;
    }
    /* OIHW16o: dst[((k/16 * c + ci) * r*s + tap) * 16 + k%16] = oihw[(k * c + ci) * r*s + tap]. */
    const int64_t taps = (int64_t)wl->r * wl->s, row = (int64_t)wl->c * taps;
    memset(dst, 0, sizeof(float) * (size_t)n);
    for (int64_t o = 0; o < wl->k; o++)
        for (int64_t j = 0; j < row; j++) dst[((o / 16) * row + j) * 16 + o % 16] = oihw[o * row + j];
    return MT_OK;
}
