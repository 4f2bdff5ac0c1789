#pragma once
// Helpers for tests that drive a System: one System per test process (gtest_discover_tests
// runs each test in its own process).

#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "sim/isa/builder.h"
#include "sim/memory/block.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/reference.h"
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
  return random_uniform(rows, cols, seed, scale);
}

inline void put_f32(System& s, CoreId core, uint64_t address, const MatrixF& m) {
  ASSERT_TRUE(s.write_vmem(core, address, m.data(), sizeof(float) * m.size()).ok());
}

inline MatrixF get_f32(System& s, CoreId core, uint64_t address, int rows, int cols) {
  MatrixF m(rows, cols);
  EXPECT_TRUE(s.read_vmem(core, address, m.data(), sizeof(float) * m.size()).ok());
  return m;
}

// An infeed entry holding `m`'s f32 values.
inline FeedEntry entry_of(const MatrixF& m) {
  FeedEntry e;
  e.bytes = sizeof(float) * m.size();
  e.data.resize(e.bytes);
  std::memcpy(e.data.data(), m.data(), e.bytes);
  return e;
}

inline MatrixF round_bf16(const MatrixF& m) { return rounded_to_bf16(m); }

inline float max_rel_error(const MatrixF& got, const MatrixF& ref) {
  return static_cast<float>(sim::max_rel_error(got, ref));
}

}  // namespace tpusim::sim::testing
