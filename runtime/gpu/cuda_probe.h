#pragma once
// What the CUDA runtime sees on this machine. Built as CUDA when nvcc was found at configure
// time (TPUSIM_WITH_CUDA); otherwise the probe reports that CUDA was not built.

#include <string>
#include <vector>

namespace tpusim::runtime::gpu {

struct CudaDevice {
  int index = 0;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  size_t memory_bytes = 0;
};

struct CudaProbe {
  bool built = false;       // this binary contains CUDA code
  int runtime_version = 0;  // CUDART_VERSION it was built with, e.g. 13000
  int driver_version = 0;   // 0 when no driver is installed
  std::vector<CudaDevice> devices;
  std::string reason;  // why no device is usable ("" when one is)
};

// Asks the CUDA runtime once; never throws and never aborts (no driver, no device, a broken
// driver all end up in `reason`).
CudaProbe probe_cuda();

}  // namespace tpusim::runtime::gpu
