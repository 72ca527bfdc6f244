/* The CUDA module: NVRTC compilation, nvJitLink resource reports, and the
 * table of every member (the driver half is in driver.c, cuDNN in cudnn.c).
 *
 * Built as libmtgpu_cuda.so and loaded by cuda/cuda_loader.c; exports only
 * mt_cuda_module_get (see cuda_module.h for the ABI). Needs NVRTC and
 * nvJitLink, never a GPU: the driver (libcuda.so.1) and cuDNN are reached
 * with dlopen, so that this module loads on machines without them. */
#include "module-impl.h"
#include "ptxas_log.h"

#include <limits.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- NVRTC ---- */

/* A compile or link that fails because the kernel is over a hardware limit
 * is a config the tuner should skip, not a broken source. */
static int over_limit(const char *errlog) {
    return errlog && (strstr(errlog, "too much shared data") || strstr(errlog, "too much local data") ||
                      strstr(errlog, "too many resources") || strstr(errlog, "uses too much"));
}

/* MT_OK when NVRTC can target sm_<sm>; MT_UNSUPPORTED listing what it can. */
static mt_status check_arch(int sm, char *log, size_t loglen) {
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256)
        return sm >= 10 && sm < 1000 ? MT_OK : mt__cu_fail(log, loglen, MT_UNSUPPORTED, "sm_%d is not a CUDA architecture", sm);
    int archs[256];
    if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) return MT_OK; /* let the compile decide */
    for (int i = 0; i < n; i++)
        if (archs[i] == sm) return MT_OK;
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        char one[16];
        snprintf(one, sizeof one, "%s%d", i ? " " : "", archs[i]);
        mt__cu_log_append(list, sizeof list, one);
    }
    return mt__cu_fail(log, loglen, MT_UNSUPPORTED, "sm_%d is not supported by this NVRTC (supported: %s)", sm, list);
}

