/* The executor's activation-buffer plan: liveness, then best-fit reuse of whole
 * buffers or offsets in one arena. */
#include <stdlib.h>
#include <string.h>

#include "executor-impl.h"
#include "mtgpu/device.h"

void mt__act_plan_free(mt__act_plan *plan) {
    if (!plan) return;
    free(plan->slot);
    free(plan->slot_bytes);
    free(plan->slot_offset);
    memset(plan, 0, sizeof *plan);
}

/* Places each slot (one tensor, live from its first layer, which is its
 * slot's order of creation, to last_of_slot) at an offset in one arena, so
 * that slots live at the same time never overlap: largest first, each at the
 * lowest aligned offset clear of the slots already placed whose lifetimes
 * meet its own (the greedy-by-size strategy of TFLite's arena planner). */
typedef struct {
    int slot;
    int64_t bytes;
} pack_item;

static int pack_cmp(const void *a, const void *b) {
    const pack_item *x = a, *y = b;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->slot - y->slot;
}

static mt_status pack_arena(mt__act_plan *plan, const int *last_of_slot) {
    int n = plan->nslots;
    pack_item *items = malloc(sizeof *items * (size_t)(n ? n : 1));
    /* placed: the slots placed so far, then (meet) those of them that s meets */
    int *first = malloc(sizeof(int) * (size_t)(n ? n : 1)), *placed = malloc(sizeof(int) * 2 * (size_t)(n ? n : 1));
    plan->slot_offset = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    if (!items || !first || !placed || !plan->slot_offset) {
        free(items);
        free(first);
        free(placed);
        return MT_NOMEM;
    }
    /* A slot's first layer: the smallest layer index that uses it. */
    for (int s = 0; s < n; s++) first[s] = plan->nlayers;
    for (int i = 0; i < plan->nlayers; i++)
        if (first[plan->slot[i]] > i) first[plan->slot[i]] = i;
    for (int s = 0; s < n; s++) {
        const int64_t a = MT_DBUF_VIEW_ALIGN;
        items[s] = (pack_item){.slot = s, .bytes = (plan->slot_bytes[s] + a - 1) / a * a};
    }
    qsort(items, (size_t)n, sizeof *items, pack_cmp);
    int nplaced = 0;
    plan->arena_bytes = 0;
    for (int k = 0; k < n; k++) {
        int s = items[k].slot;
        /* The placed slots whose lifetimes meet s's, by offset. */
        int m = 0, *meet = placed + nplaced;
        for (int j = 0; j < nplaced; j++) {
            int t = placed[j];
            if (first[t] > last_of_slot[s] || first[s] > last_of_slot[t]) continue;
            int q = m++; /* insertion by offset: a few dozen at most */
            while (q > 0 && plan->slot_offset[meet[q - 1]] > plan->slot_offset[t]) {
                meet[q] = meet[q - 1];
                q--;
            }
            meet[q] = t;
        }
        int64_t at = 0;
        for (int j = 0; j < m; j++) {
            int t = meet[j];
            int64_t t_end = plan->slot_offset[t] + (plan->slot_bytes[t] + MT_DBUF_VIEW_ALIGN - 1) / MT_DBUF_VIEW_ALIGN * MT_DBUF_VIEW_ALIGN;
            if (plan->slot_offset[t] >= at + items[k].bytes) break; /* the gap before t holds s */
            if (t_end > at) at = t_end;
        }
        plan->slot_offset[s] = at;
        if (at + items[k].bytes > plan->arena_bytes) plan->arena_bytes = at + items[k].bytes;
        placed[nplaced++] = s;
    }
    free(items);
    free(first);
    free(placed);
    return MT_OK;
}

