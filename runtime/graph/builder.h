#pragma once
// Builds graphs with shape inference. Like XLA's XlaBuilder, errors are sticky: the first
// ill-shaped operation records a message naming the op, its label and the shapes, every later
// operation on an invalid value yields an invalid value, and status() reports the first error.
// Model code therefore reads straight, and checks once:
//
//   GraphBuilder b;
//   Value x = b.infeed("image", DType::kF32, {128, 784});
//   Value logits = layers::dense(b, x, 10);
//   if (!b.status().ok()) ...
//
// Nodes join the graph in the order they are made, and that order is the program's (tpusim's
// compiler schedules in node order): it must not depend on the compiler. C++ leaves the order of
// a call's arguments and of an operator's operands open (g++ makes `f(x) * g(y)`'s right
// operand first, clang its left), so where two operands both make nodes, model code makes them
// in separate statements, the right one first where the order was g++'s
// (tests/runtime/graph_order_test.cc pins each zoo model's order, and runs under clang in CI).

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <absl/status/status.h>

#include "runtime/graph/graph.h"

namespace tpusim::runtime {

class GraphBuilder;

// Thrown by Value::shape() and dtype() on an invalid value: code that reads an operation's
// result without checking it (an importer reading what a hostile file made, which the builder
// refused) gets an error to catch instead of a null builder. The builder's status() says why.
class InvalidValueError : public std::logic_error {
 public:
  InvalidValueError() : std::logic_error("the shape of a value the graph builder refused") {}
};

// A handle to a node of the builder's graph.
struct Value {
  int id = -1;
  GraphBuilder* builder = nullptr;
  bool valid() const { return id >= 0 && builder != nullptr; }
  // By value: adding nodes may move the graph's storage, so no reference into it is kept.
  // Both throw InvalidValueError when !valid().
  Shape shape() const;
  DType dtype() const;
};

class GraphBuilder {
 public:
  GraphBuilder() = default;
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  const Graph& graph() const { return graph_; }
  Graph& mutable_graph() { return graph_; }
  const absl::Status& status() const { return status_; }
  const Node& node(Value v) const { return graph_.node(v.id); }

  // Labels of new nodes start with the scopes pushed ("dense_1/"); Scope pops on destruction.
  class Scope {
   public:
    Scope(GraphBuilder& b, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GraphBuilder& b_;
  };
  // TensorFlow's tf.compat.v1.tpu.bfloat16_scope: while one is open, variable() asked for a bf16
  // variable makes an f32 one (what the optimizer updates and checkpoints hold, so they keep
  // full precision) and returns its value cast to bf16, as the scope's custom getter does.
  class BFloat16Scope {
   public:
    explicit BFloat16Scope(GraphBuilder& b) : b_(b) { ++b_.bfloat16_scopes_; }
    ~BFloat16Scope() { --b_.bfloat16_scopes_; }
    BFloat16Scope(const BFloat16Scope&) = delete;
    BFloat16Scope& operator=(const BFloat16Scope&) = delete;

   private:
    GraphBuilder& b_;
  };
  bool in_bfloat16_scope() const { return bfloat16_scopes_ > 0; }

  // "dense" -> "dense_1", "dense_2", ...: a fresh scope name per call.
  std::string unique_name(const std::string& base);

  Value constant(HostTensor value);
  Value scalar(float value);
  Value variable(const std::string& name, DType dtype, const Shape& shape, Initializer init);
  Value infeed(const std::string& name, DType dtype, const Shape& shape);
  Value rng_uniform(const Shape& shape, uint64_t seed);

  Value binary(Op op, Value a, Value b);
  Value unary(Op op, Value a);
  Value select(Value condition, Value a, Value b);
  Value cast(Value a, DType to);

  Value reduce(Op op, Value a, std::vector<int64_t> axes);
  Value argmax(Value a, int64_t axis);
  Value reshape(Value a, const Shape& shape);
  Value transpose(Value a, std::vector<int64_t> permutation);
  // `dims[i]` is the output dimension input dimension i becomes.
  Value broadcast(Value a, const Shape& shape, std::vector<int64_t> dims);
  // numpy rules: trailing dimensions line up; 1 stretches.
  Value broadcast_to(Value a, const Shape& shape);
  Value concat(const std::vector<Value>& parts, int64_t axis);
  Value slice(Value a, std::vector<int64_t> begin, std::vector<int64_t> end);
  Value pad(Value a, std::vector<int64_t> before, std::vector<int64_t> after);
  Value matmul(Value a, Value b);
  Value extract_patches(Value image, Window window);
  Value patches_to_image(Value patches, const Window& window);
  Value one_hot(Value labels, int64_t depth);
  // tf.gather(table, indices, axis=0): table [V, D] (f32 or bf16), indices s32 [...] ->
  // [..., D]; out-of-range indices clamp (graph.h, kGather). builder_index.cc.
  Value gather(Value table, Value indices);
  // Gather's adjoint: updates [..., D] summed into a zero [rows, D] at the rows `indices` [...]
  // names (clamped), in index order (graph.h, kScatterAdd).
  Value scatter_add(Value updates, Value indices, int64_t rows);
  Value cross_replica_sum(Value a);

  void output(const std::string& name, Value v);
  // After each step, `variable` takes `value`.
  void update(Value variable, Value value);

  // Records an error (the first one sticks) and returns an invalid value.
  Value fail(Op op, const std::string& message);

  // A TensorFlow op the graph builds from several primitives (as XLA lowers it) whose gradient
  // TensorFlow registers for the op as a whole: autodiff applies that rule from `output` straight
  // to the op's `inputs` instead of differentiating the primitives, so the backward pass reads
  // what TensorFlow's gradient reads and none of the primitives' intermediate values are kept
  // for it.
  // - kSoftmax: inputs {logits}; _SoftmaxGrad reads only the output.
  // - kBatchNorm: inputs {x, gamma, beta}, saved {batch mean, batch variance} (over every axis but
  //   the last), epsilon: FusedBatchNormGrad in training, as XLA's BatchNormGrad expands it.
  enum class CompositeGradient { kSoftmax, kBatchNorm };
  struct Composite {
    CompositeGradient kind;
    std::vector<int> inputs;  // gradients flow to these, in the rule's order
    std::vector<int> saved;   // further values the rule reads
    float epsilon = 0;
  };
  void set_composite_gradient(Value output, CompositeGradient kind,
                              const std::vector<Value>& inputs,
                              const std::vector<Value>& saved = {}, float epsilon = 0);
  // The rule recorded for node `id`, or null.
  const Composite* composite_gradient(int id) const;

 private:
  Value add(Op op, std::vector<Value> inputs, DType dtype, Shape shape, Attrs attrs = {});
  bool usable(std::initializer_list<Value> values) const;
  std::string label_for(Op op) const;

  Graph graph_;
  absl::Status status_;
  std::vector<std::string> scopes_;
  std::vector<std::pair<std::string, int>> name_counts_;
  int bfloat16_scopes_ = 0;
  std::map<int, Composite> composites_;  // by output node
};

// Derives a window's padding and output size for an NHWC image; false (with `error`) when the
// window does not fit.
bool resolve_window(const Shape& image, Window* window, int64_t* out_h, int64_t* out_w,
                    std::string* error);

// Arithmetic on values: broadcasting binary ops and scalars.
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator-(Value a);
Value operator+(Value a, float s);
Value operator*(Value a, float s);
Value operator-(float s, Value a);

}  // namespace tpusim::runtime
