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

const std::vector<uint32_t>& Interconnect::route(CoreId from, CoreId to, TieBreak ties) {
  const uint64_t key = (uint64_t{index(from)} << 32) | index(to);
  auto& routes = routes_[ties == TieBreak::kPositive ? 0 : 1];
  auto it = routes.find(key);
  if (it == routes.end()) it = routes.emplace(key, topology_.route(from, to, ties)).first;
  return it->second;
}

TransferTimes Interconnect::transfer(CoreId from, CoreId to, double ready, double bytes,
                                     double last_ready, TieBreak ties) {
  return transfer_along(route(from, to, ties), ready, bytes, last_ready);
}

TransferTimes Interconnect::transfer_along(const std::vector<uint32_t>& hops, double ready,
                                           double bytes, double last_ready) {
  if (hops.empty()) return {std::max(ready, last_ready), std::max(ready, last_ready)};
  TransferTimes times;
  // The source is the stage before the first link, with no latency of its own.
  Interval prev{ready, std::max(ready, last_ready)};
  double prev_latency = 0;
  for (uint32_t link : hops) {
    BandwidthServer& server = links_[link];
    const double duration = bytes / server.bytes_per_cycle();
    const double earliest = std::max(prev.start + prev_latency, prev.end + prev_latency - duration);
    prev = server.reserve(earliest, bytes);
    if (link == hops.front()) times.first_link_end = prev.end;
    if (!utilization_.empty() && prev.end > prev.start) {
      utilization_[link].add(clock_->time_at(prev.start), clock_->time_at(prev.end),
                             std::min(1.0, duration / (prev.end - prev.start)));
    }
    prev_latency = latency_cycles_[link];
  }
  times.landed = prev.end + prev_latency;
  return times;
}

void Interconnect::observe(traces::Sink* sink, const ClockDomain& clock) {
  clock_ = &clock;
  utilization_.clear();
  for (uint32_t l = 0; l < topology_.link_count(); ++l) {
    // "chip 3 +x" -> "+x": the track already belongs to its chip.
    const std::string name = topology_.link_name(l);
    const size_t after_chip = name.find(' ', name.find(' ') + 1) + 1;
    const traces::TrackId track = sink->declare_track(
        {traces::TrackInfo::Kind::kCounter, static_cast<int>(index(topology_.link_chip(l))), -1,
         "ici_link_utilization " + name.substr(after_chip), "fraction"});
    utilization_.emplace_back(sink, track);
  }
}

void Interconnect::flush_trace_counters() {
  for (RateCounter& c : utilization_) c.retire_until(UINT64_MAX);
}

void Interconnect::forget_reservations() {
  for (BandwidthServer& link : links_) link.forget_reservations();
}

void Interconnect::reset_stats() {
  for (BandwidthServer& s : links_) s.reset_stats();
}

}  // namespace tpusim::sim
