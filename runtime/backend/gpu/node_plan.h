#pragma once
// How the gpu backend computes each node, decided once at compile time on the host: a source
// (variable, infeed, constant), an alias of its input (reshape, stop_gradient, and
// cross_replica_sum on one replica), a sequence of element launches (element_kernel.h), a cuBLAS
// GEMM, or a ring sum over replicas. Plain C++ with no CUDA: built on every machine, so the
// tests check the plans (with eval_element on the host) against the cpu kernels without a GPU.

#include <cstdint>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/gpu/element_kernel.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::gpu {

enum class NodeWork { kSource, kAlias, kElements, kMatMul, kCrossReplicaSum };

// An operand that is the node's scratch (NodePlan::scratch_bytes) rather than one of its inputs.
constexpr int kScratchOperand = -1;

// One element launch: its plan and which of the node's inputs it reads, in order.
struct ElementLaunch {
  ElementPlan plan;
  std::vector<int> operands;    // indices into Node::inputs (up to 3), or kScratchOperand
  bool writes_scratch = false;  // its output is the node's scratch, not the node's value
  // Where in the scratch (bytes) a kScratchOperand is read and a writes_scratch output written.
  int64_t scratch_in = 0, scratch_out = 0;
};

// [batches x M, K] x [K, N] when the rhs is shared (rank 2), else `batches` GEMMs
// [M, K] x [K, N] with the operands' batch strides M x K, K x N and M x N. Row-major.
struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0, batches = 1;
  bool shared_rhs = false;
  bool bf16_inputs = false;   // precision kMxu: inputs rounded to bf16, products summed in f32
  bool round_output = false;  // a DType::kBF16 result
  // An operand that is a folded transpose (transpose_folds_into_matmuls): its value holds the
  // transpose's input, [K, M] for a, [N, K] for b, which cuBLAS reads transposed.
  bool a_transposed = false, b_transposed = false;
};

struct NodePlan {
  NodeWork work = NodeWork::kSource;
  bool zero_output = false;   // clear the output before the launches (pad)
  int64_t scratch_bytes = 0;  // a buffer the launches pass between them (a reduction's blocks)
  std::vector<ElementLaunch> launches;
  MatMulPlan matmul;
  bool int_out = false;  // the node's value holds s32
};

// Whether node `id` is a transpose of a matrix ([A, B] -> [B, A]) read only as an operand of
// matrix-by-matrix matmuls (not an output or a variable's update; as a lhs, only of products of
// at least 4096 outputs: node_plan.cc says why): then it moves no data. It is an alias of its
// input, and each matmul passes cuBLAS the transpose flag for it, as XLA folds a transpose into
// the dot that reads it.
bool transpose_folds_into_matmuls(const Graph& graph, int id);

// The plan of node `id` of `graph`; `mxu` is CompileOptions::precision == Precision::kMxu. Fails
// (naming the node) on a shape the element kernels cannot index (rank above element::kMaxRank).
absl::StatusOr<NodePlan> plan_node(const Graph& graph, int id, bool mxu);

// "node %12 (transpose, dense_1/t)": how gpu backend errors name a node.
std::string describe_node(const Graph& graph, int id);

}  // namespace tpusim::runtime::gpu
