/* Bounded reads of outside files and atomic replacement of outputs (file.h). */
#define _GNU_SOURCE /* fopencookie */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fail.h"

/* What a file that is not a regular one is, for messages. */
static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

mt_status mt__open_regular(const char *path, int *fd, int64_t *size, char *err, size_t errlen) {
    if (fd) *fd = -1;
    if (size) *size = 0;
    if (!path || !fd) return mt__fail(err, errlen, MT_INVALID_ARG, "open: NULL argument");
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
    int d = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (d < 0) {
        int e = errno;
        return mt__fail(err, errlen, e == ENOENT ? MT_NOT_FOUND : MT_IO, "cannot open %s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(d, &st) != 0) {
        int e = errno;
        close(d);
        return mt__fail(err, errlen, MT_IO, "cannot open %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(d);
        return mt__fail(err, errlen, MT_IO, "%s is %s, not a regular file: refused (it may never end)", path, kind_of(st.st_mode));
    }
    int fl = fcntl(d, F_GETFL);
    if (fl >= 0) (void)fcntl(d, F_SETFL, fl & ~O_NONBLOCK);
    *fd = d;
    if (size) *size = (int64_t)st.st_size;
    return MT_OK;
}

mt_status mt__read_file_bounded(const char *path, size_t max_bytes, unsigned char **buf, size_t *len, char *err, size_t errlen) {
    if (buf) *buf = NULL;
    if (len) *len = 0;
    if (!path || !buf || !len) return mt__fail(err, errlen, MT_INVALID_ARG, "read: NULL argument");
    if (max_bytes >= SIZE_MAX - 1) max_bytes = SIZE_MAX - 2;
    int fd = -1;
    int64_t size = 0;
    mt_status st = mt__open_regular(path, &fd, &size, err, errlen);
    if (st != MT_OK) return st;
    if (size < 0 || (uint64_t)size > (uint64_t)max_bytes) {
        close(fd);
        return mt__fail(err, errlen, MT_RANGE, "%s is %lld bytes, more than the %zu bytes such a file can hold", path, (long long)size, max_bytes);
    }
    /* The size is a hint: the file may grow or shrink while it is read. */
    size_t most = max_bytes + 1, cap = (size_t)size + 1, n = 0;
    if (cap < 4096) cap = 4096;
    if (cap > most) cap = most;
    unsigned char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return mt__fail(err, errlen, MT_NOMEM, "out of memory reading %s (%zu bytes)", path, cap);
    }
    for (;;) {
        if (n == cap) {
            if (cap >= most) {
                st = mt__fail(err, errlen, MT_RANGE, "%s grew past %zu bytes, more than such a file can hold, while it was read", path, max_bytes);
                break;
            }
            size_t ncap = cap > most / 2 ? most : cap * 2;
            unsigned char *nb = realloc(b, ncap + 1);
            if (!nb) {
                st = mt__fail(err, errlen, MT_NOMEM, "out of memory reading %s (%zu bytes)", path, ncap);
                break;
            }
            b = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) {
            if (errno == EINTR) continue;
            st = mt__fail(err, errlen, MT_IO, "error reading %s: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (st != MT_OK) {
        free(b);
        return st;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return MT_OK;
}

/* ---- atomic replacement ---- */

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* fsyncs the directory that holds path, so that a rename in it survives a
 * power loss. Errors are ignored: some file systems cannot sync a directory,
 * and the rename itself has happened. */
static void sync_dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? malloc((size_t)(slash - path) + 2) : dup_str(".");
    if (!dir) return;
    if (slash) {
        size_t k = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, k);
        dir[k] = '\0';
    }
    int d = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (d >= 0) {
        (void)fsync(d);
        close(d);
    }
    free(dir);
}

/* What lies under an mt__atomic_file's FILE: its descriptor, written with
 * write(2) (so that a failure keeps its errno: stdio's own buffering would
 * report a full disk as a bare error flag), and the first error met. */
struct mt__atomic_sink {
    int fd;
    int err;
};

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
    struct mt__atomic_sink *k = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(k->fd, buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (!k->err) k->err = errno;
            return done > 0 ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static int sink_close(void *cookie) {
    struct mt__atomic_sink *k = cookie;
    int r = k->fd >= 0 ? close(k->fd) : 0;
    if (r != 0 && !k->err) k->err = errno;
    k->fd = -1;
    return r;
}

/* The reason of the first failed write or close of af, else errno's. */
static int sink_errno(const mt__atomic_file *af, int fallback) {
    return af->sink && af->sink->err ? af->sink->err : fallback ? fallback : EIO;
}

/* Tells temporary files of one process apart (threads may write at once). */
static atomic_uint g_tmp_counter;

mt_status mt__atomic_open(mt__atomic_file *af, const char *path, char *err, size_t errlen) {
    if (af) memset(af, 0, sizeof *af);
    if (!af || !path || !*path) return mt__fail(err, errlen, MT_INVALID_ARG, "write: NULL or empty path");
    /* A symbolic link is kept: the file it points to is replaced. */
    char *target = NULL;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) target = realpath(path, NULL);
    if (!target) target = dup_str(path);
    if (!target) return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    int exists = stat(target, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        free(target);
        return mt__fail(err, errlen, MT_IO, "cannot write %s: it is a directory", path);
    }
    if (exists && !S_ISREG(st.st_mode)) {
        /* /dev/null, /dev/stdout, a FIFO: nothing to replace, written as it is. */
        af->f = fopen(target, "w");
        if (!af->f) {
            int e = errno;
            free(target);
            return mt__fail(err, errlen, MT_IO, "cannot write %s: %s", path, strerror(e));
        }
        af->path = target;
        return MT_OK;
    }
    size_t n = strlen(target) + 64;
    char *tmp = malloc(n);
    if (!tmp) {
        free(target);
        return mt__fail(err, errlen, MT_NOMEM, "out of memory");
    }
    int fd = -1, e = 0;
    for (int attempt = 0; attempt < 64 && fd < 0; attempt++) {
        snprintf(tmp, n, "%s.tmp.%ld.%u", target, (long)getpid(), atomic_fetch_add(&g_tmp_counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (fd < 0 && e != EEXIST) break;
    }
    if (fd < 0) {
        mt_status s = mt__fail(err, errlen, MT_IO, "cannot create a temporary file beside %s: %s", path, strerror(e));
        free(tmp);
        free(target);
        return s;
    }
    if (exists) (void)fchmod(fd, st.st_mode & 07777); /* the replacement keeps the old file's mode */
    struct mt__atomic_sink *k = calloc(1, sizeof *k);
    cookie_io_functions_t io = {.read = NULL, .write = sink_write, .seek = NULL, .close = sink_close};
    if (k) k->fd = fd;
    af->f = k ? fopencookie(k, "w", io) : NULL;
    if (!af->f) {
        e = k ? errno : ENOMEM;
        close(fd);
        unlink(tmp);
        free(k);
        free(tmp);
        free(target);
        return mt__fail(err, errlen, e == ENOMEM ? MT_NOMEM : MT_IO, "cannot write %s: %s", path, strerror(e));
    }
    af->sink = k;
    af->path = target;
    af->tmp = tmp;
    return MT_OK;
}

void mt__atomic_abort(mt__atomic_file *af) {
    if (!af) return;
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    free(af->sink);
    free(af->tmp);
    free(af->path);
    memset(af, 0, sizeof *af);
}

mt_status mt__atomic_commit(mt__atomic_file *af, char *err, size_t errlen) {
    if (!af || !af->f || !af->path) {
        mt__atomic_abort(af);
        return mt__fail(err, errlen, MT_INVALID_ARG, "write: no file open");
    }
    int ok = 1, e = 0;
    const char *step = "writing";
    if (ferror(af->f)) ok = 0, e = sink_errno(af, 0); /* a write failed earlier */
    if (ok && fflush(af->f) != 0) ok = 0, e = sink_errno(af, errno);
    if (ok && af->sink && fsync(af->sink->fd) != 0) ok = 0, e = errno, step = "syncing";
    if (fclose(af->f) != 0 && ok) ok = 0, e = sink_errno(af, errno);
    af->f = NULL;
    if (ok && af->tmp && rename(af->tmp, af->path) != 0) ok = 0, e = errno, step = "renaming the temporary file over";
    mt_status st = MT_OK;
    if (!ok) st = mt__fail(err, errlen, MT_IO, "%s %s failed: %s%s", step, af->path, strerror(e),
                           af->tmp ? " (the file is left as it was)" : "");
    else if (af->tmp) sync_dir_of(af->path);
    if (ok) {
        free(af->tmp);
        af->tmp = NULL;
    }
    mt__atomic_abort(af);
    return st;
}

mt_status mt__write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (len > 0 && !data) return mt__fail(err, errlen, MT_INVALID_ARG, "write: NULL data");
    mt__atomic_file af;
    mt_status st = mt__atomic_open(&af, path, err, errlen);
    if (st != MT_OK) return st;
    if (len > 0 && fwrite(data, 1, len, af.f) != len) {
        int e = sink_errno(&af, errno);
        mt__atomic_abort(&af);
        return mt__fail(err, errlen, MT_IO, "writing %s failed: %s (the file is left as it was)", path, strerror(e));
    }
    return mt__atomic_commit(&af, err, errlen);
}
