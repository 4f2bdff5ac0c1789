#include "sim/net/collective_bound.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace tpusim::sim {
namespace {

struct Ring {
  double p = 1;
  double latency_s = 0;  // per edge, averaged round the ring
  double bytes_per_s = std::numeric_limits<double>::infinity();  // the slowest edge's
};

Ring ring_of(const Topology& t, const std::vector<uint32_t>& members) {
  Ring r;
  r.p = static_cast<double>(members.size());
  if (members.size() < 2) return r;
  double total_latency = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    for (uint32_t link : t.route(members[i], members[(i + 1) % members.size()])) {
      total_latency += t.link(link).latency_s;
      r.bytes_per_s = std::min(r.bytes_per_s, t.link(link).bytes_per_s);
    }
  }
  r.latency_s = total_latency / r.p;
  return r;
}

}  // namespace

CollectiveBound all_reduce_bound(const Topology& t, isa::Collective::Algorithm algorithm,
                                 double n) {
  CollectiveBound b;
  b.members = t.cores();
  if (t.cores() < 2) return b;
  if (algorithm == isa::Collective::TORUS_2D) {
    std::vector<uint32_t> row, column;
    for (uint32_t x = 0; x < t.grid_x(); ++x) row.push_back(t.core_at(x, 0));
    for (uint32_t y = 0; y < t.grid_y(); ++y) column.push_back(t.core_at(0, t.snake_row(y)));
    const Ring rx = ring_of(t, row), ry = ring_of(t, column);
    b.latency_seconds = 2 * (rx.p - 1) * rx.latency_s + 2 * (ry.p - 1) * ry.latency_s;
    if (rx.p > 1) b.bandwidth_seconds += 2 * (rx.p - 1) / rx.p * n / rx.bytes_per_s;
    if (ry.p > 1) b.bandwidth_seconds += 2 * (ry.p - 1) / ry.p * (n / rx.p) / ry.bytes_per_s;
  } else {
    const Ring r = ring_of(t, t.snake_ring());
    const double share = algorithm == isa::Collective::BIDIR_RING ? 1 : 2;
    b.latency_seconds = 2 * (r.p - 1) * r.latency_s;
    b.bandwidth_seconds = share * (r.p - 1) / r.p * n / r.bytes_per_s;
  }
  b.seconds = b.latency_seconds + b.bandwidth_seconds;
  return b;
}

double link_floor_seconds(const Topology& topology, const CollectivePlan& plan,
                          uint64_t element_bytes) {
  std::vector<double> bytes(topology.link_count(), 0.0);
  for (const auto& phase : plan) {
    for (const RingPass& pass : phase) {
      const uint32_t k = pass.size();
      for (uint32_t i = 0; i < k && pass.steps() > 0; ++i) {
        double sent = 0;
        for (uint32_t t = 0; t < pass.steps(); ++t)
          sent += static_cast<double>(pass.segment_size(pass.segment_sent(i, t)) * element_bytes);
        for (uint32_t link : topology.route(pass.members[i], pass.members[(i + 1) % k]))
          bytes[link] += sent;
      }
    }
  }
  double floor = 0;
  for (uint32_t l = 0; l < topology.link_count(); ++l) {
    if (bytes[l] > 0) floor = std::max(floor, bytes[l] / topology.link(l).bytes_per_s);
  }
  return floor;
}

}  // namespace tpusim::sim
