/* IR construction (with light constant folding), structural analysis, the
 * launch-limit check and the auto-unroll pass. */
#include "ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "fail.h"

mt_kernel *mt_kernel_new(const char *name) {
    mt_kernel *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->arena = mt__arena_new(0);
    if (!k->arena) {
        free(k);
        return NULL;
    }
    snprintf(k->name, sizeof k->name, "%s", name ? name : "mt_kernel");
    return k;
}

void mt_kernel_free(mt_kernel *k) {
    if (!k) return;
    mt__arena_free(k->arena);
    free(k);
}

static void *alloc(mt_kernel *k, size_t size) { return k ? mt__arena_alloc(k->arena, size) : NULL; }

/* ---- names ---- */

mt_var *mt_ir_var(mt_kernel *k, const char *name, mt_type type) {
    mt_var *v = alloc(k, sizeof *v);
    if (!v) return NULL;
    v->id = k->next_id++;
    v->type = type;
    snprintf(v->name, sizeof v->name, "%s", name ? name : "v");
    return v;
}

static mt_buffer *new_buffer(mt_kernel *k, const char *name, mt_scope scope, int64_t size) {
    mt_buffer *b = alloc(k, sizeof *b);
    if (!b) return NULL;
    b->id = k->next_id++;
    b->scope = scope;
    b->size = size;
    b->param_index = -1;
    snprintf(b->name, sizeof b->name, "%s", name ? name : "buf");
    return b;
}

mt_buffer *mt_ir_param(mt_kernel *k, const char *name, int64_t size, int readonly) {
    if (!k || k->nparams >= MT_KERNEL_MAX_PARAMS) return NULL;
    mt_buffer *b = new_buffer(k, name, MT_SCOPE_GLOBAL, size);
    if (!b) return NULL;
    b->readonly = readonly;
    b->param_index = k->nparams;
    k->params[k->nparams++] = b;
    return b;
}

mt_buffer *mt_ir_buffer(mt_kernel *k, const char *name, mt_scope scope, int64_t size) {
    if (scope == MT_SCOPE_GLOBAL) return NULL;
    return new_buffer(k, name, scope, size);
}

/* ---- expressions ---- */

static mt_expr *new_expr(mt_kernel *k, mt_expr_kind kind, mt_type type, int lanes) {
    mt_expr *e = alloc(k, sizeof *e);
    if (!e) return NULL;
    e->kind = kind;
    e->type = type;
    e->lanes = lanes;
    return e;
}

mt_expr *mt_ir_int(mt_kernel *k, int64_t v) {
    mt_expr *e = new_expr(k, MT_EXPR_INT, MT_TYPE_INT, 1);
    if (e) e->ival = v;
    return e;
}

mt_expr *mt_ir_float(mt_kernel *k, float v) {
    mt_expr *e = new_expr(k, MT_EXPR_FLOAT, MT_TYPE_FLOAT, 1);
    if (e) e->fval = v;
    return e;
}

static mt_expr *bool_const(mt_kernel *k, int v) {
    mt_expr *e = new_expr(k, MT_EXPR_INT, MT_TYPE_BOOL, 1);
    if (e) e->ival = v != 0;
    return e;
}

mt_expr *mt_ir_v(mt_kernel *k, mt_var *v) {
    if (!v) return NULL;
    mt_expr *e = new_expr(k, MT_EXPR_VAR, v->type, 1);
    if (e) e->var = v;
    return e;
}

mt_expr *mt_ir_broadcast(mt_kernel *k, mt_expr *scalar, int lanes) {
    if (!scalar || scalar->lanes != 1 || lanes < 1) return NULL;
    if (lanes == 1) return scalar;
    mt_expr *e = new_expr(k, MT_EXPR_BROADCAST, scalar->type, lanes);
    if (e) e->a = scalar;
    return e;
}

