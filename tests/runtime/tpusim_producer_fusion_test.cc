// An elementwise group written by the reductions of its value (FusionPlan::node(r).producer, XLA's
// producer-consumer multi-output fusion): a ReLU's gradient computed by the fragment of the batch
// norm gradient's two sums, which writes it beside them. The values are what the group and the
// sums compute as fragments of their own, and the step moves fewer bytes.
#include <cmath>
#include <cstring>
#include <utility>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/fusion_test_graphs.h"
#include "tests/runtime/program_counts.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_producer_fusion_test {

// conv -> batch norm -> ReLU, twice, a dense layer and a softmax loss; outputs the loss and the
// gradients of the input and every trainable variable. In mixed bfloat16 the ReLU's gradient is
// bf16 and the batch norm's gradient sums it through its widening cast.
Graph conv_bn_relu_step(int64_t images, int64_t side, DType dtype, size_t* outputs) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {images, side, side, 8});
  const Value labels = b.infeed("labels", DType::kS32, {images});
  using layers::Activation;
  using layers::Padding;
  Value h = dtype == DType::kBF16 ? b.cast(x, DType::kBF16) : x;
  h = layers::conv2d(b, h, 16, 3, 1, Padding::kSame, Activation::kNone, 1, false);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, true));
  h = layers::conv2d(b, h, 16, 3, 1, Padding::kSame, Activation::kNone, 2, false);
  h = b.unary(Op::kRelu, layers::batch_normalization(b, h, true));
  h = b.cast(layers::reduce_mean(h, {1, 2}), DType::kF32);
  const Value logits = layers::dense(b, h, 4, Activation::kNone, 3);
  const Value loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(labels, logits), {0});
  *outputs = testing::output_loss_and_gradients(b, loss, x);
  return b.graph();
}

// Bit for bit when one VMEM tile holds every row (8 images of 8x8: each sum one reduce of all
// the rows either way); within f32 rounding of the sums when the rows span tiles (4 images of
// 64x64), whose partial rows each fragment adds in order over its own tiles (the batch norm's
// input gradient subtracts two means from its incoming gradient, which cancels most of it, so
// those roundings reach 1e-3 of the largest input gradient), and in mixed
// bfloat16 within what those roundings become where a bf16 gradient rounds the other way (as
// ConvolutionOutputReductionsComputeWhatSeparateFragmentsDo allows).
TEST(TpusimBackend, ProducersWrittenByTheirReductionsComputeWhatSeparateFragmentsDo) {
  for (const int64_t side : {8, 64}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const int64_t images = side == 8 ? 8 : 4;
      size_t outputs = 0;
      const Graph graph = conv_bn_relu_step(images, side, dtype, &outputs);
      const auto v3_slice = *config::load_slice("v3-8");  // kept: the spec outlives the compiles
      const config::SliceSpec& v3 = *v3_slice;
      auto fused = tpusim_backend::compile_graph(graph, v3, 0);
      tpusim_backend::StepOptions apart_step;
      apart_step.fuse_producers = false;
      auto apart_compiled = tpusim_backend::compile_graph(graph, v3, 0, apart_step);
      ASSERT_TRUE(fused.ok() && apart_compiled.ok()) << fused.status();
      // The second ReLU's gradient, which the second batch norm's gradient sums (the first ReLU's
      // gradient is the input gradient of the second convolution, whose output it is not).
      EXPECT_GE(fused->producer_fusions, 1u) << side;
      EXPECT_EQ(apart_compiled->producer_fusions, 0u);
      opcheck::OpCase c;
      c.inputs = {{"x", DType::kF32, {images, side, side, 8}},
                  {"labels", DType::kS32, {images}, 0, 4}};
      const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
      CompileOptions apart;
      apart.fuse_producers = false;
      const Outputs together = testing::run_once(graph, CompileOptions{}, feeds);
      const Outputs separate = testing::run_once(graph, apart, feeds);
      ASSERT_EQ(together.size(), outputs);
      for (const auto& [name, value] : separate) {
        const std::vector<float>& f = together.at(name).f;
        ASSERT_EQ(f.size(), value.f.size()) << name;
        if (side == 8) {
          EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
          continue;
        }
        float largest = 0;
        for (float v : value.f) largest = std::max(largest, std::abs(v));
        const float within = (dtype == DType::kBF16 ? 2e-2f : 1e-3f) * largest;
        for (size_t i = 0; i < f.size(); ++i)
          EXPECT_NEAR(f[i], value.f[i], within) << name << "[" << i << "]";
      }
    }
  }
}

