/* Winograd minimal filtering F(m x m, 3 x 3) (Lavin and Gray, "Fast
 * Algorithms for Convolutional Neural Networks", 2016):
 *     Y = A^T [ (G g G^T) .* (B^T d B) ] A
 * for an m x m output tile, its alpha x alpha input tile d (alpha = m + 2)
 * and a 3 x 3 filter g. The matrices come from Toom-Cook interpolation at
 * the points 0, 1, -1, 2, -2, 1/2, -1/2 (the first alpha - 1 of them) and
 * infinity, computed here in double precision, so that every tile size uses
 * one derivation instead of hand-copied tables. Larger tiles take fewer
 * multiplications (2.25x fewer than direct convolution at m = 2, 4x at
 * m = 4, 5.06x at m = 6) and lose precision: the coefficients grow with the
 * points (tests/test_winograd.c states the error seen). */
#ifndef MTGPU_CONV_WINOGRAD_H
#define MTGPU_CONV_WINOGRAD_H

#include "mtgpu/status.h"
#include "mtgpu/workload.h"

#define MT_WINO_MAX_ALPHA 8 /* m = 6 */

typedef struct mt_winograd {
    int m, alpha;                                     /* output tile, input tile (m + 2) */
    double at[MT_WINO_MAX_ALPHA - 2][MT_WINO_MAX_ALPHA]; /* A^T: m x alpha */
    double g[MT_WINO_MAX_ALPHA][3];                   /* G: alpha x 3 */
    double bt[MT_WINO_MAX_ALPHA][MT_WINO_MAX_ALPHA];  /* B^T: alpha x alpha */
} mt_winograd;

/* The matrices of F(m x m, 3 x 3); MT_UNSUPPORTED unless m is 2, 4 or 6. */
mt_status mt_winograd_init(mt_winograd *w, int m);

/* The weight layout of tile size m (MT_WEIGHTS_WINO2/4/6; MT_WEIGHT_LAYOUT_COUNT
 * for other m), and the tile size of a layout (0 for the non-Winograd ones). */
mt_weight_layout mt_winograd_layout(int m);
int mt_winograd_layout_tile(mt_weight_layout l);

/* U = G g G^T of one 3 x 3 filter (row-major g), alpha x alpha values into u. */
void mt_winograd_filter(const mt_winograd *w, const float *g, double *u);

#endif
