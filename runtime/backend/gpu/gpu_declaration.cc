// The gpu backend's registry entry, the same with and without CUDA: what it supports is the cpu
// backend's, and whether it runs here is what the CUDA probe finds.
#include "runtime/backend/gpu/gpu_backend.h"
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime {

const BackendDeclaration& gpu_backend_declaration() {
  static const BackendDeclaration declaration = [] {
    BackendDeclaration d;
    d.name = "gpu";
    d.description = "CUDA kernels and cuBLAS on an NVIDIA GPU (fp32, or mxu: bf16 matmul inputs)";
    d.supports.precisions = {Precision::kFp32, Precision::kMxu};
    d.supports.dtype_policies = {DTypePolicy::kFloat32, DTypePolicy::kMixedBFloat16};
    d.supports.allreduce_algorithms = {AllReduceAlgorithm::kRing};  // the cpu backend's order
    d.availability = [] {
      // Built when nvcc was found at configure time; runs where the CUDA runtime sees a device.
      const gpu::CudaProbe cuda = gpu::probe_cuda();
      BackendAvailability a;
      a.built = cuda.built;
      a.available = cuda.built && cuda.reason.empty() && !cuda.devices.empty();
      if (!a.available)
        a.reason = cuda.reason.empty() ? "the CUDA runtime reports no device" : cuda.reason;
      return a;
    };
    d.make = [](const BackendArgs&) { return make_gpu_backend(); };
    return d;
  }();
  return declaration;
}

}  // namespace tpusim::runtime
