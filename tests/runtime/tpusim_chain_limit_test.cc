// The tpusim compiler keeps a fused group within one vector chain (sim::kMaxChainSteps): a
// graph that compiled into a chain the program validator refuses is split into groups that fit.
#include <cstring>

#include <gtest/gtest.h>

#include "runtime/graph/builder.h"
#include "runtime/opcheck/harness.h"
#include "tests/runtime/tpusim_run_once.h"

namespace tpusim::runtime {
namespace tpusim_chain_limit_test {

using testing::run_once;

// A group longer than one vector chain may be (sim::kMaxChainSteps, 4096 steps) is split into
// groups that each fit: 5,000 chained negations were fused into one chain of 5,000 steps that the
// program validator then refused (the fourth hostile probe: an ONNX model of 4,097 Negs trained on
// the cpu backend and not on tpusim). Now it compiles, and computes the cpu's values bit for bit.
TEST(TpusimBackend, AGroupLongerThanAChainIsSplitAndComputesTheCpusValues) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {8, 128});
  Value h = x;
  for (int i = 0; i < 5000; ++i) h = b.unary(Op::kNeg, h);
  b.output("y", b.unary(Op::kRelu, h));
  opcheck::OpCase c;
  c.inputs = {{"x", DType::kF32, {8, 128}}};
  const std::vector<Feeds> feeds{opcheck::make_feeds(c, 5)};
  const Outputs tpusim = run_once(b.graph(), CompileOptions{}, feeds);
  const Outputs cpu = testing::run_once_on("cpu", b.graph(), CompileOptions{}, feeds);
  ASSERT_EQ(tpusim.size(), 1u);
  ASSERT_EQ(cpu.size(), 1u);
  const std::vector<float>& got = tpusim.at("y").f;
  const std::vector<float>& want = cpu.at("y").f;
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
}

}  // namespace tpusim_chain_limit_test
}  // namespace tpusim::runtime
