/* The two printers: one walk over the IR, with the few places where OpenCL C
 * and CUDA C differ chosen by `lang`.
 *
 * OpenCL keeps vectors as floatN (vloadN/vstoreN for contiguous accesses),
 * which PoCL and GPU OpenCL compilers map to SIMD registers. CUDA threads are
 * scalar, so the CUDA printer writes each vector store as one scalar store
 * per lane; every vector expression can be printed lane by lane (print_lane). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "strbuf.h"
#include "fail.h"

/* Explicit unrolling replicates a body; past this many copies a pragma is used. */
#define MT__MAX_EXPLICIT_UNROLL 64

typedef struct {
    const mt_kernel *k;
    mt_lang lang;
    mt_strbuf sb;
    int indent;
    mt_status st;
    char *err;
    size_t errlen;
    int shuffles; /* an OpenCL shuffle was printed: the source needs MT_SHUFFLE2 */
} printer;

/* The type of integer variables and vector lanes. OpenCL: 64-bit, so that an
 * index sum like (base + c * 196) + (x0 + 3) needs no sign extension per
 * term and LLVM folds its constant into the address: with 32-bit indices
 * kvec's 1x1 reduction loop spent a lea and a movslq per input load, and in
 * ResNet-50 its 1x1 layers ran 1.05-1.18x faster with 64-bit ones (the 3x3
 * and gemm layers 0.97-1.03x; bench/net_ab/results/net_ab_index64.md). CUDA keeps
 * 32 bits, where 64-bit integer arithmetic takes two instructions. */
static const char *int_type(const printer *p) { return p->lang == MT_LANG_OPENCL ? "long" : "int"; }

static void fail(printer *p, mt_status st, const char *msg) {
    if (p->st == MT_OK) {
        p->st = st;
        mt__fail(p->err, p->errlen, st, "print: %s", msg);
    }
}

static void emit_indent(printer *p) {
    for (int i = 0; i < p->indent; i++) mt__sb_append(&p->sb, "    ");
}

static void var_name(printer *p, const mt_var *v) { mt__sb_printf(&p->sb, "%s_%d", v->name, v->id); }

static void buf_name(printer *p, const mt_buffer *b) {
    if (b->scope == MT_SCOPE_GLOBAL) mt__sb_printf(&p->sb, "%s", b->name);
    else mt__sb_printf(&p->sb, "%s_%d", b->name, b->id);
}

static void print_float(printer *p, float f) {
    if (isnan(f)) {
        mt__sb_append(&p->sb, "NAN");
        return;
    }
    if (isinf(f)) {
        mt__sb_append(&p->sb, f > 0 ? "INFINITY" : "(-INFINITY)");
        return;
    }
    char tmp[48];
    snprintf(tmp, sizeof tmp, "%.9g", (double)f);
    int has_point = strpbrk(tmp, ".e") != NULL;
    mt__sb_printf(&p->sb, "%s%s%sf%s", f < 0 ? "(" : "", tmp, has_point ? "" : ".0", f < 0 ? ")" : "");
}

static const char *op_text(mt_binop op) {
    static const char *t[MT_OP_COUNT] = {"+", "-", "*", "/", "%", "min", "max", "<", "<=", ">", ">=", "==", "!=", "&&", "||"};
    return op >= 0 && op < MT_OP_COUNT ? t[op] : "?";
}

static void print_expr(printer *p, const mt_expr *e);
static void print_lane(printer *p, const mt_expr *e, int lane);

/* e whole (lane < 0: a scalar, or an OpenCL vector) or its lane `lane`. */
static void print_part(printer *p, const mt_expr *e, int lane) {
    if (lane < 0) print_expr(p, e);
    else print_lane(p, e, lane);
}

/* open a sep_ab b [sep_bc c] ")", the operands printed as print_part does
 * (c may be NULL). */
static void print_form(printer *p, int lane, const char *open, const mt_expr *a, const char *sep_ab, const mt_expr *b, const char *sep_bc,
                       const mt_expr *c) {
    mt_strbuf *sb = &p->sb;
    mt__sb_append(sb, open);
    print_part(p, a, lane);
    mt__sb_append(sb, sep_ab);
    print_part(p, b, lane);
    if (c) {
        mt__sb_append(sb, sep_bc);
        print_part(p, c, lane);
    }
    mt__sb_append(sb, ")");
}

/* The operations that print alike whole and lane by lane (binary operators,
 * selects, fma), at print_part's `lane`. */
