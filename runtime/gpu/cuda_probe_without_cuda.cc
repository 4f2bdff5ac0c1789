// Built instead of cuda_probe.cu when nvcc was not found at configure time.
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime::gpu {

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.reason =
      "tpusim was built without CUDA (nvcc not found at configure time; "
      "TPUSIM_WITH_CUDA=auto)";
  return probe;
}

}  // namespace tpusim::runtime::gpu
