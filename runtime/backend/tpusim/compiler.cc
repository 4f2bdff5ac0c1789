#include "runtime/backend/tpusim/compiler.h"

#include <cstring>
#include <memory>
#include <optional>

#include "common/align.h"
#include "common/strings.h"
#include "runtime/backend/tpusim/emitter.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/backend/tpusim/rematerialize.h"
#include "runtime/backend/tpusim/schedule.h"
#include "runtime/backend/tpusim/step_emission.h"
#include "runtime/backend/tpusim/step_plan.h"
#include "runtime/lowering/gemm.h"

namespace tpusim::runtime::tpusim_backend {

CompilerHbm::CompilerHbm(uint64_t constants_base, uint64_t constants_limit)
    : const_base_(constants_base), const_top_(constants_base), const_limit_(constants_limit) {}

uint64_t CompilerHbm::constant(const std::vector<float>& values) {
  for (const auto& [at, v] : constants_) {
    if (v == values) return at;
  }
  const uint64_t at = const_top_;
  const_top_ += align_up(values.size() * 4);
  constants_.emplace_back(at, values);
  return at;
}

uint64_t CompilerHbm::temporary(uint64_t bytes) {
  const uint64_t at = temp_base_ + temp_top_;
  temp_top_ += align_up(bytes);
  temp_peak_ = std::max(temp_peak_, temp_top_);
  return at;
}

namespace {

// Buffers hold bf16 values as f32, so a cast from bf16 to f32 changes no bit: compiled as a
// reshape to its own shape it aliases its input's buffer and emits nothing (and a convolution
// reading it reads the bf16 infeed directly), as XLA fuses the convert into the reader. Null
// when the graph has no such cast.
std::unique_ptr<Graph> widening_casts_as_aliases(const Graph& graph) {
  std::unique_ptr<Graph> out;
  for (int id = 0; id < graph.size(); ++id) {
    const Node& n = graph.node(id);
    if (n.op != Op::kCast || n.dtype != DType::kF32 ||
        graph.node(n.inputs[0]).dtype != DType::kBF16) {
      continue;
    }
    if (out == nullptr) out = std::make_unique<Graph>(graph);
    out->mutable_node(id).op = Op::kReshape;
  }
  return out;
}

// The step's node ids (its buffers' plan, the transfers' nodes) as the given graph numbers
// them, for a step compiled from `remat`'s graph: a copy's buffer is its original's.
void in_given_ids(const Rematerialized& remat, CompiledStep& step) {
  HbmPlan given = step.plan;
  given.address.resize(remat.new_id.size());
  given.owner.resize(remat.new_id.size());
  for (size_t id = 0; id < remat.new_id.size(); ++id) {
    const auto now = static_cast<size_t>(remat.new_id[id]);
    given.address[id] = step.plan.address[now];
    given.owner[id] = remat.old_id[static_cast<size_t>(step.plan.owner[now])];
  }
  step.plan = std::move(given);
  for (Transfer& t : step.infeeds) t.node = remat.old_id[static_cast<size_t>(t.node)];
  for (Transfer& t : step.outputs) t.node = remat.old_id[static_cast<size_t>(t.node)];
}

}  // namespace

namespace {

// Per node of the graph `remat` rewrote (all of them when it is null), its scratch: the largest of
// its own and its copies' in `temporaries` (per node of the compiled graph).
std::vector<uint64_t> scratch_of_given(const Rematerialized* remat,
                                       const std::vector<uint64_t>& temporaries) {
  if (remat == nullptr) return temporaries;
  std::vector<uint64_t> out(remat->new_id.size(), 0);
  for (size_t id = 0; id < temporaries.size(); ++id) {
    uint64_t& slot = out[static_cast<size_t>(remat->old_id[id])];
    slot = std::max(slot, temporaries[id]);
  }
  return out;
}

// `scratch` (per node of the given graph) for the nodes of `remat`'s graph: a copy's is its
// original's, its lowering being the same.
std::vector<uint64_t> scratch_for(const Rematerialized* remat,
                                  const std::vector<uint64_t>& scratch) {
  if (remat == nullptr || scratch.empty()) return scratch;
  std::vector<uint64_t> out;
  for (int id : remat->old_id) out.push_back(scratch[static_cast<size_t>(id)]);
  return out;
}

// Plans `whole`, rematerializing as XLA's pass does while the step does not fit (rematerialize.h),
// with each node's scratch counted beside its tensors when `scratch` gives it; then emits it into
// `out`. `remat` is left holding the rewrite the step was compiled from (null: none).
absl::Status plan_and_emit(const Graph& whole, const config::SliceSpec& slice, uint32_t core,
                           const StepOptions& options, const std::vector<uint64_t>& scratch,
                           std::unique_ptr<Rematerialized>& remat, CompiledStep& out) {
  remat = nullptr;
  StepPlan refused;
  auto plan = plan_step(whole, slice, core, options, &refused, scratch);
  if (absl::IsResourceExhausted(plan.status()) && (remat = rematerialize_patches(whole)))
    plan =
        plan_step(remat->graph, slice, core, options, &refused, scratch_for(remat.get(), scratch));
  uint64_t recomputable = 0;
  while (absl::IsResourceExhausted(plan.status())) {
    const Graph& now = remat != nullptr ? remat->graph : whole;
    std::unique_ptr<Rematerialized> again = rematerialize_at_peak(now, refused, &recomputable);
    if (again == nullptr) break;  // the refusal stands, naming what holds the peak
    remat = remat != nullptr ? compose(*remat, std::move(*again)) : std::move(again);
    plan =
        plan_step(remat->graph, slice, core, options, &refused, scratch_for(remat.get(), scratch));
  }
  if (absl::IsResourceExhausted(plan.status())) {
    return absl::ResourceExhaustedError(
        str_cat(plan.status().message(),
                ". Rematerialization (values held at the peak computed "
                "again where read after it) could free ",
                recomputable, " bytes there"));
  }
  if (!plan.ok()) return plan.status();
  const Graph& graph = remat != nullptr ? remat->graph : whole;
  out.fused_reductions = plan->fusion.fused_reductions;
  out.recomputed_nodes = plan->fusion.recomputed_nodes;
  out.multi_output_fusions = plan->fusion.multi_output_fusions;
  out.producer_fusions = plan->fusion.producer_fusions;
  out.reader_recomputed_groups = plan->fusion.reader_recomputed_groups;
  out.conv_producers = plan->fusion.conv_producers;
  out.matmul_producers = plan->fusion.matmul_producers;
  out.matmul_consumers = plan->fusion.matmul_consumers;
  out.merged_products = plan->fusion.merged_products;
  out.conv_consumers = plan->fusion.conv_consumers;
  for (const auto& [id, fused] : plan->fusions)
    out.conv_output_reductions += fused.reductions.size();
  out.combined_allreduces = plan->combined.groups();
  out.combined_sums = plan->combined.sums();
  out.hbm_base = plan->hbm_base;
  out.plan = std::move(plan->hbm);
  return emit_step(graph, slice, core, options, *plan, out);
}

}  // namespace

absl::StatusOr<CompiledStep> compile_graph(const Graph& given, const config::SliceSpec& slice,
                                           uint32_t core, const StepOptions& options) {
  const std::unique_ptr<Graph> aliased = widening_casts_as_aliases(given);
  const Graph& whole = aliased != nullptr ? *aliased : given;
  // The plan cannot know the scratch each fragment's lowering takes (a transpose's or a reduce's
  // partial results). A step whose tensors fit but whose tensors and scratch together do not is
  // planned again, once, with the scratch its emission measured: rematerialization then frees
  // room for it too.
  std::vector<uint64_t> scratch;
  std::unique_ptr<Rematerialized> remat;
  CompiledStep out;
  absl::Status s = plan_and_emit(whole, slice, core, options, scratch, remat, out);
  if (absl::IsResourceExhausted(s) && !out.node_temporaries.empty()) {
    scratch = scratch_of_given(remat.get(), out.node_temporaries);
    out = CompiledStep{};
    s = plan_and_emit(whole, slice, core, options, scratch, remat, out);
  }
  if (!s.ok()) return s;
  if (remat != nullptr) {
    out.rematerialized_nodes = static_cast<uint64_t>(remat->graph.size()) - remat->new_id.size();
    in_given_ids(*remat, out);
  }
  return out;
}

}  // namespace tpusim::runtime::tpusim_backend
