#pragma once
// The gpu backend (CUDA and cuBLAS): the cpu backend's semantics on an NVIDIA GPU, to
// cross-check numerics across devices. Every value lives in device memory for the whole loop
// (variables included, uploaded once and read back at the end); each node is one or more
// kernels (node_plan.h, element_kernel.h) or a cuBLAS GEMM (gemm.h). Sums run in the cpu
// kernels' order and the RNG and bf16 rounding are the cpu's (runtime/backend/element_math.h),
// so reductions, dropout masks and copies match the cpu bit for bit; matmuls and
// transcendental functions differ by rounding (cuBLAS's summation order, CUDA's libm).

#include <memory>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"

namespace tpusim::runtime {

// The gpu backend on CUDA device 0. Unavailable ("gpu backend unavailable: <why>") when this
// binary was built without CUDA or the CUDA runtime finds no usable device (gpu::probe_cuda()).
absl::StatusOr<std::unique_ptr<Backend>> make_gpu_backend();
// Its registry entry (registry.h), built with or without CUDA: unavailable, with the probe's
// reason, where the CUDA runtime sees no device.
const BackendDeclaration& gpu_backend_declaration();

}  // namespace tpusim::runtime
