#include "sim/numerics/bf16.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace bf16_test {

TEST(Bf16, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1.0).
  EXPECT_EQ(round_to_bf16(1.0f + std::ldexp(1.0f, -8)), 1.0f);
  // 1 + 3 x 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up to even.
  EXPECT_EQ(round_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 1.0f + std::ldexp(1.0f, -6));
  // Just above halfway rounds up.
  EXPECT_EQ(round_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)),
            1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-2.0f), 0xc000);
}

TEST(Bf16, SpecialValues) {
  EXPECT_TRUE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A NaN whose payload sits in the low bits must stay NaN, not round to infinity.
  uint32_t bits = 0x7f800001;
  float low_nan;
  std::memcpy(&low_nan, &bits, 4);
  EXPECT_TRUE(std::isnan(round_to_bf16(low_nan)));
  EXPECT_EQ(round_to_bf16(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  // The largest f32 rounds up to infinity in bf16.
  EXPECT_TRUE(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));
  EXPECT_EQ(round_to_bf16(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(round_to_bf16(-0.0f)));
}

// The branchless rounding (host loops vectorise it; GPU kernels run it) against the rule written
// out long-hand, on every special case (ties to even both ways, carries into the exponent,
// infinities, NaNs of either sign with payloads high or low, subnormals) and a million bit
// patterns spread over the whole range; the batch form rounds the same.
TEST(Bf16, BranchlessRoundingIsTheLongHandRule) {
  const auto long_hand = [](uint32_t bits) -> uint16_t {
    if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
      return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: quiet, sign kept
    return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  };
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u,
                                    0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u,
                                    0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                    0xff800001u, 0x00000001u, 0x0000ffffu, 0x00008000u};
  for (uint32_t i = 0; i < (1u << 20); ++i) patterns.push_back(i * 4099u + (i >> 7));
  std::vector<float> in, out(patterns.size());
  for (uint32_t p : patterns) in.push_back(bits_float(p));
  round_to_bf16(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(f32_to_bf16_bits(in[i]), long_hand(patterns[i])) << std::hex << patterns[i];
    ASSERT_EQ(float_bits(out[i]), uint32_t{long_hand(patterns[i])} << 16)
        << std::hex << patterns[i];
  }
}

TEST(Bf16, SplitTermsSumBackToTheValue) {
  const float x[] = {3.14159265f, -1e-3f, 12345.678f, 1.0f / 3.0f};
  float t0[4], t1[4], t2[4];
  float* terms[3] = {t0, t1, t2};
  split_bf16(x, 4, 3, terms);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t0[i], round_to_bf16(x[i]));
    EXPECT_EQ(t1[i], round_to_bf16(t1[i]));  // each term is a bf16 value
    // 3 bf16 terms carry 24 bits of mantissa: exactly the f32.
    EXPECT_EQ(t0[i] + t1[i] + t2[i], x[i]) << i;
  }
}

}  // namespace bf16_test
}  // namespace tpusim::sim
