/* Private: the IR walk shared by shape building and encoding
 * (graph_enc/walk.c), the union of keys and the encoder object
 * (graph_enc/encoder.c).
 *
 * Structural keys. Each IR statement that becomes a graph node gets a 64-bit
 * key computed from names and structure only, never from sizes:
 *   loop    mix(ctx', LOOP, var name), ctx' the context the loop opens (below)
 *   guard   mix(ctx, GUARD, tag(then and else))
 *   store   mix(ctx, STORE, buffer name, buffers its value loads, has FMA)
 *   load    mix(store or guard key, LOAD, buffer name)
 *   arith   mix(store key, ARITH)
 *   alloc   mix(ctx, ALLOC, buffer name)
 *   barrier mix(ctx, BARRIER)
 *   buffer  mix(BUFFER, buffer name)
 * where tag(subtree) = (name of the last buffer stored in it, the set of
 * non-private buffers it loads, whether it has an FMA), and ctx hashes the
 * structure above: an else-branch mixes in its guard's key (a then-branch
 * keeps ctx, so the common path of a guarded kernel and an unguarded kernel
 * share keys, and a guard that a workload does not need, which the template
 * leaves out, moves nothing); a non-launch loop and an item of a SEQ mix
 * in their tag unless it equals the tag of the group just above (a nest of
 * loops around the same statements is one context, and so are those
 * statements when a template omits every loop of extent 1 around them:
 * no key below moves, while the staged and unstaged versions of a
 * reduction, whose loads differ, get separate nodes). LET is transparent;
 * ALLOC is a leaf (its body stays with the enclosing node), so whether a
 * buffer is allocated does not move anything either. A key equal to an
 * ancestor's key is re-mixed until unique on the path (nested guards of one
 * tag). Equal keys elsewhere in one kernel are the same node: that is how
 * register-tile copies that a template unrolls in C merge into one node
 * whose `count` feature says how many there are. */
#ifndef MTGPU_GENC_IMPL_H
#define MTGPU_GENC_IMPL_H

#include <stdint.h>

#include "graph_enc.h"
#include "ir.h"

#define MT__GENC_MAXD 32    /* loop depths the linear index analysis tracks (MT__LIN_MAXD) */
#define MT__GENC_MAXNEST 64 /* deepest node nesting walked; deeper nodes fold into their ancestor */

/* Accumulators of one graph node over one kernel (encode mode). Sums run over
 * the merged copies of the node. */
typedef struct mt__gstat {
    uint32_t gen;      /* the walk generation that wrote it; other values: all zero */
    double count;      /* copies */
    double iters;      /* executions per work-item (product of enclosing non-launch extents, summed) */
    double grid_iters; /* executions over the whole grid */
    int depth;         /* enclosing loops (first copy) */
    double fold_n, fold_flops, fold_acc;
    /* loop */
    int64_t extent;
    int kind, axis;
    double inner; /* largest product of loop extents below */
    double sub_flops, sub_elems, sub_touched, sub_barriers, sub_gtouched, sub_ltouched;
    /* access */
    int lanes, contig, gather, nonlin, have_stride, inner_invariant;
    double s_inner, s_tx, s_thread, s_vthread, s_block;
    uint32_t l_uses, l_nl; /* the first copy's index dependence on loop depths */
    int l_opaque, l_depth;
    double elems_wi, touched_wi, elems_wg, touched_wg, touched_inner;
    int scope, role; /* buffer, alloc, access: scope; role 0 input 1 weight 2 output, -1 other */
    /* arith */
    double flops, fma, other;
    int arith_lanes;
    /* buffer, alloc */
    double size;
    int readonly;
    double b_naccess, b_elems, b_touched;
    /* guard */
    double ncmp;
    int dep_launch, dep_serial, has_else;
} mt__gstat;

/* One key of the union (shape building). */
typedef struct mt__gunode {
    uint64_t key, parent, buf; /* parent: key of the deepest observed parent (0: none); buf: buffer key of loads/stores/allocs */
    int type;
    int depth;  /* depth of that parent observation */
    double pos; /* place in program order where first seen, in [0, 1) */
    char label[32];
} mt__gunode;

typedef struct mt__gunion {
    mt__gunode *nodes;
    int n, cap;
    int64_t *table; /* open addressing: index + 1, 0 empty */
    int tcap;
    int failed;
} mt__gunion;

/* Key -> node index of a finished shape (open addressing, read-only). */
typedef struct mt__gindex {
    uint64_t *keys;
    int *idx;
    int cap; /* power of two */
} mt__gindex;

int mt__gindex_find(const mt__gindex *ix, uint64_t key);

/* The walker's workspace: one per encode call (or per shape build), reused
 * across configs; nothing in it is shared between threads. */
typedef struct mt__gwalk mt__gwalk;

mt__gwalk *mt__gwalk_new(void);
void mt__gwalk_free(mt__gwalk *w);

/* Shape mode: adds the keys of kernel k to u. MT_NOMEM on failure. */
mt_status mt__gwalk_observe(mt__gwalk *w, const mt_kernel *k, mt__gunion *u);

/* Per-kernel summary for the context node (encode mode). */
typedef struct mt__gkernel {
    int64_t grid[3], block[3];
    int64_t local_bytes, private_max;
    double flops_wi, gbytes_wi, stmts;
    int unroll_explicit;
} mt__gkernel;

/* Encode mode: accumulates statistics of kernel k into st[0..n_nodes) using
 * the shape's index; node 0 is the context. st must be zeroed by the caller
 * before its first use with w and then only be passed to w: an entry is
 * valid for this kernel where st[j].gen == *gen, else it stands for zeros.
 * MT_NOMEM on failure. */
mt_status mt__gwalk_stats(mt__gwalk *w, const mt_kernel *k, const mt__gindex *ix, mt__gstat *st, int n_nodes, mt__gkernel *kin,
                          uint32_t *gen);

uint64_t mt__genc_mix(uint64_t h, uint64_t v);
/* The key of a name: FNV-1a 64 of the string (of nothing for NULL). */
uint64_t mt__genc_hname(const char *s);

#endif
