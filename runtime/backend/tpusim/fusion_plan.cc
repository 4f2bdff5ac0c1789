#include "runtime/backend/tpusim/fusion_plan.h"

#include <algorithm>

#include "runtime/lowering/vmem_budget.h"
#include "sim/isa/vector_checks.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

bool folds_operands(Op op) { return is_elementwise(op); }

// Groups of elementwise nodes to fuse (every node reads what its fragment declares it needs:
// fragment_uses): starting from each elementwise node read outside any group (in reverse
// order), absorb elementwise producers of the same shape all of whose readers are in the group and
// which are no output or update value (with `rng_members`, rng_uniforms too). Returns, per node,
// the root of its group (-1 when it is not grouped).
std::vector<int> fusion_groups(const Graph& g, const std::vector<bool>& needed,
                               const Fusions& fusions, bool rng_members) {
  const int n = g.size();
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    for (int in : fragment_uses(g, fusions, id).needs())
      readers[static_cast<size_t>(in)].push_back(id);
  }
  const std::vector<bool> exported = exported_nodes(g);
  auto fusible = [&](int id) {
    const Node& node = g.node(id);
    return folds_operands(node.op) && node.dtype != DType::kS32 && needed[static_cast<size_t>(id)];
  };
  // A member may also be an rng_uniform (a dropout's uniforms), drawn in the group's tile as
  // XLA's fused loop generates an rng's elements where it reads them; never a group's root.
  auto member = [&](int id) {
    return fusible(id) ||
           (rng_members && g.node(id).op == Op::kRngUniform && needed[static_cast<size_t>(id)]);
  };
  std::vector<int> root(static_cast<size_t>(n), -1);
  for (int id = n - 1; id >= 0; --id) {
    if (!fusible(id) || root[static_cast<size_t>(id)] >= 0) continue;
    root[static_cast<size_t>(id)] = id;
    // The group's chain, kept within one vector chain: a member past it starts a group of its own.
    uint64_t steps = kFusedGroupFixedSteps + fused_member_steps(g.node(id));
    std::vector<int> frontier{id};
    while (!frontier.empty()) {
      const int m = frontier.back();
      frontier.pop_back();
      for (int in : g.node(m).inputs) {
        if (!member(in) || root[static_cast<size_t>(in)] >= 0 || exported[static_cast<size_t>(in)])
          continue;
        if (g.node(in).shape != g.node(id).shape) continue;
        bool all_inside = true;
        for (int r : readers[static_cast<size_t>(in)])
          all_inside &= root[static_cast<size_t>(r)] == id;
        if (!all_inside) continue;
        const uint64_t more = fused_member_steps(g.node(in));
        if (steps + more > static_cast<uint64_t>(sim::kMaxChainSteps)) continue;
        steps += more;
        root[static_cast<size_t>(in)] = id;
        frontier.push_back(in);
      }
    }
  }
  return root;
}

// The broadcasts every reader of which is an elementwise fragment of the broadcast's own shape,
// and which are a row or a column of that shape (broadcast_fold): those fragments read the
// broadcast's input as a row or column operand, as XLA fuses a broadcast into its consumers, and
// the broadcast is never written to HBM.
std::vector<bool> folded_broadcasts(const Graph& g, const std::vector<bool>& needed,
                                    const Fusions& fusions) {
  const int n = g.size();
  std::vector<bool> folded(static_cast<size_t>(n), false);
  const std::vector<bool> exported = exported_nodes(g);
  for (int id = 0; id < n; ++id) {
    const Node& b = g.node(id);
    folded[static_cast<size_t>(id)] =
        needed[static_cast<size_t>(id)] && !exported[static_cast<size_t>(id)] &&
        broadcast_fold(g, id) != FoldedBroadcast::kNone && g.node(b.inputs[0]).dtype != DType::kS32;
  }
  for (int r = 0; r < n; ++r) {
    if (!needed[static_cast<size_t>(r)]) continue;
    const Node& reader = g.node(r);
    const bool elementwise =
        is_elementwise(reader.op) && fusions.count(r) == 0 && reader.dtype != DType::kS32;
    for (int in : fragment_uses(g, fusions, r).needs()) {
      if (!folded[static_cast<size_t>(in)]) continue;
      if (!elementwise || reader.shape != g.node(in).shape) folded[static_cast<size_t>(in)] = false;
    }
  }
  return folded;
}

