/* Private to the CUDA module: the visibility of its internal symbols. The
 * module is dlopen'ed into programs that link libmtgpu statically, and a
 * default-visibility mt__ symbol here would be interposed by (or interpose)
 * one of libmtgpu's. */
#ifndef MTGPU_CUDA_MODULE_HIDDEN_H
#define MTGPU_CUDA_MODULE_HIDDEN_H

#if defined(__GNUC__)
#define MT__CUDA_HIDDEN __attribute__((visibility("hidden")))
#else
#define MT__CUDA_HIDDEN
#endif

#endif
