/* A scratch directory for a test program: made under $TMPDIR (else /tmp)
 * before the tests, removed with everything in it after them. Include it in
 * one translation unit; g_dir holds the directory's path. */
#ifndef MTGPU_TESTS_SCRATCH_DIR_H
#define MTGPU_TESTS_SCRATCH_DIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[256];

/* Removes path and, when it is a directory, everything below it. */
static void rm_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        rm_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

/* Makes g_dir, named mtgpu-test-NAME-XXXXXX; 0 on success, -1 otherwise. */
static int scratch_make(const char *name) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/mtgpu-test-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int scratch_remove(void **state) {
    (void)state;
    rm_tree(g_dir);
    return 0;
}

#endif
