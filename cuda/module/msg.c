/* Messages of the CUDA module (every member writes its reason into the
 * caller's (buffer, length), truncated and NUL-terminated), and the symbol
 * lookup its dlopen'ed libraries share. */
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