mt_expr *mt_ir_ramp(mt_kernel *k, mt_expr *base, int stride, int lanes) {
    if (!base || base->type != MT_TYPE_INT || base->lanes != 1 || lanes < 1) return NULL;
    if (lanes == 1) return base;
    mt_expr *e = new_expr(k, MT_EXPR_RAMP, MT_TYPE_INT, lanes);
    if (!e) return NULL;
    e->a = base;
    e->stride = stride;
    return e;
}

static int is_int_const(const mt_expr *e, int64_t v) { return e && e->kind == MT_EXPR_INT && e->type == MT_TYPE_INT && e->ival == v; }
static int is_const(const mt_expr *e) { return e && e->kind == MT_EXPR_INT && e->type == MT_TYPE_INT; }

static int is_compare(mt_binop op) { return op >= MT_OP_LT && op <= MT_OP_NE; }
static int is_logic(mt_binop op) { return op == MT_OP_AND || op == MT_OP_OR; }

int mt__ir_fold_int(mt_binop op, int64_t a, int64_t b, int64_t *v) {
    switch (op) {
    case MT_OP_ADD: *v = (int64_t)((uint64_t)a + (uint64_t)b); return 1;
    case MT_OP_SUB: *v = (int64_t)((uint64_t)a - (uint64_t)b); return 1;
    case MT_OP_MUL: *v = (int64_t)((uint64_t)a * (uint64_t)b); return 1;
    case MT_OP_DIV:
    case MT_OP_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1)) return 0;
        *v = op == MT_OP_DIV ? a / b : a % b;
        return 1;
    case MT_OP_MIN: *v = a < b ? a : b; return 1;
    case MT_OP_MAX: *v = a > b ? a : b; return 1;
    case MT_OP_LT: *v = a < b; return 1;
    case MT_OP_LE: *v = a <= b; return 1;
    case MT_OP_GT: *v = a > b; return 1;
    case MT_OP_GE: *v = a >= b; return 1;
    case MT_OP_EQ: *v = a == b; return 1;
    case MT_OP_NE: *v = a != b; return 1;
    case MT_OP_AND: *v = a && b; return 1;
    case MT_OP_OR: *v = a || b; return 1;
    default: return 0;
    }
}

