#include "runtime/backend/tpusim/rematerialize.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "runtime/backend/tpusim/hbm_plan.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

// Whether `reader` computes its input `node` again, in a copy of its own placed right before it;
// `inside_copy`: `node` is read by such a copy rather than by `reader` itself.
using Recompute = std::function<bool(int reader, int node, bool inside_copy)>;

// `graph` rebuilt with the copies `recompute` asks for: one per (reader, node), shared by the
// reader's inputs naming it, each copy's own inputs resolved the same way.
std::unique_ptr<Rematerialized> rebuild(const Graph& graph, const Recompute& recompute) {
  auto out = std::make_unique<Rematerialized>();
  out->new_id.assign(static_cast<size_t>(graph.size()), -1);
  for (int id = 0; id < graph.size(); ++id) {
    std::map<int, int> copies;  // given node -> its copy for this reader
    std::function<int(int, bool)> resolve = [&](int node, bool inside_copy) {
      if (!recompute(id, node, inside_copy)) return out->new_id[static_cast<size_t>(node)];
      if (auto it = copies.find(node); it != copies.end()) return it->second;
      Node copy = graph.node(node);
      for (int& in : copy.inputs) in = resolve(in, true);
      copy.label += "/rematerialized";
      const int at = out->graph.add(std::move(copy));
      out->old_id.push_back(node);
      copies.emplace(node, at);
      return at;
    };
    Node node = graph.node(id);
    for (int& in : node.inputs) in = resolve(in, false);
    out->new_id[static_cast<size_t>(id)] = out->graph.add(std::move(node));
    out->old_id.push_back(id);
  }
  for (const NamedValue& o : graph.outputs())
    out->graph.add_output(o.name, out->new_id[static_cast<size_t>(o.node)]);
  for (const VariableUpdate& u : graph.updates()) {
    out->graph.add_update(out->new_id[static_cast<size_t>(u.variable)],
                          out->new_id[static_cast<size_t>(u.value)]);
  }
  return out;
}

// Per extract_patches node, its first reader (the forward product or pool that builds on it);
// -1 for other nodes or patches nothing reads.
std::vector<int> first_readers(const Graph& graph) {
  std::vector<int> first(static_cast<size_t>(graph.size()), -1);
  for (int id = 0; id < graph.size(); ++id) {
    for (int in : graph.node(id).inputs) {
      if (graph.node(in).op == Op::kExtractPatches && first[static_cast<size_t>(in)] < 0)
        first[static_cast<size_t>(in)] = id;
    }
  }
  return first;
}

// Whether some extract_patches node has a reader after its first; outputs and updates count as
// readers that keep the node itself (they are never rewritten).
bool any_later_reader(const Graph& graph, const std::vector<int>& first) {
  for (int id = 0; id < graph.size(); ++id) {
    for (int in : graph.node(id).inputs) {
      if (graph.node(in).op == Op::kExtractPatches && first[static_cast<size_t>(in)] != id)
        return true;
    }
  }
  return false;
}

// The values held at a refused plan's device peak that its readers after the peak can compute
// again, and the rule that tells the rebuild which.
class PeakRemat {
 public:
  PeakRemat(const Graph& graph, const StepPlan& plan)
      : graph_(graph),
        plan_(plan),
        peak_(plan.hbm.device_peak_position),
        chosen_(static_cast<size_t>(graph.size()), false),
        readers_(static_cast<size_t>(graph.size())) {
    for (int id = 0; id < graph.size(); ++id) {
      for (int in : graph.node(id).inputs) readers_[static_cast<size_t>(owner(in))].push_back(id);
    }
  }

  // Picks the largest values held at the peak that every reader after it can compute again,
  // until their bytes cover the excess over the core's share; false when there is none.
  bool choose() {
    const uint64_t need = plan_.hbm.device_peak_bytes + kConstantsRegion;
    if (peak_ < 0 || need <= plan_.hbm_share) return false;
    std::vector<std::pair<uint64_t, int>> candidates;  // (device bytes, node)
    for (int v : plan_.hbm.live_at_device_peak) {
      if (last_read(v) < graph_.size() && recomputable_for_later_readers(v))
        candidates.emplace_back(device_bytes(graph_.node(v)), v);
    }
    // When all of them together cannot cover the excess here, no choice fits the step: the
    // refusal stands at once (as XLA reports that rematerialization could not reduce memory
    // enough) rather than after a round for each candidate.
    for (const auto& [bytes, v] : candidates) recomputable_bytes_ += bytes;
    if (recomputable_bytes_ < need - plan_.hbm_share) return false;
    std::sort(candidates.rbegin(), candidates.rend());
    uint64_t freed = 0;
    for (const auto& [bytes, v] : candidates) {
      if (freed >= need - plan_.hbm_share) break;
      chosen_[static_cast<size_t>(v)] = true;
      freed += bytes;
    }
    return freed > 0;
  }

