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
};

}  // namespace tpusim::runtime
