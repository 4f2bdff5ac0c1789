// Groups recomputed by their readers (fusion_plan.h) compute what the groups written and read
// back compute.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/graph/layers.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/fusion_test_graphs.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_recompute_readers_test {

using testing::classification_loss;
using testing::output_loss_and_gradients;
using testing::run_once;

// A batch norm applied with its ReLU, whose value the next convolution, that convolution's
// kernel gradient and the ReLU's gradient read, is computed again by each of them from the
// convolution output it reads (fusion_plan.h, "groups recomputed by their readers"; the
// convolutions on their image bands in VMEM) and never written, and so is the ReLU's gradient
// that the batch norm's gradient sums compute: the same values as the groups written and read
// back. Forward and loss bit for bit; the gradients bit for bit when one VMEM
// tile holds every image (8 images of 8x8), and when the fragments' tiles change with the
// group's scratch (2 images of 96x96, in bands) within the rounding of their f32 sums, which the
// batch norms' gradients amplify (their mean-subtracted sums cancel): at most 5e-4 of a
// gradient's largest value here, and in mixed bfloat16 a bf16 ulp of a value (2^-8 of it).
TEST(TpusimBackend, BatchNormsRecomputedByTheirReadersComputeWhatTheWrittenOnesDo) {
  for (const int64_t side : {8, 96}) {
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const int64_t images = side == 8 ? 8 : 2;
      GraphBuilder b;
      const Value x = b.infeed("x", DType::kF32, {images, side, side, 8});
      const Value h = testing::batch_normed_convolutions(
          b, x, dtype, {{16, 3, 1}, {16, 1, 1, layers::Padding::kValid}, {8, 3, 2}});
      const size_t outputs = output_loss_and_gradients(b, classification_loss(b, h, 4), x);
      ASSERT_GT(outputs, 0u);
      tpusim_backend::StepOptions written_options;
      written_options.fuse_conv_producers = false;
      const auto slice = config::load_slice("v3-8");
      ASSERT_TRUE(slice.ok());
      auto recomputed = tpusim_backend::compile_graph(b.graph(), **slice, 0);
      auto written = tpusim_backend::compile_graph(b.graph(), **slice, 0, written_options);
      ASSERT_TRUE(recomputed.ok()) << recomputed.status();
      ASSERT_TRUE(written.ok()) << written.status();
      // The first two batch norms with their ReLUs, each read by a convolution, its kernel
      // gradient and the ReLU's gradient, and the ReLUs' gradients that the batch norms'
      // gradient sums compute and their input gradients read again (reading the convolution
      // output they read already). In f32 also the last batch norm's, read by the mean's cast
      // and its ReLU's gradient, and that gradient; in mixed bfloat16 the mean reads it through
      // a widening alias, a reduction's operand, and the last gradient reads a value no larger
      // than its operands. In mixed bfloat16 the input's cast to bf16 is recomputed by the first
      // convolution and its kernel gradient: they read 4 bytes an element each (8), where the
      // cast read 4, wrote 2 and each read 2 (10; XLA's FusionMerger counts the producer's reads).
      // And the loss's exponentials, which their sum over the classes computes and the loss's
      // gradient computes again.
      const bool bf16 = dtype == DType::kBF16;
      EXPECT_EQ(recomputed->reader_recomputed_groups, bf16 ? 6u : 7u) << side << dtype_name(dtype);
      EXPECT_EQ(recomputed->conv_producers, bf16 ? 6u : 4u) << side << dtype_name(dtype);
      EXPECT_EQ(written->reader_recomputed_groups, 0u);
      if (side == 96) {  // the batch norms' values are the largest tensors held
        EXPECT_LT(recomputed->plan.device_peak_bytes, written->plan.device_peak_bytes);
      }
      opcheck::OpCase c;
      c.inputs = {{"x", DType::kF32, {images, side, side, 8}},
                  {"labels", DType::kS32, {images}, 0, 4}};
      const std::vector<Feeds> feeds{opcheck::make_feeds(c, 11)};
      CompileOptions write;
      write.fuse_conv_producers = false;
      const Outputs on = run_once(b.graph(), CompileOptions{}, feeds);
      const Outputs off = run_once(b.graph(), write, feeds);
      ASSERT_EQ(on.size(), outputs);
      for (const auto& [name, value] : off) {
        const std::vector<float>& f = on.at(name).f;
        ASSERT_EQ(f.size(), value.f.size()) << name;
        if (side == 8 || name.find("loss") != std::string::npos) {
          EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0)
              << name << " side " << side << " " << dtype_name(dtype);
          continue;
        }
        float largest = 0;
        for (float v : value.f) largest = std::max(largest, std::abs(v));
        for (size_t i = 0; i < f.size(); ++i)
          EXPECT_NEAR(f[i], value.f[i], (bf16 ? 8e-3f : 1e-3f) * largest)
              << name << "[" << i << "] side " << side << " " << dtype_name(dtype);
      }
    }
  }
}

}  // namespace tpusim_recompute_readers_test
}  // namespace tpusim::runtime
