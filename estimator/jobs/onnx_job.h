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
#include "estimator/jobs/fashion_job.h"
#include "runtime/graph/optimizers.h"
#include "runtime/models/zoo.h"
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

// The data for `job`: synthetic images of its input's size and labels of its classes, or records
// whose images are that size (InvalidArgument names both sizes otherwise); `side_given`:
// --image-size was given, and must be the model's.
absl::Status use_onnx_inputs(const OnnxJob& job, bool side_given, FashionData* data);

// The job's model_fn: `optimizer` in training; under `policy` as the zoo's models (mixed_bfloat16:
// the images cast to bf16 on entry, the logits back to f32).
estimator::ModelFn onnx_model_fn(
    const OnnxJob& job, runtime::OptimizerSpec optimizer,
    runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32);

// The file's weights as a checkpoint at global step 0 in `model_dir`, for evaluate and predict
// to run them where no training has (as model_to_estimator saves a Keras model's weights). It
// holds the model's variables only: a training run needs its own model_dir.
absl::Status save_onnx_weights(const OnnxJob& job, const std::string& model_dir);

}  // namespace tpusim::jobs
