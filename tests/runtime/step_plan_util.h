#pragma once
// The planning passes on a v3-8 core, for tests that check plans without emitting.

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/step_plan.h"

namespace tpusim::runtime::tpusim_backend::testing {

inline const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

// plan_step for core 0 of v3-8; a failure is reported and gives an empty plan.
inline StepPlan plan_of(const Graph& graph, const StepOptions& options = {}) {
  auto plan = plan_step(graph, v3_8(), 0, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : StepPlan{};
}

}  // namespace tpusim::runtime::tpusim_backend::testing
