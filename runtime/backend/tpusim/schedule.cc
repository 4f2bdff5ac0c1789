#include "runtime/backend/tpusim/schedule.h"

#include <algorithm>

namespace tpusim::runtime::tpusim_backend {

namespace {

// Graph order, with each node computed with a later one (and the nodes between them that read
// it) moved to right after that one; a node moved already (a reader of an earlier moved node)
// stays where it was moved. A producer group's root that reductions compute (fusion_plan.h; an
// elementwise node, where a sibling is a reduction) goes right before them instead: its buffer
// is taken before their fragment, which writes it tile by tile while it still reads its
// operands, so the buffer cannot be one their fragment frees (a sibling's sums are stored after
// the pass).
std::vector<int> deferred_graph_order(const Graph& graph, const std::vector<int>& computed_with) {
  const int n = graph.size();
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  std::vector<std::vector<int>> after(static_cast<size_t>(n));  // moved to right after a node
  std::vector<std::vector<int>> before(static_cast<size_t>(n));  // moved to right before it
  std::vector<bool> moved(static_cast<size_t>(n), false);
  for (int a = 0; a < n && !computed_with.empty(); ++a) {
    const int b = computed_with[static_cast<size_t>(a)];
    if (b < 0) continue;
    std::vector<bool> reads_a(static_cast<size_t>(b - a), false);  // nodes a .. b-1
    reads_a[0] = true;
    auto move = [&](int id) {
      if (moved[static_cast<size_t>(id)]) return;
      after[static_cast<size_t>(b)].push_back(id);
      moved[static_cast<size_t>(id)] = true;
    };
    if (is_elementwise(graph.node(a).op) && !moved[static_cast<size_t>(a)]) {
      before[static_cast<size_t>(b)].push_back(a);
      moved[static_cast<size_t>(a)] = true;
    }
    move(a);
    for (int id = a + 1; id < b; ++id) {
      for (int in : graph.node(id).inputs) {
        if (in < a || !reads_a[static_cast<size_t>(in - a)]) continue;
        reads_a[static_cast<size_t>(id - a)] = true;
        move(id);
        break;
      }
    }
  }
  for (int id = 0; id < n; ++id) {
    for (int m : before[static_cast<size_t>(id)]) order.push_back(m);
    if (!moved[static_cast<size_t>(id)]) order.push_back(id);
    for (int m : after[static_cast<size_t>(id)]) order.push_back(m);
  }
  return order;
}

}  // namespace

std::vector<int> emission_order(const Graph& graph, bool hoist_collectives,
                                const CombinedAllReduces* combined,
                                const std::vector<int>& computed_with) {
  const int n = graph.size();
  std::vector<std::vector<int>> follows(static_cast<size_t>(n));  // node -> collectives after it
  std::vector<bool> hoisted(static_cast<size_t>(n), false);
  if (hoist_collectives) {
    for (int id = 0; id < n; ++id) {
      const Node& node = graph.node(id);
      if (node.op != Op::kCrossReplicaSum) continue;
      follows[static_cast<size_t>(node.inputs[0])].push_back(id);
      hoisted[static_cast<size_t>(id)] = true;
    }
  }
  std::vector<int> order;
  order.reserve(static_cast<size_t>(n));
  // A hoisted collective's input comes before it in graph order, and so does everything a
  // collective that reads another collective's result waits for: appending each after its input
  // keeps every node after what it reads.
  auto place = [&](int id, auto&& self) -> void {
    const int root = combined != nullptr ? combined->root(id) : -1;
    if (root < 0) {
      order.push_back(id);
      for (int c : follows[static_cast<size_t>(id)]) self(c, self);
      return;
    }
    if (root != id) return;  // placed with its root
    // The combiner keeps every member's input before the root's and every reader after it.
    const std::vector<int> members = combined->members(root);
    for (int m : members) order.push_back(m);
    // (None follows a member today: the combiner leaves a sum that another sum reads alone.)
    for (int m : members) {
      for (int c : follows[static_cast<size_t>(m)]) self(c, self);
    }
  };
  // The infeeds come first: the step lands every one of them before its first fragment, so
  // their buffers are live from the start (an infeed later in graph order must not take the
  // buffer of a value that is still to be read).
  std::vector<bool> infeed(static_cast<size_t>(n), false);
  for (int id : graph.infeeds()) {
    infeed[static_cast<size_t>(id)] = true;
    place(id, place);
  }
  for (int id : deferred_graph_order(graph, computed_with)) {
    if (!hoisted[static_cast<size_t>(id)] && !infeed[static_cast<size_t>(id)]) place(id, place);
  }
  return order;
}

void CollectivesInFlight::started(uint64_t count, std::vector<HbmRange> src,
                                  std::vector<HbmRange> dst) {
  in_flight_.push_back({count, std::move(src), std::move(dst)});
}

uint64_t CollectivesInFlight::needed(const std::vector<HbmRange>& reads,
                                     const std::vector<HbmRange>& writes) const {
  auto overlaps_any = [](const HbmRange& r, const std::vector<HbmRange>& ranges) {
    return std::any_of(ranges.begin(), ranges.end(),
                       [&](const HbmRange& o) { return r.overlaps(o); });
  };
  uint64_t count = 0;
  for (const Collective& c : in_flight_) {
    bool touches = false;
    for (const HbmRange& r : reads) touches = touches || overlaps_any(r, c.dst);
    for (const HbmRange& w : writes)
      touches = touches || overlaps_any(w, c.src) || overlaps_any(w, c.dst);
    if (touches) count = std::max(count, c.count);
  }
  return count;
}

void CollectivesInFlight::retire(uint64_t count) {
  in_flight_.erase(std::remove_if(in_flight_.begin(), in_flight_.end(),
                                  [&](const Collective& c) { return c.count <= count; }),
                   in_flight_.end());
}

}  // namespace tpusim::runtime::tpusim_backend
