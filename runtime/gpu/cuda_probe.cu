#include <string>

#include <cuda_runtime.h>

#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime::gpu {

CudaProbe probe_cuda() {
  CudaProbe probe;
  probe.built = true;
  probe.runtime_version = CUDART_VERSION;
  cudaDriverGetVersion(&probe.driver_version);
  if (probe.driver_version == 0) {
    probe.reason =
        "no NVIDIA driver on this machine (cudaDriverGetVersion reports none): the gpu backend "
        "needs an NVIDIA GPU with its driver";
    return probe;
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    probe.reason = std::string("no usable CUDA device: cudaGetDeviceCount failed with ") +
                   cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return probe;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    probe.devices.push_back(
        CudaDevice{i, prop.name, prop.major, prop.minor, static_cast<size_t>(prop.totalGlobalMem)});
  }
  if (probe.devices.empty()) probe.reason = "no usable CUDA device: none reported its properties";
  return probe;
}

}  // namespace tpusim::runtime::gpu
