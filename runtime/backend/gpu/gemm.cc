#include "runtime/backend/gpu/gemm.h"

#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm_call.h"
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

}  // namespace

absl::StatusOr<std::unique_ptr<Cublas>> Cublas::create() {
  auto loaded = CublasLibrary::get();
  if (!loaded.ok()) return loaded.status();
  const CublasLibrary& lib = **loaded;
  cublasHandle_t handle = nullptr;
  if (absl::Status st = lib.status(lib.create(&handle), "cublasCreate"); !st.ok()) return st;
  if (absl::Status st =
          lib.status(lib.set_math_mode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      !st.ok()) {
    lib.destroy(handle);
    return st;
  }
  return std::unique_ptr<Cublas>(new Cublas(lib, handle));
}

Cublas::~Cublas() { lib_.destroy(handle_); }

absl::Status Cublas::matmul(const MatMulPlan& plan, const float* a, const float* b, float* out) {
  auto planned = gemm_call(plan);
  if (!planned.ok()) return planned.status();
  const GemmCall& call = *planned;
  if (call.nothing_to_do) return absl::OkStatus();
  if (call.zero_fill) {
    return cuda_status(
        cudaMemsetAsync(out, 0, static_cast<size_t>(call.out_elements) * sizeof(float)),
        "zeroing an empty GEMM");
  }
  const void* cublas_a = b;  // see gemm_call.h: cuBLAS's A is the plan's b, its B the plan's a
  const void* cublas_b = a;
  cudaDataType_t type = CUDA_R_32F;
  Buffer a16, b16;  // live until the GEMM is queued; the frees are stream-ordered after it
  if (plan.bf16_inputs) {
    auto ra = to_bf16(a, call.a_elements);
    if (!ra.ok()) return ra.status();
    auto rb = to_bf16(b, call.b_elements);
    if (!rb.ok()) return rb.status();
    a16 = *std::move(ra);
    b16 = *std::move(rb);
    cublas_a = b16->data();
    cublas_b = a16->data();
    type = CUDA_R_16BF;
  }
  const float alpha = 1.0f, beta = 0.0f;
  absl::Status st =
      call.batch_count == 1
          ? lib_.status(
                lib_.gemm_ex(handle_, CUBLAS_OP_N, CUBLAS_OP_N, call.m, call.n, call.k, &alpha,
                             cublas_a, type, call.lda, cublas_b, type, call.ldb, &beta, out,
                             CUDA_R_32F, call.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx")
          : lib_.status(lib_.gemm_strided_batched_ex(
                            handle_, CUBLAS_OP_N, CUBLAS_OP_N, call.m, call.n, call.k, &alpha,
                            cublas_a, type, call.lda, call.stride_a, cublas_b, type, call.ldb,
                            call.stride_b, &beta, out, CUDA_R_32F, call.ldc, call.stride_c,
                            call.batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "cublasGemmStridedBatchedEx");
  if (!st.ok() || !plan.round_output) return st;
  ElementPlan round;  // a bf16 result: each f32 sum rounded, as the cpu kernel does
  round.kind = ElementKind::kRoundBf16;
  round.count = call.out_elements;
  return cuda_status(launch_elements(round, out, nullptr, nullptr, out), "bf16 rounding");
}

}  // namespace tpusim::runtime::gpu