// Joins to its reduction (reduction_fusion) the elementwise group that computes a reduction's
// input when nothing else reads that value: the reduction becomes the group's root. Returns how
// many reductions took a group.
uint64_t absorb_into_reductions(const Graph& g, const std::vector<bool>& needed,
                                const Fusions& fusions, const config::CoreSpec& core,
                                std::vector<int>* group) {
  const int n = g.size();
  std::vector<int> readers(static_cast<size_t>(n), 0);
  for (int id = 0; id < n; ++id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    for (int in : fragment_uses(g, fusions, id).needs()) ++readers[static_cast<size_t>(in)];
  }
  for (const auto& o : g.outputs()) ++readers[static_cast<size_t>(o.node)];
  for (const auto& u : g.updates()) ++readers[static_cast<size_t>(u.value)];
  uint64_t absorbed = 0;
  for (int r = 0; r < n; ++r) {
    if (!needed[static_cast<size_t>(r)] || fusions.count(r) > 0 ||
        reduction_fusion(g, r) == ReductionFusion::kNone)
      continue;
    const int x = g.node(r).inputs[0];
    if ((*group)[static_cast<size_t>(x)] != x || readers[static_cast<size_t>(x)] != 1 ||
        g.node(x).dtype == DType::kS32)
      continue;
    std::vector<int> members;
    for (int m = 0; m <= x; ++m) {
      if ((*group)[static_cast<size_t>(m)] == x) members.push_back(m);
    }
    if (!fused_group_fits(g, members, core)) continue;
    for (int& root : *group) {
      if (root == x) root = r;
    }
    (*group)[static_cast<size_t>(r)] = r;
    ++absorbed;
  }
  return absorbed;
}

// Elementwise nodes no output or update reads, alone in their group, every reader of which is an
// elementwise member of a group of the node's shape, or such a node recomputed itself: each of
// those groups (for a recomputed reader, each group that recomputes it) computes the node again,
// so it needs no buffer. Latest first, so that a chain of cheap producers (batch norm's x - mean,
// then its product with the inverse deviation) is recomputed whole where it is read, as XLA
// fuses a producer into its consumer again and again. A group takes a node only while one row of
// it still fits a VMEM tile with the node added.
void recompute_shared_producers(const Graph& g, const Fusions& fusions,
                                const config::CoreSpec& core, FusionPlan* plan) {
  const int n = g.size();
  std::vector<std::vector<int>> readers(static_cast<size_t>(n));
  const std::vector<bool> exported = exported_nodes(g);
  std::vector<int> group_size(static_cast<size_t>(n), 0);
  std::vector<std::vector<int>> recomputed_roots(static_cast<size_t>(n));  // where each is
  for (int id = 0; id < n; ++id) {
    if (!plan->node(id).needed) continue;
    const int root = plan->node(id).group;
    if (root >= 0) ++group_size[static_cast<size_t>(root)];
    for (int in : fragment_uses(g, fusions, id).needs())
      readers[static_cast<size_t>(in)].push_back(id);
  }
  for (int id = n - 1; id >= 0; --id) {
    const Node& node = g.node(id);
    if (!plan->node(id).needed || exported[static_cast<size_t>(id)] || plan->node(id).group != id ||
        group_size[static_cast<size_t>(id)] != 1 || node.dtype == DType::kS32 ||
        plan->node(id).folded || readers[static_cast<size_t>(id)].size() < 2)
      continue;
    std::vector<int> roots;
    bool all_grouped = true;
    for (int r : readers[static_cast<size_t>(id)]) {
      const bool recomputed = plan->node(r).recomputed;
      all_grouped = all_grouped && (recomputed || plan->node(r).group >= 0) &&
                    fusions.count(r) == 0 && is_elementwise(g.node(r).op) &&
                    g.node(r).shape == node.shape;
      if (!all_grouped) break;
      const std::vector<int> in = recomputed ? recomputed_roots[static_cast<size_t>(r)]
                                             : std::vector<int>{plan->node(r).group};
      for (int root : in) {
        if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
      }
    }
    if (!all_grouped) continue;
    bool fits = true;
    for (int root : roots) {
      std::vector<int> members = plan->members(root);
      members.push_back(id);
      std::sort(members.begin(), members.end());
      fits = fits && fused_group_fits(g, members, core);
    }
    if (!fits) continue;
    plan->node(id).recomputed = true;
    for (int root : roots) plan->node(root).recomputes.push_back(id);
    recomputed_roots[static_cast<size_t>(id)] = std::move(roots);
    ++plan->recomputed_nodes;
  }
}

