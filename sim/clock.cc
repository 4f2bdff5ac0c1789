#include "sim/clock.h"

#include <cmath>

namespace tpusim::sim {

ClockDomain::ClockDomain(double frequency_hz)
    : frequency_hz_(frequency_hz), period_ps_(1e12 / frequency_hz) {}

Picoseconds ClockDomain::time_of(Cycles c) const {
  // long double keeps cycle * period exact to well below 0.5 ps for any 64-bit cycle count
  // a run can reach (2^63 ps is 107 days of simulated time).
  return static_cast<Picoseconds>(std::llround(static_cast<long double>(c.value) * period_ps_));
}

Cycles ClockDomain::cycle_at_or_after(Picoseconds t) const {
  auto c = static_cast<uint64_t>(std::ceil(static_cast<long double>(t) / period_ps_));
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
  return Cycles(static_cast<uint64_t>(std::ceil(cycles - cycles * 1e-15L)));
}

}  // namespace tpusim::sim
