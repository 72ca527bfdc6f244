/* An inference server's use of mtgpu: open the tuning database read-only,
 * get the prepared (tuned, compiled) convolution for a workload, and run it
 * on the server's own data.
 *
 *   embed_conv [DB_PATH|-] [WORKLOAD]
 *
 * DB_PATH "-" (the default) runs without a database (default configs).
 * Prints the kernel chosen and the error against the CPU reference; exits 0
 * when the result matches. */
#include <stdio.h>
#include <stdlib.h>

#include <mtgpu/embed.h>
#include <mtgpu/reference.h>

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
    mt_fill_random(x, ni, 1);
    mt_fill_random(w, nw, 2);
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
    mt_conv_reference(&wl, x, w, ref);
    if (mt_compare(y, ref, no, &maxerr, NULL) != MT_OK || maxerr > 1e-4) {
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
