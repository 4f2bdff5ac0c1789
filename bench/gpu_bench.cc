// GEMM throughput on a GPU (issue 9): the gpu backend's matmul path (runtime/backend/gpu/gemm.h:
// fp32 with CUBLAS_COMPUTE_32F, or mxu with the inputs rounded to bf16 on the device first) next
// to cuBLAS's own figure for the same shape: one cublasGemmEx on operands already in the GEMM's
// input type, nothing else. Square N x N x N; TFLOPS = 2 N^3 / time, timed with CUDA events
// around each call (manual time). Without a usable GPU every benchmark reports the probe's reason
// and stops.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "runtime/backend/gpu/cublas_library.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm.h"
#include "runtime/gpu/cuda_probe.h"

namespace {

using tpusim::runtime::gpu::Buffer;
using tpusim::runtime::gpu::Cublas;
using tpusim::runtime::gpu::CublasLibrary;
using tpusim::runtime::gpu::DeviceBuffer;

// The reason no GPU can run the benchmarks, or "" when one can.
const std::string& no_gpu() {
  static const std::string reason = [] {
    const auto probe = tpusim::runtime::gpu::probe_cuda();
    if (!probe.reason.empty()) return probe.reason;
    return probe.devices.empty() ? std::string("no CUDA device") : std::string();
  }();
  return reason;
}

// Times `call` (which queues GPU work) with events; reports TFLOPS for an N^3 GEMM.
template <typename Call>
void time_gemm(benchmark::State& state, int64_t n, Call call) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  call();  // warm-up: cuBLAS picks its kernel, the memory pool grows
  cudaDeviceSynchronize();
  for (auto _ : state) {
    cudaEventRecord(start);
    if (!call()) {
      state.SkipWithError("the GEMM failed");
      break;
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  state.counters["TFLOPS"] =
      benchmark::Counter(flops * 1e-12 * state.iterations(), benchmark::Counter::kIsRate);
}

// A device buffer of `elements` values uniform in [-1, 1), f32 (element_bytes 4) or bf16 (2):
// random data, since a GEMM on zeros or on one repeated value draws less power and can run faster
// than on real data. One host block of 2^20 values (a fixed seed) is copied over the buffer.
Buffer filled(int64_t elements, size_t element_bytes) {
  constexpr size_t kBlock = size_t{1} << 20;
  static const std::vector<float> f32 = [] {
    std::mt19937 rng(2026);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> v(kBlock);
    for (float& x : v) x = uniform(rng);
    return v;
  }();
  static const std::vector<uint16_t> bf16 = [] {
    std::vector<uint16_t> v(kBlock);
    for (size_t i = 0; i < kBlock; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &f32[i], 4);
      v[i] = static_cast<uint16_t>(bits >> 16);  // truncated: any bf16 values will do
    }
    return v;
  }();
  const void* host = element_bytes == 2 ? static_cast<const void*>(bf16.data()) : f32.data();
  Buffer b = *DeviceBuffer::allocate(static_cast<size_t>(elements) * element_bytes);
  auto* dst = static_cast<char*>(b->data());
  for (size_t done = 0; done < b->bytes(); done += kBlock * element_bytes)
    cudaMemcpy(dst + done, host, std::min(kBlock * element_bytes, b->bytes() - done),
               cudaMemcpyHostToDevice);
  return b;
}

// The gpu backend's matmul: state.range(1) == 0 for fp32, 1 for mxu (bf16 inputs).
void BM_GpuBackendGemm(benchmark::State& state) {
  if (!no_gpu().empty()) {
    state.SkipWithError(no_gpu().c_str());
    return;
  }
  const int64_t n = state.range(0);
  auto cublas = Cublas::create();
  if (!cublas.ok()) {
    state.SkipWithError(std::string(cublas.status().message()).c_str());
    return;
  }
  tpusim::runtime::gpu::MatMulPlan plan;
  plan.m = plan.k = plan.n = n;
  plan.bf16_inputs = state.range(1) == 1;
  const Buffer a = filled(n * n, 4), b = filled(n * n, 4), c = filled(n * n, 4);
  time_gemm(state, n, [&] {
    return (*cublas)
        ->matmul(plan, static_cast<const float*>(a->data()), static_cast<const float*>(b->data()),
                 static_cast<float*>(c->data()))
        .ok();
  });
  state.SetLabel(plan.bf16_inputs ? "gpu backend, mxu" : "gpu backend, fp32");
}

// cuBLAS alone: one cublasGemmEx with f32 (range(1) == 0) or bf16 (1) operands, f32 output and
// CUBLAS_COMPUTE_32F, as the backend calls it, minus the backend's bf16 rounding pass.
void BM_CublasGemm(benchmark::State& state) {
  if (!no_gpu().empty()) {
    state.SkipWithError(no_gpu().c_str());
    return;
  }
  const int64_t n = state.range(0);
  const bool bf16 = state.range(1) == 1;
  auto loaded = CublasLibrary::get();
  if (!loaded.ok()) {
    state.SkipWithError(std::string(loaded.status().message()).c_str());
    return;
  }
  const CublasLibrary& lib = **loaded;
  cublasHandle_t handle = nullptr;
  if (lib.create(&handle) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const size_t bytes = bf16 ? 2 : 4;
  const Buffer a = filled(n * n, bytes), b = filled(n * n, bytes), c = filled(n * n, 4);
  const float alpha = 1, beta = 0;
  const int dim = static_cast<int>(n);
  time_gemm(state, n, [&] {
    return lib.gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a->data(), type,
                       dim, b->data(), type, dim, &beta, c->data(), CUDA_R_32F, dim,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
  });
  lib.destroy(handle);
  state.SetLabel(bf16 ? "cuBLAS, bf16 inputs" : "cuBLAS, fp32");
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1024, 4096, 8192})
    for (int64_t precision : {0, 1}) b->Args({n, precision});
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_GpuBackendGemm)->Apply(shapes);
BENCHMARK(BM_CublasGemm)->Apply(shapes);

}  // namespace
