// The tpusim compiler's lowerings by op: adding an op is its lowering function (lowering.h) and
// one row here, which says whether its fragment rounds a bf16 result and, unless it reads its
// inputs and writes its own buffer (reads_inputs_writes_self), which buffers it uses. Nothing
// else changes: the planning passes take their edges from the row, and every compile checks the
// fragment's HBM accesses against it (check_fragment_hbm).
#include <map>

#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

// Constants, variables and infeeds are in HBM already (the host and the step's infeed entries
// write them); reshapes and stop_gradient share their input's buffer (hbm_plan.h).
absl::Status nothing_to_emit(Lowering&, int) { return absl::OkStatus(); }

BufferUses no_uses(const Graph&, int) { return {}; }

BufferUses aliases_input(const Graph& graph, int id) {
  BufferUses uses;
  uses.aliases = graph.node(id).inputs[0];
  return uses;
}

}  // namespace

const LoweringRule* lowering_rule(Op op) {
  static const LoweringRule elementwise{lower_elementwise, false};
  static const std::map<Op, LoweringRule> rules = {
      {Op::kConstant, {nothing_to_emit, false, no_uses}},
      {Op::kVariable, {nothing_to_emit, false, no_uses}},
      {Op::kInfeed, {nothing_to_emit, false, no_uses}},
      {Op::kReshape, {nothing_to_emit, false, aliases_input}},
      {Op::kStopGradient, {nothing_to_emit, false, aliases_input}},
      // Reads its input and writes its own buffer on every replica (a combined all-reduce's
      // root: every member's, step_plan.h); on one replica it aliases its input and emits
      // nothing, touching no HBM.
      {Op::kCrossReplicaSum, {lower_cross_replica_sum, false}},
      {Op::kBroadcast, {lower_broadcast, false}},
      {Op::kReduceSum, {lower_reduce, true}},
      {Op::kReduceMax, {lower_reduce, false}},
      {Op::kArgMax, {lower_argmax, false}},
      {Op::kOneHot, {lower_one_hot, false}},
      // Both read their inputs and write their own buffer (scatter_add reads it back too, row
      // by row). A gather copies bf16 values; scatter_add sums them in f32 (leaves_f32_sums).
      {Op::kGather, {lower_gather, false}},
      {Op::kScatterAdd, {lower_scatter_add, false}},
      {Op::kRngUniform, {lower_rng, false}},
      {Op::kTranspose, {lower_transpose, false}},
      {Op::kConcat, {lower_concat, false}},
      {Op::kSlice, {lower_slice, false}},
      {Op::kPad, {lower_pad, false}},
      // A bf16 product is rounded in VMEM before it leaves, on every path of lower_matmul. An
      // operand behind transposes is read where it lies (matmul_operand_view).
      {Op::kMatMul, {lower_matmul, true, matmul_uses}},
      {Op::kExtractPatches, {lower_extract_patches, false}},
      {Op::kPatchesToImage, {lower_patches_to_image, false}},
  };
  if (is_elementwise(op)) return &elementwise;
  const auto it = rules.find(op);
  return it == rules.end() ? nullptr : &it->second;
}

BufferUses lowering_uses(const Graph& graph, int id) {
  const LoweringRule* rule = lowering_rule(graph.node(id).op);
  return rule != nullptr ? rule->uses(graph, id) : reads_inputs_writes_self(graph, id);
}

BufferUses Fusion::uses(int id) const {
  BufferUses out{reads, {id}};
  if (patches_kept) out.writes.push_back(patches);
  for (int r : reductions) out.writes.push_back(r);
  return out;
}

int summed_square(const Graph& graph, int reduction) {
  const int x = graph.node(reduction).inputs[0];
  return graph.node(x).op == Op::kSquare ? x : -1;
}

std::vector<int> computed_inside_fusions(const Graph& graph, const Fusions& fusions) {
  std::vector<int> inside(static_cast<size_t>(graph.size()), -1);
  for (const auto& [id, fusion] : fusions) {
    for (int r : fusion.reductions) {
      inside[static_cast<size_t>(r)] = id;
      if (const int square = summed_square(graph, r); square >= 0)
        inside[static_cast<size_t>(square)] = id;
    }
  }
  return inside;
}

BufferUses fragment_uses(const Graph& graph, const Fusions& fusions, int id) {
  const auto it = fusions.find(id);
  return it == fusions.end() ? lowering_uses(graph, id) : it->second.uses(id);
}

bool fusion_rounds_output(Fusion::Kind kind) {
  // Every convolution, and the max pool's gradient, rounds a bf16 result in VMEM before storing
  // it; the max pool's result is a maximum of bf16 values already.
  return kind != Fusion::Kind::kMaxPool;
}

}  // namespace tpusim::runtime::tpusim_backend
