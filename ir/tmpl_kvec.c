/* The `kvec` template: direct convolution vectorised over output channels.
 *
 * The other templates put their vectors along output pixels, so a vector
 * needs `vec` neighbouring pixels of one row: on the small images of a
 * network's later stages (14x14, 7x7) rows are short, most tiles touch the
 * padding (every tile of a 14-wide row does, with pad 1) and take the
 * per-lane path, and strided convolutions gather. Here a vector holds `vec`
 * output channels of one pixel instead, the way CPU libraries (oneDNN's
 * blocked layouts) do it:
 *     acc[pixel][channels k..k+vec) += broadcast(in[c][iy][ix]) * w[k..k+vec)[c][r][s]
 * Each input value is loaded once per tap as a scalar, tested once against
 * the image border (a scalar select, never a per-lane path) and broadcast;
 * the weights of `vec` channels are one contiguous vector load, because the
 * kernel reads them in the OIHW16o layout (ir/template.h): blocks
 * of 16 output channels innermost, which the executor converts to once.
 * Stride and dilation cost nothing extra.
 *
 * Each work-item keeps reg_k x reg_y x reg_x vector accumulators (reg_k
 * vectors of `vec` channels for each of its reg_y x reg_x pixels) and runs
 * the reduction c > r > s, loading per tap its reg_k weight vectors and then
 * doing, pixel by pixel, one broadcast and reg_k FMAs. At the end it stores
 * its tile channel by channel: a vector's lanes are different channels, so
 * different planes of the NCHW output, but one channel's reg_x columns are
 * neighbours, so each row goes out as vector stores along x, with the fused
 * epilogue applied to each vector (lane by lane where the tile overhangs the
 * row).
 * The register-tile loops are replicated in the IR (constant indices keep
 * the accumulators in registers on PoCL).
 *
 * Channel blocks that overhang k read real memory: a vector whose first
 * channel lies past the padded k is pointed back at the last block (its
 * results are never stored); stores skip channels >= k, rows >= oh and
 * columns >= ow. Input tests are generated only for the sides a read can
 * leave the image on.
 *
 * Launch: work-items: axis 0 = channel vectors, 1 = columns, 2 = rows.
 * Work-groups: axis 1 = column blocks, and the fastest varying axis 0 (PoCL
 * runs work-groups in that order) is either the channel blocks, so that
 * consecutive work-groups reuse one input tile from cache, or the (image,
 * row block)s, so that they reuse one block of weights. The second is chosen
 * when the weights are more than twice the input rows read (kvec_pixels_first):
 * in a network every layer's weights come from memory, and in ResNet-50's
 * last stage (weights 2-9 MiB, inputs 0.1-0.8 MiB) it ran 1.1-2.3x faster, while
 * in the first stages it ran up to 2x slower (bench/kernel_order/results/kernel_order.md).
 * It is a rule and not a knob: a measurement of the kernel alone repeats it
 * with its weights in cache, so the tuner could not see the difference.
 *
 * Knobs, in order (work-group counts are derived):
 *   thread_k {1,2,4,8}     work-items per work-group along channel vectors
 *   vec      {4,8,16}      channels per vector (divides the 16 of the layout)
 *   reg_k    {1,2,3,4}     channel vectors per work-item
 *   thread_y {1,2}         work-items per work-group along rows
 *   reg_y    {1,2,4}       output rows per work-item
 *   thread_x {1,2,4,8}     work-items per work-group along columns
 *   reg_x    {1,2,3,4,5,6,7,8,14,16}  output columns per work-item (7 and
 *                          14 fit ResNet's 7-, 14-, 28- and 56-wide images)
 *   unroll_rs {0,1,2}      kernel taps as loops: 0 both serial, 1 s
 *                          unrolled, 2 r and s unrolled
 *   unroll_explicit {0,1}  replicate unrolled bodies instead of pragmas
 * Options larger than the workload can use are left out (reg_x, thread_x
 * past the output width; reg_y, thread_y past its height; vector channels
 * past k rounded up to 16). A config is invalid when its private floats
 * (accumulators and weight registers) exceed MT__KVEC_MAX_PRIVATE_FLOATS:
 * 512 floats are AVX-512's 32 vector registers. Grouped convolutions are
 * not accepted (the depthwise and gemm templates take them). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "template-impl.h"
#include "tmpl_common.h"
#include "fail.h"

#define MT__KVEC_MAX_PRIVATE_FLOATS 512

typedef struct kvec_plan {
    int n, c, k, h, w, oh, ow, r, s, sh, sw, ph, pw, dh, dw;
    int k16;                    /* k rounded up to 16: the weight layout's channels */
    int kt, vec, kr, yt, yr, xt, xr;
    int ko, yo, xo;             /* work-groups per axis */
    int unroll_rs, unroll_explicit;
    const mt_conv_epilogue *epi;
} kvec_plan;