// A graph on x [300, 40] run once with producers taken in and apart (`fuse_producers`): the
// outputs bit for bit the same (`outputs` of them); and its steps compiled both ways on v3-8's
// core 0, whose counts and HBM bytes the callers compare.
std::pair<absl::StatusOr<tpusim_backend::CompiledStep>,
          absl::StatusOr<tpusim_backend::CompiledStep>>
with_and_without_producers(const Graph& graph, size_t outputs, uint64_t seed) {
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {300, 40}}};
  CompileOptions apart;
  apart.fuse_producers = false;
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, seed)};
  const Outputs fused = testing::run_once(graph, CompileOptions{}, feeds);
  const Outputs separate = testing::run_once(graph, apart, feeds);
  EXPECT_EQ(fused.size(), outputs);
  for (const auto& [name, value] : separate) {
    const std::vector<float>& f = fused.at(name).f;
    EXPECT_EQ(f.size(), value.f.size()) << name;
    if (f.size() == value.f.size()) {
      EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
    }
  }
  const auto slice = config::load_slice("v3-8");
  if (!slice.ok()) return {slice.status(), slice.status()};
  tpusim_backend::StepOptions apart_step;
  apart_step.fuse_producers = false;
  return {tpusim_backend::compile_graph(graph, **slice, 0),
          tpusim_backend::compile_graph(graph, **slice, 0, apart_step)};
}

// Softmax's exponentials, read by its sum over the last axis and by its division, are computed by
// the sum's fragment (a producer taken in by a reduction over the last axis) and again by the
// division's, which reads the exponentials' operands (the logits and the maximum, a value per
// row) instead, and they are never written (a group recomputed by its reader); so are the scaled
// logits, by the maximum's fragment and the others: XLA's reduce fusions take in their producer,
// and FusionMerger merges it into its other consumer. The values are the separate fragments' bit
// for bit (the same operations on the same values, each row's sum and maximum in the same
// order).
TEST(TpusimBackend,
     SoftmaxsExponentialsComputedByTheirSumAndDivisionComputeWhatSeparateFragmentsDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 40});
  b.output("probs", layers::softmax(x * 0.5f));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto [with, without] = with_and_without_producers(b.graph(), 1, 17);
  ASSERT_TRUE(with.ok() && without.ok()) << with.status() << without.status();
  // The maximum takes in the scaling, the sum the exponentials; both computed again by their
  // other readers.
  EXPECT_EQ(with->producer_fusions, 2u);
  EXPECT_EQ(with->reader_recomputed_groups, 2u);
  EXPECT_EQ(without->producer_fusions, 0u);
  // Apart: the scaling reads x and writes it scaled, the maximum reads that, the exponentials
  // read it and the maximum's column and are written, the sum reads them, the division reads
  // them and the sum's column and writes the probabilities: 8 passes and 2 columns. Together:
  // the maximum, the sum and the division read x, the division writes: 4 passes, 3 columns.
  const uint64_t pass = 300 * 40 * 4, column = 300 * 4;
  EXPECT_EQ(tpusim_backend::dma_hbm_bytes(without->program->cores(0)) -
                tpusim_backend::dma_hbm_bytes(with->program->cores(0)),
            4 * pass - column);
}

