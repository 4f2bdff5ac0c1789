#include "sim/numerics/random.h"

#include <cmath>

namespace tpusim::sim {

double RandomStream::normal() {
  double u1 = uniform();
  while (u1 <= 0) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace tpusim::sim
