#include "mtgpu/status.h"
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

/* The token and the sentence of each code, at index -code (codes run down
 * from 0; an index no code has holds NULLs). */
static const struct {
    const char *token, *text;
} g_status[] = {
#define MT__STATUS_ROW(name, code, token, text) [-(code)] = {token, text},
    MT_STATUS_MAP(MT__STATUS_ROW)
#undef MT__STATUS_ROW
};

/* Non-zero when s is one of the codes. */
static int is_code(mt_status s) {
    const int n = (int)(sizeof g_status / sizeof g_status[0]);
    return (int)s <= 0 && (int)s > -n && g_status[-(int)s].token != NULL;
}

const char *mt_status_str(mt_status s) { return is_code(s) ? g_status[-(int)s].text : "unknown error"; }

const char *mt_status_name(mt_status s) { return is_code(s) ? g_status[-(int)s].token : "unknown"; }

mt_status mt__fail(char *err, size_t errlen, mt_status s, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}
