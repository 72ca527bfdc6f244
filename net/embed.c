/* The embedding API (mtgpu/embed.h): a read-only database, a device, and a
 * mutex-guarded cache of prepared convolutions. */
#include "mtgpu/embed.h"
#include "program.h"
#include "select.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtgpu/records.h"
#include "template.h"
#include "fail.h"

struct mt_conv_kernel {
    mt_workload wl;
    char template_name[16];
    char *config;
    char *source;
    char kernel_name[32];
    int from_db;
    double tuned_ms;
    mt_weight_layout weight_layout;
    int64_t grid[3], block[3];
    mt_program *prog;
};

struct mt_embed {
    mt_device *dev;
    int own_dev;
    mt_db *db;                  /* NULL: defaults only; used under `lock` */
    unsigned weight_layouts;    /* layouts the caller gives weights in (mask of 1 << mt_weight_layout) */
    pthread_mutex_t lock;       /* the cache and db */
    pthread_mutex_t launch_lock; /* kernel arguments are shared state in OpenCL */
    mt_conv_kernel **cache;     /* individually allocated: pointers handed out stay valid */
    int ncache, capcache;
};

mt_embed_params mt_embed_default_params(void) {
    return (mt_embed_params){.db_path = NULL, .device = NULL, .device_spec = NULL, .cache_dir = NULL, .weight_layouts = 0};
}

static void kernel_free(mt_conv_kernel *k) {
    if (!k) return;
    mt_program_free(k->prog);
    free(k->config);
    free(k->source);
    free(k);
}

void mt_embed_close(mt_embed *e) {
    if (!e) return;
    for (int i = 0; i < e->ncache; i++) kernel_free(e->cache[i]);
    free(e->cache);
    mt_db_close(e->db);
    if (e->own_dev) mt_device_close(e->dev);
    pthread_mutex_destroy(&e->lock);
    pthread_mutex_destroy(&e->launch_lock);
    free(e);
}

mt_status mt_embed_open(const mt_embed_params *params, mt_embed **out, char *err, size_t errlen) {
    if (!out) return mt__fail(err, errlen, MT_INVALID_ARG, "embed: NULL argument");
    mt_embed_params p = params ? *params : mt_embed_default_params();
    if (p.weight_layouts & ~MT_WEIGHT_LAYOUTS_ALL)
        return mt__fail(err, errlen, MT_INVALID_ARG, "embed: unknown weight layouts in mask 0x%x", p.weight_layouts);
    mt_embed *e = calloc(1, sizeof *e);
    if (!e) return mt__fail(err, errlen, MT_NOMEM, "embed: out of memory");
    e->weight_layouts = p.weight_layouts | (1u << MT_WEIGHTS_OIHW);
    if (pthread_mutex_init(&e->lock, NULL) != 0) {
        free(e);
        return mt__fail(err, errlen, MT_NOMEM, "embed: cannot create a mutex");
    }
    if (pthread_mutex_init(&e->launch_lock, NULL) != 0) {
        pthread_mutex_destroy(&e->lock);
        free(e);
        return mt__fail(err, errlen, MT_NOMEM, "embed: cannot create a mutex");
    }
    mt_status st = MT_OK;
    if (!p.db_path || p.db_path[0]) {
        mt_db_params dp = mt_db_default_params();
        dp.readonly = 1;
        if ((st = mt_db_open(p.db_path, &dp, &e->db, err, errlen)) != MT_OK) goto fail;
    }
    if (p.device) {
        e->dev = p.device;
    } else {
        mt_device_params devp = mt_device_default_params();
        devp.cache_dir = p.cache_dir;
        if ((st = mt_device_open(p.device_spec, &devp, &e->dev, err, errlen)) != MT_OK) goto fail;
        e->own_dev = 1;
    }
    *out = e;
    return MT_OK;
fail:
    mt_embed_close(e);
    return st;
}

mt_device *mt_embed_device(mt_embed *e) { return e ? e->dev : NULL; }