// The buffers of the reduced value's shape that reduction `r`'s fragment streams through VMEM:
// its group's outside operands of that shape (a fused reduction), or its input (a plain one, when
// that input has a buffer of its own). Empty when `r` cannot take a sibling: not a reduction down
// the rows, or part of a fused convolution or pool.
std::vector<int> streamed_buffers(const Graph& g, const Fusions& fusions, const FusionPlan& plan,
                                  const std::vector<int>& inside, int r) {
  if (!plan.node(r).needed || fusions.count(r) > 0 || inside[static_cast<size_t>(r)] >= 0 ||
      reduction_fusion(g, r) != ReductionFusion::kLeadingAxes)
    return {};
  const int x = g.node(r).inputs[0];
  const Shape& shape = g.node(x).shape;
  std::vector<int> out;
  auto add = [&](int buffer) {
    if (g.node(buffer).shape == shape && std::find(out.begin(), out.end(), buffer) == out.end())
      out.push_back(buffer);
  };
  if (plan.node(x).group == r) {
    const std::vector<int> members = plan.members(r);
    for (int m : members) {
      for (int in : g.node(m).inputs) {
        if (std::find(members.begin(), members.end(), in) != members.end()) continue;
        for (int source : plan.sources(g, in)) add(source);
      }
    }
    return out;
  }
  const int root = plan.node(x).group;
  if ((root >= 0 && root != x) || plan.absorbed(x) || g.node(x).dtype == DType::kS32) return {};
  add(x);
  return out;
}

// Whether node `to` reads node `from`, directly or through other nodes (from < to).
bool depends_on(const Graph& g, int to, int from) {
  std::vector<bool> seen(static_cast<size_t>(to - from + 1), false);
  std::vector<int> stack{to};
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    for (int in : g.node(id).inputs) {
      if (in == from) return true;
      if (in < from || seen[static_cast<size_t>(in - from)]) continue;
      seen[static_cast<size_t>(in - from)] = true;
      stack.push_back(in);
    }
  }
  return false;
}

// Pairs sibling reductions (fusion_plan.h): for each reduction down the rows, latest first, the
// latest earlier one of the same input shape that streams a buffer it streams too, which it does
// not read, with no other pair between them, whose members and its own fit one VMEM tile with
// both sums' partial rows. The later one computes both.
void pair_sibling_reductions(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                             FusionPlan* plan) {
  const int n = g.size();
  std::vector<std::pair<int, std::vector<int>>> reductions;  // id, streamed buffers
  const std::vector<int> inside = computed_inside_fusions(g, fusions);
  for (int r = 0; r < n; ++r) {
    std::vector<int> streams = streamed_buffers(g, fusions, *plan, inside, r);
    if (!streams.empty()) reductions.emplace_back(r, std::move(streams));
  }
  int bound = n;  // pairs do not interleave: each lies after the later pair's earlier reduction
  for (size_t j = reductions.size(); j-- > 0;) {
    const int b = reductions[j].first;
    const std::vector<int>& b_streams = reductions[j].second;  // a lambda below reads it
    if (b >= bound) continue;
    const Shape& shape = g.node(g.node(b).inputs[0]).shape;
    for (size_t i = j; i-- > 0;) {
      const auto& [a, a_streams] = reductions[i];
      if (g.node(g.node(a).inputs[0]).shape != shape) continue;
      const bool shared = std::any_of(a_streams.begin(), a_streams.end(), [&](int buffer) {
        return std::find(b_streams.begin(), b_streams.end(), buffer) != b_streams.end();
      });
      if (!shared || depends_on(g, b, a)) continue;
      std::vector<int> members = plan->reduction_members(a);
      for (int m : plan->reduction_members(b)) members.push_back(m);
      std::sort(members.begin(), members.end());
      const uint64_t partial_rows = 2 * static_cast<uint64_t>(cols_of(shape)) * 4;
      if (!fused_group_fits(g, members, core) || 2 * partial_rows > once_loaded_bytes(core))
        continue;
      plan->node(b).sibling = a;
      plan->node(a).computed_with = b;
      ++plan->multi_output_fusions;
      bound = a;
      break;
    }
  }
}

