/* Weight layouts: OIHW as given, OIHW16o for kernels that load the weights
 * of 16 output channels as one vector, and the Winograd layouts, which hold
 * each filter already transformed (mtgpu/workload.h). */
#include <string.h>

#include "mtgpu/workload.h"
#include "winograd.h"

const char *mt_weight_layout_name(mt_weight_layout l) {
    switch (l) {
    case MT_WEIGHTS_OIHW: return "oihw";
    case MT_WEIGHTS_OIHW16O: return "oihw16o";
    case MT_WEIGHTS_WINO2: return "wino2";
    case MT_WEIGHTS_WINO4: return "wino4";
    case MT_WEIGHTS_WINO6: return "wino6";
    default: return "unknown";
    }
}

int64_t mt_weight_layout_elems(mt_weight_layout l, const mt_workload *wl) {
    if (!wl) return 0;
    const int64_t k16 = (int64_t)(wl->k + 15) / 16 * 16;
    switch (l) {
    case MT_WEIGHTS_OIHW: return mt_workload_weight_elems(wl);
    case MT_WEIGHTS_OIHW16O: return wl->groups == 1 ? k16 * wl->c * wl->r * wl->s : 0;
    case MT_WEIGHTS_WINO2:
    case MT_WEIGHTS_WINO4:
    case MT_WEIGHTS_WINO6: {
        const int64_t alpha = mt_winograd_layout_tile(l) + 2;
        return wl->groups == 1 && wl->r == 3 && wl->s == 3 ? k16 * wl->c * alpha * alpha : 0;
    }
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
    memset(dst, 0, sizeof(float) * (size_t)n);
    if (l == MT_WEIGHTS_OIHW16O) {
        /* dst[((k/16 * c + ci) * r*s + tap) * 16 + k%16] = oihw[(k * c + ci) * r*s + tap]. */
        const int64_t taps = (int64_t)wl->r * wl->s, row = (int64_t)wl->c * taps;
        for (int64_t o = 0; o < wl->k; o++)
            for (int64_t j = 0; j < row; j++) dst[((o / 16) * row + j) * 16 + o % 16] = oihw[o * row + j];
        return MT_OK;
    }
    /* Winograd: dst[((k/16 * alpha^2 + e) * c + ci) * 16 + k%16] = (G g G^T)[e] of filter (k, ci): a
     * kernel that sums over the input channels for one position e reads one contiguous run. */
    mt_winograd w;
    mt_status st = mt_winograd_init(&w, mt_winograd_layout_tile(l));
    if (st != MT_OK) return st;
    const int64_t a2 = (int64_t)w.alpha * w.alpha;
    double u[MT_WINO_MAX_ALPHA * MT_WINO_MAX_ALPHA];
    for (int64_t o = 0; o < wl->k; o++)
        for (int64_t ci = 0; ci < wl->c; ci++) {
            mt_winograd_filter(&w, oihw + (o * wl->c + ci) * 9, u);
            for (int64_t e = 0; e < a2; e++) dst[(((o / 16) * a2 + e) * wl->c + ci) * 16 + o % 16] = (float)u[e];
        }
    return MT_OK;
}