/* Builds the prepared kernel of wl; called with e->lock held. */
static mt_status prepare(mt_embed *e, const mt_workload *wl, mt_conv_kernel **out, char *err, size_t errlen) {
    mt_select_result *sel = malloc(sizeof *sel);
    mt_conv_kernel *k = calloc(1, sizeof *k);
    char *cfgtext = malloc(MT_RECORD_CONFIG_LEN);
    if (!sel || !k || !cfgtext) {
        free(sel);
        free(k);
        free(cfgtext);
        return mt__fail(err, errlen, MT_NOMEM, "embed: out of memory");
    }
    mt_select_query q = mt_select_query_default(e->db, wl, mt_device_get_info(e->dev));
    q.layouts = e->weight_layouts;
    char why[512] = "";
    mt_status st = mt_select_config(&q, sel, why, sizeof why);
    if (st != MT_OK) {
        free(sel);
        free(k);
        free(cfgtext);
        return mt__fail(err, errlen, st, "embed: no config for this workload: %s", why);
    }
    const mt_template *t = sel->t;
    k->wl = *wl;
    k->from_db = sel->from != MT_SELECT_FROM_DEFAULT;
    k->tuned_ms = k->from_db ? sel->rec.median_ms : 0;
    k->config = cfgtext;
    snprintf(k->template_name, sizeof k->template_name, "%s", mt_template_name(t));
    k->weight_layout = mt_template_config_weight_layout(t, &sel->space, &sel->cfg);
    mt_config_format(&sel->space, &sel->cfg, k->config, MT_RECORD_CONFIG_LEN);
    mt_kernel *ir = NULL;
    mt_kernel_resources kr;
    st = mt_template_build(t, wl, &sel->space, &sel->cfg, &ir, err, errlen);
    mt_select_result_free(sel);
    free(sel);
    if (st == MT_OK) st = mt_kernel_analyze(ir, &kr, err, errlen);
    if (st == MT_OK) {
        memcpy(k->grid, kr.grid, sizeof k->grid);
        memcpy(k->block, kr.block, sizeof k->block);
        snprintf(k->kernel_name, sizeof k->kernel_name, "%s", ir->name);
        mt_lang lang = mt_device_get_info(e->dev)->backend == MT_BACKEND_CUDA ? MT_LANG_CUDA : MT_LANG_OPENCL;
        st = mt_kernel_print(ir, lang, &k->source, err, errlen);
    }
    if (st == MT_OK) st = mt_program_build(e->dev, ir, &k->prog, err, errlen);
    mt_kernel_free(ir);
    if (st != MT_OK) {
        kernel_free(k);
        return st;
    }
    *out = k;
    return MT_OK;
}

mt_status mt_embed_get_conv(mt_embed *e, const mt_workload *wl, const mt_conv_kernel **out, char *err, size_t errlen) {
    if (!e || !wl || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "embed: NULL argument");
    mt_status st = mt_workload_validate(wl, err, errlen);
    if (st != MT_OK) return st;
    pthread_mutex_lock(&e->lock);
    for (int i = 0; i < e->ncache; i++)
        if (mt_workload_equal(&e->cache[i]->wl, wl)) {
            *out = e->cache[i];
            pthread_mutex_unlock(&e->lock);
            return MT_OK;
        }
    if (e->ncache == e->capcache) {
        int cap = e->capcache ? 2 * e->capcache : 16;
        mt_conv_kernel **c = realloc(e->cache, sizeof *c * (size_t)cap);
        if (!c) {
            pthread_mutex_unlock(&e->lock);
            return mt__fail(err, errlen, MT_NOMEM, "embed: out of memory");
        }
        e->cache = c;
        e->capcache = cap;
    }
    mt_conv_kernel *k = NULL;
    st = prepare(e, wl, &k, err, errlen);
    if (st == MT_OK) {
        e->cache[e->ncache++] = k;
        *out = k;
    }
    pthread_mutex_unlock(&e->lock);
    return st;
}

void mt_conv_kernel_get_info(const mt_conv_kernel *k, mt_conv_kernel_info *info) {
    if (!info) return;
    memset(info, 0, sizeof *info);
    if (!k) return;
    info->wl = k->wl;
    snprintf(info->template_name, sizeof info->template_name, "%s", k->template_name);
    info->config = k->config;
    info->from_db = k->from_db;
    info->tuned_ms = k->tuned_ms;
    info->weight_layout = k->weight_layout;
    memcpy(info->grid, k->grid, sizeof k->grid);
    memcpy(info->block, k->block, sizeof k->block);
    info->kernel_name = k->kernel_name;
}

const char *mt_conv_kernel_source(const mt_conv_kernel *k) { return k ? k->source : NULL; }

mt_status mt_conv_kernel_launch(mt_embed *e, const mt_conv_kernel *k, mt_dbuf *input, mt_dbuf *weights, mt_dbuf *output, double *ms,
                                char *err, size_t errlen) {
    if (!e || !k || !input || !weights || !output) return mt__fail(err, errlen, MT_INVALID_ARG, "embed: NULL argument");
    size_t need[3] = {sizeof(float) * (size_t)mt_workload_input_elems(&k->wl),
                      sizeof(float) * (size_t)mt_weight_layout_elems(k->weight_layout, &k->wl),
                      sizeof(float) * (size_t)mt_workload_output_elems(&k->wl)};
    mt_dbuf *args[3] = {input, weights, output};
    static const char *const what[3] = {"input", "weights", "output"};
    for (int i = 0; i < 3; i++)
        if (mt_dbuf_size(args[i]) < need[i])
            return mt__fail(err, errlen, MT_INVALID_ARG, "embed: the %s buffer holds %zu bytes, the workload needs %zu", what[i],
                            mt_dbuf_size(args[i]), need[i]);
    double t = 0;
    pthread_mutex_lock(&e->launch_lock);
    mt_status st = mt_program_run(e->dev, k->prog, args, 3, k->grid, k->block, 0, 1, &t, err, errlen);
    pthread_mutex_unlock(&e->launch_lock);
    if (ms) *ms = t;
    return st;
}
