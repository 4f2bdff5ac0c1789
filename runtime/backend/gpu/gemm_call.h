#pragma once
// The cuBLAS call a MatMulPlan becomes, in cuBLAS's column-major terms. A row-major [R, C]
// matrix is the column-major [C, R] matrix with leading dimension C, so the row-major product
// out = a x b is computed as out^T = b^T x a^T with no data moved: cuBLAS's A operand is the
// plan's b, its B operand the plan's a. Plain C++ with no CUDA types, so the host tests run
// these exact parameters through the BLAS definition of a strided batched GEMM.

#include <cstdint>

#include <absl/status/statusor.h>

#include "runtime/backend/gpu/node_plan.h"
#include "runtime/backend/gpu/split_batch.h"

namespace tpusim::runtime::gpu {

// How a step's replicas hold a GEMM's operands (kernels.h): `replicas` copies of each, back to
// back in one buffer, or one copy every replica shares. The output is shared when both operands
// are, else one copy a replica.
struct ReplicaLayout {
  uint32_t replicas = 1;
  bool a_shared = true, b_shared = true;
  bool out_shared() const { return replicas == 1 || (a_shared && b_shared); }
};

struct GemmCall {
  // cublasGemmStridedBatchedEx (cublasGemmEx when batch_count is 1), CUBLAS_OP_N on both unless
  // transa / transb say otherwise:
  // C[i + j*ldc + g*stride_c] = sum over l of A[i + l*lda + g*stride_a] * B[l + j*ldb + g*stride_b]
  // for i < m, j < n, g < batch_count.
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  // CUBLAS_OP_T for an operand: A[i + l*lda] above reads A[l + i*lda], B[l + j*ldb] B[j + l*ldb].
  bool transa = false, transb = false;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int batch_count = 1;
  // The call is made `calls` times (once a replica, when a shared operand and batched products
  // leave no single stride between batches), each call's operands `call_stride_*` elements on
  // from the last's: cuBLAS's A (the plan's b), B (the plan's a) and C.
  int calls = 1;
  int64_t call_stride_a = 0, call_stride_b = 0, call_stride_c = 0;
  // Elements of the plan's a, b and out over every batch and replica held: what the bf16 copies
  // round and what an empty sum (k == 0) zeroes.
  int64_t a_elements = 0, b_elements = 0, out_elements = 0;
  bool nothing_to_do = false;  // an empty output
  bool zero_fill = false;      // k == 0: out is all zeros (cuBLAS with beta 0 would leave it)
  // Sums split along K (split_long_sums): K is cut into k_split chunks of `k` terms, and the
  // batches are split_groups groups (the batches before the split) of k_split chunks each.
  // Batch g is chunk g % k_split of group g / k_split: it reads A at a_offset(g), B at
  // b_offset(g), and writes its partial sums to C at g x stride_c, C being a scratch of
  // batch_count x (m x n) floats. The partials are then added in chunk order into the output,
  // the groups' products back to back (kernels.h, launch_sum_partials). One group is a plain
  // strided batch; more are run with the batches' pointers (cublasGemmBatchedEx).
  int k_split = 1;
  int split_groups = 1;
  int64_t group_stride_a = 0, group_stride_b = 0;

  int64_t a_offset(int64_t g) const {
    return k_split > 1 ? split_batch_offset(g, k_split, group_stride_a, stride_a) : g * stride_a;
  }
  int64_t b_offset(int64_t g) const {
    return k_split > 1 ? split_batch_offset(g, k_split, group_stride_b, stride_b) : g * stride_b;
  }
};

// The call for `plan` over the replicas `layout` describes; Unimplemented when a size passes
// cuBLAS's 32-bit int.
absl::StatusOr<GemmCall> gemm_call(const MatMulPlan& plan, const ReplicaLayout& layout = {});

// `call` with its sums split along K where its output alone would leave most of a GPU's
// `multiprocessors` idle: a product of few outputs and a long K (a convolution's weight
// gradient: 25 x 32 outputs a replica, K = 100,352 terms for mnist_cnn's first layer at 128
// images) is a handful of output tiles, each one thread block adding all of K, while the other
// multiprocessors wait. Its K is cut into k_split equal chunks (a divisor of K, each at least
// kMinChunkTerms long) so that the chunks' tiles number about twice the multiprocessors, and
// every group's chunks run as one batched call. Unchanged where the output already spans the GPU, K
// has no such divisor, or the call is made once a replica (calls > 1). The sums' order changes
// (chunk by chunk, then the chunks in order), as cuBLAS's own choice of kernel changes it: GEMMs
// match the cpu to a tolerance, not bit for bit.
GemmCall split_long_sums(GemmCall call, int multiprocessors);

// Chunks of K a split makes are at least this many terms (a thread block's share of work large
// enough to pay for its partial's write and read), and at most this many chunks.
inline constexpr int64_t kMinChunkTerms = 1024;
inline constexpr int kMaxChunks = 64;

}  // namespace tpusim::runtime::gpu
