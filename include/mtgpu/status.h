/* mtgpu status codes.
 *
 * Every fallible call in libmtgpu returns an mt_status. Codes are negative on
 * error, generated from one X-macro table (libuv style), and named by
 * mt_status_str (a sentence) and mt_status_name (a stable snake_case token that
 * machine-readable output and the tuning database use).
 *
 * The error rule (docs/api.md): a fallible call returns its mt_status, and
 * the human-readable reason goes to the caller's buffer (char *err, size_t
 * errlen; NULL or 0 when the caller does not want it). Handles keep no
 * error state, and a call that fails has no other effect. */
#ifndef MTGPU_STATUS_H
#define MTGPU_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

#define MT_STATUS_MAP(X)                                                        \
    X(OK,             0,   "ok",             "success")                          \
    X(INVALID_ARG,   -1,   "invalid_arg",    "invalid argument")                 \
    X(PARSE,         -2,   "parse_error",    "malformed input")                  \
    X(NOMEM,         -3,   "out_of_memory",  "out of memory")                    \
    X(IO,            -4,   "io_error",       "input/output error")               \
    X(UNSUPPORTED,   -5,   "unsupported",    "not supported by this template or device") \
    X(INVALID_CONFIG,-6,   "invalid_config", "config outside the space or over the device's limits") \
    X(BUILD,         -7,   "build_error",    "kernel build failed")              \
    X(LAUNCH,        -8,   "launch_error",   "kernel launch failed")             \
    X(DEVICE,        -9,   "device_error",   "device error")                     \
    X(UNAVAILABLE,   -10,  "unavailable",    "backend or device unavailable")    \
    X(TIMEOUT,       -11,  "timeout",        "timed out")                        \
    X(WRONG_RESULT,  -12,  "wrong_result",   "result differs from the reference") \
    X(CORRUPT,       -13,  "corrupt",        "corrupt or mismatched data")       \
    X(NOT_FOUND,     -14,  "not_found",      "not found")                        \
    X(RANGE,         -15,  "out_of_range",   "value out of range")

typedef enum mt_status {
#define MT__STATUS_ENUM(name, code, token, text) MT_##name = code,
    MT_STATUS_MAP(MT__STATUS_ENUM)
#undef MT__STATUS_ENUM
} mt_status;

/* A sentence describing the code; never NULL (unknown codes give "unknown error"). */
const char *mt_status_str(mt_status s);
/* A stable snake_case token ("build_error"); never NULL. */
const char *mt_status_name(mt_status s);

#ifdef __cplusplus
}
#endif
#endif
