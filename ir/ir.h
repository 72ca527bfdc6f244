/* Loop-nest IR for convolution kernels.
 *
 * A kernel is a tree of statements over expressions, allocated from an arena
 * owned by the kernel. Templates build the tree; the printers (OpenCL C and
 * CUDA C, ir/print_c.c) turn the same tree into source; the graph encoder reads
 * the same tree. All loop extents and sizes are compile-time constants because
 * a kernel is generated for one workload.
 *
 * Builders return NULL when the arena cannot grow, and accept NULL children by
 * returning NULL, so a template can build a whole tree and check the root once.
 *
 * Conventions:
 *  - loops run from 0 to extent-1 with step 1;
 *  - BLOCK and THREAD loops are the launch grid: at most one of each per axis
 *    (0..2), all of them above every other loop; their extents give the number
 *    of work-groups and the work-group size along that axis;
 *  - all buffers hold fp32; global buffers are the kernel parameters in order
 *    (for conv templates: input, weights, output);
 *  - an expression has `lanes` (1 for scalars, 2/4/8/16 for vectors); a load
 *    or store whose index is a RAMP with stride 1 is a contiguous vector
 *    access, other vector indices are gathers/scatters. */
#ifndef MTGPU_IR_H
#define MTGPU_IR_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_arena mt_arena;

typedef enum mt_type { MT_TYPE_INT, MT_TYPE_FLOAT, MT_TYPE_BOOL } mt_type;

typedef enum mt_scope { MT_SCOPE_GLOBAL, MT_SCOPE_LOCAL, MT_SCOPE_PRIVATE } mt_scope;

typedef enum mt_loop_kind {
    MT_LOOP_SERIAL,
    MT_LOOP_UNROLLED,
    MT_LOOP_VECTORIZED, /* a lane loop kept as a loop; printed like UNROLLED */
    MT_LOOP_BLOCK,      /* work-group / block index along `axis` */
    MT_LOOP_THREAD,     /* work-item / thread index along `axis` */
    MT_LOOP_VTHREAD,    /* virtual thread: a serial, unrolled loop of interleaved tiles */
    MT_LOOP_KIND_COUNT
} mt_loop_kind;

typedef enum mt_binop {
    MT_OP_ADD, MT_OP_SUB, MT_OP_MUL, MT_OP_DIV, MT_OP_MOD, MT_OP_MIN, MT_OP_MAX,
    MT_OP_LT, MT_OP_LE, MT_OP_GT, MT_OP_GE, MT_OP_EQ, MT_OP_NE, MT_OP_AND, MT_OP_OR,
    MT_OP_COUNT
} mt_binop;

typedef enum mt_expr_kind {
    MT_EXPR_INT,       /* ival */
    MT_EXPR_FLOAT,     /* fval */
    MT_EXPR_VAR,       /* var */
    MT_EXPR_BINARY,    /* op(a, b); integer DIV/MOD are floor division on non-negative values */
    MT_EXPR_SELECT,    /* a ? b : c (c evaluated only when a is false for scalars) */
    MT_EXPR_LOAD,      /* buf[a] */
    MT_EXPR_RAMP,      /* a + stride * i, i in 0..lanes-1 (integer) */
    MT_EXPR_BROADCAST, /* a repeated lanes times */
    MT_EXPR_FMA,       /* a * b + c (float) */
    MT_EXPR_SHUFFLE,   /* lane i: lane mask[i] of a and b laid end to end (float vectors of equal lanes) */
    MT_EXPR_KIND_COUNT
} mt_expr_kind;

typedef struct mt_var {
    int id;
    mt_type type;
    char name[24];
} mt_var;

typedef struct mt_buffer {
    int id;
    mt_scope scope;
    int64_t size;    /* elements (fp32) */
    int readonly;    /* global buffers only: never stored to */
    int param_index; /* global buffers: position in the kernel's parameter list; else -1 */
    char name[24];
} mt_buffer;

/* Lanes of the widest vector (OpenCL's float16). */
#define MT_IR_MAX_LANES 16

typedef struct mt_expr mt_expr;
struct mt_expr {
    mt_expr_kind kind;
    mt_type type;
    int lanes;
    int stride;     /* RAMP */
    mt_binop op;    /* BINARY */
    int64_t ival;   /* INT */
    float fval;     /* FLOAT */
    mt_var *var;    /* VAR */
    mt_buffer *buf; /* LOAD */
    mt_expr *a, *b, *c;
    signed char mask[MT_IR_MAX_LANES]; /* SHUFFLE */
};

