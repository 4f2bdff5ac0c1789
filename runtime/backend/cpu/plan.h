#pragma once
// How the cpu backend runs a graph: each node's inputs as its kernel reads them, and when each
// value can be dropped. A transpose of a matmul operand's last two axes (what autodiff makes for
// every matmul's gradients: dA = dY x B^T, dB = A^T x dY) is folded into the product, which
// reads the transpose's input in place, instead of being copied; a convolution's A^T is its
// patches, the step's largest tensor.

#include <vector>

#include "runtime/backend/cpu/kernels.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::cpu {

struct NodePlan {
  std::vector<int> inputs;  // the node's, a folded transpose's input in the transpose's place
  MatmulOperands matmul;    // kMatMul: which operands are read transposed
  bool folded = false;      // a transpose that every user reads through: never computed
};

struct ExecutionPlan {
  std::vector<NodePlan> nodes;
  // The last node that reads each value (graph.size() for outputs and updates); after it the
  // value is dropped, so a step holds only the live tensors.
  std::vector<int> last_use;
};

ExecutionPlan plan_execution(const Graph& graph);

}  // namespace tpusim::runtime::cpu
