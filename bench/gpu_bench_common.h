#pragma once
// What the GPU benchmarks share: why none can run here.
#include <string>

#include "runtime/gpu/cuda_probe.h"

namespace tpusim::bench {

// The reason no GPU can run the benchmarks, or "" when one can.
inline const std::string& no_gpu() {
  static const std::string reason = [] {
    const auto probe = runtime::gpu::probe_cuda();
    if (!probe.reason.empty()) return probe.reason;
    return probe.devices.empty() ? std::string("no CUDA device") : std::string();
  }();
  return reason;
}

}  // namespace tpusim::bench
