/* The executor's constant data in one allocation: see executor-impl.h. */
#include <stdlib.h>
#include <string.h>

#include "executor-impl.h"
#include "fail.h"

static size_t align_up(size_t x) { return (x + MT_DBUF_VIEW_ALIGN - 1) / MT_DBUF_VIEW_ALIGN * MT_DBUF_VIEW_ALIGN; }

mt_status mt__const_pack_add(mt__const_pack *cp, const void *data, size_t bytes, int launch, int arg, int kind) {
    if (!cp || !data || bytes == 0) return MT_INVALID_ARG;
    const size_t at = align_up(cp->bytes), end = at + bytes;
    if (end < at) return MT_NOMEM;
    if (end > cp->cap) {
        size_t cap = cp->cap ? cp->cap : 1 << 20;
        while (cap < end) cap *= 2;
        unsigned char *d = realloc(cp->data, cap);
        if (!d) return MT_NOMEM;
        cp->data = d;
        cp->cap = cap;
    }
    if (cp->n == cp->cap_pieces) {
        const int nc = cp->cap_pieces ? 2 * cp->cap_pieces : 64;
        mt__const_piece *p = realloc(cp->piece, sizeof *p * (size_t)nc);
        if (!p) return MT_NOMEM;
        cp->piece = p;
        cp->cap_pieces = nc;
    }
    memset(cp->data + cp->bytes, 0, at - cp->bytes); /* the padding: uploaded too */
    memcpy(cp->data + at, data, bytes);
    cp->piece[cp->n++] = (mt__const_piece){.launch = launch, .arg = arg, .kind = kind, .offset = at, .bytes = bytes};
    cp->bytes = end;
    return MT_OK;
}

static void free_bufs(mt_dbuf **bufs, int n) {
    for (int i = 0; i < n; i++) {
        mt_dbuf_free(bufs[i]);
        bufs[i] = NULL;
    }
}

mt_status mt__const_pack_upload(const mt__const_pack *cp, mt_device *dev, mt_dbuf **arena, mt_dbuf **bufs, size_t *share, char *err,
                                size_t errlen) {
    *arena = NULL;
    if (cp->n == 0) return MT_OK;
    mt_status st = MT_UNSUPPORTED;
    int i = 0;
    if ((uint64_t)cp->bytes <= mt_device_get_info(dev)->max_alloc_bytes && (st = mt_dbuf_alloc(dev, cp->bytes, arena)) == MT_OK) {
        for (; i < cp->n; i++)
            if ((st = mt_dbuf_view(*arena, cp->piece[i].offset, cp->piece[i].bytes, &bufs[i])) != MT_OK) break;
        if (st == MT_OK) st = mt_dbuf_write(dev, *arena, 0, cp->data, cp->bytes);
        if (st == MT_OK) {
            for (int j = 0; j < cp->n; j++) share[j] = (j + 1 < cp->n ? cp->piece[j + 1].offset : cp->bytes) - cp->piece[j].offset;
            return MT_OK;
        }
        free_bufs(bufs, i);
        mt_dbuf_free(*arena);
        *arena = NULL;
        if (st != MT_UNSUPPORTED) return mt__fail(err, errlen, st, "executor: cannot upload %zu bytes of weights: %s", cp->bytes, mt_status_str(st));
    }
    /* No views on this backend (or no allocation that large): one allocation per piece. */
    for (i = 0; i < cp->n; i++) {
        const mt__const_piece *p = &cp->piece[i];
        if ((st = mt_dbuf_alloc(dev, p->bytes, &bufs[i])) != MT_OK || (st = mt_dbuf_write(dev, bufs[i], 0, cp->data + p->offset, p->bytes)) != MT_OK) {
            free_bufs(bufs, i + 1);
            return mt__fail(err, errlen, st, "executor: cannot allocate %zu device bytes: %s", p->bytes, mt_status_str(st));
        }
        share[i] = p->bytes;
    }
    return MT_OK;
}

void mt__const_pack_free(mt__const_pack *cp) {
    if (!cp) return;
    free(cp->data);
    free(cp->piece);
    memset(cp, 0, sizeof *cp);
}
