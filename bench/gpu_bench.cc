// GEMM throughput on a GPU (issue 9): the gpu backend's matmul path (runtime/backend/gpu/gemm.h:
// fp32 with CUBLAS_COMPUTE_32F, or mxu with the inputs rounded to bf16 on the device first) next
// to cuBLAS's own figure for the same shape: one cublasGemmEx on operands already in the GEMM's
// input type, nothing else. Square N x N x N; TFLOPS = 2 N^3 / time, timed with CUDA events
// around each call (manual time). Without a usable GPU every benchmark reports the probe's reason
// and stops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "bench/gpu_bench_common.h"
#include "runtime/backend/gpu/cublas_library.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm.h"

namespace {

using tpusim::bench::no_gpu;
using tpusim::runtime::gpu::Buffer;
using tpusim::runtime::gpu::Cublas;
using tpusim::runtime::gpu::CublasLibrary;
using tpusim::runtime::gpu::DeviceBuffer;

// Times `call` (which queues GPU work) with events, kCallsTimed calls back to back between
// them, so the GPU's queue stays full and the rate is the GEMMs' own, not the host's launch
// latency (a 1024^3 bf16 product takes about 10 us); reports TFLOPS for calls of `flops` each.
// An iteration is the kCallsTimed calls: its time, ten products'. host_us_per_call is the host's
// time to queue a call: where it reaches the device's time a call, the host, not the GEMM,
// sets the rate.
constexpr int kCallsTimed = 10;

template <typename Call>
void time_calls(benchmark::State& state, double flops, Call call) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  call();  // warm-up: cuBLAS picks its kernel, the memory pool grows
  cudaDeviceSynchronize();
  double host_seconds = 0;
  for (auto _ : state) {
    cudaEventRecord(start);
    const auto queued_from = std::chrono::steady_clock::now();
    bool ok = true;
    for (int i = 0; i < kCallsTimed && ok; ++i) ok = call();
    host_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_from).count();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    if (!ok) {
      state.SkipWithError("the GEMM failed");
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);  // an iteration is kCallsTimed calls
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  state.counters["TFLOPS"] = benchmark::Counter(flops * kCallsTimed * 1e-12 * state.iterations(),
                                                benchmark::Counter::kIsRate);
  const double calls = static_cast<double>(state.iterations()) * kCallsTimed;
  state.counters["host_us_per_call"] = calls > 0 ? host_seconds / calls * 1e6 : 0;
}

// An N^3 GEMM's calls.
template <typename Call>
void time_gemm(benchmark::State& state, int64_t n, Call call) {
  time_calls(state, 2.0 * static_cast<double>(n) * n * n, call);
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

// A bare cuBLAS handle on the current device, with the library that made it (destroyed at the
// end of the benchmark); false once the benchmark is skipped with the reason.
struct BareCublas {
  const CublasLibrary* lib = nullptr;
  cublasHandle_t handle = nullptr;
  ~BareCublas() {
    if (handle != nullptr) lib->destroy(handle);
  }
};

bool open_cublas(benchmark::State& state, BareCublas* cublas) {
  if (!no_gpu().empty()) {
    state.SkipWithError(no_gpu().c_str());
    return false;
  }
  auto loaded = CublasLibrary::get();
  if (!loaded.ok()) {
    state.SkipWithError(std::string(loaded.status().message()).c_str());
    return false;
  }
  cublas->lib = *loaded;
  if (cublas->lib->create(&cublas->handle) != CUBLAS_STATUS_SUCCESS) {
    cublas->handle = nullptr;
    state.SkipWithError("cublasCreate failed");
    return false;
  }
  return true;
}

// The gpu backend's matmul: state.range(1) == 0 for fp32, 1 for mxu (bf16 inputs, rounded
// once an operand and kept: device_buffer.h's bf16 twin), 2 for mxu rounding both operands
// again every call (what a GEMM on values it has not seen costs).
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
  plan.bf16_inputs = state.range(1) >= 1;
  const bool round_every_call = state.range(1) == 2;
  const Buffer a = filled(n * n, 4), b = filled(n * n, 4), c = filled(n * n, 4);
  time_gemm(state, n, [&] {
    if (round_every_call) {
      a->set_bf16_twin(nullptr);
      b->set_bf16_twin(nullptr);
    }
    return (*cublas)->matmul(plan, *a, *b, static_cast<float*>(c->data())).ok();
  });
  state.SetLabel(round_every_call   ? "gpu backend, mxu, rounding every call"
                 : plan.bf16_inputs ? "gpu backend, mxu"
                                    : "gpu backend, fp32");
}

