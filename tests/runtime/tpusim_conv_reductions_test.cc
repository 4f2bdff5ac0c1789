// A convolution's fragment computes the reductions of its output it was given
// (Fusion::reductions) even when nothing else reads that output.
#include <algorithm>
#include <cmath>
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
  const Value h =
      layers::conv2d(b, x, 16, 3, 1, layers::Padding::kSame, layers::Activation::kNone, 1, false);
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

// A convolution with its output's sum, in bands of its rows (2 images of 56x56x128 with their
// 3x3 patches: bands of 18 output rows) and patches (--fuse-conv-windows off): each band's tile
// lays its blocks out otherwise (a middle band loads more halo rows than the first), so the first
// tile of band 1 loads its images over where band 0's last tile keeps its output, whose store
// waits for that tile's sums. The load waits for the store (Emitter::start_tile): the output is
// the cpu's within the MXU's bf16 rounding everywhere, not only as its values happened to be
// stored first (before, image 1's first output row came back overwritten).
TEST(TpusimBackend, BandsLaidOutOtherwiseDoNotLoadOverTheLastTilesOutput) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2, 56, 56, 128});
  const Value z =
      layers::conv2d(b, x, 128, 3, 1, layers::Padding::kSame, layers::Activation::kNone, 1, false);
  b.output("z", z);
  b.output("sum", b.reduce(Op::kReduceSum, z, {0, 1, 2}));
  ASSERT_TRUE(b.status().ok()) << b.status();
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {2, 56, 56, 128}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  CompileOptions patches;
  patches.fuse_conv_windows = false;
  const Outputs cpu = testing::run_once_on("cpu", b.graph(), CompileOptions{}, feeds);
  for (const CompileOptions& options : {patches, CompileOptions{}}) {
    const Outputs tpusim = run_once(b.graph(), options, feeds);
    const std::vector<float>& want = cpu.at("z").f;
    const std::vector<float>& got = tpusim.at("z").f;
    ASSERT_EQ(got.size(), want.size());
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::abs(v));
    int far = 0;
    for (size_t i = 0; i < got.size(); ++i) far += std::abs(got[i] - want[i]) > 2e-2f * scale;
    EXPECT_EQ(far, 0) << (options.fuse_conv_windows ? "windows" : "patches");
  }
}

}  // namespace tpusim_conv_reductions_test
}  // namespace tpusim::runtime