mt_expr *mt_ir_bin(mt_kernel *k, mt_binop op, mt_expr *a, mt_expr *b) {
    if (!a || !b || op < 0 || op >= MT_OP_COUNT) return NULL;
    /* A float meeting an integer constant: make the constant a float. */
    if (a->type == MT_TYPE_FLOAT && b->kind == MT_EXPR_INT && b->type == MT_TYPE_INT) b = mt_ir_float(k, (float)b->ival);
    if (b && b->type == MT_TYPE_FLOAT && a->kind == MT_EXPR_INT && a->type == MT_TYPE_INT) a = mt_ir_float(k, (float)a->ival);
    if (!a || !b) return NULL;
    int ints = a->type != MT_TYPE_FLOAT && b->type != MT_TYPE_FLOAT;
    if (a->lanes == 1 && b->lanes == 1 && a->kind == MT_EXPR_INT && b->kind == MT_EXPR_INT) {
        int64_t v;
        if (mt__ir_fold_int(op, a->ival, b->ival, &v)) return is_compare(op) || is_logic(op) ? bool_const(k, (int)v) : mt_ir_int(k, v);
    }
    if (ints && !is_compare(op) && !is_logic(op)) {
        if (op == MT_OP_ADD && is_int_const(a, 0)) return b;
        if ((op == MT_OP_ADD || op == MT_OP_SUB) && is_int_const(b, 0)) return a;
        if (op == MT_OP_MUL && is_int_const(a, 1)) return b;
        if ((op == MT_OP_MUL || op == MT_OP_DIV) && is_int_const(b, 1)) return a;
        if (op == MT_OP_MUL && (is_int_const(a, 0) || is_int_const(b, 0)) && a->lanes == 1 && b->lanes == 1) return mt_ir_int(k, 0);
        if (op == MT_OP_MOD && is_int_const(b, 1) && a->lanes == 1) return mt_ir_int(k, 0);
        /* Keep ramps as ramps so the printer can see contiguous vector accesses. */
        if (a->kind == MT_EXPR_RAMP && b->lanes == 1 && (op == MT_OP_ADD || op == MT_OP_SUB))
            return mt_ir_ramp(k, mt_ir_bin(k, op, a->a, b), a->stride, a->lanes);
        if (b->kind == MT_EXPR_RAMP && a->lanes == 1 && op == MT_OP_ADD) return mt_ir_ramp(k, mt_ir_bin(k, op, a, b->a), b->stride, b->lanes);
        if (a->kind == MT_EXPR_RAMP && is_const(b) && op == MT_OP_MUL)
            return mt_ir_ramp(k, mt_ir_bin(k, op, a->a, b), (int)(a->stride * b->ival), a->lanes);
        if (op == MT_OP_ADD && a->kind == MT_EXPR_RAMP && b->kind == MT_EXPR_RAMP && a->lanes == b->lanes)
            return mt_ir_ramp(k, mt_ir_add(k, a->a, b->a), a->stride + b->stride, a->lanes);
    }
    if (is_logic(op)) {
        if (a->kind == MT_EXPR_INT && a->lanes == 1) return op == MT_OP_AND ? (a->ival ? b : a) : (a->ival ? a : b);
        if (b->kind == MT_EXPR_INT && b->lanes == 1) return op == MT_OP_AND ? (b->ival ? a : b) : (b->ival ? b : a);
    }
    if (a->lanes != b->lanes) {
        if (a->lanes == 1) a = mt_ir_broadcast(k, a, b->lanes);
        else if (b->lanes == 1) b = mt_ir_broadcast(k, b, a->lanes);
        else return NULL;
        if (!a || !b) return NULL;
    }
    mt_type type = is_compare(op) || is_logic(op) ? MT_TYPE_BOOL : (ints ? MT_TYPE_INT : MT_TYPE_FLOAT);
    mt_expr *e = new_expr(k, MT_EXPR_BINARY, type, a->lanes);
    if (!e) return NULL;
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

mt_expr *mt_ir_add(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_ADD, a, b); }
mt_expr *mt_ir_sub(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_SUB, a, b); }
mt_expr *mt_ir_mul(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_MUL, a, b); }
mt_expr *mt_ir_div(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_DIV, a, b); }
mt_expr *mt_ir_mod(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_MOD, a, b); }
mt_expr *mt_ir_min(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_MIN, a, b); }
mt_expr *mt_ir_lt(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_LT, a, b); }
mt_expr *mt_ir_ge(mt_kernel *k, mt_expr *a, mt_expr *b) { return mt_ir_bin(k, MT_OP_GE, a, b); }

mt_expr *mt_ir_and(mt_kernel *k, mt_expr *a, mt_expr *b) {
    if (!a) return b;
    if (!b) return a;
    return mt_ir_bin(k, MT_OP_AND, a, b);
}

mt_expr *mt_ir_select(mt_kernel *k, mt_expr *cond, mt_expr *then_v, mt_expr *else_v) {
    if (!cond || !then_v || !else_v) return NULL;
    if (cond->kind == MT_EXPR_INT && cond->lanes == 1) return cond->ival ? then_v : else_v;
    if (then_v->type == MT_TYPE_FLOAT && else_v->kind == MT_EXPR_INT) else_v = mt_ir_float(k, (float)else_v->ival);
    if (else_v && else_v->type == MT_TYPE_FLOAT && then_v->kind == MT_EXPR_INT) then_v = mt_ir_float(k, (float)then_v->ival);
    if (!then_v || !else_v) return NULL;
    int lanes = then_v->lanes > else_v->lanes ? then_v->lanes : else_v->lanes;
    if (cond->lanes > lanes) lanes = cond->lanes;
    if (then_v->lanes != lanes) then_v = mt_ir_broadcast(k, then_v, lanes);
    if (else_v && else_v->lanes != lanes) else_v = mt_ir_broadcast(k, else_v, lanes);
    if (cond->lanes != lanes) cond = mt_ir_broadcast(k, cond, lanes);
    if (!cond || !then_v || !else_v) return NULL;
    mt_expr *e = new_expr(k, MT_EXPR_SELECT, then_v->type, lanes);
    if (!e) return NULL;
    e->a = cond;
    e->b = then_v;
    e->c = else_v;
    return e;
}

