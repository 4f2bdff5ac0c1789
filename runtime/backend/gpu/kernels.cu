// Every kernel of the gpu backend: one generic element kernel (element_kernel.h says what each
// element computes) and the ring sum of cross_replica_sum. Nothing here is fused or tiled: the
// backend exists to cross-check numerics, and one thread per output element keeps every sum in
// the cpu kernels' order. Built with nvcc's defaults (IEEE division and sqrt; contraction into
// FMA cannot change these kernels, whose float arithmetic has no multiply feeding an add).
#include <algorithm>

#include "runtime/backend/gpu/kernels.h"

namespace tpusim::runtime::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

int blocks_for(int64_t count) {
  return static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

__global__ void element_kernel(ElementPlan plan, const void* a, const void* b, const void* c,
                               void* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < plan.count;
       e += stride) {
    eval_element(plan, a, b, c, out, e);
  }
}

__global__ void ring_sum_kernel(const void* const* parts, uint64_t k, uint64_t n, bool is_int,
                                void* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (is_int) {
      static_cast<int32_t*>(out)[i] =
          element::ring_sum_element(reinterpret_cast<const int32_t* const*>(parts), k, n, i);
    } else {
      static_cast<float*>(out)[i] =
          element::ring_sum_element(reinterpret_cast<const float* const*>(parts), k, n, i);
    }
  }
}

}  // namespace

cudaError_t launch_elements(const ElementPlan& plan, const void* a, const void* b, const void* c,
                            void* out) {
  if (plan.count <= 0) return cudaSuccess;
  element_kernel<<<blocks_for(plan.count), kThreads>>>(plan, a, b, c, out);
  return cudaGetLastError();
}

cudaError_t launch_ring_sum(const void* const* parts, uint64_t k, uint64_t n, bool is_int,
                            void* out) {
  if (n == 0) return cudaSuccess;
  ring_sum_kernel<<<blocks_for(static_cast<int64_t>(n)), kThreads>>>(parts, k, n, is_int, out);
  return cudaGetLastError();
}

}  // namespace tpusim::runtime::gpu
