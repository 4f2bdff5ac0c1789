// Groups recomputed by their readers (fusion_plan.h): which elementwise groups every fragment
// that reads them computes again instead of reading their value from HBM.
#include <algorithm>

#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_scratch.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

bool listed(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// XLA's InstructionFusion::IsExpensive among tpusim's elementwise ops: a float divide and the
// transcendentals (exp, log, rsqrt, tanh, the logistic, erf).
bool expensive(Op op) {
  switch (op) {
    case Op::kDiv:
    case Op::kExp:
    case Op::kLog:
    case Op::kRsqrt:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kErf:
      return true;
    default:
      return false;
  }
}

// The nodes of the fragment that computes group `root`, with the reductions it is computed with
// (a producer taken in by reductions, a reduction with its sibling).
std::vector<int> fragment_members(const FusionPlan& plan, int root) {
  std::vector<int> out = plan.members(root);
  auto add_reduction = [&](int r) {
    for (int m : plan.reduction_members(r)) {
      if (!listed(out, m)) out.push_back(m);
    }
    if (const int sibling = plan.node(r).sibling; sibling >= 0) {
      for (int m : plan.reduction_members(sibling)) {
        if (!listed(out, m)) out.push_back(m);
      }
    }
  };
  if (const int with = plan.node(root).computed_with; with >= 0) add_reduction(with);
  if (plan.node(root).sibling >= 0) add_reduction(root);
  std::sort(out.begin(), out.end());
  return out;
}

// The node whose fragment computes `id`: its group's root, or the reduction that computes that
// (a sibling pair's later one, a reduction taking in its producer).
int fragment_of(const FusionPlan& plan, int id) {
  int root = plan.node(id).group >= 0 ? plan.node(id).group : id;
  while (plan.node(root).computed_with >= 0) root = plan.node(root).computed_with;
  return root;
}

// The buffers of `shape` a group fragment reads (its members' operands from outside, seen through
// folded broadcasts and recomputed nodes).
std::vector<int> full_reads(const Graph& g, const FusionPlan& plan, const std::vector<int>& members,
                            const Shape& shape) {
  std::vector<int> out;
  for (int m : members) {
    for (int in : g.node(m).inputs) {
      if (listed(members, in)) continue;
      for (int s : plan.sources(g, in)) {
        if (g.node(s).shape == shape && !listed(out, s)) out.push_back(s);
      }
    }
  }
  return out;
}

// The bytes a TPU holds a buffer in: a widening alias as its bf16 source.
uint64_t held_bytes(const Graph& g, int id) {
  return device_bytes(g.node(same_shape_owner(g, id)));
}

// Whether batched matmul `r` can make its operand `z` in VMEM from the group's operands
// (lowering.h, batched_matmul_fits): `z` is exactly one of its operands (as it lies or stored
// transposed, its entries dense), the other is not made by a group too, and the tile fits; the
// bytes it would load for the group (its operands the product does not read already) added to
// `bytes_read`.
bool matmul_recomputes(const Graph& g, const FusionPlan& plan, const config::CoreSpec& core, int r,
                       int z, const ProducerOperands& ops, uint32_t blocks, uint64_t* bytes_read) {
  const std::vector<int> sources = matmul_uses(g, r).reads;  // the lhs's, the rhs's
  if ((sources[0] == z) == (sources[1] == z) || !ops.rows.empty() || !ops.columns.empty())
    return false;
  const size_t mine = sources[0] == z ? 0 : 1;
  const int other = sources[1 - mine];
  if (plan.node(other).recomputed) return false;
  // A group computes its value's rows in order; an operand read with its entries interleaved
  // (a split of heads read in place) is not made so.
  if (matmul_operand_view(g, r, static_cast<int>(mine)).heads > 0) return false;
  std::array<MatmulOperandMaking, 2> making{};
  making[mine] = {ops.images.size(), blocks};
  if (!batched_matmul_fits(g, r, core, making)) return false;
  for (int image : ops.images) {
    if (image != other) *bytes_read += held_bytes(g, image);
  }
  return true;
}

// How group `z` (its members, reading `ops`) would be recomputed by its readers: the group roots
// whose fragments take its members, the convolutions computing it on their image bands, and the
// HBM bytes its readers would load instead of its value (its operands of its shape that each does
// not read already). Not `ok` when a reader cannot recompute it: a fragment that is neither a
// fused forward convolution or kernel gradient reading it as its images (the group reading one
// value of its shape) and fitting VMEM with the group's scratch and rows, nor an elementwise group
// of its shape whose fragment fits one tile with the group's members too.
struct Recomputation {
  bool ok = true;
  std::vector<int> groups;
  uint64_t convolutions = 0;
  uint64_t matmuls = 0;
  uint64_t bytes_read = 0;
};
Recomputation plan_recomputation(const Graph& g, const Fusions& fusions,
                                 const config::CoreSpec& core, const FusionPlan& plan, int z,
                                 const std::vector<int>& members, const ProducerOperands& ops,
                                 uint32_t blocks, const std::vector<int>& readers, bool matmuls) {
  Recomputation out;
  // A stateful RNG's draws (a dropout's uniforms) are made once: XLA never draws them twice.
  for (int m : members) {
    if (g.node(m).op == Op::kRngUniform) {
      out.ok = false;
      return out;
    }
  }
  const int home = fragment_of(plan, z);
  const Shape& shape = g.node(z).shape;
  for (int r : readers) {
    if (const auto conv = fusions.find(r); conv != fusions.end()) {
      const Fusion& c = conv->second;
      const bool images =
          (c.kind == Fusion::Kind::kConvForward || c.kind == Fusion::Kind::kConvFilterGrad) &&
          ops.images.size() == 1 && !c.reads.empty() && c.reads[0] == z &&
          std::count(c.reads.begin(), c.reads.end(), z) == 1;
      out.ok = images && ops.columns.empty() &&
               conv_fits_image_producer(g, r, c, core, blocks, ops.rows.size());
      if (!out.ok) return out;
      ++out.convolutions;
      out.bytes_read += held_bytes(g, ops.images[0]);
      continue;
    }
    if (g.node(r).op == Op::kMatMul) {
      out.ok = matmuls && matmul_recomputes(g, plan, core, r, z, ops, blocks, &out.bytes_read);
      if (!out.ok) return out;
      ++out.matmuls;
      continue;
    }
    const int root = fragment_of(plan, r);
    if (root == home) continue;  // the fragment computing the group reads its operands already
    const NodeFusion& f = plan.node(r);
    out.ok = is_elementwise(g.node(r).op) && f.group >= 0 && !f.recomputed &&
             !plan.node(f.group).recomputed && g.node(r).shape == shape;
    if (!out.ok) return out;
    if (listed(out.groups, f.group)) continue;
    std::vector<int> together = fragment_members(plan, f.group);
    const std::vector<int> already = full_reads(g, plan, together, shape);
    for (int m : members) {
      if (!listed(together, m)) together.push_back(m);
    }
    std::sort(together.begin(), together.end());
    out.ok = fused_group_fits(g, together, core);
    if (!out.ok) return out;
    for (int image : ops.images) {
      if (!listed(already, image)) out.bytes_read += held_bytes(g, image);
    }
    out.groups.push_back(f.group);
  }
  return out;
}

}  // namespace

