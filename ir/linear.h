/* Private: linear forms of integer index expressions over loop depths, the
 * algebra that both the flat features (tuner/loop_features.c) and the graph
 * encoder (graph_enc/walk.c) use to find an access's stride along each
 * enclosing loop. Each walker evaluates expressions itself (it knows its
 * variables); these are the operations on the forms. */
#ifndef MTGPU_IR_LINEAR_H
#define MTGPU_IR_LINEAR_H

#include <stdint.h>

#include "ir.h"

#define MT__LIN_MAXD 32 /* loop depths a form tracks (bits of `uses`) */

typedef struct mt__lin {
    int64_t c[MT__LIN_MAXD]; /* coefficient per loop depth; meaningful where `uses` has the bit */
    int64_t k;               /* the value when constant */
    uint32_t uses;           /* loop depths the value depends on */
    uint32_t nl;             /* ... of which non-linearly */
    int opaque;              /* depends on something unknown (a load, a deep loop, an unbound variable) */
} mt__lin;

void mt__lin_const(mt__lin *o, int64_t v);
void mt__lin_opaque(mt__lin *o);
int mt__lin_is_const(const mt__lin *a);
/* Saturating arithmetic: coefficients of real indices are small; garbage
 * expressions must not be undefined behaviour. */
int64_t mt__sat_add(int64_t a, int64_t b);
int64_t mt__sat_mul(int64_t a, int64_t b);
/* o = a + sign * b */
void mt__lin_addsub(mt__lin *o, const mt__lin *a, const mt__lin *b, int64_t sign);
/* o = s * a */
void mt__lin_scale(mt__lin *o, const mt__lin *a, int64_t s);
/* o = a op b where op is not linear: both operands' variables become non-linear. */
void mt__lin_mix(mt__lin *o, const mt__lin *a, const mt__lin *b);

/* What a walker knows of a variable, indexed by variable id: a loop at a
 * depth (linear in it below MT__LIN_MAXD, opaque deeper) or a LET whose value
 * has the form lets[idx]. */
enum { MT__LIN_VAR_NONE = 0, MT__LIN_VAR_LOOP, MT__LIN_VAR_LET };
typedef struct mt__lin_var {
    int kind;
    int idx; /* loop depth or let slot */
} mt__lin_var;
typedef struct mt__lin_scope {
    const mt__lin_var *vars;
    int nvars;
    const mt__lin *lets;
} mt__lin_scope;

/* How a walker resolves a variable it knows: writes its form to *o and
 * returns 1; 0 makes the result opaque. */
typedef int (*mt__lin_var_fn)(const void *ctx, const mt_var *v, mt__lin *o);
/* The linear form of an index expression: +, - and products with a constant
 * stay linear, other operations on constants fold, anything else is
 * non-linear in its variables; loads and unknown variables are opaque. */
void mt__lin_eval(const mt_expr *e, mt__lin_var_fn var, const void *ctx, mt__lin *o);
/* The resolver for a walker that keeps an mt__lin_scope (ctx). */
int mt__lin_scope_var(const void *ctx, const mt_var *v, mt__lin *o);

#endif