static void print_operation(printer *p, const mt_expr *e, int lane) {
    switch (e->kind) {
    case MT_EXPR_BINARY:
        if (e->op == MT_OP_MIN || e->op == MT_OP_MAX) {
            const char *f = e->type == MT_TYPE_FLOAT ? (e->op == MT_OP_MIN ? "fmin(" : "fmax(") : (e->op == MT_OP_MIN ? "min(" : "max(");
            print_form(p, lane, f, e->a, ", ", e->b, NULL, NULL);
        } else {
            char op[8];
            snprintf(op, sizeof op, " %s ", op_text(e->op));
            print_form(p, lane, "(", e->a, op, e->b, NULL, NULL);
        }
        return;
    case MT_EXPR_SELECT: print_form(p, lane, "(", e->a, " ? ", e->b, " : ", e->c); return;
    case MT_EXPR_FMA: print_form(p, lane, p->lang == MT_LANG_CUDA ? "fmaf(" : "fma(", e->a, ", ", e->b, ", ", e->c); return;
    default: fail(p, MT_INVALID_ARG, "not an operation"); return;
    }
}

/* buf[index], the index printed as print_part does. */
static void print_element(printer *p, const mt_buffer *buf, const mt_expr *index, int lane) {
    buf_name(p, buf);
    mt__sb_append(&p->sb, "[");
    print_part(p, index, lane);
    mt__sb_append(&p->sb, "]");
}

/* `buf + base`: the address of a contiguous vector access at index ramp (stride 1). */
static void print_address(printer *p, const mt_buffer *buf, const mt_expr *ramp) {
    buf_name(p, buf);
    mt__sb_append(&p->sb, " + ");
    print_expr(p, ramp->a);
}

/* Scalar expressions, or whole vectors in OpenCL. */
static void print_expr(printer *p, const mt_expr *e) {
    if (p->st != MT_OK) return;
    if (!e) {
        fail(p, MT_INVALID_ARG, "NULL expression");
        return;
    }
    if (e->lanes > 1 && p->lang == MT_LANG_CUDA) {
        fail(p, MT_INVALID_ARG, "vector expression outside a vector store (CUDA prints vectors lane by lane)");
        return;
    }
    mt_strbuf *sb = &p->sb;
    switch (e->kind) {
    case MT_EXPR_INT:
        if (e->type == MT_TYPE_BOOL) mt__sb_append(sb, e->ival ? "1" : "0");
        else if (e->ival > INT32_MAX || e->ival < INT32_MIN) fail(p, MT_RANGE, "integer constant beyond 32 bits");
        else if (p->lang == MT_LANG_OPENCL) mt__sb_printf(sb, e->ival < 0 ? "(%lldL)" : "%lldL", (long long)e->ival); /* min/max(long, int) is ambiguous */
        else mt__sb_printf(sb, e->ival < 0 ? "(%lld)" : "%lld", (long long)e->ival);
        return;
    case MT_EXPR_FLOAT: print_float(p, e->fval); return;
    case MT_EXPR_VAR: var_name(p, e->var); return;
    case MT_EXPR_BINARY: print_operation(p, e, -1); return;
    case MT_EXPR_SELECT:
        if (e->lanes > 1) break; /* per lane below: both sides of a vector select must not be evaluated */
        print_operation(p, e, -1);
        return;
    case MT_EXPR_LOAD:
        if (e->lanes == 1) {
            print_element(p, e->buf, e->a, -1);
            return;
        }
        if (e->a->kind == MT_EXPR_RAMP && e->a->stride == 1 && e->buf->scope == MT_SCOPE_PRIVATE) {
            /* A plain vector access through an element-aligned vector type:
             * LLVM keeps it in a register. PoCL's vloadN on private memory
             * is two half-width loads, which stops SROA from promoting the
             * array and makes register-tiled kernels ~3x slower. */
            mt__sb_printf(sb, "(*(mt_float%du *)(", e->lanes);
            print_address(p, e->buf, e->a);
            mt__sb_append(sb, "))");
            return;
        }
        if (e->a->kind == MT_EXPR_RAMP && e->a->stride == 1) {
            mt__sb_printf(sb, "vload%d(0, ", e->lanes);
            print_address(p, e->buf, e->a);
            mt__sb_append(sb, ")");
            return;
        }
        if (e->a->kind == MT_EXPR_RAMP && e->a->stride == 2 && e->type == MT_TYPE_FLOAT && e->buf->scope != MT_SCOPE_PRIVATE &&
            (e->lanes == 2 || e->lanes == 4 || e->lanes == 8 || e->lanes == 16)) {
            /* Every other float (stride-2 convolutions): the even lanes of
             * the first n floats and the odd lanes of the n from n-1 on, two
             * vector loads and one shuffle instead of n scalar loads; they
             * read exactly the floats from the first lane's to the last's. */
            mt__sb_printf(sb, "((float%d)(vload%d(0, ", e->lanes, e->lanes);
            print_address(p, e->buf, e->a);
            mt__sb_printf(sb, ").even, vload%d(0, ", e->lanes);
            print_address(p, e->buf, e->a);
            mt__sb_printf(sb, " + %d).odd))", e->lanes - 1);
            return;
        }
        break; /* gather: per lane */
    case MT_EXPR_RAMP:
    case MT_EXPR_BROADCAST:
        if (e->kind == MT_EXPR_BROADCAST) {
            mt__sb_printf(sb, "((%s%d)(", e->type == MT_TYPE_FLOAT ? "float" : int_type(p), e->lanes);
            print_expr(p, e->a);
            mt__sb_append(sb, "))");
            return;
        }
        break;
    case MT_EXPR_FMA: print_operation(p, e, -1); return;
    case MT_EXPR_SHUFFLE:
        p->shuffles = 1;
        mt__sb_append(sb, "MT_SHUFFLE2(");
        print_expr(p, e->a);
        mt__sb_append(sb, ", ");
        print_expr(p, e->b);
        mt__sb_printf(sb, ", %d", e->lanes);
        for (int i = 0; i < e->lanes; i++) mt__sb_printf(sb, ", %d", e->mask[i]);
        mt__sb_append(sb, ")");
        return;
    default: fail(p, MT_INVALID_ARG, "unknown expression kind"); return;
    }
    /* OpenCL vector built lane by lane. */
    if (e->type == MT_TYPE_BOOL) {
        fail(p, MT_UNSUPPORTED, "vector boolean outside a select");
        return;
    }
    mt__sb_printf(sb, "((%s%d)(", e->type == MT_TYPE_FLOAT ? "float" : int_type(p), e->lanes);
    for (int i = 0; i < e->lanes; i++) {
        if (i) mt__sb_append(sb, ", ");
        print_lane(p, e, i);
    }
    mt__sb_append(sb, "))");
}

