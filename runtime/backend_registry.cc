#include "runtime/backend_registry.h"

#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime {

std::vector<BackendInfo> list_backends() {
  // The tpusim and cpu backends are always built and run anywhere; the gpu backend is built
  // when nvcc was found at configure time and runs where the CUDA runtime sees a device.
  const gpu::CudaProbe cuda = gpu::probe_cuda();
  const bool gpu_available = cuda.built && cuda.reason.empty() && !cuda.devices.empty();
  return {
      {"tpusim", "the compiler and the SystemC model of a TPU slice (simulated time)", true, true,
       ""},
      {"cpu", "Eigen on the host: the numerics reference (fp32, or mxu: bf16 matmul inputs)", true,
       true, ""},
      {"gpu", "CUDA kernels and cuBLAS on an NVIDIA GPU (fp32, or mxu: bf16 matmul inputs)",
       cuda.built, gpu_available,
       gpu_available ? ""
                     : (cuda.reason.empty() ? "the CUDA runtime reports no device" : cuda.reason)},
  };
}

}  // namespace tpusim::runtime
