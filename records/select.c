/* Best-config selection (select.h): the policy that reads the records store
 * (preference -> fastest usable record -> default config), building kernels
 * to decide which records still serve. */
#include "select.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "ir.h"
#include "program.h"

/* Most records a selection tries before it falls back to a default. */
#define MT__SELECT_MAX_CANDIDATES 256
/* Default-config search (see mt_default_config in select.h). */
#define MT__DEFAULT_SCAN 4096
#define MT__DEFAULT_KEEP 64
#define MT__DEFAULT_SEED UINT64_C(0x6d74677075646566) /* "mtgpudef" */

/* A selection in progress: the walk's filter and what it has kept. */
typedef struct select_ctx {
    const mt_workload *wl;
    unsigned layouts; /* the layouts the caller can give */
    mt_select_result res; /* t, space, cfg and rec of the record kept */
    int found;
    int want;       /* take the want-th usable record (1: the fastest) */
    int seen;       /* usable records so far */
    const char *match_template, *match_config; /* or only the record of this template and config */
} select_ctx;

/* t exists, accepts wl, and reads its weights (in some config) in a layout the caller gives. */
static int template_usable(const mt_template *t, const mt_workload *wl, unsigned layouts) {
    return t && mt_template_accepts(t, wl) && (layouts & mt_template_weight_layouts(t));
}

/* Keeps rec when its template is usable and its config still builds, and
 * stops the walk at the want-th such record (an earlier one kept is
 * replaced: with fewer usable records than want, the last one stays). */
static int try_record(const mt_record *rec, void *user) {
    select_ctx *c = user;
    if (c->match_template && (strcmp(rec->template_name, c->match_template) != 0 || strcmp(rec->config, c->match_config) != 0)) return 0;
    const mt_template *t = mt_template_find(rec->template_name);
    if (!template_usable(t, c->wl, c->layouts)) return 0;
    mt_space sp;
    if (mt_template_space(t, c->wl, &sp) != MT_OK) return 0;
    mt_config cfg;
    mt_kernel *k = NULL;
    if (mt_config_parse(&sp, rec->config, &cfg, NULL, 0) == MT_OK && (c->layouts & (1u << mt_template_config_weight_layout(t, &sp, &cfg))) &&
        mt_template_build(t, c->wl, &sp, &cfg, &k, NULL, 0) == MT_OK) {
        mt_kernel_free(k);
        if (c->found) mt_space_free(&c->res.space);
        c->res.t = t;
        c->res.space = sp;
        c->res.cfg = cfg;
        c->res.rec = *rec;
        c->found = 1;
        return ++c->seen >= c->want;
    }
    mt_space_free(&sp);
    return 0;
}

/* Offers try_record a record made from a template and config the database
 * may not hold (a preference's, a pin's). */
static void try_made(select_ctx *c, const char *fp, const char *tmpl, const char *config, const char *version, const char *source) {
    mt_record made;
    mt_record_init(&made);
    made.wl = *c->wl;
    snprintf(made.template_name, sizeof made.template_name, "%s", tmpl);
    snprintf(made.config, sizeof made.config, "%s", config);
    memcpy(made.device, fp, sizeof made.device);
    snprintf(made.version, sizeof made.version, "%s", version);
    snprintf(made.source, sizeof made.source, "%s", source);
    try_record(&made, c);
}

/* The in-network preference of wl on device fp, when there is one, its
 * template is usable and its config builds. c->res.rec is then the record of
 * that config (median_ms its isolated time) or, where the database holds
 * none, a record made from the preference; either way source says
 * "in-network". Errors of the database only mean no preference here: the
 * walk of the records that follows reports them. */
static int try_preference(mt_db *db, select_ctx *c, const char *fp) {
    mt_preference *pref = malloc(sizeof *pref);
    if (!pref) return 0;
    int ok = 0;
    if (mt_db_get_preference(db, c->wl, fp, pref, NULL, 0) == MT_OK) {
        mt_db_filter f = {.wl = c->wl, .device = fp, .only_ok = 1};
        c->want = 1;
        c->match_template = pref->template_name;
        c->match_config = pref->config;
        /* A damaged row stops the walk: then the record made below serves. */
        (void)mt_db_for_each(db, &f, try_record, c, NULL, 0);
        if (!c->found) try_made(c, fp, pref->template_name, pref->config, pref->version, "");
        if (c->found) {
            snprintf(c->res.rec.source, sizeof c->res.rec.source, "in-network:%s", pref->network);
            ok = 1;
        }
        c->match_template = c->match_config = NULL;
        c->seen = 0;
    }
    free(pref);
    return ok;
}

/* |floor(log2(x)) - target|, in a form that needs no libm. */
static int64_t log2_distance(int64_t x, int target) {
    int l = 0;
    while (l < 62 && ((int64_t)1 << (l + 1)) <= x) l++;
    return l > target ? l - target : target - l;
}

/* Knob values that make fast kernels on CPUs (PoCL), from the best configs
 * directed searches found there (bench/common/known_configs.txt): one work-item per
 * group, a register tile of about 12 AVX2 registers, 8-wide vectors, no
 * local-memory staging. A split knob gives a value per part (0: any). The
 * generic rule below suits GPUs and picks 128-work-item groups, which on
 * PoCL run 100x slower than these. */
typedef struct cpu_pref {
    const char *tmpl, *knob;
    int part[MT_MAX_SPLIT_PARTS];
} cpu_pref;