// The group root among the buffers reduction `r`'s fragment (with its sibling's) streams that it
// may take in (fusion_plan.h, "producers written by their reductions"): an elementwise group of
// the reduced shape, before the earlier reduction, computed by no other fragment, whose members
// fit one tile with the reductions', which no needed node between it and `r` reads but the
// reductions' members (only the group moves to `r`'s place), on which no other buffer the
// fragment reads depends (they are all ready at `r`'s place without it), and which the members
// read directly or through one widening alias only (the lowering computes those in VMEM; a
// deeper alias would be streamed from the buffer the fragment is writing). -1 for none.
int takeable_producer(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                      const FusionPlan& plan, const std::vector<int>& streams, int r) {
  std::vector<int> members = plan.reduction_members(r);
  const int sibling = plan.node(r).sibling;
  if (sibling >= 0) {
    for (int m : plan.reduction_members(sibling)) members.push_back(m);
  }
  const int first = sibling >= 0 ? sibling : r;
  for (int stream : streams) {
    const int p = same_shape_owner(g, stream);
    const NodeFusion& f = plan.node(p);
    if (f.group != p || !is_elementwise(g.node(p).op) || f.computed_with >= 0 || f.folded ||
        f.recomputed || fusions.count(p) > 0 || p >= first)
      continue;
    std::vector<int> together = plan.members(p);
    together.insert(together.end(), members.begin(), members.end());
    std::sort(together.begin(), together.end());
    if (!fused_group_fits(g, together, core)) continue;
    bool alone = true;
    for (int id = p + 1; id < r && alone; ++id) {
      if (!plan.node(id).needed || same_shape_owner(g, id) == p ||
          std::find(members.begin(), members.end(), id) != members.end())
        continue;
      for (int in : fragment_uses(g, fusions, id).needs())
        alone = alone && same_shape_owner(g, in) != p;
    }
    for (int other : streams) {
      alone = alone && (same_shape_owner(g, other) == p || other <= p || !depends_on(g, other, p));
    }
    for (int m : members) {
      for (int in : g.node(m).inputs) {
        const bool alias = in != p && same_shape_owner(g, in) == p;
        alone = alone && (!alias || g.node(in).inputs[0] == p);
      }
    }
    if (alone) return p;
  }
  return -1;
}

// Whether group `root`'s members read every operand from outside as it lies: of the group's shape,
// a value (one element), a row or a column of it, or a folded broadcast. A reduction over the
// last axis that takes the group in emits it in one pass (lower_fused_reductions.cc), where an
// operand broadcast over middle dims (the attention mask) would be materialised.
bool reads_operands_in_place(const Graph& g, const FusionPlan& plan, int root) {
  const std::vector<int> members = plan.members(root);
  const Shape& out = g.node(root).shape;
  for (int m : members) {
    for (int in : g.node(m).inputs) {
      if (std::find(members.begin(), members.end(), in) != members.end() || plan.node(in).folded)
        continue;
      const Shape& s = g.node(in).shape;
      if (s != out && s.elements() != 1 && !per_channel(s, out) && !per_row(s, out)) return false;
    }
  }
  return true;
}

// Gives each reduction fragment down the rows (a sibling pair's later reduction, or a fused
// reduction alone), and with `across_rows` each plain reduction over the last axis (softmax's sum
// of its exponentials, which its division reads too), the producer group it can take in
// (takeable_producer).
void take_in_producers(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                       bool across_rows, FusionPlan* plan) {
  const std::vector<int> inside = computed_inside_fusions(g, fusions);
  for (int r = 0; r < g.size(); ++r) {
    const NodeFusion& f = plan->node(r);
    const bool across = across_rows && f.needed && f.group < 0 && f.sibling < 0 &&
                        f.computed_with < 0 && fusions.count(r) == 0 &&
                        inside[static_cast<size_t>(r)] < 0 &&
                        reduction_fusion(g, r) == ReductionFusion::kLastAxis;
    if (!across && (f.computed_with >= 0 || (f.sibling < 0 && f.group != r))) continue;
    std::vector<int> streams = across ? std::vector<int>{g.node(r).inputs[0]}
                                      : streamed_buffers(g, fusions, *plan, inside, r);
    if (f.sibling >= 0) {
      for (int s : streamed_buffers(g, fusions, *plan, inside, f.sibling)) streams.push_back(s);
    }
    const int p = takeable_producer(g, fusions, core, *plan, streams, r);
    if (p < 0 || (across && !reads_operands_in_place(g, *plan, p))) continue;
    plan->node(r).producer = p;
    plan->node(p).computed_with = r;
    ++plan->producer_fusions;
  }
}

}  // namespace

int same_shape_owner(const Graph& g, int id) {
  while (g.node(id).op == Op::kReshape && g.node(g.node(id).inputs[0]).shape == g.node(id).shape)
    id = g.node(id).inputs[0];
  return id;
}

