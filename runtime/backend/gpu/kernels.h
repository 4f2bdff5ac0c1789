#pragma once
// The gpu backend's CUDA kernels (kernels.cu), launched on the legacy default stream. Each
// returns the launch's error (cudaSuccess when it was queued); faults while a kernel runs show
// up at the next synchronising call.
//
// A step's replicas run in one launch: a value holds every replica's copy in one buffer, replica
// r's at byte r x stride, or one copy that every replica shares (stride 0: a constant, the
// variables before a replica updates them, whatever is computed from shared values alone).

#include <cstdint>

#include <cuda_runtime_api.h>

#include "runtime/backend/gpu/element_kernel.h"

namespace tpusim::runtime::gpu {

// Where a launch's inputs are: up to three device pointers (null where the kind reads none),
// each with the bytes between one replica's copy and the next (0: shared).
struct ReplicaOperands {
  const void* data[3] = {nullptr, nullptr, nullptr};
  int64_t stride[3] = {0, 0, 0};
};

// For every replica r < replicas, one thread per element of `plan` (plan.count of them,
// grid-stride): eval_element with the inputs' replica-r copies into out + r x out_stride.
cudaError_t launch_elements(const ElementPlan& plan, const ReplicaOperands& in, void* out,
                            int64_t out_stride, uint32_t replicas);

// out[i] = the bf16 encoding of in[i] (round to nearest even, element_math.h) for i < n.
cudaError_t launch_to_bf16(const float* in, uint16_t* out, int64_t n);

// out[g x count + i] = the sum over c < slices, c ascending, of parts[(g x slices + c) x count +
// i] in f32, for g < groups and i < count: the chunks of a GEMM whose sums were split along K
// (gemm_call.h's split_long_sums), added in order.
cudaError_t launch_sum_partials(const float* parts, int64_t slices, int64_t count, int64_t groups,
                                float* out);

// The batches of a GEMM split into groups of chunks (gemm_call.h's GemmCall::split_groups > 1),
// as cublasGemmBatchedEx takes them: for g < count, a_out[g] = a + split_batch_offset(g, chunks,
// group_stride_a, chunk_stride_a) elements of element_bytes (b_out[g] likewise) and c_out[g] =
// c + g x stride_c floats.
struct SplitPointers {
  const char* a = nullptr;
  const char* b = nullptr;
  float* c = nullptr;
  int64_t element_bytes = 4, count = 0, chunks = 1;
  int64_t group_stride_a = 0, chunk_stride_a = 0, group_stride_b = 0, chunk_stride_b = 0;
  int64_t stride_c = 0;
};
cudaError_t launch_split_pointers(const SplitPointers& p, const void** a_out, const void** b_out,
                                  void** c_out);

// One replica's launch: launch_elements with everything shared.
cudaError_t launch_elements(const ElementPlan& plan, const void* a, const void* b, const void* c,
                            void* out);

// out[i] = element::ring_sum_of(parts, k, n, i) for i < n, where replica r's n floats (int32s
// when `is_int`) start at byte r x stride of `values`.
cudaError_t launch_ring_sum(const void* values, int64_t stride, uint64_t k, uint64_t n, bool is_int,
                            void* out);

}  // namespace tpusim::runtime::gpu
