#include "runtime/backend/gpu/gemm.h"

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm_call.h"
#include "runtime/backend/gpu/kernels.h"

namespace tpusim::runtime::gpu {
namespace {

// The bf16 encodings (CUDA_R_16BF) of `values`' floats: its twin, made on first use.
absl::StatusOr<const void*> bf16_of(const DeviceBuffer& values) {
  if (values.bf16_twin() == nullptr) {
    const auto count = static_cast<int64_t>(values.bytes() / sizeof(float));
    auto twin = DeviceBuffer::allocate(static_cast<size_t>(count) * sizeof(uint16_t));
    if (!twin.ok()) return twin.status();
    if (absl::Status st =
            cuda_status(launch_to_bf16(static_cast<const float*>(values.data()),
                                       static_cast<uint16_t*>((*twin)->data()), count),
                        "bf16 rounding");
        !st.ok()) {
      return st;
    }
    values.set_bf16_twin(*std::move(twin));
  }
  return static_cast<const void*>(values.bf16_twin()->data());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cublas>> Cublas::create() {
  auto loaded = CublasLibrary::get();
  if (!loaded.ok()) return loaded.status();
  const CublasLibrary& lib = **loaded;
  int device = 0, multiprocessors = 0;  // the device's, for split_long_sums
  if (absl::Status st = cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !st.ok()) return st;
  if (absl::Status st = cuda_status(
          cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute(MultiProcessorCount)");
      !st.ok()) {
    return st;
  }
  cublasHandle_t handle = nullptr;
  if (absl::Status st = lib.status(lib.create(&handle), "cublasCreate"); !st.ok()) return st;
  if (absl::Status st =
          lib.status(lib.set_math_mode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
      !st.ok()) {
    lib.destroy(handle);
    return st;
  }
  return std::unique_ptr<Cublas>(new Cublas(lib, handle, multiprocessors));
}

Cublas::~Cublas() { lib_.destroy(handle_); }

absl::Status Cublas::matmul(const MatMulPlan& plan, const ReplicaLayout& layout,
                            const DeviceBuffer& a, const DeviceBuffer& b, float* out) {
  auto planned = gemm_call(plan, layout);
  if (!planned.ok()) return planned.status();
  const GemmCall call =
      split_long_sums_ ? split_long_sums(*planned, multiprocessors_) : *std::move(planned);
  if (call.nothing_to_do) return absl::OkStatus();
  if (call.zero_fill) {
    return cuda_status(
        cudaMemsetAsync(out, 0, static_cast<size_t>(call.out_elements) * sizeof(float)),
        "zeroing an empty GEMM");
  }
  if (a.bytes() < static_cast<size_t>(call.a_elements) * sizeof(float) ||
      b.bytes() < static_cast<size_t>(call.b_elements) * sizeof(float)) {
    return absl::InternalError(str_cat("a GEMM's operands hold ", a.bytes(), " and ", b.bytes(),
                                       " bytes, less than its ", call.a_elements, " x ",
                                       call.b_elements, " floats"));
  }
  const auto* cublas_a = static_cast<const char*>(b.data());  // gemm_call.h: cuBLAS's A is b
  const auto* cublas_b = static_cast<const char*>(a.data());
  cudaDataType_t type = CUDA_R_32F;
  size_t element_bytes = sizeof(float);
  if (plan.bf16_inputs) {
    auto ra = bf16_of(a);
    if (!ra.ok()) return ra.status();
    auto rb = bf16_of(b);
    if (!rb.ok()) return rb.status();
    cublas_a = static_cast<const char*>(*rb);
    cublas_b = static_cast<const char*>(*ra);
    type = CUDA_R_16BF;
    element_bytes = sizeof(uint16_t);
  }
  absl::Status st = call.k_split == 1
                        ? run_calls(call, cublas_a, cublas_b, type, element_bytes, out)
                        : run_split(call, cublas_a, cublas_b, type, element_bytes, out);
  if (!st.ok() || !plan.round_output) return st;
  ElementPlan round;  // a bf16 result: each f32 sum rounded, as the cpu kernel does
  round.kind = ElementKind::kRoundBf16;
  round.count = call.out_elements;
  return cuda_status(launch_elements(round, out, nullptr, nullptr, out), "bf16 rounding");
}

absl::Status Cublas::run_calls(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                               cudaDataType_t type, size_t element_bytes, float* out) {
  const float alpha = 1.0f, beta = 0.0f;
  const cublasOperation_t op_a = call.transa ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = call.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const auto bytes = static_cast<int64_t>(element_bytes);
  for (int c = 0; c < call.calls; ++c) {
    const void* ca = cublas_a + c * call.call_stride_a * bytes;
    const void* cb = cublas_b + c * call.call_stride_b * bytes;
    float* cc = out + c * call.call_stride_c;
    absl::Status st =
        call.batch_count == 1
            ? lib_.status(lib_.gemm_ex(handle_, op_a, op_b, call.m, call.n, call.k, &alpha, ca,
                                       type, call.lda, cb, type, call.ldb, &beta, cc, CUDA_R_32F,
                                       call.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmEx")
            : lib_.status(lib_.gemm_strided_batched_ex(
                              handle_, op_a, op_b, call.m, call.n, call.k, &alpha, ca, type,
                              call.lda, call.stride_a, cb, type, call.ldb, call.stride_b, &beta, cc,
                              CUDA_R_32F, call.ldc, call.stride_c, call.batch_count,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                          "cublasGemmStridedBatchedEx");
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status Cublas::run_split(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                               cudaDataType_t type, size_t element_bytes, float* out) {
  // The partials go to a scratch that returns to the pool stream-ordered, after the sum reads it.
  auto partials = DeviceBuffer::allocate(static_cast<size_t>(call.batch_count) *
                                         static_cast<size_t>(call.stride_c) * sizeof(float));
  if (!partials.ok()) return partials.status();
  auto* scratch = static_cast<float*>((*partials)->data());
  absl::Status st = call.split_groups == 1
                        ? run_calls(call, cublas_a, cublas_b, type, element_bytes, scratch)
                        : run_grouped(call, cublas_a, cublas_b, type, element_bytes, scratch);
  if (!st.ok()) return st;
  return cuda_status(
      launch_sum_partials(scratch, call.k_split, call.stride_c, call.split_groups, out),
      "adding a split GEMM's partial sums");
}

absl::Status Cublas::run_grouped(const GemmCall& call, const char* cublas_a, const char* cublas_b,
                                 cudaDataType_t type, size_t element_bytes, float* scratch) {
  const auto count = static_cast<size_t>(call.batch_count);
  auto table = DeviceBuffer::allocate(3 * count * sizeof(void*));  // A's, B's, then C's
  if (!table.ok()) return table.status();
  auto** pointers = static_cast<void**>((*table)->data());
  SplitPointers p;
  p.a = cublas_a;
  p.b = cublas_b;
  p.c = scratch;
  p.element_bytes = static_cast<int64_t>(element_bytes);
  p.count = call.batch_count;
  p.chunks = call.k_split;
  p.group_stride_a = call.group_stride_a;
  p.chunk_stride_a = call.stride_a;
  p.group_stride_b = call.group_stride_b;
  p.chunk_stride_b = call.stride_b;
  p.stride_c = call.stride_c;
  const auto** a_array = const_cast<const void**>(pointers);
  const auto** b_array = const_cast<const void**>(pointers + count);
  void** c_array = pointers + 2 * count;
  if (absl::Status st = cuda_status(launch_split_pointers(p, a_array, b_array, c_array),
                                    "the pointers of a split GEMM's batches");
      !st.ok()) {
    return st;
  }
  const float alpha = 1.0f, beta = 0.0f;
  return lib_.status(
      lib_.gemm_batched_ex(
          handle_, call.transa ? CUBLAS_OP_T : CUBLAS_OP_N, call.transb ? CUBLAS_OP_T : CUBLAS_OP_N,
          call.m, call.n, call.k, &alpha, a_array, type, call.lda, b_array, type, call.ldb, &beta,
          c_array, CUDA_R_32F, call.ldc, call.batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmBatchedEx");
}

absl::Status Cublas::matmul(const MatMulPlan& plan, const DeviceBuffer& a, const DeviceBuffer& b,
                            float* out) {
  return matmul(plan, ReplicaLayout{}, a, b, out);
}

}  // namespace tpusim::runtime::gpu
