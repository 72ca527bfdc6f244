/* GNN scoring on a CUDA GPU: the scorer of gnn/gnn.h with its forward on
 * the device (cuBLAS for the GEMMs, the CUDA module's own kernels for the
 * rest; cuda/module/gnn.c). Training and adaptation steps stay on the CPU.
 *
 * Same numbers as the CPU within a stated tolerance: every operation but
 * the GEMMs gives the CPU's bits on the same inputs, and the GEMMs (fp32,
 * no TF32) sum in another order, so per graph
 *     |s_gpu - s_cpu| <= MT_GNN_GPU_RTOL * max(|s_cpu| over the batch) + MT_GNN_GPU_ATOL
 * (tests/test_gnn_gpu.c checks it on encoded candidates of every template
 * and architecture).
 *
 * The device: cuda:0, opened once per process on the first call of
 * mt_gnn_gpu_available and kept; MTGPU_GNN_DEVICE=cpu turns the GPU path
 * off (mt_gnn_gpu_available reports why), MTGPU_GNN_DEVICE=cuda:N picks
 * another device. A scorer uploads the model's weights on the first run and
 * again whenever they changed since (compared with a host copy of what it
 * uploaded), so one scorer follows a model that is trained or adapted
 * between runs. Scorers are thread-safe (a mutex each; the device's stream
 * is held for the whole of a run), but the cost model gives each model one
 * GPU scorer, used by the thread that called predict. */
#ifndef MTGPU_GNN_GPU_H
#define MTGPU_GNN_GPU_H

#include <stddef.h>

#include "gnn.h"
#include "graph.h"
#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_GNN_GPU_RTOL 1e-4
#define MT_GNN_GPU_ATOL 1e-6

/* MT_OK when GNN scoring can run on a GPU here: MTGPU_GNN_DEVICE is not
 * "cpu", the CUDA module loads and has the GNN members, cuBLAS loads and
 * the device opens; otherwise MT_UNAVAILABLE with the reason. Decided once
 * per process (thread-safe). why gets the device on success. */
mt_status mt_gnn_gpu_available(char *why, size_t whylen);

typedef struct mt_gnn_gpu_scorer mt_gnn_gpu_scorer;
/* A GPU scorer of model m for one shape (compiles the kernels on the first
 * scorer of the process). MT_UNAVAILABLE as mt_gnn_gpu_available;
 * MT_INVALID_ARG for a malformed shape; MT_BUILD, MT_DEVICE, MT_NOMEM from
 * the device with the failing call named. *out is NULL on failure. The
 * scorer must be freed before the model. */
mt_status mt_gnn_gpu_scorer_create(const mt_gnn *m, const mt_graph_shape *shape, mt_gnn_gpu_scorer **out, char *err, size_t errlen);
/* Scores B graphs (feats as mt_gnn_score takes them) into scores[B]. */
mt_status mt_gnn_gpu_scorer_run(mt_gnn_gpu_scorer *s, int B, const float *feats, float *scores, char *err, size_t errlen);
int mt_gnn_gpu_scorer_matches(const mt_gnn_gpu_scorer *s, const mt_graph_shape *shape);
void mt_gnn_gpu_scorer_free(mt_gnn_gpu_scorer *s);

#ifdef __cplusplus
}
#endif
#endif
