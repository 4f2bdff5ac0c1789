#pragma once
// The builder's errors as a parameterized test: each case builds an ill-shaped graph and names a
// substring its first error must hold (the op, its label and the shapes). graph_builder_test.cc
// defines the test; other files add their cases with INSTANTIATE_TEST_SUITE_P(..., BuilderError,
// ...).

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "runtime/graph/builder.h"

namespace tpusim::runtime::testing {

struct BadGraph {
  const char* name;
  std::function<void(GraphBuilder&)> build;
  const char* expect;
};

class BuilderError : public ::testing::TestWithParam<BadGraph> {};

inline Value in(GraphBuilder& b, const char* name, Shape s, DType t = DType::kF32) {
  return b.infeed(name, t, s);
}

// The case's name, for the test's.
inline std::string bad_graph_name(const ::testing::TestParamInfo<BadGraph>& info) {
  return info.param.name;
}

}  // namespace tpusim::runtime::testing
