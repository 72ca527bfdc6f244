/* Loading the CUDA module, and the CUDA calls that need nothing more (the
 * backend table on top of it is in backend_cuda.c).
 *
 * libmtgpu is built without CUDA headers or libraries: everything CUDA lives
 * in libmtgpu_cuda.so (cuda/), reached through the table of
 * cuda/cuda_module.h. A missing module, a missing symbol or an ABI mismatch
 * is MT_UNAVAILABLE with the dynamic loader's text, never a crash. The
 * module is loaded once per process (pthread_once) and never unloaded; that
 * cached handle is the only state kept here. */
#include "cuda_backend.h"

#include "cuda_module.h"
#include "backend-impl.h"
#include "fail.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODULE_FILE "libmtgpu_cuda.so"

mt_status mt__cuda_load_from(const char *path, void **handle, const mt_cuda_module **mod, char *err, size_t errlen) {
    if (handle) *handle = NULL;
    if (mod) *mod = NULL;
    if (!path || !*path || !handle || !mod) return mt__fail(err, errlen, MT_INVALID_ARG, "no CUDA module path given");

    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        /* dlerror names the file that failed, which may be a dependency of
         * the module (libnvrtc.so.13) rather than the module itself. */
        const char *e = dlerror();
        if (!e) e = "cannot be loaded";
        if (strstr(e, path)) return mt__fail(err, errlen, MT_UNAVAILABLE, "%s", e);
        return mt__fail(err, errlen, MT_UNAVAILABLE, "%s: %s", path, e);
    }
    dlerror();
    void *sym = dlsym(h, MT_CUDA_MODULE_SYMBOL);
    if (!sym) {
        const char *e = dlerror();
        mt__fail(err, errlen, MT_UNAVAILABLE, "%s: %s", path, e ? e : "no " MT_CUDA_MODULE_SYMBOL);
        dlclose(h);
        return MT_UNAVAILABLE;
    }
    mt_cuda_module_get_fn get;
    memcpy(&get, &sym, sizeof get); /* object pointer to function pointer, as POSIX allows */
    const mt_cuda_module *m = get(MT_CUDA_MODULE_ABI);
    if (!m) {
        mt__fail(err, errlen, MT_UNAVAILABLE, "%s: the module does not provide ABI version %d", path, MT_CUDA_MODULE_ABI);
        dlclose(h);
        return MT_UNAVAILABLE;
    }
    if (m->abi_version != MT_CUDA_MODULE_ABI || m->struct_size < MT_CUDA_MODULE_V1_SIZE || !m->toolkit_version ||
        !m->driver_available || !m->compile || !m->resources || !m->free_buffer) {
        mt__fail(err, errlen, MT_UNAVAILABLE,
                 "%s: ABI mismatch (module: version %d, %zu-byte table; libmtgpu needs version %d, at least %zu bytes)", path,
                 m->abi_version, m->struct_size, MT_CUDA_MODULE_ABI, (size_t)MT_CUDA_MODULE_V1_SIZE);
        dlclose(h);
        return MT_UNAVAILABLE;
    }
    *handle = h;
    *mod = m;
    return MT_OK;
}

void mt__cuda_unload(void *handle) {
    if (handle) dlclose(handle);
}

/* ---- the process-wide module ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_handle;                  /* written once, inside g_once */
static const mt_cuda_module *g_mod;     /* likewise */
static char g_err[2048];                /* likewise: why loading failed */

static void append(char *buf, size_t len, const char *text) {
    size_t used = strlen(buf);
    if (used + 1 < len) snprintf(buf + used, len - used, "%s", text);
}

static void load_default(void) {
    char one[1024];
    const char *env = getenv("MTGPU_CUDA_MODULE");
    if (env && *env) {
        /* An explicit choice: no falling back to another copy. */
        if (mt__cuda_load_from(env, &g_handle, &g_mod, one, sizeof one) != MT_OK)
            snprintf(g_err, sizeof g_err, "MTGPU_CUDA_MODULE=%s: %s", env, one);
        return;
    }
    const char *dirs[] = {
#ifdef MTGPU_CUDA_MODULE_DIR
        MTGPU_CUDA_MODULE_DIR,
#endif
#ifdef MTGPU_CUDA_MODULE_INSTALL_DIR
        MTGPU_CUDA_MODULE_INSTALL_DIR,
#endif
        NULL, /* the dynamic loader's search path */
    };
    g_err[0] = '\0';
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char path[1024];
        if (dirs[i])
            snprintf(path, sizeof path, "%s/%s", dirs[i], MODULE_FILE);
        else
            snprintf(path, sizeof path, "%s", MODULE_FILE);
        if (mt__cuda_load_from(path, &g_handle, &g_mod, one, sizeof one) == MT_OK) {
            g_err[0] = '\0';
            return;
        }
        if (g_err[0]) append(g_err, sizeof g_err, "; ");
        append(g_err, sizeof g_err, one);
    }
#ifndef MTGPU_HAVE_CUDA
    append(g_err, sizeof g_err, " (this libmtgpu was built without the CUDA toolkit)");
