/* Private to the CUDA module: parsing ptxas's resource report. */
#ifndef MTGPU_PTXAS_LOG_H
#define MTGPU_PTXAS_LOG_H

#include "cuda_backend.h"
#include "module-hidden.h"

/* Reads the report that nvJitLink -verbose (ptxas and the finalizer) writes
 * to its info log, for kernel `name` (NULL or "": the first kernel reported),
 * into *out: registers, static shared memory, stack frame / lmem, spills,
 * constant bank 0, barriers. Fields the log does not mention are left as
 * they are (cubin_bytes is never touched). The log is untrusted text: any
 * input is accepted, numbers saturate at INT_MAX.
 * Returns 1 when a register count for the kernel was found, 0 otherwise. */
MT__CUDA_HIDDEN int mt__cuda_parse_info_log(const char *log, const char *name, mt_cuda_resources *out);

/* A lower bound on the static shared memory (bytes) that entry `name`
 * (NULL or "": the first entry) of PTX text declares: the sum of its
 * function-scope ".shared" arrays, plus module-scope ones when the PTX has a
 * single entry. Declarations it cannot read count as 0, so the result never
 * overstates; it is meant for rejecting a kernel before linking. */
MT__CUDA_HIDDEN long long mt__cuda_ptx_shared_bytes(const char *ptx, const char *name);

#endif
