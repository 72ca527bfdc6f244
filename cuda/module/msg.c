/* Messages of the CUDA module (every member writes its reason into the
 * caller's (buffer, length), truncated and NUL-terminated), and what the
 * loaders of its dlopen'ed libraries (the driver, cuDNN, cuBLAS) share. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "module-impl.h"

mt_status mt__cu_fail(char *msg, size_t len, mt_status s, const char *fmt, ...) {
    if (msg && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return s;
}

mt_status mt__cu_fail_code(char *msg, size_t len, mt_status s, mt__cu_code_text text, int code, const char *fmt, ...) {
    if (!msg || len == 0) return s;
    char what[512], detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    text(code, detail, sizeof detail);
    snprintf(msg, len, "%s: %s", what, detail);
    return s;
}

void mt__cu_log_append(char *log, size_t loglen, const char *text) {
    if (!log || loglen == 0 || !text) return;
    size_t used = strnlen(log, loglen - 1);
    size_t room = loglen - 1 - used, n = strlen(text);
    if (n > room) n = room;
    memcpy(log + used, text, n);
    log[used + n] = '\0';
}

int mt__cu_resolve(void *lib, const char *name, void *slot, size_t slot_size) {
    dlerror();
    void *sym = dlsym(lib, name);
    if (!sym) return -1;
    memcpy(slot, &sym, slot_size);
    return 0;
}

int mt__cu_resolve_syms(void *lib, const mt__cu_sym *syms, int n) {
    int first = -1;
    for (int i = 0; i < n; i++)
        if (mt__cu_resolve(lib, syms[i].name, syms[i].slot, syms[i].size) != 0 && first < 0) first = i;
    return first;
}

void *mt__cu_lib_open(mt__cu_lib *lib, const char *const *names, int n, const char **which) {
    lib->why[0] = '\0';
    for (int i = 0; i < n; i++) {
        dlerror();
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            if (which) *which = names[i];
            return h;
        }
        const char *e = dlerror();
        size_t used = strlen(lib->why);
        snprintf(lib->why + used, sizeof lib->why - used, "%s%s%s", used ? "; " : "", e ? e : names[i], e ? "" : " cannot be loaded");
    }
    return NULL;
}

int mt__cu_lib_ready(mt__cu_lib *lib, void (*load)(void), const char *prefix, const char *fallback, char *why, size_t whylen) {
    if (pthread_once(&lib->once, load) != 0) {
        mt__cu_fail(why, whylen, MT_UNAVAILABLE, "pthread_once failed");
        return 0;
    }
    if (!lib->ok) {
        mt__cu_fail(why, whylen, MT_UNAVAILABLE, "%s%s", prefix, lib->why[0] ? lib->why : fallback);
        return 0;
    }
    return 1;
}
