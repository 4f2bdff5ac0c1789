// The MXU policies as plain functions, without the simulation kernel.
#include "sim/timing/mxu_policy.h"

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace mxu_policy_test {

TEST(MxuPolicy, RegistryKnowsBothPolicies) {
  EXPECT_EQ(kMxuPolicies.list(", ", ", "), "tpu, scalesim_ws");
  for (const auto& [policy, word] : kMxuPolicies.entries) {
    EXPECT_EQ(make_mxu_policy(policy, 128, 128)->name(), word);
    EXPECT_EQ(kMxuPolicies.parse(word), policy);
  }
  EXPECT_EQ(kMxuPolicies.parse("systolic_magic"), std::nullopt);
}

// tpu: the second tile's weights load while the first streams.
TEST(MxuPolicy, TpuOverlapsTheNextWeightLoad) {
  auto p = make_mxu_policy(MxuPolicy::kTpu, 128, 128);
  const auto w0 = p->load_weights(0, 0);
  EXPECT_EQ(w0.start, 0u);
  EXPECT_EQ(w0.ready, 128u);
  const auto m0 = p->matmul(0, 0, 500);
  EXPECT_EQ(m0.start, 128u);
  EXPECT_EQ(m0.stream_end, 628u);
  EXPECT_EQ(m0.done, 628u + 254);
  const auto w1 = p->load_weights(128, 1);  // during m0's stream
  EXPECT_EQ(w1.start, 128u);
  const auto m1 = p->matmul(256, 1, 500);
  EXPECT_EQ(m1.start, 628u);  // right behind m0
  // Slot 0 cannot be reloaded before m0 finished streaming.
  EXPECT_EQ(p->load_weights(300, 0).start, 628u);
}

TEST(MxuPolicy, ScaleSimWaitsForTheDrain) {
  auto p = make_mxu_policy(MxuPolicy::kScaleSimWs, 128, 128);
  p->load_weights(0, 0);
  const auto m0 = p->matmul(0, 0, 100);
  EXPECT_EQ(m0.done, 128u + 100 + 254);  // 2R + C + T - 2 = 482
  EXPECT_EQ(p->load_weights(0, 1).start, 482u);
}

TEST(MxuPolicy, StallMovesTheChainBack) {
  auto p = make_mxu_policy(MxuPolicy::kTpu, 128, 128);
  p->load_weights(0, 0);
  p->matmul(0, 0, 100);  // streams 128..228
  EXPECT_EQ(p->stall_last_stream(300), 300u + 254);
  p->load_weights(0, 1);
  EXPECT_EQ(p->matmul(0, 1, 10).start, 300u);
}

}  // namespace mxu_policy_test
}  // namespace tpusim::sim
