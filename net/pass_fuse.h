/* Private: consecutive kernel launches of a forward pass as one launch.
 *
 * On PoCL's CPU device every launch costs the pass twice over: between two
 * kernels the worker that finished the first resolves the next command and
 * prepares it while the other sleeps (8-15 us per launch inside MobileNetV2
 * and ResNet-50, bench/launch_gaps/results/), and the sleeping worker joins
 * the next kernel late (17.5 us per layer beyond an even split of
 * MobileNetV2's convolutions against oneDNN's 7.1,
 * bench/core_scaling/results/mobilenet_v2.md).
 *
 * A fused launch runs one work-group per compute unit. Each work-group
 * goes through the launches in order; for each it claims chunks of the
 * launch's work-groups from counters (its own share first, then what is
 * left of the others'), runs them as calls of the kernel's code turned
 * into a function, adds what it ran to a done counter, and waits until
 * that counter holds every work-group of the launch before it starts the
 * next one. A work-group that starts late finds the work claimed and goes
 * on; no work-group waits for one that has not claimed anything, so a
 * device that runs the work-groups one after the other still finishes.
 * The counters live in a buffer allocated zeroed; each fused launch leaves
 * its counters zeroed again for the next pass. */
#ifndef MTGPU_PASS_FUSE_H
#define MTGPU_PASS_FUSE_H

#include <stddef.h>
#include <stdint.h>

#include "mtgpu/status.h"

/* One launch of a fused pass. */
typedef struct mt__fuse_launch {
    const char *src;    /* OpenCL C holding the kernel (mt_kernel_print's, or the op kernels') */
    const char *kernel; /* the kernel's name; NULL: the source's only __kernel */
    int nargs;          /* its buffer parameters, in order */
    const int *arg;     /* each one's index among the fused kernel's buffers */
    const int64_t *arg_offset; /* and its first float in that buffer (NULL: all 0): views of one
                                  allocation go as that allocation and offsets */
    int64_t grid[3];    /* work-groups per axis */
    int64_t block[3];   /* work-items per work-group */
    int counters;       /* its counters: sync[counters * MT__FUSE_COUNTERS] on, MT__FUSE_COUNTERS of them */
} mt__fuse_launch;

/* Ranges a launch's work-groups are cut into (one per work-group of the
 * fused launch, at most this many), and the counters each launch takes:
 * one per range, its done counter, and (the first launch's) the count of
 * work-groups that have finished the fused launch. The last of them zeroes
 * every counter of the fused launch for the next pass, so counters start
 * at zero when allocated zeroed and after every pass that completes. */
#define MT__FUSE_RANGES 64
#define MT__FUSE_COUNTERS (MT__FUSE_RANGES + 2)

/* Whether kernel `kernel` of src (NULL: its only one) can run inside a fused
 * launch with work-groups of block work-items: no barrier, atomic, fence or
 * query of the launch's size, and at most one __local array (of floats,
 * only with one work-item per group), which becomes scratch memory. */
int mt__fuse_can(const char *src, const char *kernel, const int64_t block[3]);

/* Writes *out (malloc'd) the OpenCL C of __kernel `name`, whose parameters
 * are `__global int *sync`, `__global float *scratch` (*scratch_floats
 * floats for each work-group of the launch), `__global ulong *clock` and
 * nbufs float buffers, and which runs the n launches in order. Identical
 * kernel sources become one function. MT_INVALID_ARG for a source
 * mt__fuse_can rejects; MT_NOMEM.
 *
 * The clock: work-group g of G writes, for launch l, MT__FUSE_STAMPS
 * time-stamp counter readings at clock[(l.counters * G + g) * 3]: when it
 * started the launch, when it had run its share, and when its wait for
 * the others ended. Where OpenCL C cannot read the counter (not x86-64
 * under clang) the readings are 0. Every pass writes them (three counter
 * reads and stores per launch and work-group) and a profile reads them. */
#define MT__FUSE_STAMPS 3
mt_status mt__fuse_source(const mt__fuse_launch *l, int n, int nbufs, const char *name, char **out, int64_t *scratch_floats, char *err,
                          size_t errlen);

#endif
