#pragma once
// Tensor storage recycled across a cpu backend loop. A step makes and drops one tensor per node,
// many of them tens of MB (a convolution's patches); from fresh allocations each step the kernel
// spent a third of mnist_cnn's step zeroing new pages and unmapping old ones. A dropped tensor's
// vector goes back to the backend's pool and the next tensor of at most its size takes it.

#include <vector>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime::cpu {

// Recycled vectors, largest kept. A cpu backend owns one and lends it to its loops' kernels
// (PoolScope), as a framework's allocator keeps device memory between steps.
struct BufferPool {
  std::vector<std::vector<float>> f;
  std::vector<std::vector<int32_t>> i;
};

// Makes `pool` the one new_tensor and recycle use on this thread until the scope ends (kernels
// run on the thread that runs the loop; their OpenMP workers allocate nothing).
class PoolScope {
 public:
  explicit PoolScope(BufferPool& pool);
  ~PoolScope();
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  BufferPool* previous_;
};

// What a new tensor holds: zeros, or whatever its recycled storage held, for a kernel that
// writes every element (no pass to zero what it overwrites).
enum class Init { kZeros, kOverwritten };

// A tensor like HostTensor::zeros, on recycled storage where this thread's pool has some (none
// outside a PoolScope).
HostTensor new_tensor(DType dtype, const Shape& shape, Init init = Init::kZeros);

// Gives `t`'s storage to this thread's pool, if any (`t` is left empty).
void recycle(HostTensor& t);

}  // namespace tpusim::runtime::cpu