static int kvec_accepts(const mt_workload *wl) { return wl && wl->groups == 1; }

static void kvec_canon(const mt_workload *wl, kvec_plan *p) {
    memset(p, 0, sizeof *p);
    p->n = wl->n;
    p->c = wl->c;
    p->k = wl->k;
    p->h = wl->h;
    p->w = wl->w;
    p->oh = mt_workload_out_h(wl);
    p->ow = mt_workload_out_w(wl);
    p->r = wl->r;
    p->s = wl->s;
    p->sh = wl->stride_h;
    p->sw = wl->stride_w;
    p->ph = wl->pad_h;
    p->pw = wl->pad_w;
    p->dh = wl->dil_h;
    p->dw = wl->dil_w;
    p->k16 = (wl->k + 15) / 16 * 16;
}

static mt_status kvec_space(const mt_workload *wl, mt_space *out) {
    if (!kvec_accepts(wl) || !out) return MT_UNSUPPORTED;
    kvec_plan p;
    kvec_canon(wl, &p);
    static const int thread_k[] = {1, 2, 4, 8};
    static const int vec[] = {4, 8, 16};
    static const int reg_k[] = {1, 2, 3, 4};
    static const int thread_y[] = {1, 2};
    static const int reg_y[] = {1, 2, 4};
    static const int thread_x[] = {1, 2, 4, 8};
    static const int reg_x[] = {1, 2, 3, 4, 5, 6, 7, 8, 14, 16};
    static const int unroll_rs[] = {0, 1, 2};
    static const int explicit_[] = {0, 1};
    int v[16], n;
    mt_space_init(out, "kvec");
    mt_status st = MT_OK;
    n = mt__clip_options(thread_k, 4, p.k16 / 4, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "thread_k", v, n);
    n = mt__clip_options(vec, 3, p.k16, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "vec", v, n);
    n = mt__clip_options(reg_k, 4, p.k16 / 4, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "reg_k", v, n);
    n = mt__clip_options(thread_y, 2, p.oh, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "thread_y", v, n);
    n = mt__clip_options(reg_y, 3, p.oh, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "reg_y", v, n);
    n = mt__clip_options(thread_x, 4, p.ow, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "thread_x", v, n);
    n = mt__clip_options(reg_x, 10, p.ow, v);
    if (st == MT_OK) st = mt_space_add_enum(out, "reg_x", v, n);
    if (st == MT_OK) st = mt_space_add_enum(out, "unroll_rs", unroll_rs, 3);
    if (st == MT_OK) st = mt_space_add_enum(out, "unroll_explicit", explicit_, 2);
    if (st != MT_OK) mt_space_free(out);
    return st;
}

/* Weights (the OIHW16o copy) more than twice the input rows that the
 * convolution reads (a stride skips rows): work-groups run pixel blocks first. */
static int kvec_pixels_first(const kvec_plan *p) {
    const int64_t weight_bytes = (int64_t)p->k16 * p->c * p->r * p->s * 4;
    const int64_t input_bytes = (int64_t)p->n * p->c * p->h * p->w * 4 / (p->sh > 0 ? p->sh : 1);
    return weight_bytes > 2 * input_bytes;
}

/* ---- IR building ---- */

