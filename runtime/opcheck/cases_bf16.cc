#include "runtime/opcheck/cases.h"

#include <utility>

#include "runtime/graph/layers.h"

namespace tpusim::runtime::opcheck {
namespace {

// A case computed in bf16, as a model under mixed_bfloat16 computes (tf.tpu.bfloat16_scope): the
// f32 inputs cast to bf16, variables stored in f32 and read as bf16, the output a bf16 value.
// Every op of a bf16 node rounds its result to bf16, so the output must hold only bf16 values
// (the harness checks), and the gradients flow back through bf16 to the f32 inputs and variables.
OpCase bf16_case(const std::string& op, const std::string& shape, Shape in_shape,
                 std::function<Value(GraphBuilder&, Value)> body, int64_t reduction_length,
                 bool uses_matmul) {
  OpCase c;
  c.op = op + " bf16";
  c.shape = shape;
  c.inputs = {{"x", DType::kF32, std::move(in_shape)}};
  c.build = [body](GraphBuilder& b, const std::vector<Value>& in) {
    GraphBuilder::BFloat16Scope scope(b);
    return body(b, b.cast(in[0], DType::kBF16));
  };
  c.reduction_length = reduction_length;
  c.uses_matmul = uses_matmul;
  c.bf16 = true;
  return c;
}

// A 3 x 3 window at stride 1 with SAME padding (over `image`, for patches_to_image).
Window same_3x3(Shape image = {}) {
  Window w;
  w.kh = w.kw = 3;
  w.same = true;
  w.image = std::move(image);
  return w;
}

}  // namespace

std::vector<OpCase> bf16_cases() {
  using layers::Activation;
  using layers::Padding;
  std::vector<OpCase> cases;
  cases.push_back(bf16_case(
      "dense", "[7, 40] -> 11 relu", {7, 40},
      [](GraphBuilder& b, Value x) { return layers::dense(b, x, 11, Activation::kRelu, 5); }, 40,
      true));
  cases.push_back(bf16_case(
      "conv2d", "[2, 9, 9, 3] k3 s1 SAME f5 relu", {2, 9, 9, 3},
      [](GraphBuilder& b, Value x) {
        return layers::conv2d(b, x, 5, 3, 1, Padding::kSame, Activation::kRelu, 7);
      },
      27, true));
  cases.push_back(bf16_case(
      "max_pool", "[2, 8, 8, 3] 2x2 s2", {2, 8, 8, 3},
      [](GraphBuilder& b, Value x) { return layers::max_pooling2d(b, x, 2, 2); }, 1, false));
  cases.push_back(bf16_case(
      "reduce_mean", "[3, 6, 6, 4] axes 1, 2", {3, 6, 6, 4},
      [](GraphBuilder&, Value x) {
        return layers::reduce_mean(x, {1, 2});
      },
      36, false));
  // Bare ops, so that each one's own rounding shows (in a layer the next op's would hide it). A
  // bare convolution (im2col and a matmul, no bias): the tpusim compiler fuses it, and its input
  // and kernel gradients, into convolution fragments.
  cases.push_back(bf16_case(
      "conv2d_bare", "[2, 9, 9, 3] k3 s1 SAME f5", {2, 9, 9, 3},
      [](GraphBuilder& b, Value x) {
        const Value kernel = b.variable("kernel", DType::kBF16, {27, 5},
                                        Initializer{InitKind::kGlorotUniform, 0, 1, 9});
        return b.matmul(b.extract_patches(x, same_3x3()), kernel);
      },
      27, true));
  cases.push_back(bf16_case(
      "matmul", "[12, 40] x [40, 9]", {12, 40},
      [](GraphBuilder& b, Value x) {
        return b.matmul(x, b.variable("w", DType::kBF16, {40, 9},
                                      Initializer{InitKind::kGlorotUniform, 0, 1, 3}));
      },
      40, true));
  cases.push_back(bf16_case(
      "reduce_sum", "[5, 6, 7] axes 0, 2", {5, 6, 7},
      [](GraphBuilder& b, Value x) {
        return b.reduce(Op::kReduceSum, x, {0, 2});
      },
      35, false));
  cases.push_back(bf16_case(
      "patches_to_image", "[2, 7, 7, 3] k3 s1 SAME", {2, 7, 7, 27},
      [](GraphBuilder& b, Value x) { return b.patches_to_image(x, same_3x3({2, 7, 7, 3})); },
      9, false));
  cases.push_back(bf16_case(
      "batch_matmul", "[3, 5, 8] x [3, 8, 5]^T", {3, 5, 8},
      [](GraphBuilder& b, Value x) {
        return b.matmul(x, b.transpose(x, {0, 2, 1}));
      },
      8, true));
  cases.push_back(bf16_case(
      "softmax", "[6, 10] (in f32)", {6, 10},
      [](GraphBuilder&, Value x) { return layers::softmax(x * 3.0f); }, 10, false));
  cases.push_back(bf16_case(
      "batch_norm", "[8, 5] training (in f32)", {8, 5},
      [](GraphBuilder& b, Value x) { return layers::batch_normalization(b, x, true); }, 8, false));
  cases.back().f32_variables = true;
  return cases;
}

}  // namespace tpusim::runtime::opcheck
