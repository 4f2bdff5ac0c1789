#pragma once
// Helpers for tests that drive a System: one System per test process (gtest_discover_tests
// runs each test in its own process).

#include <memory>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/isa/builder.h"
#include "sim/memory/block.h"
#include "sim/numerics/bf16.h"
#include "sim/system.h"

namespace tpusim::sim::testing {

inline std::unique_ptr<System> make_system(const std::string& slice = "v3-8",
                                           SystemOptions options = {}) {
  auto spec = config::load_slice(slice);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto system = System::create(*spec, options);
  EXPECT_TRUE(system.ok()) << system.status();
  return system.ok() ? *std::move(system) : nullptr;
}

inline MatrixF random_matrix(int rows, int cols, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  MatrixF m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = dist(rng);
  return m;
}

inline void put_f32(System& s, uint32_t core, uint64_t address, const MatrixF& m) {
  ASSERT_TRUE(s.write_vmem(core, address, m.data(), sizeof(float) * m.size()).ok());
}

inline MatrixF get_f32(System& s, uint32_t core, uint64_t address, int rows, int cols) {
  MatrixF m(rows, cols);
  EXPECT_TRUE(s.read_vmem(core, address, m.data(), sizeof(float) * m.size()).ok());
  return m;
}

inline MatrixF round_bf16(const MatrixF& m) {
  MatrixF out(m.rows(), m.cols());
  round_to_bf16(m.data(), out.data(), static_cast<size_t>(m.size()));
  return out;
}

inline float max_rel_error(const MatrixF& got, const MatrixF& ref) {
  return (got - ref).cwiseAbs().maxCoeff() / ref.cwiseAbs().maxCoeff();
}

}  // namespace tpusim::sim::testing