static const cpu_pref cpu_prefs[] = {
    /* gemm: 8 channels x 48 pixels in vectors as wide as the device's
     * registers (24 AVX-512 accumulators, 11 loads per 24 FMAs; with 8-lane
     * vectors 4 x 24, see cpu_pref_for_device); 4 x 24 in 8-lane vectors
     * on AVX-512 had run the 64 -> 256 1x1 layer of ResNet-50 at 56x56 in
     * 1.00-1.04 ms against 0.33-0.61 ms for 6 x 32, four runs of each in
     * turns. Against that 6 x 32 tile (12 accumulators), inside the networks
     * at default configs (net_ab, 5 rounds, 2026-12-03): ResNet-50's nine
     * gemm layers 7.09 -> 6.72 ms of device time (1.06x; eight of them
     * 0.96-1.13x, 64 -> 64 at 56x56 0.90x) while its other convolutions
     * drifted 0.94x;
     * MobileNetV2's 1.83 -> 1.66 ms (1.10x; 24 -> 144 at 56x56 0.90-0.95x)
     * while its others drifted 1.09x
     * (bench/net_ab/results/net_ab_gemm_tiles_{resnet50,mobilenet_v2}.md). */
    {"gemm", "thread_k", {1}}, {"gemm", "reg_k", {8}}, {"gemm", "thread_y", {1}}, {"gemm", "reg_y", {1}},
    {"gemm", "thread_x", {1}}, {"gemm", "reg_x", {48}}, {"gemm", "tile_red", {0, 1}}, {"gemm", "vec", {8}},
    {"gemm", "stage_local", {0}}, {"gemm", "auto_unroll_max_step", {512}}, {"gemm", "unroll_explicit", {1}},
    {"direct", "tile_f", {0, 1, 1, 8}}, {"direct", "tile_y", {0, 1, 0, 1}}, {"direct", "tile_x", {0, 1, 1, 8}},
    {"direct", "tile_rc", {0, 1}}, {"direct", "auto_unroll_max_step", {512}}, {"direct", "unroll_explicit", {0}},
    {"direct", "vec", {8}}, {"direct", "stage_local", {0}},
    {"depthwise", "tile_f", {0, 1, 1, 1}}, {"depthwise", "tile_y", {0, 1, 1, 2}}, {"depthwise", "tile_x", {0, 1, 1, 8}},
    {"depthwise", "auto_unroll_max_step", {512}}, {"depthwise", "unroll_explicit", {1}}, {"depthwise", "vec", {8}},
    {"depthwise", "stage_local", {0}},
    /* dwrow: whole rows of one channel per work-item in 16-lane vectors
     * (two rows; one on rows of 112 outputs or more) on rows of 56 outputs
     * or more, else seven rows of four channels in turn in 8-lane vectors
     * (see cpu_pref_for_device). */
    {"dwrow", "vec", {16}}, {"dwrow", "reg_y", {2}}, {"dwrow", "chan", {1}},
    /* kvec: two channel vectors x 7 pixels of a row (14 accumulators; vec is
     * the device's native float width, see cpu_pref_for_device), the s taps
     * unrolled and replicated (with pragmas PoCL kept the tile in memory:
     * 2.2x slower on the 14x14 3x3 of ResNet-50). */
    {"kvec", "thread_k", {1}}, {"kvec", "vec", {16}}, {"kvec", "reg_k", {2}}, {"kvec", "thread_y", {1}}, {"kvec", "reg_y", {1}},
    {"kvec", "thread_x", {1}}, {"kvec", "reg_x", {7}}, {"kvec", "unroll_rs", {1}}, {"kvec", "unroll_explicit", {1}},
    /* wino: F(4x4) tiles, a register tile of 2x4 tiles x two channel
     * vectors (16 AVX-512 accumulators), two register tiles per work-group
     * along the row, the channel groups as a loop in one work-item. Timed
     * alone against six other shapes (`mtgpu conv WL --template wino
     * --config CFG`, one run on 2026-12-02) on the 3x3 layers of ResNet-50
     * and VGG-16 at 28x28 to 112x112: the fastest or within 10% of it on
     * every one but the 64-channel 224x224 layer (1.3x slower than one
     * vector x 2x2 tiles); replicating its loops (unroll) made it 2-3x
     * slower. See cpu_pref_for_device for rows of 16 outputs or fewer and of
     * 56 or more. */
    {"wino", "tile", {4}}, {"wino", "vec", {16}}, {"wino", "reg_k", {2}}, {"wino", "reg_y", {2}}, {"wino", "reg_x", {4}},
    {"wino", "split_k", {1}}, {"wino", "unroll", {0}}, {"wino", "blk_y", {1}}, {"wino", "blk_x", {2}}, {"wino", "k_loop", {1}},
    /* stem: tiles of 4 channels x 2 column vectors (8 accumulators, each
     * tap's two input vectors and four weights), one output row per
     * work-item; vec is the device's native float width (see
     * cpu_pref_for_device). Timed alone on a Zen 3 (process CPU time, 4-5
     * rounds in turns, 2026-12-06): MobileNetV2's first layer 0.150 ms, VGG-16's
     * 1.02 and ResNet-50's 7x7 stem 1.36 (92% of the FMA peak), against
     * 0.153, 1.10 and 1.32 with 4 x 3 and 0.145, 1.01 (MobileNetV2, VGG-16)
     * with two rows per work-item. */
    {"stem", "vec", {8}}, {"stem", "reg_k", {4}}, {"stem", "reg_x", {2}}, {"stem", "rows", {1}}, {"stem", "k_blocks", {1}},
};

/* Whether t is kvec and a padded output row of wl, 8 to 16 wide (7 to 16
 * on devices of 8-lane vectors), fits one tile (its width is an option of
 * reg_x): see kvec's preference there. */
static int kvec_full_row(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp) {
    const int ow = mt_workload_out_w(wl), narrowest = dev->native_vector_width < 16 ? 7 : 8;
    if (strcmp(mt_template_name(t), "kvec") != 0 || wl->pad_w <= 0 || ow < narrowest || ow > 16) return 0;
    for (int k = 0; k < sp->nknobs; k++) {
        const mt_knob *kn = &sp->knobs[k];
        if (strcmp(kn->name, "reg_x") != 0) continue;
        for (int o = 0; o < kn->noptions; o++)
            if (kn->values[o * kn->nparts] == ow) return 1;
    }
    return 0;
}

/* Whether pref is one of kvec's and wl an unpadded 1x1 convolution. */
static int kvec_pointwise(const cpu_pref *pref, const mt_workload *wl) {
    return !strcmp(pref->tmpl, "kvec") && wl->r == 1 && wl->s == 1 && wl->pad_h == 0 && wl->pad_w == 0;
}

/* Whether pref is one of kvec's and wl an unpadded 1x1 convolution whose
 * rows are a multiple of 14 (the 14-column tile's). */
static int kvec_pointwise_14(const cpu_pref *pref, const mt_workload *wl) { return kvec_pointwise(pref, wl) && mt_workload_out_w(wl) % 14 == 0; }

/* Whether pref is one of kvec's and wl a strided convolution of the RGB
 * input (at most 4 channels per group) whose row is not one tile. */
static int kvec_rgb_strided(const cpu_pref *pref, const mt_workload *wl, int full_row) {
    return !strcmp(pref->tmpl, "kvec") && wl->c / wl->groups <= 4 && wl->stride_w >= 2 && !full_row;
}

/* Whether pref is one of kvec's, dev has 8-lane vectors (or narrower) and
 * wl's tile is the generic one of 7 columns (not a whole padded row, not
 * the 1 x 14 of 1x1 layers) with two output rows or more. */
static int kvec_avx2_rows(const cpu_pref *pref, const mt_device_info *dev, const mt_workload *wl, int full_row) {
    return !strcmp(pref->tmpl, "kvec") && dev->native_vector_width < 16 && !full_row && !kvec_pointwise_14(pref, wl) &&
           !kvec_rgb_strided(pref, wl, full_row) && mt_workload_out_h(wl) >= 2;
}

/* Whether pref is one of kvec's, dev has 8-lane vectors (or narrower) and
 * wl's tile the generic one (kvec_avx2_rows) of a kernel three columns wide
 * on rows a multiple of 4 outputs: see kvec's preference there. */
static int kvec_avx2_columns(const cpu_pref *pref, const mt_device_info *dev, const mt_workload *wl, int full_row) {
    return kvec_avx2_rows(pref, dev, wl, full_row) && wl->s == 3 && mt_workload_out_w(wl) % 4 == 0;
}

/* Whether pref is one of kvec's, dev has 8-lane vectors (or narrower) and
 * wl an unpadded stride-1 1x1 convolution, whose one-row tiles kvec runs
 * over the flattened image. */
static int kvec_avx2_flat(const cpu_pref *pref, const mt_device_info *dev, const mt_workload *wl) {
    return !strcmp(pref->tmpl, "kvec") && dev->native_vector_width < 16 && mt_workload_is_pointwise(wl);
}

