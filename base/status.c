#include "mtgpu/status.h"
#include "fail.h"

#include <stdarg.h>
#include <stdio.h>

const char *mt_status_str(mt_status s) {
    switch (s) {
#define MT__STATUS_STR(name, code, token, text) case MT_##name: return text;
        MT_STATUS_MAP(MT__STATUS_STR)
#undef MT__STATUS_STR
    }
    return "unknown error";
}

const char *mt_status_name(mt_status s) {
    switch (s) {
#define MT__STATUS_TOK(name, code, token, text) case MT_##name: return token;
        MT_STATUS_MAP(MT__STATUS_TOK)
#undef MT__STATUS_TOK
    }
    return "unknown";
}

mt_status mt__fail(char *err, size_t errlen, mt_status s, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}
