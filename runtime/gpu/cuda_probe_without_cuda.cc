// Built instead of cuda_probe.cu when CUDA is off: TPUSIM_WITH_CUDA=OFF, or auto without nvcc.
// TPUSIM_CUDA_OFF_REASON (cmake/TpusimCuda.cmake) says which.
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime::gpu {

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.reason = "tpusim was built without CUDA (" TPUSIM_CUDA_OFF_REASON ")";
  return probe;
}

}  // namespace tpusim::runtime::gpu
