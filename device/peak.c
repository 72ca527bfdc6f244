/* A device's measured fp32 FMA throughput: a kernel of independent vector FMA
 * chains, built through the IR like every other kernel. Benchmarks report
 * kernel speed as a fraction of this measured figure beside the nominal one. */
#include <stdlib.h>

#include "mtgpu/device.h"
#include "program.h"
#include "fail.h"

/* Independent accumulators: FMA latency x ports (4 x 2 on Zen 3) with room
 * to spare. With 8, the probe on a Zen 3 (AVX2, PoCL) read 159-182 GFLOP/s,
 * with 12 in turns 176-206, with 16 (past its 16 vector registers) 105-108
 * (2026-12-05); a native loop of 10 AVX2 FMA chains ran 127 per core. */
#define PEAK_CHAINS 12
#define PEAK_ITERS 4096

/* lanes: the device's native float vector width (16 with AVX-512): with 8
 * lanes on an AVX-512 CPU the probe measured half the peak, and kernels
 * ran at 120% of it. */
static mt_kernel *peak_kernel(int64_t groups, int64_t local, int lanes) {
    mt_kernel *k = mt_kernel_new("mt_peak");
    if (!k) return NULL;
    mt_buffer *in = mt_ir_param(k, "coef", 2 * lanes, 1);
    mt_buffer *out = mt_ir_param(k, "out", groups * local * lanes, 0);
    mt_buffer *acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, PEAK_CHAINS * lanes);
    mt_var *g = mt_ir_var(k, "g", MT_TYPE_INT), *t = mt_ir_var(k, "t", MT_TYPE_INT);
    mt_var *c = mt_ir_var(k, "c", MT_TYPE_INT), *it = mt_ir_var(k, "it", MT_TYPE_INT);
    mt_expr *a = mt_ir_load_vec(k, in, mt_ir_int(k, 0), lanes);
    mt_expr *b = mt_ir_load_vec(k, in, mt_ir_int(k, lanes), lanes);
    mt_expr *item = mt_ir_add(k, mt_ir_mul(k, mt_ir_v(k, g), mt_ir_int(k, local)), mt_ir_v(k, t));
    /* Initial values come from memory so the compiler cannot fold the chains away. */
    mt_stmt *init = mt_ir_for(k, c, PEAK_CHAINS * lanes, MT_LOOP_UNROLLED, 0,
                              mt_ir_store(k, acc, mt_ir_v(k, c), mt_ir_load(k, in, mt_ir_mod(k, mt_ir_v(k, c), mt_ir_int(k, 2 * lanes)))));
    mt_var *c2 = mt_ir_var(k, "c", MT_TYPE_INT);
    mt_expr *slot2 = mt_ir_mul(k, mt_ir_v(k, c2), mt_ir_int(k, lanes));
    mt_stmt *chain = mt_ir_for(k, c2, PEAK_CHAINS, MT_LOOP_UNROLLED, 0,
                               mt_ir_store_vec(k, acc, slot2, mt_ir_fma(k, mt_ir_load_vec(k, acc, slot2, lanes), a, b)));
    mt_stmt *loop = mt_ir_for(k, it, PEAK_ITERS, MT_LOOP_SERIAL, 0, chain);
    /* Sum the chains so none is dead code. */
    mt_var *c3 = mt_ir_var(k, "c", MT_TYPE_INT);
    mt_stmt *reduce = mt_ir_for(k, c3, PEAK_CHAINS - 1, MT_LOOP_UNROLLED, 0,
                                mt_ir_store_vec(k, acc, mt_ir_int(k, 0),
                                                mt_ir_add(k, mt_ir_load_vec(k, acc, mt_ir_int(k, 0), lanes),
                                                          mt_ir_load_vec(k, acc, mt_ir_mul(k, mt_ir_add(k, mt_ir_v(k, c3), mt_ir_int(k, 1)), mt_ir_int(k, lanes)), lanes))));
    mt_stmt *store = mt_ir_store_vec(k, out, mt_ir_mul(k, item, mt_ir_int(k, lanes)), mt_ir_load_vec(k, acc, mt_ir_int(k, 0), lanes));
    mt_stmt *body[] = {init, loop, reduce, store};
    k->body = mt_ir_for(k, g, groups, MT_LOOP_BLOCK, 0, mt_ir_for(k, t, local, MT_LOOP_THREAD, 0, mt_ir_alloc(k, acc, mt_ir_seq(k, body, 4))));
    if (!k->body) {
        mt_kernel_free(k);
        return NULL;
    }
    return k;
}

mt_status mt_device_measure_peak(mt_device *dev, double *gflops, char *err, size_t errlen) {
    if (!dev || !gflops) return mt__fail(err, errlen, MT_INVALID_ARG, "peak: NULL argument");
    const mt_device_info *di = mt_device_get_info(dev);
    int64_t local = di->is_cpu ? 4 : 256;
    int64_t groups = (di->compute_units > 0 ? di->compute_units : 1) * (di->is_cpu ? 16 : 8);
    const int lanes = di->native_vector_width >= 16 ? 16 : di->native_vector_width >= 8 ? 8 : 4;
    mt_kernel *k = peak_kernel(groups, local, lanes);
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "peak: out of memory");
    mt_program *prog = NULL;
    mt_dbuf *bufs[2] = {NULL, NULL};
    mt_status st = mt_program_build(dev, k, &prog, err, errlen);
    float coef[2 * 16];
    for (int i = 0; i < lanes; i++) {
        coef[i] = 0.999f;
        coef[lanes + i] = 0.001f;
    }
    if (st == MT_OK) st = mt_dbuf_alloc(dev, sizeof(float) * 2 * (size_t)lanes, &bufs[0]);
    if (st == MT_OK) st = mt_dbuf_alloc(dev, sizeof(float) * (size_t)(groups * local * lanes), &bufs[1]);
    if (st == MT_OK) st = mt_dbuf_write(dev, bufs[0], 0, coef, sizeof(float) * 2 * (size_t)lanes);
    double times[5];
    const int64_t grid[3] = {groups, 1, 1}, block[3] = {local, 1, 1};
    if (st == MT_OK) st = mt_program_run(dev, prog, bufs, 2, grid, block, 2, 5, times, err, errlen);
    if (st == MT_OK) {
        double best = times[0];
        for (int i = 1; i < 5; i++)
            if (times[i] < best) best = times[i];
        double flops = 2.0 * lanes * PEAK_CHAINS * (double)PEAK_ITERS * (double)(groups * local);
        *gflops = best > 0 ? flops / (best * 1e6) : 0;
    }
    mt_dbuf_free(bufs[0]);
    mt_dbuf_free(bufs[1]);
    mt_program_free(prog);
    mt_kernel_free(k);
    return st;
}
