/* Fused passes: see pass_fuse.h. The kernels (the IR printers' and the op
 * kernels of op_kernels.c) are regular enough to be turned into functions
 * by text: a kernel's header becomes that of a function of one work-item,
 * with its work-group and work-item ids as parameters; the work-item
 * queries become those parameters (and the launch's work-group size); its
 * one __local array becomes a pointer to the calling work-group's part of a
 * scratch buffer. (A __local array of the fused kernel passed down instead
 * was one array for both of PoCL 3.1's workers: ResNet-50's Winograd
 * layers, which stage their transformed input there, came out wrong.) A
 * second function runs the work-items of a group one after the other, as
 * PoCL runs a kernel without barriers. */
#include "pass_fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "strbuf.h"

/* Queries and synchronisation a fused function cannot answer or keep. */
static const char *const unfusable[] = {"barrier(",         "work_group_barrier", "work_group_broadcast", "work_group_reduce",
                                        "work_group_scan",  "work_group_all",     "work_group_any",       "sub_group",
                                        "get_num_groups",   "get_global_size",    "get_global_offset",    "get_work_dim",
                                        "get_enqueued",     "mem_fence(",         "atomic_",              "printf("};

/* Work-groups of at most this many work-items call each one with
 * constant ids; larger ones loop. */
#define MT__FUSE_UNROLL_ITEMS 16

/* Queries replaced by the function's parameters. */
enum { Q_GROUP, Q_LOCAL, Q_GLOBAL, Q_SIZE, NQ };
static const char *const query[NQ] = {"get_group_id(", "get_local_id(", "get_global_id(", "get_local_size("};

/* A kernel of a source: its header's start, name, parameter list, body. */
typedef struct kernel_text {
    const char *start;             /* `__kernel` */
    const char *name, *name_end;
    const char *params, *params_end;
    const char *body, *body_end;   /* `{` .. one past the matching `}` */
} kernel_text;

