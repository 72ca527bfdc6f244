/* A growable string for printers and JSON output. On allocation failure the
 * buffer is marked failed and further appends are ignored; check sb.failed. */
#ifndef MTGPU_STRBUF_H
#define MTGPU_STRBUF_H
#include <stddef.h>

typedef struct mt_strbuf {
    char *data;
    size_t len, cap;
    int failed;
} mt_strbuf;

void mt__sb_append(mt_strbuf *sb, const char *s);
void mt__sb_printf(mt_strbuf *sb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Appends s as a JSON string literal with quotes and escapes. */
void mt__sb_json_str(mt_strbuf *sb, const char *s);
void mt__sb_free(mt_strbuf *sb);
#endif
