/* libFuzzer harness: one AutoTVM log line through the strict JSON parser and
 * the importer's line decoder (mt_autotvm_decode).
 *
 * The input is copied to a buffer of exactly its size, so that AddressSanitizer
 * flags any read past the end. Seeds: tests/data/tophub/ *.log split into lines. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "autotvm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Visits every node iteratively (the DOM may be as deep as the depth limit). */
static size_t walk(const mt_json *root) {
    size_t n = 0, chars = 0;
    const mt_json *stack[128];
    size_t top = 0;
    if (root) stack[top++] = root;
    while (top) {
        const mt_json *v = stack[--top];
        n++;
        if (v->type == MT_JSON_STRING) chars += strlen(v->str) == v->len;
        if (v->key) chars += strlen(v->key);
        for (const mt_json *c = v->child; c; c = c->next)
            if (top < sizeof stack / sizeof stack[0]) stack[top++] = c;
    }
    return n + chars;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);

    mt_json_doc *doc = NULL;
    char err[256];
    mt_json_limits lim = mt__json_default_limits();
    lim.max_depth = 100;
    if (mt__json_parse(buf, size, &lim, &doc, err, sizeof err) == MT_OK) {
        volatile size_t sink = walk(mt__json_root(doc));
        (void)sink;
        mt__json_free(doc);
    }

    mt_record *rec = malloc(sizeof *rec);
    if (rec) {
        char target[160];
        mt_autotvm_outcome o = mt_autotvm_decode(buf, size, rec, target, sizeof target, err, sizeof err);
        if (o == MT_AUTOTVM_IMPORTED) {
            /* A decoded record is always storable. */
            if (mt_workload_validate(&rec->wl, NULL, 0) != MT_OK || rec->ncosts < 0 || rec->ncosts > MT_RECORD_MAX_COSTS ||
                strlen(rec->config) == 0 || strlen(rec->device) != 16)
                abort();
        }
        free(rec);
    }
    free(buf);
    return 0;
}