/* The columns of kvec's flat tile on an image of `pixels`: 6, or 5 where
 * 5-pixel tiles leave fewer past the image (49 pixels: 1 against 5). */
static int kvec_flat_columns(int64_t pixels) {
    const int64_t past6 = (pixels + 5) / 6 * 6 - pixels, past5 = (pixels + 4) / 5 * 5 - pixels;
    return past5 < past6 ? 5 : 6;
}

/* Whether wl is a layer wino takes in F(2x2) tiles on a CPU, all of its
 * tiles in one register tile (see cpu_default_template and
 * cpu_pref_for_device): 7x7 or 8x8 outputs (4x4 tiles), 16 input channels or
 * more, 16-lane vectors. */
static int wino_small_output(const mt_workload *wl, const mt_device_info *dev) {
    const int oh = mt_workload_out_h(wl), ow = mt_workload_out_w(wl);
    return dev->native_vector_width >= 16 && wl->c >= 16 && oh >= 7 && oh <= 8 && ow >= 7 && ow <= 8;
}

/* pref (one knob's CPU preference) as it applies to dev and wl, and for kvec
 * to an output row that full_row says fits one tile (kvec_full_row). narrow:
 * the second try, where the first config passed the device's limits. */
static void cpu_pref_for_device(cpu_pref *pref, const mt_device_info *dev, const mt_workload *wl, int full_row, int narrow) {
    const int ow = mt_workload_out_w(wl);
    const int gemm = !strcmp(pref->tmpl, "gemm"), wino = !strcmp(pref->tmpl, "wino");
    /* Vectors (of channels; gemm's of pixels) as wide as the device's registers (AVX2 8, AVX-512 16). */
    if ((!strcmp(pref->tmpl, "kvec") || wino || gemm || !strcmp(pref->tmpl, "stem")) && !strcmp(pref->knob, "vec") && dev->native_vector_width >= 4)
        pref->part[0] = dev->native_vector_width;
    /* kvec on padded rows of 8 to 16 outputs: one channel vector x the
     * whole row. With one tile per row its columns are constants, so the
     * column tests fold away: ResNet-50's 3x3 layers with 14x14 outputs
     * ran 1.5-2.6x faster (stride 1) and 1.5-2.3x (stride 2) than with
     * two 7-column tiles of two vectors. Unpadded 1x1 layers have no
     * column tests, and there the two tiles were as fast or faster. With
     * 8-lane vectors (AVX2: 16 registers) rows of 7 too: on a Zen 3, inside
     * ResNet-50 (3 rounds in turns, 2026-12-05), its 512-channel 3x3 layers
     * at 7x7 took 1.55 ms with one vector x 7 against 2.24-2.26 with two
     * (2 x 7 accumulators and the taps' weight vectors pass 16 registers;
     * bench/config_ab/results/zen3_resnet50_3x3_7x7.md). */
    if (full_row && !strcmp(pref->knob, "reg_x")) pref->part[0] = ow;
    if (full_row && !strcmp(pref->knob, "reg_k")) pref->part[0] = 1;
    /* With 8-lane vectors, rows of 9 to 16 outputs of kernels wider than one
     * column in two tiles of half the row: kvec runs their kernel rows
     * column by column (kvec_column_order), the row's weight vectors held
     * in registers, and 14 accumulators, three weight vectors and the
     * broadcast pass AVX2's 16. Timed alone on a Zen 3 (process CPU time,
     * 5 rounds in turns, 2026-12-06), ResNet-50's 3x3 stride-2 layer at
     * 14x14 took 1.67 ms with one vector x 7 against 2.26 with the whole
     * row and 1.83 with two rows x 7; inside the network (4 rounds in
     * turns) 1.82 ms against 2.24 (1.22x) and 1.73 (0.95x, 0.47-1.05 over
     * the rounds; bench/config_ab/results/zen3_resnet50_3x3s2_14_column_order.md). */
    if (full_row && dev->native_vector_width < 16 && ow > 8 && wl->s > 1 && !strcmp(pref->knob, "reg_x")) pref->part[0] = (ow + 1) / 2;
    /* kvec on unpadded 1x1 layers (no column tests) whose rows are a
     * multiple of 14: 28 accumulators, two channel vectors x 14 columns, so
     * each weight vector feeds twice the FMAs. Timed alone against the 2 x 7
     * tile in turns (min of 4 runs, 2026-12-02): 0.43 against 0.47 ms
     * (1024 -> 256 at 14x14), 0.55 against 0.61 (256 -> 64 at 56x56);
     * inside ResNet-50 those 22 layers took 29.3 -> 21.9 ms (1.34x) while
     * the unchanged ones moved 1.18-1.32x with the machine
     * (bench/net_ab/results/net_ab_kvec_1x1_tiles_resnet50.md).
     * Four vectors x 7 on 7-wide rows ran 0.53 against 0.56 ms alone but
     * about 10% slower inside ResNet-50, and on padded 3x3 layers the
     * larger tiles ran 1.7-2.3x slower alone (the column tests). */
    if (kvec_pointwise_14(pref, wl) && !strcmp(pref->knob, "reg_x")) pref->part[0] = 14;
    /* With 8-lane vectors (AVX2: 16 registers) one channel vector x 14
     * columns, 14 accumulators: two vectors x 14 take 28 and spill. On a
     * Zen 3, inside ResNet-50 (3 rounds in turns, 2026-12-05), its
     * 1024 -> 256 layers at 14x14 took 0.69 ms with 1 x 14 against 1.28
     * with 2 x 14, 1.06 with 2 x 7 and 0.79 with gemm's 4 x 24
     * (bench/config_ab/results/zen3_resnet50_1x1_14x14.md). */
    if (kvec_pointwise_14(pref, wl) && dev->native_vector_width < 16 && !strcmp(pref->knob, "reg_k")) pref->part[0] = 1;
    /* Elsewhere with 8-lane vectors, where two rows or more: one channel
     * vector x 2 rows x 7 columns, 14 accumulators. The two vectors x 7 of
     * the 16-lane default need 14 accumulators, two weight vectors and the
     * broadcast, one register more than AVX2's 16: PoCL's LLVM kept two
     * accumulators on the stack, each FMA on them a store and a reload
     * (ResNet-50's 2048 -> 512 1x1 layer at 7x7 with its data in cache:
     * 95 GFLOP/s against 177 for 1 x 2 x 7,
     * bench/kernel_anatomy/results/kernel_anatomy_avx2.md). The second row
     * reuses each tap's weight vector, as a second vector would reuse the
     * broadcast. On a Zen 3 at default configs (3 rounds in turns,
     * 2026-12-06, bench/net_ab/results/net_ab_avx2_kvec_rows_*.md):
     * ResNet-50's stem 1.39x as fast, its 3x3 stride-2 layer at 28x28
     * 1.27x, its 7x7 1x1 layers 1.19-1.27x; ResNet-18 1.14x as a whole. */
    if (kvec_avx2_rows(pref, dev, wl, full_row) && !strcmp(pref->knob, "reg_k")) pref->part[0] = 1;
    if (kvec_avx2_rows(pref, dev, wl, full_row) && !strcmp(pref->knob, "reg_y")) pref->part[0] = 2;
    /* Instead, on kernels three columns wide whose rows are a multiple of 4
     * outputs: two channel vectors x 4 columns of one row. kvec runs their
     * kernel rows column by column (kvec_column_order) with the row's six
     * weight vectors in registers: 8 accumulators, 6 weight vectors and the
     * broadcast fit AVX2's 16, where 1 x 2 x 7 (14 accumulators and 3
     * weight vectors) kept some accumulators on the stack. Timed alone on
     * a Zen 3 (process CPU time, 5 rounds in turns, 2026-12-06): ResNet-50's
     * 3x3 stride-2 layer at 28x28 1.40 ms against 1.77, ResNet-18's
     * 0.91 against 1.13, a 128-channel 3x3 stride-1 layer at 28x28 1.94
     * against 2.17; inside ResNet-50 (4 rounds in turns) 1.72 ms against
     * 2.01 (0.87x, 0.81-1.05 over the rounds;
     * bench/config_ab/results/zen3_resnet50_3x3s2_28_column_order.md). */
    if (kvec_avx2_columns(pref, dev, wl, full_row) && !strcmp(pref->knob, "reg_k")) pref->part[0] = 2;
    if (kvec_avx2_columns(pref, dev, wl, full_row) && !strcmp(pref->knob, "reg_y")) pref->part[0] = 1;
    if (kvec_avx2_columns(pref, dev, wl, full_row) && !strcmp(pref->knob, "reg_x")) pref->part[0] = 4;
    /* With 8-lane vectors on unpadded stride-1 1x1 layers, instead of the
     * two above: two channel vectors x 5 or 6 pixels of the flattened
     * image (kvec runs one-row tiles of these layers over it), 12
     * accumulators, one broadcast per two FMAs and almost no tile past the
     * image (the 1 x 2 x 7 tile left an eighth of a 7x7 image's FMAs past
     * it). At default configs on a Zen 3 (3 rounds in turns with the tiles
     * before, 2026-12-06, bench/net_ab/results/net_ab_avx2_kvec_flat_*.md):
     * ResNet-50 1.04x as fast (its 7x7 1x1 layers 1.03-1.18x, its 14x14
     * ones 1.07-1.17x), MobileNetV2 1.04x (7x7 1.06-1.27x, 14x14
     * 1.01-1.14x), SqueezeNet 1.1 1.11x (its squeeze layers 1.5-1.9x).
     * First kept to 96 input channels or more (alone, 2 x 6 had run
     * MobileNetV2's 64 -> 384 at 14x14 in 0.101-0.107 ms against 0.091 for
     * 1 x 14); on every layer, in turns with that (net_ab_avx2_kvec_flat_all_*.md),
     * that layer ran 1.04-1.10x as fast and SqueezeNet 1.1's expand layers
     * of 32-64 channels 1.46-1.97x. */
    if (kvec_avx2_flat(pref, dev, wl) && !strcmp(pref->knob, "reg_k")) pref->part[0] = 2;
    if (kvec_avx2_flat(pref, dev, wl) && !strcmp(pref->knob, "reg_y")) pref->part[0] = 1;
    if (kvec_avx2_flat(pref, dev, wl) && !strcmp(pref->knob, "reg_x"))
        pref->part[0] = kvec_flat_columns((int64_t)mt_workload_out_h(wl) * mt_workload_out_w(wl));
    /* kvec on the RGB input (at most 4 channels per group) with stride 2,
     * in 16-lane vectors: 16 accumulators, as all of the layer's channel
     * vectors (up to 4) x 16 / vectors columns, so that each broadcast
     * input feeds every output channel and each row goes out in aligned
     * pieces of 4-8 floats (7 columns are stored 4 + 2 + 1). Inside the
     * networks (3 rounds in turns, 2026-12-05): ResNet-50's 7x7 stem (64
     * channels) took 0.83-0.85 ms with 4 vectors x 4 columns against 1.04
     * with 2 x 8 and 1.08 with 2 x 7; MobileNetV2's 3x3 first layer (32
     * channels) 0.135 with 2 x 8 against 0.191 with 2 x 7 and 0.170 with
     * 2 x 4 (again, 4 rounds: 0.810, 0.910 and 0.967 ms; 0.132, 0.171
     * and 0.188; bench/config_ab/results/resnet50_stem.md,
     * mobilenet_v2_first_layer.md). At default configs, in turns with 2 x 7 (4 rounds,
     * bench/net_ab/results/net_ab_kvec_rgb_default_*.md), the first layers
     * of ResNet-50, MobileNetV2 and SqueezeNet 1.1 ran 1.26x, 1.20x and
     * 1.12x as fast. Timed alone the stem took 0.72-0.73 ms either way. VGG-16's
     * stride-1 first layer (gemm's by default, 1.20 ms) took 2.27 with
     * 4 x 4 and 1.57 with 2 x 8, so stride 1 keeps 2 x 7. */
    /* The same in 8-lane vectors: up to 4 channel vectors x 8 / vectors
     * columns, 8 accumulators (4 x 4 would spill: 16 accumulators, 4
     * weight vectors and the broadcast in AVX2's 16 registers). On a Zen 3
     * inside MobileNetV2 (4 rounds in turns, 2026-12-06) its first layer
     * took 0.241 ms with 4 x 2 against 0.311 with 1 vector x 2 rows x 7
     * (the 8-lane default elsewhere), 0.347 with 2 x 2 rows x 3 and 0.232
     * with the tuner's direct kernel
     * (bench/config_ab/results/zen3_mobilenet_v2_first_layer_rows.md);
     * ResNet-50's stem 1.73 against 1.96 ms (0.74-1.06x per round,
     * zen3_resnet50_stem_rows.md). With 3x3 kernels (27 taps) instead
     * one vector x 8 columns, whose 8 x 8 block goes out as eight aligned
     * 8-float row pieces after one transposition: the 4 x 2 tile's 32
     * two-float stores weigh on so short a reduction. There (5 rounds,
     * zen3_mobilenet_v2_first_layer_1x8.md) 1 x 8 and 2 x 4 took 0.84x
     * the time of 4 x 2 (0.76-1.16, 0.73-0.86), the direct kernel 0.88x
     * (0.69-1.87); at default configs, in turns with 4 x 2 (6 rounds,
     * bench/net_ab/results/net_ab_avx2_kvec_rgb_1x8_*.md), MobileNetV2's
     * first layer 0.274 -> 0.215 ms (1.27x, its other layers a median
     * 0.98x) and SqueezeNet 1.1's 64-channel one 1.07x (the others 1.03x). On
     * ResNet-50's 7x7 stem (147 taps, each of 1 x 8's nine loads to eight
     * FMAs against 4 x 2's six) 1 x 8 took 1.01x (1.00-1.10) the time of
     * 4 x 2 side by side (zen3_resnet50_stem_1x8.md) and 1.04x at default
     * configs, so 7x7 keeps 4 x 2. */
    if (kvec_rgb_strided(pref, wl, full_row) && (!strcmp(pref->knob, "reg_k") || !strcmp(pref->knob, "reg_x"))) {
        const int lanes = dev->native_vector_width >= 16 ? 16 : 8, padded = (wl->k + lanes - 1) / lanes * lanes;
        int vectors = padded / lanes < 4 ? padded / lanes : 4;
        if (lanes == 8 && wl->r * wl->s <= 9) vectors = 1;
        pref->part[0] = !strcmp(pref->knob, "reg_k") ? vectors : lanes / vectors;
    }
    /* wino on rows of at most one register tile (4 F(4x4) tiles, 16
     * outputs): two register tiles per work-group, the 16 tiles of a 14x14
     * or 16x16 output (the blocks take the tiles row-major), and the
     * channels split over two work-groups, so that each reads half the
     * transformed weights once. Inside the networks (3 rounds in turns,
     * 2026-12-04) the 14x14 layers took 0.616 ms against 0.736 with one
     * register tile per work-group (ResNet-50, 256 channels) and 1.85
     * against 2.32 (VGG-16, 512). */
    if (wino && ow <= 16 && !strcmp(pref->knob, "blk_x")) pref->part[0] = 2;
    /* wino on rows of 56 outputs or more (64-256 channels in ResNet and
     * VGG): one register tile per work-group along the row too. At default
     * configs, in turns with two tiles inside the networks (3 rounds,
     * bench/net_ab/results/net_ab_wino_rows_*.md): ResNet-50's 56x56 layers
     * 1.05-1.18x as fast, VGG-16's 112x112 and 224x224 ones 1.02-1.13x and
     * its 56x56 ones 0.97-1.00x while its unchanged 28x28 ones drifted
     * 0.96-0.98x; the networks' wall time 1.02x and 1.01x. At 28x28
     * (128-512 channels) two tiles stayed ahead inside the networks with
     * tuned configs (1.05-1.06x, 3 rounds in turns, not kept): each
     * work-group reads all of the layer's transformed weights. */
    if (wino && ow >= 56 && !strcmp(pref->knob, "blk_x")) pref->part[0] = 1;
    /* wino on rows of 224 outputs (VGG-16's 64-channel first block): one
     * row of 4 tiles per register tile, not 2 x 4. Inside VGG-16 on a
     * Zen 4 (5 rounds in turns, bench/config_ab/results/
     * zen4_vgg16_224_register_tile.md) its 224x224 layer took 0.86x
     * (0.81-0.98) the time, and at default configs in turns with the build
     * before (5 rounds, bench/net_ab/results/net_ab_zen4_wino_224_row_vgg16.md)
     * 1.32x as fast against the drift (13.05 -> 10.29 ms); timed alone the
     * two configs were level (8.0 ms),
     * and at 112x112 the 4 tiles were no faster (1.02x with 64 channels,
     * 1.13x slower with 128: zen4_vgg16_112_c*_register_tile.md). */
    if (wino && ow >= 160 && !strcmp(pref->knob, "reg_y")) pref->part[0] = 1;
    if (wino && ow <= 16 && !strcmp(pref->knob, "split_k")) pref->part[0] = 2;
    /* wino on 7x7 and 8x8 outputs: F(2x2), one register tile of the 16
     * tiles x one channel vector, one per work-group (see
     * cpu_default_template). */
    if (wino && wino_small_output(wl, dev)) {
        if (!strcmp(pref->knob, "tile")) pref->part[0] = 2;
        if (!strcmp(pref->knob, "reg_y") || !strcmp(pref->knob, "reg_x")) pref->part[0] = 4;
        if (!strcmp(pref->knob, "reg_k") || !strcmp(pref->knob, "blk_x")) pref->part[0] = 1;
    }
    /* wino's channel vectors within the (16-padded) output channels. */
    if (wino && !strcmp(pref->knob, "reg_k")) {
        const int k16 = (wl->k + 15) / 16 * 16, v = dev->native_vector_width >= 4 ? dev->native_vector_width : 16;
        if (pref->part[0] * v > k16) pref->part[0] = k16 / v > 1 ? k16 / v : 1;
    }
    /* gemm on padded rows of a multiple of 32 outputs but not of 48 (the
     * 3x3 layers on the RGB input, where gemm was the default before stem): 8 x 32, so
     * that the tiles divide the row. Inside VGG-16 (3 rounds in turns,
     * 2026-12-04) its 224x224 first layer took 1.32-1.41 ms with 8 x 32
     * against 1.90-1.93 with 8 x 48 (5 tiles for a row of 224, the last
     * two thirds past it, and two of the five reading the padding). */
    if (gemm && dev->native_vector_width >= 16 && (wl->pad_h > 0 || wl->pad_w > 0) && ow % 32 == 0 && ow % 48 != 0 && !strcmp(pref->knob, "reg_x"))
        pref->part[0] = 32;
    /* gemm's tile in 8-lane vectors (AVX2: 16 registers): 4 x 24, 12 accumulators. */
    if (gemm && dev->native_vector_width < 16 && !strcmp(pref->knob, "reg_k")) pref->part[0] = 4;
    if (gemm && dev->native_vector_width < 16 && !strcmp(pref->knob, "reg_x")) pref->part[0] = 24;
    /* dwrow on rows of fewer than 56 outputs: seven rows of four channels
     * per work-item (8-lane vectors) ran the 28x28, 14x14 and 7x7
     * depthwise layers of MobileNetV2 1.7-4.6x faster than one row of one
     * channel in 16-lane vectors and 1.6-3.3x faster than two such rows
     * (each timed alone, `mtgpu conv WL --template dwrow --config
     * CFG`, one run on 2026-12-03). */
    if (!strcmp(pref->tmpl, "dwrow") && ow < 56 && !strcmp(pref->knob, "reg_y")) pref->part[0] = 7;
    if (!strcmp(pref->tmpl, "dwrow") && ow < 56 && !strcmp(pref->knob, "chan")) pref->part[0] = 4;
    /* dwrow on rows of 56 outputs or more: 16-lane vectors where the
     * device has them, and one row per work-item on rows of 112 or more.
     * Once shuffles were printed as clang's builtin (ir/print_c.c), these
     * ran MobileNetV2's 112x112 and 56x56 depthwise layers faster than
     * two rows in 8 lanes: 32 channels at 112x112 0.16 against 0.18 ms
     * (median of 8 rounds in turns of the fastest of 40 runs; their median
     * runs 0.20 against 0.28), 96 channels stride 2 0.18 against 0.25
     * (0.21 against 0.29), 144 channels at 56x56 0.15 against 0.39 (0.20
     * against 0.42); two rows in 16 lanes on the 112-wide layer 0.25
     * (2026-12-03). On smaller rows 8 and 16 lanes were within the noise
     * of each other. */
    if (!strcmp(pref->tmpl, "dwrow") && (ow < 56 || dev->native_vector_width < 16) && !strcmp(pref->knob, "vec")) pref->part[0] = 8;
    if (!strcmp(pref->tmpl, "dwrow") && ow >= 112 && !strcmp(pref->knob, "reg_y")) pref->part[0] = 1;
    /* wino's register tile in 8-lane vectors (AVX2: 16 registers): 1x4 tiles x 2 vectors, 8 accumulators. */
    if (wino && dev->native_vector_width < 16 && !strcmp(pref->knob, "reg_y")) pref->part[0] = 1;
    /* wino where the transformed input of two register tiles of every
     * input channel passes the device's local memory (PoCL gives a Zen 3
     * core 512 KiB: VGG-16's 512-channel layers need 576 KiB): one register
     * tile per work-group, half of that, instead of kvec. Inside VGG-16 on
     * a Zen 3 (3 rounds in turns, 2026-12-05) its 512-channel layers at
     * 28x28 took 13.7-14.5 ms so, against 39.3-39.4 with kvec's default
     * (bench/config_ab/results/zen3_vgg16_3x3_28x28.md). */
    if (wino && narrow && !strcmp(pref->knob, "blk_x")) pref->part[0] = 1;
}

