#include "sim/timing/bandwidth_server.h"

#include <algorithm>

namespace tpusim::sim {

BandwidthServer::BandwidthServer(double bytes_per_cycle) : bytes_per_cycle_(bytes_per_cycle) {}

Interval BandwidthServer::reserve(double now, double bytes) {
  const double start = std::max(now, free_at_);
  const double duration = bytes / bytes_per_cycle_;
  free_at_ = start + duration;
  busy_cycles_ += duration;
  bytes_served_ += bytes;
  return Interval{start, free_at_};
}

void BandwidthServer::reset_stats() {
  busy_cycles_ = 0;
  bytes_served_ = 0;
}

}  // namespace tpusim::sim
