// A convolution's fragment computes the reductions of its output it was given
// (Fusion::reductions) even when nothing else reads that output.
#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_conv_reductions_test {

using testing::run_once;

// A convolution whose output nothing reads but its sums still runs, to write them: the graph's
// outputs are only reduce_sum(x) and reduce_sum(square(x)) of it, computed by its fragment, bit
// for bit those of separate fragments (one tile holds every image).
TEST(TpusimBackend, AConvolutionReadOnlyByItsSumsStillComputesThem) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 8, 8, 8});
  const Value h = layers::conv2d(b, x, 16, 3, 1, layers::Padding::kSame,
                                 layers::Activation::kNone, 1, false);
  b.output("sum", b.reduce(Op::kReduceSum, h, {0, 1, 2}));
  b.output("sum_of_squares", b.reduce(Op::kReduceSum, b.unary(Op::kSquare, h), {0, 1, 2}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->conv_output_reductions, 2u);
  EXPECT_EQ(step->fused_convolutions, 1u);
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {8, 8, 8, 8}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  CompileOptions apart;
  apart.fuse_conv_reductions = false;
  const Outputs fused = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs separate = run_once(b.graph(), apart, feeds);
  ASSERT_EQ(fused.size(), 2u);
  for (const auto& [name, value] : separate) {
    const std::vector<float>& f = fused.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
    EXPECT_GT(*std::max_element(value.f.begin(), value.f.end()), 0.0f) << name;
  }
}

}  // namespace tpusim_conv_reductions_test
}  // namespace tpusim::runtime
