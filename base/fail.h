/* The one way library code reports an error: the status it returns and a
 * message in the caller's buffer (docs/api.md). */
#ifndef MTGPU_BASE_FAIL_H
#define MTGPU_BASE_FAIL_H

#include <stddef.h>

#include "mtgpu/status.h"

/* Formats a message into err (if err != NULL and errlen > 0) and returns s.
 * Lets fallible functions write `return mt__fail(err, errlen, MT_PARSE, "...", ...)`. */
mt_status mt__fail(char *err, size_t errlen, mt_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

#endif