/* The config of sp closest to the CPU preferences of template t for wl: per knob,
 * the option with the smallest sum of |log2(value / preferred)| over the
 * parts that have a preference (ties: the earlier option); knobs without a
 * preference take option 0. Returns 0 when t has no preferences. */
static int cpu_preferred_config(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, int narrow,
                                mt_config *cfg) {
    const int full_row = kvec_full_row(t, wl, dev, sp);
    int any = 0;
    memset(cfg, 0, sizeof *cfg);
    cfg->nknobs = sp->nknobs;
    for (int k = 0; k < sp->nknobs; k++) {
        const mt_knob *kn = &sp->knobs[k];
        const cpu_pref *pref = NULL;
        for (size_t i = 0; i < sizeof cpu_prefs / sizeof cpu_prefs[0]; i++)
            if (strcmp(cpu_prefs[i].tmpl, mt_template_name(t)) == 0 && strcmp(cpu_prefs[i].knob, kn->name) == 0) pref = &cpu_prefs[i];
        if (!pref) continue;
        any = 1;
        cpu_pref own = *pref;
        cpu_pref_for_device(&own, dev, wl, full_row, narrow);
        pref = &own;
        int64_t best = -1;
        for (int o = 0; o < kn->noptions; o++) {
            int64_t d = 0;
            for (int j = 0; j < kn->nparts && j < MT_MAX_SPLIT_PARTS; j++) {
                int want = pref->part[j], v = kn->values[o * kn->nparts + j];
                if (want <= 0) continue;
                /* values 0 and 1 (off, none) both count as 2^0 */
                d += log2_distance(v > 0 ? v : 1, (int)log2_distance(want, 0));
                if (v != want) d++; /* the exact value beats a neighbour of the same log2 */
            }
            if (best < 0 || d < best) {
                best = d;
                cfg->choice[k] = o;
            }
        }
    }
    return any;
}