typedef enum mt_stmt_kind {
    MT_STMT_SEQ,     /* items[0..nitems) */
    MT_STMT_FOR,     /* for var in 0..extent: body */
    MT_STMT_ALLOC,   /* buf (LOCAL or PRIVATE) lives for body */
    MT_STMT_STORE,   /* buf[index] = value */
    MT_STMT_BARRIER, /* work-group barrier on local memory */
    MT_STMT_IF,      /* if (cond) body else else_body (else_body may be NULL) */
    MT_STMT_LET,     /* const var = value; body */
    MT_STMT_PREFETCH, /* hint that buf[index] is read soon; no effect on results */
    MT_STMT_KIND_COUNT
} mt_stmt_kind;

typedef struct mt_stmt mt_stmt;
struct mt_stmt {
    mt_stmt_kind kind;
    /* SEQ */
    mt_stmt **items;
    int nitems;
    /* FOR */
    mt_var *var;     /* FOR, LET */
    int64_t extent;
    mt_loop_kind loop;
    int axis;        /* BLOCK/THREAD: 0..2 */
    mt_buffer *buf;  /* ALLOC, STORE, PREFETCH */
    mt_expr *index;  /* STORE, PREFETCH */
    int outer;       /* PREFETCH: into the outer caches only (L2), not L1 */
    mt_expr *value;  /* STORE, LET */
    mt_expr *cond;   /* IF */
    mt_stmt *body;   /* FOR, ALLOC, IF (then), LET */
    mt_stmt *else_body;
};

#define MT_KERNEL_MAX_PARAMS 8

typedef struct mt_kernel {
    char name[32];
    mt_buffer *params[MT_KERNEL_MAX_PARAMS];
    int nparams;
    mt_stmt *body;
    int unroll_explicit; /* printers replicate UNROLLED loop bodies instead of emitting a pragma */
    int next_id;         /* ids for vars and buffers */
    mt_arena *arena;     /* owns every node */
} mt_kernel;

/* Creates an empty kernel with its own arena; NULL when out of memory. */
mt_kernel *mt_kernel_new(const char *name);
void mt_kernel_free(mt_kernel *k);

/* ---- names ---- */
/* A new variable; the printer uses `name` plus the id to keep names unique. */
mt_var *mt_ir_var(mt_kernel *k, const char *name, mt_type type);
/* A global buffer that becomes the next kernel parameter. */
mt_buffer *mt_ir_param(mt_kernel *k, const char *name, int64_t size, int readonly);
/* A LOCAL or PRIVATE buffer; declare it with mt_ir_alloc. */
mt_buffer *mt_ir_buffer(mt_kernel *k, const char *name, mt_scope scope, int64_t size);

/* ---- expressions ---- */
mt_expr *mt_ir_int(mt_kernel *k, int64_t v);
mt_expr *mt_ir_float(mt_kernel *k, float v);
mt_expr *mt_ir_v(mt_kernel *k, mt_var *v);
/* Integer and float arithmetic with constant folding (x*1, x+0, c1 op c2); a
 * scalar operand meeting a vector operand is broadcast. Comparisons give BOOL. */
mt_expr *mt_ir_bin(mt_kernel *k, mt_binop op, mt_expr *a, mt_expr *b);
/* a op b on integer constants, the folding mt_ir_bin does (comparisons and
 * logic give 0 or 1; sums and products wrap): 1 with *v set, or 0 for an
 * operation without a value (division or remainder by 0, INT64_MIN / -1). */