mt_expr *mt_ir_load(mt_kernel *k, mt_buffer *buf, mt_expr *index) {
    if (!buf || !index || index->type != MT_TYPE_INT) return NULL;
    mt_expr *e = new_expr(k, MT_EXPR_LOAD, MT_TYPE_FLOAT, index->lanes);
    if (!e) return NULL;
    e->buf = buf;
    e->a = index;
    return e;
}

mt_expr *mt_ir_load_vec(mt_kernel *k, mt_buffer *buf, mt_expr *base, int lanes) {
    return mt_ir_load(k, buf, mt_ir_ramp(k, base, 1, lanes));
}

mt_expr *mt_ir_shuffle(mt_kernel *k, mt_expr *a, mt_expr *b, const int *mask) {
    if (!a || !b || !mask || a->type != MT_TYPE_FLOAT || b->type != MT_TYPE_FLOAT || a->lanes != b->lanes) return NULL;
    const int lanes = a->lanes;
    if (lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16) return NULL;
    for (int i = 0; i < lanes; i++)
        if (mask[i] < 0 || mask[i] >= 2 * lanes) return NULL;
    mt_expr *e = new_expr(k, MT_EXPR_SHUFFLE, MT_TYPE_FLOAT, lanes);
    if (!e) return NULL;
    e->a = a;
    e->b = b;
    for (int i = 0; i < lanes; i++) e->mask[i] = (signed char)mask[i];
    return e;
}

mt_expr *mt_ir_fma(mt_kernel *k, mt_expr *a, mt_expr *b, mt_expr *c) {
    if (!a || !b || !c) return NULL;
    int lanes = a->lanes;
    if (b->lanes > lanes) lanes = b->lanes;
    if (c->lanes > lanes) lanes = c->lanes;
    if (a->lanes != lanes) a = mt_ir_broadcast(k, a, lanes);
    if (b && b->lanes != lanes) b = mt_ir_broadcast(k, b, lanes);
    if (c && c->lanes != lanes) c = mt_ir_broadcast(k, c, lanes);
    if (!a || !b || !c) return NULL;
    if (a->type != MT_TYPE_FLOAT || b->type != MT_TYPE_FLOAT || c->type != MT_TYPE_FLOAT) return NULL;
    mt_expr *e = new_expr(k, MT_EXPR_FMA, MT_TYPE_FLOAT, lanes);
    if (!e) return NULL;
    e->a = a;
    e->b = b;
    e->c = c;
    return e;
}

/* ---- statements ---- */

static mt_stmt *new_stmt(mt_kernel *k, mt_stmt_kind kind) {
    mt_stmt *s = alloc(k, sizeof *s);
    if (s) s->kind = kind;
    return s;
}

mt_stmt *mt_ir_seq(mt_kernel *k, mt_stmt **items, int n) {
    if (n < 0 || (n > 0 && !items)) return NULL;
    for (int i = 0; i < n; i++)
        if (!items[i]) return NULL;
    if (n == 1) return items[0];
    mt_stmt *s = new_stmt(k, MT_STMT_SEQ);
    if (!s) return NULL;
    s->items = alloc(k, sizeof(mt_stmt *) * (size_t)(n ? n : 1));
    if (!s->items) return NULL;
    if (n) memcpy(s->items, items, sizeof(mt_stmt *) * (size_t)n);
    s->nitems = n;
    return s;
}

mt_stmt *mt_ir_seq2(mt_kernel *k, mt_stmt *a, mt_stmt *b) {
    mt_stmt *items[2] = {a, b};
    return mt_ir_seq(k, items, 2);
}

