#include "sim/clock.h"

#include <cmath>
#include <numeric>

namespace tpusim::sim {
namespace {

// GCC's and Clang's 128-bit integer (__extension__: not ISO C++, which -Wpedantic would flag).
__extension__ typedef unsigned __int128 Uint128;

}  // namespace

ClockDomain::ClockDomain(double frequency_hz)
    : frequency_hz_(frequency_hz), period_ps_(1e12L / frequency_hz) {
  constexpr uint64_t kPsPerSecond = 1000000000000ull;
  if (frequency_hz >= 1 && frequency_hz <= 1e15 && std::floor(frequency_hz) == frequency_hz) {
    const auto hz = static_cast<uint64_t>(frequency_hz);
    const uint64_t g = std::gcd(kPsPerSecond, hz);
    period_num_ = kPsPerSecond / g;
    period_den_ = hz / g;
    by_twice_den_ = ExactDivisor(period_den_ * 2);
    by_num_ = ExactDivisor(period_num_);
  }
}

ClockDomain::ExactDivisor::ExactDivisor(uint64_t divisor)
    : d(divisor), reciprocal(~uint64_t{0} / divisor) {}

// With m = floor((2^64 - 1) / d), q = floor(n m / 2^64) is floor(n / d) or one less: m >
// 2^64 / d - 1 puts n m / 2^64 above n / d - 1, and m <= 2^64 / d keeps it at most n / d. The
// remainder tells which.
uint64_t ClockDomain::ExactDivisor::divide(uint64_t n) const {
  uint64_t q = static_cast<uint64_t>((static_cast<Uint128>(n) * reciprocal) >> 64);
  if (n - q * d >= d) ++q;
  return q;
}

uint64_t ceil_cycle(double cycle) {
  if (!(cycle < static_cast<double>(kNeverCycle))) return kNeverCycle;  // NaN too
  return cycle <= 0 ? 0 : static_cast<uint64_t>(std::ceil(cycle));
}

Picoseconds ClockDomain::time_of(Cycles c) const {
  if (period_den_ != 0) {
    // round(c * num / den), half up, exactly: c < 2^63 and num <= 1e12 keep 2 c num in 128 bits.
    // While 2 c num + den fits in 64 bits (a run's first days at a GHz: 50000/47 ps a cycle),
    // the same integer division in 64 bits, by a reciprocal: 128-bit division is a library call,
    // a 64-bit one tens of cycles, and this is the simulator's hottest path.
    uint64_t twice64 = 0;
    if (!__builtin_mul_overflow(c.value, period_num_ * 2, &twice64) &&
        twice64 <= ~uint64_t{0} - period_den_) {
      const uint64_t ps = by_twice_den_.divide(twice64 + period_den_);
      return ps >= kNeverPs ? kNeverPs : static_cast<Picoseconds>(ps);
    }
    const Uint128 twice = static_cast<Uint128>(c.value) * period_num_ * 2;
    const Uint128 ps = (twice + period_den_) / (static_cast<Uint128>(period_den_) * 2);
    return ps >= kNeverPs ? kNeverPs : static_cast<Picoseconds>(ps);
  }
  // long double (period and product) keeps cycle * period within 0.5 ps of the exact value for
  // any cycle count before the horizon.
  const long double ps = static_cast<long double>(c.value) * period_ps_;
  if (ps >= static_cast<long double>(kNeverPs)) return kNeverPs;
  return static_cast<Picoseconds>(std::llround(ps));
}

Picoseconds ClockDomain::time_at(double cycle) const {
  if (!(cycle > 0)) return 0;
  const long double ps = static_cast<long double>(cycle) * period_ps_;
  if (ps >= static_cast<long double>(kNeverPs)) return kNeverPs;
  return static_cast<Picoseconds>(std::llround(ps));
}

Cycles ClockDomain::cycle_at_or_after(Picoseconds t) const {
  uint64_t c = 0;
  uint64_t scaled64 = 0;
  if (period_den_ != 0 &&
      !__builtin_mul_overflow(static_cast<uint64_t>(t), period_den_, &scaled64) &&
      scaled64 <= ~uint64_t{0} - period_num_) {  // ceil(t * den / num), exactly, in 64 bits
    c = by_num_.divide(scaled64 + period_num_ - 1);
  } else if (period_den_ != 0) {  // the same in 128 bits
    const Uint128 scaled = static_cast<Uint128>(t) * period_den_;
    c = static_cast<uint64_t>((scaled + period_num_ - 1) / period_num_);
  } else {
    c = static_cast<uint64_t>(std::ceil(static_cast<long double>(t) / period_ps_));
  }
  // Guard the rounding of time_of: cycle c begins at time_of(c), which may sit half a
  // picosecond either side of c * period.
  while (c > 0 && time_of(Cycles(c - 1)) >= t) --c;
  while (time_of(Cycles(c)) < t) ++c;
  return Cycles(c);
}

Cycles ClockDomain::cycles_for_seconds(double seconds) const {
  if (seconds <= 0) return Cycles(0);
  // Take off a relative 1e-15 before ceil so that a product meant to be integral (2 cycles
  // computed as 2.0000000000000004) does not round up to an extra cycle; below 1e15 cycles
  // that never removes a whole cycle.
  const long double cycles = static_cast<long double>(seconds) * frequency_hz_;
  if (!(cycles < static_cast<long double>(kNeverCycle))) return Cycles(kNeverCycle);
  return Cycles(static_cast<uint64_t>(std::ceil(cycles - cycles * 1e-15L)));
}

}  // namespace tpusim::sim