static mt_status nvrtc_status(nvrtcResult r) {
    switch (r) {
    case NVRTC_SUCCESS: return MT_OK;
    case NVRTC_ERROR_OUT_OF_MEMORY: return MT_NOMEM;
    case NVRTC_ERROR_INVALID_INPUT: return MT_INVALID_ARG;
    default: return MT_BUILD;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* NVRTC's flow callback: cancel once the deadline (payload) has passed.
 * Consistent and thread-safe as NVRTC requires: time only moves forward and
 * the payload belongs to one compile. */
static int past_deadline(void *payload, void *reserved) {
    (void)reserved;
    return now_s() > *(const double *)payload;
}

/* Compiles src with `arch_opt`, within timeout_s (<= 0: no limit); on MT_OK
 * *prog is live (nvrtcDestroyProgram). NVRTC's log (warnings on success) is
 * appended to log. */
static mt_status nvrtc_build(const char *src, const char *name, const char *arch_opt, double timeout_s, nvrtcProgram *prog,
                             char *log, size_t loglen) {
    char progname[96];
    snprintf(progname, sizeof progname, "%s.cu", name && *name ? name : "kernel");
    nvrtcResult r = nvrtcCreateProgram(prog, src, progname, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        *prog = NULL;
        return mt__cu_fail(log, loglen, nvrtc_status(r), "nvrtcCreateProgram: %s", nvrtcGetErrorString(r));
    }
    double deadline = now_s() + timeout_s;
    if (timeout_s > 0) nvrtcSetFlowCallback(*prog, past_deadline, &deadline);
    const char *opts[] = {arch_opt, "-default-device", "--std=c++17"};
    r = nvrtcCompileProgram(*prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r == NVRTC_ERROR_CANCELLED) {
        nvrtcDestroyProgram(prog);
        *prog = NULL;
        return mt__cu_fail(log, loglen, MT_TIMEOUT, "NVRTC compilation stopped at the time limit of %g s", timeout_s);
    }

    size_t n = 0;
    char *text = NULL;
    if (nvrtcGetProgramLogSize(*prog, &n) == NVRTC_SUCCESS && n > 1) {
        text = malloc(n);
        if (text && nvrtcGetProgramLog(*prog, text) == NVRTC_SUCCESS) mt__cu_log_append(log, loglen, text);
    }
    int limit = text && over_limit(text); /* ptxas ran inside NVRTC (sm_XX) and refused */
    free(text);
    if (r != NVRTC_SUCCESS) {
        mt_status s = r == NVRTC_ERROR_COMPILATION && limit ? MT_INVALID_CONFIG : nvrtc_status(r);
        if (log && loglen > 0 && log[0] == '\0') mt__cu_fail(log, loglen, s, "nvrtcCompileProgram: %s", nvrtcGetErrorString(r));
        nvrtcDestroyProgram(prog);
        *prog = NULL;
        return s;
    }
    return MT_OK;
}

/* The PTX of a compiled program (NUL-terminated), malloc'd. */
static mt_status get_ptx(nvrtcProgram prog, char **ptx, size_t *len, char *log, size_t loglen) {
    size_t n = 0;
    nvrtcResult r = nvrtcGetPTXSize(prog, &n);
    if (r != NVRTC_SUCCESS || n == 0) return mt__cu_fail(log, loglen, MT_BUILD, "nvrtcGetPTXSize: %s", nvrtcGetErrorString(r));
    char *p = malloc(n);
    if (!p) return mt__cu_fail(log, loglen, MT_NOMEM, "out of memory for %zu bytes of PTX", n);
    r = nvrtcGetPTX(prog, p);
    if (r != NVRTC_SUCCESS) {
        free(p);
        return mt__cu_fail(log, loglen, MT_BUILD, "nvrtcGetPTX: %s", nvrtcGetErrorString(r));
    }
    *ptx = p;
    *len = n;
    return MT_OK;
}

/* Non-zero when the PTX declares entry `name` (".entry name(" in any spacing). */
static int ptx_has_entry(const char *ptx, const char *name) {
    size_t m = strlen(name);
    for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
        const char *q = p + 6;
        if (*q != ' ' && *q != '\t') continue;
        while (*q == ' ' || *q == '\t') q++;
        if (strncmp(q, name, m) == 0 && (q[m] == '(' || q[m] == ' ' || q[m] == '\t' || q[m] == '\n' || q[m] == '\r'))
            return 1;
    }
    return 0;
}

static mt_status missing_kernel(const char *name, char *log, size_t loglen) {
    return mt__cu_fail(log, loglen, MT_NOT_FOUND,
                "kernel '%s' is not in the program (a __global__ function must be declared extern \"C\" to keep its name)", name);
}

/* NVRTC's PTX of src (*ptx malloc'd, *ptx_len bytes with the NUL) for
 * --gpu-architecture=<target>_<p->sm_arch>, checked to declare kernel
 * `name` (NULL or "": any). With keep, *keep is the live program on MT_OK
 * (nvrtcDestroyProgram); without, the program is gone. */
static mt_status build_ptx(const char *src, const char *name, const mt_cuda_check_params *p, const char *target, nvrtcProgram *keep,
                           char **ptx, size_t *ptx_len, char *log, size_t loglen) {
    mt_status s = check_arch(p->sm_arch, log, loglen);
    if (s != MT_OK) return s;
    char arch[48];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s_%d", target, p->sm_arch);
    nvrtcProgram prog;
    s = nvrtc_build(src, name, arch, p->timeout_s, &prog, log, loglen);
    if (s != MT_OK) return s;
    s = get_ptx(prog, ptx, ptx_len, log, loglen);
    if (s == MT_OK && name && *name && !ptx_has_entry(*ptx, name)) {
        free(*ptx);
        *ptx = NULL;
        s = missing_kernel(name, log, loglen);
    }
    if (s == MT_OK && keep) *keep = prog;
    else nvrtcDestroyProgram(&prog);
    return s;
}

static mt_status cuda_compile(const char *src, const char *name, const mt_cuda_check_params *p, mt_cuda_output kind, char **out,
                              size_t *len, char *log, size_t loglen) {
    if (log && loglen > 0) log[0] = '\0';
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!src || !p || !out || !len || (kind != MT_CUDA_OUTPUT_PTX && kind != MT_CUDA_OUTPUT_CUBIN))
        return mt__cu_fail(log, loglen, MT_INVALID_ARG, "compile: NULL source, params or output, or unknown output kind");
    nvrtcProgram prog;
    char *ptx = NULL;
    size_t ptx_len = 0;
    mt_status s = build_ptx(src, name, p, kind == MT_CUDA_OUTPUT_PTX ? "compute" : "sm", &prog, &ptx, &ptx_len, log, loglen);
    if (s != MT_OK) return s;
    if (kind == MT_CUDA_OUTPUT_PTX) {
        *out = ptx;
        *len = ptx_len;
        ptx = NULL;
    } else {
        size_t n = 0;
        nvrtcResult r = nvrtcGetCUBINSize(prog, &n);
        char *bin = r == NVRTC_SUCCESS && n > 0 ? malloc(n) : NULL;
        if (r != NVRTC_SUCCESS || n == 0)
            s = mt__cu_fail(log, loglen, MT_BUILD, "nvrtcGetCUBINSize: %s", nvrtcGetErrorString(r));
        else if (!bin)
            s = mt__cu_fail(log, loglen, MT_NOMEM, "out of memory for a %zu-byte cubin", n);
        else if ((r = nvrtcGetCUBIN(prog, bin)) != NVRTC_SUCCESS)
            s = mt__cu_fail(log, loglen, MT_BUILD, "nvrtcGetCUBIN: %s", nvrtcGetErrorString(r));
        if (s == MT_OK) {
            *out = bin;
            *len = n;
        } else {
            free(bin);
        }
    }
    free(ptx);
    nvrtcDestroyProgram(&prog);
    return s;
}