// Groups recomputed by their readers (fusion_plan.h), in graph order: a group another one reads
// is decided first, and the later one then reads its operands, not its value. A group is
// recomputed when its readers loading its operands moves fewer bytes than its value written once
// and read by each, as XLA's FusionMerger merges a producer fusion into all its consumers when
// that moves no more bytes. A group a reduction's fragment computes and writes (a producer taken
// in) stays computed there, unwritten.
void recompute_into_readers(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                            bool matmuls, FusionPlan* plan) {
  const int n = g.size();
  const std::vector<std::vector<int>> readers = fragment_readers(g, fusions, *plan);
  const std::vector<bool> exported = exported_nodes(g);
  for (int z = 0; z < n; ++z) {
    const NodeFusion& f = plan->node(z);
    if (!f.needed || f.group != z || exported[static_cast<size_t>(z)] || f.recomputed || f.folded ||
        f.producer >= 0 || f.sibling >= 0 || fusions.count(z) > 0 ||
        !is_elementwise(g.node(z).op) || g.node(z).dtype == DType::kS32 ||
        readers[static_cast<size_t>(z)].empty())
      continue;
    // Its readers seen through its widening aliases (a bf16 value read as f32: a reshape to its
    // own shape), which its reader groups compute too (a copy in registers).
    std::vector<int> read_by, aliases;
    std::vector<int> pending{z};
    while (!pending.empty()) {
      const int v = pending.back();
      pending.pop_back();
      for (int r : readers[static_cast<size_t>(v)]) {
        const bool alias = g.node(r).op == Op::kReshape && g.node(r).shape == g.node(z).shape &&
                           !exported[static_cast<size_t>(r)] && fusions.count(r) == 0;
        if (alias && !listed(aliases, r)) {
          aliases.push_back(r);
          pending.push_back(r);
        } else if (!alias && !listed(read_by, r)) {
          read_by.push_back(r);
        }
      }
    }
    std::vector<int> members = plan->members(z);
    const ProducerOperands ops = producer_operands(g, *plan, members);
    if (!ops.ok) continue;
    // A convolution computes the group without its aliases (image_producer).
    const uint32_t blocks = producer_scratch_blocks(g, *plan, members);
    members.insert(members.end(), aliases.begin(), aliases.end());
    std::sort(members.begin(), members.end());
    const Recomputation how =
        plan_recomputation(g, fusions, core, *plan, z, members, ops, blocks, read_by, matmuls);
    // XLA's FusionMerger merges a producer into all its consumers when the bytes they would read
    // are no more than the producer's own transfers: its operands read, its value written once
    // and read by each reader outside the fragment computing it. tpusim recomputes one level
    // deep (a group reading a recomputed value is not recomputed itself), so where a reader is
    // an elementwise group, which could be recomputed by its own readers later, the producer's
    // operand reads are not counted: merged, the producer must save bytes on its value alone.
    const int home = fragment_of(*plan, z);
    uint64_t value_reads = 0;
    for (int r : read_by) value_reads += fusions.count(r) > 0 || fragment_of(*plan, r) != home;
    uint64_t all_operand_bytes = 0;
    for (int image : ops.images) all_operand_bytes += held_bytes(g, image);
    const uint64_t operand_bytes = how.groups.empty() ? all_operand_bytes : 0;
    const uint64_t current = operand_bytes + (1 + value_reads) * held_bytes(g, z);
    if (!how.ok || (how.groups.empty() ? how.bytes_read > current : how.bytes_read >= current))
      continue;
    // Nor does FusionMerger duplicate an expensive op into several readers, unless merging cuts
    // the bytes to less than 0.3 of the producer's own transfers (its operands counted).
    const bool duplicates_expensive =
        value_reads > 1 &&
        std::any_of(members.begin(), members.end(), [&](int m) { return expensive(g.node(m).op); });
    if (duplicates_expensive &&
        10 * how.bytes_read >= 3 * (all_operand_bytes + (1 + value_reads) * held_bytes(g, z)))
      continue;
    for (int m : members) plan->node(m).recomputed = true;
    for (int root : how.groups) {
      std::vector<int>& recomputes = plan->node(root).recomputes;
      for (int m : members) {
        if (!listed(recomputes, m)) recomputes.push_back(m);
      }
    }
    ++plan->reader_recomputed_groups;
    plan->conv_producers += how.convolutions;
    plan->matmul_producers += how.matmuls;
  }
}

