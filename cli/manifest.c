/* Helpers for the manifests that `mtgpu train --manifest` writes: a content
 * hash of the data set's file, the time, and an all-or-nothing write. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

int mt_cli_hash_file(const char *path, uint64_t *hash, long long *bytes, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    uint64_t h = 0xcbf29ce484222325ull;
    long long total = 0;
    unsigned char buf[1 << 16];
    size_t r;
    while ((r = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < r; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
        total += (long long)r;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read %s", path);
        return -1;
    }
    *hash = h;
    *bytes = total;
    return 0;
}

void mt_cli_utc_now(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else snprintf(buf, len, "unknown");
}

int mt_cli_write_atomic(const char *path, const char *data, size_t len, char *err, size_t errlen) {
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    (void)fchmod(fd, 0644); /* mkstemp makes it 0600; a manifest is not secret */
    FILE *f = fdopen(fd, "wb");
    int ok = f != NULL;
    if (!f) close(fd);
    if (ok) ok = fwrite(data, 1, len, f) == len;
    if (ok) ok = fflush(f) == 0;
    if (ok) ok = fsync(fileno(f)) == 0;
    int saved = errno;
    if (f && fclose(f) != 0 && ok) ok = 0, saved = errno;
    if (ok && rename(tmp, path) != 0) ok = 0, saved = errno;
    if (!ok) {
        unlink(tmp);
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(saved));
    }
    free(tmp);
    return ok ? 0 : -1;
}
