#include "sim/net/ring_plan.h"

#include <algorithm>

namespace tpusim::sim {

uint64_t RingPass::segment_begin(uint32_t s) const {
  const uint64_t k = size(), base = elements / k, extra = elements % k;
  return s * base + std::min<uint64_t>(s, extra);
}

uint64_t RingPass::segment_size(uint32_t s) const {
  const uint64_t k = size();
  return elements / k + (s < elements % k ? 1 : 0);
}

uint32_t RingPass::segment_sent(uint32_t member, uint32_t step) const {
  const uint32_t k = size();
  const uint32_t rs_steps = reduce_scatter ? k - 1 : 0;
  // Reduce-scatter step t sends (i - t - 1); all-gather step u sends (i - u).
  const uint32_t back = step < rs_steps ? step + 1 : step - rs_steps;
  return (member + k - back % k) % k;
}

std::vector<uint32_t> collective_members(const isa::Collective& c, const Topology& topology) {
  if (c.group_size() > 0) return {c.group().begin(), c.group().end()};
  return topology.snake_ring();
}

CollectivePlan plan_collective(const isa::Collective& c, const std::vector<uint32_t>& members,
                               const Topology& topology) {
  const uint64_t n = c.elements();
  RingPass whole;
  whole.members = members;
  whole.elements = n;
  switch (c.kind()) {
    case isa::Collective::REDUCE_SCATTER:
      whole.all_gather = false;
      return {{whole}};
    case isa::Collective::ALL_GATHER:
      // Each member's src is segment i of a buffer of n * k elements.
      whole.elements = n * members.size();
      whole.reduce_scatter = false;
      return {{whole}};
    default:
      break;
  }
  if (c.algorithm() == isa::Collective::BIDIR_RING) {
    RingPass forward = whole, backward = whole;
    forward.elements = n / 2;
    backward.offset = n / 2;
    backward.elements = n - n / 2;
    std::reverse(backward.members.begin(), backward.members.end());
    return {{forward, backward}};
  }
  if (c.algorithm() == isa::Collective::TORUS_2D) {
    const uint32_t gx = topology.grid_x(), gy = topology.grid_y();
    std::vector<RingPass> rows_rs, columns, rows_ag;
    for (uint32_t y = 0; y < gy; ++y) {
      RingPass row;
      for (uint32_t x = 0; x < gx; ++x)
        row.members.push_back(topology.core_at(x, topology.snake_row(y)));
      row.elements = n;
      row.all_gather = false;
      rows_rs.push_back(row);
      row.all_gather = true;
      row.reduce_scatter = false;
      rows_ag.push_back(row);
    }
    // Column x all-reduces segment x of the rows' passes.
    for (uint32_t x = 0; x < gx; ++x) {
      RingPass column;
      for (uint32_t y = 0; y < gy; ++y)
        column.members.push_back(topology.core_at(x, topology.snake_row(y)));
      column.offset = rows_rs[0].segment_begin(x);
      column.elements = rows_rs[0].segment_size(x);
      columns.push_back(column);
    }
    return {rows_rs, columns, rows_ag};
  }
  return {{whole}};
}

}  // namespace tpusim::sim