// Exponentials that are also an output of the step, which no reader may compute in their place:
// the sum's fragment computes them and writes them beside its sums, tile by tile, and the
// division reads them back. The values are the separate fragments' bit for bit, and the step
// moves one pass fewer (the sum's read of the exponentials, which it now computes from x).
TEST(TpusimBackend, ExponentialsWrittenByTheirSumComputeWhatSeparateFragmentsDo) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {300, 40});
  const Value max = b.reduce(Op::kReduceMax, x, {1});
  const Value e = b.unary(Op::kExp, x - b.broadcast(max, x.shape(), {0}));
  b.output("exps", e);
  b.output("probs", e / b.broadcast(b.reduce(Op::kReduceSum, e, {1}), x.shape(), {0}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto [with, without] = with_and_without_producers(b.graph(), 2, 23);
  ASSERT_TRUE(with.ok() && without.ok()) << with.status() << without.status();
  EXPECT_EQ(with->producer_fusions, 1u);
  EXPECT_EQ(with->reader_recomputed_groups, 0u);
  EXPECT_EQ(tpusim_backend::dma_hbm_bytes(without->program->cores(0)) -
                tpusim_backend::dma_hbm_bytes(with->program->cores(0)),
            uint64_t{300} * 40 * 4);
}

// Softmax's gradient in mixed precision, (g - sum(g y)) y with a bf16 sum over the classes: the
// sum computes the product g y in its tiles (a bf16 sum across a row fuses with its input, summed
// in f32 in the row's order and rounded where it is made), which a fragment of its own wrote
// and the sum read back: bit for bit the same values, one pass fewer written and one read.
TEST(TpusimBackend, Bf16RowSumsComputeTheirInputsAsTheUnfusedOnesDo) {
  GraphBuilder b;
  const Value g = b.infeed("g", DType::kBF16, {300, 40});
  const Value y = b.infeed("y", DType::kBF16, {300, 40});
  const Value dot = b.reduce(Op::kReduceSum, g * y, {1});
  b.output("grad", (g - b.broadcast(dot, g.shape(), {0})) * y);
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"g", DType::kBF16, {300, 40}}, {"y", DType::kBF16, {300, 40}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 29)};
  CompileOptions apart;
  apart.fuse_reductions = false;
  const Outputs fused = testing::run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs separate = testing::run_once(b.graph(), apart, feeds);
  ASSERT_EQ(fused.size(), 1u);
  const std::vector<float>& f = fused.at("grad").f;
  ASSERT_EQ(f.size(), separate.at("grad").f.size());
  EXPECT_EQ(std::memcmp(f.data(), separate.at("grad").f.data(), f.size() * 4), 0);
  const auto slice = config::load_slice("v3-8");
  ASSERT_TRUE(slice.ok()) << slice.status();
  tpusim_backend::StepOptions apart_step;
  apart_step.fuse_reductions = false;
  auto step = tpusim_backend::compile_graph(b.graph(), **slice, 0);
  auto unfused = tpusim_backend::compile_graph(b.graph(), **slice, 0, apart_step);
  ASSERT_TRUE(step.ok() && unfused.ok()) << step.status() << unfused.status();
  EXPECT_EQ(step->fused_reductions, 1u);
  EXPECT_EQ(unfused->fused_reductions, 0u);
  // Apart: the product's fragment reads g and y and writes it, the sum reads it, the gradient
  // reads g, y and the sums and writes: 7 passes. Together: the sum reads g and y: 5. A pass of
  // a bf16 [300, 40] is charged 2 bytes an element.
  EXPECT_EQ(tpusim_backend::dma_hbm_bytes(unfused->program->cores(0)) -
                tpusim_backend::dma_hbm_bytes(step->program->cores(0)),
            uint64_t{2} * 300 * 40 * 2);
}

}  // namespace tpusim_producer_fusion_test
}  // namespace tpusim::runtime
