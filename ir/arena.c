/* A bump allocator of linked chunks: every IR node of a kernel lives here and
 * is freed at once with the kernel. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

typedef struct mt_chunk {
    struct mt_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} mt_chunk;

struct mt_arena {
    mt_chunk *head;
    size_t chunk_size;
};

mt_arena *mt__arena_new(size_t chunk_size) {
    mt_arena *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
    return a;
}

void *mt__arena_alloc(mt_arena *a, size_t size) {
    if (!a) return NULL;
    size = (size + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < size) {
        size_t cap = size > a->chunk_size ? size : a->chunk_size;
        mt_chunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += size;
    memset(p, 0, size);
    return p;
}

void mt__arena_free(mt_arena *a) {
    if (!a) return;
    for (mt_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(a);
}
