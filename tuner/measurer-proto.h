/* Private: the line protocol between the measurer (tuner/measurer.c) and
 * mtgpu-worker (worker/mtgpu_worker.c). The protocol itself is described at
 * the top of tuner/measurer.c; these are the helpers both ends share. */
#ifndef MTGPU_MEASURER_PROTO_H
#define MTGPU_MEASURER_PROTO_H

#include <stddef.h>

#include "strbuf.h"

/* Bumped on any incompatible change; the worker announces it in its hello line. */
#define MT__PROTO_VERSION 2
#define MT__PROTO_VERSION_TEXT "2"
/* Longest line either end accepts (a build log is cut to 1 KiB, so this is generous). */
#define MT__PROTO_MAX_LINE ((size_t)1 << 20)
/* Most fields in one line. */
#define MT__PROTO_MAX_FIELDS 24

/* Appends one field to a line being built in sb: a TAB first unless the line
 * is empty, then the text with '\\', TAB, LF and CR escaped as \\ \t \n \r. */
void mt__proto_put(mt_strbuf *sb, const char *field);
void mt__proto_put_int(mt_strbuf *sb, long long v);
/* A double as the 16 hex digits of its IEEE-754 bits: exact, and independent
 * of the process's locale. */
void mt__proto_put_f64(mt_strbuf *sb, double v);
/* Ends the line (appends LF). */
void mt__proto_end(mt_strbuf *sb);

/* Splits a line (without its LF) in place at TABs and unescapes each field.
 * Returns the number of fields (at most max; fields[i] point into line), or
 * -1 when there are more than max fields or an escape is malformed. */
int mt__proto_split(char *line, char **fields, int max);
/* Parse a whole field; 0 on success, -1 when the field is not of that form. */
int mt__proto_get_int(const char *s, long long *out);
int mt__proto_get_f64(const char *s, double *out);

#endif
