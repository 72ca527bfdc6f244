/* Fused passes: see pass_fuse.h. The generated kernels are regular enough
 * (ir/print_c.c) to be turned into functions by text: their one __kernel
 * header becomes a function header with the work-group ids as parameters,
 * get_group_id(a) becomes that parameter, and their one __local array a
 * pointer to the calling work-group's part of a scratch buffer. (A
 * __local array of the fused kernel passed down instead was one array for
 * both of PoCL 3.1's workers: ResNet-50's Winograd layers, which stage
 * their transformed input there, came out wrong.) */
#include "pass_fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "strbuf.h"

/* Work-item and work-group queries a fused function cannot answer. */
static const char *const unfusable[] = {"get_global_id", "get_local_size", "get_global_size", "get_num_groups",
                                        "get_global_offset", "get_work_dim", "barrier(", "work_group_barrier", "work_group_broadcast",
                                        "work_group_reduce", "work_group_scan", "work_group_all", "work_group_any", "sub_group",
                                        "get_enqueued"};

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

/* The one `__local float NAME[SIZE];` of src: its start and end in *at, *end
 * and its floats; 0 when src has none, -1 when it has another kind. */
static int64_t local_array(const char *src, const char **at, const char **end) {
    const char *p = strstr(src, "__local");
    if (!p) return 0;
    const char *q = p + strlen("__local");
    if (strncmp(q, " float ", 7) != 0) return -1;
    q += 7;
    while (*q == '_' || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')) q++;
    if (*q != '[') return -1;
    char *e;
    long long size = strtoll(q + 1, &e, 10);
    if (size <= 0 || e[0] != ']' || e[1] != ';') return -1;
    *at = p;
    *end = e + 2;
    return size;
}

/* The kernel's header: `__kernel` up to the `{` of its body; its parameter
 * list in [*params, *params_end). NULL when the source has another shape. */
static const char *kernel_header(const char *src, const char **params, const char **params_end, const char **body) {
    const char *k = strstr(src, "__kernel");
    if (!k || strstr(k + 1, "__kernel")) return NULL;
    const char *v = strstr(k, "void ");
    const char *open = v ? strchr(v, '(') : NULL;
    const char *close = open ? strchr(open, ')') : NULL;
    if (!close) return NULL;
    const char *b = close + 1;
    while (*b == ' ') b++;
    if (*b != '{') return NULL;
    *params = open + 1;
    *params_end = close;
    *body = b;
    return k;
}

/* The work-group size of reqd_work_group_size(x, y, z) in src; 0 when absent. */
static int work_group_size(const char *src, long size[3]) {
    const char *r = strstr(src, "reqd_work_group_size(");
    return r && sscanf(r, "reqd_work_group_size(%ld, %ld, %ld)", &size[0], &size[1], &size[2]) == 3 && size[0] > 0 && size[1] > 0 &&
           size[2] > 0;
}

int mt__fuse_can(const char *src) {
    long wg[3];
    if (!src || !work_group_size(src, wg)) return 0;
    for (size_t i = 0; i < sizeof unfusable / sizeof unfusable[0]; i++)
        if (strstr(src, unfusable[i])) return 0;
    const char *a, *e, *pa, *pe, *b;
    if (!kernel_header(src, &pa, &pe, &b)) return 0;
    /* Work-items run one after the other (no barrier): nothing may leave
     * the body early, and a __local array would be shared between them. */
    const int items = wg[0] * wg[1] * wg[2] > 1;
    if (items && (strstr(b, "return") || strstr(src, "__local"))) return 0;
    if (count(src, "__local") > 1) return 0;
    return local_array(src, &a, &e) >= 0;
}

/* The next of get_group_id( and get_local_id( in [s, e), or NULL. */
static const char *next_query(const char *s, const char *e, int *local) {
    const char *g = strstr(s, "get_group_id("), *l = strstr(s, "get_local_id(");
    if (g && g >= e) g = NULL;
    if (l && l >= e) l = NULL;
    *local = l && (!g || l < g);
    return *local ? l : g;
}

/* Appends [s, e) with get_group_id(a) replaced by mt__ga and
 * get_local_id(a) by mt__la. */
static void append_groups(mt_strbuf *sb, const char *s, const char *e) {
    while (s < e) {
        int local;
        const char *g = next_query(s, e, &local);
        if (!g) {
            mt__sb_printf(sb, "%.*s", (int)(e - s), s);
            return;
        }
        mt__sb_printf(sb, "%.*s", (int)(g - s), s);
        const char *axis = g + strlen("get_group_id(");
        if ((axis[0] == '0' || axis[0] == '1' || axis[0] == '2') && axis[1] == ')') {
            mt__sb_printf(sb, "mt__%c%c", local ? 'l' : 'g', axis[0]);
            s = axis + 2;
        } else {
            mt__sb_printf(sb, "%.*s", (int)(axis - g), g);
            s = axis;
        }
    }
}

/* Appends the lines of a kernel's preamble not written yet: each typedef
 * once, and each other stretch of lines (its guarded macros) once. */
static void append_preamble(mt_strbuf *sb, mt_strbuf *seen, const char *s, const char *e) {
    mt_strbuf rest = {0};
    while (s < e) {
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        const char *le = nl ? nl + 1 : e;
        mt_strbuf line = {0};
        mt__sb_printf(&line, "%.*s", (int)(le - s), s);
        if (line.data && strncmp(line.data, "typedef ", 8) == 0) {
            if (!seen->data || !strstr(seen->data, line.data)) {
                mt__sb_append(seen, line.data);
                mt__sb_append(sb, line.data);
            }
        } else if (line.data && strncmp(line.data, "/*", 2) != 0) {
            mt__sb_append(&rest, line.data);
        }
        mt__sb_free(&line);
        s = le;
    }
    if (rest.data && (!seen->data || !strstr(seen->data, rest.data))) {
        mt__sb_append(seen, rest.data);
        mt__sb_append(sb, rest.data);
    }
    if (rest.failed) sb->failed = 1;
    mt__sb_free(&rest);
}

/* Appends kernel src as `static void mt__fnF(params, g0, g1, g2, scratch)`. */
static void append_function(mt_strbuf *sb, mt_strbuf *seen, const char *src, int f) {
    const char *pa, *pe, *body;
    const char *k = kernel_header(src, &pa, &pe, &body);
    append_preamble(sb, seen, src, k);
    mt__sb_printf(sb, "static __attribute__((noinline)) void mt__fn%d(%.*s, const long mt__g0, const long mt__g1, const long mt__g2, "
                      "__global float *restrict mt__scratch) ",
                  f, (int)(pe - pa), pa);
    /* The work-items of a group in turn, as PoCL runs a kernel without barriers. */
    long wg[3];
    work_group_size(src, wg);
    mt__sb_printf(sb, "{\n    for (long mt__l2 = 0; mt__l2 < %ldL; mt__l2++)\n    for (long mt__l1 = 0; mt__l1 < %ldL; mt__l1++)\n"
                      "    for (long mt__l0 = 0; mt__l0 < %ldL; mt__l0++) ",
                  wg[2], wg[1], wg[0]);
    const char *la, *le;
    if (local_array(body, &la, &le) > 0) {
        /* `__local float NAME[SIZE];` -> `__global float *NAME = mt__scratch;` */
        const char *name = la + strlen("__local float ");
        const char *bracket = strchr(name, '[');
        append_groups(sb, body, la);
        mt__sb_printf(sb, "__global float *%.*s = mt__scratch;", (int)(bracket - name), name);
        append_groups(sb, le, body + strlen(body));
    } else {
        append_groups(sb, body, body + strlen(body));
    }
    mt__sb_append(sb, "\n}\n");
}

/* Appends launch i of the fused kernel: claim chunks, run them, count them
 * done, wait until every work-group of the launch is done. The chunks
 * shrink with the work left (a quarter of it, at most 64 work-groups), as
 * PoCL's own: large at first, so that each work-group's blocks lie
 * together, and single at the end, so that no work-group waits long for
 * another's last chunk. */
static void append_launch(mt_strbuf *sb, const mt__fuse_launch *l, int f, int i) {
    const int64_t *g = l->grid, total = g[0] * g[1] * g[2];
    const int claimed = 2 * l->counters, done = claimed + 1;
    mt__sb_printf(sb, "    for (;;) { /* launch %d */\n", i);
    mt__sb_printf(sb, "        const long left = %lldL - *(volatile __global int *)&mt__sync[%d];\n", (long long)total, claimed);
    mt__sb_append(sb, "        if (left <= 0) break;\n        const int chunk = (int)clamp(left / 4, 1L, 64L);\n");
    mt__sb_printf(sb, "        const long t0 = atomic_add(&mt__sync[%d], chunk);\n", claimed);
    mt__sb_printf(sb, "        if (t0 >= %lldL) break;\n", (long long)total);
    mt__sb_printf(sb, "        const long t1 = min(t0 + chunk, %lldL);\n", (long long)total);
    mt__sb_printf(sb, "        for (long t = t0; t < t1; t++)\n            mt__fn%d(", f);
    for (int a = 0; a < l->nargs; a++) mt__sb_printf(sb, "mt__b%d, ", l->arg[a]);
    mt__sb_printf(sb, "t %% %lldL, (t / %lldL) %% %lldL, t / %lldL, mt__scratch);\n", (long long)g[0], (long long)g[0], (long long)g[1],
                  (long long)(g[0] * g[1]));
    mt__sb_printf(sb, "        mem_fence(CLK_GLOBAL_MEM_FENCE);\n        atomic_add(&mt__sync[%d], (int)(t1 - t0));\n    }\n", done);
    mt__sb_printf(sb, "    while (*(volatile __global int *)&mt__sync[%d] < %lld) {\n", done, (long long)total);
    mt__sb_append(sb, "#if defined(__clang__) && defined(__x86_64__)\n        __builtin_ia32_pause();\n#endif\n    }\n");
    mt__sb_append(sb, "    mem_fence(CLK_GLOBAL_MEM_FENCE);\n");
}

mt_status mt__fuse_source(const mt__fuse_launch *l, int n, int nbufs, const char *name, char **out, int64_t *scratch_floats, char *err,
                          size_t errlen) {
    *out = NULL;
    if (!l || n < 1 || nbufs < 1 || !name) return mt__fail(err, errlen, MT_INVALID_ARG, "fuse: bad arguments");
    for (int i = 0; i < n; i++) {
        if (!mt__fuse_can(l[i].src)) return mt__fail(err, errlen, MT_INVALID_ARG, "fuse: launch %d's kernel cannot run fused", i);
        if (l[i].grid[0] < 1 || l[i].grid[1] < 1 || l[i].grid[2] < 1)
            return mt__fail(err, errlen, MT_INVALID_ARG, "fuse: launch %d's grid is empty", i);
    }
    int *fn = malloc(sizeof(int) * (size_t)n);
    if (!fn) return mt__fail(err, errlen, MT_NOMEM, "fuse: out of memory");
    mt_strbuf sb = {0}, seen = {0};
    mt__sb_append(&sb, "/* generated by mtgpu: a fused pass */\n");
    int64_t lmem = 0;
    for (int i = 0; i < n; i++) {
        fn[i] = i;
        for (int j = 0; j < i; j++)
            if (strcmp(l[j].src, l[i].src) == 0) {
                fn[i] = fn[j];
                break;
            }
        const char *a, *e;
        int64_t floats = local_array(l[i].src, &a, &e);
        if (floats > lmem) lmem = floats;
        if (fn[i] == i) append_function(&sb, &seen, l[i].src, i);
    }
    if (lmem < 1) lmem = 1;
    mt__sb_printf(&sb, "__kernel __attribute__((reqd_work_group_size(1, 1, 1)))\nvoid %s(__global int *mt__sync, __global float *mt__scratch_all",
                  name);
    for (int b = 0; b < nbufs; b++) mt__sb_printf(&sb, ", __global float *mt__b%d", b);
    mt__sb_printf(&sb, ") {\n    __global float *mt__scratch = mt__scratch_all + get_group_id(0) * %lldL;\n", (long long)lmem);
    for (int i = 0; i < n; i++) append_launch(&sb, &l[i], fn[i], i);
    mt__sb_append(&sb, "}\n");
    free(fn);
    const int failed = sb.failed || seen.failed;
    mt__sb_free(&seen);
    if (failed) {
        mt__sb_free(&sb);
        return mt__fail(err, errlen, MT_NOMEM, "fuse: out of memory");
    }
    *out = sb.data;
    if (scratch_floats) *scratch_floats = lmem;
    return MT_OK;
}
