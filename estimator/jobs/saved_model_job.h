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

// Loads the saved model in `dir` and describes it (set_model_inputs, set_model_output): its
// inputs fed by name, or its one image input from the images; the prediction to train on under
// `loss` is `output` (a prediction's name) or the only one the loss can take. For cross-entropy a
// prediction that is the softmax of a value (layers::softmax, as the zoo's "probabilities")
// trains on that value, the logits. An integer input's id bound is the rows of the smallest table
// the graph gathers with it. Errors name the folder and, where several predictions could be
// trained on, the names to choose from.
absl::StatusOr<ImportedModel> open_saved_model_job(const std::string& dir,
                                                   const std::string& output,
                                                   Loss loss = Loss::kSoftmaxCrossEntropy);

}  // namespace tpusim::jobs
