#pragma once
// A resource that moves a fixed number of bytes per cycle and serves requests in arrival order
// (a FIFO arbiter): a VMEM port group, one direction of a host link, one HBM channel. Times are
// fractional core cycles so that bandwidth is conserved exactly across many small requests;
// callers round the end up to a whole cycle when they wait on it.

#include <cstdint>

namespace tpusim::sim {

struct Interval {
  double start = 0;
  double end = 0;
};

class BandwidthServer {
 public:
  explicit BandwidthServer(double bytes_per_cycle);

  // Serves `bytes` no earlier than `now`, after every earlier request.
  Interval reserve(double now, double bytes);

  double bytes_per_cycle() const { return bytes_per_cycle_; }
  double free_at() const { return free_at_; }
  double busy_cycles() const { return busy_cycles_; }
  double bytes_served() const { return bytes_served_; }
  // Serves nothing before `cycle` (a schedule kept elsewhere, handed back).
  void hold_until(double cycle) { free_at_ = free_at_ > cycle ? free_at_ : cycle; }
  // After a failed run: free from now on, as after construction (a reservation it made may
  // reach past the cycle the run stopped at).
  void forget_reservations() { free_at_ = 0; }
  // Forgets its statistics (not its schedule: requests in flight stay reserved).
  void reset_stats();

 private:
  double bytes_per_cycle_;
  double free_at_ = 0;
  double busy_cycles_ = 0;
  double bytes_served_ = 0;
};

}  // namespace tpusim::sim
