#pragma once
// Timing of a chip's HBM: `channels` channels sharing the configured bandwidth equally, with
// addresses interleaved across them every `interleave_bytes`. A transfer is spread over the
// channels its bytes fall in (all of them once it spans channels x interleave bytes); each
// channel serves its requests in arrival order, so every requester on the chip (the DMA engines
// of all cores, and the collectives' reads and writes) shares the bandwidth through these
// channel arbiters. The last byte arrives one
// access latency after its channel finished.
//
// Most requests span every channel. While they do and the channels are in step (each free at
// the same cycle), one shared schedule stands for all of them: a request costs O(1) instead of
// O(channels), with the same results. A request on some channels hands the schedule back.

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

  double latency_cycles() const { return latency_cycles_; }
  // All channels together.
  double bytes_per_cycle() const { return channels_.front().bytes_per_cycle() * channels_.size(); }
  double bytes_served() const;
  // Cycles during which at least the busiest channel was working, for the achieved bandwidth.
  double busiest_channel_cycles() const;
  void reset_stats();
  // After a failed run: every channel free and in step, as after construction.
  void forget_reservations();

 private:
  std::vector<BandwidthServer> channels_;
  uint64_t interleave_bytes_;
  double latency_cycles_;
  // In step: every channel free at shared_free_at_; shared_busy_ and shared_bytes_ are what each
  // channel served while in step, on top of its own statistics.
  bool in_step_ = true;
  double shared_free_at_ = 0;
  double shared_busy_ = 0;
  double shared_bytes_ = 0;
};

}  // namespace tpusim::sim