std::vector<bool> exported_nodes(const Graph& g) {
  std::vector<bool> exported(static_cast<size_t>(g.size()), false);
  for (const auto& o : g.outputs()) exported[static_cast<size_t>(o.node)] = true;
  for (const auto& u : g.updates()) exported[static_cast<size_t>(u.value)] = true;
  return exported;
}

std::vector<bool> needed_nodes(const Graph& g, const Fusions& fusions) {
  std::vector<bool> needed(static_cast<size_t>(g.size()), false);
  for (const auto& o : g.outputs()) needed[static_cast<size_t>(o.node)] = true;
  for (const auto& u : g.updates()) needed[static_cast<size_t>(u.value)] = true;
  // A value a fused fragment computes besides its own (a convolution's output reductions) needs
  // only what that fragment reads, which the fragment's node declares.
  const std::vector<int> inside = computed_inside_fusions(g, fusions);
  for (int id = g.size() - 1; id >= 0; --id) {
    if (!needed[static_cast<size_t>(id)]) continue;
    if (const int by = inside[static_cast<size_t>(id)]; by >= 0) {
      needed[static_cast<size_t>(by)] = true;  // its fragment writes the value (by < id)
      continue;
    }
    const Node& n = g.node(id);
    for (int in : fragment_uses(g, fusions, id).needs()) {
      float ignored;
      if (folds_operands(n.op) && foldable_scalar(g, in, &ignored)) continue;
      needed[static_cast<size_t>(in)] = true;
    }
  }
  return needed;
}

std::vector<bool> FusionPlan::needed() const {
  std::vector<bool> out;
  out.reserve(nodes.size());
  for (const NodeFusion& n : nodes) out.push_back(n.needed);
  return out;
}

std::vector<int> FusionPlan::computed_with() const {
  std::vector<int> out;
  out.reserve(nodes.size());
  for (const NodeFusion& n : nodes) out.push_back(n.computed_with);
  return out;
}

std::vector<int> FusionPlan::members(int root) const {
  std::vector<int> out = node(root).recomputes;
  for (int m = 0; m <= root; ++m) {
    if (node(m).group == root) out.push_back(m);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> FusionPlan::reduction_members(int reduction) const {
  return node(reduction).group == reduction ? members(reduction) : std::vector<int>{reduction};
}

std::vector<int> FusionPlan::sources(const Graph& graph, int id) const {
  if (node(id).folded) return {graph.node(id).inputs[0]};
  if (node(id).consumer >= 0) {
    std::vector<int> out;
    for (int in : node(id).taken_reads) {
      for (int s : sources(graph, in)) out.push_back(s);
    }
    return out;
  }
  if (!node(id).recomputed) return {id};
  std::vector<int> out;
  for (int in : graph.node(id).inputs) {
    float ignored;
    if (foldable_scalar(graph, in, &ignored)) continue;  // an immediate
    for (int s : sources(graph, in)) out.push_back(s);
  }
  return out;
}

FusionPlan plan_fusions(const Graph& graph, const Fusions& fusions, const config::CoreSpec& core,
                        const FusionOptions& options) {
  const std::vector<bool> needed = needed_nodes(graph, fusions);
  std::vector<int> group = fusion_groups(graph, needed, fusions, options.rng);
  FusionPlan plan;
  if (options.fuse_reductions)
    plan.fused_reductions = absorb_into_reductions(graph, needed, fusions, core, &group);
  const std::vector<bool> folded = folded_broadcasts(graph, needed, fusions);
  plan.nodes.resize(static_cast<size_t>(graph.size()));
  for (size_t id = 0; id < plan.nodes.size(); ++id) {
    NodeFusion& n = plan.nodes[id];
    n.needed = needed[id];
    n.group = group[id];
    n.folded = folded[id];
  }
  if (options.recompute) recompute_shared_producers(graph, fusions, core, &plan);
  if (options.multi_output) pair_sibling_reductions(graph, fusions, core, &plan);
  // A plain reduction over the last axis takes in its producer as the reductions fused with their
  // inputs do (XLA's reduce fusion), so only where those are.
  if (options.producers) take_in_producers(graph, fusions, core, options.fuse_reductions, &plan);
  if (options.conv_producers)
    recompute_into_readers(graph, fusions, core, options.matmul_producers, &plan);
  if (options.matmul_consumers) {
    take_in_matmul_consumers(graph, fusions, core, &plan);
    store_matmuls_through_merges(graph, fusions, &plan);
  }
  if (options.conv_consumers) take_in_conv_consumers(graph, fusions, core, &plan);
  return plan;
}

}  // namespace tpusim::runtime::tpusim_backend
