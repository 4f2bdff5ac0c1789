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

// One element launch: its plan and which of the node's inputs it reads, in order.
struct ElementLaunch {
  ElementPlan plan;
  std::vector<int> operands;  // indices into Node::inputs (up to 3)
};

// [batches x M, K] x [K, N] when the rhs is shared (rank 2), else `batches` GEMMs
// [M, K] x [K, N] with the operands' batch strides M x K, K x N and M x N. Row-major.
struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0, batches = 1;
  bool shared_rhs = false;
  bool bf16_inputs = false;   // precision "mxu": inputs rounded to bf16, products summed in f32
  bool round_output = false;  // a DType::kBF16 result
};

struct NodePlan {
  NodeWork work = NodeWork::kSource;
  bool zero_output = false;  // clear the output before the launches (pad)
  std::vector<ElementLaunch> launches;
  MatMulPlan matmul;
  bool int_out = false;  // the node's value holds s32
};

// The plan of node `id` of `graph`; `mxu` is CompileOptions::precision == "mxu". Fails (naming
// the node) on a shape the element kernels cannot index (rank above element::kMaxRank).
absl::StatusOr<NodePlan> plan_node(const Graph& graph, int id, bool mxu);

// "node %12 (transpose, dense_1/t)": how gpu backend errors name a node.
std::string describe_node(const Graph& graph, int id);

}  // namespace tpusim::runtime::gpu