mt_stmt *mt_ir_for(mt_kernel *k, mt_var *var, int64_t extent, mt_loop_kind kind, int axis, mt_stmt *body) {
    if (!var || !body || extent < 1 || kind < 0 || kind >= MT_LOOP_KIND_COUNT || axis < 0 || axis > 2) return NULL;
    mt_stmt *s = new_stmt(k, MT_STMT_FOR);
    if (!s) return NULL;
    s->var = var;
    s->extent = extent;
    s->loop = kind;
    s->axis = axis;
    s->body = body;
    return s;
}

mt_stmt *mt_ir_alloc(mt_kernel *k, mt_buffer *buf, mt_stmt *body) {
    if (!buf || !body || buf->scope == MT_SCOPE_GLOBAL) return NULL;
    mt_stmt *s = new_stmt(k, MT_STMT_ALLOC);
    if (!s) return NULL;
    s->buf = buf;
    s->body = body;
    return s;
}

mt_stmt *mt_ir_store(mt_kernel *k, mt_buffer *buf, mt_expr *index, mt_expr *value) {
    if (!buf || !index || !value || index->type != MT_TYPE_INT || value->type != MT_TYPE_FLOAT) return NULL;
    if (value->lanes != index->lanes) {
        if (value->lanes != 1) return NULL;
        value = mt_ir_broadcast(k, value, index->lanes);
        if (!value) return NULL;
    }
    mt_stmt *s = new_stmt(k, MT_STMT_STORE);
    if (!s) return NULL;
    s->buf = buf;
    s->index = index;
    s->value = value;
    return s;
}

mt_stmt *mt_ir_store_vec(mt_kernel *k, mt_buffer *buf, mt_expr *base, mt_expr *value) {
    if (!value) return NULL;
    return mt_ir_store(k, buf, mt_ir_ramp(k, base, 1, value->lanes), value);
}

mt_stmt *mt_ir_barrier(mt_kernel *k) { return new_stmt(k, MT_STMT_BARRIER); }

mt_stmt *mt_ir_if(mt_kernel *k, mt_expr *cond, mt_stmt *then_s, mt_stmt *else_s) {
    if (!then_s) return NULL;
    if (!cond) return then_s;
    if (cond->lanes != 1) return NULL;
    if (cond->kind == MT_EXPR_INT) return cond->ival ? then_s : else_s ? else_s : mt_ir_seq(k, NULL, 0);
    mt_stmt *s = new_stmt(k, MT_STMT_IF);
    if (!s) return NULL;
    s->cond = cond;
    s->body = then_s;
    s->else_body = else_s;
    return s;
}

mt_stmt *mt_ir_let(mt_kernel *k, mt_var *var, mt_expr *value, mt_stmt *body) {
    if (!var || !value || !body || value->lanes != 1 || (var->type == MT_TYPE_FLOAT) != (value->type == MT_TYPE_FLOAT)) return NULL;
    mt_stmt *s = new_stmt(k, MT_STMT_LET);
    if (!s) return NULL;
    s->var = var;
    s->value = value;
    s->body = body;
    return s;
}

mt_stmt *mt_ir_prefetch(mt_kernel *k, mt_buffer *buf, mt_expr *index) {
    if (!buf || !index || index->lanes != 1 || index->type != MT_TYPE_INT) return NULL;
    mt_stmt *s = new_stmt(k, MT_STMT_PREFETCH);
    if (!s) return NULL;
    s->buf = buf;
    s->index = index;
    return s;
}

mt_stmt *mt_ir_prefetch_outer(mt_kernel *k, mt_buffer *buf, mt_expr *index) {
    mt_stmt *s = mt_ir_prefetch(k, buf, index);
    if (s) s->outer = 1;
    return s;
}