typedef struct kvec_builder {
    mt_kernel *k;
    const kvec_plan *p;
    mt_buffer *in, *wt, *out, *acc, *wreg, *ival;
    mt__epilogue_bufs epi;
    mt_expr *k0, *y0, *x0;     /* first channel, row and column of the work-item's tile */
    mt_expr *in_img, *out_img; /* offsets of the image in the input and the output */
    mt_expr *wbase[4];         /* weight offset of channel vector j at (c, r, s) = (0, 0, 0) */
    int k_over, y_over, x_over;      /* tiles overhang k, oh, ow */
    int w_clamp;                     /* some vector starts past k16: clamp its weight reads */
    int iy_lo, iy_hi, ix_lo, ix_hi;  /* a read can fall below 0 / at or past h (w) */
} kvec_builder;

#define KI(b, v) mt_ir_int((b)->k, (v))

/* lo >= 0 and lo < limit, for the sides that can fail; NULL when none can. */
static mt_expr *inside(kvec_builder *b, mt_expr *v, int limit, int need_lo, int need_hi) {
    mt_expr *c = NULL;
    if (need_lo) c = mt_ir_ge(b->k, v, KI(b, 0));
    if (need_hi) c = mt_ir_and(b->k, c, mt_ir_lt(b->k, v, KI(b, limit)));
    return c;
}

/* One tap (c, r, s): the weight vectors, then the tile's input values, then
 * per pixel a broadcast and reg_k FMAs.
 *
 * Input values go through the private buffer `ival`, loaded unconditionally
 * from an address that is clamped into the image (the plane's first value
 * when the pixel lies in the padding) and only then replaced by 0. Written
 * as `inside ? in[idx] : 0` the load is conditional in C, which PoCL's LLVM
 * cannot speculate (it cannot prove the address dereferenceable): it became
 * a branch per pixel and tap, with the values staged through the stack, and
 * the 3x3 layers ran at half the speed of the 1x1 ones. A load from a
 * private array can be speculated, so the select becomes a blend. Pixels
 * that cannot leave the image use ival too: one template, one graph shape. */
static mt_stmt *tap(kvec_builder *b, mt_expr *c, mt_expr *r, mt_expr *s) {
    const kvec_plan *p = b->p;
    mt_kernel *k = b->k;
    const int vec = p->vec;
    mt_stmt_list list = {0};
    mt_expr *woff = mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, mt_ir_add(k, mt_ir_mul(k, c, KI(b, p->r)), r), KI(b, p->s)), s), KI(b, 16));
    for (int j = 0; j < p->kr; j++)
        mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->wreg, KI(b, (int64_t)j * vec), mt_ir_load_vec(k, b->wt, mt_ir_add(k, b->wbase[j], woff), vec)));
    mt_expr *plane = mt_ir_add(k, b->in_img, mt_ir_mul(k, c, KI(b, (int64_t)p->h * p->w)));
    mt_expr *iy0 = mt_ir_add(k, mt_ir_add(k, mt_ir_mul(k, b->y0, KI(b, p->sh)), KI(b, -p->ph)), mt_ir_mul(k, r, KI(b, p->dh)));
    mt_expr *ix0 = mt_ir_add(k, mt_ir_add(k, mt_ir_mul(k, b->x0, KI(b, p->sw)), KI(b, -p->pw)), mt_ir_mul(k, s, KI(b, p->dw)));
    mt_expr *conds[MT__KVEC_MAX_PRIVATE_FLOATS];
    int npix = 0;
    for (int y = 0; y < p->yr; y++) {
        mt_expr *iy = mt_ir_add(k, iy0, KI(b, (int64_t)y * p->sh));
        mt_expr *ycond = inside(b, iy, p->h, b->iy_lo, b->iy_hi);
        for (int x = 0; x < p->xr; x++, npix++) {
            mt_expr *ix = mt_ir_add(k, ix0, KI(b, (int64_t)x * p->sw));
            mt_expr *cond = mt_ir_and(k, ycond, inside(b, ix, p->w, b->ix_lo, b->ix_hi));
            mt_expr *idx = mt_ir_add(k, plane, mt_ir_add(k, mt_ir_mul(k, iy, KI(b, p->w)), ix));
            if (cond) idx = mt_ir_select(k, cond, idx, plane); /* an address inside the image */
            mt_stmt_list_push(k, &list, mt_ir_store(k, b->ival, KI(b, npix), mt_ir_load(k, b->in, idx)));
            conds[npix] = cond;
        }
    }
    for (int px = 0; px < npix; px++) {
        mt_expr *v = mt_ir_load(k, b->ival, KI(b, px));
        if (conds[px]) v = mt_ir_select(k, conds[px], v, mt_ir_float(k, 0.0f)); /* the padding reads 0 */
        mt_expr *bv = mt_ir_broadcast(k, v, vec);
        for (int j = 0; j < p->kr; j++) {
            int64_t a = ((int64_t)px * p->kr + j) * vec;
            mt_expr *wv = mt_ir_load_vec(k, b->wreg, KI(b, (int64_t)j * vec), vec);
            mt_expr *acc = mt_ir_load_vec(k, b->acc, KI(b, a), vec);
            mt_stmt_list_push(k, &list, mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_fma(k, bv, wv, acc)));
        }
    }
    return mt_ir_alloc(k, b->wreg, mt_ir_alloc(k, b->ival, mt_stmt_list_seq(k, &list)));
}

