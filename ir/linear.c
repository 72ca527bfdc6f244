/* Linear forms of index expressions (ir/linear.h). */
#include "linear.h"

void mt__lin_const(mt__lin *o, int64_t v) {
    o->k = v;
    o->uses = o->nl = 0;
    o->opaque = 0;
}

void mt__lin_opaque(mt__lin *o) {
    mt__lin_const(o, 0);
    o->opaque = 1;
}

int mt__lin_is_const(const mt__lin *a) { return !a->opaque && a->uses == 0; }

int64_t mt__sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r)) return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}

int64_t mt__sat_mul(int64_t a, int64_t b) {
    int64_t r;
    if (!__builtin_mul_overflow(a, b, &r)) return r;
    return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
}

void mt__lin_addsub(mt__lin *o, const mt__lin *a, const mt__lin *b, int64_t sign) {
    uint32_t u = a->uses | b->uses;
    for (uint32_t m = u; m; m &= m - 1) {
        int d = __builtin_ctz(m);
        int64_t ca = (a->uses >> d & 1) ? a->c[d] : 0;
        int64_t cb = (b->uses >> d & 1) ? b->c[d] : 0;
        o->c[d] = mt__sat_add(ca, mt__sat_mul(sign, cb));
    }
    o->k = mt__sat_add(a->k, mt__sat_mul(sign, b->k));
    o->uses = u;
    o->nl = a->nl | b->nl;
    o->opaque = a->opaque | b->opaque;
}

void mt__lin_scale(mt__lin *o, const mt__lin *a, int64_t s) {
    for (uint32_t m = a->uses; m; m &= m - 1) {
        int d = __builtin_ctz(m);
        o->c[d] = mt__sat_mul(a->c[d], s);
    }
    o->k = mt__sat_mul(a->k, s);
    o->uses = a->uses;
    o->nl = a->nl;
    o->opaque = a->opaque;
}

void mt__lin_mix(mt__lin *o, const mt__lin *a, const mt__lin *b) {
    o->uses = a->uses | b->uses;
    for (uint32_t m = o->uses; m; m &= m - 1) o->c[__builtin_ctz(m)] = 0;
    o->nl = o->uses;
    o->k = 0;
    o->opaque = a->opaque | b->opaque;
}

void mt__lin_eval(const mt_expr *e, mt__lin_var_fn var, const void *ctx, mt__lin *o) {
    if (!e) {
        mt__lin_opaque(o);
        return;
    }
    switch (e->kind) {
    case MT_EXPR_INT: mt__lin_const(o, e->ival); return;
    case MT_EXPR_VAR:
        if (e->var && var(ctx, e->var, o)) return;
        break;
    case MT_EXPR_RAMP:
    case MT_EXPR_BROADCAST: mt__lin_eval(e->a, var, ctx, o); return;
    case MT_EXPR_BINARY: {
        mt__lin a, b;
        mt__lin_eval(e->a, var, ctx, &a);
        mt__lin_eval(e->b, var, ctx, &b);
        switch (e->op) {
        case MT_OP_ADD: mt__lin_addsub(o, &a, &b, 1); return;
        case MT_OP_SUB: mt__lin_addsub(o, &a, &b, -1); return;
        case MT_OP_MUL:
            if (mt__lin_is_const(&a)) mt__lin_scale(o, &b, a.k);
            else if (mt__lin_is_const(&b)) mt__lin_scale(o, &a, b.k);
            else mt__lin_mix(o, &a, &b);
            return;
        default: {
            int64_t v;
            /* An operation without a value (division by 0) gives 0. */
            if (mt__lin_is_const(&a) && mt__lin_is_const(&b)) mt__lin_const(o, mt__ir_fold_int(e->op, a.k, b.k, &v) ? v : 0);
            else mt__lin_mix(o, &a, &b);
            return;
        }
        }
    }
    case MT_EXPR_SELECT: {
        mt__lin a, b, c, t;
        mt__lin_eval(e->a, var, ctx, &a);
        mt__lin_eval(e->b, var, ctx, &b);
        mt__lin_eval(e->c, var, ctx, &c);
        mt__lin_mix(&t, &a, &b);
        mt__lin_mix(o, &t, &c);
        return;
    }
    default: break;
    }
    mt__lin_opaque(o);
}

int mt__lin_scope_var(const void *ctx, const mt_var *var, mt__lin *o) {
    const mt__lin_scope *s = ctx;
    int id = var->id;
    if (id < 0 || id >= s->nvars) return 0;
    const mt__lin_var *v = &s->vars[id];
    if (v->kind == MT__LIN_VAR_LOOP && v->idx < MT__LIN_MAXD) {
        mt__lin_const(o, 0);
        o->uses = 1u << v->idx;
        o->c[v->idx] = 1;
        return 1;
    }
    if (v->kind == MT__LIN_VAR_LET) {
        /* only the used coefficients: a form is ~280 bytes and this is the hot path */
        const mt__lin *l = &s->lets[v->idx];
        for (uint32_t m = l->uses; m; m &= m - 1) o->c[__builtin_ctz(m)] = l->c[__builtin_ctz(m)];
        o->k = l->k, o->uses = l->uses, o->nl = l->nl, o->opaque = l->opaque;
        return 1;
    }
    return 0;
}
