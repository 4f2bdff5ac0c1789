#include "runtime/backend/gpu/gemm.h"

#include <climits>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/kernels.h"

namespace tpusim::runtime::gpu {
namespace {

// A bf16 copy (CUDA_R_16BF encodings) of `count` device floats.
absl::StatusOr<Buffer> to_bf16(const float* values, int64_t count) {
  auto buffer = DeviceBuffer::allocate(static_cast<size_t>(count) * sizeof(uint16_t));
  if (!buffer.ok()) return buffer.status();
  ElementPlan plan;
  plan.kind = ElementKind::kToBf16Bits;
  plan.count = count;
  if (absl::Status st = cuda_status(
          launch_elements(plan, values, nullptr, nullptr, (*buffer)->data()), "bf16 rounding");
      !st.ok()) {
    return st;
  }
  return buffer;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

absl::StatusOr<std::unique_ptr<Cublas>> Cublas::create() {
  cublasHandle_t handle = nullptr;
  if (absl::Status st = cublas_status(cublasCreate(&handle), "cublasCreate"); !st.ok()) return st;
  if (absl::Status st =
          cublas_status(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      !st.ok()) {
    cublasDestroy(handle);
    return st;
  }
  return std::unique_ptr<Cublas>(new Cublas(handle));
}

Cublas::~Cublas() { cublasDestroy(handle_); }

absl::Status Cublas::matmul(const MatMulPlan& plan, const float* a, const float* b, float* out) {
  const int64_t rows = plan.shared_rhs ? plan.batches * plan.m : plan.m;
  const int64_t batches = plan.shared_rhs ? 1 : plan.batches;
  if (rows == 0 || plan.n == 0 || batches == 0) return absl::OkStatus();
  if (!fits_int(rows) || !fits_int(plan.k) || !fits_int(plan.n) || !fits_int(batches)) {
    return absl::UnimplementedError(str_cat("GEMM [", rows, ", ", plan.k, "] x [", plan.k, ", ",
                                            plan.n, "] x ", batches,
                                            " batches exceeds cuBLAS's 32-bit sizes"));
  }
  const int m = static_cast<int>(plan.n), n = static_cast<int>(rows), k = static_cast<int>(plan.k);
  const float alpha = 1.0f, beta = 0.0f;
  if (plan.k == 0) {  // an empty sum: zeros (cuBLAS would leave `out` as it was with beta 0)
    return cuda_status(
        cudaMemsetAsync(out, 0, static_cast<size_t>(rows * plan.n * batches) * sizeof(float)),
        "zeroing an empty GEMM");
  }
  const void* lhs = b;  // column-major: C^T [N, M] = B^T [N, K] x A^T [K, M]
  const void* rhs = a;
  cudaDataType_t type = CUDA_R_32F;
  Buffer a16, b16;  // live until the GEMM is queued; the frees are stream-ordered after it
  if (plan.bf16_inputs) {
    auto ra = to_bf16(a, rows * plan.k * batches);
    if (!ra.ok()) return ra.status();
    auto rb = to_bf16(b, plan.k * plan.n * batches);
    if (!rb.ok()) return rb.status();
    a16 = *std::move(ra);
    b16 = *std::move(rb);
    lhs = b16->data();
    rhs = a16->data();
    type = CUDA_R_16BF;
  }
  absl::Status st =
      batches == 1
          ? cublas_status(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, lhs,
                                       type, m, rhs, type, k, &beta, out, CUDA_R_32F, m,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmEx")
          : cublas_status(cublasGemmStridedBatchedEx(
                              handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, lhs, type, m,
                              plan.k * plan.n, rhs, type, k, plan.m * plan.k, &beta, out,
                              CUDA_R_32F, m, plan.m * plan.n, static_cast<int>(batches),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmStridedBatchedEx");
  if (!st.ok() || !plan.round_output) return st;
  ElementPlan round;  // a bf16 result: each f32 sum rounded, as the cpu kernel does
  round.kind = ElementKind::kRoundBf16;
  round.count = rows * plan.n * batches;
  return cuda_status(launch_elements(round, out, nullptr, nullptr, out), "bf16 rounding");
}

}  // namespace tpusim::runtime::gpu