/* The scalar value of lane `lane` of e. */
static void print_lane(printer *p, const mt_expr *e, int lane) {
    if (p->st != MT_OK) return;
    if (e->lanes == 1) {
        print_expr(p, e);
        return;
    }
    mt_strbuf *sb = &p->sb;
    switch (e->kind) {
    case MT_EXPR_RAMP:
        mt__sb_append(sb, "(");
        print_expr(p, e->a);
        mt__sb_printf(sb, " + %d)", e->stride * lane);
        return;
    case MT_EXPR_BROADCAST: print_expr(p, e->a); return;
    case MT_EXPR_BINARY:
    case MT_EXPR_SELECT:
    case MT_EXPR_FMA: print_operation(p, e, lane); return;
    case MT_EXPR_LOAD: print_element(p, e->buf, e->a, lane); return;
    case MT_EXPR_SHUFFLE: {
        const int m = e->mask[lane];
        print_lane(p, m < e->lanes ? e->a : e->b, m % e->lanes);
        return;
    }
    default: fail(p, MT_INVALID_ARG, "vector expression of a scalar-only kind"); return;
    }
}

static void print_stmt(printer *p, const mt_stmt *s);

static void print_block(printer *p, const mt_stmt *s) {
    mt__sb_append(&p->sb, "{\n");
    p->indent++;
    print_stmt(p, s);
    p->indent--;
    emit_indent(p);
    mt__sb_append(&p->sb, "}\n");
}

/* One line `buf[index] = value;` of store s, whole or at lane `lane` as print_part prints. */
static void print_assign(printer *p, const mt_stmt *s, int lane) {
    emit_indent(p);
    print_element(p, s->buf, s->index, lane);
    mt__sb_append(&p->sb, " = ");
    print_part(p, s->value, lane);
    mt__sb_append(&p->sb, ";\n");
}

