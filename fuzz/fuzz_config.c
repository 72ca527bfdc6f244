/* libFuzzer harness for mt_config_parse (config text from tuning records and
 * AutoTVM logs) against a fixed space shaped like the direct template's.
 *
 * Any input must parse or fail cleanly; an accepted config must be in the
 * space, its index must map back to it, and its text form must parse back to
 * the same config. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"

static mt_space space;
static int ready;

static void build_space(void) {
    static const int steps[] = {0, 512, 1500};
    static const int unroll[] = {0, 1};
    static const int neg[] = {-7, 0, 2147483647, -2147483647 - 1};
    mt_space_init(&space, "fuzz");
    if (mt_space_add_split(&space, "tile_f", 64, 4, MT_SPLIT_FACTOR, 0) != MT_OK ||
        mt_space_add_split(&space, "tile_y", 56, 4, MT_SPLIT_FACTOR, 0) != MT_OK ||
        mt_space_add_split(&space, "tile_x", 56, 4, MT_SPLIT_POW2, 64) != MT_OK ||
        mt_space_add_split(&space, "tile_rc", 12, 2, MT_SPLIT_FACTOR, 0) != MT_OK ||
        mt_space_add_split(&space, "tile_ry", 3, 1, MT_SPLIT_FACTOR, 0) != MT_OK ||
        mt_space_add_enum(&space, "auto_unroll_max_step", steps, 3) != MT_OK ||
        mt_space_add_enum(&space, "unroll_explicit", unroll, 2) != MT_OK ||
        mt_space_add_enum(&space, "x", neg, 4) != MT_OK)
        abort();
    ready = 1;
}

static int same(const mt_config *a, const mt_config *b) {
    if (a->nknobs != b->nknobs) return 0;
    for (int i = 0; i < a->nknobs; i++)
        if (a->choice[i] != b->choice[i]) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) build_space();
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    mt_config cfg, back;
    char err[160];
    memset(&cfg, 0xab, sizeof cfg);
    mt_config untouched = cfg;
    mt_status st = mt_config_parse(&space, text, &cfg, err, sizeof err);
    if (st != MT_OK) {
        if (st != MT_PARSE && st != MT_INVALID_CONFIG) abort();
        if (err[0] == '\0') abort();
        if (memcmp(&cfg, &untouched, sizeof cfg) != 0) abort(); /* untouched on error */
        free(text);
        return 0;
    }
    if (mt_space_check(&space, &cfg) != MT_OK) abort();

    uint64_t index = mt_space_config_index(&space, &cfg);
    if (index >= mt_space_size(&space)) abort();
    if (mt_space_config_from_index(&space, index, &back) != MT_OK || !same(&cfg, &back)) abort();

    char canon[1024];
    int n = mt_config_format(&space, &cfg, canon, sizeof canon);
    if (n <= 0 || n >= (int)sizeof canon) abort();
    if (mt_config_parse(&space, canon, &back, err, sizeof err) != MT_OK) {
        fprintf(stderr, "canonical form '%s' does not parse: %s\n", canon, err);
        abort();
    }
    if (!same(&cfg, &back)) abort();

    /* Neighbours of an accepted config stay in the space. */
    mt_config nb[8];
    int total = mt_space_neighbours(&space, &cfg, nb, 8);
    if (total < 8) abort();
    for (int i = 0; i < 8; i++)
        if (mt_space_check(&space, &nb[i]) != MT_OK) abort();
    free(text);
    return 0;
}