static mt_stmt *reduction(kvec_builder *b) {
    const kvec_plan *p = b->p;
    mt__opt_loop lc, lr, ls;
    mt_expr *c = mt__loop_begin(b->k, &lc, "c", p->c, MT_LOOP_SERIAL);
    mt_expr *r = mt__loop_begin(b->k, &lr, "r", p->r, p->unroll_rs >= 2 ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    mt_expr *s = mt__loop_begin(b->k, &ls, "s", p->s, p->unroll_rs >= 1 ? MT_LOOP_UNROLLED : MT_LOOP_SERIAL);
    return mt__loop_end(b->k, &lc, mt__loop_end(b->k, &lr, mt__loop_end(b->k, &ls, tap(b, c, r, s))));
}

/* Accumulator of lane l of channel vector j at tile pixel (y, x). */
static int64_t acc_at(const kvec_plan *p, int y, int x, int j, int l) { return (((int64_t)y * p->xr + x) * p->kr + j) * p->vec + l; }

/* Row y of the tile, one output at a time: lane l of vector j is channel
 * k0 + j*vec + l, a different plane of the NCHW output for every lane. Used
 * where the tile overhangs the row's end (pixels past ow are skipped). */
static mt_stmt *store_row_lanes(kvec_builder *b, int y, mt_expr *oy) {
    const kvec_plan *p = b->p;
    mt_kernel *k = b->k;
    const int64_t plane = (int64_t)p->oh * p->ow;
    mt_stmt_list list = {0};
    for (int x = 0; x < p->xr; x++) {
        mt_expr *ox = mt_ir_add(k, b->x0, KI(b, x));
        mt_expr *pcond = b->x_over ? mt_ir_lt(k, ox, KI(b, p->ow)) : NULL;
        mt_expr *pix = mt_ir_add(k, b->out_img, mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), ox));
        mt_stmt_list lanes = {0};
        for (int j = 0; j < p->kr; j++) {
            for (int l = 0; l < p->vec; l++) {
                mt_expr *ch = mt_ir_add(k, b->k0, KI(b, (int64_t)j * p->vec + l));
                mt_expr *idx = mt_ir_add(k, pix, mt_ir_mul(k, ch, KI(b, plane)));
                mt_expr *val = mt__epilogue_apply(k, &b->epi, mt_ir_load(k, b->acc, KI(b, acc_at(p, y, x, j, l))), ch, idx, 1);
                mt_stmt *st = mt_ir_store(k, b->out, idx, val);
                if (b->k_over) st = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->k)), st, NULL);
                mt_stmt_list_push(k, &lanes, st);
            }
        }
        mt_stmt *all = mt_stmt_list_seq(k, &lanes);
        mt_stmt_list_push(k, &list, pcond ? mt_ir_if(k, pcond, all, NULL) : all);
    }
    return mt_stmt_list_seq(k, &list);
}

/* Row y of the tile, channel by channel: one channel's reg_x outputs are
 * neighbours in NCHW, so they go out as vector stores (chunks of 16, 8, 4, 2
 * and 1 columns), each gathered from the accumulators (column x of a channel
 * lies reg_k*vec floats after column x-1) and given the epilogue as a vector
 * (one bias, one residual vector load). Stored lane by lane instead, every
 * output cost its own address, epilogue and scalar store. Inside ResNet-50
 * (bench/net_ab/results/net_ab.md, against lane-by-lane stores) the kvec layers ran
 * 1.05-1.36x faster (most on the 1x1 layers with short reductions), except
 * one strided 3x3 layer whose 4-column tiles ran 0.90x, and the
 * convolutions 1.09x. */
