// The tpusim compiler's lowerings by op: adding an op is its lowering function (lowering.h) and
// one row here.
#include <map>

#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

// Constants, variables and infeeds are in HBM already; reshapes and stop_gradient share their
// input's buffer (hbm_plan.h).
absl::Status nothing_to_emit(Lowering&, int) { return absl::OkStatus(); }

}  // namespace

const LoweringRule* lowering_rule(Op op) {
  static const LoweringRule elementwise{lower_elementwise, false};
  static const std::map<Op, LoweringRule> rules = {
      {Op::kConstant, {nothing_to_emit, false}},
      {Op::kVariable, {nothing_to_emit, false}},
      {Op::kInfeed, {nothing_to_emit, false}},
      {Op::kReshape, {nothing_to_emit, false}},
      {Op::kStopGradient, {nothing_to_emit, false}},
      {Op::kCrossReplicaSum, {lower_cross_replica_sum, false}},
      {Op::kBroadcast, {lower_broadcast, false}},
      {Op::kReduceSum, {lower_reduce, false}},
      {Op::kReduceMax, {lower_reduce, false}},
      {Op::kArgMax, {lower_argmax, false}},
      {Op::kOneHot, {lower_one_hot, false}},
      {Op::kRngUniform, {lower_rng, false}},
      {Op::kTranspose, {lower_transpose, false}},
      {Op::kConcat, {lower_concat, false}},
      {Op::kSlice, {lower_slice, false}},
      {Op::kPad, {lower_pad, false}},
      // A bf16 product is rounded in VMEM before it leaves, on every path of lower_matmul.
      {Op::kMatMul, {lower_matmul, true}},
      {Op::kExtractPatches, {lower_extract_patches, false}},
      {Op::kPatchesToImage, {lower_patches_to_image, false}},
  };
  if (is_elementwise(op)) return &elementwise;
  const auto it = rules.find(op);
  return it == rules.end() ? nullptr : &it->second;
}

bool fusion_rounds_output(Fusion::Kind kind) {
  // Every convolution, and the max pool's gradient, rounds a bf16 result in VMEM before storing
  // it; the max pool's result is a maximum of bf16 values already.
  return kind != Fusion::Kind::kMaxPool;
}

}  // namespace tpusim::runtime::tpusim_backend
