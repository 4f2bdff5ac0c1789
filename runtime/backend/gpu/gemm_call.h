#pragma once
// The cuBLAS call a MatMulPlan becomes, in cuBLAS's column-major terms. A row-major [R, C]
// matrix is the column-major [C, R] matrix with leading dimension C, so the row-major product
// out = a x b is computed as out^T = b^T x a^T with no data moved: cuBLAS's A operand is the
// plan's b, its B operand the plan's a. Plain C++ with no CUDA types, so the host tests run
// these exact parameters through the BLAS definition of a strided batched GEMM.

#include <cstdint>

#include <absl/status/statusor.h>

#include "runtime/backend/gpu/node_plan.h"

namespace tpusim::runtime::gpu {

struct GemmCall {
  // cublasGemmStridedBatchedEx (cublasGemmEx when batch_count is 1) with CUBLAS_OP_N on both:
  // C[i + j*ldc + g*stride_c] = sum over l of A[i + l*lda + g*stride_a] * B[l + j*ldb + g*stride_b]
  // for i < m, j < n, g < batch_count.
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int batch_count = 1;
  // Elements of the plan's a, b and out over every batch: what the bf16 copies round and what
  // an empty sum (k == 0) zeroes.
  int64_t a_elements = 0, b_elements = 0, out_elements = 0;
  bool nothing_to_do = false;  // an empty output
  bool zero_fill = false;      // k == 0: out is all zeros (cuBLAS with beta 0 would leave it)
};

// The call for `plan`; Unimplemented when a size passes cuBLAS's 32-bit int.
absl::StatusOr<GemmCall> gemm_call(const MatMulPlan& plan);

}  // namespace tpusim::runtime::gpu