bool per_channel(const Shape& shape, const Shape& of) {
  if (shape.rank() < 1 || shape.rank() > of.rank()) return false;
  for (int d = 0; d + 1 < shape.rank(); ++d) {
    if (shape.dim(d) != 1) return false;
  }
  return shape.dim(shape.rank() - 1) == of.dim(of.rank() - 1);
}

bool per_row(const Shape& shape, const Shape& of) {
  if (shape.rank() != of.rank() || shape.rank() < 1 || shape.dim(shape.rank() - 1) != 1)
    return false;
  for (int d = 0; d + 1 < shape.rank(); ++d) {
    if (shape.dim(d) != of.dim(d)) return false;
  }
  return true;
}

uint64_t row_period(const Shape& shape, const Shape& of) {
  const int rank = of.rank();
  if (rank < 3 || shape.rank() > rank || shape.rank() < 1 ||
      shape.dim(shape.rank() - 1) != of.dim(rank - 1))
    return 0;
  // shape's dims lined up with of's (leading 1s added).
  std::vector<int64_t> dims(static_cast<size_t>(rank - shape.rank()), 1);
  for (int64_t d : shape.dims()) dims.push_back(d);
  int lead = 0;
  while (lead < rank - 1 && dims[static_cast<size_t>(lead)] == of.dim(lead)) ++lead;
  if (lead == 0 || lead == rank - 1) return 0;  // a plain row, or the full value
  uint64_t period = 1;
  for (int d = lead; d < rank - 1; ++d) {
    if (dims[static_cast<size_t>(d)] != 1) return 0;
    period *= static_cast<uint64_t>(of.dim(d));
  }
  return period > 1 ? period : 0;
}

