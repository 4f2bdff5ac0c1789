#include "runtime/opcheck/cases.h"

#include "runtime/graph/layers.h"

namespace tpusim::runtime::opcheck {
namespace {

using Build = std::function<Value(GraphBuilder&, const std::vector<Value>&)>;

OpCase unary_case(const std::string& op, Op kind, float low = -2, float high = 2) {
  return OpCase{
      op,
      "[6, 33]",
      {{"x", DType::kF32, {6, 33}, low, high}},
      [kind](GraphBuilder& b, const std::vector<Value>& in) { return b.unary(kind, in[0]); }};
}

OpCase binary_case(const std::string& op, Op kind, Shape a, Shape c, float low = -2,
                   float high = 2) {
  const std::string shape = a.str() + " " + c.str();
  return OpCase{op,
                shape,
                {{"a", DType::kF32, a, low, high}, {"b", DType::kF32, c, low, high}},
                [kind](GraphBuilder& b, const std::vector<Value>& in) {
                  return b.binary(kind, in[0], in[1]);
                }};
}

// Elementwise, with numpy broadcasting.
std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> cases;
  cases.push_back(binary_case("add", Op::kAdd, {4, 9}, {4, 9}));
  cases.push_back(binary_case("add", Op::kAdd, {3, 4, 9}, {9}));
  cases.push_back(binary_case("sub", Op::kSub, {4, 9}, {4, 1}));
  cases.push_back(binary_case("mul", Op::kMul, {4, 9}, {1, 9}));
  cases.push_back(binary_case("div", Op::kDiv, {4, 9}, {4, 9}, 0.5f, 2.0f));
  cases.push_back(binary_case("max", Op::kMax, {5, 7}, {5, 7}));
  cases.push_back(binary_case("min", Op::kMin, {5, 7}, {7}));
  cases.push_back(unary_case("neg", Op::kNeg));
  cases.push_back(unary_case("relu", Op::kRelu));
  cases.push_back(unary_case("tanh", Op::kTanh));
  cases.push_back(unary_case("sigmoid", Op::kSigmoid));
  cases.push_back(unary_case("exp", Op::kExp));
  cases.push_back(unary_case("log", Op::kLog, 0.2f, 3.0f));
  cases.push_back(unary_case("rsqrt", Op::kRsqrt, 0.2f, 3.0f));
  cases.push_back(unary_case("square", Op::kSquare));
  // Both tails and the steep middle of erf (GELU's x / sqrt(2) lies here).
  cases.push_back(unary_case("erf", Op::kErf, -3.5f, 3.5f));
  cases.push_back(
      {"select",
       "[5, 6]",
       {{"c", DType::kF32, {5, 6}, -1, 1}, {"a", DType::kF32, {5, 6}}, {"b", DType::kF32, {5, 6}}},
       [](GraphBuilder& b, const std::vector<Value>& in) {
         return b.select(b.binary(Op::kGreater, in[0], b.broadcast(b.scalar(0), {5, 6}, {})), in[1],
                         in[2]);
       }});
  return cases;
}

// Reductions.
std::vector<OpCase> reduction_cases() {
  std::vector<OpCase> cases;
  cases.push_back({"reduce_sum",
                   "[4, 5, 6] axes 0,2",
                   {{"x", DType::kF32, {4, 5, 6}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.reduce(Op::kReduceSum, in[0], {0, 2});
                   },
                   true,
                   24});
  cases.push_back(
      {"reduce_mean",
       "[4, 5, 6] axis 1",
       {{"x", DType::kF32, {4, 5, 6}}},
       [](GraphBuilder&, const std::vector<Value>& in) { return layers::reduce_mean(in[0], {1}); },
       true,
       5});
  cases.push_back({"reduce_max",
                   "[4, 37] axis 1",
                   {{"x", DType::kF32, {4, 37}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.reduce(Op::kReduceMax, in[0], {1});
                   }});
  return cases;
}

// Layout: reshape, transpose, broadcast, concat, slice, pad.
std::vector<OpCase> layout_cases() {
  std::vector<OpCase> cases;
  cases.push_back({"reshape",
                   "[4, 6] -> [2, 12]",
                   {{"x", DType::kF32, {4, 6}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.reshape(in[0], {2, 12});
                   }});
  cases.push_back({"transpose",
                   "[2, 3, 4] perm 2,0,1",
                   {{"x", DType::kF32, {2, 3, 4}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.transpose(in[0], {2, 0, 1});
                   }});
  cases.push_back({"transpose",
                   "[2, 3, 4, 5] perm 0,2,1,3",
                   {{"x", DType::kF32, {2, 3, 4, 5}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.transpose(in[0], {0, 2, 1, 3});
                   }});
  cases.push_back({"transpose",
                   "[2, 3, 4, 5] perm 3,1,0,2",
                   {{"x", DType::kF32, {2, 3, 4, 5}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.transpose(in[0], {3, 1, 0, 2});
                   }});
  cases.push_back({"broadcast",
                   "[3, 1] -> [2, 3, 4]",
                   {{"x", DType::kF32, {3, 1}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.broadcast(in[0], {2, 3, 4}, {1, 2});
                   }});
  cases.push_back({"concat",
                   "[2, 3] [2, 5] axis 1",
                   {{"a", DType::kF32, {2, 3}}, {"b", DType::kF32, {2, 5}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.concat({in[0], in[1]}, 1);
                   }});
  cases.push_back({"slice",
                   "[5, 8] [1:4, 2:7]",
                   {{"x", DType::kF32, {5, 8}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.slice(in[0], {1, 2}, {4, 7});
                   }});
  cases.push_back({"pad",
                   "[3, 4] +(1,2),(0,3)",
                   {{"x", DType::kF32, {3, 4}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.pad(in[0], {1, 0}, {2, 3});
                   }});
  return cases;
}

// Linear algebra: matmuls, plain, batched and a weight gradient's.
std::vector<OpCase> matmul_cases() {
  std::vector<OpCase> cases;
  cases.push_back(
      {"matmul",
       "[33, 70] x [70, 19]",
       {{"a", DType::kF32, {33, 70}}, {"b", DType::kF32, {70, 19}}},
       [](GraphBuilder& b, const std::vector<Value>& in) { return b.matmul(in[0], in[1]); },
       true,
       70,
       true});
  cases.push_back(
      {"matmul",
       "[2, 16, 130] x [2, 130, 9] batched",
       {{"a", DType::kF32, {2, 16, 130}}, {"b", DType::kF32, {2, 130, 9}}},
       [](GraphBuilder& b, const std::vector<Value>& in) { return b.matmul(in[0], in[1]); },
       true,
       130,
       true});
  // A weight gradient's shape: tpusim computes it as (b^T a)^T without transposing a.
  cases.push_back({"matmul",
                   "transpose([150, 40]) x [150, 12]",
                   {{"a", DType::kF32, {150, 40}}, {"b", DType::kF32, {150, 12}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.matmul(b.transpose(in[0], {1, 0}), in[1]);
                   },
                   true,
                   150,
                   true});
  return cases;
}

// Convolutions and pools.
std::vector<OpCase> conv_pool_cases() {
  std::vector<OpCase> cases;
  cases.push_back({"conv2d",
                   "[2, 9, 9, 3] k3 s1 SAME f5",
                   {{"x", DType::kF32, {2, 9, 9, 3}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::conv2d(b, in[0], 5, 3, 1, layers::Padding::kSame,
                                           layers::Activation::kNone, 7);
                   },
                   true,
                   27,
                   true});
  cases.push_back({"conv2d",
                   "[2, 10, 10, 4] k5 s2 VALID f6",
                   {{"x", DType::kF32, {2, 10, 10, 4}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::conv2d(b, in[0], 6, 5, 2, layers::Padding::kValid,
                                           layers::Activation::kNone, 3);
                   },
                   true,
                   100,
                   true});
  cases.push_back({"max_pool",
                   "[2, 8, 8, 3] 2x2 s2",
                   {{"x", DType::kF32, {2, 8, 8, 3}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::max_pooling2d(b, in[0], 2, 2);
                   }});
  cases.push_back({"max_pool",
                   "[1, 7, 7, 2] 3x3 s2 SAME",
                   {{"x", DType::kF32, {1, 7, 7, 2}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::max_pooling2d(b, in[0], 3, 2, layers::Padding::kSame);
                   }});
  cases.push_back({"avg_pool",
                   "[2, 6, 6, 3] 3x3 s1 SAME",
                   {{"x", DType::kF32, {2, 6, 6, 3}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::average_pooling2d(b, in[0], 3, 1, layers::Padding::kSame);
                   },
                   true,
                   9});
  return cases;
}

// Composites: softmax, cross entropy, batch norm, dense.
std::vector<OpCase> composite_cases() {
  std::vector<OpCase> cases;
  cases.push_back(
      {"softmax",
       "[4, 10]",
       {{"x", DType::kF32, {4, 10}, -3, 3}},
       [](GraphBuilder&, const std::vector<Value>& in) { return layers::softmax(in[0]); },
       true,
       10});
  cases.push_back(
      {"log_softmax",
       "[4, 10]",
       {{"x", DType::kF32, {4, 10}, -3, 3}},
       [](GraphBuilder&, const std::vector<Value>& in) { return layers::log_softmax(in[0]); },
       true,
       10});
  cases.push_back({"sparse_softmax_cross_entropy",
                   "[6] labels, [6, 10] logits",
                   {{"labels", DType::kS32, {6}, 0, 10}, {"logits", DType::kF32, {6, 10}, -3, 3}},
                   [](GraphBuilder&, const std::vector<Value>& in) {
                     return layers::sparse_softmax_cross_entropy(in[0], in[1]);
                   },
                   true,
                   10});
  cases.push_back({"batch_norm",
                   "[8, 5] training",
                   {{"x", DType::kF32, {8, 5}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::batch_normalization(b, in[0], true);
                   },
                   true,
                   8});
  cases.push_back({"dense",
                   "[7, 20] -> 11 relu",
                   {{"x", DType::kF32, {7, 20}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::dense(b, in[0], 11, layers::Activation::kRelu, 5);
                   },
                   true,
                   20,
                   true});
  return cases;
}

// Not differentiable.
std::vector<OpCase> non_differentiable_cases() {
  std::vector<OpCase> cases;
  cases.push_back(
      {"one_hot",
       "[7] depth 5",
       {{"labels", DType::kS32, {7}, 0, 5}},
       [](GraphBuilder& b, const std::vector<Value>& in) { return b.one_hot(in[0], 5); },
       false});
  cases.push_back({"argmax",
                   "[6, 9] axis 1",
                   {{"x", DType::kF32, {6, 9}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.cast(b.argmax(in[0], 1), DType::kF32);
                   },
                   false});
  cases.push_back({"argmax",
                   "[6, 9, 4] axis 1",
                   {{"x", DType::kF32, {6, 9, 4}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.cast(b.argmax(in[0], 1), DType::kF32);
                   },
                   false});
  cases.push_back({"equal",
                   "[4, 6]",
                   {{"a", DType::kS32, {4, 6}, 0, 3}, {"b", DType::kS32, {4, 6}, 0, 3}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.binary(Op::kEqual, in[0], in[1]);
                   },
                   false});
  cases.push_back({"cast",
                   "f32 [5, 5] -> bf16",
                   {{"x", DType::kF32, {5, 5}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return b.cast(b.cast(in[0], DType::kBF16), DType::kF32);
                   },
                   false});
  cases.push_back({"dropout",
                   "[16, 16] rate 0.4",
                   {{"x", DType::kF32, {16, 16}}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::dropout(b, in[0], 0.4f, true, 11);
                   }});
  return cases;
}

}  // namespace

std::vector<OpCase> all_cases() {
  std::vector<OpCase> cases;
  for (auto family : {elementwise_cases, reduction_cases, layout_cases, matmul_cases,
                      conv_pool_cases, composite_cases, non_differentiable_cases, bf16_cases,
                      bert_cases}) {
    for (OpCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace tpusim::runtime::opcheck