// cuBLAS alone: one cublasGemmEx with f32 (range(1) == 0) or bf16 (1) operands, f32 output and
// CUBLAS_COMPUTE_32F, as the backend calls it, minus the backend's bf16 rounding pass.
void BM_CublasGemm(benchmark::State& state) {
  BareCublas cublas;
  if (!open_cublas(state, &cublas)) return;
  const CublasLibrary& lib = *cublas.lib;
  cublasHandle_t handle = cublas.handle;
  const int64_t n = state.range(0);
  const bool bf16 = state.range(1) == 1;
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
  state.SetLabel(bf16 ? "cuBLAS, bf16 inputs" : "cuBLAS, fp32");
}

// cuBLAS's own bf16 path for f32 operands: cublasGemmEx on f32 A and B with
// CUBLAS_COMPUTE_32F_FAST_16BF, which lets cuBLAS convert them to bf16 inside (no pass of ours).
void BM_CublasGemmFast16bf(benchmark::State& state) {
  BareCublas cublas;
  if (!open_cublas(state, &cublas)) return;
  const CublasLibrary& lib = *cublas.lib;
  cublasHandle_t handle = cublas.handle;
  const int64_t n = state.range(0);
  const Buffer a = filled(n * n, 4), b = filled(n * n, 4), c = filled(n * n, 4);
  const float alpha = 1, beta = 0;
  const int dim = static_cast<int>(n);
  time_gemm(state, n, [&] {
    return lib.gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a->data(),
                       CUDA_R_32F, dim, b->data(), CUDA_R_32F, dim, &beta, c->data(), CUDA_R_32F,
                       dim, CUBLAS_COMPUTE_32F_FAST_16BF,
                       CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
  });
  state.SetLabel("cuBLAS, f32 inputs, COMPUTE_32F_FAST_16BF");
}

// Whether FAST_16BF rounds its inputs to nearest even (what "mxu" means) or truncates them: one
// 1024^3 product of random f32 operands three ways, the backend's mxu path (inputs rounded to
// nearest even by our kernel), FAST_16BF, and bf16 operands truncated on the host. Counters:
// the largest |FAST_16BF - mxu| and |truncated - mxu| over the largest |mxu| (summation order
// alone differs by about 1e-6; a different rounding of the inputs by about 1e-3).
void BM_Fast16bfRounding(benchmark::State& state) {
  BareCublas bare;
  if (!open_cublas(state, &bare)) return;
  const CublasLibrary& lib = *bare.lib;
  cublasHandle_t handle = bare.handle;
  constexpr int64_t n = 1024;
  auto cublas = Cublas::create();
  if (!cublas.ok()) {
    state.SkipWithError(std::string(cublas.status().message()).c_str());
    return;
  }
  const Buffer a = filled(n * n, 4), b = filled(n * n, 4), truncated_a = filled(n * n, 2),
               truncated_b = filled(n * n, 2);
  const Buffer mxu = filled(n * n, 4), fast = filled(n * n, 4), trunc = filled(n * n, 4);
  tpusim::runtime::gpu::MatMulPlan plan;
  plan.m = plan.k = plan.n = n;
  plan.bf16_inputs = true;
  const float alpha = 1, beta = 0;
  const int dim = static_cast<int>(n);
  for (auto _ : state) {
    (void)(*cublas)->matmul(plan, *a, *b, static_cast<float*>(mxu->data()));
    lib.gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, b->data(), CUDA_R_32F, dim,
                a->data(), CUDA_R_32F, dim, &beta, fast->data(), CUDA_R_32F, dim,
                CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
    // filled() truncates the same host block the f32 buffers hold.
    lib.gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, truncated_b->data(),
                CUDA_R_16BF, dim, truncated_a->data(), CUDA_R_16BF, dim, &beta, trunc->data(),
                CUDA_R_32F, dim, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    cudaDeviceSynchronize();
  }
  std::vector<float> m(n * n), f(n * n), t(n * n);
  cudaMemcpy(m.data(), mxu->data(), m.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(f.data(), fast->data(), f.size() * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(t.data(), trunc->data(), t.size() * 4, cudaMemcpyDeviceToHost);
  double scale = 0, fast_diff = 0, trunc_diff = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::abs(m[i])));
    fast_diff = std::max(fast_diff, static_cast<double>(std::abs(f[i] - m[i])));
    trunc_diff = std::max(trunc_diff, static_cast<double>(std::abs(t[i] - m[i])));
  }
  state.counters["fast16bf_vs_mxu"] = fast_diff / scale;
  state.counters["truncated_vs_mxu"] = trunc_diff / scale;
}

