#include "estimator/jobs/onnx_job.h"

#include <filesystem>
#include <memory>
#include <set>

#include "common/strings.h"
#include "runtime/onnx/importer.h"
#include "runtime/onnx/summary.h"

namespace tpusim::jobs {
namespace {

namespace ox = runtime::onnx_import;

// The value the logits are: the output, or the input of the Softmax that makes it.
std::string logits_of(const ox::OnnxModel& m, const std::string& output) {
  for (const onnx::NodeProto& node : m.proto.graph().node()) {
    if (node.output_size() > 0 && node.output(0) == output && node.op_type() == "Softmax" &&
        node.input_size() > 0)
      return node.input(0);
  }
  return output;
}

// The rows of the smallest table `input` indexes directly (a Gather on an initializer, the ids
// maybe Cast first), or 0.
int64_t id_bound(const ox::OnnxModel& m, const std::string& input) {
  const onnx::GraphProto& g = m.proto.graph();
  std::set<std::string> ids = {input};
  for (const onnx::NodeProto& node : g.node()) {
    if (node.op_type() == "Cast" && node.input_size() == 1 && ids.count(node.input(0)) > 0)
      ids.insert(node.output(0));
  }
  int64_t bound = 0;
  for (const onnx::NodeProto& node : g.node()) {
    if (node.op_type() != "Gather" || node.input_size() != 2 || ids.count(node.input(1)) == 0)
      continue;
    for (const onnx::TensorProto& t : g.initializer()) {
      if (t.name() == node.input(0) && t.dims_size() > 0 && (bound == 0 || t.dims(0) < bound))
        bound = t.dims(0);
    }
  }
  return bound;
}

// The ONNX model's value for input `in` from the batch's features (`nhwc`: the images given NHWC
// for an NCHW input, which the importer keeps NHWC).
absl::StatusOr<runtime::Value> input_value(runtime::GraphBuilder& b, const ox::TensorInfo& in,
                                           const estimator::Features& features,
                                           const std::string& image_input, bool* nhwc) {
  *nhwc = false;
  const auto image = features.find("image");
  const auto it = features.find(in.name);
  const bool from_images = in.name == image_input && image != features.end() &&
                           (it == features.end() || it->second.shape() != in.shape);
  if (!from_images) {
    if (it == features.end())
      return absl::InvalidArgumentError(
          str_cat("no feature '", in.name, "' for the model's input"));
    runtime::Value v = it->second;
    if (v.shape() != in.shape) {
      return absl::InvalidArgumentError(str_cat("feature '", in.name, "' is ", v.shape().str(),
                                                " a batch; the model's input is ", in.shape.str()));
    }
    if ((v.dtype() == runtime::DType::kS32) != (in.dtype == runtime::DType::kS32))
      v = b.cast(v, in.dtype);
    return v;
  }
  // An NCHW input takes the NHWC images as they are; any other the images reshaped to it (a flat
  // 784 for an MLP).
  const runtime::Shape images = image->second.shape();
  *nhwc = is_nchw(in.shape.dims(), ImageGeometry{images.dim(1), images.dim(3)});
  return *nhwc ? image->second : b.reshape(image->second, in.shape);
}

// The forward pass of the ONNX file `bytes` (at `path`): its inputs fed from the features, its
// value `output` returned in f32.
struct OnnxForward {
  std::string path, image_input, output;
  std::shared_ptr<const std::string> bytes;  // the file, parsed again at each batch size

  absl::StatusOr<ImportedModel::Forward> operator()(
      runtime::GraphBuilder& b, const estimator::Features& features,
      const ImportedModel::ForwardOptions& options) const {
    auto model = ox::parse_onnx(*bytes, path, options.batch);
    if (!model.ok()) return model.status();
    ox::ImportOptions import;
    std::map<std::string, runtime::Value> inputs;
    for (const ox::TensorInfo& in : model->inputs) {
      bool nhwc = false;
      auto v = input_value(b, in, features, image_input, &nhwc);
      if (!v.ok()) return absl::InvalidArgumentError(str_cat(path, ": ", v.status().message()));
      inputs[in.name] = *v;
      if (nhwc) import.nhwc_inputs.push_back(in.name);
    }
    if (options.mixed) import.compute = runtime::DType::kBF16;
    import.training = options.training;
    import.seed = 1;
    import.also_return = {output};
    auto imported = ox::import_graph(b, *model, inputs, import);
    if (!imported.ok()) return imported.status();
    ImportedModel::Forward out;
    out.output = imported->outputs.at(output);
    if (out.output.dtype() != runtime::DType::kF32)
      out.output = b.cast(out.output, runtime::DType::kF32);
    out.initial_values = std::move(imported->initial_values);
    return out;
  }
};

// A refusal naming the nodes `path` holds that tpusim does not import, or OK.
absl::Status check_supported(const ox::OnnxModel& model, const std::string& path) {
  auto summary = ox::summarize(model);
  if (!summary.ok()) return summary.status();
  if (summary->unsupported.empty()) return absl::OkStatus();
  std::vector<std::string> nodes;
  for (const auto& u : summary->unsupported)
    nodes.push_back(str_cat(u.op_type, " (node '", u.node, "')"));
  return absl::InvalidArgumentError(str_cat(path, ": tpusim does not import ",
                                            str_join(nodes, ", "), "; `tpusim import ", path,
                                            "` lists what it does"));
}

}  // namespace

absl::StatusOr<ImportedModel> open_onnx_job(const std::string& path, const std::string& input,
                                            const std::string& output, Loss loss) {
  auto bytes = ox::read_onnx_file(path);  // read once: the job keeps them for each batch size
  if (!bytes.ok()) return bytes.status();
  auto model = ox::parse_onnx(*bytes, path, 1);
  if (!model.ok()) return model.status();
  if (auto s = check_supported(*model, path); !s.ok()) return s;
  ImportedModel job;
  job.path = path;
  job.name = std::filesystem::path(path).stem().string();
  job.loss = loss;
  std::vector<FileTensor> inputs;
  for (const ox::TensorInfo& in : model->inputs)
    inputs.push_back({in.name, in.dtype, in.shape.dims(), in.batched, id_bound(*model, in.name)});
  if (auto s = set_model_inputs(inputs, input, &job); !s.ok()) return s;
  std::vector<std::string> outputs;
  for (const ox::TensorInfo& out : model->outputs) outputs.push_back(out.name);
  auto chosen = choose_name(outputs, output, "output", path, "--onnx-output");
  if (!chosen.ok()) return chosen.status();
  for (const ox::TensorInfo& out : model->outputs) {
    if (out.name != *chosen) continue;
    // Parsed at batch 1, an output's first dimension is taken as its batch.
    if (auto s = set_model_output({out.name, out.dtype, out.shape.dims(), true}, &job); !s.ok())
      return s;
  }
  // Cross-entropy reads the logits: the input of a final Softmax.
  const std::string trained =
      loss == Loss::kSoftmaxCrossEntropy ? logits_of(*model, *chosen) : *chosen;
  job.forward = OnnxForward{path, job.image_input, trained,
                            std::make_shared<const std::string>(*std::move(bytes))};
  return job;
}

}  // namespace tpusim::jobs