/* Whether dev is a CPU and t's CPU-preferred config for wl builds and fits
 * dev's limits (into *cfg); where it passes them, the narrower second try
 * (cpu_pref_for_device's narrow) where that differs. */
static int cpu_preferred_fits(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, mt_config *cfg) {
    if (!dev->is_cpu) return 0;
    mt_device_limits lim = mt_device_info_limits(dev);
    mt_config tried[2];
    for (int narrow = 0; narrow < 2; narrow++) {
        mt_config *pref = &tried[narrow];
        if (!cpu_preferred_config(t, wl, dev, sp, narrow, pref)) return 0;
        if (narrow && memcmp(pref->choice, tried[0].choice, sizeof pref->choice) == 0) return 0;
        mt_kernel *k = NULL;
        mt_kernel_resources res;
        mt_status st = mt_template_build(t, wl, sp, pref, &k, NULL, 0);
        if (st == MT_OK) st = mt_kernel_analyze(k, &res, NULL, 0);
        if (st == MT_OK) st = mt_kernel_check_limits(&res, &lim, NULL, 0);
        mt_kernel_free(k);
        if (st == MT_OK) {
            *cfg = *pref;
            return 1;
        }
    }
    return 0;
}

mt_status mt_default_config(const mt_template *t, const mt_workload *wl, const mt_device_info *dev, const mt_space *sp, mt_config *cfg,
                            char *err, size_t errlen) {
    if (!t || !wl || !dev || !sp || !cfg) return mt__fail(err, errlen, MT_INVALID_ARG, "default config: NULL argument");
    mt_device_limits lim = mt_device_info_limits(dev);
    if (cpu_preferred_fits(t, wl, dev, sp, cfg)) return MT_OK;
    /* GPUs (and CPU preferences the workload cannot take): ~128 work-items. */
    int wg_target = dev->is_cpu ? 0 : 7;
    uint64_t size = mt_space_size(sp);
    int enumerate = size <= MT__DEFAULT_SCAN;
    uint64_t rng = MT__DEFAULT_SEED;
    int kept = 0, have = 0;
    int64_t best_d = 0, best_p = 0;
    mt_config best;
    memset(&best, 0, sizeof best);
    char why[256] = "";
    for (uint64_t i = 0; i < (enumerate ? size : MT__DEFAULT_SCAN) && kept < MT__DEFAULT_KEEP; i++) {
        mt_config c;
        if (enumerate) {
            if (mt_space_config_from_index(sp, i, &c) != MT_OK) break;
        } else {
            mt_space_random(sp, &rng, &c);
        }
        mt_kernel *k = NULL;
        if (mt_template_build(t, wl, sp, &c, &k, why, sizeof why) != MT_OK) continue;
        mt_kernel_resources res;
        mt_status st = mt_kernel_analyze(k, &res, why, sizeof why);
        if (st == MT_OK) st = mt_kernel_check_limits(&res, &lim, why, sizeof why);
        mt_kernel_free(k);
        if (st != MT_OK) continue;
        kept++;
        int64_t d = log2_distance(res.threads_per_block, wg_target);
        int64_t p = res.private_floats > 64 ? res.private_floats - 64 : 0;
        if (!have || d < best_d || (d == best_d && p < best_p)) {
            best = c;
            best_d = d;
            best_p = p;
            have = 1;
        }
    }
    if (!have)
        return mt__fail(err, errlen, MT_NOT_FOUND, "template '%s': no config fits the device's limits (last reason: %s)", mt_template_name(t),
                        why[0] ? why : "none tried");
    *cfg = best;
    return MT_OK;
}

