// Cycle <-> picosecond conversion must stay exact over long runs, even when the clock period is
// not a whole number of picoseconds.
#include "sim/clock.h"

#include <limits>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace clock_test {

TEST(ClockDomain, V3ClockPeriodIsFractional) {
  ClockDomain clock(940e6);
  // 1e12 / 940e6 = 1063.8297872... ps.
  EXPECT_NEAR(clock.period_ps(), 1063.8297872, 1e-6);
  EXPECT_EQ(clock.time_of(Cycles(0)), 0u);
  EXPECT_EQ(clock.time_of(Cycles(1)), 1064u);        // 1063.83 rounds up
  EXPECT_EQ(clock.time_of(Cycles(3)), 3191u);        // 3191.49 rounds down
  EXPECT_EQ(clock.time_of(Cycles(1000)), 1063830u);  // 1063829.79
}

TEST(ClockDomain, TimeOfAbsoluteCyclesDoesNotAccumulateRounding) {
  ClockDomain clock(940e6);
  // Adding rounded periods one at a time would drift by up to 0.5 ps per cycle; converting the
  // absolute cycle number is exact to the picosecond: 940e9 cycles = 1000 s = 1e15 ps.
  EXPECT_EQ(clock.time_of(Cycles(940'000'000'000ull)), 1'000'000'000'000'000ull);
  EXPECT_EQ(clock.time_of(Cycles(94)), 100'000u);  // 94 cycles = 100 ns exactly
}

TEST(ClockDomain, CycleAtOrAfterInvertsTimeOf) {
  for (double hz : {700e6, 940e6, 1050e6, 1.5e9, 1e9}) {
    ClockDomain clock(hz);
    for (uint64_t c : {0ull, 1ull, 2ull, 7ull, 1000ull, 123456789ull, 98765432101ull}) {
      const Picoseconds t = clock.time_of(Cycles(c));
      EXPECT_EQ(clock.cycle_at_or_after(t), Cycles(c)) << hz << " Hz, cycle " << c;
      // One picosecond later the next cycle is the first at or after.
      EXPECT_EQ(clock.cycle_at_or_after(t + 1), Cycles(c + 1)) << hz << " Hz, cycle " << c;
    }
  }
}

// A clock of a whole number of hertz converts exactly: 940 MHz is 50000/47 ps a cycle, and
// cycle c begins at the nearest picosecond to c * 50000 / 47 (never a tie: 47 is odd), up to
// the horizon; a fractional frequency keeps the long double path, within half a picosecond.
TEST(ClockDomain, WholeHertzClocksRoundTheExactFraction) {
  const ClockDomain v3(940e6);
  for (uint64_t c : {1ull, 46ull, 47ull, 1234567891ull, 4335000000000000ull}) {
    const uint64_t whole = c / 47 * 50000;  // c * 50000 / 47 without overflow: whole part...
    const uint64_t rest = c % 47 * 50000;   // ...and the remainder's share, < 47 * 50000
    const uint64_t expected = whole + (2 * rest + 47) / 94;
    EXPECT_EQ(v3.time_of(Cycles(c)), expected) << c;
    EXPECT_EQ(v3.cycle_at_or_after(expected), Cycles(c)) << c;
  }
  const ClockDomain odd(940.5e6);
  EXPECT_NEAR(static_cast<double>(odd.time_of(Cycles(1000000))), 1e18 / 940.5e6, 0.5);
}

// The 64-bit paths (a multiplication by a precomputed reciprocal instead of a division) give the
// exact fraction's rounding for every cycle count, at whole-hertz clocks whose periods reduce to
// small and large fractions, across the switch to the 128-bit path; and cycle_at_or_after
// inverts them.
TEST(ClockDomain, ReciprocalDivisionsMatchTheExactFraction) {
  __extension__ typedef unsigned __int128 Wide;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {  // xorshift64*
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ull;
  };
  for (const double hz : {940e6, 700e6, 1050e6, 1.5e9, 1000000007.0, 1.0, 123456789.0}) {
    const ClockDomain clock(hz);
    const auto f = static_cast<uint64_t>(hz);
    for (int i = 0; i < 20000; ++i) {
      // Magnitudes from a few cycles to 2^61, so both sides of the 64-bit bound are taken.
      const uint64_t c = next() >> (3 + next() % 61);
      const Wide twice = static_cast<Wide>(c) * 2000000000000ull;
      const Wide rounded = (twice + f) / (static_cast<Wide>(f) * 2);
      if (rounded >= kNeverPs) continue;
      ASSERT_EQ(clock.time_of(Cycles(c)), static_cast<uint64_t>(rounded)) << hz << " " << c;
      ASSERT_EQ(clock.cycle_at_or_after(static_cast<uint64_t>(rounded)), Cycles(c))
          << hz << " " << c;
    }
  }
}

TEST(ClockDomain, CyclesForSecondsRoundsUpButNotOnExactProducts) {
  ClockDomain clock(1e9);
  EXPECT_EQ(clock.cycles_for_seconds(0), Cycles(0));
  EXPECT_EQ(clock.cycles_for_seconds(-1), Cycles(0));
  EXPECT_EQ(clock.cycles_for_seconds(2e-9), Cycles(2));
  EXPECT_EQ(clock.cycles_for_seconds(2.1e-9), Cycles(3));
  // 0.3 / 0.1 style products that land a hair above an integer stay on it.
  EXPECT_EQ(clock.cycles_for_seconds(0.3e-9 / 0.1), Cycles(3));
  ClockDomain v3(940e6);
  // 1 us at 940 MHz = 940 cycles exactly.
  EXPECT_EQ(v3.cycles_for_seconds(1e-6), Cycles(940));
}

TEST(ClockDomain, TimesAndCyclesSaturatePastTheHorizon) {
  ClockDomain v3(940e6);
  // The last cycle before the horizon converts exactly; far later ones saturate at kNeverPs
  // instead of overflowing 64 bits.
  const Cycles last = v3.cycle_at_or_after(kTimeHorizonPs);
  // 2^62 ps x 940e6 / 1e12 = 4,334,984,857,321,744.63 cycles.
  EXPECT_EQ(last, Cycles(4'334'984'857'321'745ull));
  EXPECT_GE(v3.time_of(last), kTimeHorizonPs);
  EXPECT_LT(v3.time_of(last), kTimeHorizonPs + 1064);
  EXPECT_EQ(v3.time_of(Cycles(kNeverCycle)), kNeverPs);
  EXPECT_EQ(v3.time_of(Cycles(~0ull)), kNeverPs);
  // 1e6 s of work at 940 MHz is 9.4e14 cycles: exact. 1e12 s would be 9.4e20: saturated.
  EXPECT_EQ(v3.cycles_for_seconds(1e6), Cycles(940'000'000'000'000ull));
  EXPECT_EQ(v3.cycles_for_seconds(1e12), Cycles(kNeverCycle));
  EXPECT_EQ(v3.cycles_for_seconds(std::numeric_limits<double>::infinity()), Cycles(kNeverCycle));
  // A start plus a saturated duration still fits in 64 bits.
  EXPECT_GT(kNeverCycle + kNeverCycle, kNeverCycle);
}

TEST(CeilCycle, RoundsUpAndSaturates) {
  EXPECT_EQ(ceil_cycle(0.0), 0u);
  EXPECT_EQ(ceil_cycle(-3.5), 0u);
  EXPECT_EQ(ceil_cycle(2.0), 2u);
  EXPECT_EQ(ceil_cycle(2.01), 3u);
  EXPECT_EQ(ceil_cycle(1e30), kNeverCycle);
  EXPECT_EQ(ceil_cycle(std::numeric_limits<double>::infinity()), kNeverCycle);
  EXPECT_EQ(ceil_cycle(std::numeric_limits<double>::quiet_NaN()), kNeverCycle);
}

TEST(Cycles, ArithmeticAndOrder) {
  Cycles a(5);
  a += Cycles(7);
  EXPECT_EQ(a, Cycles(12));
  EXPECT_EQ(a - Cycles(2), Cycles(10));
  EXPECT_LT(Cycles(1), Cycles(2));
  EXPECT_GE(Cycles(2), Cycles(2));
}

}  // namespace clock_test
}  // namespace tpusim::sim

namespace tpusim::sim {
namespace clock_test {

// Fractional cycles map to the nearest picosecond, agree with time_of on whole cycles and
// saturate like it.
TEST(ClockDomain, TimeAtFractionalCycles) {
  const ClockDomain clock(940e6);  // 1063.83 ps
  EXPECT_EQ(clock.time_at(2.5), 2660u);
  EXPECT_EQ(clock.time_at(1234567.0), clock.time_of(Cycles(1234567)));
  EXPECT_EQ(clock.time_at(-3.0), 0u);
  EXPECT_EQ(clock.time_at(1e30), kNeverPs);
}

}  // namespace clock_test
}  // namespace tpusim::sim
