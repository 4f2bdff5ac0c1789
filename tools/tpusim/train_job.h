#pragma once
// What a `tpusim train` run is: its flags and its job (the model, its data, the run config), shared
// by the command (cmd_train.cc) and its report (train_report.h).

#include <cstdint>
#include <optional>
#include <string>

#include "estimator/estimator.h"
#include "estimator/jobs/bert_job.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/jobs/imported_data.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/backend/declaration.h"
#include "runtime/graph/optimizers.h"

namespace tpusim::cli {

// The flags train binds to numbers.
struct TrainFlags {
  int64_t steps = 0, batch = 0, eval_steps = 0, log_every = 0;
  uint32_t ipl = 0;
  float lr = 0, decay_rate = 1;
  int64_t decay_steps = 1;
};

// What a run is, for the report and the summary.
struct TrainJob {
  std::string model;
  std::optional<jobs::BertData> bert;           // a BERT model's input; else `data`
  std::optional<jobs::ImportedModel> imported;  // --onnx or --saved-model in place of a zoo model
  std::optional<jobs::ImportedData> named;      // its inputs fed by name; else `data`'s images
  runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32;
  const runtime::BackendDeclaration* backend = nullptr;
  jobs::FashionData data;
  estimator::RunConfig config;
  estimator::SimulatorOptions sim;
  TrainFlags flags;
  runtime::OptimizerSpec optimizer;
};

}  // namespace tpusim::cli