static mt_stmt *store_row_vectors(kvec_builder *b, int y, mt_expr *oy) {
    static const int chunk[] = {16, 8, 4, 2, 1};
    const kvec_plan *p = b->p;
    mt_kernel *k = b->k;
    const int64_t plane = (int64_t)p->oh * p->ow;
    mt_expr *row = mt_ir_add(k, b->out_img, mt_ir_add(k, mt_ir_mul(k, oy, KI(b, p->ow)), b->x0));
    mt_stmt_list list = {0};
    for (int j = 0; j < p->kr; j++) {
        for (int l = 0; l < p->vec; l++) {
            mt_expr *ch = mt_ir_add(k, b->k0, KI(b, (int64_t)j * p->vec + l));
            mt_expr *first = mt_ir_add(k, row, mt_ir_mul(k, ch, KI(b, plane)));
            mt_stmt_list cols = {0};
            for (int x = 0, c = 0; x < p->xr; x += chunk[c]) {
                while (chunk[c] > p->xr - x) c++;
                const int n = chunk[c];
                mt_expr *a = KI(b, acc_at(p, y, x, j, l));
                mt_expr *v = mt_ir_load(k, b->acc, n == 1 ? a : mt_ir_ramp(k, a, p->kr * p->vec, n));
                mt_expr *idx = mt_ir_add(k, first, KI(b, x));
                mt_expr *val = mt__epilogue_apply(k, &b->epi, v, ch, idx, n);
                mt_stmt_list_push(k, &cols, n == 1 ? mt_ir_store(k, b->out, idx, val) : mt_ir_store_vec(k, b->out, idx, val));
            }
            mt_stmt *st = mt_stmt_list_seq(k, &cols);
            if (b->k_over) st = mt_ir_if(k, mt_ir_lt(k, ch, KI(b, p->k)), st, NULL);
            mt_stmt_list_push(k, &list, st);
        }
    }
    return mt_stmt_list_seq(k, &list);
}

/* Stores the tile row by row: as vectors along the row where the tile's
 * columns all lie inside the image (always, unless tiles overhang ow), else
 * lane by lane. Rows past oh are skipped. */
static mt_stmt *store_tile(kvec_builder *b) {
    const kvec_plan *p = b->p;
    mt_kernel *k = b->k;
    mt_stmt_list list = {0};
    mt_expr *x_full = b->x_over ? mt_ir_lt(k, b->x0, KI(b, (int64_t)p->ow - p->xr + 1)) : NULL;
    for (int y = 0; y < p->yr; y++) {
        mt_expr *oy = mt_ir_add(k, b->y0, KI(b, y));
        mt_expr *ycond = b->y_over ? mt_ir_lt(k, oy, KI(b, p->oh)) : NULL;
        mt_stmt *row = x_full ? mt_ir_if(k, x_full, store_row_vectors(b, y, oy), store_row_lanes(b, y, oy)) : store_row_vectors(b, y, oy);
        mt_stmt_list_push(k, &list, ycond ? mt_ir_if(k, ycond, row, NULL) : row);
    }
    return mt_stmt_list_seq(k, &list);
}

