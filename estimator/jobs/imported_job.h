#pragma once
// A model from a file in place of a zoo model, as a TPUEstimator job's forward model_fn: an ONNX
// file (onnx_job.h) or a saved model folder a C++ program exported (saved_model_job.h). The
// images the input_fn makes ("image", [batch, side, side, channels]) meet the model's input in
// its own layout; its logits output feeds softmax cross-entropy on the labels in training (the
// optimizer and CrossShardOptimizer as for zoo models), accuracy in evaluation, class and
// probabilities in prediction. The file's weights are the variables' starting values (the spec's
// init_fn), so a fresh model_dir trains from them and evaluate and predict run them.

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/optimizers.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {

struct ImportedModel {
  std::string path;  // the file or folder, for messages
  std::string name;  // what reports call the model: the file's stem or the folder's name
  int64_t image_side = 0, image_channels = 0, classes = 0;  // what the images and labels are
  // A saved model's graph takes this many examples a replica, as it was exported (its shapes are
  // static, as XLA's); 0: an ONNX model, bound to any batch.
  int64_t fixed_batch = 0;
  int64_t global_step = 0;  // of the weights (a saved model's checkpoint; 0 for ONNX)
  // The graph carries the dtypes it was built with (a saved model's): float32 policy only.
  bool own_dtypes = false;

  struct Forward {
    runtime::Value logits;                                      // f32 [batch, classes]
    std::map<std::string, runtime::HostTensor> initial_values;  // the file's weights, by variable
  };
  struct ForwardOptions {
    int64_t batch = 1;      // examples a replica
    bool training = false;  // dropout on (ONNX; a saved model's graph is its predict step)
    bool mixed = false;     // mixed_bfloat16: the images come in bf16, compute in bf16
  };
  // Builds the forward pass on `b` from `images` [batch, side, side, channels].
  std::function<absl::StatusOr<Forward>(runtime::GraphBuilder& b, runtime::Value images,
                                        const ForwardOptions& options)>
      forward;
};

enum class ImageLayout { kNHWC, kNCHW, kFlat };

// The images' side and channels (into `model`) for the input `name` of `path`, `dims` with the
// batch first: [N, H, W, C] (Keras, tpusim), [N, C, H, W] (PyTorch) or a flat 28x28 grey image
// [N, 784] (an MLP's); InvalidArgument names the input and its shape otherwise.
absl::StatusOr<ImageLayout> image_geometry(const std::string& path, const std::string& name,
                                           runtime::DType dtype, const std::vector<int64_t>& dims,
                                           ImportedModel* model);

// The data for `model`: synthetic images of its input's size and labels of its classes, or
// records whose images are that size (InvalidArgument names both sizes otherwise); `side_given`:
// --image-size was given, and must be the model's.
absl::Status use_imported_inputs(const ImportedModel& model, bool side_given, FashionData* data);

// The global batch for `model` on `replicas` cores: `global` unless the model's graph is built
// for a fixed batch a replica that `global` does not give (InvalidArgument names both and the
// global batch that fits); with `global_given` false the fitting batch is chosen.
absl::StatusOr<int64_t> imported_global_batch(const ImportedModel& model, int64_t global,
                                              bool global_given, int64_t replicas);

// InvalidArgument when `model` cannot run under `policy` (a saved model under mixed_bfloat16).
absl::Status check_imported_policy(const ImportedModel& model, runtime::models::DTypePolicy policy);

// The model's model_fn: `optimizer` in training; under `policy` as the zoo's models
// (mixed_bfloat16: the images cast to bf16 on entry, the logits back to f32).
estimator::ModelFn imported_model_fn(
    const ImportedModel& model, runtime::OptimizerSpec optimizer,
    runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32);

// The file's weights as a checkpoint in `model_dir` at the model's global step, for evaluate and
// predict to run them where no training has (as model_to_estimator saves a Keras model's
// weights). It holds the model's variables only: a training run needs its own model_dir.
absl::Status save_imported_weights(const ImportedModel& model, const std::string& model_dir);

// The tensor named `name` among `names` (the only one when `name` is empty), for errors that
// name `path`, the kind (`what`: "input", "output") and the flag that chooses one.
absl::StatusOr<std::string> choose_name(const std::vector<std::string>& names,
                                        const std::string& name, const std::string& what,
                                        const std::string& path, const std::string& flag);

}  // namespace tpusim::jobs
