// NaN reads the same on every backend, as XLA computes it (sim/numerics/nan_order.h): max, min,
// ReLU, a reduction's max and a max pool propagate NaN; argmax takes the first NaN. The expected
// values are what JAX (XLA on the CPU) gives for the same inputs:
//   jax.nn.relu(x), jnp.maximum(x, y), jnp.minimum(x, y), jnp.max(x, axis=1),
//   jnp.argmax(x, axis=1), lax.reduce_window(x.reshape(1, 4, 3, 1), -inf, max, 2x2, 2x2).
// Before, the cpu backend's ReLU mapped NaN to 0 and its argmax skipped NaN, and tpusim's argmax
// of a row with a NaN was 2^31 - 1: a run that diverged read a finite loss on one backend.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph/builder.h"
#include "runtime/graph/layers.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace nan_semantics_test {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Equal, NaN where `want` is NaN.
void expect_values(const HostTensor& got, const std::vector<float>& want, const std::string& what) {
  const bool ints = got.dtype == DType::kS32;
  ASSERT_EQ(ints ? got.i.size() : got.f.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    const float v = ints ? static_cast<float>(got.i[k]) : got.f[k];
    if (std::isnan(want[k])) {
      EXPECT_TRUE(std::isnan(v)) << what << "[" << k << "] = " << v;
    } else {
      EXPECT_EQ(v, want[k]) << what << "[" << k << "]";
    }
  }
}

class NanSemantics : public ::testing::TestWithParam<std::string> {};

TEST_P(NanSemantics, MaxMinReluReductionsPoolsAndArgmaxFollowXla) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {3, 4});
  const Value y = b.infeed("y", DType::kF32, {3, 4});
  b.output("relu", b.unary(Op::kRelu, x));
  b.output("max", b.binary(Op::kMax, x, y));
  b.output("min", b.binary(Op::kMin, x, y));
  b.output("reduce_max", b.reduce(Op::kReduceMax, x, {1}));
  b.output("argmax", b.argmax(x, 1));
  b.output("max_pool",
           layers::max_pooling2d(b, b.reshape(x, {1, 4, 3, 1}), 2, 2, layers::Padding::kValid));
  const float n = kNaN;
  Feeds feeds;
  feeds["x"] = HostTensor::from({3, 4}, {1, n, 3, n, n, 2, 5, 1, -1, 7, 7, 2});
  feeds["y"] = HostTensor::from({3, 4}, {0, 1, n, 4, 2, n, 1, 1, 0, 8, 6, 3});
  const Outputs out = testing::run_once_on(GetParam(), b.graph(), CompileOptions{}, {feeds});
  ASSERT_EQ(out.size(), 6u);
  expect_values(out.at("relu"), {1, n, 3, n, n, 2, 5, 1, 0, 7, 7, 2}, "relu");
  expect_values(out.at("max"), {1, n, n, n, n, n, 5, 1, 0, 8, 7, 3}, "max");
  expect_values(out.at("min"), {0, n, n, n, n, n, 1, 1, -1, 7, 6, 2}, "min");
  expect_values(out.at("reduce_max"), {n, n, 7}, "reduce_max");
  expect_values(out.at("argmax"), {1, 0, 1}, "argmax");
  expect_values(out.at("max_pool"), {n, 7}, "max_pool");
}

INSTANTIATE_TEST_SUITE_P(Backends, NanSemantics, ::testing::Values("cpu", "tpusim"));

}  // namespace nan_semantics_test
}  // namespace tpusim::runtime