static mt_status kvec_build_plan(const kvec_plan *p, mt_kernel **out, char *err, size_t errlen) {
    mt_kernel *k = mt_kernel_new("conv2d_kvec");
    if (!k) return mt__fail(err, errlen, MT_NOMEM, "kvec: out of memory");
    kvec_builder bb = {.k = k, .p = p};
    kvec_builder *b = &bb;
    const int vec = p->vec;
    const int64_t in_elems = (int64_t)p->n * p->c * p->h * p->w;
    const int64_t w_elems = (int64_t)p->k16 * p->c * p->r * p->s;
    const int64_t out_elems = (int64_t)p->n * p->k * p->oh * p->ow;
    b->in = mt_ir_param(k, "input", in_elems, 1);
    b->wt = mt_ir_param(k, "weight", w_elems, 1);
    b->out = mt_ir_param(k, "output", out_elems, 0);
    mt__epilogue_params(k, p->epi, b->out, p->k, out_elems, &b->epi);
    const int64_t nacc = (int64_t)p->kr * p->yr * p->xr * vec;
    b->acc = mt_ir_buffer(k, "acc", MT_SCOPE_PRIVATE, nacc);
    b->wreg = mt_ir_buffer(k, "wreg", MT_SCOPE_PRIVATE, (int64_t)p->kr * vec);
    b->ival = mt_ir_buffer(k, "ival", MT_SCOPE_PRIVATE, (int64_t)p->yr * p->xr);

    const int64_t kspan = (int64_t)p->ko * p->kt * p->kr * vec;
    b->k_over = kspan > p->k;
    b->w_clamp = kspan > p->k16;
    b->y_over = (int64_t)p->yo * p->yt * p->yr > p->oh;
    b->x_over = (int64_t)p->xo * p->xt * p->xr > p->ow;
    b->iy_lo = p->ph > 0;
    b->ix_lo = p->pw > 0;
    b->iy_hi = ((int64_t)p->yo * p->yt * p->yr - 1) * p->sh - p->ph + (int64_t)(p->r - 1) * p->dh >= p->h;
    b->ix_hi = ((int64_t)p->xo * p->xt * p->xr - 1) * p->sw - p->pw + (int64_t)(p->s - 1) * p->dw >= p->w;

    mt__opt_loop gk, gx, gz, tk, tx, ty;
    mt_expr *bk = mt__loop_begin(b->k, &gk, "bk", p->ko, MT_LOOP_BLOCK);
    mt_expr *bx = mt__loop_begin(b->k, &gx, "bx", p->xo, MT_LOOP_BLOCK);
    mt_expr *bz = mt__loop_begin(b->k, &gz, "bz", (int64_t)p->n * p->yo, MT_LOOP_BLOCK);
    mt_expr *vk = mt__loop_begin(b->k, &tk, "tk", p->kt, MT_LOOP_THREAD);
    mt_expr *vx = mt__loop_begin(b->k, &tx, "tx", p->xt, MT_LOOP_THREAD);
    mt_expr *vy = mt__loop_begin(b->k, &ty, "ty", p->yt, MT_LOOP_THREAD);
    gx.axis = tx.axis = 1;
    ty.axis = 2;
    if (kvec_pixels_first(p)) gz.axis = 0, gk.axis = 2;
    else gk.axis = 0, gz.axis = 2;

    mt__let_chain l = {0};
    mt_expr *img = mt__let_bind(k, &l, "img", mt_ir_div(k, bz, KI(b, p->yo)));
    mt_expr *yblk = mt_ir_mod(k, bz, KI(b, p->yo));
    b->k0 = mt__let_bind(k, &l, "k0", mt_ir_add(k, mt_ir_mul(k, bk, KI(b, (int64_t)p->kt * p->kr * vec)), mt_ir_mul(k, vk, KI(b, (int64_t)p->kr * vec))));
    b->y0 = mt__let_bind(k, &l, "y0", mt_ir_add(k, mt_ir_mul(k, yblk, KI(b, (int64_t)p->yt * p->yr)), mt_ir_mul(k, vy, KI(b, p->yr))));
    b->x0 = mt__let_bind(k, &l, "x0", mt_ir_add(k, mt_ir_mul(k, bx, KI(b, (int64_t)p->xt * p->xr)), mt_ir_mul(k, vx, KI(b, p->xr))));
    b->in_img = mt__let_bind(k, &l, "in_base", mt_ir_mul(k, img, KI(b, (int64_t)p->c * p->h * p->w)));
    b->out_img = mt__let_bind(k, &l, "out_base", mt_ir_mul(k, img, KI(b, (int64_t)p->k * p->oh * p->ow)));
    const int64_t block_stride = (int64_t)p->c * p->r * p->s * 16;
    for (int j = 0; j < p->kr; j++) {
        /* Channel vector j starts at k0 + j*vec; past the layout's channels
         * it reads the last block instead (and is never stored). */
        mt_expr *first = mt_ir_add(k, b->k0, KI(b, (int64_t)j * vec));
        if (b->w_clamp) first = mt_ir_min(k, first, KI(b, p->k16 - vec));
        char name[16];
        snprintf(name, sizeof name, "wb%d", j);
        b->wbase[j] = mt__let_bind(k, &l, name, mt_ir_add(k, mt_ir_mul(k, mt_ir_div(k, first, KI(b, 16)), KI(b, block_stride)), mt_ir_mod(k, first, KI(b, 16))));
    }

    mt_stmt_list init = {0};
    for (int64_t a = 0; a < nacc; a += vec)
        mt_stmt_list_push(k, &init, mt_ir_store_vec(k, b->acc, KI(b, a), mt_ir_broadcast(k, mt_ir_float(k, 0.0f), vec)));
    mt_stmt *work = mt_ir_alloc(k, b->acc, mt_ir_seq2(k, mt_ir_seq2(k, mt_stmt_list_seq(k, &init), reduction(b)), store_tile(b)));
    mt_stmt *body = mt__let_wrap(k, &l, work);
    body = mt__loop_end(b->k, &gk, mt__loop_end(b->k, &gx, mt__loop_end(b->k, &gz, mt__loop_end(b->k, &tk, mt__loop_end(b->k, &tx, mt__loop_end(b->k, &ty, body))))));
    if (!body) {
        mt_kernel_free(k);
        return mt__fail(err, errlen, MT_NOMEM, "kvec: out of memory while building the kernel");
    }
    k->body = body;
    k->unroll_explicit = p->unroll_explicit;
    *out = k;
    return MT_OK;
}

