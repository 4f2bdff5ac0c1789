#pragma once
// An ONNX model (runtime/onnx) as the forward model_fn of a TPUEstimator job: the images the
// input_fn makes ("image", [batch, side, side, channels]) meet the model's input in its own
// layout, its logits output feeds softmax cross-entropy on the labels in training (the optimizer
// and CrossShardOptimizer as for zoo models), accuracy in evaluation, class and probabilities in
// prediction. The file's weights are the variables' starting values (the spec's init_fn), so a
// fresh model_dir trains from them and evaluate and predict run them.

#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "runtime/graph/optimizers.h"
#include "runtime/onnx/onnx_model.h"

namespace tpusim::jobs {

struct OnnxJob {
  std::string path;
  std::shared_ptr<const std::string> bytes;  // the file, parsed again at each batch size
  runtime::onnx_import::TensorInfo input;    // the image input, at batch 1
  runtime::onnx_import::TensorInfo output;   // the logits output, at batch 1
  // The value the logits are read from: `output`, or the input of the Softmax that makes it (a
  // Keras classifier's probabilities: the loss wants the logits before them).
  std::string logits;
  int64_t image_side = 0, image_channels = 0, classes = 0;  // what the images and labels are
};

// Loads `path` (batch 1), picks its image input and logits output (`input` and `output` name
// them; empty: the model's only one) and checks the model imports. Errors name the file and,
// for a model with several inputs or outputs, the names to choose from.
absl::StatusOr<OnnxJob> open_onnx_job(const std::string& path, const std::string& input,
                                      const std::string& output);

// The job's model_fn: `optimizer` in training.
estimator::ModelFn onnx_model_fn(const OnnxJob& job, runtime::OptimizerSpec optimizer);

}  // namespace tpusim::jobs
