#include "estimator/jobs/imported_job.h"

#include <algorithm>
#include <numeric>

#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/metrics.h"
#include "runtime/graph/layers.h"

namespace tpusim::jobs {

const char* loss_name(Loss loss) {
  return loss == Loss::kSoftmaxCrossEntropy ? "softmax_cross_entropy" : "mean_squared_error";
}

absl::StatusOr<Loss> parse_loss(const std::string& name) {
  for (Loss l : {Loss::kSoftmaxCrossEntropy, Loss::kMeanSquaredError}) {
    if (name == loss_name(l)) return l;
  }
  return absl::InvalidArgumentError(
      str_cat("unknown loss '", name, "' (softmax_cross_entropy or mean_squared_error)"));
}

std::optional<ImageGeometry> image_geometry(const std::vector<int64_t>& d) {
  if (d.size() == 4 && d[1] == d[2] && d[3] <= 4) return ImageGeometry{d[1], d[3]};
  if (d.size() == 4 && d[2] == d[3] && d[1] <= 4) return ImageGeometry{d[2], d[1]};
  if (d.size() == 2 && d[1] == 784) return ImageGeometry{28, 1};
  return std::nullopt;
}

bool is_nchw(const std::vector<int64_t>& d, const ImageGeometry& geometry) {
  return d.size() == 4 && d[1] == geometry.channels && d[2] == geometry.side && d[1] != d[3];
}

namespace {

// "y f32[N, 1]": the batch dimension as N.
std::string tensor_text(const FileTensor& t) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < t.dims.size(); ++d)
    dims.push_back(d == 0 && t.batched ? "N" : std::to_string(t.dims[d]));
  return str_cat(t.name, " ", runtime::dtype_name(t.dtype), "[", str_join(dims, ", "), "]");
}

std::string inputs_text(const ImportedModel& m) {
  std::vector<std::string> parts;
  for (const ModelInput& in : m.inputs)
    parts.push_back(str_cat(in.name, " ", runtime::dtype_name(in.dtype), in.example.str()));
  return str_join(parts, ", ");
}

// One example of an input (or a label of the output's shape) travels as a tf.Example record, a
// protobuf message, which holds at most 2 GiB: a larger one no input pipeline can feed.
constexpr uint64_t kMaxExampleBytes = uint64_t{1} << 31;

// OK when one example of `t` (its dims after the batch; every element 4 bytes, f32 or s32) fits
// a tf.Example record; the error names `what` and the size.
absl::Status check_example_size(const std::string& path, const std::string& what,
                                const FileTensor& t) {
  uint64_t bytes = 4;
  bool over = false;
  for (size_t d = 1; d < t.dims.size() && !over; ++d)
    over = t.dims[d] < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(t.dims[d]), &bytes);
  if (!over && bytes <= kMaxExampleBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(str_cat(
      path, ": ", what, " ", tensor_text(t), " is ",
      over ? std::string("past 2^64 bytes") : str_cat(bytes, " bytes"),
      " an example; a tf.Example record (a protobuf message) holds at most 2 GiB, so no input "
      "pipeline can feed it"));
}

}  // namespace

absl::Status set_model_inputs(const std::vector<FileTensor>& inputs, const std::string& image_input,
                              ImportedModel* model) {
  model->inputs.clear();
  for (const FileTensor& t : inputs) {
    if (!t.batched || t.dims.empty()) {
      return absl::InvalidArgumentError(
          str_cat(model->path, ": input ", tensor_text(t),
                  " has no batch dimension; tpusim feeds batches, the batch first"));
    }
    if (t.name == "label" || t.name == "mask") {
      return absl::InvalidArgumentError(
          str_cat(model->path, ": input '", t.name, "' has the name the input pipeline gives its ",
                  t.name == "label" ? "labels" : "padding marker", "; rename it in the model"));
    }
    if (auto s = check_example_size(model->path, "input", t); !s.ok()) return s;
    model->inputs.push_back({t.name, t.dtype,
                             runtime::Shape(std::vector<int64_t>(t.dims.begin() + 1, t.dims.end())),
                             t.id_bound});
  }
  std::vector<std::string> names;
  for (const FileTensor& t : inputs) names.push_back(t.name);
  if (image_input.empty() && inputs.size() != 1) return absl::OkStatus();  // fed by name
  auto chosen = choose_name(names, image_input, "input", model->path, "--onnx-input");
  if (!chosen.ok()) return chosen.status();
  const FileTensor& in =
      inputs[static_cast<size_t>(std::find(names.begin(), names.end(), *chosen) - names.begin())];
  const std::optional<ImageGeometry> geometry =
      in.dtype == runtime::DType::kF32 ? image_geometry(in.dims) : std::nullopt;
  if (geometry.has_value()) {
    model->image_input = in.name;
    model->image_side = geometry->side;
    model->image_channels = geometry->channels;
  } else if (!image_input.empty()) {
    return absl::InvalidArgumentError(str_cat(
        model->path, ": input ", tensor_text(in),
        " is no image; tpusim feeds square float images, [N, H, W, C] or [N, C, H, W] with at "
        "most 4 channels, or flat 28x28 ones [N, 784]"));
  }
  return absl::OkStatus();
}