static mt_status kvec_build(const mt_workload *wl, const mt_space *sp, const mt_config *cfg, const mt_conv_epilogue *epi, mt_kernel **out,
                            char *err, size_t errlen) {
    if (!kvec_accepts(wl)) return mt__fail(err, errlen, MT_UNSUPPORTED, "kvec: grouped convolutions are not supported");
    kvec_plan p;
    kvec_canon(wl, &p);
    p.kt = mt_config_value(sp, cfg, "thread_k");
    p.vec = mt_config_value(sp, cfg, "vec");
    p.kr = mt_config_value(sp, cfg, "reg_k");
    p.yt = mt_config_value(sp, cfg, "thread_y");
    p.yr = mt_config_value(sp, cfg, "reg_y");
    p.xt = mt_config_value(sp, cfg, "thread_x");
    p.xr = mt_config_value(sp, cfg, "reg_x");
    p.unroll_rs = mt_config_value(sp, cfg, "unroll_rs");
    p.unroll_explicit = mt_config_value(sp, cfg, "unroll_explicit");
    p.epi = epi;
    if (p.kt < 1 || p.vec < 1 || 16 % p.vec || p.kr < 1 || p.kr > 4 || p.yt < 1 || p.yr < 1 || p.xt < 1 || p.xr < 1 || p.unroll_rs < 0)
        return mt__fail(err, errlen, MT_INVALID_ARG, "kvec: config does not match this workload's space");
    if ((int64_t)p.kr * p.vec > p.k16)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "kvec: %d channel vectors of %d exceed the %d channels (padded to 16)", p.kr, p.vec, p.k16);
    int64_t priv = (int64_t)p.kr * p.vec * ((int64_t)p.yr * p.xr + 1);
    if (priv > MT__KVEC_MAX_PRIVATE_FLOATS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "kvec: %lld private floats per work-item (%dx%d pixels x %d vectors of %d) exceed %d",
                        (long long)priv, p.yr, p.xr, p.kr, p.vec, MT__KVEC_MAX_PRIVATE_FLOATS);
    p.ko = (int)((p.k + (int64_t)p.kt * p.kr * p.vec - 1) / ((int64_t)p.kt * p.kr * p.vec));
    p.yo = (p.oh + p.yt * p.yr - 1) / (p.yt * p.yr);
    p.xo = (p.ow + p.xt * p.xr - 1) / (p.xt * p.xr);
    return kvec_build_plan(&p, out, err, errlen);
}

const mt_template mt__template_kvec = {
    /* .name    = */ "kvec",
    /* .accepts = */ kvec_accepts,
    /* .space   = */ kvec_space,
    /* .build   = */ kvec_build,
    /* .weights = */ MT_WEIGHTS_OIHW16O,
};
