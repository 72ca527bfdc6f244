/* Files from outside and files mtgpu writes: bounded reads of whole files,
 * and outputs that replace their file atomically (docs/api.md: a call that
 * fails does not half-write a file).
 *
 * Reading: a path names a regular file or is refused before anything is
 * read. A FIFO, a character device (/dev/zero, a terminal), a socket or a
 * directory may never end or block forever, so they are refused at the open
 * (the open itself does not block on a FIFO), and a file is read only up to
 * the bound its format allows: a sparse 30 GB file costs one fstat.
 *
 * Writing: the data goes to a temporary file in the same directory, which
 * is flushed, fsynced and renamed over the path; on any failure the
 * temporary file is removed and the path keeps its old contents (or stays
 * absent). */
#ifndef MTGPU_BASE_FILE_H
#define MTGPU_BASE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mtgpu/status.h"

/* Opens path read-only and checks that it is a regular file. On MT_OK *fd
 * is an open descriptor (close-on-exec, blocking) for the caller to close
 * and *size (may be NULL) the file's size. MT_NOT_FOUND when path does not
 * exist, MT_IO when it cannot be opened or is not a regular file (the
 * message names its kind); *fd is then -1. */
mt_status mt__open_regular(const char *path, int *fd, int64_t *size, char *err, size_t errlen);

/* Reads the whole regular file at path into *buf (malloc'd, with a NUL after
 * the *len bytes read, for the caller to free). A file larger than max_bytes
 * is refused with MT_RANGE before any read, and so is one that grows past
 * max_bytes while it is read; at most max_bytes + 1 bytes are ever
 * buffered. Errors of mt__open_regular, MT_IO for a read error, MT_NOMEM;
 * on an error *buf is NULL and *len 0. */
mt_status mt__read_file_bounded(const char *path, size_t max_bytes, unsigned char **buf, size_t *len, char *err, size_t errlen);

/* A file being written in place of another. */
typedef struct mt__atomic_file {
    FILE *f;    /* write the contents here, between open and commit/abort */
    char *path; /* the file replaced at commit (symbolic links resolved) */
    char *tmp;  /* the temporary file beside it; NULL when path is not a regular file and is written in place */
    struct mt__atomic_sink *sink; /* private: the descriptor under f and the first write error (file.c) */
} mt__atomic_file;

/* Starts writing path: af->f is a new temporary file in path's directory
 * (named path.tmp.PID.N, created with mode 0666 less the umask, or the mode
 * of the file it replaces). When path exists and is not a regular file
 * (/dev/null, /dev/stdout, a FIFO) it is opened for writing as it is, since
 * it cannot be replaced: then nothing is atomic. MT_IO when the file cannot
 * be created (the message names the directory and the reason), MT_NOMEM;
 * on an error *af is zeroed and nothing is left behind. */
mt_status mt__atomic_open(mt__atomic_file *af, const char *path, char *err, size_t errlen);

/* Ends writing: flushes, fsyncs and closes af->f, then renames the temporary
 * file over af->path and fsyncs the directory. On an error (a write to af->f
 * that failed earlier, a full disk, an I/O error) the temporary file is
 * removed and path is as it was before mt__atomic_open: MT_IO with the
 * reason of the first failure ("No space left on device") in err. Either way
 * af is released (zeroed). */
mt_status mt__atomic_commit(mt__atomic_file *af, char *err, size_t errlen);

/* Gives up: closes af->f and removes the temporary file; path is untouched.
 * A no-op on a zeroed af. */
void mt__atomic_abort(mt__atomic_file *af);

/* data[0..len) as the new contents of path, through the three calls above. */
mt_status mt__write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);

#endif
