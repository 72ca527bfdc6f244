/* FNV-1a 64-bit content hash, used for binary-cache keys and device
 * fingerprints. Not cryptographic: it names cache files and detects accidental
 * corruption, nothing more. */
#include "hash.h"

#define MT__FNV64_PRIME 0x100000001b3ULL

/* Returns FNV-1a 64 of data[0..len), starting from the offset basis xor seed.
 * seed 0 gives the standard FNV-1a value; passing a previous result as the
 * seed chains hashes over several fields (the field boundaries are then part
 * of the key, provided the caller hashes fixed-size or NUL-terminated fields).
 * data may be NULL when len is 0. */
uint64_t mt__hash64(const void *data, size_t len, uint64_t seed) { return mt__hash64_update(MT__HASH64_INIT ^ seed, data, len); }

uint64_t mt__hash64_update(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= MT__FNV64_PRIME;
    }
    return h;
}