#endif
}

mt_status mt__cuda_module(const mt_cuda_module **mod, char *err, size_t errlen) {
    if (mod) *mod = NULL;
    if (!mod) return mt__fail(err, errlen, MT_INVALID_ARG, "NULL module pointer");
    if (pthread_once(&g_once, load_default) != 0) return mt__fail(err, errlen, MT_UNAVAILABLE, "pthread_once failed");
    if (!g_mod) return mt__fail(err, errlen, MT_UNAVAILABLE, "%s", g_err[0] ? g_err : "CUDA module not found");
    *mod = g_mod;
    return MT_OK;
}

/* ---- public API ---- */

mt_status mt_cuda_available(char *why, size_t len) {
    const mt_cuda_module *m;
    mt_status s = mt__cuda_module(&m, why, len);
    if (s == MT_OK && why && len > 0) why[0] = '\0';
    return s;
}

mt_cuda_check_params mt_cuda_check_default_params(void) {
    mt_cuda_check_params p;
    memset(&p, 0, sizeof p);
    p.sm_arch = 90;
    p.timeout_s = 0.0;
    return p;
}

mt_status mt_cuda_compile_check_ex(const char *src, const char *kernel_name, const mt_cuda_check_params *params,
                                   mt_cuda_resources *out, char *log, size_t loglen) {
    mt_cuda_resources scratch;
    if (!out) out = &scratch;
    memset(out, 0, sizeof *out);
    if (log && loglen > 0) log[0] = '\0';
    mt_cuda_check_params p = params ? *params : mt_cuda_check_default_params();
    if (!src) return mt__fail(log, loglen, MT_INVALID_ARG, "NULL source");
    if (p.sm_arch <= 0)
        return mt__fail(log, loglen, MT_INVALID_ARG, "sm_arch must be positive (e.g. 90 for sm_90), not %d", p.sm_arch);
    const mt_cuda_module *m;
    mt_status s = mt__cuda_module(&m, log, loglen);
    if (s != MT_OK) return s;
    return m->resources(src, kernel_name, &p, out, NULL, NULL, log, loglen);
}

mt_status mt_cuda_kernel_check_ex(const mt_kernel *k, const mt_cuda_check_params *params, mt_cuda_resources *out, char *log,
                                  size_t loglen) {
    if (out) memset(out, 0, sizeof *out);
    if (log && loglen > 0) log[0] = '\0';
    if (!k) return mt__fail(log, loglen, MT_INVALID_ARG, "NULL kernel");
    char *src = NULL;
    mt_status s = mt_kernel_print(k, MT_LANG_CUDA, &src, log, loglen);
    if (s != MT_OK) return s;
    s = mt_cuda_compile_check_ex(src, k->name, params, out, log, loglen);
    free(src);
    return s;
}

mt_status mt_cuda_compile_check(const char *src, const char *kernel_name, int sm_arch, mt_cuda_resources *out, char *log,
                                size_t loglen) {
    mt_cuda_check_params p = mt_cuda_check_default_params();
    p.sm_arch = sm_arch;
    return mt_cuda_compile_check_ex(src, kernel_name, &p, out, log, loglen);
}

mt_status mt_cuda_kernel_check(const mt_kernel *k, int sm_arch, mt_cuda_resources *out, char *log, size_t loglen) {
    mt_cuda_check_params p = mt_cuda_check_default_params();
    p.sm_arch = sm_arch;
    return mt_cuda_kernel_check_ex(k, &p, out, log, loglen);
}

mt_status mt_cuda_check_limits(const mt_cuda_resources *r, int sm_arch, char *err, size_t errlen) {
    if (!r) return mt__fail(err, errlen, MT_INVALID_ARG, "NULL resources");
    if (r->registers > MT_CUDA_MAX_REGISTERS)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%d registers per thread, over the limit of %d on sm_%d", r->registers,
                        MT_CUDA_MAX_REGISTERS, sm_arch);
    if (r->shared_bytes > MT_CUDA_MAX_STATIC_SHARED)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%d bytes of static shared memory per block, over the limit of %d on sm_%d",
                        r->shared_bytes, MT_CUDA_MAX_STATIC_SHARED, sm_arch);
    if (r->local_bytes > MT_CUDA_MAX_LOCAL_BYTES)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%d bytes of local memory per thread, over the limit of %d on sm_%d",
                        r->local_bytes, MT_CUDA_MAX_LOCAL_BYTES, sm_arch);
    long long spills = (long long)r->spill_store_bytes + r->spill_load_bytes;
    if (spills > MT_CUDA_MAX_SPILL_BYTES)
        return mt__fail(err, errlen, MT_INVALID_CONFIG,
                        "%lld bytes of register spills per thread (%d stored, %d loaded), over the threshold of %d on sm_%d", spills,
                        r->spill_store_bytes, r->spill_load_bytes, MT_CUDA_MAX_SPILL_BYTES, sm_arch);
    if (err && errlen > 0) err[0] = '\0';
    return MT_OK;
}
