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
#include <optional>
#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/optimizers.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {

// What an imported model trains on: softmax cross-entropy on class labels (its output the
// logits [batch, classes]), or the mean squared error against float labels of its output's shape.
enum class Loss { kSoftmaxCrossEntropy, kMeanSquaredError };
const char* loss_name(Loss loss);  // "softmax_cross_entropy" | "mean_squared_error"
// InvalidArgument names the accepted values.
absl::StatusOr<Loss> parse_loss(const std::string& name);

// One of a model's inputs, fed from the feature of its name (or, for an image model's image
// input, from the images).
struct ModelInput {
  std::string name;
  runtime::DType dtype = runtime::DType::kF32;  // f32, or s32 (integer inputs)
  runtime::Shape example;                       // one example's shape: the batch left out
  // An integer input whose values index an embedding table (a Gather's indices) of this many
  // rows: synthetic ids are drawn below it. 0: no table (synthetic values 0 or 1).
  int64_t id_bound = 0;
};

struct ImportedModel {
  std::string path;  // the file or folder, for messages
  std::string name;  // what reports call the model: the file's stem or the folder's name
  std::vector<ModelInput> inputs;
  std::string output;             // the output trained on (its logits for cross-entropy)
  runtime::Shape output_example;  // one example's shape of it
  Loss loss = Loss::kSoftmaxCrossEntropy;
  int64_t classes = 0;  // cross-entropy: the labels are in [0, classes)
  // An image model (one float image input): the input the images feed and their geometry, so
  // Fashion-MNIST, JPEG records and synthetic images feed it. Empty: a model fed by name
  // (--input synthetic or --input examples).
  std::string image_input;
  int64_t image_side = 0, image_channels = 0;
  // A saved model's graph takes this many examples a replica, as it was exported (its shapes are
  // static, as XLA's); 0: an ONNX model, bound to any batch.
  int64_t fixed_batch = 0;
  int64_t global_step = 0;  // of the weights (a saved model's checkpoint; 0 for ONNX)
  // The graph carries the dtypes it was built with (a saved model's): float32 policy only.
  bool own_dtypes = false;

  struct Forward {
    runtime::Value output;  // f32, batch first: the logits for cross-entropy
    std::map<std::string, runtime::HostTensor> initial_values;  // the file's weights, by variable
  };
  struct ForwardOptions {
    int64_t batch = 1;      // examples a replica
    bool training = false;  // dropout on (ONNX; a saved model's graph is its predict step)
    bool mixed = false;     // mixed_bfloat16: float features come in bf16, compute in bf16
  };
  // Builds the forward pass on `b` from the batch's features: each input's by its name, or an
  // image model's images as "image" [batch, side, side, channels].
  std::function<absl::StatusOr<Forward>(
      runtime::GraphBuilder& b, const estimator::Features& features, const ForwardOptions& options)>
      forward;
};

// A tensor of the file as the openers describe it: its dims with the batch first.
struct FileTensor {
  std::string name;
  runtime::DType dtype = runtime::DType::kF32;
  std::vector<int64_t> dims;
  bool batched = true;   // the first dimension is the batch
  int64_t id_bound = 0;  // an input's: ModelInput::id_bound
};

// The model's inputs from the file's (each batched, f32 or s32, named neither "label" nor
// "mask", which the input pipeline's batches use), and its image input: `image_input` (the
// flag's value: that one, which must be an image) or, when it is empty, the only input where it
// is an image ([N, H, W, C], [N, C, H, W] with at most 4 channels, or a flat 28x28 [N, 784]).
// Errors name `model.path`, the input and its shape.
absl::Status set_model_inputs(const std::vector<FileTensor>& inputs, const std::string& image_input,
                              ImportedModel* model);
// The output trained on, under model->loss: logits [N, classes >= 2] for cross-entropy, any
// float batched output for the mean squared error. Errors name the output and the --loss that
// would take it.
absl::Status set_model_output(const FileTensor& output, ImportedModel* model);
struct ImageGeometry {
  int64_t side = 0, channels = 0;
};
// The square image `dims` (batch first) hold, or nothing when they are no image's.
std::optional<ImageGeometry> image_geometry(const std::vector<int64_t>& dims);
// Whether image input `dims` are [N, C, H, W] (PyTorch's) for images of `geometry`.
bool is_nchw(const std::vector<int64_t>& dims, const ImageGeometry& geometry);

// The data for `model`: synthetic images of its input's size and labels of its classes, or
// records whose images are that size (InvalidArgument names both sizes otherwise); `side_given`:
// --image-size was given, and must be the model's. A model that is no image model takes none of
// them: InvalidArgument lists its inputs and how to feed them (--input synthetic or examples).
absl::Status use_imported_inputs(const ImportedModel& model, bool side_given, FashionData* data);

// The global batch for `model` on `replicas` cores: `global` unless the model's graph is built
// for a fixed batch a replica that `global` does not give (InvalidArgument names both and the
// global batch that fits); with `global_given` false the fitting batch is chosen.
absl::StatusOr<int64_t> imported_global_batch(const ImportedModel& model, int64_t global,
                                              bool global_given, int64_t replicas);

// Why a graph that keeps its own dtypes (a saved model's, at `path`) does not run under
// mixed_bfloat16.
absl::Status own_dtypes_refusal(const std::string& path);
// InvalidArgument when `model` cannot run under `policy` (a saved model under mixed_bfloat16).
absl::Status check_imported_policy(const ImportedModel& model, runtime::models::DTypePolicy policy);

// The model's model_fn: `optimizer` in training; under `policy` as the zoo's models
// (mixed_bfloat16: float features cast to bf16 on entry, the output back to f32). Cross-entropy:
// class and probabilities in prediction, accuracy in evaluation. Mean squared error: the output
// in prediction ("output"), the mean squared error in evaluation ("mean_squared_error").
estimator::ModelFn imported_model_fn(
    const ImportedModel& model, runtime::OptimizerSpec optimizer,
    runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32);

// The file's weights as a checkpoint in `model_dir` at the model's global step, for evaluate and
// predict to run them where no training has (as model_to_estimator saves a Keras model's
// weights). It holds the model's variables only: a training run needs its own model_dir.
absl::Status save_imported_weights(const ImportedModel& model, const std::string& model_dir);

// Infeeds for one replica's batch of `model` as its input_fn's batches make them (`images`:
// "image" [batch, side, side, channels] for an image model fed images, else each input by its
// name), and the labels into `labels` (s32 [batch], or f32 of the output's shape).
estimator::Features imported_infeeds(runtime::GraphBuilder& b, const ImportedModel& model,
                                     int64_t batch, bool images, runtime::Value* labels);
// The features export_saved_model takes for `model`: "image" or its inputs by name, as
// imported_infeeds.
std::vector<estimator::TensorSpec> imported_signature(const ImportedModel& model, bool images);

// The loss on the model's output and labels, its metrics and predictions, as imported_model_fn
// builds them.
estimator::TPUEstimatorSpec imported_spec(runtime::GraphBuilder& b, const ImportedModel& model,
                                          runtime::Value output,
                                          std::optional<runtime::Value> labels,
                                          estimator::Mode mode,
                                          const runtime::OptimizerSpec& optimizer);

// The tensor named `name` among `names` (the only one when `name` is empty), for errors that
// name `path`, the kind (`what`: "input", "output") and the flag that chooses one.
absl::StatusOr<std::string> choose_name(const std::vector<std::string>& names,
                                        const std::string& name, const std::string& what,
                                        const std::string& path, const std::string& flag);

}  // namespace tpusim::jobs