  // The bytes of every value held at the peak that could be computed again (after choose()).
  uint64_t recomputable_bytes() const { return recomputable_bytes_; }

  bool recompute(int reader, int node, bool inside_copy) const {
    const int at = position(reader);
    if (inside_copy) return !available(node, at);
    return at > peak_ && chosen_[static_cast<size_t>(owner(node))] && recomputable(node, at);
  }

 private:
  int owner(int id) const { return plan_.hbm.owner[static_cast<size_t>(id)]; }
  // The HBM plan's: a fragment reads what its group's members and the producers it recomputes
  // read, so these are the buffers' lives as planned.
  int position(int id) const { return plan_.hbm.position[static_cast<size_t>(id)]; }
  int last_read(int owner) const { return plan_.hbm.last_read[static_cast<size_t>(owner)]; }

  // Whether node `v`'s value is in HBM at position `at` anyway: a variable or constant, or a
  // buffer written by the peak and read at or after `at`.
  bool available(int v, int at) const {
    const int o = owner(v);
    if (persistent(graph_.node(o))) return true;
    return plan_.node(o).materialized && position(o) <= peak_ && last_read(o) >= at;
  }

  // Whether `v` can be computed at position `at` by elementwise ops, broadcasts and reshapes from
  // values available there.
  bool recomputable(int v, int at) const {
    const Node& n = graph_.node(v);
    if (persistent(n) || !(is_elementwise(n.op) || n.op == Op::kBroadcast || n.op == Op::kReshape))
      return false;
    return std::all_of(n.inputs.begin(), n.inputs.end(),
                       [&](int in) { return available(in, at) || recomputable(in, at); });
  }

  // Whether every reader after the peak of buffer `v` (through any alias) can compute what it
  // reads of it again.
  bool recomputable_for_later_readers(int v) const {
    bool any = false;
    for (int id : readers_[static_cast<size_t>(v)]) {
      if (position(id) <= peak_) continue;
      for (int in : graph_.node(id).inputs) {
        if (owner(in) != v) continue;
        if (!recomputable(in, position(id))) return false;
        any = true;
      }
    }
    return any;
  }

  const Graph& graph_;
  const StepPlan& plan_;
  const int peak_;
  std::vector<bool> chosen_;               // per buffer owner
  std::vector<std::vector<int>> readers_;  // per buffer owner, the nodes reading it
  uint64_t recomputable_bytes_ = 0;
};

}  // namespace

std::unique_ptr<Rematerialized> rematerialize_patches(const Graph& graph) {
  const std::vector<int> first = first_readers(graph);
  if (!any_later_reader(graph, first)) return nullptr;  // no rebuild of a graph left as it is
  return rebuild(graph, [&](int reader, int node, bool inside_copy) {
    return !inside_copy && graph.node(node).op == Op::kExtractPatches &&
           first[static_cast<size_t>(node)] != reader;
  });
}

std::unique_ptr<Rematerialized> rematerialize_at_peak(const Graph& graph, const StepPlan& refused,
                                                      uint64_t* recomputable_bytes) {
  PeakRemat remat(graph, refused);
  const bool chosen = remat.choose();
  if (recomputable_bytes != nullptr) *recomputable_bytes = remat.recomputable_bytes();
  if (!chosen) return nullptr;
  return rebuild(graph, [&](int reader, int node, bool inside_copy) {
    return remat.recompute(reader, node, inside_copy);
  });
}

std::unique_ptr<Rematerialized> compose(const Rematerialized& first, Rematerialized second) {
  auto out = std::make_unique<Rematerialized>();
  out->graph = std::move(second.graph);
  for (int id : first.new_id) out->new_id.push_back(second.new_id[static_cast<size_t>(id)]);
  for (int id : second.old_id) out->old_id.push_back(first.old_id[static_cast<size_t>(id)]);
  return out;
}

}  // namespace tpusim::runtime::tpusim_backend