mt_status mt__act_plan_make(const mt_network *net, int packed, mt__act_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int n = mt_network_num_layers(net);
    if (n < 1) return MT_INVALID_ARG;
    int *root = malloc(sizeof(int) * (size_t)n);      /* the layer whose buffer holds this layer's output */
    int *last = malloc(sizeof(int) * (size_t)n);      /* per root: last layer reading its buffer */
    int *last_read = malloc(sizeof(int) * (size_t)n); /* per tensor: the last layer reading it */
    int *slot_live = calloc((size_t)n, sizeof(int));   /* slot -> the root living in it, or -1 when free */
    int *last_of_slot = calloc((size_t)n, sizeof(int)); /* packed: the last layer reading each slot's tensor */
    plan->slot = malloc(sizeof(int) * (size_t)n);
    plan->slot_bytes = calloc((size_t)n, sizeof(int64_t));
    if (!root || !last || !last_read || !slot_live || !last_of_slot || !plan->slot || !plan->slot_bytes) {
        free(root);
        free(last);
        free(last_read);
        free(slot_live);
        free(last_of_slot);
        mt__act_plan_free(plan);
        return MT_NOMEM;
    }
    plan->nlayers = n;
    /* The network's output is read past the end. */
    for (int i = 0; i < n; i++) {
        last_read[i] = i;
        const mt_layer *l = mt_network_layer(net, i);
        for (int j = 0; j < l->ninputs; j++)
            if (last_read[l->inputs[j]] < i) last_read[l->inputs[j]] = i;
    }
    last_read[n - 1] = n;
    int64_t big1 = 0, big2 = 0;
    for (int i = 0; i < n; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        /* A tensor shares a buffer (root) with an earlier one where it can:
         * a flatten is its input; a convolution whose residual dies here
         * writes over the residual, which its kernel adds in place
         * (MT_RESIDUAL_IN_OUTPUT). last[b]: the last reader of any tensor in
         * buffer b so far. */
        root[i] = i;
        if (l->kind == MT_LAYER_FLATTEN) root[i] = root[l->inputs[0]];
        if (l->kind == MT_LAYER_CONV2D && l->conv.residual >= 0 && last[root[l->conv.residual]] <= i) root[i] = root[l->conv.residual];
        if (root[i] == i) last[i] = last_read[i];
        else if (last[root[i]] < last_read[i]) last[root[i]] = last_read[i];
        if (l->kind != MT_LAYER_FLATTEN) {
            int64_t b = mt__shape_elems(l->out) * (int64_t)sizeof(float);
            if (b > big1) {
                big2 = big1;
                big1 = b;
            } else if (b > big2) {
                big2 = b;
            }
        }
    }
    free(last_read);
    plan->two_largest = big1 + big2;
    int64_t live = 0;
    for (int i = 0; i < n; i++) {
        const mt_layer *l = mt_network_layer(net, i);
        if (root[i] != i) {
            plan->slot[i] = plan->slot[root[i]];
            continue;
        }
        /* Free the buffers of tensors no layer from i on reads. */
        for (int s = 0; s < plan->nslots; s++) {
            int r = slot_live[s];
            if (r >= 0 && last[r] < i) {
                live -= mt__shape_elems(mt_network_layer(net, r)->out) * (int64_t)sizeof(float);
                slot_live[s] = -1;
            }
        }
        int64_t need = mt__shape_elems(l->out) * (int64_t)sizeof(float);
        int fit = -1, largest = -1;
        for (int s = 0; s < plan->nslots; s++) {
            if (slot_live[s] >= 0) continue;
            if (plan->slot_bytes[s] >= need && (fit < 0 || plan->slot_bytes[s] < plan->slot_bytes[fit])) fit = s;
            if (largest < 0 || plan->slot_bytes[s] > plan->slot_bytes[largest]) largest = s;
        }
        /* Packed: one slot per tensor, placed in the arena below. */
        int s = packed ? plan->nslots++ : fit >= 0 ? fit : largest >= 0 ? largest : plan->nslots++;
        if (plan->slot_bytes[s] < need) plan->slot_bytes[s] = need;
        slot_live[s] = i;
        if (packed) last_of_slot[s] = last[i];
        plan->slot[i] = s;
        live += need;
        if (live > plan->largest_live) plan->largest_live = live;
    }
    mt_status st = packed ? pack_arena(plan, last_of_slot) : MT_OK;
    free(root);
    free(last);
    free(slot_live);
    free(last_of_slot);
    if (st != MT_OK) mt__act_plan_free(plan);
    return st;
}