void mt_stmt_list_push(mt_kernel *k, mt_stmt_list *l, mt_stmt *s) {
    if (l->failed) return;
    if (!s) {
        l->failed = 1;
        return;
    }
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        mt_stmt **items = alloc(k, sizeof(mt_stmt *) * (size_t)cap);
        if (!items) {
            l->failed = 1;
            return;
        }
        if (l->n) memcpy(items, l->items, sizeof(mt_stmt *) * (size_t)l->n);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = s;
}

mt_stmt *mt_stmt_list_seq(mt_kernel *k, mt_stmt_list *l) {
    if (l->failed) return NULL;
    return mt_ir_seq(k, l->items, l->n);
}

/* ---- analysis ---- */

typedef struct {
    const mt_kernel *k;
    mt_kernel_resources *res;
    const mt_buffer *scope[64]; /* buffers allocated on the current path */
    int nscope;
    int seen_block[3], seen_thread[3];
    char *err;
    size_t errlen;
} analyzer;

static mt_status check_expr(analyzer *an, const mt_expr *e);

static int buffer_visible(const analyzer *an, const mt_buffer *b) {
    if (b->scope == MT_SCOPE_GLOBAL) return b->param_index >= 0 && b->param_index < an->k->nparams && an->k->params[b->param_index] == b;
    for (int i = 0; i < an->nscope; i++)
        if (an->scope[i] == b) return 1;
    return 0;
}

static mt_status check_expr(analyzer *an, const mt_expr *e) {
    if (!e) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: NULL expression");
    if (e->lanes < 1 || e->lanes > 16) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: expression with %d lanes", e->lanes);
    mt_status st = MT_OK;
    switch (e->kind) {
    case MT_EXPR_INT:
    case MT_EXPR_FLOAT:
    case MT_EXPR_VAR: return MT_OK;
    case MT_EXPR_LOAD:
        if (!buffer_visible(an, e->buf))
            return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: load from buffer '%s' outside its scope", e->buf->name);
        return check_expr(an, e->a);
    case MT_EXPR_BROADCAST:
    case MT_EXPR_RAMP: return check_expr(an, e->a);
    case MT_EXPR_BINARY:
        if ((st = check_expr(an, e->a)) != MT_OK) return st;
        if (e->a->lanes != e->b->lanes) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: binary operands disagree in lanes");
        return check_expr(an, e->b);
    case MT_EXPR_SELECT:
    case MT_EXPR_FMA:
        if ((st = check_expr(an, e->a)) != MT_OK || (st = check_expr(an, e->b)) != MT_OK) return st;
        return check_expr(an, e->c);
    case MT_EXPR_SHUFFLE:
        if ((st = check_expr(an, e->a)) != MT_OK) return st;
        return check_expr(an, e->b);
    default: return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: unknown expression kind %d", (int)e->kind);
    }
}

/* Returns the private floats live at once under s via *priv. `launch` is
 * non-zero while only launch loops (and LETs) have been seen above s. */
