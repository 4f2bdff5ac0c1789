#include "sim/net/interconnect.h"

#include <algorithm>

namespace tpusim::sim {

Interconnect::Interconnect(const Topology& topology, const ClockDomain& clock)
    : topology_(topology) {
  for (uint32_t l = 0; l < topology.link_count(); ++l) {
    const LinkSpec& spec = topology.link(l);
    links_.emplace_back(spec.bytes_per_s / clock.frequency_hz());
    latency_cycles_.push_back(spec.latency_s * clock.frequency_hz());
  }
}

const std::vector<uint32_t>& Interconnect::route(uint32_t from, uint32_t to) {
  const uint64_t key = (uint64_t{from} << 32) | to;
  auto it = routes_.find(key);
  if (it == routes_.end()) it = routes_.emplace(key, topology_.route(from, to)).first;
  return it->second;
}

double Interconnect::transfer(uint32_t from, uint32_t to, double ready, double bytes) {
  const std::vector<uint32_t>& hops = route(from, to);
  if (hops.empty()) return ready;
  Interval prev{ready, ready};
  double prev_latency = 0;
  bool first = true;
  for (uint32_t link : hops) {
    BandwidthServer& server = links_[link];
    const double duration = bytes / server.bytes_per_cycle();
    const double earliest =
        first ? ready : std::max(prev.start + prev_latency, prev.end + prev_latency - duration);
    prev = server.reserve(earliest, bytes);
    prev_latency = latency_cycles_[link];
    first = false;
  }
  return prev.end + prev_latency;
}

void Interconnect::reset_stats() {
  for (BandwidthServer& s : links_) s.reset_stats();
}

}  // namespace tpusim::sim
