#pragma once
// Timing of a chip's HBM: `channels` channels sharing the configured bandwidth equally, with
// addresses interleaved across them every `interleave_bytes`. A transfer is spread over the
// channels its bytes fall in (all of them once it spans channels x interleave bytes); each
// channel serves its requests in arrival order, so every requester on the chip (the DMA engines
// of all cores) shares the bandwidth through these channel arbiters. The last byte arrives one
// access latency after its channel finished.

#include <cstdint>
#include <vector>

#include "sim/timing/bandwidth_server.h"

namespace tpusim::sim {

class HbmTiming {
 public:
  HbmTiming(uint32_t channels, double bytes_per_cycle, uint64_t interleave_bytes,
            double latency_cycles);

  // The cycle (fractional) at which `bytes` starting at `address`, requested at `now`, have
  // all moved.
  double transfer(double now, uint64_t address, uint64_t bytes);

  double bytes_served() const;
  // Cycles during which at least the busiest channel was working, for the achieved bandwidth.
  double busiest_channel_cycles() const;
  void reset_stats();

 private:
  std::vector<BandwidthServer> channels_;
  uint64_t interleave_bytes_;
  double latency_cycles_;
};

}  // namespace tpusim::sim
