// Shape inference and the builder's errors: each names the op, its label and the shapes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/graph/layers.h"
#include "tests/runtime/builder_error.h"

namespace tpusim::runtime {
namespace graph_builder_test {

using testing::bad_graph_name;
using testing::BadGraph;
using testing::BuilderError;
using ::testing::HasSubstr;
using testing::in;

TEST(GraphBuilder, InfersShapes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 28, 28, 1});
  const Value c = layers::conv2d(b, x, 32, 5);
  EXPECT_EQ(c.shape(), (Shape{8, 28, 28, 32}));
  const Value p = layers::max_pooling2d(b, c, 2, 2);
  EXPECT_EQ(p.shape(), (Shape{8, 14, 14, 32}));
  const Value v = layers::conv2d(b, p, 8, 3, 2, layers::Padding::kValid);
  EXPECT_EQ(v.shape(), (Shape{8, 6, 6, 8}));
  const Value d = layers::dense(b, b.reshape(v, {8, 288}), 10);
  EXPECT_EQ(d.shape(), (Shape{8, 10}));
  EXPECT_EQ(b.reduce(Op::kReduceSum, d, {0}).shape(), (Shape{10}));
  EXPECT_EQ(b.argmax(d, 1).dtype(), DType::kS32);
  EXPECT_EQ((d + b.variable("bias", DType::kF32, {10}, {})).shape(), (Shape{8, 10}));
  EXPECT_EQ(b.transpose(d, {1, 0}).shape(), (Shape{10, 8}));
  EXPECT_EQ(b.concat({d, d}, 0).shape(), (Shape{16, 10}));
  EXPECT_EQ(b.pad(d, {1, 0}, {0, 2}).shape(), (Shape{9, 12}));
  EXPECT_TRUE(b.status().ok()) << b.status();
  // Variables get scoped, unique names.
  EXPECT_GE(b.graph().find_variable("conv2d_1/kernel"), 0);
  EXPECT_GE(b.graph().find_variable("conv2d_2/kernel"), 0);
  EXPECT_GE(b.graph().find_variable("dense_1/bias"), 0);
}

TEST_P(BuilderError, NamesOpLabelAndShapes) {
  GraphBuilder b;
  GetParam().build(b);
  ASSERT_FALSE(b.status().ok()) << GetParam().name;
  EXPECT_THAT(std::string(b.status().message()), HasSubstr(GetParam().expect));
}

const BadGraph kBad[] = {
    {"MatmulInner",
     [](GraphBuilder& b) {
       b.matmul(in(b, "a", {128, 784}), in(b, "w", {100, 10}));
     },
     "matmul 'matmul': inner dimensions differ: f32[128, 784] and f32[100, 10]"},
    {"MatmulRank",
     [](GraphBuilder& b) {
       b.matmul(in(b, "a", {4}), in(b, "w", {4, 2}));
     },
     "needs [..., M, K] x [..., K, N]"},
    {"Broadcast",
     [](GraphBuilder& b) {
       b.binary(Op::kAdd, in(b, "a", {4, 3}), in(b, "b", {4}));
     },
     "add 'add': shapes do not broadcast: f32[4, 3] and f32[4]"},
    {"MixedTypes",
     [](GraphBuilder& b) { b.binary(Op::kMul, in(b, "a", {4}), in(b, "b", {4}, DType::kBF16)); },
     "operand types differ: f32[4] and bf16[4]"},
    {"IntegerArithmetic",
     [](GraphBuilder& b) {
       b.binary(Op::kAdd, in(b, "a", {4}, DType::kS32), in(b, "b", {4}, DType::kS32));
     },
     "needs floating operands"},
    {"Reshape",
     [](GraphBuilder& b) {
       b.reshape(in(b, "a", {4, 6}), {5, 5});
     },
     "reshape 'reshape': cannot reshape f32[4, 6] (24 elements) to [5, 5] (25 elements)"},
    {"ReduceAxes",
     [](GraphBuilder& b) {
       b.reduce(Op::kReduceSum, in(b, "a", {4, 6}), {0, 0});
     },
     "axes [0, 0] are not distinct axes of f32[4, 6]"},
    {"Transpose",
     [](GraphBuilder& b) {
       b.transpose(in(b, "a", {4, 6}), {0, 2});
     },
     "is not a permutation"},
    {"Slice",
     [](GraphBuilder& b) {
       b.slice(in(b, "a", {4, 6}), {0, 5}, {2, 9});
     },
     "[0, 5] to [2, 9) is not a non-empty range"},
    {"Concat",
     [](GraphBuilder& b) {
       b.concat({in(b, "a", {4, 6}), in(b, "b", {3, 5})}, 0);
     },
     "differ off axis 0"},
    {"ConvInput",
     [](GraphBuilder& b) {
       layers::conv2d(b, in(b, "x", {8, 28, 28}), 4, 3);
     },
     "conv2d needs an NHWC input"},
    {"ValidWindowTooBig",
     [](GraphBuilder& b) {
       layers::max_pooling2d(b, in(b, "x", {1, 2, 2, 1}), 3, 1);
     },
     "a 3x3 VALID window does not fit the 2x2 image"},
    {"OneHotNeedsInts", [](GraphBuilder& b) { b.one_hot(in(b, "l", {4}), 10); },
     "needs s32 labels, got f32[4]"},
    {"CrossReplicaSumOfBf16",
     [](GraphBuilder& b) { b.cross_replica_sum(in(b, "g", {4}, DType::kBF16)); },
     "cross_replica_sum 'cross_replica_sum': sums f32 values only (cast to f32 first), got "
     "bf16[4]"},
    {"XentShapes",
     [](GraphBuilder& b) {
       layers::sparse_softmax_cross_entropy(in(b, "l", {4}, DType::kS32), in(b, "x", {5, 10}));
     },
     "needs labels [N] and logits [N, classes], got [4] and [5, 10]"},
    {"DuplicateVariable",
     [](GraphBuilder& b) {
       b.variable("w", DType::kF32, {2}, {});
       b.variable("w", DType::kF32, {2}, {});
     },
     "a variable named 'w' exists already"},
    {"UpdateShape",
     [](GraphBuilder& b) { b.update(b.variable("w", DType::kF32, {2}, {}), in(b, "x", {3})); },
     "update of 'w': value f32[3] does not match the variable f32[2]"},
    {"ScopedLabel",
     [](GraphBuilder& b) {
       layers::dense(b, in(b, "x", {4, 3, 2}), 5) + in(b, "y", {7});
     },
     "add 'add': shapes do not broadcast: f32[4, 3, 5] and f32[7]"},
};

