#include "sim/net/collective_bound.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace tpusim::sim {
namespace {

struct Ring {
  double p = 1;
  double latency_s = 0;  // per edge, averaged round the ring
  double bytes_per_s = std::numeric_limits<double>::infinity();  // the slowest edge's
};

Ring ring_of(const Topology& t, const std::vector<CoreId>& members) {
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
    std::vector<CoreId> row, column;
    for (uint32_t x = 0; x < t.grid_x(); ++x) row.push_back(t.core_at(x, 0));
    for (uint32_t y = 0; y < t.grid_y(); ++y) column.push_back(t.core_at(0, t.snake_row(y)));
    const Ring rx = ring_of(t, row), ry = ring_of(t, column);
    b.latency_seconds = 2 * (rx.p - 1) * rx.latency_s + 2 * (ry.p - 1) * ry.latency_s;
    if (rx.p > 1) b.bandwidth_seconds += 2 * (rx.p - 1) / rx.p * n / rx.bytes_per_s;
    if (ry.p > 1) b.bandwidth_seconds += 2 * (ry.p - 1) / ry.p * (n / rx.p) / ry.bytes_per_s;
  } else if (algorithm == isa::Collective::TORUS) {
    // One ring per dimension of more than one core: the line through core 0.
    const std::array<uint32_t, 3> grid = t.grid_3d();
    std::vector<Ring> rings;
    std::vector<double> sharing;  // lines through each link: a chip's cores' lines along Y or Z
    for (uint32_t d = 0; d < 3; ++d) {
      if (grid[d] < 2) continue;
      sharing.push_back(d == 0 ? 1.0 : t.cores_per_chip());
      std::vector<CoreId> line;
      for (uint32_t i = 0; i < grid[d]; ++i) {
        std::array<uint32_t, 3> xyz = {0, 0, 0};
        xyz[d] = i;
        line.push_back(t.core_at_3d(xyz));
      }
      rings.push_back(ring_of(t, line));
    }
    const size_t D = rings.size();
    for (size_t i = 0; i < D; ++i) {
      b.latency_seconds += 2 * (rings[i].p - 1) * rings[i].latency_s;
      // Dimension i's links, each way: every part that way round (D of them, n / 2D each) at
      // position (i - r) mod D of its order r, r+1, ..., on what the dimensions before left it;
      // along Y and Z the lines of a chip's cores share the chip's links.
      double bytes = 0;
      for (size_t r = 0; r < D; ++r) {
        double before = 1;
        for (size_t q = r; q % D != i; ++q) before *= rings[q % D].p;
        bytes += 2 * (rings[i].p - 1) / rings[i].p * n / static_cast<double>(2 * D) / before;
      }
      b.bandwidth_seconds =
          std::max(b.bandwidth_seconds, sharing[i] * bytes / rings[i].bytes_per_s);
    }
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
        for (uint32_t link : topology.route(pass.members[i], pass.members[(i + 1) % k], pass.ties))
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
