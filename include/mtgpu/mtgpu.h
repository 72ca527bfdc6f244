/* mtgpu: the whole public API in one header.
 *
 *   status.h    mt_status codes and their names (the error rule: docs/api.md)
 *   version.h   the library version
 *   workload.h  convolution workloads and weight layouts
 *   device.h    devices and their buffers
 *   records.h   the tuning-records database
 *   net.h       networks of the model zoo and their convolution tasks
 *   weights.h   a network's weights
 *   executor.h  running a network with its tuned kernels
 *   embed.h     the tuned kernel of one convolution, for inference servers
 *   tuner.h     tuning a network or a workload (a build with MTGPU_TUNING=ON)
 */
#ifndef MTGPU_MTGPU_H
#define MTGPU_MTGPU_H

#include "mtgpu/status.h"
#include "mtgpu/version.h"
#include "mtgpu/workload.h"
#include "mtgpu/device.h"
#include "mtgpu/records.h"
#include "mtgpu/net.h"
#include "mtgpu/weights.h"
#include "mtgpu/executor.h"
#include "mtgpu/embed.h"
#include "mtgpu/tuner.h"

#endif
