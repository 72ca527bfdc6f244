/* Helpers for the manifests that `mtgpu train --manifest` writes: a content
 * hash of the data set's file and the time. The manifest itself is written
 * whole or not at all (mt__write_file_atomic, base/file.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "file.h"
#include "hash.h"

int mt_cli_hash_file(const char *path, uint64_t *hash, long long *bytes, char *err, size_t errlen) {
    int fd;
    int64_t size;
    if (mt__open_regular(path, &fd, &size, err, errlen) != MT_OK) return -1;
    uint64_t h = MT__HASH64_INIT;
    long long total = 0;
    unsigned char buf[1 << 16];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0) break;
        h = mt__hash64_update(h, buf, (size_t)r);
        total += (long long)r;
    }
    close(fd);
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
