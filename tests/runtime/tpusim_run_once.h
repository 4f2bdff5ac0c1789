#pragma once
// One step of a graph on the tpusim backend, for tests that compare its values with the cpu's.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/initializers.h"

namespace tpusim::runtime::testing {

// One step of `graph` on the backend named (make_backend's name) from its initial variables: the
// first replica's outputs (none, with the failure reported, when it does not compile or run).
inline Outputs run_once_on(const std::string& name, const Graph& graph,
                           const CompileOptions& options, const std::vector<Feeds>& feeds) {
  auto backend = make_backend(name);
  EXPECT_TRUE(backend.ok()) << backend.status();
  if (!backend.ok()) return {};
  auto exe = (*backend)->compile(graph, options);
  EXPECT_TRUE(exe.ok()) << exe.status();
  if (!exe.ok()) return {};
  Variables v = initial_variables(graph);
  auto out = (*backend)->run(**exe, v, feeds, 0);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->at(0) : Outputs{};
}

// The same on the tpusim backend.
inline Outputs run_once(const Graph& graph, const CompileOptions& options,
                        const std::vector<Feeds>& feeds) {
  return run_once_on("tpusim", graph, options, feeds);
}

// Expects each of `want`'s outputs in `got`, every element within `relative` of the output's
// largest magnitude (which is not 0), bit for bit too when `bit_exact`; how many elements differ.
inline int expect_outputs_near(const Outputs& got, const Outputs& want, bool bit_exact,
                               float relative) {
  int differ = 0;
  for (const auto& [name, value] : want) {
    const auto it = got.find(name);
    EXPECT_TRUE(it != got.end()) << name;
    if (it == got.end()) continue;
    const std::vector<float>& f = it->second.f;
    EXPECT_EQ(f.size(), value.f.size()) << name;
    if (f.size() != value.f.size()) continue;
    float largest = 0;
    for (float v : value.f) largest = std::max(largest, std::abs(v));
    EXPECT_GT(largest, 0.0f) << name;
    for (size_t i = 0; i < f.size(); ++i) {
      if (bit_exact) {
        EXPECT_EQ(f[i], value.f[i]) << name << "[" << i << "]";
      }
      EXPECT_NEAR(f[i], value.f[i], relative * largest) << name << "[" << i << "]";
      differ += f[i] != value.f[i];
    }
  }
  return differ;
}

// Runs `graph` (no variables) once on tpusim and on the cpu backend and expects its `outputs`
// outputs bit for bit the same.
inline void expect_the_cpus_bits(const Graph& graph, const std::vector<Feeds>& feeds,
                                 size_t outputs) {
  const Outputs tpu = run_once(graph, CompileOptions{}, feeds);
  auto cpu_backend = make_backend("cpu");
  ASSERT_TRUE(cpu_backend.ok());
  auto exe = (*cpu_backend)->compile(graph, CompileOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  Variables none;
  auto cpu = (*cpu_backend)->run(**exe, none, feeds, 0);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_EQ(tpu.size(), outputs);
  ASSERT_EQ(cpu->at(0).size(), outputs);
  for (const auto& [name, value] : cpu->at(0)) {
    const std::vector<float>& f = tpu.at(name).f;
    ASSERT_EQ(f.size(), value.f.size()) << name;
    EXPECT_EQ(std::memcmp(f.data(), value.f.data(), f.size() * 4), 0) << name;
  }
}

}  // namespace tpusim::runtime::testing
