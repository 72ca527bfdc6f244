/* Random convolution workloads for collecting tuning data: the shapes of
 * image-classification and detection networks (1x1, 3x3, 5x5, 7x7 and 1xN
 * kernels, strided, dilated, grouped and depthwise layers, batches of 1-4),
 * drawn deterministically from (seed, index) so that a collection can be
 * resumed or extended by index. */
#include "workload_gen.h"
#include "fail.h"

#include <string.h>

/* splitmix64: one 64-bit state, good enough to draw shapes from. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int pick(uint64_t *s, int n) { return (int)(next_u64(s) % (uint64_t)n); }
static double unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

static const int channels[] = {8, 16, 24, 32, 48, 64, 96, 128, 144, 160, 192, 256, 320, 384, 512};
static const int sizes[] = {7, 8, 10, 13, 14, 17, 19, 28, 32, 35, 38, 56, 64, 75, 112};
#define NCHAN (int)(sizeof channels / sizeof channels[0])
#define NSIZE (int)(sizeof sizes / sizeof sizes[0])

/* One draw; returns 0 when the shape is outside [min_flops, max_flops] or
 * does not validate (the caller draws again). */
static int draw(uint64_t *s, const mt_workload_gen_params *p, mt_workload *out) {
    mt_workload wl = {.n = 1, .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .groups = 1};
    double u = unit(s);
    int depthwise = 0;
    if (u < 0.30) wl.r = wl.s = 1;
    else if (u < 0.68) wl.r = wl.s = 3;
    else if (u < 0.74) wl.r = wl.s = 5;
    else if (u < 0.79) wl.r = wl.s = 7;
    else if (u < 0.85) {
        int n = pick(s, 2) ? 3 : 7; /* Inception's factorised 1xN / Nx1 */
        if (pick(s, 2)) wl.r = 1, wl.s = n;
        else wl.r = n, wl.s = 1;
    } else {
        depthwise = 1;
        wl.r = wl.s = pick(s, 4) ? 3 : 5;
    }
    wl.h = sizes[pick(s, NSIZE)];
    wl.w = pick(s, 6) ? wl.h : sizes[pick(s, NSIZE)];
    wl.c = channels[pick(s, NCHAN)];
    wl.k = channels[pick(s, NCHAN)];
    /* A stem: few input channels, a large image. */
    if (!depthwise && wl.r >= 3 && wl.r == wl.s && pick(s, 12) == 0) {
        wl.c = 3;
        wl.h = wl.w = 112 + 112 * pick(s, 2);
    }
    if (pick(s, 4) == 0) wl.stride_h = wl.stride_w = 2;
    if (wl.r > 1 || wl.s > 1) {
        if (pick(s, 6) == 0) wl.pad_h = wl.pad_w = 0;
        else wl.pad_h = wl.r / 2, wl.pad_w = wl.s / 2;
    }
    if (!depthwise && wl.stride_h == 1 && wl.r == 3 && wl.s == 3 && pick(s, 14) == 0) {
        wl.dil_h = wl.dil_w = 2; /* DeepLab-style atrous layers */
        if (wl.pad_h) wl.pad_h = wl.pad_w = 2;
    }
    if (depthwise) {
        wl.k = wl.c;
        wl.groups = wl.c;
    } else if (wl.c >= 32 && wl.k >= 32 && pick(s, 16) == 0) {
        wl.groups = 2 << pick(s, 3); /* ResNeXt-style groups of 2, 4 or 8 */
    }
    int nb = pick(s, 20);
    wl.n = nb < 17 ? 1 : nb < 19 ? 2 : 4;
    if (mt_workload_validate(&wl, NULL, 0) != MT_OK) return 0;
    double f = mt_workload_flops(&wl);
    if (f < p->min_flops || f > p->max_flops) return 0;
    *out = wl;
    return 1;
}

mt_workload_gen_params mt_workload_gen_default_params(void) {
    mt_workload_gen_params p = {.seed = 1, .min_flops = 2e6, .max_flops = 4e8};
    return p;
}

mt_status mt_workload_generate(const mt_workload_gen_params *params, int index, mt_workload *out, char *err, size_t errlen) {
    if (!params || !out || index < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "workload generator: bad arguments");
    if (!(params->min_flops >= 0) || !(params->max_flops > params->min_flops))
        return mt__fail(err, errlen, MT_INVALID_ARG, "workload generator: empty FLOP range [%g, %g]", params->min_flops, params->max_flops);
    /* Each index has a stream of its own: workload i does not depend on how
     * many draws the workloads before it needed. */
    uint64_t h = params->seed;
    uint64_t s = next_u64(&h) ^ (uint64_t)index;
    s = next_u64(&s); /* streams of neighbouring indices must not overlap */
    for (int attempt = 0; attempt < 10000; attempt++)
        if (draw(&s, params, out)) return MT_OK;
    return mt__fail(err, errlen, MT_RANGE, "workload generator: no workload within [%g, %g] FLOPs after 10000 draws", params->min_flops,
                    params->max_flops);
}
