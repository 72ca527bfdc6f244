/* mtgpu tune under MPI (cli/mpi_tune.c, built with MTGPU_MPI only): rank 0
 * tunes and writes the database, the other ranks measure what it deals them. */
#ifndef MTGPU_CLI_MPI_TUNE_H
#define MTGPU_CLI_MPI_TUNE_H

#include <stddef.h>

#include "mtgpu/tuner.h"

/* Joins the MPI job this process was started in (mpirun, srun), if any:
 * 1 with *rank and *size set, 0 when not started by a launcher (size 1,
 * MPI untouched), -1 when MPI_Init failed (printed). */
int mt_cli_mpi_begin(int *rank, int *size);
/* Leaves the job; clean 0 after a rank was lost (finalizing would wait for it). */
void mt_cli_mpi_end(int clean);
/* Ranks 1..size-1: measures what rank 0 deals with a measurer of params mp
 * until rank 0 says quit; returns the exit status. */
int mt_cli_mpi_serve(const mt_measurer_params *mp, int rank);
/* Rank 0: mt_tune with every batch dealt to ranks 1..size-1. *clean: 0 when
 * a rank was lost with a measurement in flight. */
mt_status mt_cli_mpi_tune(const mt_task *tasks, int ntasks, const mt_tune_params *p, int size, mt_tune_summary *out, int *clean, char *err,
                          size_t errlen);

#endif
