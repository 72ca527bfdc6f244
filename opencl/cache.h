/* Private: the on-disk cache of compiled OpenCL program binaries.
 *
 * One file per key, "<dir>/<16 hex digits>.clbin", laid out as
 *   "MTCLBIN1" | key (u64 LE) | payload length (u64 LE) | payload checksum (u64 LE) | payload
 * Files are written to a temporary name in the same directory and renamed into
 * place, so a reader sees either a whole entry or none. A reader that finds a
 * short, foreign or corrupt file treats it as absent; the next store replaces
 * it. The cache is an optimisation: none of these calls can make a build fail. */
#ifndef MTGPU_OPENCL_CACHE_H
#define MTGPU_OPENCL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define MT_CLCACHE_DIR_MAX 3072

/* Resolves the cache directory: `requested` if non-NULL and non-empty, else
 * $MTGPU_CACHE_DIR, else $XDG_CACHE_HOME/mtgpu/kernels, else
 * $HOME/.cache/mtgpu/kernels; creates it with its parents. Returns 0 and
 * writes the path into dir[0..dirlen) on success; -1 when no usable, writable
 * directory results (the caller then builds without a cache). */
int mt__clcache_dir(const char *requested, char *dir, size_t dirlen);

/* Returns the payload stored under key in dir as a malloc'd block (the caller
 * frees it) with its length in *len, or NULL when there is no valid entry. */
unsigned char *mt__clcache_load(const char *dir, uint64_t key, size_t *len);

/* Stores payload[0..len) under key, replacing any previous entry atomically.
 * Returns 0 on success, -1 on failure (leaving no temporary file behind). */
int mt__clcache_store(const char *dir, uint64_t key, const void *payload, size_t len);

#endif
