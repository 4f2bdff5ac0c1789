#include "runtime/backend/gpu/node_plan.h"

#include <algorithm>

#include "common/strings.h"
#include "runtime/backend/cpu/kernels.h"

namespace tpusim::runtime::gpu {
namespace {

using element::StridedMap;

// The map that walks `walked` and lands at base + sum(coordinate x strides) in another tensor.
StridedMap strided(const Shape& walked, const std::vector<int64_t>& strides, int64_t base = 0) {
  StridedMap m;
  m.rank = walked.rank();
  for (int d = 0; d < walked.rank(); ++d) {
    m.dims[d] = walked.dim(d);
    m.strides[d] = strides[static_cast<size_t>(d)];
  }
  m.base = base;
  return element::merged_map(m);
}

// Operand `in` of a numpy-broadcasting op: its dim i sits at output dim (out rank - in rank + i).
StridedMap numpy_operand(const Shape& in, const Shape& out) {
  std::vector<int64_t> map(static_cast<size_t>(in.rank()));
  for (int i = 0; i < in.rank(); ++i) map[static_cast<size_t>(i)] = out.rank() - in.rank() + i;
  return strided(out, cpu::broadcast_strides(in, out, map));
}

int64_t start_offset(const std::vector<int64_t>& begin, const std::vector<int64_t>& strides) {
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) base += begin[d] * strides[d];
  return base;
}

ElementLaunch launch(ElementKind kind, const Node& n, int64_t count, std::vector<int> operands) {
  ElementLaunch l;
  l.plan.kind = kind;
  l.plan.op = n.op;
  l.plan.count = count;
  l.plan.int_out = n.dtype == DType::kS32;
  l.plan.round_output = n.dtype == DType::kBF16;
  l.operands = std::move(operands);
  return l;
}

PatchGeometry geometry(const Shape& image, const Shape& patches, const Window& w) {
  PatchGeometry g;
  g.n = image.dim(0);
  g.h = image.dim(1);
  g.w = image.dim(2);
  g.c = image.dim(3);
  g.oh = patches.dim(1);
  g.ow = patches.dim(2);
  g.kh = w.kh;
  g.kw = w.kw;
  g.sh = w.sh;
  g.sw = w.sw;
  g.pad_top = w.pad_top;
  g.pad_left = w.pad_left;
  return g;
}

// reduce_sum / reduce_max: map_a takes an output element to its first input element (the kept
// dims' input strides), map_b walks the reduced dims in row-major input order. A reduction of
// more than one block (element_math.h's tree) sums its blocks on threads of their own into the
// node's scratch, each level above them is a launch of its own, and the last adds up what is
// left for each output.
void plan_reduce(const Node& n, const Shape& in, NodePlan* plan) {
  // The double sum stored as f32, then rounded to bf16 for a bf16 result, as the cpu kernel does.
  ElementLaunch l = launch(ElementKind::kReduce, n, n.shape.elements(), {0});
  const auto strides = in.strides();
  std::vector<int64_t> kept_dims, kept_strides, reduced_dims, reduced_strides;
  for (int d = 0; d < in.rank(); ++d) {
    const bool reduced =
        std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d) != n.attrs.axes.end();
    (reduced ? reduced_dims : kept_dims).push_back(in.dim(d));
    (reduced ? reduced_strides : kept_strides).push_back(strides[static_cast<size_t>(d)]);
  }
  l.plan.map_a = strided(Shape(kept_dims), kept_strides);
  l.plan.map_b = strided(Shape(reduced_dims), reduced_strides);
  l.plan.inner = Shape(reduced_dims).elements();
  const int64_t blocks = element::reduce_blocks(l.plan.inner);
  if (blocks == 1 || l.plan.count == 0) {
    plan->launches.push_back(l);
    return;
  }
  // The tree's levels lie one after another in the scratch, outputs x entries doubles each.
  const int64_t outputs = l.plan.count;
  ElementLaunch partial = l;
  partial.plan.kind = ElementKind::kReducePartial;
  partial.plan.blocks = blocks;
  partial.plan.count = outputs * blocks;
  partial.plan.round_output = false;
  partial.writes_scratch = true;
  plan->launches.push_back(partial);
  int64_t level = 0, entries = blocks;  // the level the next launch reads: offset and entries
  while (entries > element::kReduceBlock) {
    const int64_t groups = element::reduce_blocks(entries);
    ElementLaunch combine = l;
    combine.plan.kind = ElementKind::kReduceCombine;
    combine.plan.blocks = entries;
    combine.plan.len = outputs;
    combine.plan.count = outputs * groups;
    combine.plan.round_output = false;
    combine.operands = {kScratchOperand};
    combine.scratch_in = level;
    combine.scratch_out = level + outputs * entries * static_cast<int64_t>(sizeof(double));
    combine.writes_scratch = true;
    plan->launches.push_back(combine);
    level = combine.scratch_out;
    entries = groups;
  }
  ElementLaunch finish = l;
  finish.plan.kind = ElementKind::kReduceFinish;
  finish.plan.blocks = entries;
  finish.operands = {kScratchOperand};
  finish.scratch_in = level;
  plan->launches.push_back(finish);
  plan->scratch_bytes = level + outputs * entries * static_cast<int64_t>(sizeof(double));
}

}  // namespace

