/* Private to the tuning loop (tuner.c) and its parts: where records go (the
 * record sink), and the template-list test shared with collect and replay. */
#ifndef MTGPU_TUNE_IMPL_H
#define MTGPU_TUNE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/records.h"
#include "mtgpu/status.h"

/* Whether name is in the comma-separated list (NULL or "": every template). */
int mt__template_selected(const char *list, const char *name);

/* Where a tuning run's records go. The run names its device first; then
 * every record it makes passes through put, one call per record, in the
 * order measured, and the progress callback receives the records put got.
 * for_each walks what is stored already (resuming). A sink is made by one of
 * the mt__sink_* constructors below and closed once with mt__sink_close. */
typedef struct mt__sink_i {
    /* Registers the device the records are of (called once, before any put). */
    mt_status (*device)(void *ctx, const mt_device_info *dev, char *err, size_t errlen);
    /* Stores rec; an error stops the run (message in err). */
    mt_status (*put)(void *ctx, const mt_record *rec, char *err, size_t errlen);
    /* Calls cb for each stored record matching f, as mt_db_for_each_counted
     * (damaged rows passed over are counted into *damaged). NULL: nothing is stored. */
    mt_status (*for_each)(void *ctx, const mt_db_filter *f, int (*cb)(const mt_record *rec, void *user), void *user, int64_t *damaged,
                          char *err, size_t errlen);
    void (*close)(void *ctx);
} mt__sink_i;

typedef struct mt__sink {
    const mt__sink_i *iface;
    void *ctx;
} mt__sink;

/* The records database at path (NULL: mt_db_default_path; created when
 * missing): the sink of a normal run, and of a replay that keeps its records. */
mt_status mt__sink_db(const char *path, mt__sink *out, char *err, size_t errlen);
/* A sink that keeps nothing and holds nothing to resume from. */
void mt__sink_none(mt__sink *out);
void mt__sink_close(mt__sink *s);

#endif
