#pragma once
// Where batch g of a GEMM whose sums are split along K reads an operand (gemm_call.h's
// split_long_sums): the batches are groups (the products before the split: a step's replicas,
// or a product's own batches) of `chunks` chunks of K each, so batch g is chunk g % chunks of
// group g / chunks. Shared by the host's plan and tests and the kernel that writes the batches'
// pointers for cuBLAS.

#include <cstdint>

#include "sim/numerics/host_device.h"

namespace tpusim::runtime::gpu {

// The element offset of batch g's operand, `group_stride` elements between groups and
// `chunk_stride` between a group's chunks.
TPUSIM_HOST_DEVICE inline int64_t split_batch_offset(int64_t g, int64_t chunks,
                                                     int64_t group_stride, int64_t chunk_stride) {
  return (g / chunks) * group_stride + (g % chunks) * chunk_stride;
}

}  // namespace tpusim::runtime::gpu