/* ---- nvJitLink ---- */

/* One of nvJitLink's logs, malloc'd and NUL-terminated ("" when empty). */
static char *jit_log(nvJitLinkHandle h, int info) {
    size_t n = 0;
    nvJitLinkResult r = info ? nvJitLinkGetInfoLogSize(h, &n) : nvJitLinkGetErrorLogSize(h, &n);
    char *text = malloc(n + 1);
    if (!text) return NULL;
    text[0] = '\0';
    if (r == NVJITLINK_SUCCESS && n > 0) {
        r = info ? nvJitLinkGetInfoLog(h, text) : nvJitLinkGetErrorLog(h, text);
        if (r != NVJITLINK_SUCCESS) text[0] = '\0';
        text[n] = '\0';
    }
    return text;
}

static const char *jit_result_name(nvJitLinkResult r) {
    switch (r) {
    case NVJITLINK_SUCCESS: return "success";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "unrecognized option";
    case NVJITLINK_ERROR_MISSING_ARCH: return "missing -arch";
    case NVJITLINK_ERROR_INVALID_INPUT: return "invalid input";
    case NVJITLINK_ERROR_PTX_COMPILE: return "PTX compilation failed";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVVM compilation failed";
    case NVJITLINK_ERROR_INTERNAL: return "internal error";
    case NVJITLINK_ERROR_FINALIZE: return "finalizer error";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "unrecognized -arch";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "unsupported -arch";
    default: return "error";
    }
}

static mt_status cuda_resources(const char *src, const char *name, const mt_cuda_check_params *p, mt_cuda_resources *res,
                                char **cubin, size_t *cubin_len, char *log, size_t loglen) {
    if (log && loglen > 0) log[0] = '\0';
    if (cubin) *cubin = NULL;
    if (cubin_len) *cubin_len = 0;
    if (res) memset(res, 0, sizeof *res);
    if (!src || !p || !res || (cubin && !cubin_len))
        return mt__cu_fail(log, loglen, MT_INVALID_ARG, "resources: NULL source, params or output");
    const int sm = p->sm_arch;
    /* PTX only from NVRTC (compute_XX skips its own ptxas run); nvJitLink
     * runs ptxas once and reports. */
    char *ptx = NULL;
    size_t ptx_len = 0;
    mt_status s = build_ptx(src, name, p, "compute", NULL, &ptx, &ptx_len, log, loglen);
    if (s != MT_OK) return s;
    /* Static shared memory over the limit fails in nvJitLink's finalizer,
     * after a full ptxas run, and nvJitLink 13.0 leaks ~120 KiB on that
     * path: a tuner trying many such configs would grow without bound. The
     * PTX already says how much is declared, so reject here. */
    long long smem = mt__cuda_ptx_shared_bytes(ptx, name);
    if (smem > MT_CUDA_MAX_STATIC_SHARED) {
        free(ptx);
        res->shared_bytes = smem > INT_MAX ? INT_MAX : (int)smem;
        return mt__cu_fail(log, loglen, MT_INVALID_CONFIG,
                    "kernel '%s' declares %lld bytes of static shared memory, over the limit of %d on sm_%d (rejected before linking)",
                    name && *name ? name : "(first)", smem, MT_CUDA_MAX_STATIC_SHARED, sm);
    }

    char link_arch[32];
    snprintf(link_arch, sizeof link_arch, "-arch=sm_%d", sm);
    const char *opts[] = {link_arch, "-verbose"};
    nvJitLinkHandle h = NULL;
    nvJitLinkResult r = nvJitLinkCreate(&h, 2, opts);
    if (r != NVJITLINK_SUCCESS) {
        free(ptx);
        return mt__cu_fail(log, loglen, r == NVJITLINK_ERROR_UNRECOGNIZED_ARCH || r == NVJITLINK_ERROR_UNSUPPORTED_ARCH ? MT_UNSUPPORTED : MT_BUILD,
                    "nvJitLinkCreate(%s): %s", link_arch, jit_result_name(r));
    }
    r = nvJitLinkAddData(h, NVJITLINK_INPUT_PTX, ptx, ptx_len, "kernel.ptx");
    if (r == NVJITLINK_SUCCESS) r = nvJitLinkComplete(h);
    free(ptx);

    char *info = jit_log(h, 1);
    int found = info ? mt__cuda_parse_info_log(info, name, res) : 0;
    if (r != NVJITLINK_SUCCESS) {
        char *err = jit_log(h, 0);
        s = over_limit(err) ? MT_INVALID_CONFIG : MT_BUILD;
        char head[96];
        snprintf(head, sizeof head, "nvJitLink (%s): %s\n", link_arch, jit_result_name(r));
        mt__cu_log_append(log, loglen, head);
        mt__cu_log_append(log, loglen, err);
        mt__cu_log_append(log, loglen, info);
        free(err);
    } else if (!info) {
        s = mt__cu_fail(log, loglen, MT_NOMEM, "out of memory reading nvJitLink's log");
    } else if (!found) {
        s = MT_PARSE;
        mt__cu_log_append(log, loglen, "no resource report for the kernel in nvJitLink's log:\n");
        mt__cu_log_append(log, loglen, info);
    } else {
        mt__cu_log_append(log, loglen, info);
        size_t n = 0;
        r = nvJitLinkGetLinkedCubinSize(h, &n);
        if (r != NVJITLINK_SUCCESS) {
            s = mt__cu_fail(log, loglen, MT_BUILD, "nvJitLinkGetLinkedCubinSize: %s", jit_result_name(r));
        } else {
            res->cubin_bytes = n;
            if (cubin) {
                char *bin = malloc(n ? n : 1);
                if (!bin) {
                    s = mt__cu_fail(log, loglen, MT_NOMEM, "out of memory for a %zu-byte cubin", n);
                } else if ((r = nvJitLinkGetLinkedCubin(h, bin)) != NVJITLINK_SUCCESS) {
                    free(bin);
                    s = mt__cu_fail(log, loglen, MT_BUILD, "nvJitLinkGetLinkedCubin: %s", jit_result_name(r));
                } else {
                    *cubin = bin;
                    *cubin_len = n;
                }
            }
        }
    }
    free(info);
    nvJitLinkDestroy(&h);
    return s;
}

