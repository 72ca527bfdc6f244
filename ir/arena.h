#ifndef MTGPU_ARENA_H
#define MTGPU_ARENA_H
#include <stddef.h>
#include "ir.h"
/* NULL when out of memory. */
mt_arena *mt__arena_new(size_t chunk_size);
/* Zeroed, 16-byte aligned; NULL when out of memory or a == NULL. */
void *mt__arena_alloc(mt_arena *a, size_t size);
void mt__arena_free(mt_arena *a);
#endif
