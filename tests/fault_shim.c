/* An LD_PRELOAD library for tests/test_faults.sh: makes the Nth call that
 * writes to a file under a directory fail, the way a full or failing disk
 * makes it fail, so that every failure path of a write (SQLite's commits,
 * atomic file replacement, model files) runs in a test, as SQLite tests
 * itself with its own fault-injecting VFS.
 *
 * Counted calls: write, pwrite, pwrite64 and ftruncate (failing with
 * ENOSPC), fsync and fdatasync (EIO), rename (EIO) whose file (the path the
 * descriptor was opened on, or rename's source) lies under
 * MTGPU_FAULT_PATH. Other calls (the terminal, pipes, other directories)
 * pass untouched and uncounted.
 *   MTGPU_FAULT_PATH=DIR   the directory whose files count (required: unset, nothing counts)
 *   MTGPU_FAULT_AT=N       the Nth counted call fails (1-based); unset or 0: none fails
 *   MTGPU_FAULT_REPORT=F   at exit, the number of counted calls is written to F
 * stdio's own writes (fwrite, fflush) go through glibc-internal calls that no
 * preloaded library sees; mtgpu's atomic files write with write(2). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static atomic_long g_count;
static long g_at = -1;      /* -1: not read yet */
static char g_dir[4096];
static size_t g_dirlen;

static void init(void) {
    if (g_at >= 0) return;
    const char *d = getenv("MTGPU_FAULT_PATH");
    if (d && *d && strlen(d) < sizeof g_dir) {
        char *r = realpath(d, NULL);
        snprintf(g_dir, sizeof g_dir, "%s", r ? r : d);
        free(r);
        g_dirlen = strlen(g_dir);
    }
    const char *a = getenv("MTGPU_FAULT_AT");
    g_at = a && *a ? atol(a) : 0;
}

static int under_dir(const char *path) {
    return g_dirlen && path && strncmp(path, g_dir, g_dirlen) == 0 && (path[g_dirlen] == '/' || path[g_dirlen] == '\0');
}

static int fd_under_dir(int fd) {
    if (!g_dirlen || fd < 0) return 0;
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return 0;
    path[n] = '\0';
    return under_dir(path);
}

/* 1 when this counted call is the one to fail. */
static int hit(void) {
    long n = atomic_fetch_add(&g_count, 1) + 1;
    return g_at > 0 && n == g_at;
}

/* real_NAME: the next definition of NAME (libc's), looked up on first use. */
#define REAL(name, unused) \
    static __typeof__(name) *real_##name; \
    if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL(write, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = ENOSPC;
        return -1;
    }
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL(pwrite, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = ENOSPC;
        return -1;
    }
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    REAL(pwrite64, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = ENOSPC;
        return -1;
    }
    return real_pwrite64(fd, buf, n, off);
}

int ftruncate(int fd, off_t len) {
    REAL(ftruncate, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = ENOSPC;
        return -1;
    }
    return real_ftruncate(fd, len);
}

int ftruncate64(int fd, off64_t len) {
    REAL(ftruncate64, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = ENOSPC;
        return -1;
    }
    return real_ftruncate64(fd, len);
}

int fsync(int fd) {
    REAL(fsync, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = EIO;
        return -1;
    }
    return real_fsync(fd);
}

int fdatasync(int fd) {
    REAL(fdatasync, _);
    init();
    if (fd_under_dir(fd) && hit()) {
        errno = EIO;
        return -1;
    }
    return real_fdatasync(fd);
}

int rename(const char *from, const char *to) {
    REAL(rename, _);
    init();
    char *abs = from ? realpath(from, NULL) : NULL;
    int counted = under_dir(abs ? abs : from);
    free(abs);
    if (counted && hit()) {
        errno = EIO;
        return -1;
    }
    return real_rename(from, to);
}

__attribute__((destructor)) static void report(void) {
    const char *f = getenv("MTGPU_FAULT_REPORT");
    if (!f || !*f) return;
    FILE *out = fopen(f, "w");
    if (!out) return;
    fprintf(out, "%ld\n", (long)atomic_load(&g_count));
    fclose(out);
}
