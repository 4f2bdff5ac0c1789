// Loads the built-in TPU chips through the config library and compares them: peak bf16
// compute, HBM bandwidth and the roofline ridge point (FLOPs per HBM byte above which a kernel
// is compute-bound). Run: build/bin/compare_generations
#include <cstdio>

#include "configs/loader.h"

int main() {
  std::printf("%-8s %6s %12s %10s %14s\n", "chip", "cores", "bf16 TFLOPS", "HBM GB/s",
              "ridge FLOP/B");
  for (const char* name : {"tpu_v2", "tpu_v3", "tpu_v4", "tpu_v5e", "tpu_v5p"}) {
    auto chip = tpusim::config::load_chip(name);
    if (!chip.ok()) {
      std::fprintf(stderr, "%s\n", std::string(chip.status().message()).c_str());
      return 1;
    }
    const auto& c = **chip;
    std::printf("%-8s %6u %12.1f %10.0f %14.0f\n", c.name.c_str(), c.tensor_cores,
                c.peak_bf16_flops / 1e12, c.hbm.bandwidth_bytes_per_s / 1e9,
                c.machine_balance_flops_per_byte);
  }
  return 0;
}