static void print_store(printer *p, const mt_stmt *s) {
    mt_strbuf *sb = &p->sb;
    int lanes = s->value->lanes;
    if (lanes == 1) {
        print_assign(p, s, -1);
        return;
    }
    if (p->lang == MT_LANG_OPENCL && s->index->kind == MT_EXPR_RAMP && s->index->stride == 1 && s->buf->scope == MT_SCOPE_PRIVATE) {
        emit_indent(p);
        mt__sb_printf(sb, "*(mt_float%du *)(", lanes);
        print_address(p, s->buf, s->index);
        mt__sb_append(sb, ") = ");
        print_expr(p, s->value);
        mt__sb_append(sb, ";\n");
        return;
    }
    if (p->lang == MT_LANG_OPENCL && s->index->kind == MT_EXPR_RAMP && s->index->stride == 1 &&
        (lanes == 2 || lanes == 4 || lanes == 8 || lanes == 16)) {
        /* Through an element-aligned vector pointer, one store instruction:
         * PoCL's vstore16 on global memory came out as three (a 4-, a 4- and
         * an 8-float piece), and gemm's 1x1 kernel at 56x56 ran 3% slower. */
        emit_indent(p);
        mt__sb_printf(sb, "*(%s mt_float%du *)(", s->buf->scope == MT_SCOPE_LOCAL ? "__local" : "__global", lanes);
        print_address(p, s->buf, s->index);
        mt__sb_append(sb, ") = ");
        print_expr(p, s->value);
        mt__sb_append(sb, ";\n");
        return;
    }
    if (p->lang == MT_LANG_OPENCL && s->index->kind == MT_EXPR_RAMP && s->index->stride == 1) {
        emit_indent(p);
        mt__sb_printf(sb, "vstore%d(", lanes);
        print_expr(p, s->value);
        mt__sb_append(sb, ", 0, ");
        print_address(p, s->buf, s->index);
        mt__sb_append(sb, ");\n");
        return;
    }
    if (p->lang == MT_LANG_OPENCL) {
        /* Scatter: evaluate the vector once, then store its lanes. */
        static const char hex[] = "0123456789abcdef";
        emit_indent(p);
        mt__sb_printf(sb, "{ const float%d mt_tmp = ", lanes);
        print_expr(p, s->value);
        mt__sb_append(sb, ";");
        for (int i = 0; i < lanes; i++) {
            mt__sb_append(sb, " ");
            print_element(p, s->buf, s->index, i);
            mt__sb_printf(sb, " = mt_tmp.s%c;", hex[i]);
        }
        mt__sb_append(sb, " }\n");
        return;
    }
    /* CUDA: one scalar store per lane. Lanes read what they write only at their
     * own index, so earlier lanes cannot change what later lanes read. */
    for (int i = 0; i < lanes; i++) print_assign(p, s, i);
}

static void print_for(printer *p, const mt_stmt *s) {
    mt_strbuf *sb = &p->sb;
    if (s->loop == MT_LOOP_BLOCK || s->loop == MT_LOOP_THREAD) {
        static const char *cl[2] = {"get_group_id", "get_local_id"};
        static const char *cu[2][3] = {{"blockIdx.x", "blockIdx.y", "blockIdx.z"}, {"threadIdx.x", "threadIdx.y", "threadIdx.z"}};
        int t = s->loop == MT_LOOP_THREAD;
        emit_indent(p);
        mt__sb_printf(sb, "const %s ", int_type(p));
        var_name(p, s->var);
        if (p->lang == MT_LANG_OPENCL) mt__sb_printf(sb, " = (long)%s(%d);\n", cl[t], s->axis);
        else mt__sb_printf(sb, " = (int)%s;\n", cu[t][s->axis]);
        print_stmt(p, s->body);
        return;
    }
    int unrolled = s->loop == MT_LOOP_UNROLLED || s->loop == MT_LOOP_VECTORIZED || s->loop == MT_LOOP_VTHREAD;
    if (unrolled && p->k->unroll_explicit && s->extent <= MT__MAX_EXPLICIT_UNROLL) {
        for (int64_t i = 0; i < s->extent; i++) {
            emit_indent(p);
            mt__sb_append(sb, "{\n");
            p->indent++;
            emit_indent(p);
            mt__sb_printf(sb, "const %s ", int_type(p));
            var_name(p, s->var);
            mt__sb_printf(sb, " = %lld;\n", (long long)i);
            print_stmt(p, s->body);
            p->indent--;
            emit_indent(p);
            mt__sb_append(sb, "}\n");
        }
        return;
    }
    if (unrolled) {
        emit_indent(p);
        mt__sb_append(sb, "#pragma unroll\n");
    }
    if (s->extent > INT32_MAX) {
        fail(p, MT_RANGE, "loop extent beyond 32 bits");
        return;
    }
    emit_indent(p);
    mt__sb_printf(sb, "for (%s ", int_type(p));
    var_name(p, s->var);
    mt__sb_append(sb, " = 0; ");
    var_name(p, s->var);
    mt__sb_printf(sb, " < %lld; ++", (long long)s->extent);
    var_name(p, s->var);
    mt__sb_append(sb, ") ");
    print_block(p, s->body);
}