/* On a CPU, the template whose default config runs a layer of this shape
 * fastest, or NULL for the rule for the rest (depthwise for depthwise
 * layers, else kvec), from each template's default config timed on every
 * convolution of ResNet-50, ResNet-18, VGG-16 and MobileNetV2 side by side
 * (bench/default_configs/results/default_configs.md) and, for wino, whole
 * networks (bench/net_ab/results/net_ab_wino_blocks_*.md):
 * - wino (F(4x4), two register tiles of 2x4 tiles per work-group, the
 *   channel groups as a loop) on 3x3 stride-1 layers with 16 input
 *   channels or more and 13x13 outputs or more: inside VGG-16 and
 *   ResNet-18/50, 1.5-2.8x faster than kvec's default at 28x28 to 112x112
 *   (1.1-1.3x at 56x56 and 224x224 with 64 channels, where wino was the
 *   default before). On 14x14 layers, timed alone (weights in cache), it
 *   was 1.4-2.7x faster, but inside the networks 0.8-0.9x while its blocks
 *   of rows and columns computed 8x8 F(4x4) tiles for the 4x4 needed and
 *   read the transformed weights (4x the direct ones: 9.4 MB at 256
 *   channels, 38 MB at 512) from memory twice; with the tiles taken
 *   row-major, one block of 16 tiles per channel share, inside the networks
 *   (3 rounds in turns, 2026-12-04) against kvec's default: ResNet-50's
 *   256-channel layer 0.616 ms against 0.705, ResNet-18's 0.568 against
 *   0.657, VGG-16's 512-channel one 1.85 against 2.62. 13x13 outputs take
 *   the 16 tiles of 14x14: there SqueezeNet 1.1's last four expand layers
 *   ran 1.98-2.17x as fast as with kvec's default, the network 1.14x
 *   (4 rounds in turns at default configs, 2026-12-06, Zen 3,
 *   bench/net_ab/results/net_ab_wino_13x13_squeezenet1_1.md; timed alone
 *   wino's default 1.37-1.83x). On 7x7 outputs F(4x4) computes 8x8 and
 *   its weights (4x the direct ones) outweigh the products, but F(2x2)
 *   (16 tiles, weights 16/9 of the direct ones) in one register tile of all
 *   16 tiles x one 16-lane channel vector, the channels split over two
 *   work-groups, reads each transformed weight once: inside ResNet-50 on a
 *   Zen 4 (4 rounds in turns, 2026-12-06,
 *   bench/config_ab/results/zen4_resnet50_3x3_7x7_wino_f2.md) its
 *   512-channel 7x7 layers took 0.76-0.77 ms against 1.08-1.10 with the
 *   kvec config `mtgpu refine` had kept (0.67-0.72x per round); F(4x4)'s
 *   best record, 0.95 ms alone, had taken 1.08 there. With 8-lane vectors
 *   (16 registers: the 16 accumulators alone fill them) unmeasured: kvec.
 *   Between 8 and 13 unmeasured: kvec. With fewer than 16 channels the
 *   input transform outweighs the products;
 * - gemm (8 channels x 48 pixels; 6 x 32 when this was measured) on
 *   unpadded 1x1 stride-1 layers with at most 160 input channels and 28x28
 *   outputs or more: 1.0-7.3x faster than
 *   kvec (ResNet-50's 64 -> 64 at 56x56: 0.85x in one run, 1.36x in the
 *   other), whose per-work-item store transposition weighs most on short
 *   reductions; on 14x14 and smaller kvec wins. With the 8 x 48 tile gemm
 *   also took the layers of 161-512 input channels: `mtgpu tune resnet50`
 *   chose it on four of them, and inside the networks at default configs
 *   (net_ab, 4 rounds, 2026-12-03) ResNet-50's eight such layers ran
 *   9.25 -> 8.25 ms (1.12x; each 1.06-1.18x) while its other convolutions
 *   drifted 1.03x, MobileNetV2's two 192 -> 32 layers at 28x28 1.04x while
 *   its others drifted 0.83x
 *   (bench/net_ab/results/net_ab_gemm_rule_{resnet50,mobilenet_v2}.md).
 *   Longer reductions (1024 channels and more) were not measured: kvec;
 * - gemm too on such layers of at most 64 input channels that widen them
 *   (k > c) from 14x14 outputs on, where kvec's flat tile stores 2 x 6
 *   outputs per 64-128 FMAs: on a Zen 3 at default configs, in turns with
 *   kvec's (2026-12-06; bench/net_ab/results/net_ab_gemm_expand_*.md),
 *   MobileNetV2's 64 -> 384 layers at 14x14 1.03-1.07x as fast against the
 *   drift and SqueezeNet 1.1's 32 -> 128 at 27x27 1.28-1.29x; its 96 -> 576
 *   layers, measured under a bound of 96, 0.97-0.98x (side by side inside
 *   MobileNetV2, bench/config_ab/results/zen3_mobilenet_v2_{64_384,96_576}.md:
 *   0.84x and 0.94x the time of kvec's, the 576 -> 96 projection 1.11-1.14x),
 *   so the bound is 64;
 * - stem on layers of at most 4 input channels with kernels over 1x1 (a
 *   network's first layer, on the RGB image): at default configs on a Zen
 *   3, in turns with the rules before (4-6 rounds, 2026-12-06,
 *   bench/net_ab/results/net_ab_stem_{mobilenet_v2,resnet50,vgg16}.md),
 *   MobileNetV2's first layer 0.330 -> 0.189 ms (kvec's default before),
 *   ResNet-50's 7x7 stem 1.498 -> 1.251 (kvec's; ResNet-18's 1.20x),
 *   SqueezeNet 1.1's first layer 1.59x, VGG-16's first layer
 *   1.655 -> 1.250 (gemm's 4 x 24; gemm's 8 x 32, the rule before on
 *   AVX-512, had taken 1.32-1.41 ms inside VGG-16 there against 2.37 for
 *   kvec's default);
 * - dwrow on the depthwise layers it accepts (undilated, stride_w 1 or 2,
 *   kernels up to 7x7): on each of MobileNetV2's 10 unique depthwise
 *   layers its default ran 1.2-6.8x faster than the better of the
 *   depthwise template's and gemm's
 *   (bench/default_configs/results/mobilenet_v2_dwrow/default_configs.md);
 * - gemm on other depthwise layers with 28x28 outputs or fewer: 2.0-5.0x
 *   faster than the depthwise template's default, except one 14x14
 *   stride-2 layer (1.4x slower); on larger outputs the depthwise template
 *   wins. */
