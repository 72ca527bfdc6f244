/* Private: a small, strict, bounded JSON parser (RFC 8259) into a DOM.
 *
 * Used for outside input: AutoTVM log lines, the cost lists and device info
 * stored in the tuning database. The parser:
 *  - never reads outside text[0..len) (the text need not be NUL-terminated);
 *  - is iterative, so nesting depth costs heap, not C stack, and is bounded by
 *    limits.max_depth;
 *  - rejects inputs over limits.max_bytes and documents over limits.max_nodes
 *    values, so memory is bounded by a small multiple of the input size;
 *  - is strict: no comments, trailing commas, single quotes, NaN/Infinity,
 *    leading zeros or '+'; strings must be valid UTF-8 without raw control
 *    characters; escapes must be the JSON ones with paired surrogates;
 *  - rejects "\u0000" so that every string is a plain C string;
 *  - rejects numbers whose value overflows a double (1e999);
 *  - keeps duplicate object keys (mt__json_get returns the first).
 * Numbers are converted with strtod under the C locale's decimal point, so a
 * host program's setlocale cannot change what is parsed. */
#ifndef MTGPU_JSON_H
#define MTGPU_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

typedef enum mt_json_type {
    MT_JSON_NULL,
    MT_JSON_FALSE,
    MT_JSON_TRUE,
    MT_JSON_NUMBER,
    MT_JSON_STRING,
    MT_JSON_ARRAY,
    MT_JSON_OBJECT
} mt_json_type;

typedef struct mt_json mt_json;
struct mt_json {
    mt_json_type type;
    double num;       /* NUMBER */
    int is_int;       /* NUMBER written without fraction or exponent and within int64 */
    int64_t ival;     /* NUMBER when is_int */
    const char *str;  /* STRING: NUL-terminated, UTF-8; len bytes */
    size_t len;
    const char *key;  /* members of an OBJECT: the member's name; else NULL */
    size_t count;     /* ARRAY, OBJECT: number of children */
    mt_json *child;   /* ARRAY, OBJECT: first child */
    mt_json *next;    /* next sibling in the parent */
};

typedef struct mt_json_limits {
    size_t max_bytes; /* longest input accepted (default 1 MiB) */
    size_t max_depth; /* deepest nesting of arrays/objects (default 64) */
    size_t max_nodes; /* most values in one document (default 100000) */
} mt_json_limits;

mt_json_limits mt__json_default_limits(void);

/* A parsed document: owns every node and string. */
typedef struct mt_json_doc mt_json_doc;

/* Parses text[0..len) as one JSON value with optional surrounding
 * whitespace. limits may be NULL (defaults). On success *out owns the DOM
 * (free with mt__json_free) and its root is mt__json_root(*out). On failure
 * *out is NULL and err says what and at which byte offset: MT_PARSE for
 * malformed text, MT_RANGE for a limit exceeded or a number that overflows,
 * MT_NOMEM. */
mt_status mt__json_parse(const char *text, size_t len, const mt_json_limits *limits, mt_json_doc **out, char *err, size_t errlen);
void mt__json_free(mt_json_doc *doc);
const mt_json *mt__json_root(const mt_json_doc *doc);

/* The first member of obj named key; NULL if obj is not an object or has none. */
const mt_json *mt__json_get(const mt_json *obj, const char *key);
/* Element i of an array (or member i of an object); NULL when out of range.
 * Linear in i. */
const mt_json *mt__json_at(const mt_json *arr, size_t i);
/* Type tests that accept NULL. */
int mt__json_is(const mt_json *v, mt_json_type t);
/* The value as an int when it is an integer NUMBER within [lo, hi]; returns 1
 * and sets *out, else 0. */
int mt__json_int(const mt_json *v, int64_t lo, int64_t hi, int64_t *out);

#endif
