#pragma once
// Matmul on cuBLAS with the cpu backend's precision policies. "fp32": cublasGemmEx on f32
// operands with CUBLAS_COMPUTE_32F in CUBLAS_DEFAULT_MATH mode, which keeps every product and
// sum in f32 (TF32 needs CUBLAS_COMPUTE_32F_FAST_TF32 or the TF32 math mode, and neither is
// set). "mxu": both operands rounded to bf16 on the device (round to nearest even, the cpu's
// rounding; once a value, kept as its buffer's bf16 twin) and passed as CUDA_R_16BF, products
// accumulated in f32 (CUBLAS_COMPUTE_32F): the MXU's DEFAULT precision. (cuBLAS's own
// CUBLAS_COMPUTE_32F_FAST_16BF does not round f32 inputs as the MXU does: on an H200 its
// products of random operands differ from these by 2.4e-3 of the largest, where a different
// summation order alone differs by about 1e-6; bench/gpu_bench.cc, BM_Fast16bfRounding.) Row-major
// operands are passed as their column-major transposes (C^T = B^T A^T), so no data moves:
// gemm_call.h computes the parameters.

#include <memory>

#include <absl/status/statusor.h>
#include <cublas_v2.h>

#include "runtime/backend/gpu/cublas_library.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm_call.h"
#include "runtime/backend/gpu/node_plan.h"

namespace tpusim::runtime::gpu {

class Cublas {
 public:
  // A cuBLAS handle on the current device (the legacy default stream, CUBLAS_DEFAULT_MATH);
  // loads cuBLAS first if need be (cublas_library.h).
  static absl::StatusOr<std::unique_ptr<Cublas>> create();
  ~Cublas();
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // out = a x b as `plan` says, for every replica `layout` holds (gemm_call.h); a and b hold
  // f32 values (at mxu precision their bf16 twins are read, made on first use: device_buffer.h),
  // out is a device pointer to f32s. Errors say which call failed; the caller adds the node.
  absl::Status matmul(const MatMulPlan& plan, const ReplicaLayout& layout, const DeviceBuffer& a,
                      const DeviceBuffer& b, float* out);
  // One replica.
  absl::Status matmul(const MatMulPlan& plan, const DeviceBuffer& a, const DeviceBuffer& b,
                      float* out);

  // Whether products of few outputs and a long K have their sums split along K (gemm_call.h's
  // split_long_sums; on by default). For benchmarks that measure what the split gives.
  void set_split_long_sums(bool split) { split_long_sums_ = split; }

 private:
  Cublas(const CublasLibrary& lib, cublasHandle_t handle, int multiprocessors)
      : lib_(lib), handle_(handle), multiprocessors_(multiprocessors) {}
  // The strided batched call(s) of `call`, products into `out` (the scratch of partials when
  // split); cuBLAS's operands are `cublas_a` and `cublas_b` of `type`.
  absl::Status run_calls(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                         cudaDataType_t type, size_t element_bytes, float* out);
  // A call split along K (k_split > 1): its partial sums into a scratch, added into `out`.
  absl::Status run_split(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                         cudaDataType_t type, size_t element_bytes, float* out);
  // A split call of several groups: one cublasGemmBatchedEx on its batches' pointers (written
  // on the device), partials into `scratch`.
  absl::Status run_grouped(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                           cudaDataType_t type, size_t element_bytes, float* scratch);
  const CublasLibrary& lib_;
  cublasHandle_t handle_;
  int multiprocessors_;  // the device's, for split_long_sums
  bool split_long_sums_ = true;
};

}  // namespace tpusim::runtime::gpu
