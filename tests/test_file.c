/* Files from outside and files mtgpu writes (base/file.h): whole-file reads
 * bounded by the format and refusing what may never end (a device, a FIFO,
 * a sparse file of 30 GB) within a second, and atomic replacement, also on
 * a full file system (a 64 KiB tmpfs, where mounting one is allowed: as
 * root; elsewhere that check is skipped and says why). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "scratch_dir.h"


static int setup(void **state) {
    (void)state;
    return scratch_make("file");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* The contents of path ("" when missing), in a static buffer. */
static const char *get(const char *path) {
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* How many names in dir contain ".tmp." (temporary files left behind). */
static int leftovers(const char *dir) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void expect_read(const char *path, size_t max, mt_status want, const char *needle) {
    unsigned char *buf = (unsigned char *)1;
    size_t len = 7;
    char err[512] = "";
    double t0 = now_s();
    mt_status st = mt__read_file_bounded(path, max, &buf, &len, err, sizeof err);
    double el = now_s() - t0;
    print_message("    %s (max %zu) -> %s in %.3f s: %s\n", path, max, mt_status_name(st), el, err);
    assert_int_equal(st, want);
    if (st == MT_OK) {
        free(buf);
        return;
    }
    assert_null(buf);
    assert_int_equal(len, 0);
    assert_non_null(strstr(err, needle));
    assert_true(el < 1.0);
}

static void test_read_bounded(void **state) {
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/ten", g_dir);
    put(path, "0123456789");
    unsigned char *buf = NULL;
    size_t len = 0;
    char err[512];
    assert_int_equal(mt__read_file_bounded(path, 10, &buf, &len, err, sizeof err), MT_OK);
    assert_int_equal(len, 10);
    assert_memory_equal(buf, "0123456789", 11); /* NUL-terminated */
    free(buf);
    expect_read(path, 9, MT_RANGE, "10 bytes, more than the 9");
    snprintf(path, sizeof path, "%s/empty", g_dir);
    put(path, "");
    assert_int_equal(mt__read_file_bounded(path, 0, &buf, &len, err, sizeof err), MT_OK);
    assert_int_equal(len, 0);
    free(buf);
    snprintf(path, sizeof path, "%s/missing", g_dir);
    expect_read(path, 100, MT_NOT_FOUND, "No such file");
    expect_read(g_dir, 100, MT_IO, "a directory");
    expect_read("/dev/zero", 100, MT_IO, "a character device");
    expect_read("/dev/null", 100, MT_IO, "a character device");
    /* A FIFO no one writes: the open does not wait for a writer. */
    snprintf(path, sizeof path, "%s/fifo", g_dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_read(path, 100, MT_IO, "FIFO");
    /* 30 GB of holes: one fstat, no read. */
    snprintf(path, sizeof path, "%s/sparse", g_dir);
    put(path, "");
    assert_int_equal(truncate(path, (off_t)30 << 30), 0);
    expect_read(path, (size_t)1 << 20, MT_RANGE, "32212254720 bytes");
    unlink(path);
    /* NULL arguments. */
    assert_int_equal(mt__read_file_bounded(NULL, 1, &buf, &len, NULL, 0), MT_INVALID_ARG);
    int fd = 5;
    assert_int_equal(mt__open_regular("/dev/zero", &fd, NULL, NULL, 0), MT_IO);
    assert_int_equal(fd, -1);
}

static void test_atomic_write(void **state) {
    (void)state;
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/out.txt", g_dir);
    /* New, then replaced. */
    assert_int_equal(mt__write_file_atomic(path, "first\n", 6, err, sizeof err), MT_OK);
    assert_string_equal(get(path), "first\n");
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(mt__write_file_atomic(path, "second\n", 7, err, sizeof err), MT_OK);
    assert_string_equal(get(path), "second\n");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* the replacement keeps the mode */
    /* Abandoned halfway: the old contents stay, nothing is left behind. */
    mt__atomic_file af;
    assert_int_equal(mt__atomic_open(&af, path, err, sizeof err), MT_OK);
    assert_non_null(af.tmp);
    fputs("half a fi", af.f);
    fflush(af.f);
    assert_string_equal(get(path), "second\n");
    mt__atomic_abort(&af);
    assert_string_equal(get(path), "second\n");
    assert_int_equal(leftovers(g_dir), 0);
    mt__atomic_abort(&af); /* zeroed: a no-op */
    /* A symbolic link stays one: the file it points to is replaced. */
    char link[512];
    snprintf(link, sizeof link, "%s/link.txt", g_dir);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(mt__write_file_atomic(link, "third\n", 6, err, sizeof err), MT_OK);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_string_equal(get(path), "third\n");
    /* Not a regular file: written in place (nothing to replace), or refused. */
    assert_int_equal(mt__write_file_atomic("/dev/null", "x", 1, err, sizeof err), MT_OK);
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(mt__write_file_atomic(g_dir, "x", 1, err, sizeof err), MT_IO);
    print_message("    a directory: %s\n", err);
    /* A directory that does not exist: MT_IO, nothing created. */
    char deep[512];
    snprintf(deep, sizeof deep, "%s/none/out.txt", g_dir);
    assert_int_equal(mt__write_file_atomic(deep, "x", 1, err, sizeof err), MT_IO);
    print_message("    a missing directory: %s\n", err);
    snprintf(deep, sizeof deep, "%s/none", g_dir);
    assert_int_equal(access(deep, F_OK), -1);
    assert_int_equal(leftovers(g_dir), 0);
}

/* A full file system: a 64 KiB tmpfs. The old file must survive a write of
 * 1 MiB, with the reason in the message and no temporary file left. */
static void test_atomic_full_disk(void **state) {
    (void)state;
    char mnt[400], path[512], err[512] = "";
    snprintf(mnt, sizeof mnt, "%s/full", g_dir);
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") != 0) {
        print_message("skipped: cannot mount a small tmpfs to fill (%s; needs root); tests/test_faults.sh covers a failing write "
                      "with an LD_PRELOAD shim\n",
                      strerror(errno));
        rmdir(mnt);
        skip();
    }
    snprintf(path, sizeof path, "%s/out.txt", mnt);
    put(path, "old contents\n");
    size_t n = (size_t)1 << 20;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, 'x', n);
    mt_status st = mt__write_file_atomic(path, big, n, err, sizeof err);
    print_message("    1 MiB into 64 KiB: %s: %s\n", mt_status_name(st), err);
    int leftover = leftovers(mnt);
    char kept[64];
    snprintf(kept, sizeof kept, "%s", get(path));
    /* And through the FILE interface, failing only at the commit's flush. */
    mt__atomic_file af;
    mt_status st2 = mt__atomic_open(&af, path, NULL, 0);
    if (st2 == MT_OK) {
        fwrite(big, 1, 40000, af.f);
        fwrite(big, 1, 40000, af.f);
        st2 = mt__atomic_commit(&af, err, sizeof err);
    }
    print_message("    80 KB through a FILE: %s: %s\n", mt_status_name(st2), err);
    int leftover2 = leftovers(mnt);
    char kept2[64];
    snprintf(kept2, sizeof kept2, "%s", get(path));
    free(big);
    assert_int_equal(umount(mnt), 0);
    rmdir(mnt);
    assert_int_equal(st, MT_IO);
    assert_int_equal(st2, MT_IO);
    assert_non_null(strstr(err, "No space left on device"));
    assert_string_equal(kept, "old contents\n");
    assert_string_equal(kept2, "old contents\n");
    assert_int_equal(leftover, 0);
    assert_int_equal(leftover2, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_bounded),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_atomic_full_disk),
    };
    return cmocka_run_group_tests(tests, setup, scratch_remove);
}
