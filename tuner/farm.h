/* Private: measuring a tuning run's candidates somewhere other than its own
 * measurer (tuner/measurer.h): on other processes or machines, e.g. the
 * ranks of an MPI job (cli/mpi_tune.c). The tuning loop is the same; only
 * where each batch is measured changes. */
#ifndef MTGPU_FARM_H
#define MTGPU_FARM_H

#include <stddef.h>

#include "measurer.h"
#include "mtgpu/tuner.h"

typedef struct mt__farm_i {
    /* Gets ready to measure with p (its stop flag included) and describes
     * the device the records will be of into *info. */
    mt_status (*start)(void *ctx, const mt_measurer_params *p, mt_device_info *info, char *err, size_t errlen);
    /* As mt_measurer_measure_batch; a result measured on a device of another
     * fingerprint names it in results[i].device. */
    mt_status (*measure_batch)(void *ctx, const mt_workload *wl, const mt_template *t, const mt_space *sp, const mt_config *cfgs, int n,
                               mt_measurer_result *results, char *err, size_t errlen);
    /* Ends what start began (called once when start succeeded). */
    void (*stop)(void *ctx);
} mt__farm_i;

typedef struct mt__farm {
    const mt__farm_i *iface;
    void *ctx;
} mt__farm;

/* mt_tune with every batch measured by farm (NULL: by the run's own
 * measurer, as mt_tune). p->measurer goes to farm->start. */
mt_status mt__tune_farmed(const mt_task *tasks, int ntasks, const mt_tune_params *p, const mt__farm *farm, mt_tune_summary *out, char *err,
                          size_t errlen);

#endif
