/* PoCL's CPU device runs a kernel's work-groups on one worker thread per
 * core. Left to the Linux scheduler, the workers of a kernel launched after
 * the host thread has been busy (a cold timing flushes the weights between
 * runs) often end up on one core: ResNet-50's convolutions timed alone and
 * cold took 1.59x their time inside the network's passes, pinned one worker
 * per core 0.94x (bench/alone_vs_network/results/resnet50.md). PoCL pins
 * them when POCL_AFFINITY is set before it starts its threads. */
#ifndef MT_POCL_AFFINITY_H
#define MT_POCL_AFFINITY_H

/* Sets POCL_AFFINITY=1 in the environment, once per process, before the
 * first OpenCL call, unless it is set already (the user's choice stands) or
 * the process may not run on every online CPU: PoCL pins worker i to CPU i,
 * and some of its versions abort when that CPU is not allowed. Returns 1
 * when it set the variable. */
int mt_pocl_pin_workers(void);

#endif
