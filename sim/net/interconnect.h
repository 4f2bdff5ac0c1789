#pragma once
// Timing of transfers over the slice's links (topology.h). Each directed link moves a fixed
// number of bytes per cycle and serves transfers in the order they are made (a FIFO arbiter per
// link), so transfers that share a link share its bandwidth and contention is modelled, not
// assumed. A transfer cuts through: its head enters the next link of the route after the
// previous link's latency, and no link finishes before the one before it has; the last byte
// lands one latency after the last link finishes. Times are fractional core cycles.
//
// With a trace sink each link has a counter track, "ici_link_utilization +x" (or
// "... core 0->1"): the fraction
// of the link's bandwidth in use, 1 while it serves a transfer at full rate, less while a
// cut-through transfer is held back by the link before it, 0 when idle.

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/clock.h"
#include "sim/net/topology.h"
#include "sim/stats/rate_counter.h"
#include "sim/timing/bandwidth_server.h"

namespace tpusim::sim {

// When a transfer's bytes have all left its first link, and when the last one landed.
struct TransferTimes {
  double first_link_end = 0;
  double landed = 0;
};

class Interconnect {
 public:
  Interconnect(const Topology& topology, const ClockDomain& clock);

  // Sends `bytes` from core `from` to core `to`, the first byte ready at `ready` and the last at
  // `last_ready` (a source that streams them, such as HBM: the first link cannot finish before
  // it).
  TransferTimes transfer(CoreId from, CoreId to, double ready, double bytes, double last_ready = 0,
                         TieBreak ties = TieBreak::kPositive);
  // The same along `hops`, a route() the caller kept (a collective sends many chunks between the
  // same two members).
  TransferTimes transfer_along(const std::vector<uint32_t>& hops, double ready, double bytes,
                               double last_ready = 0);
  // The links from core `from` to core `to`, in order; the reference stays valid for the
  // Interconnect's life.
  const std::vector<uint32_t>& route(CoreId from, CoreId to, TieBreak ties);

  const Topology& topology() const { return topology_; }
  double bytes_on(uint32_t link) const { return links_[link].bytes_served(); }
  double busy_cycles_on(uint32_t link) const { return links_[link].busy_cycles(); }
  void reset_stats();
  // After a failed run: every link free, as after construction.
  void forget_reservations();

  // Declares each link's utilisation counter track on `sink` (chip = the link's chip), timed
  // by `clock`.
  void observe(traces::Sink* sink, const ClockDomain& clock);
  // Emits the end of every transfer still on the counters (at the end of a run).
  void flush_trace_counters();

 private:
  const Topology& topology_;
  std::vector<BandwidthServer> links_;
  std::vector<double> latency_cycles_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> routes_[2];  // per TieBreak
  std::vector<RateCounter> utilization_;                           // per link, with a sink
  const ClockDomain* clock_ = nullptr;                             // with a sink
};

}  // namespace tpusim::sim