static void print_stmt(printer *p, const mt_stmt *s) {
    if (p->st != MT_OK) return;
    if (!s) {
        fail(p, MT_INVALID_ARG, "NULL statement");
        return;
    }
    mt_strbuf *sb = &p->sb;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) print_stmt(p, s->items[i]);
        return;
    case MT_STMT_FOR: print_for(p, s); return;
    case MT_STMT_ALLOC:
        if (s->buf->scope == MT_SCOPE_PRIVATE) {
            emit_indent(p);
            mt__sb_append(sb, "float ");
            buf_name(p, s->buf);
            mt__sb_printf(sb, "[%lld];\n", (long long)s->buf->size);
        } /* LOCAL buffers are declared at kernel scope (hoist_locals) */
        print_stmt(p, s->body);
        return;
    case MT_STMT_STORE: print_store(p, s); return;
    case MT_STMT_BARRIER:
        emit_indent(p);
        mt__sb_append(sb, p->lang == MT_LANG_OPENCL ? "barrier(CLK_LOCAL_MEM_FENCE);\n" : "__syncthreads();\n");
        return;
    case MT_STMT_PREFETCH:
        /* OpenCL's prefetch() is a no-op on PoCL's CPU device; clang's
         * builtin becomes prefetcht0 (locality 3), or prefetcht1 with
         * locality 2 (outer). Other compilers and GPUs get nothing. */
        if (p->lang != MT_LANG_OPENCL) return;
        mt__sb_append(sb, "#if defined(__clang__) && defined(__x86_64__)\n");
        emit_indent(p);
        mt__sb_append(sb, "__builtin_prefetch(");
        buf_name(p, s->buf);
        mt__sb_append(sb, " + (");
        print_expr(p, s->index);
        mt__sb_append(sb, s->outer ? "), 0, 2);\n#endif\n" : "));\n#endif\n");
        return;
    case MT_STMT_IF:
        emit_indent(p);
        mt__sb_append(sb, "if (");
        print_expr(p, s->cond);
        mt__sb_append(sb, ") ");
        print_block(p, s->body);
        if (s->else_body) {
            emit_indent(p);
            mt__sb_append(sb, "else ");
            print_block(p, s->else_body);
        }
        return;
    case MT_STMT_LET:
        emit_indent(p);
        mt__sb_printf(sb, "const %s ", s->var->type == MT_TYPE_FLOAT ? "float" : int_type(p));
        var_name(p, s->var);
        mt__sb_append(sb, " = ");
        print_expr(p, s->value);
        mt__sb_append(sb, ";\n");
        print_stmt(p, s->body);
        return;
    default: fail(p, MT_INVALID_ARG, "unknown statement kind"); return;
    }
}

/* OpenCL 1.2 wants __local variables at kernel scope. */
static void hoist_locals(printer *p, const mt_stmt *s) {
    if (!s) return;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) hoist_locals(p, s->items[i]);
        return;
    case MT_STMT_ALLOC:
        if (s->buf->scope == MT_SCOPE_LOCAL) {
            emit_indent(p);
            mt__sb_append(&p->sb, p->lang == MT_LANG_OPENCL ? "__local float " : "__shared__ float ");
            buf_name(p, s->buf);
            mt__sb_printf(&p->sb, "[%lld];\n", (long long)s->buf->size);
        }
        hoist_locals(p, s->body);
        return;
    case MT_STMT_IF:
        hoist_locals(p, s->body);
        hoist_locals(p, s->else_body);
        return;
    case MT_STMT_FOR:
    case MT_STMT_LET: hoist_locals(p, s->body); return;
    default: return;
    }
}

/* OpenCL shuffles with constant masks, inserted at `at` in sb when the
 * kernel has any. Where the compiler is clang (PoCL, and the GPU drivers
 * built on it) __builtin_shufflevector is one LLVM shufflevector. shuffle2
 * takes its mask as a vector value: PoCL's library builds the result lane by
 * lane, and LLVM turned dwrow's stride-2 windows into pairs of scalar loads
 * and inserts (1134 vmovsd, 729 vinsertps and 624 vinsertf128 against 756
 * FMAs in one kernel); with the builtin, MobileNetV2's 96-channel stride-2
 * layer (vec=8, reg_y=4, chan=1) ran 0.46 against 0.83 ms (median of 80
 * runs each, both printed sources timed in turns by one OpenCL host
 * program, 2026-12-03). A
 * definition placed before the kernel wins (the tests run both forms). */
