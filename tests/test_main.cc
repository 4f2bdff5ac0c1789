// main() of every GoogleTest binary: GoogleTest's and GoogleMock's flags, then Eigen's view of the
// host's caches when TPUSIM_EIGEN_CACHE_SIZES asks for another CPU's (sim/numerics/eigen_cache.h),
// so that the suite can show its figures hold on hosts other than this one.
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/numerics/eigen_cache.h"

int main(int argc, char** argv) {
  testing::InitGoogleMock(&argc, argv);
  if (auto pretend = tpusim::sim::apply_eigen_cache_sizes_from_environment(); !pretend.ok()) {
    std::cerr << pretend.message() << "\n";
    return 2;
  }
  return RUN_ALL_TESTS();
}