absl::Status set_model_output(const FileTensor& out, ImportedModel* model) {
  model->output = out.name;
  const std::vector<int64_t>& o = out.dims;
  if (!out.batched || o.empty() || out.dtype == runtime::DType::kS32) {
    return absl::InvalidArgumentError(str_cat(model->path, ": output ", tensor_text(out),
                                              " is no float output with the batch first"));
  }
  if (auto s = check_example_size(model->path, "output", out); !s.ok()) return s;
  model->output_example = runtime::Shape(std::vector<int64_t>(o.begin() + 1, o.end()));
  if (model->loss == Loss::kMeanSquaredError) return absl::OkStatus();
  if (o.size() != 2 || o[1] < 2) {
    return absl::InvalidArgumentError(
        str_cat(model->path, ": output ", tensor_text(out),
                " is no [N, classes] logits for softmax cross-entropy (--loss "
                "mean_squared_error trains it against float labels of its shape)"));
  }
  model->classes = o[1];
  return absl::OkStatus();
}

absl::Status use_imported_inputs(const ImportedModel& model, bool side_given, FashionData* data) {
  if (model.image_input.empty()) {
    return absl::InvalidArgumentError(
        str_cat(model.path, " takes ", inputs_text(model),
                ", not images: feed them with --input synthetic or --input examples --data DIR "
                "(TFRecords of tf.Example with a feature of each input's name, and 'label')"));
  }
  if (model.loss != Loss::kSoftmaxCrossEntropy) {
    return absl::InvalidArgumentError(
        str_cat(model.path,
                ": images come with class labels, for softmax cross-entropy; --loss "
                "mean_squared_error needs --input synthetic or --input examples"));
  }
  const std::string size =
      str_cat(model.image_side, "x", model.image_side, "x", model.image_channels);
  if (data->synthetic) {
    if (side_given && data->image_size != model.image_side)
      return absl::InvalidArgumentError(str_cat(model.path, " takes ", size, " images"));
    data->image_size = static_cast<int>(model.image_side);
    data->channels = static_cast<int>(model.image_channels);
    data->classes = static_cast<int>(model.classes);
    return absl::OkStatus();
  }
  if (data->image_size != model.image_side || data->channels != model.image_channels) {
    return absl::InvalidArgumentError(
        str_cat(model.path, " takes ", size, " images; the data's are ", data->image_size, "x",
                data->image_size, "x", data->channels, " (--input synthetic makes the model's)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> imported_global_batch(const ImportedModel& model, int64_t global,
                                              bool global_given, int64_t replicas) {
  if (model.fixed_batch == 0) return global;
  const int64_t fits = model.fixed_batch * replicas;
  if (!global_given || global == fits) return fits;
  return absl::InvalidArgumentError(str_cat(model.path, "'s graph takes ", model.fixed_batch,
                                            " examples a replica (its shapes are fixed "
                                            "when it is exported); on ",
                                            replicas, replicas == 1 ? " replica" : " replicas",
                                            " that is a batch of ", fits, ", not ", global));
}

absl::Status check_imported_policy(const ImportedModel& model,
                                   runtime::models::DTypePolicy policy) {
  if (!model.own_dtypes || policy == runtime::models::DTypePolicy::kFloat32)
    return absl::OkStatus();
  return own_dtypes_refusal(model.path);
}

absl::Status own_dtypes_refusal(const std::string& path) {
  return absl::InvalidArgumentError(str_cat(
      path,
      ": a saved model's graph keeps the dtypes it was exported with; run it under "
      "--dtype-policy float32 (an export made under mixed_bfloat16 computes in bf16 inside)"));
}

estimator::TPUEstimatorSpec imported_spec(runtime::GraphBuilder& b, const ImportedModel& model,
                                          runtime::Value output,
                                          std::optional<runtime::Value> labels,
                                          estimator::Mode mode,
                                          const runtime::OptimizerSpec& optimizer) {
  if (model.loss == Loss::kSoftmaxCrossEntropy)
    return classifier_spec(b, output, labels, mode, optimizer);
  estimator::TPUEstimatorSpec spec;
  if (mode == estimator::Mode::kPredict) {
    spec.predictions = {{"output", output}};
    return spec;
  }
  // tf.keras.losses.MeanSquaredError: the mean over every element of the batch.
  const runtime::Value error = output - *labels;
  const runtime::Value squared = error * error;
  std::vector<int64_t> all(static_cast<size_t>(squared.shape().rank()));
  std::iota(all.begin(), all.end(), 0);
  spec.loss = runtime::layers::reduce_mean(squared, all);
  spec.train_op = optimizer;
  std::vector<int64_t> example_axes(all.begin() + 1, all.end());
  spec.metric_tensors = {
      {"squared_error",
       example_axes.empty() ? squared : runtime::layers::reduce_mean(squared, example_axes)}};
  spec.metric_fn = [](const std::map<std::string, runtime::HostTensor>& t)
      -> absl::StatusOr<std::map<std::string, double>> {
    auto mse = estimator::metrics::mean(t.at("squared_error"));
    if (!mse.ok()) return mse.status();
    return std::map<std::string, double>{{"mean_squared_error", *mse}};
  };
  return spec;
}

estimator::ModelFn imported_model_fn(const ImportedModel& model, runtime::OptimizerSpec optimizer,
                                     runtime::models::DTypePolicy policy) {
  const bool mixed = policy == runtime::models::DTypePolicy::kMixedBFloat16;
  return [model, optimizer, mixed](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params& params) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    estimator::Features features = f;
    if (mixed) {  // float features enter in bf16, as the zoo's images do
      for (auto& [name, v] : features) {
        if (v.dtype() == runtime::DType::kF32) v = b.cast(v, runtime::DType::kBF16);
      }
    }
    auto forward =
        model.forward(b, features, {params.batch_size, mode == estimator::Mode::kTrain, mixed});
    if (!forward.ok()) return forward.status();
    estimator::TPUEstimatorSpec spec =
        imported_spec(b, model, forward->output, labels, mode, optimizer);
    // The file's weights, in place of the variables' initializers.
    spec.init_fn = [values = std::move(forward->initial_values)](runtime::Variables* variables) {
      for (const auto& [name, value] : values) {
        auto it = variables->find(name);
        if (it == variables->end())
          return absl::InternalError(str_cat("no variable '", name, "' to start from the file"));
        it->second.f = value.f;
        it->second.i = value.i;
      }
      return absl::OkStatus();
    };
    return spec;
  };
}

std::vector<estimator::TensorSpec> imported_signature(const ImportedModel& model, bool images) {
  if (images && !model.image_input.empty()) {
    return {{"image", runtime::DType::kF32,
             runtime::Shape{model.image_side, model.image_side, model.image_channels}}};
  }
  std::vector<estimator::TensorSpec> specs;
  for (const ModelInput& in : model.inputs) specs.push_back({in.name, in.dtype, in.example});
  return specs;
}

estimator::Features imported_infeeds(runtime::GraphBuilder& b, const ImportedModel& model,
                                     int64_t batch, bool images, runtime::Value* labels) {
  estimator::Features features;
  for (const estimator::TensorSpec& f : imported_signature(model, images)) {
    std::vector<int64_t> dims = f.shape.dims();
    dims.insert(dims.begin(), batch);
    features[f.name] = b.infeed(f.name, f.dtype, runtime::Shape(dims));
  }
  if (model.loss == Loss::kSoftmaxCrossEntropy) {
    *labels = b.infeed("label", runtime::DType::kS32, {batch});
  } else {
    std::vector<int64_t> dims = model.output_example.dims();
    dims.insert(dims.begin(), batch);
    *labels = b.infeed("label", runtime::DType::kF32, runtime::Shape(dims));
  }
  return features;
}

absl::Status save_imported_weights(const ImportedModel& model, const std::string& model_dir) {
  runtime::GraphBuilder b;
  const int64_t batch = model.fixed_batch > 0 ? model.fixed_batch : 1;
  runtime::Value labels;
  const estimator::Features features = imported_infeeds(b, model, batch, false, &labels);
  auto forward = model.forward(b, features, {batch, false, false});
  if (!forward.ok()) return forward.status();
  auto saved = estimator::save_checkpoint(model_dir, model.global_step, forward->initial_values, 1);
  return saved.ok() ? absl::OkStatus() : saved.status();
}

absl::StatusOr<std::string> choose_name(const std::vector<std::string>& names,
                                        const std::string& name, const std::string& what,
                                        const std::string& path, const std::string& flag) {
  for (const std::string& n : names) {
    if ((name.empty() && names.size() == 1) || n == name) return n;
  }
  return absl::InvalidArgumentError(
      name.empty()
          ? str_cat(path, " has ", names.size(), " ", what, "s (", str_join(names, ", "),
                    "): choose one with ", flag)
          : str_cat(path, " has no ", what, " '", name, "' (it has ", str_join(names, ", "), ")"));
}

}  // namespace tpusim::jobs
