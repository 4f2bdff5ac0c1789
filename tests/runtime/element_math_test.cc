// The per-element functions the cpu and gpu backends share (runtime/backend/element_math.h),
// checked on the host: NaN handling as the standard library's, and index math in the cpu
// kernels' walk order. (The RNG and bf16 rounding are sim/numerics' own, tested there.)
#include "runtime/backend/element_math.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "tests/sim/convert_cases.h"

namespace tpusim::runtime::element {
namespace element_math_test {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Max and min are XLA's: NaN when either operand is, else std::max's and std::min's (the first
// operand on a tie, so -0 and +0 keep their order); a reduction's max step the same.
TEST(ElementMath, MaxAndMinAreXlasNanPropagatingOnes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float a : {-1.0f, 0.0f, -0.0f, 2.5f, nan}) {
    for (float b : {-1.0f, 0.0f, -0.0f, 2.5f, nan}) {
      const float max = apply_binary(Op::kMax, a, b), min = apply_binary(Op::kMin, a, b);
      const double m = reduce_step(true, a, b);
      if (std::isnan(a) || std::isnan(b)) {
        EXPECT_TRUE(std::isnan(max) && std::isnan(min) && std::isnan(m)) << a << " " << b;
        continue;
      }
      EXPECT_EQ(bits_of(max), bits_of(std::max(a, b)));
      EXPECT_EQ(bits_of(min), bits_of(std::min(a, b)));
      EXPECT_EQ(m, std::max<double>(a, b));
    }
  }
  EXPECT_TRUE(std::isnan(apply_unary(Op::kRelu, nan)));
  EXPECT_EQ(bits_of(apply_unary(Op::kRelu, -0.0f)), bits_of(0.0f));
}

TEST(ElementMath, F32ToS32IsXlasConversion) {
  for (const auto& c : sim::testing::kF32ToS32Cases) EXPECT_EQ(f32_to_s32(c.in), c.out) << c.in;
}

// strided_offset(m, e) is the input index the cpu kernels' odometer walk reaches at output e.
TEST(ElementMath, StridedOffsetIsTheOdometerWalk) {
  StridedMap m;
  m.rank = 4;
  const int64_t dims[] = {3, 1, 4, 5}, strides[] = {7, 100, -2, 31};
  for (int d = 0; d < 4; ++d) {
    m.dims[d] = dims[d];
    m.strides[d] = strides[d];
  }
  m.base = 1000;
  int64_t e = 0;
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 1; ++b)
      for (int64_t c = 0; c < 4; ++c)
        for (int64_t d = 0; d < 5; ++d, ++e)
          EXPECT_EQ(strided_offset(m, e), 1000 + a * 7 + b * 100 - c * 2 + d * 31);
  StridedMap scalar;  // rank 0: the one element sits at base
  scalar.base = 9;
  EXPECT_EQ(strided_offset(scalar, 0), 9);
}

// The ring's segments: 10 elements over 4 replicas are 3, 3, 2, 2 long; fewer elements than
// replicas leave the last segments empty.
TEST(ElementMath, RingSegmentsSplitAsEvenlyAsPossible) {
  const uint64_t want[] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 3};
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(ring_segment(i, 10, 4), want[i]) << i;
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(ring_segment(i, 3, 8), i);
  for (uint64_t i = 0; i < 12; ++i) EXPECT_EQ(ring_segment(i, 12, 3), i / 4);
  // Segment 1 of 3 replicas sums replica 2, then 0, then 1: (1e8 + -1e8) + 1 = 1, whereas
  // replica order 0, 1, 2 would give (-1e8 + 1) + 1e8 = 0 in f32.
  const float r0[] = {0, -1e8f, 0}, r1[] = {0, 1, 0}, r2[] = {0, 1e8f, 0};
  const float* parts[] = {r0, r1, r2};
  EXPECT_EQ(ring_sum_element(parts, 3, 3, 1), 1.0f);
}

}  // namespace element_math_test
}  // namespace tpusim::runtime::element
