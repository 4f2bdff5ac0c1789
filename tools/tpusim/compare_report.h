#pragma once
// tpusim compare's verdicts as text.

#include <string>

#include <nlohmann/json.hpp>

#include "estimator/jobs/compare_verdict.h"

namespace tpusim::cli {

// Prints judge()'s entry under `heading`: each step, each variable and the verdict's reasons.
void print_judgement(const nlohmann::ordered_json& entry, const std::string& heading,
                     const jobs::Tolerances& tol, bool with_baseline);

}  // namespace tpusim::cli
