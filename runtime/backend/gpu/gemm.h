#pragma once
// Matmul on cuBLAS with the cpu backend's precision policies. "fp32": cublasGemmEx on f32
// operands with CUBLAS_COMPUTE_32F in CUBLAS_DEFAULT_MATH mode, which keeps every product and
// sum in f32 (TF32 needs CUBLAS_COMPUTE_32F_FAST_TF32 or the TF32 math mode, and neither is
// set). "mxu": both operands rounded to bf16 on the device (round to nearest even, the cpu's
// rounding) and passed as CUDA_R_16BF, products accumulated in f32 (CUBLAS_COMPUTE_32F): the
// MXU's DEFAULT precision. Row-major operands are passed as their column-major transposes
// (C^T = B^T A^T), so no data moves: gemm_call.h computes the parameters.

#include <memory>

#include <absl/status/statusor.h>
#include <cublas_v2.h>

#include "runtime/backend/gpu/cublas_library.h"
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

  // out = a x b as `plan` says; a, b and out are device pointers to f32 values. Errors say
  // which call failed; the caller adds the node.
  absl::Status matmul(const MatMulPlan& plan, const float* a, const float* b, float* out);

 private:
  Cublas(const CublasLibrary& lib, cublasHandle_t handle) : lib_(lib), handle_(handle) {}
  const CublasLibrary& lib_;
  cublasHandle_t handle_;
};

}  // namespace tpusim::runtime::gpu