mt_status mt__cu_compile(const char *src, const char *name, const mt_cuda_check_params *p, mt_cuda_output kind, char **out, size_t *len,
                         char *log, size_t loglen) {
    return cuda_compile(src, name, p, kind, out, len, log, loglen);
}

/* ---- the rest of the table ---- */

/* The driver is usable once libcuda.so.1 loads, has every entry point the
 * module calls and cuInit succeeds (driver_api.c keeps that outcome). */
static int cuda_driver_available(char *why, size_t whylen) {
    if (why && whylen > 0) why[0] = '\0';
    return mt__cu_api_get(why, whylen) != NULL;
}

static void cuda_toolkit_version(char *buf, size_t len) {
    if (!buf || len == 0) return;
    int rmaj = 0, rmin = 0;
    unsigned jmaj = 0, jmin = 0;
    if (nvrtcVersion(&rmaj, &rmin) != NVRTC_SUCCESS) rmaj = rmin = -1;
    if (nvJitLinkVersion(&jmaj, &jmin) != NVJITLINK_SUCCESS) jmaj = jmin = 0;
    snprintf(buf, len, "NVRTC %d.%d, nvJitLink %u.%u", rmaj, rmin, jmaj, jmin);
}

static void cuda_free_buffer(void *p) { free(p); }

static const mt_cuda_module module_v1 = {
    /* .abi_version      = */ MT_CUDA_MODULE_ABI,
    /* .struct_size      = */ sizeof(mt_cuda_module),
    /* .toolkit_version  = */ cuda_toolkit_version,
    /* .driver_available = */ cuda_driver_available,
    /* .compile          = */ cuda_compile,
    /* .resources        = */ cuda_resources,
    /* .free_buffer      = */ cuda_free_buffer,
    /* .dev_list         = */ mt__cu_dev_list,
    /* .dev_open         = */ mt__cu_dev_open,
    /* .dev_close        = */ mt__cu_dev_close,
    /* .load             = */ mt__cu_load,
    /* .prog_free        = */ mt__cu_prog_free,
    /* .alloc            = */ mt__cu_alloc,
    /* .write            = */ mt__cu_write,
    /* .read             = */ mt__cu_read,
    /* .buf_free         = */ mt__cu_buf_free,
    /* .run              = */ mt__cu_run,
    /* .dev_props        = */ mt__cu_dev_props,
    /* .prog_info        = */ mt__cu_prog_info,
    /* .cudnn_available  = */ mt__cudnn_available,
    /* .cudnn_conv       = */ mt__cudnn_conv,
    /* .gnn_kernels      = */ mt__gnn_cuda_source,
    /* .gnn_available    = */ mt__gnn_cuda_available,
    /* .gnn_create       = */ mt__gnn_cuda_create,
    /* .gnn_set_weights  = */ mt__gnn_cuda_set_weights,
    /* .gnn_score        = */ mt__gnn_cuda_score,
    /* .gnn_free         = */ mt__gnn_cuda_free,
};

__attribute__((visibility("default"))) const mt_cuda_module *mt_cuda_module_get(int abi_version) {
    return abi_version == MT_CUDA_MODULE_ABI ? &module_v1 : NULL;
}
