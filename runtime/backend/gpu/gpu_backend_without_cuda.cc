// Built instead of the CUDA sources when nvcc was not found at configure time.
#include "common/strings.h"
#include "runtime/backend/gpu/gpu_backend.h"
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime {

absl::StatusOr<std::unique_ptr<Backend>> make_gpu_backend() {
  return absl::UnavailableError(str_cat("gpu backend unavailable: ", gpu::probe_cuda().reason));
}

}  // namespace tpusim::runtime
