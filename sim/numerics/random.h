#pragma once
// Deterministic random numbers, the same on every backend and machine: a counter-based
// generator (the vector unit's RNG and dropout masks: value = f(seed, step, element)) and a
// seeded stream for variable initialisers. Nothing here depends on the standard library's
// distributions, whose results differ between implementations.

#include <cstdint>

#include "sim/numerics/host_device.h"

namespace tpusim::sim {

// SplitMix64's finaliser: a bijective mix of 64 bits.
TPUSIM_HOST_DEVICE constexpr uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 random bits, from (seed, step, index).
TPUSIM_HOST_DEVICE inline float counter_uniform(uint64_t seed, uint64_t step, uint64_t index) {
  const uint64_t h = mix64(mix64(mix64(seed) ^ step) ^ index);
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

// A seeded stream: uniform [0, 1) and standard normal (Box-Muller) draws.
class RandomStream {
 public:
  explicit RandomStream(uint64_t seed) : state_(mix64(seed)) {}
  double uniform() {
    return static_cast<double>(mix64(state_++) >> 11) * (1.0 / 9007199254740992.0);
  }
  double normal();

 private:
  uint64_t state_;
};

}  // namespace tpusim::sim
