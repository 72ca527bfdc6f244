/* An inference server's use of mtgpu: open the tuning database read-only,
 * get the prepared (tuned, compiled) convolution for a workload, and run it
 * on the server's own data.
 *
 *   embed_conv [DB_PATH|-] [WORKLOAD]
 *
 * DB_PATH "-" (the default) runs without a database (default configs).
 * Prints the kernel chosen and the error against the CPU reference; exits 0
 * when the result matches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <mtgpu/mtgpu.h>

/* The server's own check of the result: a plain direct convolution in double
 * (NCHW input, OIHW weights, as mtgpu/workload.h lays them out). */
static void conv_reference(const mt_workload *wl, const float *x, const float *w, float *y) {
    int oh = mt_workload_out_h(wl), ow = mt_workload_out_w(wl), cg = wl->c / wl->groups, kg = wl->k / wl->groups;
    for (int n = 0; n < wl->n; n++)
        for (int k = 0; k < wl->k; k++)
            for (int p = 0; p < oh; p++)
                for (int q = 0; q < ow; q++) {
                    double acc = 0;
                    int g = k / kg;
                    for (int c = 0; c < cg; c++)
                        for (int r = 0; r < wl->r; r++)
                            for (int s = 0; s < wl->s; s++) {
                                int ih = p * wl->stride_h - wl->pad_h + r * wl->dil_h, iw = q * wl->stride_w - wl->pad_w + s * wl->dil_w;
                                if (ih < 0 || ih >= wl->h || iw < 0 || iw >= wl->w) continue;
                                acc += (double)x[(((size_t)n * wl->c + (size_t)g * cg + c) * wl->h + ih) * wl->w + iw] *
                                       w[(((size_t)k * cg + c) * wl->r + r) * wl->s + s];
                            }
                    y[(((size_t)n * wl->k + k) * oh + p) * ow + q] = (float)acc;
                }
}

static void fill(float *v, int64_t n, unsigned seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
}

/* Largest |y - ref| over the largest |ref|. */
static double max_rel_err(const float *y, const float *ref, int64_t n) {
    double err = 0, scale = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) return INFINITY;
        double d = fabs((double)y[i] - ref[i]);
        if (d > err) err = d;
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    return err / scale;
}

int main(int argc, char **argv) {
    const char *db = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
    const char *text = argc > 2 ? argv[2] : "n=1,c=32,h=28,w=28,k=32,r=3,s=3,pad=1";
    char err[2048];
    mt_workload wl;
    if (mt_workload_parse(text, &wl, err, sizeof err) != MT_OK) {
        fprintf(stderr, "embed_conv: %s\n", err);
        return 2;
    }
    mt_embed_params p = mt_embed_default_params();
    p.db_path = db;
    mt_embed *e = NULL;
    mt_status st = mt_embed_open(&p, &e, err, sizeof err);
    if (st != MT_OK) {
        fprintf(stderr, "embed_conv: %s (%s)\n", err, mt_status_str(st));
        return st == MT_UNAVAILABLE ? 77 : 1;
    }
    const mt_conv_kernel *k = NULL;
    if ((st = mt_embed_get_conv(e, &wl, &k, err, sizeof err)) != MT_OK) {
        fprintf(stderr, "embed_conv: %s\n", err);
        mt_embed_close(e);
        return 1;
    }
    mt_conv_kernel_info info;
    mt_conv_kernel_get_info(k, &info);
    printf("%s: %s %s (%s), grid %lldx%lldx%lld, block %lldx%lldx%lld\n", text, info.template_name, info.config,
           info.from_db ? "tuned" : "default", (long long)info.grid[0], (long long)info.grid[1], (long long)info.grid[2],
           (long long)info.block[0], (long long)info.block[1], (long long)info.block[2]);

    /* The server's data, in mtgpu device buffers. */
    int64_t ni = mt_workload_input_elems(&wl), nw = mt_workload_weight_elems(&wl), no = mt_workload_output_elems(&wl);
    float *x = malloc(sizeof(float) * (size_t)ni), *w = malloc(sizeof(float) * (size_t)nw);
    float *y = malloc(sizeof(float) * (size_t)no), *ref = malloc(sizeof(float) * (size_t)no);
    mt_device *dev = mt_embed_device(e);
    mt_dbuf *dx = NULL, *dw = NULL, *dy = NULL;
    int rc = 1;
    if (!x || !w || !y || !ref) goto out;
    fill(x, ni, 1);
    fill(w, nw, 2);
    double ms = 0, maxerr = 0;
    if (mt_dbuf_alloc(dev, sizeof(float) * (size_t)ni, &dx) != MT_OK || mt_dbuf_alloc(dev, sizeof(float) * (size_t)nw, &dw) != MT_OK ||
        mt_dbuf_alloc(dev, sizeof(float) * (size_t)no, &dy) != MT_OK || mt_dbuf_write(dev, dx, 0, x, sizeof(float) * (size_t)ni) != MT_OK ||
        mt_dbuf_write(dev, dw, 0, w, sizeof(float) * (size_t)nw) != MT_OK) {
        fprintf(stderr, "embed_conv: device buffers failed\n");
        goto out;
    }
    if ((st = mt_conv_kernel_launch(e, k, dx, dw, dy, &ms, err, sizeof err)) != MT_OK ||
        (st = mt_dbuf_read(dev, dy, 0, y, sizeof(float) * (size_t)no)) != MT_OK) {
        fprintf(stderr, "embed_conv: launch failed: %s\n", err);
        goto out;
    }
    conv_reference(&wl, x, w, ref);
    maxerr = max_rel_err(y, ref, no);
    if (!(maxerr <= 1e-4)) {
        fprintf(stderr, "embed_conv: wrong result (max relative error %.3g)\n", maxerr);
        goto out;
    }
    printf("ran in %.3f ms, max relative error %.3g\n", ms, maxerr);
    rc = 0;
out:
    mt_dbuf_free(dx);
    mt_dbuf_free(dw);
    mt_dbuf_free(dy);
    free(x);
    free(w);
    free(y);
    free(ref);
    mt_embed_close(e);
    return rc;
}
