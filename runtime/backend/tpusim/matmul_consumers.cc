// Consumers taken in by batched matmuls (fusion_plan.h): which elementwise groups a matmul's
// fragment computes from its products in VMEM, its product never written (XLA's output fusion).
#include <algorithm>

#include "runtime/backend/tpusim/fusion_plan.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

bool holds(const std::vector<int>& ids, int id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// How matmul `id`'s tile makes its operands (a group recomputed by it: recompute_readers.cc).
std::array<MatmulOperandMaking, 2> operand_making(const Graph& g, const FusionPlan& plan, int id) {
  std::array<MatmulOperandMaking, 2> making{};
  const std::vector<int> sources = matmul_uses(g, id).reads;  // the lhs's, the rhs's
  for (size_t i = 0; i < 2; ++i) {
    const int source = sources[i];
    if (!plan.node(source).recomputed) continue;
    const std::vector<int> members = plan.members(source);
    making[i] = {producer_operands(g, plan, members).images.size(),
                 producer_scratch_blocks(g, plan, members)};
  }
  return making;
}

// The values of its shape group `members` reads besides `product` (as its tile loads them), or
// nullopt when it reads anything else but immediates.
std::optional<std::vector<int>> consumer_images(const Graph& g, const FusionPlan& plan,
                                                const std::vector<int>& members, int product) {
  std::vector<int> images;
  const Shape& shape = g.node(product).shape;
  for (int m : members) {
    for (int in : g.node(m).inputs) {
      float ignored;
      if (in == product || holds(members, in) || foldable_scalar(g, in, &ignored)) continue;
      if (plan.node(in).folded || plan.node(in).recomputed || g.node(in).shape != shape ||
          g.node(in).dtype == DType::kS32)
        return std::nullopt;
      if (!holds(images, in)) images.push_back(in);
    }
  }
  return images;
}

}  // namespace

int consuming_group(const Graph& g, const FusionPlan& plan, const std::vector<int>& read_by,
                    int product, bool taken_by_reductions) {
  if (read_by.empty()) return -1;
  const int root = plan.node(read_by.front()).group;
  if (root < 0) return -1;
  for (int r : read_by) {
    if (plan.node(r).group != root) return -1;
  }
  const NodeFusion& f = plan.node(root);
  if (f.recomputed || f.folded || f.sibling >= 0 || f.producer >= 0 || f.consumes >= 0 ||
      (f.computed_with >= 0 && !taken_by_reductions) || !is_elementwise(g.node(root).op) ||
      g.node(root).shape != g.node(product).shape)
    return -1;
  for (int m : plan.members(root)) {
    if (g.node(m).op == Op::kRngUniform || !is_elementwise(g.node(m).op)) return -1;
  }
  return root;
}

// A batched matmul takes in its consumer when the group is its product's only reader (each
// reader a member of it), the product is not an output, and the tile fits with the group's
// values and scratch beside the product's. Writing the product and reading it back is then
// never better: the group's other values were read by its own fragment anyway.
void take_in_matmul_consumers(const Graph& g, const Fusions& fusions, const config::CoreSpec& core,
                              FusionPlan* plan) {
  const std::vector<std::vector<int>> readers = fragment_readers(g, fusions, *plan);
  const std::vector<bool> exported = exported_nodes(g);
  for (int id = 0; id < g.size(); ++id) {
    const std::vector<int>& read_by = readers[static_cast<size_t>(id)];
    if (g.node(id).op != Op::kMatMul || !plan->node(id).needed || plan->absorbed(id) ||
        exported[static_cast<size_t>(id)])
      continue;
    const int root = consuming_group(g, *plan, read_by, id, false);
    if (root < 0) continue;
    const std::vector<int> members = plan->members(root);
    const std::optional<std::vector<int>> images = consumer_images(g, *plan, members, id);
    if (!images) continue;
    const uint32_t blocks = producer_scratch_blocks(g, *plan, members);
    if (!batched_matmul_fits(g, id, core, operand_making(g, *plan, id),
                             MatmulOperandMaking{images->size(), blocks}))
      continue;
    plan->node(id).consumer = root;
    plan->node(id).taken_reads = matmul_uses(g, id).reads;
    plan->node(root).consumes = id;
    ++plan->matmul_consumers;
  }
}

}  // namespace tpusim::runtime::tpusim_backend
