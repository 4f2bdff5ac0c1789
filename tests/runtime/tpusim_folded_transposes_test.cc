// Matmuls that read a transpose of an operand's last two axes as the transpose's input lies,
// transposing the slices the MXUs take in VMEM (folded_transpose_source, XLA's TransposeFolding),
// compute what the cpu backend computes, on every path lower_matmul takes: a GEMM over HBM, a
// batch of products whose entries fit a VMEM tile, and a batch whose entries do not (one GEMM
// each).
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace {

using testing::run_once;
using testing::run_once_on;

TEST(TpusimBackend, FoldedTransposesComputeWhatTheCpuDoes) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {300, 200});
  const Value w = b.infeed("w", DType::kF32, {300, 72});
  const Value x = b.infeed("x", DType::kF32, {5, 33, 40});
  const Value y = b.infeed("y", DType::kF32, {5, 17, 40});
  const Value z = b.infeed("z", DType::kF32, {5, 9, 17});
  const Value big = b.infeed("big", DType::kF32, {2, 1536, 1024});
  const Value g = b.infeed("g", DType::kF32, {2, 1536, 96});
  b.output("at_w", b.matmul(b.transpose(a, {1, 0}), w));  // lhs, 2D: [200, 72]
  b.output("a_wt", b.matmul(b.transpose(w, {1, 0}), a));  // lhs, 2D: [72, 200]
  // A transpose of a transpose: the inner one is computed (a transpose reads it), the outer one
  // folded into the product.
  b.output("at_wtt", b.matmul(b.transpose(a, {1, 0}), b.transpose(b.transpose(w, {1, 0}), {1, 0})));
  b.output("a_xt", b.matmul(a, b.transpose(b.infeed("v", DType::kF32, {64, 200}), {1, 0})));
  b.output("x_yt", b.matmul(x, b.transpose(y, {0, 2, 1})));  // batched rhs: [5, 33, 17]
  b.output("xt_x", b.matmul(b.transpose(x, {0, 2, 1}), x));  // batched lhs: [5, 40, 40]
  b.output("yt_zt", b.matmul(b.transpose(y, {0, 2, 1}), b.transpose(z, {0, 2, 1})));  // both
  b.output("bigt_g", b.matmul(b.transpose(big, {0, 2, 1}), g));  // entries over a tile
  ASSERT_TRUE(b.status().ok()) << b.status();

  auto step = tpusim_backend::compile_graph(b.graph(), **config::load_slice("v3-8"), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  // Only the transpose of a transpose, which no matmul reads, is computed.
  EXPECT_EQ(step->instructions_per_op.count("transpose"), 1u);

  opcheck::OpCase c;
  c.inputs = {{"a", DType::kF32, {300, 200}},    {"w", DType::kF32, {300, 72}},
              {"x", DType::kF32, {5, 33, 40}},   {"y", DType::kF32, {5, 17, 40}},
              {"z", DType::kF32, {5, 9, 17}},    {"big", DType::kF32, {2, 1536, 1024}},
              {"g", DType::kF32, {2, 1536, 96}}, {"v", DType::kF32, {64, 200}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 11)};
  // Both with the MXU's bf16 inputs and f32 sums.
  CompileOptions mxu;
  mxu.precision = Precision::kMxu;
  const Outputs tpusim = run_once(b.graph(), mxu, feeds);
  const Outputs cpu = run_once_on("cpu", b.graph(), mxu, feeds);
  ASSERT_EQ(tpusim.size(), 8u);
  for (const auto& [name, value] : cpu) {
    const std::vector<float>& t = tpusim.at(name).f;
    ASSERT_EQ(t.size(), value.f.size()) << name;
    float largest = 0;
    for (float v : value.f) largest = std::max(largest, std::fabs(v));
    size_t bad = 0;
    for (size_t i = 0; i < t.size(); ++i) bad += std::fabs(t[i] - value.f[i]) > 1e-5f * largest;
    EXPECT_EQ(bad, 0u) << name;
  }
}

}  // namespace
}  // namespace tpusim::runtime