static mt_status walk(analyzer *an, const mt_stmt *s, int launch, int64_t *priv) {
    *priv = 0;
    if (!s) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: NULL statement");
    mt_status st = MT_OK;
    int64_t p = 0;
    switch (s->kind) {
    case MT_STMT_SEQ:
        for (int i = 0; i < s->nitems; i++) {
            if ((st = walk(an, s->items[i], 0, &p)) != MT_OK) return st;
            if (p > *priv) *priv = p;
        }
        return MT_OK;
    case MT_STMT_FOR: {
        int is_launch = s->loop == MT_LOOP_BLOCK || s->loop == MT_LOOP_THREAD;
        if (is_launch) {
            if (!launch)
                return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: %s loop '%s' below other statements", mt_loop_kind_name(s->loop),
                                s->var->name);
            int *seen = s->loop == MT_LOOP_BLOCK ? an->seen_block : an->seen_thread;
            if (seen[s->axis]++)
                return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: two %s loops on axis %d", mt_loop_kind_name(s->loop), s->axis);
            if (s->loop == MT_LOOP_BLOCK) an->res->grid[s->axis] = s->extent;
            else an->res->block[s->axis] = s->extent;
        }
        return walk(an, s->body, launch && is_launch, priv);
    }
    case MT_STMT_LET:
        if ((st = check_expr(an, s->value)) != MT_OK) return st;
        return walk(an, s->body, launch, priv);
    case MT_STMT_ALLOC:
        if (an->nscope >= (int)(sizeof an->scope / sizeof an->scope[0]))
            return mt__fail(an->err, an->errlen, MT_UNSUPPORTED, "ir: allocations nested too deeply");
        if (s->buf->size < 1) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: buffer '%s' of size %lld", s->buf->name, (long long)s->buf->size);
        an->scope[an->nscope++] = s->buf;
        if (s->buf->scope == MT_SCOPE_LOCAL) an->res->local_bytes += 4 * s->buf->size;
        st = walk(an, s->body, launch, &p); /* a declaration: launch loops may follow */
        an->nscope--;
        *priv = p + (s->buf->scope == MT_SCOPE_PRIVATE ? s->buf->size : 0);
        return st;
    case MT_STMT_STORE:
        if (!buffer_visible(an, s->buf))
            return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: store to buffer '%s' outside its scope", s->buf->name);
        if (s->buf->readonly) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: store to read-only buffer '%s'", s->buf->name);
        if ((st = check_expr(an, s->index)) != MT_OK || (st = check_expr(an, s->value)) != MT_OK) return st;
        if (s->index->lanes != s->value->lanes) return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: store index and value disagree in lanes");
        return MT_OK;
    case MT_STMT_BARRIER: return MT_OK;
    case MT_STMT_PREFETCH:
        if (!buffer_visible(an, s->buf))
            return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: prefetch of buffer '%s' outside its scope", s->buf->name);
        return check_expr(an, s->index);
    case MT_STMT_IF:
        if ((st = check_expr(an, s->cond)) != MT_OK) return st;
        if ((st = walk(an, s->body, 0, &p)) != MT_OK) return st;
        *priv = p;
        if (s->else_body) {
            if ((st = walk(an, s->else_body, 0, &p)) != MT_OK) return st;
            if (p > *priv) *priv = p;
        }
        return MT_OK;
    default: return mt__fail(an->err, an->errlen, MT_INVALID_ARG, "ir: unknown statement kind %d", (int)s->kind);
    }
}

mt_status mt_kernel_analyze(const mt_kernel *k, mt_kernel_resources *res, char *err, size_t errlen) {
    if (!k || !res) return mt__fail(err, errlen, MT_INVALID_ARG, "ir: NULL kernel");
    if (!k->body) return mt__fail(err, errlen, MT_INVALID_ARG, "ir: kernel '%s' has no body", k->name);
    mt_kernel_resources r = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
    analyzer an = {.k = k, .res = &r, .err = err, .errlen = errlen};
    int64_t priv = 0;
    mt_status st = walk(&an, k->body, 1, &priv);
    if (st != MT_OK) return st;
    r.private_floats = priv;
    r.threads_per_block = r.block[0] * r.block[1] * r.block[2];
    *res = r;
    return MT_OK;
}

mt_status mt_kernel_check_limits(const mt_kernel_resources *res, const mt_device_limits *lim, char *err, size_t errlen) {
    if (!res || !lim) return mt__fail(err, errlen, MT_INVALID_ARG, "limits: NULL argument");
    if (lim->max_threads_per_block > 0 && res->threads_per_block > lim->max_threads_per_block)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "work-group of %lld work-items exceeds the device's %lld",
                        (long long)res->threads_per_block, (long long)lim->max_threads_per_block);
    for (int i = 0; i < 3; i++) {
        if (lim->max_block_dim[i] > 0 && res->block[i] > lim->max_block_dim[i])
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "work-group size %lld along axis %d exceeds the device's %lld", (long long)res->block[i],
                            i, (long long)lim->max_block_dim[i]);
        if (lim->max_grid_dim[i] > 0 && res->grid[i] > lim->max_grid_dim[i])
            return mt__fail(err, errlen, MT_INVALID_CONFIG, "%lld work-groups along axis %d exceed the device's %lld", (long long)res->grid[i], i,
                            (long long)lim->max_grid_dim[i]);
    }
    if (lim->local_mem_bytes > 0 && res->local_bytes > lim->local_mem_bytes)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%lld bytes of local memory exceed the device's %lld", (long long)res->local_bytes,
                        (long long)lim->local_mem_bytes);
    if (lim->max_private_floats > 0 && res->private_floats > lim->max_private_floats)
        return mt__fail(err, errlen, MT_INVALID_CONFIG, "%lld private floats per work-item exceed the budget of %lld",
                        (long long)res->private_floats, (long long)lim->max_private_floats);
    return MT_OK;
}

