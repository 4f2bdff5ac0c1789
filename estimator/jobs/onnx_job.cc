#include "estimator/jobs/onnx_job.h"

#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/onnx/importer.h"
#include "runtime/onnx/summary.h"

namespace tpusim::jobs {
namespace {

namespace ox = runtime::onnx_import;

// The tensor named `name` among `all` (the only one when `name` is empty).
absl::StatusOr<ox::TensorInfo> choose(const std::vector<ox::TensorInfo>& all,
                                      const std::string& name, const std::string& what,
                                      const std::string& path, const std::string& flag) {
  std::vector<std::string> names;
  for (const auto& t : all) names.push_back(t.name);
  for (const auto& t : all) {
    if ((name.empty() && all.size() == 1) || t.name == name) return t;
  }
  return absl::InvalidArgumentError(
      name.empty()
          ? str_cat(path, " has ", all.size(), " ", what, "s (", str_join(names, ", "),
                    "): choose one with ", flag)
          : str_cat(path, " has no ", what, " '", name, "' (it has ", str_join(names, ", "), ")"));
}

// The images' side and channels for an input of `dims` a example: [H, W, C] (Keras), [C, H, W]
// (PyTorch) or a flat [H * W] grey image (an MLP's).
absl::Status image_geometry(const ox::TensorInfo& in, const std::string& path, OnnxJob* job) {
  const std::vector<int64_t>& d = in.shape.dims();
  if (!in.batched || in.dtype != runtime::DType::kF32) {
    return absl::InvalidArgumentError(str_cat(path, ": input '", in.name, "' is ",
                                              runtime::dtype_name(in.dtype), in.shape.str(),
                                              "; tpusim feeds images: float with the batch first"));
  }
  if (d.size() == 4 && d[1] == d[2] && d[3] <= 4) {
    job->image_side = d[1];
    job->image_channels = d[3];
  } else if (d.size() == 4 && d[2] == d[3] && d[1] <= 4) {
    job->image_side = d[2];
    job->image_channels = d[1];
  } else if (d.size() == 2 && d[1] == 784) {
    job->image_side = 28;
    job->image_channels = 1;
  } else {
    return absl::InvalidArgumentError(
        str_cat(path, ": input '", in.name, "' is ", in.shape.str(),
                " a batch; tpusim feeds square images, [N, H, W, C] or [N, C, H, W] with at most "
                "4 channels, or flat 28x28 ones [N, 784]"));
  }
  return absl::OkStatus();
}

// The value the logits are: the output, or the input of the Softmax that makes it.
std::string logits_of(const ox::OnnxModel& m, const std::string& output) {
  for (const onnx::NodeProto& node : m.proto.graph().node()) {
    if (node.output_size() > 0 && node.output(0) == output && node.op_type() == "Softmax" &&
        node.input_size() > 0)
      return node.input(0);
  }
  return output;
}

// Whether the model's input is an NCHW image (PyTorch's) for images [N, side, side, channels].
bool nchw_input(const ox::TensorInfo& in, const runtime::Shape& image) {
  const std::vector<int64_t>& d = in.shape.dims();
  return d.size() == 4 && d[1] == image.dim(3) && d[2] == image.dim(1) && d[1] != d[3];
}

}  // namespace

absl::StatusOr<OnnxJob> open_onnx_job(const std::string& path, const std::string& input,
                                      const std::string& output) {
  auto bytes = ox::read_onnx_file(path);  // read once: the job keeps them for each batch size
  if (!bytes.ok()) return bytes.status();
  auto model = ox::parse_onnx(*bytes, path, 1);
  if (!model.ok()) return model.status();
  auto summary = ox::summarize(*model);
  if (!summary.ok()) return summary.status();
  if (!summary->unsupported.empty()) {
    std::vector<std::string> nodes;
    for (const auto& u : summary->unsupported)
      nodes.push_back(str_cat(u.op_type, " (node '", u.node, "')"));
    return absl::InvalidArgumentError(str_cat(path, ": tpusim does not import ",
                                              str_join(nodes, ", "), "; `tpusim import ", path,
                                              "` lists what it does"));
  }
  OnnxJob job;
  job.path = path;
  job.bytes = std::make_shared<const std::string>(*std::move(bytes));
  auto chosen_in = choose(model->inputs, input, "input", path, "--onnx-input");
  if (!chosen_in.ok()) return chosen_in.status();
  auto chosen_out = choose(model->outputs, output, "output", path, "--onnx-output");
  if (!chosen_out.ok()) return chosen_out.status();
  job.input = *chosen_in;
  job.output = *chosen_out;
  if (model->inputs.size() != 1) {
    return absl::InvalidArgumentError(
        str_cat(path, " has ", model->inputs.size(), " inputs; tpusim feeds one (images)"));
  }
  if (auto s = image_geometry(job.input, path, &job); !s.ok()) return s;
  const std::vector<int64_t>& o = job.output.shape.dims();
  if (o.size() != 2 || o[1] < 2) {
    return absl::InvalidArgumentError(str_cat(path, ": output '", job.output.name, "' is ",
                                              job.output.shape.str(),
                                              "; tpusim trains classifiers: [N, classes] logits"));
  }
  job.classes = o[1];
  job.logits = logits_of(*model, job.output.name);
  return job;
}

absl::Status use_onnx_inputs(const OnnxJob& job, bool side_given, FashionData* data) {
  const std::string size = str_cat(job.image_side, "x", job.image_side, "x", job.image_channels);
  if (data->synthetic) {
    if (side_given && data->image_size != job.image_side)
      return absl::InvalidArgumentError(str_cat(job.path, " takes ", size, " images"));
    data->image_size = static_cast<int>(job.image_side);
    data->channels = static_cast<int>(job.image_channels);
    data->classes = static_cast<int>(job.classes);
    return absl::OkStatus();
  }
  if (data->image_size != job.image_side || data->channels != job.image_channels) {
    return absl::InvalidArgumentError(
        str_cat(job.path, " takes ", size, " images; the data's are ", data->image_size, "x",
                data->image_size, "x", data->channels, " (--input synthetic makes the model's)"));
  }
  return absl::OkStatus();
}

estimator::ModelFn onnx_model_fn(const OnnxJob& job, runtime::OptimizerSpec optimizer,
                                 runtime::models::DTypePolicy policy) {
  const bool mixed = policy == runtime::models::DTypePolicy::kMixedBFloat16;
  return [job, optimizer, mixed](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params& params) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    auto model = ox::parse_onnx(*job.bytes, job.path, params.batch_size);
    if (!model.ok()) return model.status();
    const ox::TensorInfo* input = nullptr;
    for (const ox::TensorInfo& t : model->inputs) {
      if (t.name == job.input.name) input = &t;
    }
    if (input == nullptr)
      return absl::InternalError(str_cat(job.path, ": no input ", job.input.name));
    // An NCHW input takes the NHWC images as they are (the importer holds NCHW images NHWC);
    // any other the images reshaped to it (a flat 784 for an MLP).
    runtime::Value images = f.at("image");
    if (mixed) images = b.cast(images, runtime::DType::kBF16);
    const bool nchw = nchw_input(*input, images.shape());
    const runtime::Value image = nchw ? images : b.reshape(images, input->shape);
    ox::ImportOptions options;
    if (nchw) options.nhwc_inputs = {input->name};
    if (mixed) options.compute = runtime::DType::kBF16;
    options.training = mode == estimator::Mode::kTrain;
    options.seed = 1;
    options.also_return = {job.logits};
    auto imported = ox::import_graph(b, *model, {{job.input.name, image}}, options);
    if (!imported.ok()) return imported.status();
    runtime::Value logits = imported->outputs.at(job.logits);
    if (logits.dtype() != runtime::DType::kF32) logits = b.cast(logits, runtime::DType::kF32);
    estimator::TPUEstimatorSpec spec = classifier_spec(b, logits, labels, mode, optimizer);
    // The file's weights, in place of the variables' zeros.
    spec.init_fn = [values = imported->initial_values](runtime::Variables* variables) {
      for (const auto& [name, value] : values) {
        auto it = variables->find(name);
        if (it == variables->end())
          return absl::InternalError(str_cat("no variable '", name, "' to start from the file"));
        it->second.f = value.f;
      }
      return absl::OkStatus();
    };
    return spec;
  };
}

absl::Status save_onnx_weights(const OnnxJob& job, const std::string& model_dir) {
  auto model = ox::parse_onnx(*job.bytes, job.path, 1);
  if (!model.ok()) return model.status();
  runtime::GraphBuilder b;
  std::map<std::string, runtime::Value> inputs;
  for (const ox::TensorInfo& in : model->inputs)
    inputs[in.name] = b.infeed(in.name, in.dtype, in.shape);
  auto imported = ox::import_graph(b, *model, inputs, {});
  if (!imported.ok()) return imported.status();
  auto saved = estimator::save_checkpoint(model_dir, 0, imported->initial_values, 1);
  return saved.ok() ? absl::OkStatus() : saved.status();
}

}  // namespace tpusim::jobs
