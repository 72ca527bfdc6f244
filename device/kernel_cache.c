/* On-disk cache of compiled kernel binaries (see kernel_cache.h). */
#include "kernel_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "backend-impl.h"
#include "file.h"

#define KCACHE_MAGIC "MTKBIN01"
#define KCACHE_HEADER 32
/* A program binary larger than this is not cached (and a header claiming more is corrupt). */
#define KCACHE_MAX_PAYLOAD ((uint64_t)1 << 30)

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t payload_checksum(const void *payload, size_t len, uint64_t key) {
    return mt__hash64(payload, len, key ^ 0x5bd1e9955bd1e995ULL);
}

/* Creates path and its parents (mkdir -p). 0 if it ends up an existing directory. */
static int mkdir_p(const char *path) {
    char tmp[MT_KCACHE_DIR_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp) return -1;
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (tmp[i] != '/') continue;
        tmp[i] = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        tmp[i] = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    struct stat st;
    if (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode)) return -1;
    return 0;
}

int mt__kcache_dir(const char *requested, char *dir, size_t dirlen) {
    if (!dir || dirlen == 0) return -1;
    dir[0] = '\0';
    int n = -1;
    const char *env;
    if (requested && *requested) {
        n = snprintf(dir, dirlen, "%s", requested);
    } else if ((env = getenv("MTGPU_CACHE_DIR")) && *env) {
        n = snprintf(dir, dirlen, "%s", env);
    } else if ((env = getenv("XDG_CACHE_HOME")) && *env) {
        n = snprintf(dir, dirlen, "%s/mtgpu/kernels", env);
    } else if ((env = getenv("HOME")) && *env) {
        n = snprintf(dir, dirlen, "%s/.cache/mtgpu/kernels", env);
    }
    /* Entry names are appended to dir; leave room for them. */
    if (n <= 0 || (size_t)n + 64 >= dirlen || (size_t)n + 64 >= MT_KCACHE_DIR_MAX) {
        dir[0] = '\0';
        return -1;
    }
    while (n > 1 && dir[n - 1] == '/') dir[--n] = '\0';
    if (mkdir_p(dir) != 0 || access(dir, W_OK | X_OK) != 0) {
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

/* A kind names a file extension: a short lower-case word, nothing that could
 * leave the directory. */
static int kind_ok(const char *kind) {
    if (!kind || !*kind || strlen(kind) > 16) return 0;
    for (const char *p = kind; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) return 0;
    return 1;
}

static void entry_path(const char *dir, const char *kind, uint64_t key, char *path, size_t len) {
    snprintf(path, len, "%s/%016llx.%s", dir, (unsigned long long)key, kind);
}

unsigned char *mt__kcache_load(const char *dir, const char *kind, uint64_t key, size_t *len) {
    if (!dir || !*dir || !len || !kind_ok(kind)) return NULL;
    char path[MT_KCACHE_DIR_MAX + 64];
    entry_path(dir, kind, key, path, sizeof path);
    /* Not fopen: an entry replaced by a FIFO would block the open for ever. */
    int fd = -1;
    if (mt__open_regular(path, &fd, NULL, NULL, 0) != MT_OK) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return NULL;
    }
    unsigned char *payload = NULL;
    unsigned char hdr[KCACHE_HEADER];
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) goto fail;
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr) goto fail;
    if (memcmp(hdr, KCACHE_MAGIC, 8) != 0 || get_u64(hdr + 8) != key) goto fail;
    uint64_t plen = get_u64(hdr + 16);
    if (plen == 0 || plen > KCACHE_MAX_PAYLOAD || (uint64_t)st.st_size != KCACHE_HEADER + plen) goto fail;
    payload = malloc((size_t)plen);
    if (!payload) goto fail;
    if (fread(payload, 1, (size_t)plen, f) != (size_t)plen) goto fail;
    if (payload_checksum(payload, (size_t)plen, key) != get_u64(hdr + 24)) goto fail;
    fclose(f);
    *len = (size_t)plen;
    return payload;
fail:
    free(payload);
    fclose(f);
    return NULL;
}

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int mt__kcache_store(const char *dir, const char *kind, uint64_t key, const void *payload, size_t len) {
    if (!dir || !*dir || !payload || len == 0 || (uint64_t)len > KCACHE_MAX_PAYLOAD || !kind_ok(kind)) return -1;
    char path[MT_KCACHE_DIR_MAX + 64], tmp[MT_KCACHE_DIR_MAX + 64];
    entry_path(dir, kind, key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/%016llx.%s.tmpXXXXXX", dir, (unsigned long long)key, kind);
    int fd = mkstemp(tmp);
    if (fd < 0) return -1;
    unsigned char hdr[KCACHE_HEADER];
    memcpy(hdr, KCACHE_MAGIC, 8);
    put_u64(hdr + 8, key);
    put_u64(hdr + 16, (uint64_t)len);
    put_u64(hdr + 24, payload_checksum(payload, len, key));
    /* No fsync: after a crash a torn entry fails its checksum and is rebuilt. */
    int bad = write_all(fd, hdr, sizeof hdr) != 0 || write_all(fd, payload, len) != 0;
    if (close(fd) != 0) bad = 1;
    if (!bad && rename(tmp, path) != 0) bad = 1;
    if (bad) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
