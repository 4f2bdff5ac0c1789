#pragma once
// The cpu backend's kernels: one function per group of primitives, each computing a node's
// value from its inputs' values in f32 (s32 for integer ops). Reductions run in a fixed order
// (row-major over the input, accumulated in double), so results are reproducible run to run.

#include <cstdint>
#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::cpu {

struct KernelContext {
  bool mxu_precision = false;   // round matmul inputs to bf16 (CompileOptions::precision "mxu")
  uint64_t step = 0;            // for counter-based random ops
  bool f32_reductions = false;  // reduce_sum accumulates in f32 (CompileOptions::f32_reductions)
};

using Inputs = std::vector<const HostTensor*>;

// Rounds every value to bf16 (round to nearest even): each kernel's last step for a DType::kBF16
// node, whose values are bf16's held as f32, as the gpu kernels round each element.
void round_all_to_bf16(std::vector<float>& values);

// Operands of a binary elementwise op read through a broadcast the cpu backend folded into it
// (plan.h): for operand k, where each of its dimensions sits in the op's output (a
// broadcast's axes); empty: the operand as the graph gives it, numpy-broadcast.
struct BinaryOperands {
  std::vector<int64_t> map[2];
};
HostTensor elementwise_binary(const Node& n, const Inputs& in, const BinaryOperands& operands = {});
HostTensor elementwise_unary(const Node& n, const Inputs& in);
HostTensor select(const Node& n, const Inputs& in);
HostTensor cast(const Node& n, const Inputs& in);
HostTensor reduce(const Node& n, const Inputs& in, const KernelContext& ctx);
HostTensor argmax(const Node& n, const Inputs& in);
// A copy of the input's values under the node's shape, for a reshape whose input lives on (one
// whose input dies there takes its storage uncopied: cpu_backend.cc).
HostTensor reshape(const Node& n, const Inputs& in);
HostTensor transpose(const Node& n, const Inputs& in);
HostTensor broadcast(const Node& n, const Inputs& in);
HostTensor concat(const Node& n, const Inputs& in);
HostTensor slice(const Node& n, const Inputs& in);
HostTensor pad(const Node& n, const Inputs& in);
// Which matmul operands are read transposed: the graph's transpose of the last two axes, which
// the cpu backend folds into the product instead of copying (plan.h).
// A matmul whose lhs is a convolution's patches, which no other node reads, reads them made on
// the fly from the image (gemm.h's LhsSource): its input 0 is then the extract_patches node's
// input, and `a_patches` that node.
struct MatmulOperands {
  bool a_transposed = false;
  bool b_transposed = false;
  const Node* a_patches = nullptr;
};
HostTensor matmul(const Node& n, const Inputs& in, const KernelContext& ctx,
                  MatmulOperands operands = {});
HostTensor extract_patches(const Node& n, const Inputs& in);
// Rows [first, first + count) of extract_patches node `patches`'s output, flattened to [rows,
// kh * kw * C], from its input `image` (of `image_shape`), into dst.
void write_patch_rows(const float* image, const Shape& image_shape, const Node& patches,
                      int64_t first, int64_t count, float* dst);
HostTensor patches_to_image(const Node& n, const Inputs& in);
HostTensor one_hot(const Node& n, const Inputs& in);
// Row lookups (kernels_index.cc): gather copies the named rows; scatter_add sums each update row
// into its row in f32, in index order (graph.h), then rounds a bf16 result once.
HostTensor gather(const Node& n, const Inputs& in);
HostTensor scatter_add(const Node& n, const Inputs& in);
HostTensor rng_uniform(const Node& n, const KernelContext& ctx);
// The sum of every replica's value, added in the order of a ring all-reduce over replicas
// 0 .. R-1 (segment s of R, elements split as evenly as possible, summed from replica s+1 round
// to replica s), so that it is bitwise what the tpusim backend's interconnect computes.
HostTensor ring_sum(const std::vector<const HostTensor*>& replicas);

// The linear index into a tensor of `shape` reached from output index `out` (of `out_shape`)
// when input dim i sits at output dim map[i] (size-1 input dims stay at 0). Shared by
// broadcasting kernels.
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out_shape,
                                       const std::vector<int64_t>& map);

}  // namespace tpusim::runtime::cpu
