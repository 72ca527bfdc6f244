/* Network weights: named fp32 tensors, generated or loaded from a file.
 *
 * Tensors are named after torchvision's state_dict keys, from the layer names
 * of mtgpu/net.h:
 *   CONV2D  "<layer>.weight"        (k, c/groups, r, s)
 *           "<layer>.bias"          (k)                  when conv.bias
 *           "<bn>.weight", "<bn>.bias", "<bn>.running_mean", "<bn>.running_var"
 *                                   (k each)             when conv.batch_norm; <bn> is conv.bn_name
 *                                                        (or "<layer>.bn" when that is empty)
 *   DENSE   "<layer>.weight"        (out_features, in_features)
 *           "<layer>.bias"          (out_features)       when dense.bias
 * Other layers have no parameters. Batch norm is inference batch norm with
 * eps = MT_BN_EPS: y = (x - mean) / sqrt(var + eps) * weight + bias.
 *
 * The file format (version MT_WEIGHTS_VERSION) is described in net/WEIGHTS.md.
 * A weights set is immutable once made and may be read from any number of
 * threads at once. */
#ifndef MTGPU_WEIGHTS_H
#define MTGPU_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/net.h"
#include "mtgpu/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_WEIGHTS_VERSION 1
#define MT_WEIGHT_NAME_MAX 96 /* bytes of a tensor name, including the NUL */
#define MT_WEIGHT_MAX_DIMS 4
#define MT_BN_EPS 1e-5

typedef struct mt_weights mt_weights;

/* Deterministic pseudo-random weights for every tensor net needs: each
 * tensor's values depend only on seed and the tensor's name. Conv and dense
 * weights are uniform with He variance 2 / fan_in, biases and batch-norm
 * shifts small, batch-norm scales in [0.5, 1) and variances in [0.5, 1.5), so
 * that activations stay finite and of order 1 through ResNet-50. Returns the
 * network's sticky error, MT_INVALID_ARG or MT_NOMEM; on success *out is a
 * new set freed with mt_weights_free. */
mt_status mt_weights_random(const mt_network *net, uint64_t seed, mt_weights **out, char *err, size_t errlen);

/* Reads a weights file and checks it against net: the magic, version and
 * checksum, that every tensor lies within the file, and that the file holds
 * exactly the tensors net needs (by name) with the right shapes. Only a
 * regular file is read, and no more of it than net's weights take: a FIFO or
 * a device (/dev/zero) is refused unread (MT_IO), a file longer than net's
 * weights file is refused after one fstat (MT_CORRUPT). Errors: MT_IO
 * (cannot open or read, not a regular file), MT_CORRUPT (not a weights file,
 * unknown version, truncated or too long, checksum mismatch, a wrong shape, a
 * duplicate or unexpected tensor), MT_NOT_FOUND (a tensor net needs is
 * missing), MT_NOMEM; the message names the file and the tensor. On failure
 * *out is untouched. */
mt_status mt_weights_load(const char *path, const mt_network *net, mt_weights **out, char *err, size_t errlen);

/* Writes w to path through a temporary file in the same directory, flushed,
 * fsynced and renamed into place, so a failed save (a full disk) leaves any
 * previous file as it was. MT_IO on failure, with the reason. */
mt_status mt_weights_save(const mt_weights *w, const char *path, char *err, size_t errlen);

void mt_weights_free(mt_weights *w);

/* Number of tensors, and their total size in bytes (fp32). */
int mt_weights_count(const mt_weights *w);
int64_t mt_weights_bytes(const mt_weights *w);

/* Tensor i (0 <= i < count) in file order: its name, rank, dims and data,
 * owned by w. MT_RANGE when i is out of range. Any out pointer may be NULL. */
mt_status mt_weights_tensor(const mt_weights *w, int i, const char **name, int *ndim, int64_t dims[MT_WEIGHT_MAX_DIMS], const float **data);

/* The data of the tensor called name, or NULL when absent; *count (may be
 * NULL) gets its number of elements. */
const float *mt_weights_find(const mt_weights *w, const char *name, int64_t *count);

/* The name of the batch norm folded into conv layer l ("<bn_name>" or
 * "<layer>.bn"), written into buf (MT_WEIGHT_NAME_MAX bytes is enough). */
void mt_weights_bn_prefix(const mt_layer *l, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
