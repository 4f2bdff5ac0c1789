#pragma once
// A saved model (estimator/saved_model.h: what `tpusim train --export-dir` and a C++ program's
// TPUEstimator::export_saved_model write) as an imported model (imported_job.h): its predict
// graph is the forward pass of the job's steps, its weights the variables' starting values.
//
// What that graph is fixes three things. Its shapes are static, so a replica takes the batch it
// was exported with (ImportedModel::fixed_batch). It is the predict step: batch norm runs on its
// moving statistics and dropout is off in training too (the predict graph has neither the batch's
// statistics nor a dropout mask). And it carries the dtypes it was built with, so it trains under
// --dtype-policy float32 only (an export made under mixed_bfloat16 keeps its bf16 inside).

#include <string>

#include <absl/status/statusor.h>

#include "estimator/jobs/imported_job.h"

namespace tpusim::jobs {

// Loads the saved model in `dir` and picks the prediction to train on: `output` (a prediction's
// name), or the only float [batch, classes] prediction. A prediction that is the softmax of a
// value (layers::softmax, as the zoo's "probabilities") trains on that value, the logits. Errors
// name the folder and, where several predictions could be the logits, the names to choose from.
absl::StatusOr<ImportedModel> open_saved_model_job(const std::string& dir,
                                                   const std::string& output);

}  // namespace tpusim::jobs
