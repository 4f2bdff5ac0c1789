#pragma once
// One step of a graph on the tpusim backend, for tests that compare its values with the cpu's.

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

}  // namespace tpusim::runtime::testing
