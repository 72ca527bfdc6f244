/* FNV-1a 64-bit content hash: kernel-cache keys, device fingerprints, model
 * and weight file checksums. Not cryptographic. */
#ifndef MTGPU_BASE_HASH_H
#define MTGPU_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of data[0..len) continuing from seed (0 starts a new hash). */
uint64_t mt__hash64(const void *data, size_t len, uint64_t seed);

#endif
