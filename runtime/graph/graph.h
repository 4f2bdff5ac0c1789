#pragma once
// The graph IR: a DAG of primitive operations on statically shaped tensors, with variables
// (persistent state), infeed placeholders (per-step inputs), named outputs and variable updates
// (what a training step writes back). Composite operations (dense, softmax, batch norm, ...) are
// built from these primitives by runtime/graph/layers.h, so every backend and the autodiff only
// know the primitives below.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph/op_list.h"
#include "runtime/graph/tensor.h"

namespace tpusim::runtime {

// What kind of operation an op is: which backends' shared code takes it.
enum class OpClass {
  kSource,            // constant, variable, infeed, random numbers
  kBinary,            // elementwise, numpy broadcasting between the two inputs
  kUnary,             // elementwise, one input
  kOtherElementwise,  // elementwise with inputs of their own kind: select, cast
  kIdentity,          // the value unchanged (stop_gradient)
  kReduction,
  kLayout,
  kLinearAlgebra,
  kIndexing,
  kCollective,
};

// The ops, in runtime/graph/op_list.h's order.
enum class Op {
#define TPUSIM_OP_ENUMERATOR(op, name, op_class) op,
  TPUSIM_GRAPH_OPS(TPUSIM_OP_ENUMERATOR)
#undef TPUSIM_OP_ENUMERATOR
};

// One op's row of op_list.h.
struct OpInfo {
  Op op;
  const char* name;  // as dumps, errors and the per-op report write it
  OpClass op_class;
};
// Every op, in enum order (op_table()[i].op == Op(i)).
const std::vector<OpInfo>& op_table();

const char* op_name(Op op);
OpClass op_class(Op op);

// Op classes shared by the backends: binary elementwise ops (with numpy broadcasting), unary
// elementwise ops, and all elementwise ops (those two plus select and cast).
bool is_binary_elementwise(Op op);
bool is_unary_elementwise(Op op);
bool is_elementwise(Op op);

enum class InitKind {
  kZeros,
  kConstant,
  kGlorotUniform,
  kGlorotNormal,
  kHeUniform,
  kHeNormal,
  kTruncatedNormal
};

struct Initializer {
  InitKind kind = InitKind::kZeros;
  float value = 0;   // kConstant
  float stddev = 1;  // kTruncatedNormal
  uint64_t seed = 0;
};

// A 2D window over NHWC images. Padding is SAME, VALID or explicit (XLA's convolution padding,
// as TensorFlow's ResNet v1.5 `fixed_padding` makes it: zeros before and after each side, set
// here and independent of the image size).
struct Window {
  int64_t kh = 1, kw = 1;                 // window size
  int64_t sh = 1, sw = 1;                 // strides
  bool same = false;                      // SAME padding (else VALID, or explicit)
  bool explicit_padding = false;          // pad_* below are given, not derived
  int64_t pad_top = 0, pad_left = 0;      // derived for SAME and VALID
  int64_t pad_bottom = 0, pad_right = 0;  // explicit padding only
  Shape image;                            // the NHWC input (kPatchesToImage's output)
};

struct Attrs {
  std::vector<int64_t> axes;
  std::vector<int64_t> begin;
  std::vector<int64_t> end;
  int64_t axis = 0;
  int64_t depth = 0;
  Window window;
  HostTensor value;
  std::string name;
  Initializer initializer;
  uint64_t seed = 0;
  DType to = DType::kF32;
};

struct Node {
  Op op = Op::kConstant;
  std::vector<int> inputs;
  DType dtype = DType::kF32;
  Shape shape;
  Attrs attrs;
  std::string label;  // what errors and dumps call it: "dense_1/matmul"
};

struct NamedValue {
  std::string name;
  int node = -1;
};

struct VariableUpdate {
  int variable = -1;  // a kVariable node
  int value = -1;     // its value after the step
};

class Graph {
 public:
  int add(Node node);
  const Node& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  Node& mutable_node(int id) { return nodes_[static_cast<size_t>(id)]; }
  int size() const { return static_cast<int>(nodes_.size()); }
  const std::vector<Node>& nodes() const { return nodes_; }

  void add_output(std::string name, int node) { outputs_.push_back({std::move(name), node}); }
  void add_update(int variable, int value) { updates_.push_back({variable, value}); }
  const std::vector<NamedValue>& outputs() const { return outputs_; }
  const std::vector<VariableUpdate>& updates() const { return updates_; }
  // kVariable / kInfeed nodes in creation order.
  std::vector<int> variables() const;
  std::vector<int> infeeds() const;
  // The variable node named `name`, or -1.
  int find_variable(const std::string& name) const;

  // One line per node: "%12 = add(%10, %11) : f32[128, 10]  # dense_1/bias_add".
  std::string dump() const;

 private:
  std::vector<Node> nodes_;
  std::vector<NamedValue> outputs_;
  std::vector<VariableUpdate> updates_;
};

// Per node, whether some output or update depends on it. A node that none does (autodiff's
// gradient of a constant, such as attention's 1/sqrt(d) scale, or of the input images) is dead:
// an interpreting backend does not compute it, as TensorFlow runs only what a fetch needs and
// XLA removes dead code.
std::vector<bool> live_nodes(const Graph& graph);

// Whether a variable is one the model updates itself rather than by gradients: batch norm's
// moving averages, which layers::batch_normalization names "*/moving_mean" and
// "*/moving_variance".
bool is_statistic(const std::string& variable_name);

// A graph's static size: the elements of its variables (all of them, and those a training step
// updates with gradients, i.e. not batch-norm statistics: is_statistic), and the
// FLOPs of its matrix products (2 per multiply-accumulate of every matmul, convolutions
// included: they are im2col patches times the kernel). What papers quote as a model's size.
struct GraphSize {
  int64_t parameters = 0;
  int64_t trainable_parameters = 0;
  double matmul_flops = 0;
};
GraphSize graph_size(const Graph& graph);

}  // namespace tpusim::runtime
