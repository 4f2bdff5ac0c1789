#pragma once
// An ONNX model (runtime/onnx) as an imported model (imported_job.h): its image input and logits
// output chosen, imported again at each batch size the job builds.

#include <string>

#include <absl/status/statusor.h>

#include "estimator/jobs/imported_job.h"

namespace tpusim::jobs {

// Loads `path` (batch 1), picks its image input and logits output (`input` and `output` name
// them; empty: the model's only one; an output made by a final Softmax trains on that Softmax's
// input) and checks the model imports. Errors name the file and, for a model with several inputs
// or outputs, the names to choose from.
absl::StatusOr<ImportedModel> open_onnx_job(const std::string& path, const std::string& input,
                                            const std::string& output);

}  // namespace tpusim::jobs
