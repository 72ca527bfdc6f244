/* Private: the on-disk cache of compiled kernel binaries, shared by the
 * backends (OpenCL program binaries, CUDA cubins).
 *
 * One file per (kind, key), "<dir>/<16 hex digits>.<kind>" (kind: "clbin",
 * "cubin", "clsrc" (on PoCL: the source that was built, opencl/backend_opencl.c);
 * a short lower-case word), laid out as
 *   "MTKBIN01" | key (u64 LE) | payload length (u64 LE) | payload checksum (u64 LE) | payload
 * The key is the caller's hash of everything that can change the binary
 * (source, options, device, driver, compiler); the cache knows nothing of
 * what the payload is. Files are written to a temporary name in the same
 * directory and renamed into place, so a reader sees either a whole entry or
 * none. A reader that finds a short, foreign or corrupt file treats it as
 * absent; the next store replaces it. The cache is an optimisation: none of
 * these calls can make a build fail. */
#ifndef MTGPU_KERNEL_CACHE_H
#define MTGPU_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#define MT_KCACHE_DIR_MAX 3072

/* Resolves the cache directory: `requested` if non-NULL and non-empty, else
 * $MTGPU_CACHE_DIR, else $XDG_CACHE_HOME/mtgpu/kernels, else
 * $HOME/.cache/mtgpu/kernels; creates it with its parents. Returns 0 and
 * writes the path into dir[0..dirlen) on success; -1 when no usable, writable
 * directory results (the caller then builds without a cache). */
int mt__kcache_dir(const char *requested, char *dir, size_t dirlen);

/* Returns the payload stored under (kind, key) in dir as a malloc'd block
 * (the caller frees it) with its length in *len, or NULL when there is no
 * valid entry. */
unsigned char *mt__kcache_load(const char *dir, const char *kind, uint64_t key, size_t *len);

/* Stores payload[0..len) under (kind, key), replacing any previous entry
 * atomically. Returns 0 on success, -1 on failure (leaving no temporary file
 * behind). */
int mt__kcache_store(const char *dir, const char *kind, uint64_t key, const void *payload, size_t len);

#endif