std::string describe_node(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  return str_cat("node %", id, " (", op_name(n.op), n.label.empty() ? "" : ", ", n.label, ")");
}

namespace {

// The node's value and inputs within the kernels' rank, or why not.
absl::Status check_ranks(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.shape.rank() > element::kMaxRank) {
    return absl::UnimplementedError(str_cat("gpu backend: ", describe_node(graph, id), " has rank ",
                                            n.shape.rank(), "; its kernels index at most ",
                                            element::kMaxRank, " dimensions"));
  }
  for (int in : n.inputs) {
    if (graph.node(in).shape.rank() > element::kMaxRank) {
      return absl::UnimplementedError(str_cat(
          "gpu backend: ", describe_node(graph, id), " reads a rank-", graph.node(in).shape.rank(),
          " value; its kernels index at most ", element::kMaxRank, " dimensions"));
    }
  }
  return absl::OkStatus();
}

// A transpose that swaps two runs of trailing axes, [batch axes, A axes, B axes] ->
// [batch axes, B axes, A axes], is [batches, rows, cols] -> [batches, cols, rows]: a kTranspose
// (tiled on the GPU) when both runs hold more than one element. One that keeps the last axis
// reads rows contiguously and stays a gather.
void tile_if_swapping(const Shape& in, const std::vector<int64_t>& perm, ElementPlan* plan) {
  const auto rank = static_cast<int64_t>(perm.size());
  int64_t kept = 0;
  while (kept < rank && perm[static_cast<size_t>(kept)] == kept) ++kept;
  if (kept == rank) return;
  const int64_t b_start = perm[static_cast<size_t>(kept)];  // where the B axes start
  for (int64_t i = 0; i < rank - b_start; ++i) {
    if (perm[static_cast<size_t>(kept + i)] != b_start + i) return;
  }
  for (int64_t i = 0; i < b_start - kept; ++i) {
    if (perm[static_cast<size_t>(kept + rank - b_start + i)] != kept + i) return;
  }
  int64_t rows = 1, cols = 1;
  for (int64_t d = kept; d < b_start; ++d) rows *= in.dim(static_cast<int>(d));
  for (int64_t d = b_start; d < rank; ++d) cols *= in.dim(static_cast<int>(d));
  if (rows <= 1 || cols <= 1) return;
  plan->kind = ElementKind::kTranspose;
  plan->len = rows;
  plan->inner = cols;
}

// The launches of a layout node (transpose, broadcast, slice: gathers; concat, pad: scatters);
// false for other ops.
bool plan_layout(const Graph& graph, const Node& n, NodePlan* plan) {
  auto input = [&](size_t i) -> const Node& { return graph.node(n.inputs[i]); };
  const int64_t count = n.shape.elements();
  switch (n.op) {
    case Op::kTranspose: {
      ElementLaunch l = launch(ElementKind::kGather, n, count, {0});
      const auto s = input(0).shape.strides();
      std::vector<int64_t> in_strides;
      for (int64_t p : n.attrs.axes) in_strides.push_back(s[static_cast<size_t>(p)]);
      l.plan.map_a = strided(n.shape, in_strides);
      l.plan.round_output = false;
      tile_if_swapping(input(0).shape, n.attrs.axes, &l.plan);
      plan->launches.push_back(l);
      return true;
    }
    case Op::kBroadcast: {
      ElementLaunch l = launch(ElementKind::kGather, n, count, {0});
      l.plan.map_a =
          strided(n.shape, cpu::broadcast_strides(input(0).shape, n.shape, n.attrs.axes));
      l.plan.round_output = false;
      plan->launches.push_back(l);
      return true;
    }
    case Op::kSlice: {
      ElementLaunch l = launch(ElementKind::kGather, n, count, {0});
      const auto s = input(0).shape.strides();
      l.plan.map_a = strided(n.shape, s, start_offset(n.attrs.begin, s));
      l.plan.round_output = false;
      plan->launches.push_back(l);
      return true;
    }
    case Op::kConcat: {
      // Each part lands at its own offset along the axis.
      const auto out_strides = n.shape.strides();
      int64_t offset = 0;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Shape& part = input(i).shape;
        ElementLaunch l = launch(ElementKind::kScatter, n, part.elements(), {static_cast<int>(i)});
        l.plan.map_a =
            strided(part, out_strides, offset * out_strides[static_cast<size_t>(n.attrs.axis)]);
        l.plan.round_output = false;
        plan->launches.push_back(l);
        offset += part.dim(static_cast<int>(n.attrs.axis));
      }
      return true;
    }
    case Op::kPad: {
      const Shape& in = input(0).shape;
      ElementLaunch l = launch(ElementKind::kScatter, n, in.elements(), {0});
      const auto s = n.shape.strides();
      l.plan.map_a = strided(in, s, start_offset(n.attrs.begin, s));
      l.plan.round_output = false;
      plan->zero_output = true;
      plan->launches.push_back(l);
      return true;
    }
    default:
      return false;
  }
}

