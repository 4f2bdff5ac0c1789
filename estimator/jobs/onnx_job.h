#pragma once
// An ONNX model (runtime/onnx) as an imported model (imported_job.h): its image input and logits
// output chosen, imported again at each batch size the job builds.

#include <string>

#include <absl/status/statusor.h>

#include "estimator/jobs/imported_job.h"

namespace tpusim::jobs {

// Loads `path` (batch 1), checks the model imports and describes it (set_model_inputs,
// set_model_output): `input` names the input images feed (empty: the only input, where it is an
// image), `output` the output trained under `loss` (empty: the only one; for cross-entropy an
// output made by a final Softmax trains on that Softmax's input). An integer input's id bound is
// the rows of the smallest initializer a Gather indexes with it. Errors name the file and, for a
// model with several outputs, the names to choose from.
absl::StatusOr<ImportedModel> open_onnx_job(const std::string& path, const std::string& input,
                                            const std::string& output,
                                            Loss loss = Loss::kSoftmaxCrossEntropy);

}  // namespace tpusim::jobs
