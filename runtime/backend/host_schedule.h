#pragma once
// When the host has each loop step's input ready, for a backend that simulates time. The answer
// can depend on when the device took earlier steps (a host's input pipeline stops when its
// prefetch buffer is full), so a backend reports each step taken before it asks about the next.
// Times are the backend's device seconds (Backend::device_now_seconds()).

#include <cstdint>

namespace tpusim::runtime {

class HostSchedule {
 public:
  virtual ~HostSchedule() = default;
  // When step `step`'s batches are ready; every earlier step has been reported taken, or counts
  // as taken as soon as it was ready.
  virtual double ready_seconds(uint64_t step) = 0;
  // The device side took step `step`'s batches from the host at `seconds`.
  virtual void taken(uint64_t step, double seconds) = 0;

  // Hosts whose parts of each step are their own: each host's pipelines feed its own chips, and
  // its infeed thread takes its part when that part is ready, whatever the other hosts' state
  // (TPUEstimator's per-host input). 1: every step is one part, taken whole.
  virtual uint32_t hosts() const { return 1; }
  // ready_seconds and taken for host `host`'s part of step `step`.
  virtual double host_ready_seconds(uint64_t step, uint32_t /*host*/) {
    return ready_seconds(step);
  }
  virtual void host_taken(uint64_t step, uint32_t /*host*/, double seconds) {
    taken(step, seconds);
  }
};

}  // namespace tpusim::runtime