/* Iterations of the nest under s, counting each statement as one step. */
static int64_t unroll_walk(mt_stmt *s, int64_t max_step) {
    const int64_t cap = (int64_t)1 << 40;
    switch (s->kind) {
    case MT_STMT_SEQ: {
        int64_t sum = 0;
        for (int i = 0; i < s->nitems; i++) {
            sum += unroll_walk(s->items[i], max_step);
            if (sum > cap) sum = cap;
        }
        return sum;
    }
    case MT_STMT_FOR: {
        int64_t inner = unroll_walk(s->body, max_step);
        int64_t steps = inner > cap / s->extent ? cap : inner * s->extent;
        if (s->loop == MT_LOOP_SERIAL && steps <= max_step && s->extent > 1) s->loop = MT_LOOP_UNROLLED;
        return (s->loop == MT_LOOP_BLOCK || s->loop == MT_LOOP_THREAD) ? inner : steps;
    }
    case MT_STMT_ALLOC:
    case MT_STMT_LET: return unroll_walk(s->body, max_step);
    case MT_STMT_IF: {
        int64_t a = unroll_walk(s->body, max_step), b = s->else_body ? unroll_walk(s->else_body, max_step) : 0;
        return 1 + (a > b ? a : b);
    }
    default: return 1;
    }
}

void mt_ir_auto_unroll(mt_kernel *k, int64_t max_step) {
    if (!k || !k->body || max_step <= 0) return;
    unroll_walk(k->body, max_step);
}

const char *mt_loop_kind_name(mt_loop_kind kind) {
    static const char *names[MT_LOOP_KIND_COUNT] = {"serial", "unrolled", "vectorized", "block", "thread", "vthread"};
    return kind >= 0 && kind < MT_LOOP_KIND_COUNT ? names[kind] : "unknown";
}

const char *mt_scope_name(mt_scope scope) {
    switch (scope) {
    case MT_SCOPE_GLOBAL: return "global";
    case MT_SCOPE_LOCAL: return "local";
    case MT_SCOPE_PRIVATE: return "private";
    }
    return "unknown";
}

static int64_t unrolled_size(const mt_stmt *s) {
    const int64_t cap = (int64_t)1 << 40;
    if (!s) return 0;
    switch (s->kind) {
    case MT_STMT_SEQ: {
        int64_t sum = 0;
        for (int i = 0; i < s->nitems && sum < cap; i++) sum += unrolled_size(s->items[i]);
        return sum < cap ? sum : cap;
    }
    case MT_STMT_FOR: {
        int64_t body = unrolled_size(s->body);
        int unrolled = s->loop == MT_LOOP_UNROLLED || s->loop == MT_LOOP_VECTORIZED || s->loop == MT_LOOP_VTHREAD;
        if (!unrolled) return 1 + body;
        return body > cap / s->extent ? cap : s->extent * body;
    }
    case MT_STMT_IF: return 1 + unrolled_size(s->body) + unrolled_size(s->else_body);
    case MT_STMT_ALLOC:
    case MT_STMT_LET: return 1 + unrolled_size(s->body);
    default: return 1;
    }
}

int64_t mt_kernel_unrolled_size(const mt_kernel *k) { return k ? unrolled_size(k->body) : 0; }