static mt_status insert_shuffle_macro(mt_strbuf *sb, size_t at, char *err, size_t errlen) {
    static const char macro[] = "#ifndef MT_SHUFFLE2\n"
                                "#if defined(__has_builtin)\n"
                                "#if __has_builtin(__builtin_shufflevector)\n"
                                "#define MT_SHUFFLE2(a, b, n, ...) __builtin_shufflevector(a, b, __VA_ARGS__)\n"
                                "#endif\n"
                                "#endif\n"
                                "#endif\n"
                                "#ifndef MT_SHUFFLE2\n"
                                "#define MT_SHUFFLE2(a, b, n, ...) shuffle2(a, b, (uint##n)(__VA_ARGS__))\n"
                                "#endif\n";
    if (sb->failed || at > sb->len) return mt__fail(err, errlen, MT_NOMEM, "print: out of memory");
    mt_strbuf whole = {0};
    char *rest = sb->data + at;
    char saved = *rest;
    *rest = '\0';
    mt__sb_append(&whole, sb->data);
    *rest = saved;
    mt__sb_append(&whole, macro);
    mt__sb_append(&whole, rest);
    if (whole.failed) {
        mt__sb_free(&whole);
        return mt__fail(err, errlen, MT_NOMEM, "print: out of memory");
    }
    mt__sb_free(sb);
    *sb = whole;
    return MT_OK;
}

mt_status mt_kernel_print(const mt_kernel *k, mt_lang lang, char **out, char *err, size_t errlen) {
    if (!k || !out) return mt__fail(err, errlen, MT_INVALID_ARG, "print: NULL argument");
    if (lang != MT_LANG_OPENCL && lang != MT_LANG_CUDA) return mt__fail(err, errlen, MT_INVALID_ARG, "print: unknown language");
    mt_kernel_resources res;
    mt_status st = mt_kernel_analyze(k, &res, err, errlen);
    if (st != MT_OK) return st;
    printer p = {.k = k, .lang = lang, .st = MT_OK, .err = err, .errlen = errlen};
    mt_strbuf *sb = &p.sb;
    size_t shuffle_at = 0;
    mt__sb_append(sb, "/* generated by mtgpu */\n");
    if (lang == MT_LANG_OPENCL) {
        /* Vector types with the alignment of one float, for vector accesses to
         * private arrays at any element offset (see print_expr). */
        mt__sb_append(sb, "typedef float2 __attribute__((aligned(4))) mt_float2u;\n"
                          "typedef float4 __attribute__((aligned(4))) mt_float4u;\n"
                          "typedef float8 __attribute__((aligned(4))) mt_float8u;\n"
                          "typedef float16 __attribute__((aligned(4))) mt_float16u;\n");
        shuffle_at = sb->len;
        mt__sb_printf(sb, "__kernel __attribute__((reqd_work_group_size(%lld, %lld, %lld)))\nvoid %s(", (long long)res.block[0],
                      (long long)res.block[1], (long long)res.block[2], k->name);
    } else {
        mt__sb_printf(sb, "extern \"C\" __global__ void __launch_bounds__(%lld)\n%s(", (long long)res.threads_per_block, k->name);
    }
    for (int i = 0; i < k->nparams; i++) {
        const mt_buffer *b = k->params[i];
        if (lang == MT_LANG_OPENCL) mt__sb_printf(sb, "%s__global %sfloat *restrict %s", i ? ", " : "", b->readonly ? "const " : "", b->name);
        else mt__sb_printf(sb, "%s%sfloat *__restrict__ %s", i ? ", " : "", b->readonly ? "const " : "", b->name);
    }
    mt__sb_append(sb, ") {\n");
    p.indent = 1;
    hoist_locals(&p, k->body);
    print_stmt(&p, k->body);
    mt__sb_append(sb, "}\n");
    if (p.st == MT_OK && p.shuffles) p.st = insert_shuffle_macro(sb, shuffle_at, err, errlen);
    if (p.st == MT_OK && sb->failed) p.st = mt__fail(err, errlen, MT_NOMEM, "print: out of memory");
    if (p.st != MT_OK) {
        mt__sb_free(sb);
        return p.st;
    }
    *out = sb->data;
    return MT_OK;
}