static int ident_char(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

/* The first __kernel at or after s: 1 with *k filled in, 0 when there is
 * none, -1 when it is not of the expected shape. */
static int next_kernel(const char *s, kernel_text *k) {
    const char *p = strstr(s, "__kernel");
    if (!p) return 0;
    const char *v = strstr(p, "void ");
    if (!v) return -1;
    const char *n = v + 5, *ne = n;
    while (ident_char(*ne)) ne++;
    if (ne == n || *ne != '(') return -1;
    const char *close = strchr(ne, ')');
    if (!close || memchr(ne + 1, '(', (size_t)(close - ne - 1))) return -1;
    const char *b = close + 1;
    while (*b == ' ' || *b == '\n') b++;
    if (*b != '{') return -1;
    int depth = 0;
    const char *e = b;
    for (; *e; e++) {
        if (*e == '{') depth++;
        else if (*e == '}' && --depth == 0) break;
    }
    if (!*e) return -1;
    *k = (kernel_text){.start = p, .name = n, .name_end = ne, .params = ne + 1, .params_end = close, .body = b, .body_end = e + 1};
    return 1;
}

/* The __kernel called name in src (NULL: src's only __kernel): 1 when found
 * and every kernel of src is of the expected shape. */
static int find_kernel(const char *src, const char *name, kernel_text *k) {
    int found = 0, r;
    kernel_text t;
    for (const char *s = src; (r = next_kernel(s, &t)) == 1; s = t.body_end) {
        if (name && ((size_t)(t.name_end - t.name) != strlen(name) || strncmp(t.name, name, strlen(name)) != 0)) continue;
        if (found) return 0; /* two candidates */
        *k = t;
        found = 1;
    }
    return r < 0 ? 0 : found;
}

static int contains(const char *s, const char *e, const char *what) {
    const size_t n = strlen(what);
    for (const char *p = s; p + n <= e; p++)
        if (memcmp(p, what, n) == 0) return 1;
    return 0;
}

/* The one `__local float NAME[SIZE];` of [s, e): its start and end in *at,
 * *end and its floats; 0 when there is none, -1 when there is another kind
 * or more than one. */
static int64_t local_array(const char *s, const char *e, const char **at, const char **end) {
    const char *p = NULL;
    for (const char *q = s; q + 7 <= e; q++)
        if (memcmp(q, "__local", 7) == 0) {
            if (p) return -1;
            p = q;
        }
    if (!p) return 0;
    const char *q = p + strlen("__local");
    if (strncmp(q, " float ", 7) != 0) return -1;
    q += 7;
    while (ident_char(*q)) q++;
    if (*q != '[') return -1;
    char *x;
    long long size = strtoll(q + 1, &x, 10);
    if (size <= 0 || x[0] != ']' || x[1] != ';') return -1;
    *at = p;
    *end = x + 2;
    return size;
}

/* The work-group size the kernel's header asks for, when it asks: it must be the launch's. */
static int header_size_matches(const kernel_text *k, const int64_t block[3]) {
    const char *r = strstr(k->start, "reqd_work_group_size(");
    if (!r || r > k->params) return 1;
    long x, y, z;
    return sscanf(r, "reqd_work_group_size(%ld, %ld, %ld)", &x, &y, &z) == 3 && x == block[0] && y == block[1] && z == block[2];
}

/* Whether [s, e) asks a work-item query. */
static int has_query(const char *s, const char *e) {
    for (int q = 0; q < NQ; q++)
        if (contains(s, e, query[q])) return 1;
    return 0;
}

/* Whether the text of src outside its kernels' bodies (helper functions)
 * asks a work-item query: those would answer for the fused kernel. */
static int queries_outside_kernels(const char *src) {
    const char *s = src;
    kernel_text t;
    for (; next_kernel(s, &t) == 1; s = t.body_end)
        if (has_query(s, t.start)) return 1;
    return has_query(s, s + strlen(s));
}

int mt__fuse_can(const char *src, const char *kernel, const int64_t block[3]) {
    kernel_text k;
    if (!src || !block || block[0] < 1 || block[1] < 1 || block[2] < 1 || !find_kernel(src, kernel, &k)) return 0;
    if (queries_outside_kernels(src)) return 0;
    if (!header_size_matches(&k, block)) return 0;
    for (size_t i = 0; i < sizeof unfusable / sizeof unfusable[0]; i++)
        if (contains(k.body, k.body_end, unfusable[i])) return 0;
    const char *a, *e;
    const int64_t local = local_array(k.body, k.body_end, &a, &e);
    /* Work-items run one after the other: a __local array would be shared between them. */
    return local == 0 || (local > 0 && block[0] * block[1] * block[2] == 1);
}

/* Appends [s, e) with the work-item queries replaced: get_group_id(a) by
 * mt__ga, get_local_id(a) by mt__la, get_global_id(a) by
 * (mt__ga * block[a] + mt__la), get_local_size(a) by block[a]. */
static void append_queries(mt_strbuf *sb, const char *s, const char *e, const int64_t block[3]) {
    while (s < e) {
        const char *next = NULL;
        int q = -1;
        for (int i = 0; i < NQ; i++) {
            const char *f = strstr(s, query[i]);
            if (f && f < e && (!next || f < next)) next = f, q = i;
        }
        if (!next) {
            mt__sb_printf(sb, "%.*s", (int)(e - s), s);
            return;
        }
        mt__sb_printf(sb, "%.*s", (int)(next - s), s);
        const char *axis = next + strlen(query[q]);
        if (!((axis[0] == '0' || axis[0] == '1' || axis[0] == '2') && axis[1] == ')')) {
            mt__sb_printf(sb, "%.*s", (int)(axis - next), next);
            s = axis;
            continue;
        }
        const int a = axis[0] - '0';
        if (q == Q_GROUP) mt__sb_printf(sb, "mt__g%d", a);
        else if (q == Q_LOCAL) mt__sb_printf(sb, "mt__l%d", a);
        else if (q == Q_GLOBAL) mt__sb_printf(sb, "(mt__g%d * %lldL + mt__l%d)", a, (long long)block[a], a);
        else mt__sb_printf(sb, "%lldL", (long long)block[a]);
        s = axis + 2;
    }
}

/* Appends what src has outside its kernels and has not been written yet:
 * each typedef line once, and the rest (macros, helper functions) once;
 * comments left out. */
static void append_preamble(mt_strbuf *sb, mt_strbuf *seen, const char *src) {
    mt_strbuf outside = {0}, rest = {0};
    const char *s = src;
    kernel_text t;
    for (; next_kernel(s, &t) == 1; s = t.body_end) mt__sb_printf(&outside, "%.*s", (int)(t.start - s), s);
    mt__sb_append(&outside, s);
    const char *e = outside.data ? outside.data + outside.len : NULL;
    s = outside.data;
    int in_comment = 0;
    while (s < e) {
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        const char *le = nl ? nl + 1 : e;
        mt_strbuf line = {0};
        mt__sb_printf(&line, "%.*s", (int)(le - s), s);
        const char *t = line.data ? line.data : "";
        const int comment = in_comment || strncmp(t, "/*", 2) == 0;
        if (comment) in_comment = !strstr(t, "*/");
        if (comment) {
            /* left out */
        } else if (strncmp(t, "typedef ", 8) == 0) {
            if (!seen->data || !strstr(seen->data, t)) {
                mt__sb_append(seen, t);
                mt__sb_append(sb, t);
            }
        } else {
            mt__sb_append(&rest, t);
        }
        if (line.failed) sb->failed = 1;
        mt__sb_free(&line);
        s = le;
    }
    if (rest.data && (!seen->data || !strstr(seen->data, rest.data))) {
        mt__sb_append(seen, rest.data);
        mt__sb_append(sb, rest.data);
    }
    if (rest.failed || outside.failed) sb->failed = 1;
    mt__sb_free(&rest);
    mt__sb_free(&outside);
}

/* Appends the names of a parameter list (the last identifier of each). */
static void append_param_names(mt_strbuf *sb, const char *s, const char *e) {
    while (s < e) {
        const char *comma = memchr(s, ',', (size_t)(e - s));
        const char *pe = comma ? comma : e, *ne = pe;
        while (ne > s && !ident_char(ne[-1])) ne--;
        const char *n = ne;
        while (n > s && ident_char(n[-1])) n--;
        mt__sb_printf(sb, "%.*s, ", (int)(ne - n), n);
        s = comma ? comma + 1 : e;
    }
}

/* Appends the launch's kernel as `mt__itF` (one work-item) and `mt__fnF`
 * (a work-group: its work-items in turn). */
static void append_function(mt_strbuf *sb, mt_strbuf *seen, const mt__fuse_launch *l, int f) {
    kernel_text k;
    find_kernel(l->src, l->kernel, &k); /* mt__fuse_can checked it */
    append_preamble(sb, seen, l->src);
    const int pn = (int)(k.params_end - k.params);
    mt__sb_printf(sb,
                  "static inline __attribute__((always_inline)) void mt__it%d(%.*s, const long mt__g0, const long mt__g1, const long mt__g2, "
                  "const long mt__l0, const long mt__l1, const long mt__l2, __global float *restrict mt__scratch) ",
                  f, pn, k.params);
    const char *la, *le;
    if (local_array(k.body, k.body_end, &la, &le) > 0) {
        /* `__local float NAME[SIZE];` -> `__global float *NAME = mt__scratch;` */
        const char *name = la + strlen("__local float ");
        const char *bracket = strchr(name, '[');
        append_queries(sb, k.body, la, l->block);
        mt__sb_printf(sb, "__global float *%.*s = mt__scratch;", (int)(bracket - name), name);
        append_queries(sb, le, k.body_end, l->block);
    } else {
        append_queries(sb, k.body, k.body_end, l->block);
    }
    mt__sb_printf(sb, "\nstatic __attribute__((noinline)) void mt__fn%d(%.*s, const long mt__g0, const long mt__g1, const long mt__g2, "
                      "__global float *restrict mt__scratch) {\n",
                  f, pn, k.params);
    const int64_t items = l->block[0] * l->block[1] * l->block[2];
    if (items <= MT__FUSE_UNROLL_ITEMS) {
        /* One call per work-item with its ids as constants, as PoCL's own
         * work-item loops end up: with a loop over them, kvec's 2-item
         * work-groups ran 1.44x slower (512 -> 512 3x3 stride 2 at 14x14,
         * one thread, 2026-12-05). */
        for (int64_t i = 0; i < items; i++) {
            mt__sb_printf(sb, "    mt__it%d(", f);
            append_param_names(sb, k.params, k.params_end);
            mt__sb_printf(sb, "mt__g0, mt__g1, mt__g2, %lldL, %lldL, %lldL, mt__scratch);\n", (long long)(i % l->block[0]),
                          (long long)(i / l->block[0] % l->block[1]), (long long)(i / (l->block[0] * l->block[1])));
        }
    } else {
        mt__sb_printf(sb, "    for (long mt__l2 = 0; mt__l2 < %lldL; mt__l2++)\n    for (long mt__l1 = 0; mt__l1 < %lldL; mt__l1++)\n"
                          "    for (long mt__l0 = 0; mt__l0 < %lldL; mt__l0++)\n        mt__it%d(",
                      (long long)l->block[2], (long long)l->block[1], (long long)l->block[0], f);
        append_param_names(sb, k.params, k.params_end);
        mt__sb_append(sb, "mt__g0, mt__g1, mt__g2, mt__l0, mt__l1, mt__l2, mt__scratch);\n");
    }
    mt__sb_append(sb, "}\n");
}

/* Appends launch i of the fused kernel. Its work-groups are cut into one
 * range per work-group of the fused launch (up to MT__FUSE_RANGES), and
 * each work-group runs its own range first, claiming chunks of it from the
 * range's counter, then claims what is left of the others'. Every
 * work-group thus tends to get the same share of every kernel, and with the
 * kernels' blocks laid out alike, the data it wrote in one kernel is what
 * it reads in the next, still in its core's caches: MobileNetV2's passes
 * took 0.91x the time of chunks claimed from one counter in turns,
 * ResNet-50's 0.95x (6 rounds in turns, 2026-12-05). A work-group that
 * starts late finds its range taken and goes on. The chunks are a quarter
 * of what is left of a range, at most 64 work-groups. Each work-group adds
 * what it ran to the launch's done counter, and waits until that holds
 * every work-group of the launch before it starts the next. It stamps the
 * clock when it starts the launch, when its share is done and when the
 * wait ends (pass_fuse.h: a profile of the fused pass itself). */
static void append_launch(mt_strbuf *sb, const mt__fuse_launch *l, int f, int i) {
    const int64_t *g = l->grid, total = g[0] * g[1] * g[2];
    const int base = l->counters * MT__FUSE_COUNTERS, done = base + MT__FUSE_RANGES;
    mt__sb_printf(sb, "    { /* launch %d */\n", i);
    mt__sb_printf(sb, "        const long per = (%lldL + mt__ranges - 1) / mt__ranges;\n        long ran = 0;\n", (long long)total);
    mt__sb_append(sb, "        for (long v = 0; v < mt__ranges; v++) {\n"
                      "            const long r = (mt__own + v) % mt__ranges, lo = r * per;\n");
    mt__sb_printf(sb, "            const long hi = min(lo + per, %lldL);\n", (long long)total);
    mt__sb_append(sb, "            for (;;) {\n");
    mt__sb_printf(sb, "                const long left = (hi - lo) - *(volatile __global int *)&mt__sync[%d + r];\n", base);
    mt__sb_append(sb, "                if (left <= 0) break;\n                const int chunk = (int)clamp(left / 4, 1L, 64L);\n");
    mt__sb_printf(sb, "                const long t0 = lo + atomic_add(&mt__sync[%d + r], chunk);\n", base);
    mt__sb_append(sb, "                if (t0 >= hi) break;\n                const long t1 = min(t0 + chunk, hi);\n");
    mt__sb_printf(sb, "                for (long t = t0; t < t1; t++)\n                    mt__fn%d(", f);
    for (int a = 0; a < l->nargs; a++) {
        const long long off = l->arg_offset ? (long long)l->arg_offset[a] : 0;
        if (off) mt__sb_printf(sb, "(__global void *)(mt__b%d + %lldL), ", l->arg[a], off);
        else mt__sb_printf(sb, "(__global void *)mt__b%d, ", l->arg[a]);
    }
    mt__sb_printf(sb, "t %% %lldL, (t / %lldL) %% %lldL, t / %lldL, mt__scratch);\n", (long long)g[0], (long long)g[0], (long long)g[1],
                  (long long)(g[0] * g[1]));
    mt__sb_append(sb, "                ran += t1 - t0;\n            }\n        }\n");
    mt__sb_append(sb, "        mt__done = MT__CLOCK();\n");
    mt__sb_printf(sb, "        mem_fence(CLK_GLOBAL_MEM_FENCE);\n        if (ran > 0) atomic_add(&mt__sync[%d], (int)ran);\n    }\n", done);
    mt__sb_printf(sb, "    while (*(volatile __global int *)&mt__sync[%d] < %lld) {\n", done, (long long)total);
    mt__sb_append(sb, "#if defined(__clang__) && defined(__x86_64__)\n        __builtin_ia32_pause();\n#endif\n    }\n");
    mt__sb_append(sb, "    mem_fence(CLK_GLOBAL_MEM_FENCE);\n");
    mt__sb_printf(sb, "    mt__go = MT__CLOCK();\n    mt__stamp(mt__clock + (%dL * get_num_groups(0) + get_group_id(0)) * %d, mt__begin, mt__done, mt__go);\n"
                      "    mt__begin = mt__go;\n",
                  l->counters, MT__FUSE_STAMPS);
}

static int same_kernel(const mt__fuse_launch *a, const mt__fuse_launch *b) {
    return strcmp(a->src, b->src) == 0 && (a->kernel ? b->kernel && strcmp(a->kernel, b->kernel) == 0 : !b->kernel) &&
           memcmp(a->block, b->block, sizeof a->block) == 0;
}

mt_status mt__fuse_source(const mt__fuse_launch *l, int n, int nbufs, const char *name, char **out, int64_t *scratch_floats, char *err,
                          size_t errlen) {
    *out = NULL;
    if (!l || n < 1 || nbufs < 1 || !name) return mt__fail(err, errlen, MT_INVALID_ARG, "fuse: bad arguments");
    for (int i = 0; i < n; i++) {
        if (!mt__fuse_can(l[i].src, l[i].kernel, l[i].block))
            return mt__fail(err, errlen, MT_INVALID_ARG, "fuse: launch %d's kernel cannot run fused", i);
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
            if (same_kernel(&l[j], &l[i])) {
                fn[i] = fn[j];
                break;
            }
        kernel_text k;
        find_kernel(l[i].src, l[i].kernel, &k);
        const char *a, *e;
        int64_t floats = local_array(k.body, k.body_end, &a, &e);
        if (floats > lmem) lmem = floats;
        if (fn[i] == i) append_function(&sb, &seen, &l[i], i);
    }
    if (lmem < 1) lmem = 1;
    /* The clock: the time-stamp counter where the compiler can read it (x86-64), else 0. */
    mt__sb_append(&sb, "#if defined(__clang__) && defined(__x86_64__)\n#define MT__CLOCK() ((ulong)__builtin_readcyclecounter())\n#else\n"
                       "#define MT__CLOCK() ((ulong)0)\n#endif\n"
                       "static inline void mt__stamp(__global ulong *c, ulong begin, ulong done, ulong go) { c[0] = begin; c[1] = done; c[2] = go; }\n");
    mt__sb_printf(&sb,
                  "__kernel __attribute__((reqd_work_group_size(1, 1, 1)))\nvoid %s(__global int *mt__sync, __global float *mt__scratch_all, "
                  "__global ulong *mt__clock",
                  name);
    for (int b = 0; b < nbufs; b++) mt__sb_printf(&sb, ", __global float *mt__b%d", b);
    mt__sb_printf(&sb, ") {\n    __global float *mt__scratch = mt__scratch_all + get_group_id(0) * %lldL;\n", (long long)lmem);
    mt__sb_printf(&sb, "    const long mt__ranges = min((long)get_num_groups(0), %dL), mt__own = (long)get_group_id(0) %% mt__ranges;\n",
                  MT__FUSE_RANGES);
    mt__sb_append(&sb, "    ulong mt__begin = MT__CLOCK(), mt__done = 0, mt__go = 0;\n");
    for (int i = 0; i < n; i++) append_launch(&sb, &l[i], fn[i], i);
    /* Every work-group has passed the last wait, so none reads a counter
     * again: the last one out zeroes them for the next pass. */
    mt__sb_printf(&sb, "    if (atomic_add(&mt__sync[%dL], 1) == (int)get_num_groups(0) - 1) {\n",
                  l[0].counters * MT__FUSE_COUNTERS + MT__FUSE_RANGES + 1);
    for (int i = 0; i < n; i++)
        mt__sb_printf(&sb, "        for (int z = 0; z < %d; z++) mt__sync[%dL + z] = 0;\n", MT__FUSE_COUNTERS, l[i].counters * MT__FUSE_COUNTERS);
    mt__sb_append(&sb, "        mem_fence(CLK_GLOBAL_MEM_FENCE);\n    }\n}\n");
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