int mt__ir_fold_int(mt_binop op, int64_t a, int64_t b, int64_t *v);
mt_expr *mt_ir_add(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_sub(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_mul(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_div(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_mod(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_min(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_lt(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_ge(mt_kernel *k, mt_expr *a, mt_expr *b);
mt_expr *mt_ir_and(mt_kernel *k, mt_expr *a, mt_expr *b); /* NULL a or b where the other is given: returns the other */
mt_expr *mt_ir_select(mt_kernel *k, mt_expr *cond, mt_expr *then_v, mt_expr *else_v);
mt_expr *mt_ir_load(mt_kernel *k, mt_buffer *buf, mt_expr *index);
/* Vector load of `lanes` consecutive elements starting at base. */
mt_expr *mt_ir_load_vec(mt_kernel *k, mt_buffer *buf, mt_expr *base, int lanes);
mt_expr *mt_ir_ramp(mt_kernel *k, mt_expr *base, int stride, int lanes);
mt_expr *mt_ir_broadcast(mt_kernel *k, mt_expr *scalar, int lanes);
mt_expr *mt_ir_fma(mt_kernel *k, mt_expr *a, mt_expr *b, mt_expr *c);
/* Lanes picked from the float vectors a and b (2, 4, 8 or 16 lanes each)
 * laid end to end: lane i of the result is lane mask[i] of (a, b), mask[i]
 * in [0, 2 * lanes). OpenCL's shuffle2; a register permute on CPUs. NULL for
 * operands or a mask outside that. */
mt_expr *mt_ir_shuffle(mt_kernel *k, mt_expr *a, mt_expr *b, const int *mask);

/* ---- statements ---- */
mt_stmt *mt_ir_seq(mt_kernel *k, mt_stmt **items, int n);   /* copies the array; NULL items are an error */
mt_stmt *mt_ir_seq2(mt_kernel *k, mt_stmt *a, mt_stmt *b);
mt_stmt *mt_ir_for(mt_kernel *k, mt_var *var, int64_t extent, mt_loop_kind kind, int axis, mt_stmt *body);
mt_stmt *mt_ir_alloc(mt_kernel *k, mt_buffer *buf, mt_stmt *body);
mt_stmt *mt_ir_store(mt_kernel *k, mt_buffer *buf, mt_expr *index, mt_expr *value);
mt_stmt *mt_ir_store_vec(mt_kernel *k, mt_buffer *buf, mt_expr *base, mt_expr *value); /* lanes from value */
mt_stmt *mt_ir_barrier(mt_kernel *k);
mt_stmt *mt_ir_if(mt_kernel *k, mt_expr *cond, mt_stmt *then_s, mt_stmt *else_s); /* cond NULL: returns then_s */
mt_stmt *mt_ir_let(mt_kernel *k, mt_var *var, mt_expr *value, mt_stmt *body);
/* A software prefetch of the cache line holding buf[index] (a scalar index;
 * it may lie outside the buffer: a prefetch never faults). The OpenCL
 * printer emits __builtin_prefetch for clang on x86-64 (PoCL's CPU device,
 * whose `prefetch` builtin does nothing) and nothing elsewhere. */
mt_stmt *mt_ir_prefetch(mt_kernel *k, mt_buffer *buf, mt_expr *index);
/* The same for a line needed later than the loads in flight: it is brought
 * into the outer caches (L2; prefetcht1 on x86-64) and leaves L1 alone. */
mt_stmt *mt_ir_prefetch_outer(mt_kernel *k, mt_buffer *buf, mt_expr *index);

/* A growable list of statements, for building sequences in loops. */
typedef struct mt_stmt_list {
    mt_stmt **items;
    int n, cap;
    int failed;
} mt_stmt_list;
void mt_stmt_list_push(mt_kernel *k, mt_stmt_list *l, mt_stmt *s); /* NULL s marks the list failed */
mt_stmt *mt_stmt_list_seq(mt_kernel *k, mt_stmt_list *l);          /* NULL if failed */

/* ---- analyses and passes ---- */
typedef struct mt_kernel_resources {
    int64_t grid[3];           /* work-groups per axis (1 where no BLOCK loop) */
    int64_t block[3];          /* work-items per work-group per axis */
    int64_t threads_per_block; /* block[0]*block[1]*block[2] */
    int64_t local_bytes;       /* all LOCAL allocations, summed */
    int64_t private_floats;    /* PRIVATE allocations live at once (max over paths) */
} mt_kernel_resources;

/* Checks the structural rules above (launch loops on top and unique per axis,
 * every buffer used is a parameter or allocated in an enclosing scope, lanes
 * agree, stores never touch read-only buffers) and fills *res. */
mt_status mt_kernel_analyze(const mt_kernel *k, mt_kernel_resources *res, char *err, size_t errlen);

typedef struct mt_device_limits {
    int64_t max_threads_per_block;
    int64_t max_block_dim[3];
    int64_t max_grid_dim[3];     /* 0: unlimited */
    int64_t local_mem_bytes;
    int64_t max_private_floats;  /* 0: unknown; a register budget per thread */
} mt_device_limits;

/* MT_INVALID_CONFIG, with the limit named in err, when the kernel cannot launch. */
mt_status mt_kernel_check_limits(const mt_kernel_resources *res, const mt_device_limits *lim, char *err, size_t errlen);

/* AutoTVM's auto_unroll_max_step: marks each SERIAL loop whose nest (its
 * extent times the largest iteration count of the loops under it) runs at
 * most max_step iterations as UNROLLED. max_step <= 0 leaves loops as they are. */
void mt_ir_auto_unroll(mt_kernel *k, int64_t max_step);

/* Statements the kernel has once its UNROLLED, VECTORIZED and VTHREAD loops
 * are unrolled (other loops count their body once): a proxy for compile time,
 * which grows with it (thousands of statements take PoCL minutes). */
int64_t mt_kernel_unrolled_size(const mt_kernel *k);

/* ---- printers (ir/print_c.c) ---- */
typedef enum mt_lang { MT_LANG_OPENCL, MT_LANG_CUDA } mt_lang;
/* Prints the kernel as OpenCL C or CUDA C. *out is malloc'd and owned by the caller. */
mt_status mt_kernel_print(const mt_kernel *k, mt_lang lang, char **out, char *err, size_t errlen);

const char *mt_loop_kind_name(mt_loop_kind kind);
const char *mt_scope_name(mt_scope scope);

#ifdef __cplusplus
}
#endif
#endif
