/* The executor's activation-buffer plan: liveness and best-fit reuse. */
#include <stdlib.h>
#include <string.h>

#include "executor-impl.h"

void mt__act_plan_free(mt__act_plan *plan) {
    if (!plan) return;
    free(plan->slot);
    free(plan->slot_bytes);
    memset(plan, 0, sizeof *plan);
}

mt_status mt__act_plan_make(const mt_network *net, mt__act_plan *plan) {
    memset(plan, 0, sizeof *plan);
    int n = mt_network_num_layers(net);
    if (n < 1) return MT_INVALID_ARG;
    int *root = malloc(sizeof(int) * (size_t)n);      /* the layer whose buffer holds this layer's output */
    int *last = malloc(sizeof(int) * (size_t)n);      /* per root: last layer reading its buffer */
    int *last_read = malloc(sizeof(int) * (size_t)n); /* per tensor: the last layer reading it */
    int *slot_live = calloc((size_t)n, sizeof(int));   /* slot -> the root living in it, or -1 when free */
    plan->slot = malloc(sizeof(int) * (size_t)n);
    plan->slot_bytes = calloc((size_t)n, sizeof(int64_t));
    if (!root || !last || !last_read || !slot_live || !plan->slot || !plan->slot_bytes) {
        free(root);
        free(last);
        free(last_read);
        free(slot_live);
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
        int s = fit >= 0 ? fit : largest >= 0 ? largest : plan->nslots++;
        if (plan->slot_bytes[s] < need) plan->slot_bytes[s] = need;
        slot_live[s] = i;
        plan->slot[i] = s;
        live += need;
        if (live > plan->largest_live) plan->largest_live = live;
    }
    free(root);
    free(last);
    free(slot_live);
    return MT_OK;
}
