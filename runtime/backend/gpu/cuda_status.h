#pragma once
// CUDA results as absl::Status: the gpu backend never aborts on a device error; each becomes an
// Internal error whose message says what was being done (the node, the step) and the error's
// name and text. (cuBLAS's: CublasLibrary::status, cublas_library.h.)

#include <string>
#include <string_view>

#include <absl/status/status.h>
#include <cuda_runtime_api.h>

#include "common/strings.h"

namespace tpusim::runtime::gpu {

inline absl::Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(
      str_cat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

}  // namespace tpusim::runtime::gpu