static const mt_template *cpu_default_template(const mt_workload *wl, const mt_device_info *dev, unsigned layouts) {
    const int64_t pixels = (int64_t)mt_workload_out_h(wl) * mt_workload_out_w(wl);
    const mt_template *gemm = mt_template_find("gemm"), *dwrow = mt_template_find("dwrow");
    if (mt_workload_is_depthwise(wl) && template_usable(dwrow, wl, layouts)) return dwrow;
    if (mt_workload_is_depthwise(wl)) return pixels <= 28 * 28 && template_usable(gemm, wl, layouts) ? gemm : NULL;
    if (wl->groups != 1) return NULL;
    const mt_template *wino = mt_template_find("wino");
    if (template_usable(wino, wl, layouts) && (layouts & (1u << MT_WEIGHTS_WINO4)) && wl->c >= 16 && mt_workload_out_h(wl) >= 13 &&
        mt_workload_out_w(wl) >= 13)
        return wino;
    if (template_usable(wino, wl, layouts) && (layouts & (1u << MT_WEIGHTS_WINO2)) && wino_small_output(wl, dev)) return wino;
    /* The layers on the RGB input (wino needs 16 channels): stem. */
    const mt_template *stem = mt_template_find("stem");
    if (wl->c <= 4 && !(wl->r == 1 && wl->s == 1) && template_usable(stem, wl, layouts)) return stem;
    if (mt_workload_is_pointwise(wl) && template_usable(gemm, wl, layouts) && wl->c <= 512 && pixels >= 28 * 28) return gemm;
    if (mt_workload_is_pointwise(wl) && template_usable(gemm, wl, layouts) && wl->c <= 64 && wl->k > wl->c && pixels >= 14 * 14) return gemm;
    return NULL;
}

