// Consumers taken in by convolution input gradients (fusion_plan.h): which elementwise groups,
// with the sibling reductions that take them in, a fused input gradient's fragment computes from
// its image gradients in VMEM, the gradient itself never written (XLA's output fusion of a
// convolution, and the multi-output fusion of reductions with the convolution that produces
// their operand).
#include <algorithm>
#include <optional>

#include "runtime/backend/tpusim/conv_tiles.h"
#include "runtime/backend/tpusim/fusion_plan.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

bool in_list(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// Whether group `root` could take in an image gradient of its shape: a group of elementwise
// members with a buffer of its own (not recomputed by its readers: they would read the gradient
// again), no reduction of its own, no rng draws, consuming nothing else.
bool takes_gradient(const Graph& g, const FusionPlan& plan, int root, const Shape& shape) {
  const NodeFusion& f = plan.node(root);
  if (f.group != root || f.recomputed || f.folded || f.sibling >= 0 || f.producer >= 0 ||
      f.consumes >= 0 || !is_elementwise(g.node(root).op) || g.node(root).shape != shape)
    return false;
  for (int m : plan.members(root)) {
    if (g.node(m).op == Op::kRngUniform || !is_elementwise(g.node(m).op)) return false;
  }
  return true;
}

// The reductions that take group `root` in (a sibling pair's or one's: fusion_plan.h,
// "producers written by their reductions"), each as its members, the reduction last; none when
// no reduction does; nullopt when they are not reductions down the rows, the only ones a band's
// column sums compute (a plain reduction over the last axis takes its producer in too: softmax's).
std::optional<std::vector<std::vector<int>>> reductions_taking(const Graph& g,
                                                               const FusionPlan& plan, int root) {
  const int r = plan.node(root).computed_with;
  if (r < 0 || plan.node(r).producer != root) return std::vector<std::vector<int>>{};
  const int sibling = plan.node(r).sibling;
  for (int reduction : {r, sibling}) {
    if (reduction >= 0 && reduction_fusion(g, reduction) != ReductionFusion::kLeadingAxes)
      return std::nullopt;
  }
  std::vector<std::vector<int>> out;
  if (sibling >= 0) out.push_back(plan.reduction_members(sibling));
  out.push_back(plan.reduction_members(r));
  return out;
}

// Everything the fragment computes elementwise, as the reductions' lowering gathers it: the
// group, the reductions' own groups, and the group root's widening aliases a member or a plain
// reduction reads (take_in_producer_aliases); nullopt when a reduction reads something else
// without a group of its own.
std::optional<std::vector<int>> computed_elementwise(const Graph& g, int root,
                                                     const std::vector<int>& group,
                                                     const std::vector<std::vector<int>>& sums) {
  std::vector<int> out = group;
  std::vector<int> reads;
  for (const std::vector<int>& members : sums) {
    out.insert(out.end(), members.begin(), members.end() - 1);
    if (members.size() == 1) reads.push_back(g.node(members.back()).inputs[0]);
  }
  for (int m : out) reads.insert(reads.end(), g.node(m).inputs.begin(), g.node(m).inputs.end());
  for (int in : reads) {
    const Node& n = g.node(in);
    const bool alias = n.op == Op::kReshape && n.inputs[0] == root && n.shape == g.node(root).shape;
    if (alias && !in_list(out, in)) out.push_back(in);
  }
  for (const std::vector<int>& members : sums) {
    const int x = g.node(members.back()).inputs[0];
    if (members.size() == 1 && !in_list(out, x)) return std::nullopt;
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether a band's tile computes `members` as their own fragment would: no rng draws (a band
// has no row of the group's view to start them from) and a floating root (the band's output is
// stored as f32 values, a bf16 one packed).
bool computable_in_bands(const Graph& g, const std::vector<int>& members, int root) {
  const DType dtype = g.node(root).dtype;
  if (dtype != DType::kF32 && dtype != DType::kBF16) return false;
  return std::none_of(members.begin(), members.end(),
                      [&](int m) { return g.node(m).op == Op::kRngUniform; });
}

// The kept inputs of the reductions (each stays in its block to the end of the group).
std::vector<int> reduced_inputs(const Graph& g, const std::vector<std::vector<int>>& sums) {
  std::vector<int> out;
  for (const std::vector<int>& members : sums) out.push_back(g.node(members.back()).inputs[0]);
  return out;
}

}  // namespace

// A fused input gradient takes in its consumer when the group is the gradient's only reader (each
// reader a member of it), the gradient is not an output, the group and the reductions that take
// it in read besides it only values of its shape, values per channel and immediates, and the
// band tile fits with their values and scratch. The gradient is then never written and read back,
// nor the group's value read back by its reductions.
void take_in_conv_consumers(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                            FusionPlan* plan) {
  const std::vector<std::vector<int>> readers = fragment_readers(g, fusions, *plan);
  const std::vector<bool> exported = exported_nodes(g);
  for (const auto& [id, conv] : fusions) {
    const std::vector<int>& read_by = readers[static_cast<size_t>(id)];
    if (conv.kind != Fusion::Kind::kConvInputGrad || !plan->node(id).needed || plan->absorbed(id) ||
        exported[static_cast<size_t>(id)] || read_by.empty())
      continue;
    const int root = plan->node(read_by.front()).group;
    if (root < 0 || !takes_gradient(g, *plan, root, g.node(id).shape)) continue;
    bool only_reader = true;
    for (int r : read_by) only_reader = only_reader && plan->node(r).group == root;
    if (!only_reader) continue;
    const auto taking = reductions_taking(g, *plan, root);
    if (!taking) continue;
    const std::vector<std::vector<int>>& sums = *taking;
    const auto members = computed_elementwise(g, root, plan->members(root), sums);
    if (!members || !computable_in_bands(g, *members, root)) continue;
    ProducerOperands operands = producer_operands(g, *plan, *members);
    const auto gradient = std::find(operands.images.begin(), operands.images.end(), id);
    if (!operands.ok || !operands.columns.empty() || gradient == operands.images.end()) continue;
    operands.images.erase(gradient);
    ConvConsumerBlocks blocks;
    blocks.taken = true;
    blocks.images = static_cast<uint32_t>(operands.images.size());
    blocks.rows = static_cast<uint32_t>(operands.rows.size());
    blocks.blocks = producer_scratch_blocks(g, *plan, *members, reduced_inputs(g, sums));
    blocks.sums = static_cast<uint32_t>(sums.size());
    blocks.channels = g.node(id).shape.dim(g.node(id).shape.rank() - 1);
    if (!conv_fits_consumer(g, id, conv, core, blocks)) continue;
    plan->node(id).consumer = root;
    plan->node(id).taken_reads = conv.reads;
    plan->node(root).consumes = id;
    ++plan->conv_consumers;
  }
}

}  // namespace tpusim::runtime::tpusim_backend