// The launches of a node that indexes its input (im2col and its adjoint, one-hot, the row
// lookups); false for other ops.
bool plan_indexed(const Graph& graph, const Node& n, NodePlan* plan) {
  auto input = [&](size_t i) -> const Node& { return graph.node(n.inputs[i]); };
  const int64_t count = n.shape.elements();
  switch (n.op) {
    case Op::kExtractPatches: {
      ElementLaunch l = launch(ElementKind::kExtractPatches, n, count, {0});
      l.plan.patches = geometry(input(0).shape, n.shape, n.attrs.window);
      l.plan.round_output = false;
      plan->launches.push_back(l);
      return true;
    }
    case Op::kPatchesToImage: {
      ElementLaunch l = launch(ElementKind::kPatchesToImage, n, count, {0});
      l.plan.patches = geometry(n.shape, input(0).shape, n.attrs.window);  // bf16: sums rounded
      plan->launches.push_back(l);
      return true;
    }
    case Op::kOneHot: {
      ElementLaunch l = launch(ElementKind::kOneHot, n, count, {0});
      l.plan.inner = n.attrs.depth;
      plan->launches.push_back(l);
      return true;
    }
    case Op::kGather: {
      ElementLaunch l = launch(ElementKind::kIndexGather, n, count, {0, 1});
      l.plan.inner = input(0).shape.dim(1);
      l.plan.len = input(0).shape.dim(0);
      l.plan.round_output = false;
      plan->launches.push_back(l);
      return true;
    }
    case Op::kScatterAdd: {
      // One thread per column: each walks every index in order (graph.h's summation order).
      ElementLaunch l = launch(ElementKind::kIndexScatterAdd, n, n.shape.dim(1), {0, 1});
      l.plan.inner = n.shape.dim(1);
      l.plan.len = n.shape.dim(0);
      l.plan.indices = input(1).shape.elements();
      plan->zero_output = true;
      plan->launches.push_back(l);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

// A transposed lhs is folded only into products of at least this many outputs. Measured with
// cuBLAS 13.0 on an H200 (mnist_cnn at 8 x 128, replicas batched): the weight gradient
// [800, 25088] x [25088, 64] took 0.108 ms with its lhs read transposed against 0.32 ms after a
// materialized transpose, but [25, 100352] x [100352, 32], 800 outputs, took 2.29 ms against
// 0.17 ms: a product that small gets its parallelism from splitting the long K, which cuBLAS did
// for the plain layout and not for the transposed one. 4096 is one 64 x 64 output tile.
constexpr int64_t kFoldedLhsMinOutputs = 4096;

bool transpose_folds_into_matmuls(const Graph& graph, int id) {
  const Node& n = graph.node(id);
  if (n.op != Op::kTranspose || n.shape.rank() != 2 || n.attrs.axes != std::vector<int64_t>{1, 0})
    return false;
  for (const auto& o : graph.outputs()) {
    if (o.node == id) return false;
  }
  for (const auto& u : graph.updates()) {
    if (u.value == id) return false;
  }
  bool read = false;
  for (int i = id + 1; i < graph.size(); ++i) {
    const Node& user = graph.node(i);
    if (std::find(user.inputs.begin(), user.inputs.end(), id) == user.inputs.end()) continue;
    if (user.op != Op::kMatMul || graph.node(user.inputs[0]).shape.rank() != 2 ||
        graph.node(user.inputs[1]).shape.rank() != 2) {
      return false;
    }
    if (user.inputs[0] == id && user.shape.elements() < kFoldedLhsMinOutputs) return false;
    read = true;
  }
  return read;
}

// An elementwise node's launch (binary with numpy broadcasting, unary, select, cast, random
// numbers, argmax); false for other ops.
bool plan_elementwise(const Graph& graph, const Node& n, NodePlan* plan) {
  auto input = [&](size_t i) -> const Node& { return graph.node(n.inputs[i]); };
  const int64_t count = n.shape.elements();
  ElementLaunch l;
  if (is_binary_elementwise(n.op)) {
    l = launch(ElementKind::kBinary, n, count, {0, 1});
    l.plan.int_a = input(0).dtype == DType::kS32;
    l.plan.int_out = false;  // comparisons of s32 values give f32
    l.plan.map_a = numpy_operand(input(0).shape, n.shape);
    l.plan.map_b = numpy_operand(input(1).shape, n.shape);
  } else if (is_unary_elementwise(n.op)) {
    l = launch(ElementKind::kUnary, n, count, {0});
  } else if (n.op == Op::kRngUniform) {
    l = launch(ElementKind::kRngUniform, n, count, {});
    l.plan.round_output = false;
    l.plan.seed = n.attrs.seed;
  } else if (n.op == Op::kSelect) {
    l = launch(ElementKind::kSelect, n, count, {0, 1, 2});
    l.plan.int_a = input(0).dtype == DType::kS32;
    l.plan.round_output = false;
  } else if (n.op == Op::kCast) {
    l = launch(ElementKind::kCast, n, count, {0});
    l.plan.int_a = input(0).dtype == DType::kS32;
  } else if (n.op == Op::kArgMax) {
    l = launch(ElementKind::kArgMax, n, count, {0});
    const Shape& s = input(0).shape;
    l.plan.len = s.dim(static_cast<int>(n.attrs.axis));
    l.plan.inner = s.strides()[static_cast<size_t>(n.attrs.axis)];
  } else {
    return false;
  }
  plan->launches.push_back(l);
  return true;
}

// A matmul's cuBLAS call: its shapes, batches, and the transposes read in place.
void plan_matmul(const Graph& graph, const Node& n, bool mxu, NodePlan* plan) {
  plan->work = NodeWork::kMatMul;
  const Shape& a = graph.node(n.inputs[0]).shape;
  const Shape& b = graph.node(n.inputs[1]).shape;
  MatMulPlan& m = plan->matmul;
  m.m = a.dim(a.rank() - 2);
  m.k = a.dim(a.rank() - 1);
  m.n = b.dim(b.rank() - 1);
  m.batches = m.m * m.k == 0 ? 0 : a.elements() / (m.m * m.k);
  m.shared_rhs = b.rank() == 2;
  m.bf16_inputs = mxu;
  m.round_output = n.dtype == DType::kBF16;
  m.a_transposed = transpose_folds_into_matmuls(graph, n.inputs[0]);
  m.b_transposed = transpose_folds_into_matmuls(graph, n.inputs[1]);
}

absl::StatusOr<NodePlan> plan_node(const Graph& graph, int id, bool mxu) {
  const Node& n = graph.node(id);
  if (absl::Status s = check_ranks(graph, id); !s.ok()) return s;
  NodePlan plan;
  plan.int_out = n.dtype == DType::kS32;
  plan.work = NodeWork::kElements;
  if (plan_elementwise(graph, n, &plan)) return plan;
  if (transpose_folds_into_matmuls(graph, id)) {
    plan.work = NodeWork::kAlias;
    return plan;
  }
  if (plan_layout(graph, n, &plan) || plan_indexed(graph, n, &plan)) return plan;
  switch (n.op) {
    case Op::kConstant:
    case Op::kVariable:
    case Op::kInfeed:
      plan.work = NodeWork::kSource;
      break;
    case Op::kReshape:
    case Op::kStopGradient:
      plan.work = NodeWork::kAlias;
      break;
    case Op::kCrossReplicaSum:
      plan.work = NodeWork::kCrossReplicaSum;  // an alias on one replica
      break;
    case Op::kReduceSum:
    case Op::kReduceMax:
      plan_reduce(n, graph.node(n.inputs[0]).shape, &plan);
      break;
    case Op::kMatMul:
      plan_matmul(graph, n, mxu, &plan);
      break;
    default:
      return absl::UnimplementedError(
          str_cat("gpu backend: no kernel for ", describe_node(graph, id)));
  }
  return plan;
}

}  // namespace tpusim::runtime::gpu