INSTANTIATE_TEST_SUITE_P(Every, BuilderError, ::testing::ValuesIn(kBad), bad_graph_name);

TEST(GraphBuilder, FirstErrorSticksAndLaterOpsYieldInvalidValues) {
  GraphBuilder b;
  const Value bad = b.matmul(in(b, "a", {2, 3}), in(b, "w", {4, 5}));
  EXPECT_FALSE(bad.valid());
  const Value later = b.reshape(in(b, "c", {6}), {7});  // would fail too, but the first error stays
  EXPECT_FALSE(later.valid());
  EXPECT_FALSE((bad + bad).valid());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("inner dimensions differ"));
}

// Reading an invalid value's shape or dtype throws (an importer catches it and reports the
// builder's error) instead of following a null builder.
TEST(GraphBuilder, AnInvalidValuesShapeThrowsAndTheStatusSaysWhy) {
  GraphBuilder b;
  const Value bad = b.reshape(in(b, "x", {6}), {7});
  EXPECT_THROW((void)bad.shape(), InvalidValueError);
  EXPECT_THROW((void)bad.dtype(), InvalidValueError);
  EXPECT_THROW((void)Value{}.shape(), InvalidValueError);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("reshape"));
}

TEST(GraphBuilder, LabelsCarryScopes) {
  GraphBuilder b;
  layers::dense(b, in(b, "x", {2, 3}), 4);
  bool found = false;
  for (const Node& n : b.graph().nodes()) found |= n.label == "dense_1/matmul";
  EXPECT_TRUE(found) << b.graph().dump();
  EXPECT_THAT(b.graph().dump(), HasSubstr("= matmul(%0, %1) : f32[2, 4]  # dense_1/matmul"));
}

// tf.tpu.bfloat16_scope: inside, a bf16 variable is stored in f32 and read through a cast to bf16;
// outside, a bf16 variable is one. Comparisons of floats keep their type, so a mask multiplies
// bf16 values with no cast.
TEST(GraphBuilder, Bfloat16ScopeStoresVariablesInF32AndReadsThemAsBf16) {
  GraphBuilder b;
  Value read;
  {
    GraphBuilder::BFloat16Scope scope(b);
    EXPECT_TRUE(b.in_bfloat16_scope());
    read = b.variable("w", DType::kBF16, {3, 4}, {});
  }
  EXPECT_FALSE(b.in_bfloat16_scope());
  EXPECT_EQ(read.dtype(), DType::kBF16);
  EXPECT_EQ(b.node(read).op, Op::kCast);
  const Node& stored = b.graph().node(b.node(read).inputs[0]);
  EXPECT_EQ(stored.op, Op::kVariable);
  EXPECT_EQ(stored.dtype, DType::kF32);
  EXPECT_EQ(b.graph().node(b.graph().find_variable("w")).dtype, DType::kF32);
  const Value plain = b.variable("v", DType::kBF16, {3, 4}, {});
  EXPECT_EQ(b.node(plain).op, Op::kVariable);
  EXPECT_EQ(plain.dtype(), DType::kBF16);

  EXPECT_EQ(b.binary(Op::kGreater, read, plain).dtype(), DType::kBF16);
  const Value i = b.infeed("i", DType::kS32, {3});
  EXPECT_EQ(b.binary(Op::kEqual, i, i).dtype(), DType::kF32);
  EXPECT_TRUE(b.status().ok()) << b.status();
}

}  // namespace graph_builder_test
}  // namespace tpusim::runtime
