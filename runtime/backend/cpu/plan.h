#pragma once
// How the cpu backend runs a graph: each node's inputs as its kernel reads them, and when each
// value can be dropped. Three kinds of node are folded into their readers instead of copied:
// - a transpose of a matmul operand's last two axes (what autodiff makes for every matmul's
//   gradients: dA = dY x B^T, dB = A^T x dY), which the product reads in place; a convolution's
//   A^T is its patches, the step's largest tensor;
// - a broadcast that binary elementwise ops alone read (a mean or a reduction's gradient spread
//   back over the reduced axes), which they read through its strides;
// - a convolution's patches that only its forward product and its kernel gradient read (with
//   the flattening and transpose autodiff puts before the latter), which those products make
//   from the image a block of rows at a time (gemm.h's LhsSource).
// A node that no output or update depends on (autodiff's gradient of a constant, such as the
// attention's 1/sqrt(d) scale) is dead and never computed, as TensorFlow runs only what a fetch
// needs and XLA removes dead code.

#include <vector>

#include "runtime/backend/cpu/kernels.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::cpu {

struct NodePlan {
  std::vector<int> inputs;  // the node's, a folded transpose's input in the transpose's place
  MatmulOperands matmul;    // kMatMul: which operands are read transposed
  BinaryOperands binary;    // binary elementwise ops: operands read through a folded broadcast
  bool folded = false;      // a node that every reader reads through: never computed
  bool dead = false;        // no output or update depends on it: never computed
};

struct ExecutionPlan {
  std::vector<NodePlan> nodes;
  // The last node that reads each value (graph.size() for outputs and updates); after it the
  // value is dropped, so a step holds only the live tensors.
  std::vector<int> last_use;
};

ExecutionPlan plan_execution(const Graph& graph);

}  // namespace tpusim::runtime::cpu
