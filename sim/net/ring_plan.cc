#include "sim/net/ring_plan.h"

#include <algorithm>
#include <array>
#include <utility>

namespace tpusim::sim {

namespace {

// Segment s of `elements` split into k, the first elements % k one longer: {begin, size}.
std::pair<uint64_t, uint64_t> split(uint64_t elements, uint64_t k, uint64_t s) {
  const uint64_t base = elements / k, extra = elements % k;
  return {s * base + std::min(s, extra), base + (s < extra ? 1 : 0)};
}

}  // namespace

uint64_t RingPass::segment_begin(uint32_t s) const { return split(elements, size(), s).first; }

uint64_t RingPass::segment_size(uint32_t s) const { return split(elements, size(), s).second; }

uint32_t RingPass::segment_sent(uint32_t member, uint32_t step) const {
  const uint32_t k = size();
  const uint32_t rs_steps = reduce_scatter ? k - 1 : 0;
  // Reduce-scatter step t sends (i - t - 1); all-gather step u sends (i - u).
  const uint32_t back = step < rs_steps ? step + 1 : step - rs_steps;
  return (member + k - back % k) % k;
}

CollectivePlan hierarchical_all_reduce(
    uint64_t offset, uint64_t elements, const std::vector<uint32_t>& sizes,
    const std::function<CoreId(const std::vector<uint32_t>&)>& core_of, bool reverse) {
  const size_t axes = sizes.size();
  // The passes along `axis`: one per line of the grid, over the region the earlier axes' reduce-
  // scatters left the line (axis j's split of it, the segment of the line's member there, for
  // every j < axis). Lines go with the lowest other axis fastest.
  auto passes_along = [&](size_t axis, bool reduce_scatter, bool all_gather) {
    std::vector<RingPass> passes;
    uint64_t lines = 1;
    for (size_t j = 0; j < axes; ++j) lines *= j == axis ? 1 : sizes[j];
    for (uint64_t line = 0; line < lines; ++line) {
      std::vector<uint32_t> at(axes, 0);
      uint64_t rest = line;
      for (size_t j = 0; j < axes; ++j) {
        if (j == axis) continue;
        at[j] = static_cast<uint32_t>(rest % sizes[j]);
        rest /= sizes[j];
      }
      RingPass pass;
      pass.offset = offset;
      pass.elements = elements;
      for (size_t j = 0; j < axis; ++j) {
        // The member at coordinate c is ring index c, or k-1-c round a reversed ring.
        const auto [begin, size] =
            split(pass.elements, sizes[j], reverse ? sizes[j] - 1 - at[j] : at[j]);
        pass.offset += begin;
        pass.elements = size;
      }
      for (uint32_t i = 0; i < sizes[axis]; ++i) {
        at[axis] = reverse ? sizes[axis] - 1 - i : i;
        pass.members.push_back(core_of(at));
      }
      pass.reduce_scatter = reduce_scatter;
      pass.all_gather = all_gather;
      pass.ties = reverse ? TieBreak::kNegative : TieBreak::kPositive;
      passes.push_back(std::move(pass));
    }
    return passes;
  };
  if (axes == 0) return {};
  CollectivePlan plan;
  for (size_t a = 0; a + 1 < axes; ++a) plan.push_back(passes_along(a, true, false));
  plan.push_back(passes_along(axes - 1, true, true));
  for (size_t a = axes - 1; a-- > 0;) plan.push_back(passes_along(a, false, true));
  return plan;
}

namespace {

// TORUS: 2D parts of the data, part (direction, r) through the dimensions in the order r, r+1,
// ... (mod D), its rings the positive way round for the first D parts and the negative way for
// the rest. Phase j of the plan holds every part's phase j.
CollectivePlan every_dimension_plan(uint64_t n, const Topology& topology, const RingPass& whole) {
  const std::array<uint32_t, 3> grid = topology.grid_3d();
  std::vector<uint32_t> dims;  // of more than one core
  for (uint32_t d = 0; d < 3; ++d) {
    if (grid[d] > 1) dims.push_back(d);
  }
  if (dims.empty()) return {{whole}};
  const size_t D = dims.size(), parts = 2 * D;
  CollectivePlan plan(2 * D - 1);
  for (size_t part = 0; part < parts; ++part) {
    const size_t first = part % D;
    std::vector<uint32_t> sizes, order;
    for (size_t i = 0; i < D; ++i) {
      order.push_back(dims[(first + i) % D]);
      sizes.push_back(grid[order.back()]);
    }
    const auto [begin, size] = split(n, parts, part);
    const CollectivePlan one = hierarchical_all_reduce(
        begin, size, sizes,
        [&](const std::vector<uint32_t>& at) {
          std::array<uint32_t, 3> xyz = {0, 0, 0};
          for (size_t i = 0; i < D; ++i) xyz[order[i]] = at[i];
          return topology.core_at_3d(xyz);
        },
        part >= D);
    for (size_t j = 0; j < one.size(); ++j)
      plan[j].insert(plan[j].end(), one[j].begin(), one[j].end());
  }
  return plan;
}

}  // namespace

std::vector<CoreId> collective_members(const isa::Collective& c, const Topology& topology) {
  if (c.group_size() == 0) return topology.snake_ring();
  std::vector<CoreId> members;
  members.reserve(static_cast<size_t>(c.group_size()));
  for (uint32_t core : c.group()) members.push_back(CoreId{core});
  return members;
}

CollectivePlan plan_collective(const isa::Collective& c, const std::vector<CoreId>& members,
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
    return hierarchical_all_reduce(0, n, {topology.grid_x(), topology.grid_y()},
                                   [&](const std::vector<uint32_t>& at) {
                                     return topology.core_at(at[0], topology.snake_row(at[1]));
                                   });
  }
  if (c.algorithm() == isa::Collective::TORUS) return every_dimension_plan(n, topology, whole);
  return {{whole}};
}

}  // namespace tpusim::sim
