#include "runtime/backend/tpusim/hbm_plan.h"

#include <algorithm>
#include <map>

#include "common/align.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

bool aliases_input(Op op, uint32_t replicas) {
  return op == Op::kReshape || op == Op::kStopGradient ||
         (op == Op::kCrossReplicaSum && replicas == 1);
}

// First-fit allocation over [base, inf) with a free list kept sorted and coalesced.
class Allocator {
 public:
  explicit Allocator(uint64_t base) : top_(base) {}
  uint64_t allocate(uint64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second >= bytes) {
        const uint64_t at = it->first;
        const uint64_t rest = it->second - bytes;
        free_.erase(it);
        if (rest > 0) free_[at + bytes] = rest;
        return at;
      }
    }
    const uint64_t at = top_;
    top_ += bytes;
    return at;
  }
  void release(uint64_t at, uint64_t bytes) {
    auto it = free_.emplace(at, bytes).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  uint64_t top() const { return top_; }

 private:
  uint64_t top_;
  std::map<uint64_t, uint64_t> free_;
};

}  // namespace

uint64_t buffer_bytes(const Node& node) {
  return align_up(static_cast<uint64_t>(node.shape.elements()) * 4);
}

uint64_t device_bytes(const Node& node) {
  return align_up(static_cast<uint64_t>(node.shape.elements()) *
                  (node.dtype == DType::kBF16 ? 2 : 4));
}

namespace {

// The node whose buffer each node uses: itself, or its input's owner for an alias.
std::vector<int> buffer_owners(const Graph& graph, uint32_t replicas) {
  std::vector<int> owner(static_cast<size_t>(graph.size()));
  for (int i = 0; i < graph.size(); ++i) {
    const Node& node = graph.node(i);
    owner[static_cast<size_t>(i)] =
        aliases_input(node.op, replicas) ? owner[static_cast<size_t>(node.inputs[0])] : i;
  }
  return owner;
}

// Per owned buffer, the position in `order` of the last fragment that reads it through any alias
// (graph.size() for outputs and update values, which live to the end of the step). An overlapped
// collective's input lives as long as its result.
std::vector<int> last_reads(const Graph& graph, const std::vector<int>& owner,
                            const std::vector<int>& order, const std::vector<int>& position,
                            const PlanRequest& request) {
  const int n = graph.size();
  auto own = [&](int id) { return owner[static_cast<size_t>(id)]; };
  std::vector<int> last(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    const int at = position[static_cast<size_t>(i)];
    int& mine = last[static_cast<size_t>(own(i))];
    mine = std::max(mine, at);
    for (int in : request.reads[static_cast<size_t>(i)]) {
      int& slot = last[static_cast<size_t>(own(in))];
      slot = std::max(slot, at);
    }
  }
  for (const auto& o : graph.outputs()) last[static_cast<size_t>(own(o.node))] = n;
  for (const auto& u : graph.updates()) last[static_cast<size_t>(own(u.value))] = n;
  if (request.overlapped_collectives && request.replicas > 1) {
    // Latest first, so that a collective reading another's result holds that one's input too.
    for (int p = n - 1; p >= 0; --p) {
      const int i = order[static_cast<size_t>(p)];
      if (graph.node(i).op != Op::kCrossReplicaSum) continue;
      int& src = last[static_cast<size_t>(own(graph.node(i).inputs[0]))];
      src = std::max(src, last[static_cast<size_t>(own(i))]);
    }
  }
  return last;
}

// HbmPlan::in_place: each update value that its own elementwise fragment computes, in a buffer
// of its own of its variable's size and type, read by no output, at a position after every
// other fragment that reads the variable (through any alias).
std::vector<int> in_place_updates(const Graph& graph, const std::vector<int>& owner,
                                  const std::vector<int>& position, const PlanRequest& request) {
  const int n = graph.size();
  std::vector<int> in_place(static_cast<size_t>(n), -1);
  if (request.elementwise_fragment.size() != static_cast<size_t>(n)) return in_place;
  std::vector<int> value_of(static_cast<size_t>(n), -1);  // per variable, its candidate value
  std::vector<bool> output(static_cast<size_t>(n), false);
  for (const auto& o : graph.outputs()) output[static_cast<size_t>(o.node)] = true;
  for (const auto& u : graph.updates()) {
    const auto v = static_cast<size_t>(u.value);
    const Node& var = graph.node(u.variable);
    const Node& value = graph.node(u.value);
    if (request.elementwise_fragment[v] && request.materialized[v] && owner[v] == u.value &&
        !persistent(value) && !output[v] && value.dtype == var.dtype &&
        value.shape.elements() == var.shape.elements() &&
        owner[static_cast<size_t>(u.variable)] == u.variable)
      value_of[static_cast<size_t>(u.variable)] = u.value;
  }
  // The latest position at which a fragment other than the candidate reads each variable.
  std::vector<int> last_other(static_cast<size_t>(n), -1);
  for (int i = 0; i < n; ++i) {
    for (int in : request.reads[static_cast<size_t>(i)]) {
      const auto w = static_cast<size_t>(owner[static_cast<size_t>(in)]);
      if (value_of[w] >= 0 && value_of[w] != i)
        last_other[w] = std::max(last_other[w], position[static_cast<size_t>(i)]);
    }
  }
  for (int w = 0; w < n; ++w) {
    const int v = value_of[static_cast<size_t>(w)];
    if (v >= 0 && last_other[static_cast<size_t>(w)] < position[static_cast<size_t>(v)])
      in_place[static_cast<size_t>(v)] = w;
  }
  return in_place;
}

}  // namespace

