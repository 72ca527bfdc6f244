/* Toom-Cook matrices for F(m x m, 3 x 3) (conv/winograd.h).
 *
 * One-dimensional correlation y_i = sum_k g_k d_{i+k} (i < m, k < 3) is the
 * transpose of multiplying the polynomials g(x) and h(x) (degrees 2 and
 * m - 1). With n = alpha - 1 finite points p_j, M(x) = prod_j (x - p_j) and
 * M_j(x) = M(x) / (x - p_j):
 *   G   row j < n: p_j^k / M_j(p_j) (evaluation of g, scaled by Lagrange's
 *       denominator); row n (the point at infinity): g's leading coefficient;
 *   B^T row j < n: the coefficients of M_j(x); row n: those of M(x)
 *       (Lagrange interpolation plus the leading term, transposed);
 *   A^T column j < n: p_j^i; column n: 1 in the last row (evaluation of h). */
#include <string.h>

#include "winograd.h"

/* Points in the order that keeps the coefficients smallest for each size. */
static const double points[] = {0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5};

/* Coefficients (lowest degree first) of prod over the points except `skip`
 * (-1: none) of (x - p). */
static void poly_from_roots(int n, int skip, double *coef) {
    int deg = 0;
    memset(coef, 0, sizeof(double) * MT_WINO_MAX_ALPHA);
    coef[0] = 1.0;
    for (int j = 0; j < n; j++) {
        if (j == skip) continue;
        for (int i = deg + 1; i > 0; i--) coef[i] = coef[i - 1] - points[j] * coef[i];
        coef[0] = -points[j] * coef[0];
        deg++;
    }
}

mt_weight_layout mt_winograd_layout(int m) {
    return m == 2 ? MT_WEIGHTS_WINO2 : m == 4 ? MT_WEIGHTS_WINO4 : m == 6 ? MT_WEIGHTS_WINO6 : MT_WEIGHT_LAYOUT_COUNT;
}

int mt_winograd_layout_tile(mt_weight_layout l) {
    return l == MT_WEIGHTS_WINO2 ? 2 : l == MT_WEIGHTS_WINO4 ? 4 : l == MT_WEIGHTS_WINO6 ? 6 : 0;
}

mt_status mt_winograd_init(mt_winograd *w, int m) {
    if (!w) return MT_INVALID_ARG;
    if (m != 2 && m != 4 && m != 6) return MT_UNSUPPORTED;
    memset(w, 0, sizeof *w);
    w->m = m;
    w->alpha = m + 2;
    const int n = w->alpha - 1;
    double coef[MT_WINO_MAX_ALPHA];
    for (int j = 0; j < n; j++) {
        poly_from_roots(n, j, coef);
        double mj = 0.0, x = 1.0; /* M_j(p_j) */
        for (int i = 0; i < n; i++, x *= points[j]) mj += coef[i] * x;
        for (int i = 0; i < w->alpha; i++) w->bt[j][i] = i < n ? coef[i] : 0.0;
        double pk = 1.0;
        for (int k = 0; k < 3; k++, pk *= points[j]) w->g[j][k] = pk / mj;
        double pi = 1.0;
        for (int i = 0; i < m; i++, pi *= points[j]) w->at[i][j] = pi;
    }
    poly_from_roots(n, -1, coef);
    for (int i = 0; i < w->alpha; i++) w->bt[n][i] = coef[i];
    w->g[n][2] = 1.0;
    w->at[m - 1][n] = 1.0;
    return MT_OK;
}

void mt_winograd_filter(const mt_winograd *w, const float *g, double *u) {
    const int a = w->alpha;
    double t[MT_WINO_MAX_ALPHA][3]; /* G g */
    for (int i = 0; i < a; i++)
        for (int k = 0; k < 3; k++) t[i][k] = w->g[i][0] * g[k] + w->g[i][1] * g[3 + k] + w->g[i][2] * g[6 + k];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < a; j++) u[i * a + j] = t[i][0] * w->g[j][0] + t[i][1] * w->g[j][1] + t[i][2] * w->g[j][2];
}
