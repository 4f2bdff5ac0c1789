#pragma once
// The cpu backend: interprets the graph node by node with the kernels of kernels.h (Eigen for
// matrix products, OpenMP threads for large elementwise and patch kernels). It is the
// reference every other backend is compared with (precision "fp32"), and with precision "mxu"
// it rounds matmul inputs to bf16 as the TPU does.

#include <cstdint>

#include "runtime/backend/backend.h"

namespace tpusim::runtime {

std::unique_ptr<Backend> make_cpu_backend();
// Its registry entry (registry.h).
const BackendDeclaration& cpu_backend_declaration();

// out[rows, N] = a[rows, K] x b[K, N], all row-major, summed as the cpu backend sums a matmul: the
// same bits on any host and any number of threads (cpu/gemm.h). A numerics reference for tools
// that check another device against it (tpusim matmul).
void reference_matmul(const float* a, const float* b, float* out, int64_t rows, int64_t K,
                      int64_t N);

}  // namespace tpusim::runtime
