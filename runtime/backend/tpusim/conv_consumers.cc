// Consumers taken in by convolution input gradients (fusion_plan.h): which elementwise groups,
// with the sibling reductions that take them in, a fused input gradient's fragment computes from
// its image gradients in VMEM, the gradient itself never written (XLA's output fusion of a
// convolution, and the multi-output fusion of reductions with the convolution that produces
// their operand).
#include <algorithm>
#include <optional>

#include "runtime/backend/tpusim/conv_tiles.h"
#include "runtime/backend/tpusim/fusion_plan.h"
#include "runtime/backend/tpusim/group_lowering.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

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

// Whether a band's tile computes `members` as their own fragment would: no rng draws (a band
// has no row of the group's view to start them from) and a floating root (the band's output is
// stored as f32 values, a bf16 one packed).
bool computable_in_bands(const Graph& g, const std::vector<int>& members, int root) {
  const DType dtype = g.node(root).dtype;
  if (dtype != DType::kF32 && dtype != DType::kBF16) return false;
  return std::none_of(members.begin(), members.end(),
                      [&](int m) { return g.node(m).op == Op::kRngUniform; });
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
        exported[static_cast<size_t>(id)])
      continue;
    const int root = consuming_group(g, *plan, read_by, id, true);
    if (root < 0) continue;
    const auto taking = reductions_taking(g, *plan, root);
    if (!taking) continue;
    const std::vector<std::vector<int>>& sums = *taking;
    // What the fragment computes, as the reductions' lowering gathers it; a plain reduction's
    // input must be among it (a band loads only values of the group's operands).
    const SiblingMembers computed = sibling_members(g, sums, plan->members(root));
    const std::vector<int>& members = computed.elementwise;
    const bool plain_computed = std::all_of(
        computed.plain_inputs.begin(), computed.plain_inputs.end(),
        [&](int x) { return std::find(members.begin(), members.end(), x) != members.end(); });
    if (!plain_computed || !computable_in_bands(g, members, root)) continue;
    ProducerOperands operands = producer_operands(g, *plan, members);
    const auto gradient = std::find(operands.images.begin(), operands.images.end(), id);
    if (!operands.ok || !operands.columns.empty() || gradient == operands.images.end()) continue;
    operands.images.erase(gradient);
    ConvConsumerBlocks blocks;
    blocks.taken = true;
    blocks.images = static_cast<uint32_t>(operands.images.size());
    blocks.rows = static_cast<uint32_t>(operands.rows.size());
    blocks.blocks = producer_scratch_blocks(g, *plan, members, computed.kept);
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
