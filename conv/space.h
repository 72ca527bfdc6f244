/* Knob spaces and configs (AutoTVM's ConfigSpace, in C).
 *
 * A space is a list of knobs. A SPLIT knob divides one extent into `nparts`
 * factors (outermost first); an ENUM knob picks one integer from a list. A
 * config picks one option per knob. Configs map to a dense index (mixed radix,
 * first knob varying fastest, as AutoTVM numbers them) and back, and have a
 * stable text form "tile_f=4x1x16x1,...,unroll_explicit=1" in knob order. */
#ifndef MTGPU_SPACE_H
#define MTGPU_SPACE_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_MAX_KNOBS 16
#define MT_MAX_SPLIT_PARTS 4
#define MT_KNOB_NAME_LEN 32

typedef enum mt_knob_kind { MT_KNOB_SPLIT, MT_KNOB_ENUM } mt_knob_kind;

typedef enum mt_split_policy {
    MT_SPLIT_FACTOR, /* ordered factorizations: the parts multiply to exactly `extent` */
    MT_SPLIT_POW2    /* inner parts are powers of two with product <= max_inner; the
                        outer part is ceil(extent / product); tiles may overhang */
} mt_split_policy;

typedef struct mt_knob {
    char name[MT_KNOB_NAME_LEN];
    mt_knob_kind kind;
    int nparts;   /* SPLIT: number of factors; ENUM: 1 */
    int noptions;
    int *values;  /* noptions * nparts integers, option-major; owned by the space */
} mt_knob;

typedef struct mt_space {
    char template_name[16];
    int nknobs;
    mt_knob knobs[MT_MAX_KNOBS];
} mt_space;

typedef struct mt_config {
    int nknobs;
    int choice[MT_MAX_KNOBS]; /* option index per knob */
} mt_config;

void mt_space_init(mt_space *sp, const char *template_name);
/* Frees the option tables; the space may be re-initialised afterwards. */
void mt_space_free(mt_space *sp);

/* Adds a SPLIT knob. FACTOR: every ordered way to write extent as a product of
 * nparts factors. POW2: inner parts each a power of two, their product at most
 * max_inner (<= 0: no limit beyond the next power of two of extent). */
mt_status mt_space_add_split(mt_space *sp, const char *name, int extent, int nparts, mt_split_policy policy, int max_inner);
/* Adds an ENUM knob whose options are values[0..n). */
mt_status mt_space_add_enum(mt_space *sp, const char *name, const int *values, int n);

/* Number of configs (saturates at UINT64_MAX). */
uint64_t mt_space_size(const mt_space *sp);
mt_status mt_space_config_from_index(const mt_space *sp, uint64_t index, mt_config *cfg);
uint64_t mt_space_config_index(const mt_space *sp, const mt_config *cfg);
/* MT_INVALID_CONFIG if the config does not belong to this space. */
mt_status mt_space_check(const mt_space *sp, const mt_config *cfg);
/* A uniformly random config; *rng is advanced (see mt_rng_next). */
void mt_space_random(const mt_space *sp, uint64_t *rng, mt_config *cfg);
/* Writes up to max configs that differ from cfg in exactly one knob; returns
 * how many there are in total (which may exceed max). */
int mt_space_neighbours(const mt_space *sp, const mt_config *cfg, mt_config *out, int max);

/* The values of knob `name` in cfg (nparts integers), or NULL if no such knob. */
const int *mt_config_get(const mt_space *sp, const mt_config *cfg, const char *name);
/* Like mt_config_get for a knob the template itself declared: the first value. */
int mt_config_value(const mt_space *sp, const mt_config *cfg, const char *name);
int mt_config_format(const mt_space *sp, const mt_config *cfg, char *buf, size_t len);
/* Parses the text form; every knob must be given once with one of its options.
 * On error *cfg is untouched and err names the knob. */
mt_status mt_config_parse(const mt_space *sp, const char *text, mt_config *cfg, char *err, size_t errlen);

/* splitmix64: deterministic for a given seed. */
uint64_t mt_rng_next(uint64_t *state);
/* Uniform in [0, n). */
uint64_t mt_rng_below(uint64_t *state, uint64_t n);

#ifdef __cplusplus
}
#endif
#endif
