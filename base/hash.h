/* FNV-1a 64-bit content hash: kernel-cache keys, device fingerprints, model
 * and weight file checksums, graph-shape hashes. Not cryptographic. */
#ifndef MTGPU_BASE_HASH_H
#define MTGPU_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a's state before any byte: the hash of nothing. */
#define MT__HASH64_INIT 0xcbf29ce484222325ULL

/* The hash of data[0..len) continuing from seed (0 starts a new hash). */
uint64_t mt__hash64(const void *data, size_t len, uint64_t seed);

/* The FNV-1a state h advanced over data[0..len), for a hash fed piece by
 * piece: starting from MT__HASH64_INIT, the pieces give what mt__hash64(...,
 * 0) gives for them end to end. data may be NULL when len is 0. */
uint64_t mt__hash64_update(uint64_t h, const void *data, size_t len);

#endif
