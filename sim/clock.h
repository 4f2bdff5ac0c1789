#pragma once
// Simulated time. The SystemC kernel runs at 1 ps resolution; each chip's units count integer
// cycles of the core clock and convert to time only when they wait. Converting from absolute
// cycle numbers (never adding rounded periods) keeps cycle counts exact over any run length,
// even for clocks whose period is not a whole number of picoseconds (940 MHz = 1063.83 ps).

#include <cstdint>

namespace tpusim::sim {

// A count of core clock cycles. A distinct type so cycles never mix with picoseconds.
struct Cycles {
  uint64_t value = 0;
  constexpr Cycles() = default;
  constexpr explicit Cycles(uint64_t v) : value(v) {}
  constexpr Cycles operator+(Cycles o) const { return Cycles(value + o.value); }
  constexpr Cycles operator-(Cycles o) const { return Cycles(value - o.value); }
  constexpr Cycles& operator+=(Cycles o) {
    value += o.value;
    return *this;
  }
  constexpr bool operator==(Cycles o) const { return value == o.value; }
  constexpr bool operator!=(Cycles o) const { return value != o.value; }
  constexpr bool operator<(Cycles o) const { return value < o.value; }
  constexpr bool operator<=(Cycles o) const { return value <= o.value; }
  constexpr bool operator>(Cycles o) const { return value > o.value; }
  constexpr bool operator>=(Cycles o) const { return value >= o.value; }
};

using Picoseconds = uint64_t;

// The latest simulated time a run may reach: 2^62 ps, 4.6e6 s or 53 days. A run that would go
// past it (a rate in the config far too low, or an absurdly long job) stops with an error
// instead of overflowing the kernel's 64-bit picosecond clock.
constexpr Picoseconds kTimeHorizonPs = 1ull << 62;
constexpr const char* kTimeHorizonText = "2^62 ps, about 53 days of simulated time";
// Times and cycle numbers saturate here, past the horizon, so the arithmetic on them (a start
// plus a duration) never wraps: an event scheduled this late is never reached.
constexpr Picoseconds kNeverPs = 1ull << 63;
constexpr uint64_t kNeverCycle = 1ull << 62;

// `cycle` rounded up to a whole cycle number, saturated at kNeverCycle (NaN saturates too).
uint64_t ceil_cycle(double cycle);

class ClockDomain {
 public:
  explicit ClockDomain(double frequency_hz);

  double frequency_hz() const { return frequency_hz_; }
  double period_ps() const { return static_cast<double>(period_ps_); }

  // The time at which cycle `c` begins, rounded to the nearest picosecond; kNeverPs when that
  // is later.
  Picoseconds time_of(Cycles c) const;
  // The same for a fractional cycle (timing models that work in fractions of cycles); 0 for
  // negative ones.
  Picoseconds time_at(double cycle) const;
  // The first cycle that begins at or after time `t`.
  Cycles cycle_at_or_after(Picoseconds t) const;
  // Cycles spent by `seconds` of work, rounded up (a transfer that needs 2.1 cycles takes 3),
  // at most kNeverCycle.
  Cycles cycles_for_seconds(double seconds) const;

 private:
  double frequency_hz_;
  long double period_ps_;  // 64-bit mantissa: time_of stays within 0.5 ps up to the horizon
  // A whole number of hertz (every shipped clock) gives the period exactly as the fraction
  // period_num_ / period_den_ picoseconds (1e12 / f, reduced), and time_of rounds the exact
  // product in 128-bit integers: the nearest picosecond, and no long double arithmetic on the
  // simulator's hottest path. Otherwise period_den_ is 0 and the long double period serves.
  uint64_t period_num_ = 0;
  uint64_t period_den_ = 0;
  // The two 64-bit divisions the conversions make, by 2 period_den_ and by period_num_, as a
  // multiplication by a precomputed reciprocal and one correction (ExactDivisor).
  struct ExactDivisor {
    uint64_t d = 1;
    uint64_t reciprocal = ~uint64_t{0};  // floor((2^64 - 1) / d)
    explicit ExactDivisor(uint64_t divisor = 1);
    uint64_t divide(uint64_t n) const;  // floor(n / d), exactly
  };
  ExactDivisor by_twice_den_;
  ExactDivisor by_num_;
};

}  // namespace tpusim::sim
