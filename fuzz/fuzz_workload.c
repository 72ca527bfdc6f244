/* libFuzzer harness for mt_workload_parse (command-line and database keys).
 *
 * Any input must parse or fail cleanly (the sanitizers catch the rest); an
 * accepted workload must validate, and its canonical text must parse back to
 * the same workload and format to the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtgpu/workload.h"

static int same(const mt_workload *a, const mt_workload *b) {
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k && a->r == b->r && a->s == b->s &&
           a->stride_h == b->stride_h && a->stride_w == b->stride_w && a->pad_h == b->pad_h && a->pad_w == b->pad_w &&
           a->dil_h == b->dil_h && a->dil_w == b->dil_w && a->groups == b->groups;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    mt_workload wl, back;
    char err[128], err2[128];
    /* A small error buffer too, to exercise truncation. */
    char tiny[5];
    mt_status st = mt_workload_parse(text, &wl, err, sizeof err);
    mt_status st_tiny = mt_workload_parse(text, &back, tiny, sizeof tiny);
    if (st != st_tiny) abort();
    if (st != MT_OK) {
        if (st != MT_PARSE && st != MT_RANGE) abort();
        if (err[0] == '\0') abort(); /* every error says something */
        free(text);
        return 0;
    }
    if (mt_workload_validate(&wl, err, sizeof err) != MT_OK) abort();

    char canon[256], canon2[256];
    int n = mt_workload_format(&wl, canon, sizeof canon);
    if (n <= 0 || n >= (int)sizeof canon || (size_t)n != strlen(canon)) abort();
    if (mt_workload_parse(canon, &back, err2, sizeof err2) != MT_OK) {
        fprintf(stderr, "canonical form '%s' does not parse: %s\n", canon, err2);
        abort();
    }
    if (!same(&wl, &back)) abort();
    mt_workload_format(&back, canon2, sizeof canon2);
    if (strcmp(canon, canon2) != 0) abort();

    /* Derived sizes of a valid workload are positive and within the 2^31 limit. */
    if (mt_workload_out_h(&wl) < 1 || mt_workload_out_w(&wl) < 1) abort();
    if (mt_workload_input_elems(&wl) >= INT32_MAX || mt_workload_weight_elems(&wl) >= INT32_MAX ||
        mt_workload_output_elems(&wl) >= INT32_MAX)
        abort();
    if (!(mt_workload_flops(&wl) > 0)) abort();
    free(text);
    return 0;
}