bool persistent(const Node& node) { return node.op == Op::kVariable || node.op == Op::kConstant; }

HbmPlan plan_hbm(const Graph& graph, uint64_t base, const PlanRequest* request) {
  const int n = graph.size();
  PlanRequest defaults;
  if (request == nullptr) {
    defaults.materialized.assign(static_cast<size_t>(n), true);
    defaults.reads.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) defaults.reads[static_cast<size_t>(i)] = graph.node(i).inputs;
    request = &defaults;
  }
  HbmPlan plan;
  plan.address.assign(static_cast<size_t>(n), 0);
  plan.owner = buffer_owners(graph, request->replicas);
  std::vector<int> order = request->order;
  if (order.empty()) {
    for (int i = 0; i < n; ++i) order.push_back(i);
  }
  plan.position.assign(static_cast<size_t>(n), 0);
  for (int p = 0; p < n; ++p) plan.position[static_cast<size_t>(order[static_cast<size_t>(p)])] = p;
  plan.last_read = last_reads(graph, plan.owner, order, plan.position, *request);
  const std::vector<int>& last = plan.last_read;
  const std::vector<int>& position = plan.position;
  plan.in_place = in_place_updates(graph, plan.owner, position, *request);
  auto own_buffer = [&](int i) {
    return plan.owner[static_cast<size_t>(i)] == i &&
           request->materialized[static_cast<size_t>(i)] &&
           plan.in_place[static_cast<size_t>(i)] < 0;
  };
  Allocator alloc(base);
  Allocator device(0);  // the same buffers at the device's sizes
  std::vector<uint64_t> device_address(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    if (!persistent(graph.node(i))) continue;
    plan.address[static_cast<size_t>(i)] = alloc.allocate(buffer_bytes(graph.node(i)));
    device_address[static_cast<size_t>(i)] = device.allocate(device_bytes(graph.node(i)));
  }
  plan.persistent_bytes = alloc.top() - base;
  plan.device_persistent_bytes = device.top();
  std::vector<std::vector<int>> release_after(static_cast<size_t>(n) + 1);
  for (int i = 0; i < n; ++i) {
    if (!own_buffer(i) || persistent(graph.node(i))) continue;
    release_after[static_cast<size_t>(last[static_cast<size_t>(i)])].push_back(i);
  }
  int peak_position = -1;  // where the device's peak was reached
  for (int p = 0; p < n; ++p) {
    const int i = order[static_cast<size_t>(p)];
    const int owner = plan.owner[static_cast<size_t>(i)];
    if (own_buffer(i) && !persistent(graph.node(i))) {
      plan.address[static_cast<size_t>(i)] = alloc.allocate(buffer_bytes(graph.node(i)));
      device_address[static_cast<size_t>(i)] = device.allocate(device_bytes(graph.node(i)));
    } else if (owner != i) {
      plan.address[static_cast<size_t>(i)] = plan.address[static_cast<size_t>(owner)];
    } else if (const int variable = plan.in_place[static_cast<size_t>(i)]; variable >= 0) {
      plan.address[static_cast<size_t>(i)] = plan.address[static_cast<size_t>(variable)];
    }
    plan.peak_bytes = std::max(plan.peak_bytes, alloc.top() - base);
    const uint64_t scratch = request->temporaries.size() == static_cast<size_t>(n)
                                 ? align_up(request->temporaries[static_cast<size_t>(i)])
                                 : 0;
    const uint64_t scratch_at = scratch > 0 ? device.allocate(scratch) : 0;
    if (device.top() > plan.device_peak_bytes) {
      plan.device_peak_bytes = device.top();
      peak_position = p;
    }
    if (scratch > 0) device.release(scratch_at, scratch);
    // A fragment's output is never released before it runs; a value no fragment reads is
    // released right after it.
    for (int dead : release_after[static_cast<size_t>(p)]) {
      alloc.release(plan.address[static_cast<size_t>(dead)], buffer_bytes(graph.node(dead)));
      device.release(device_address[static_cast<size_t>(dead)], device_bytes(graph.node(dead)));
    }
  }
  // What holds the peak: every buffer allocated by then and released no earlier (a release comes
  // after its position's allocation).
  plan.device_peak_position = peak_position;
  for (int i = 0; i < n && peak_position >= 0; ++i) {
    if (!own_buffer(i) || persistent(graph.node(i))) continue;
    if (position[static_cast<size_t>(i)] <= peak_position &&
        last[static_cast<size_t>(i)] >= peak_position)
      plan.live_at_device_peak.push_back(i);
  }
  return plan;
}

}  // namespace tpusim::runtime::tpusim_backend
