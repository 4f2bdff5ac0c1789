#pragma once
// The cpu backend: interprets the graph node by node with the kernels of kernels.h (Eigen for
// matrix products, OpenMP threads for large elementwise and patch kernels). It is the
// reference every other backend is compared with (precision "fp32"), and with precision "mxu"
// it rounds matmul inputs to bf16 as the TPU does.

#include "runtime/backend/backend.h"

namespace tpusim::runtime {

std::unique_ptr<Backend> make_cpu_backend();
// Its registry entry (registry.h).
const BackendDeclaration& cpu_backend_declaration();

}  // namespace tpusim::runtime
