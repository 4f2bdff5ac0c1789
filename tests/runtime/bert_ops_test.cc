// BERT's ops in the graph IR and on the cpu backend (no SystemC): gather and scatter_add's shapes
// and errors, their clamping and summation order, a round trip through GraphDef, the gradients
// autodiff makes of them, and the layers built on them (embedding, gelu, layer normalisation).
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "runtime/graph/layers.h"
#include "runtime/graph/serialize.h"
#include "tests/runtime/builder_error.h"

namespace tpusim::runtime {
namespace bert_ops_test {

using testing::bad_graph_name;
using testing::BadGraph;
using testing::BuilderError;
using ::testing::HasSubstr;
using testing::in;

// Runs `b`'s graph once on the cpu backend.
Outputs run_cpu(const GraphBuilder& b, const Feeds& feeds) {
  auto backend = make_cpu_backend();
  auto exe = backend->compile(b.graph(), {});
  EXPECT_TRUE(exe.ok()) << exe.status();
  Variables vars = initial_variables(b.graph());
  auto out = backend->run(**exe, vars, {feeds}, 0);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Outputs{};
}

TEST(BertOps, GatherAndScatterAddInferShapes) {
  GraphBuilder b;
  const Value table = b.infeed("table", DType::kF32, {30522, 1024});
  const Value ids = b.infeed("ids", DType::kS32, {4, 512});
  const Value rows = b.gather(table, ids);
  EXPECT_EQ(rows.shape(), (Shape{4, 512, 1024}));
  EXPECT_EQ(rows.dtype(), DType::kF32);
  const Value back = b.scatter_add(rows, ids, 30522);
  EXPECT_EQ(back.shape(), (Shape{30522, 1024}));
  EXPECT_EQ(b.node(back).attrs.depth, 30522);
  // A bf16 table gathers bf16 rows; a scalar index one row.
  const Value half = b.infeed("half", DType::kBF16, {8, 3});
  EXPECT_EQ(b.gather(half, b.infeed("one", DType::kS32, {})).shape(), (Shape{3}));
  EXPECT_EQ(b.gather(half, ids).dtype(), DType::kBF16);
  EXPECT_TRUE(b.status().ok()) << b.status();
}

// Gather, scatter-add, embedding and erf refusals, as the builder's other errors.
const BadGraph kBadLookups[] = {
    {"GatherRank1Table",
     [](GraphBuilder& b) { b.gather(in(b, "t", {10}), in(b, "i", {3}, DType::kS32)); },
     "gather 'gather': needs a floating table [rows, columns], got f32[10] (indices s32[3])"},
    {"GatherIntTable",
     [](GraphBuilder& b) {
       b.gather(in(b, "t", {10, 2}, DType::kS32), in(b, "i", {3}, DType::kS32));
     },
     "needs a floating table [rows, columns], got s32[10, 2]"},
    {"GatherFloatIndices",
     [](GraphBuilder& b) {
       b.gather(in(b, "t", {10, 4}), in(b, "i", {2, 3}));
     },
     "gather 'gather': needs s32 indices, got f32[2, 3] (table f32[10, 4])"},
    {"GatherEmptyTable",
     [](GraphBuilder& b) {
       b.gather(in(b, "t", {0, 4}), in(b, "i", {3}, DType::kS32));
     },
     "the table f32[0, 4] has no rows for indices to name"},
    {"ScatterFloatIndices",
     [](GraphBuilder& b) {
       b.scatter_add(in(b, "u", {3, 4}), in(b, "i", {3}), 5);
     },
     "scatter_add 'scatter_add': needs s32 indices, got f32[3] (updates f32[3, 4])"},
    {"ScatterRank",
     [](GraphBuilder& b) { b.scatter_add(in(b, "u", {3}), in(b, "i", {3}, DType::kS32), 5); },
     "got updates f32[3] and indices s32[3]"},
    {"ScatterShape",
     [](GraphBuilder& b) {
       b.scatter_add(in(b, "u", {2, 7, 4}), in(b, "i", {2, 6}, DType::kS32), 5);
     },
     "updates f32[2, 7, 4] do not match indices s32[2, 6] (want updates [2, 6, 4])"},
    {"ScatterRows",
     [](GraphBuilder& b) {
       b.scatter_add(in(b, "u", {3, 4}), in(b, "i", {3}, DType::kS32), 0);
     },
     "scatter_add 'scatter_add': rows 0 must be >= 1"},
    {"EmbeddingSize",
     [](GraphBuilder& b) { layers::embedding(b, in(b, "i", {3}, DType::kS32), 0, 8, 1, "emb"); },
     "embedding 'emb' needs vocab and dim >= 1, got 0 x 8"},
    {"EmbeddingFloatIds",
     [](GraphBuilder& b) { layers::embedding(b, in(b, "i", {3}), 10, 8, 1, "word_embeddings"); },
     "gather 'word_embeddings/gather': needs s32 indices, got f32[3]"},
    {"ErfOfInts", [](GraphBuilder& b) { b.unary(Op::kErf, in(b, "i", {3}, DType::kS32)); },
     "erf 'erf': needs a floating operand, got s32[3]"},
};

INSTANTIATE_TEST_SUITE_P(BertOps, BuilderError, ::testing::ValuesIn(kBadLookups), bad_graph_name);

// Indices clamp into [0, rows - 1] (XLA's gather on TPU), and scatter_add sends a clamped
// index's update where gather read it: row 0 or the last row.
TEST(BertOps, IndicesOutOfRangeClampInBothDirections) {
  GraphBuilder b;
  const Value table = in(b, "t", {3, 2});
  const Value ids = in(b, "i", {4}, DType::kS32);
  b.output("rows", b.gather(table, ids));
  b.output("sums", b.scatter_add(in(b, "u", {4, 2}), ids, 3));
  const Outputs out =
      run_cpu(b, {{"t", HostTensor::from({3, 2}, {1, 2, 3, 4, 5, 6})},
                  {"i", HostTensor::from_ints({4}, {-7, 1, 3, 2})},
                  {"u", HostTensor::from({4, 2}, {1, 10, 100, 1000, 0.5f, 0.25f, 2, 4})}});
  EXPECT_EQ(out.at("rows").f, (std::vector<float>{1, 2, 3, 4, 5, 6, 5, 6}));
  EXPECT_EQ(out.at("sums").f, (std::vector<float>{1, 10, 100, 1000, 2.5f, 4.25f}));
}

// scatter_add sums in index order in f32: 1e8 + 1 - 1e8 is 0 that way (1 is lost against 1e8),
// and would be 1 summed in another order or in double.
TEST(BertOps, ScatterAddSumsInIndexOrderInF32) {
  GraphBuilder b;
  b.output("sums", b.scatter_add(in(b, "u", {3, 1}), in(b, "i", {3}, DType::kS32), 2));
  const Outputs out = run_cpu(b, {{"u", HostTensor::from({3, 1}, {1e8f, 1, -1e8f})},
                                  {"i", HostTensor::from_ints({3}, {1, 1, 1})}});
  EXPECT_EQ(out.at("sums").f, (std::vector<float>{0, 0}));
}

// Gather's gradient sums the cotangent rows of repeated indices into their table row (and zeros
// elsewhere); scatter_add's is the gather of its cotangent.
TEST(BertOps, GradientsAreEachOthersAdjoint) {
  GraphBuilder b;
  const Value table = in(b, "t", {4, 2});
  const Value ids = in(b, "i", {3}, DType::kS32);
  const Value rows = b.gather(table, ids);
  const Value cot = b.constant(HostTensor::from({3, 2}, {1, 2, 3, 4, 5, 6}));
  auto g = vjp(b, rows, cot, {table});
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(b.node((*g)[0]).op, Op::kScatterAdd);
  b.output("grad_table", (*g)[0]);
  const Value updates = in(b, "u", {3, 2});
  auto h = vjp(b, b.scatter_add(updates, ids, 4),
               b.constant(HostTensor::from({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8})), {updates});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(b.node((*h)[0]).op, Op::kGather);
  b.output("grad_updates", (*h)[0]);
  const Outputs out = run_cpu(b, {{"t", HostTensor::zeros(DType::kF32, {4, 2})},
                                  {"i", HostTensor::from_ints({3}, {2, 0, 2})},
                                  {"u", HostTensor::zeros(DType::kF32, {3, 2})}});
  EXPECT_EQ(out.at("grad_table").f, (std::vector<float>{3, 4, 0, 0, 6, 8, 0, 0}));
  EXPECT_EQ(out.at("grad_updates").f, (std::vector<float>{5, 6, 1, 2, 5, 6}));
}

// gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2))) (BERT's, not the tanh form), erf the host's.
TEST(BertOps, GeluIsTheErfForm) {
  GraphBuilder b;
  b.output("y", layers::gelu(in(b, "x", {5})));
  const std::vector<float> x = {-3, -0.5f, 0, 0.7f, 2.5f};
  const Outputs out = run_cpu(b, {{"x", HostTensor::from({5}, x)}});
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = x[i] * ((std::erf(x[i] / std::sqrt(2.0f)) + 1.0f) * 0.5f);
    EXPECT_EQ(out.at("y").f[i], want) << x[i];
  }
  EXPECT_NEAR(out.at("y").f[4], 2.5 * 0.5 * (1 + std::erf(2.5 / std::sqrt(2.0))), 1e-6);
}

// embedding makes the [vocab, dim] variable (truncated normal, stddev 0.02) and gathers from it;
// in a BFloat16Scope it is f32, read as bf16.
TEST(BertOps, EmbeddingIsAVariableAndAGather) {
  GraphBuilder b;
  const Value ids = in(b, "ids", {2, 3}, DType::kS32);
  const Value e = layers::embedding(b, ids, 50, 16, 7, "word_embeddings");
  EXPECT_EQ(e.shape(), (Shape{2, 3, 16}));
  EXPECT_EQ(b.node(e).op, Op::kGather);
  EXPECT_EQ(b.node(e).label, "word_embeddings/gather");
  const int var = b.graph().find_variable("word_embeddings");
  ASSERT_GE(var, 0);
  const Node& table = b.graph().node(var);
  EXPECT_EQ(table.shape, (Shape{50, 16}));
  EXPECT_EQ(table.attrs.initializer.kind, InitKind::kTruncatedNormal);
  EXPECT_EQ(table.attrs.initializer.stddev, 0.02f);
  EXPECT_EQ(table.attrs.initializer.seed, 7u);
  const HostTensor init = initial_variables(b.graph()).at("word_embeddings");
  for (float v : init.f) EXPECT_LE(std::abs(v), 0.04f + 1e-6f);  // truncated at 2 stddev
  GraphBuilder::BFloat16Scope scope(b);
  const Value half = layers::embedding(b, ids, 50, 16, 8, "position_embeddings");
  EXPECT_EQ(half.dtype(), DType::kBF16);
  EXPECT_EQ(b.graph().node(b.graph().find_variable("position_embeddings")).dtype, DType::kF32);
  EXPECT_TRUE(b.status().ok()) << b.status();
}

// BERT's LayerNorm: gamma (ones) and beta (zeros) under a fresh scope; without them, no
// variables and no scope (the zoo transformer's). Each row comes out with mean 0, variance 1.
TEST(BertOps, LayerNormalizationWithAndWithoutGammaAndBeta) {
  GraphBuilder b;
  const Value x = in(b, "x", {2, 4});
  b.output("plain", layers::layer_normalization(b, x, 1e-12f, false));
  EXPECT_TRUE(b.graph().variables().empty());
  b.output("bert", layers::layer_normalization(b, x));
  const int gamma = b.graph().find_variable("layer_normalization_1/gamma");
  const int beta = b.graph().find_variable("layer_normalization_1/beta");
  ASSERT_GE(gamma, 0);
  ASSERT_GE(beta, 0);
  EXPECT_EQ(b.graph().node(gamma).shape, (Shape{4}));
  EXPECT_EQ(b.graph().node(gamma).attrs.initializer.value, 1.0f);
  const Outputs out = run_cpu(b, {{"x", HostTensor::from({2, 4}, {1, 2, 3, 4, -2, 0, 2, 4})}});
  EXPECT_EQ(out.at("plain").f, out.at("bert").f);  // gamma 1 and beta 0 change nothing
  const float s = 1.0f / std::sqrt(1.25f);         // row 0: mean 2.5, variance 1.25
  EXPECT_NEAR(out.at("bert").f[0], -1.5f * s, 1e-6);
  EXPECT_NEAR(out.at("bert").f[3], 1.5f * s, 1e-6);
  EXPECT_NEAR(out.at("bert").f[4], -1.5f * s, 1e-6);  // row 1 is row 0 scaled by 2, shifted
}

TEST(BertOps, GraphDefRoundTripsGatherScatterAddAndErf) {
  GraphBuilder b;
  const Value ids = in(b, "ids", {4, 3}, DType::kS32);
  const Value table = b.variable("word_embeddings", DType::kF32, {20, 6},
                                 Initializer{InitKind::kTruncatedNormal, 0, 0.02f, 1});
  const Value y = b.unary(Op::kErf, b.gather(table, ids));
  const Value loss = b.reduce(Op::kReduceSum, y, {0, 1, 2});
  auto g = gradients(b, loss, {table});
  ASSERT_TRUE(g.ok()) << g.status();
  b.output("grad", (*g)[0]);
  const GraphDef def = to_proto(b.graph());
  std::string bytes;
  ASSERT_TRUE(def.SerializeToString(&bytes));
  GraphDef parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  auto back = from_proto(parsed);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dump(), b.graph().dump());
  EXPECT_THAT(back->dump(), HasSubstr("= scatter_add("));
  EXPECT_THAT(back->dump(), HasSubstr("= erf("));
  // scatter_add's rows travel as NodeDef.depth; a stored graph whose rows disagree is refused.
  for (int k = 0; k < parsed.node_size(); ++k) {
    if (parsed.node(k).op() != "scatter_add") continue;
    EXPECT_EQ(parsed.node(k).depth(), 20);
    parsed.mutable_node(k)->set_depth(21);
    EXPECT_THAT(std::string(from_proto(parsed).status().message()),
                HasSubstr("(scatter_add 'gradients/"));
  }
}

}  // namespace bert_ops_test
}  // namespace tpusim::runtime