std::vector<std::vector<int>> fragment_readers(const Graph& g, const Fusions& fusions,
                                               const FusionPlan& plan) {
  std::vector<std::vector<int>> readers(static_cast<size_t>(g.size()));
  for (int id = 0; id < g.size(); ++id) {
    if (!plan.node(id).needed) continue;
    for (int in : fragment_uses(g, fusions, id).needs()) {
      if (!listed(readers[static_cast<size_t>(in)], id))
        readers[static_cast<size_t>(in)].push_back(id);
    }
  }
  return readers;
}

ProducerOperands producer_operands(const Graph& graph, const FusionPlan& plan,
                                   const std::vector<int>& members) {
  ProducerOperands out;
  const Shape& shape = graph.node(members.back()).shape;
  out.ok = shape.rank() >= 1;
  for (int m : members) {
    for (int in : graph.node(m).inputs) {
      float ignored;
      if (listed(members, in) || foldable_scalar(graph, in, &ignored)) continue;
      const Node& v = graph.node(in);
      const NodeFusion& f = plan.node(in);
      if (v.dtype == DType::kS32 || f.recomputed) {
        out.ok = false;
      } else if (f.folded) {
        const FoldedBroadcast fold = broadcast_fold(graph, in);
        out.ok = out.ok && (fold == FoldedBroadcast::kRow || fold == FoldedBroadcast::kColumn);
        std::vector<int>& into = fold == FoldedBroadcast::kRow ? out.rows : out.columns;
        if (!listed(into, in)) into.push_back(in);
      } else if (v.shape == shape) {
        if (!listed(out.images, in)) out.images.push_back(in);
      } else if (per_channel(v.shape, shape)) {
        if (!listed(out.rows, in)) out.rows.push_back(in);
      } else if (per_row(v.shape, shape)) {
        if (!listed(out.columns, in)) out.columns.push_back(in);
      } else {
        out.ok = false;
      }
    }
  }
  out.ok = out.ok && !out.images.empty();
  return out;
}

uint32_t producer_scratch_blocks(const Graph& graph, const FusionPlan& plan,
                                 const std::vector<int>& members, const std::vector<int>& kept) {
  const Shape& shape = graph.node(members.back()).shape;
  // As the group's lowering classifies its operands (lower_elementwise.cc, plan_scratch): a
  // scalar is filled into a block unless it is a binary op's right operand; a row is broadcast.
  const GroupScratch scratch = plan_group_scratch(
      graph, members, kept,
      [&](int m, size_t k) {
        const Node& n = graph.node(m);
        const int in = n.inputs[k];
        float ignored;
        if (foldable_scalar(graph, in, &ignored)) return !(is_binary_elementwise(n.op) && k == 1);
        return plan.node(in).folded || graph.node(in).shape != shape;
      },
      true);
  return scratch.blocks;
}

}  // namespace tpusim::runtime::tpusim_backend
