/* The vendor reference on CUDA devices: cuDNN, run by the CUDA module
 * (cuda/module/cudnn.c) on a device's own buffers. See cuda/cuda_backend.h. */
#include <stdio.h>
#include <string.h>

#include "cuda_module.h"
#include "backend-impl.h"
#include "cuda_backend.h"
#include "measure.h"
#include "fail.h"

mt_cudnn_params mt_cudnn_default_params(void) {
    mt_cudnn_params p;
    memset(&p, 0, sizeof p);
    p.warmup = 3;
    p.repeats = 20;
    p.workspace_limit = 0;
    return p;
}

int mt_cudnn_available(char *why, size_t whylen) {
    const mt_cuda_module *m;
    char reason[1536];
    if (mt__cuda_module(&m, reason, sizeof reason) != MT_OK) {
        mt__fail(why, whylen, MT_UNAVAILABLE, "CUDA module not found: %s", reason);
        return 0;
    }
    if (!mt__cuda_module_can_run(m)) {
        mt__fail(why, whylen, MT_UNAVAILABLE, "the CUDA module predates cuDNN support; rebuild it");
        return 0;
    }
    return m->cudnn_available(why, whylen);
}

/* MT_UNAVAILABLE, saying why, for a device without a vendor reference. */
static mt_status need_cuda(const mt_device *dev, char *err, size_t errlen) {
    const mt_device_info *di = mt_device_get_info(dev);
    if (di->backend == MT_BACKEND_CUDA) return MT_OK;
    return mt__fail(err, errlen, MT_UNAVAILABLE, "no vendor reference for %s:%d (%s): cuDNN runs on CUDA devices only",
                    mt_backend_name(di->backend), di->index, di->name);
}

mt_status mt_cudnn_reference_dbuf(mt_device *dev, const mt_workload *wl, const mt_cudnn_params *params, mt_dbuf *in, mt_dbuf *wt,
                                  mt_dbuf *out, mt_cudnn_result *res, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (res) memset(res, 0, sizeof *res);
    if (!dev || !wl || !in || !wt || !out || !res) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_cudnn_reference: NULL argument");
    mt_status st = need_cuda(dev, err, errlen);
    if (st != MT_OK) return st;
    if ((st = mt_workload_validate(wl, err, errlen)) != MT_OK) return st;
    if (mt__dbuf_device(in) != dev || mt__dbuf_device(wt) != dev || mt__dbuf_device(out) != dev)
        return mt__fail(err, errlen, MT_INVALID_ARG, "mt_cudnn_reference: a buffer belongs to another device");
    if (mt_dbuf_size(in) < sizeof(float) * (size_t)mt_workload_input_elems(wl) ||
        mt_dbuf_size(wt) < sizeof(float) * (size_t)mt_workload_weight_elems(wl) ||
        mt_dbuf_size(out) < sizeof(float) * (size_t)mt_workload_output_elems(wl))
        return mt__fail(err, errlen, MT_INVALID_ARG, "mt_cudnn_reference: a buffer is smaller than its tensor");
    mt_cudnn_params p = params ? *params : mt_cudnn_default_params();
    if (p.warmup < 0 || p.repeats < 1)
        return mt__fail(err, errlen, MT_INVALID_ARG, "mt_cudnn_reference: need warmup >= 0 and repeats >= 1 (got %d, %d)", p.warmup,
                        p.repeats);
    const mt_cuda_module *m = NULL;
    void *mdev = NULL;
    mt__cuda_backend_module_dev(mt__device_backend_handle(dev), &m, &mdev);
    if (!m || !mdev) return mt__fail(err, errlen, MT_UNAVAILABLE, "mt_cudnn_reference: no CUDA module behind this device");
    return m->cudnn_conv(mdev, wl, mt__dbuf_backend_handle(in), mt__dbuf_backend_handle(wt), mt__dbuf_backend_handle(out), &p, res, err,
                         errlen);
}

mt_status mt_cudnn_reference(mt_device *dev, const mt_workload *wl, const mt_cudnn_params *params, const float *in, const float *wt,
                             float *out, mt_cudnn_result *res, char *err, size_t errlen) {
    if (err && errlen) err[0] = '\0';
    if (res) memset(res, 0, sizeof *res);
    if (!dev || !wl || !in || !wt || !res) return mt__fail(err, errlen, MT_INVALID_ARG, "mt_cudnn_reference: NULL argument");
    mt_status st = need_cuda(dev, err, errlen);
    if (st != MT_OK) return st;
    if ((st = mt_workload_validate(wl, err, errlen)) != MT_OK) return st;
    size_t nin = sizeof(float) * (size_t)mt_workload_input_elems(wl), nwt = sizeof(float) * (size_t)mt_workload_weight_elems(wl),
           nout = sizeof(float) * (size_t)mt_workload_output_elems(wl);
    mt_dbuf *din = NULL, *dwt = NULL, *dout = NULL;
    if ((st = mt_dbuf_alloc(dev, nin, &din)) != MT_OK || (st = mt_dbuf_alloc(dev, nwt, &dwt)) != MT_OK ||
        (st = mt_dbuf_alloc(dev, nout, &dout)) != MT_OK) {
        mt__fail(err, errlen, st, "mt_cudnn_reference: device allocation of %zu + %zu + %zu bytes failed: %s", nin, nwt, nout,
                 mt_status_str(st));
        goto done;
    }
    if ((st = mt_dbuf_write(dev, din, 0, in, nin)) != MT_OK || (st = mt_dbuf_write(dev, dwt, 0, wt, nwt)) != MT_OK) {
        mt__fail(err, errlen, st, "mt_cudnn_reference: upload failed: %s", mt_status_str(st));
        goto done;
    }
    st = mt_cudnn_reference_dbuf(dev, wl, params, din, dwt, dout, res, err, errlen);
    if (st == MT_OK && out && (st = mt_dbuf_read(dev, dout, 0, out, nout)) != MT_OK) {
        mt__fail(err, errlen, st, "mt_cudnn_reference: reading the output back failed: %s", mt_status_str(st));
        memset(res, 0, sizeof *res);
    }
done:
    mt_dbuf_free(din);
    mt_dbuf_free(dwt);
    mt_dbuf_free(dout);
    return st;
}

typedef struct {
    const mt_cudnn_params *params;
    mt_cudnn_result *res;
} vendor_call;

static mt_status run_cudnn(mt_device *dev, const mt_workload *wl, mt_dbuf *in, mt_dbuf *w, mt_dbuf *out, void *user, char *err, size_t errlen) {
    vendor_call *c = user;
    return mt_cudnn_reference_dbuf(dev, wl, c->params, in, w, out, c->res, err, errlen);
}

mt_status mt_conv_bench_cudnn(mt_conv_bench *b, const mt_cudnn_params *cp, const mt_measure_params *params, mt_cudnn_result *res,
                              double *max_rel_err, char *err, size_t errlen) {
    if (max_rel_err) *max_rel_err = -1;
    if (!b || !res) return mt__fail(err, errlen, MT_INVALID_ARG, "bench: NULL argument");
    vendor_call c = {.params = cp, .res = res};
    double tol = params ? params->tolerance : mt_measure_default_params().tolerance;
    return mt_conv_bench_check_vendor(b, run_cudnn, &c, tol, max_rel_err, err, errlen);
}
