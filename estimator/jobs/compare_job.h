#pragma once
// The runs `tpusim compare` makes: the same training on several backends from the
// same initial weights and batches, and the rounding baseline's runs of the cpu from weights
// nudged one ulp; their differences step by step and variable by variable.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "estimator/jobs/bert_job.h"
#include "estimator/jobs/compare_numerics.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/jobs/imported_data.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {

// One run's backend: its name and precision ("cpu" with kMxu: the MXU's bf16 products; kFp32).
struct CompareBackend {
  std::string name;
  runtime::Precision precision = runtime::Precision::kFp32;
  std::string label;  // as given, with "@POLICY" added when the runs' dtype policies differ
  runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32;
};

struct CompareRun {
  std::string backend;  // its label
  estimator::TrainResult result;
  runtime::Variables variables;
};

// What every run shares: the model, the data, the replicas, the steps.
struct CompareJob {
  std::string model;
  std::string policy_note;  // " (mixed_bfloat16)" when every run uses that policy, else ""
  runtime::OptimizerSpec optimizer;
  FashionData data;
  std::optional<BertData> bert;           // a BERT model's records; else `data`
  std::optional<ImportedModel> imported;  // --onnx or --saved-model in place of a zoo model
  std::optional<ImportedData> named;      // its inputs fed by name; else `data`'s images
  std::string slice;
  uint32_t replicas = 0;
  int64_t steps = 0, batch = 0;
  std::filesystem::path root;  // a model_dir per run under it
  // Receives train_on's progress text (pieces, each line ending in a newline); may be empty.
  std::function<void(const std::string&)> log;
};

// Which initial weights a run starts from: the model's own, or nudged one ulp each in a pattern
// of signs (the rounding baseline's runs).
using Nudge = std::optional<uint32_t>;

// --baseline-runs auto's second look: how many nudges judge a difference over the first.
inline constexpr uint32_t kAutoBaselineRuns = 3;

// The zoo model (or BERT, or the ONNX model from its file's weights) under `policy`, its initial
// weights nudged when `nudge` is set.
estimator::ModelFn model_fn(const CompareJob& job, runtime::models::DTypePolicy policy,
                            Nudge nudge);

absl::StatusOr<CompareRun> train_once(const CompareJob& job, const CompareBackend& backend,
                                      const std::string& dir, Nudge nudge);

// train_once, saying on job.log which run it is and how long it took (a tpusim run of many steps
// takes minutes).
absl::StatusOr<CompareRun> train_on(const CompareJob& job, const CompareBackend& backend,
                                    const std::string& dir, Nudge nudge);

absl::StatusOr<Differences> differences(const CompareRun& a, const CompareRun& ref, double rtol,
                                        double atol);

// Adds the nudged runs of patterns `from` .. `to`-1 to the rounding baseline `drift` (empty
// before pattern 0): trainings of `cpu` from initial weights nudged one ulp each against `plain`,
// its run from the model's own. One draw of the nudges' signs drifts anywhere within a factor of
// 20 of another at a given step, so the baseline is the largest drift of them all, step by step
// and variable by variable.
absl::Status add_to_baseline(const CompareJob& job, const CompareBackend& cpu,
                             const CompareRun& plain, uint32_t from, uint32_t to, double rtol,
                             double atol, Differences* drift);

}  // namespace tpusim::jobs
