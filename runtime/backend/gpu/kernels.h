#pragma once
// The gpu backend's CUDA kernels (kernels.cu), launched on the legacy default stream. Each
// returns the launch's error (cudaSuccess when it was queued); faults while a kernel runs show
// up at the next synchronising call.

#include <cstdint>

#include <cuda_runtime_api.h>

#include "runtime/backend/gpu/element_kernel.h"

namespace tpusim::runtime::gpu {

// One thread per element of `plan` (plan.count of them, grid-stride): eval_element with inputs
// a, b, c (device pointers, null where the kind reads none) into `out`.
cudaError_t launch_elements(const ElementPlan& plan, const void* a, const void* b, const void* c,
                            void* out);

// out[i] = element::ring_sum_element(parts, k, n, i) for i < n: `parts` is a device array of k
// device pointers, each to n floats (or int32s when `is_int`).
cudaError_t launch_ring_sum(const void* const* parts, uint64_t k, uint64_t n, bool is_int,
                            void* out);

}  // namespace tpusim::runtime::gpu
