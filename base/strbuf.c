#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(mt_strbuf *sb, size_t extra) {
    if (sb->failed) return 0;
    if (sb->len + extra + 1 <= sb->cap) return 1;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + extra + 1) cap *= 2;
    char *d = realloc(sb->data, cap);
    if (!d) {
        sb->failed = 1;
        return 0;
    }
    sb->data = d;
    sb->cap = cap;
    return 1;
}

void mt__sb_append(mt_strbuf *sb, const char *s) {
    size_t n = strlen(s);
    if (!reserve(sb, n)) return;
    memcpy(sb->data + sb->len, s, n + 1);
    sb->len += n;
}

void mt__sb_printf(mt_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void mt__sb_json_str(mt_strbuf *sb, const char *s) {
    mt__sb_append(sb, "\"");
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char tmp[8];
        switch (*p) {
        case '"': mt__sb_append(sb, "\\\""); break;
        case '\\': mt__sb_append(sb, "\\\\"); break;
        case '\n': mt__sb_append(sb, "\\n"); break;
        case '\t': mt__sb_append(sb, "\\t"); break;
        case '\r': mt__sb_append(sb, "\\r"); break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                mt__sb_append(sb, tmp);
            } else {
                tmp[0] = (char)*p;
                tmp[1] = 0;
                mt__sb_append(sb, tmp);
            }
        }
    }
    mt__sb_append(sb, "\"");
}

void mt__sb_free(mt_strbuf *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}