/* The default template and config. On a CPU whose caller takes packed
 * weights, kvec unless cpu_default_template names another: ResNet-50 with
 * every convolution at its default config took 115.5 ms with gemm's
 * defaults and 48.8 ms with kvec's (the `default` row of
 * bench/e2e/results/e2e.md, before and after this choice; 45.2 ms since kvec
 * stores vectors). Elsewhere gemm, whose weights are plain OIHW. On MT_OK
 * *sp is t's space, for the caller to free; on an error nothing is kept. */
static mt_status default_config(const mt_workload *wl, const mt_device_info *dev, unsigned layouts, const mt_template **tout, mt_space *sp,
                                mt_config *cfg, char *err, size_t errlen) {
    const mt_template *t = NULL;
    if (dev->is_cpu) t = cpu_default_template(wl, dev, layouts);
    if (t) {
        /* The shape's template only with its CPU config, kept as the
         * default: the generic rule of mt_default_config picks GPU-sized
         * work-groups (e.g. where wino's preferred block passes the
         * device's local memory on very wide layers). */
        mt_status st = mt_template_space(t, wl, sp);
        if (st != MT_OK) return mt__fail(err, errlen, st, "template '%s': cannot build its space for this workload", mt_template_name(t));
        if (cpu_preferred_fits(t, wl, dev, sp, cfg)) {
            *tout = t;
            return MT_OK;
        }
        mt_space_free(sp);
        t = NULL;
    }
    if (!template_usable(t, wl, layouts) && mt_workload_is_depthwise(wl)) t = mt_template_find("depthwise");
    if (!template_usable(t, wl, layouts) && dev->is_cpu) t = mt_template_find("kvec");
    if (!template_usable(t, wl, layouts)) t = mt_template_find("gemm");
    if (!template_usable(t, wl, layouts)) t = mt_template_find("direct");
    if (!template_usable(t, wl, layouts)) {
        t = NULL;
        for (int i = 0; i < mt_template_count() && !t; i++)
            if (template_usable(mt_template_at(i), wl, layouts)) t = mt_template_at(i);
    }
    if (!t) return mt__fail(err, errlen, MT_NOT_FOUND, "no template accepts this workload");
    mt_status st = mt_template_space(t, wl, sp);
    if (st != MT_OK) return mt__fail(err, errlen, st, "template '%s': cannot build its space for this workload", mt_template_name(t));
    if ((st = mt_default_config(t, wl, dev, sp, cfg, err, errlen)) != MT_OK) {
        mt_space_free(sp);
        return st;
    }
    *tout = t;
    return MT_OK;
}

mt_select_query mt_select_query_default(mt_db *db, const mt_workload *wl, const mt_device_info *dev) {
    return (mt_select_query){.db = db, .wl = wl, .dev = dev, .layouts = MT_WEIGHT_LAYOUTS_ALL, .rank = 0};
}

mt_status mt_select_config(const mt_select_query *q, mt_select_result *out, char *err, size_t errlen) {
    if (!q || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "select: NULL argument");
    if (q->rank < 0) return mt__fail(err, errlen, MT_INVALID_ARG, "select: rank %d is negative", q->rank);
    if (!(q->layouts & (1u << MT_WEIGHTS_OIHW)))
        return mt__fail(err, errlen, MT_INVALID_ARG, "select: the accepted weight layouts must include OIHW (every default config's)");
    if (!q->wl || !q->dev) return mt__fail(err, errlen, MT_INVALID_ARG, "select: NULL workload or device");
    const mt_workload *wl = q->wl;
    mt_status st = mt_workload_validate(wl, err, errlen);
    if (st != MT_OK) return st;
    char fp[17];
    memcpy(fp, q->dev->fingerprint, 16);
    fp[16] = '\0';
    select_ctx *c = calloc(1, sizeof *c);
    if (!c) return mt__fail(err, errlen, MT_NOMEM, "select: out of memory");
    c->wl = wl;
    c->layouts = q->layouts;
    c->want = q->rank > 0 ? q->rank : 1;
    mt_select_result *r = &c->res;
    if (q->pin_template || q->pin_config) {
        /* Pinned (net/refine.c times the configs it chose together): no
         * database, and no default where the pin does not build. */
        st = MT_OK;
        if (!q->pin_template || !q->pin_config || q->rank != 0) {
            st = mt__fail(err, errlen, MT_INVALID_ARG, "select: a pin needs a template, a config and rank 0");
        } else {
            try_made(c, fp, q->pin_template, q->pin_config, MT_VERSION_STRING, "pinned");
            if (!c->found)
                st = mt__fail(err, errlen, MT_INVALID_CONFIG, "select: the pinned %s config '%s' does not build for this workload "
                              "(or reads weights in a layout the caller cannot give)", q->pin_template, q->pin_config);
        }
        if (st != MT_OK) {
            free(c);
            return st;
        }
        r->from = MT_SELECT_FROM_PIN;
    } else if (q->db && q->rank == 0 && try_preference(q->db, c, fp)) {
        r->from = MT_SELECT_FROM_PREFERENCE;
    } else if (q->db) {
        /* Records timed cold (weights evicted first, as in a
         * network's pass) rank among themselves where there are any: a warm
         * record of the same kernel times faster than the network runs it. */
        mt_db_filter f = {.wl = wl, .device = fp, .source_prefix = MT_RECORD_SOURCE_COLD, .only_ok = 1, .order_by_median = 1,
                          .limit = MT__SELECT_MAX_CANDIDATES};
        /* A damaged row or a failed read must not stop an inference server:
         * note it and go on with what was found, or the default. */
        if (mt_db_for_each(q->db, &f, try_record, c, r->db_note, sizeof r->db_note) == MT_OK) r->db_note[0] = '\0';
        if (!c->found) {
            c->seen = 0;
            f.source_prefix = NULL;
            if (mt_db_for_each(q->db, &f, try_record, c, r->db_note, sizeof r->db_note) == MT_OK) r->db_note[0] = '\0';
        }
        if (c->found) r->from = MT_SELECT_FROM_RECORD;
    }
    if (!c->found) {
        st = default_config(wl, q->dev, q->layouts, &r->t, &r->space, &r->cfg, err, errlen);
        if (st != MT_OK) {
            free(c);
            return st;
        }
        mt_record *rec = &r->rec;
        mt_record_init(rec);
        rec->wl = *wl;
        snprintf(rec->template_name, sizeof rec->template_name, "%s", mt_template_name(r->t));
        mt_config_format(&r->space, &r->cfg, rec->config, sizeof rec->config);
        uint64_t idx = mt_space_config_index(&r->space, &r->cfg);
        rec->config_index = idx > (uint64_t)INT64_MAX ? -1 : (int64_t)idx;
        memcpy(rec->device, fp, sizeof rec->device);
        snprintf(rec->version, sizeof rec->version, "%s", MT_VERSION_STRING);
        snprintf(rec->source, sizeof rec->source, "default");
        r->from = MT_SELECT_FROM_DEFAULT;
    }
    *out = *r;
    free(c);
    return MT_OK;
}

void mt_select_result_free(mt_select_result *r) {
    if (!r) return;
    mt_space_free(&r->space);
    r->t = NULL;
}
