/* Private: pieces of the executor shared between its files. */
#ifndef MTGPU_EXECUTOR_IMPL_H
#define MTGPU_EXECUTOR_IMPL_H

#include <stdint.h>

#include "mtgpu/device.h"
#include "mtgpu/net.h"
#include "mtgpu/status.h"
#include "mtgpu/weights.h"

/* Where each layer's output lives (net/executor_plan.c). */
typedef struct mt__act_plan {
    int nlayers;
    int *slot;            /* per layer: index of its buffer; a flatten shares its input's, a
                             convolution whose residual dies there shares the residual's */
    int nslots;
    int64_t *slot_bytes;  /* size of each buffer: the largest tensor it holds */
    int64_t *slot_offset; /* packed plan: each slot's offset in the arena; NULL otherwise */
    int64_t arena_bytes;  /* packed plan: the arena's size */
    int64_t largest_live; /* most bytes of activations live at one time */
    int64_t two_largest;  /* the two largest activations added */
} mt__act_plan;

/* Plans the activation buffers of net: a layer's output is live from the
 * layer to its last consumer (the last layer's to the end). Unpacked, a dead
 * tensor's buffer goes back to a free list, and each new tensor takes the
 * smallest free buffer that holds it, else grows the largest free one, else a
 * new one. Packed, every tensor has its own slot, placed at an offset
 * (a multiple of MT_DBUF_VIEW_ALIGN) in one arena so that tensors live at the
 * same time never overlap: close to the most bytes ever live at once, where
 * whole buffers waste what a smaller tensor leaves of a larger one's buffer.
 * MT_NOMEM; on success free with mt__act_plan_free. */
mt_status mt__act_plan_make(const mt_network *net, int packed, mt__act_plan *plan);
void mt__act_plan_free(mt__act_plan *plan);

/* Elements of a shape. */
static inline int64_t mt__shape_elems(mt_shape s) { return (int64_t)s.n * s.c * s.h * s.w; }

/* The tensor called name from w, checked to hold `count` elements:
 * MT_NOT_FOUND (missing) or MT_CORRUPT (wrong size) with the name in err. */
mt_status mt__weights_need(const mt_weights *w, const char *prefix, const char *suffix, int64_t count, const float **out, char *err,
                           size_t errlen);

/* Batch norm of conv layer l folded into a per-output-channel scale and
 * shift (scale[k] = gamma / sqrt(var + eps), shift[k] = beta - mean * scale)
 * and the conv's own bias: the layer computes conv * scale + shift. Without
 * batch norm scale is 1 and shift the bias (or 0). scale and shift hold k
 * doubles. */
mt_status mt__conv_affine(const mt_layer *l, const mt_weights *w, double *scale, double *shift, char *err, size_t errlen);

/* Constant data of a pass's launches (the convolutions' weights and biases,
 * the op kernels' parameter blocks), gathered while the executor builds its
 * layers and uploaded at the end as one allocation whose views the launches
 * take (net/const_pack.c). A fused launch then passes that allocation once
 * with offsets into it, rather than a buffer per piece: on PoCL 3.1 a launch
 * with 110 buffer arguments cost 25 us more to queue and complete than one
 * with 4 (PoCL tracks every argument's memory object), and a fused launch
 * takes at most 110 buffers, so MobileNetV2's 55 kernels went as two. */
typedef struct mt__const_piece {
    int launch, arg;      /* the launch argument the piece becomes */
    int kind;             /* the caller's: what the piece counts toward */
    size_t offset, bytes; /* in the pack; offsets are multiples of MT_DBUF_VIEW_ALIGN */
} mt__const_piece;

typedef struct mt__const_pack {
    unsigned char *data;
    size_t bytes, cap;
    mt__const_piece *piece;
    int n, cap_pieces;
} mt__const_pack;

/* Appends bytes of data (copied) as argument `arg` of launch `launch`. MT_NOMEM. */
mt_status mt__const_pack_add(mt__const_pack *cp, const void *data, size_t bytes, int launch, int arg, int kind);
/* The pieces on dev: bufs[i] holds piece i. Where the backend has views and
 * the pack fits one allocation, *arena is that allocation and every bufs[i]
 * a view of it; else *arena is NULL and each piece has its own allocation.
 * Each piece's share of the device memory goes to share[i] (its bytes and,
 * in the arena, the padding after it). On failure nothing stays allocated. */
mt_status mt__const_pack_upload(const mt__const_pack *cp, mt_device *dev, mt_dbuf **arena, mt_dbuf **bufs, size_t *share, char *err,
                                size_t errlen);
void mt__const_pack_free(mt__const_pack *cp);

#endif