// A convolution's weight gradient, the product of few outputs and a long K that split_long_sums
// (gemm_call.h) cuts along K: state.range(0) == 0 for mnist_cnn's first layer (25 x 100,352 x 32
// a replica: 5 x 5 patches of 128 images of 28 x 28, 32 channels), 1 for its second (800 x
// 25,088 x 64); eight replicas, none shared, as a step at global batch 1024 runs it;
// state.range(1) 0 for fp32, 1 for mxu; state.range(2) 1 with the split, 0 without.
void BM_WeightGradientGemm(benchmark::State& state) {
  if (!no_gpu().empty()) {
    state.SkipWithError(no_gpu().c_str());
    return;
  }
  auto cublas = Cublas::create();
  if (!cublas.ok()) {
    state.SkipWithError(std::string(cublas.status().message()).c_str());
    return;
  }
  constexpr uint32_t kReplicas = 8;
  tpusim::runtime::gpu::MatMulPlan plan;
  if (state.range(0) == 0) {
    plan.m = 25, plan.k = 100352, plan.n = 32;
  } else {
    plan.m = 800, plan.k = 25088, plan.n = 64;
  }
  plan.bf16_inputs = state.range(1) == 1;
  (*cublas)->set_split_long_sums(state.range(2) == 1);
  const tpusim::runtime::gpu::ReplicaLayout layout{kReplicas, false, false};
  const Buffer a = filled(plan.m * plan.k * kReplicas, 4),
               b = filled(plan.k * plan.n * kReplicas, 4),
               c = filled(plan.m * plan.n * kReplicas, 4);
  time_calls(state, 2.0 * plan.m * plan.k * plan.n * kReplicas, [&] {
    return (*cublas)->matmul(plan, layout, *a, *b, static_cast<float*>(c->data())).ok();
  });
  state.SetLabel(std::string(plan.bf16_inputs ? "mxu" : "fp32") +
                 (state.range(2) == 1 ? ", K split" : ", one pass over K"));
}

void shapes(benchmark::internal::Benchmark* b, int precisions) {
  for (int64_t n : {1024, 2048, 4096, 8192})
    for (int64_t precision = 0; precision < precisions; ++precision) b->Args({n, precision});
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_GpuBackendGemm)->Apply([](auto* b) { shapes(b, 3); });
BENCHMARK(BM_CublasGemm)->Apply([](auto* b) { shapes(b, 2); });
BENCHMARK(BM_CublasGemmFast16bf)
    ->Arg(1024)
    ->Arg(4096)
    ->Arg(8192)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Fast16bfRounding)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_WeightGradientGemm)
    ->ArgsProduct({{0, 1}, {0, 1}, {0, 1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
