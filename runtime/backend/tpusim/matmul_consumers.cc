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

// What a consumer group reads besides the product, as its tile loads it: `images` of the
// product's shape, an entry a row; and narrow values loaded once above the tile slots,
// `once_bytes` of VMEM in all: scalars, rows of the product's last axis and rows that change
// every `row_period` rows of its [rows, cols] view, whole entries each (BERT's attention mask,
// [batch, 1, 1, keys], over heads and queries), all of such a value loaded.
struct ConsumerReads {
  std::vector<int> images;
  std::vector<uint64_t> once_widths;  // in f32 elements
  uint64_t row_period = 0;
  // As Emitter::load_row_operands places them: each in a block aligned on its own.
  uint64_t once_bytes() const { return Emitter::tile_bytes(once_widths, 1); }
};
// nullopt when the group reads anything else but immediates: a column, a value its lowering would
// broadcast to the product's shape first, rows of another period, an s32 or recomputed value.
std::optional<ConsumerReads> consumer_reads(const Graph& g, const FusionPlan& plan,
                                            const std::vector<int>& members, int product) {
  ConsumerReads reads;
  std::vector<int> narrow;
  const Shape& shape = g.node(product).shape;
  auto once = [&](int in, uint64_t elements) {
    if (holds(narrow, in)) return;
    narrow.push_back(in);
    reads.once_widths.push_back(elements);
  };
  for (int m : members) {
    for (int in : g.node(m).inputs) {
      float ignored;
      if (in == product || holds(members, in) || foldable_scalar(g, in, &ignored)) continue;
      const Node& v = g.node(in);
      if (plan.node(in).recomputed || v.dtype == DType::kS32) return std::nullopt;
      if (plan.node(in).folded) {  // its input in place, as classify_operand reads it
        const FoldedBroadcast fold = broadcast_fold(g, in);
        if (fold == FoldedBroadcast::kColumn) return std::nullopt;
        once(in, fold == FoldedBroadcast::kScalar ? 1 : shape.dim(shape.rank() - 1));
      } else if (v.shape == shape) {
        if (!holds(reads.images, in)) reads.images.push_back(in);
      } else if (v.shape.elements() == 1 || per_channel(v.shape, shape)) {
        once(in, static_cast<uint64_t>(v.shape.elements()));
      } else if (const uint64_t period = row_period(v.shape, shape);
                 period > 0 && (reads.row_period == 0 || reads.row_period == period)) {
        reads.row_period = period;
        once(in, static_cast<uint64_t>(v.shape.elements()));
      } else {
        return std::nullopt;
      }
    }
  }
  return reads;
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
    const std::optional<ConsumerReads> reads = consumer_reads(g, *plan, members, id);
    if (!reads || reads->once_bytes() > core.vmem_bytes - 2 * tile_slot_bytes(core)) continue;
    const uint32_t blocks = producer_scratch_blocks(g, *plan, members);
    if (!batched_matmul_fits(g, id, core, operand_making(g, *plan, id),
                             MatmulOperandMaking{reads->images.size(), blocks}))
      continue;
    plan->node(id).consumer = root;
    plan->node(id).taken_reads = matmul_uses(g, id).reads;
    plan->node(root).consumes = id;
    ++plan->matmul_consumers;
  }
}

namespace {

bool batched_matmul(const Graph& g, int id) {
  const Node& n = g.node(id);
  return n.op == Op::kMatMul && g.node(n.inputs[1]).shape.rank() != 2;
}

// A matmul of two 2D matrices, or a batched one: a product whose rows stay its own when its
// last two axes swap (not one with shared 2D weights whose lhs rows flatten leading axes).
bool transposable_matmul(const Graph& g, int id) {
  const Node& n = g.node(id);
  return batched_matmul(g, id) ||
         (n.op == Op::kMatMul && n.shape.rank() == 2 && g.node(n.inputs[0]).shape.rank() == 2);
}

}  // namespace

int merged_product(const Graph& g, int id) {
  const Node& t = g.node(id);
  if (t.op != Op::kTranspose || t.shape.rank() < 4 || !permutes_tail(t.attrs.axes, {1, 0, 2}))
    return -1;
  const int in = t.inputs[0];
  if (batched_matmul(g, in)) return in;
  const Node& swap = g.node(in);  // the product's entries transposed first
  if (swap.op == Op::kTranspose && permutes_tail(swap.attrs.axes, {1, 0}) &&
      batched_matmul(g, swap.inputs[0]))
    return swap.inputs[0];
  return -1;
}

int transposed_product(const Graph& g, int id) {
  const Node& t = g.node(id);
  if (t.op != Op::kTranspose || t.shape.rank() < 2 || !permutes_tail(t.attrs.axes, {1, 0}))
    return -1;
  return transposable_matmul(g, t.inputs[0]) ? t.inputs[0] : -1;
}

// A batched matmul whose only reader is a merge of its heads (or a transpose of its entries that
// only such a merge reads), and which is not an output, stores its entries where the merge puts
// them: the merge's fragment is the product's, and neither the product nor the transpose between
// is written. Then a matmul whose only reader transposes its last two axes, likewise.
void store_matmuls_through_merges(const Graph& g, const Fusions& fusions, FusionPlan* plan) {
  const std::vector<std::vector<int>> readers = fragment_readers(g, fusions, *plan);
  const std::vector<bool> exported = exported_nodes(g);
  auto only_reader = [&](int id) {
    const std::vector<int>& read_by = readers[static_cast<size_t>(id)];
    const bool alone = plan->node(id).needed && !plan->absorbed(id) &&
                       !exported[static_cast<size_t>(id)] && read_by.size() == 1;
    return alone ? read_by[0] : -1;
  };
  // The merges first, so that a transpose of entries a merge reads is the merge's to take.
  for (const auto& stored_by : {merged_product, transposed_product}) {
    for (int merge = 0; merge < g.size(); ++merge) {
      const int product = stored_by(g, merge);
      if (product < 0 || plan->absorbed(merge) || plan->node(merge).group >= 0) continue;
      const int between = g.node(merge).inputs[0];  // the product, or its entries transposed
      if (only_reader(between) != merge || (between != product && only_reader(product) != between))
        continue;
      for (int id : {product, between}) {
        plan->node(id).consumer = merge;
        plan->node(id).taken_reads =
            id == product ? matmul_uses(g, id).reads : std::vector{product};
      }
      plan->node(merge).consumes = product;
      ++plan->merged_products;
    }
  }
}

}  // namespace tpusim::runtime::tpusim_backend
