#pragma once
// The graph IR: a DAG of primitive operations on statically shaped tensors, with variables
// (persistent state), infeed placeholders (per-step inputs), named outputs and variable updates
// (what a training step writes back). Composite operations (dense, softmax, batch norm, ...) are
// built from these primitives by runtime/graph/layers.h, so every backend and the autodiff only
// know the primitives below.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime {

enum class Op {
  // Sources.
  kConstant,    // attrs.value
  kVariable,    // attrs.name, attrs.initializer
  kInfeed,      // attrs.name: one batch per step
  kRngUniform,  // uniform [0, 1) from (attrs.seed, step, element index): counter-based
  // Elementwise, numpy broadcasting between the two inputs.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kEqual,
  kGreater,  // 1.0 where true, 0.0 where false (in the operands' float type; f32 for s32)
  kSelect,   // inputs (condition, a, b): a where condition != 0, else b
  // Elementwise unary.
  kNeg,
  kRelu,
  kTanh,
  kSigmoid,
  kExp,
  kLog,
  kRsqrt,
  kSquare,
  kErf,           // the error function (GELU's); gradient 2 / sqrt(pi) * exp(-x^2)
  kStopGradient,  // identity whose gradient is zero
  kCast,          // to attrs.to
  // Reductions over attrs.axes (removed from the shape).
  kReduceSum,
  kReduceMax,
  kArgMax,  // s32 index of the maximum along attrs.axis (removed)
  // Layout.
  kReshape,    // to the node's shape
  kTranspose,  // attrs.axes is the permutation: output dim i is input dim axes[i]
  kBroadcast,  // attrs.axes[i] is the output dim of input dim i; others are repeated
  kConcat,     // along attrs.axis
  kSlice,      // [attrs.begin, attrs.end) per dimension
  kPad,        // attrs.begin zeros before and attrs.end after, per dimension
  // Linear algebra.
  kMatMul,          // [..., M, K] x [..., K, N]: batch dims equal, or the rhs rank 2
  kExtractPatches,  // NHWC -> [N, OH, OW, KH * KW * C] (im2col), attrs.window
  kPatchesToImage,  // the adjoint of kExtractPatches: sums patches back into NHWC
  kOneHot,          // s32 labels -> f32 [..., attrs.depth]
  // Indexing (TensorFlow's embedding lookup and its gradient). An index i names row
  // clamp(i, 0, V - 1) of a [V, D] table: out of range it is clamped, as XLA's gather clamps its
  // start indices on TPU (TF's own CPU kernel would fail instead), on every backend.
  kGather,      // (table [V, D] floating, indices s32 [...]) -> [..., D]: tf.gather(table, ids)
  kScatterAdd,  // (updates [..., D], indices s32 [...]) -> [attrs.depth = V, D]: zeros, then
                // each update row added to the row its index names, in index order (row-major
                // over the indices), in f32: gather's adjoint, XLA's densified IndexedSlices
  // Collectives.
  kCrossReplicaSum,  // sum over replicas (identity on one)
};

const char* op_name(Op op);

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
