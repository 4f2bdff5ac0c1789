#include "runtime/backend/tpusim/allreduce_combiner.h"

#include <algorithm>
#include <limits>

#include "runtime/backend/tpusim/schedule.h"

namespace tpusim::runtime::tpusim_backend {

CombinedAllReduces::CombinedAllReduces(const Graph& graph, const std::vector<bool>& needed,
                                       bool hoisted, const CombineLimits& limits,
                                       const std::vector<int>& computed_with) {
  const int n = graph.size();
  root_.assign(static_cast<size_t>(n), -1);
  members_.resize(static_cast<size_t>(n));
  if (limits.threshold_bytes == 0 || limits.max_count < 2) return;
  auto is_sum = [&](int id) { return graph.node(id).op == Op::kCrossReplicaSum; };
  // Where each node would be emitted uncombined (the infeeds first, then graph order, each sum
  // right after its input when hoisted): a group is emitted where its last member would be.
  std::vector<int> position(static_cast<size_t>(n), 0);
  {
    const std::vector<int> order = emission_order(graph, hoisted, nullptr, computed_with);
    for (int p = 0; p < n; ++p) position[static_cast<size_t>(order[static_cast<size_t>(p)])] = p;
  }
  // Per node: the earliest emitted node that reads it.
  std::vector<int> first_reader(static_cast<size_t>(n), std::numeric_limits<int>::max());
  std::vector<bool> read_by_sum(static_cast<size_t>(n), false);
  for (int id = 0; id < n; ++id) {
    for (int in : graph.node(id).inputs) {
      int& first = first_reader[static_cast<size_t>(in)];
      first = std::min(first, position[static_cast<size_t>(id)]);
      if (is_sum(id)) read_by_sum[static_cast<size_t>(in)] = true;
    }
  }
  // The sums that may combine: a sum of a sum's result, or one whose result another sum reads,
  // keeps a collective of its own (the emission order hoists such chains as a whole).
  std::vector<int> sums;
  for (int id = 0; id < n; ++id) {
    if (!is_sum(id) || (!needed.empty() && !needed[static_cast<size_t>(id)])) continue;
    const Node& node = graph.node(id);
    if (node.dtype == DType::kS32 || is_sum(node.inputs[0]) ||
        read_by_sum[static_cast<size_t>(id)]) {
      continue;
    }
    sums.push_back(id);
  }
  // Where each would be emitted: right after its input, or at its own place.
  auto key = [&](int id) {
    return hoisted ? position[static_cast<size_t>(graph.node(id).inputs[0])]
                   : position[static_cast<size_t>(id)];
  };
  std::stable_sort(sums.begin(), sums.end(), [&](int a, int b) { return key(a) < key(b); });

  std::vector<int> group;
  uint64_t bytes = 0;
  int first_read = std::numeric_limits<int>::max();  // the group's members' first reader
  auto close = [&] {
    if (group.size() >= 2) {
      const int root = group.back();
      for (int m : group) root_[static_cast<size_t>(m)] = root;
      members_[static_cast<size_t>(root)] = group;
      ++groups_;
      sums_ += static_cast<uint32_t>(group.size());
    }
    group.clear();
    bytes = 0;
    first_read = std::numeric_limits<int>::max();
  };
  for (int id : sums) {
    const uint64_t b = static_cast<uint64_t>(graph.node(id).shape.elements()) * 4;
    // It joins only if every member's result is read after it would run: otherwise what it
    // sums may depend on a member, and the group could never start.
    const bool joins = !group.empty() && bytes + b <= limits.threshold_bytes &&
                       group.size() < limits.max_count && first_read > key(id);
    if (!joins) close();
    group.push_back(id);
    bytes += b;
    first_read = std::min(first_read, first_reader[static_cast<size_t>(id)]);
  }
  close();
}

std::vector<int> CombinedAllReduces::members(int root) const {
  if (root_.empty() || root_[static_cast<size_t>(root)] != root) return {root};
  return members_[static_cast<size_t>(root)];
}

}  // namespace tpusim::runtime::tpusim_backend
