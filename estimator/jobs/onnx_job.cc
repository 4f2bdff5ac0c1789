#include "estimator/jobs/onnx_job.h"

#include <filesystem>
#include <memory>

#include "common/strings.h"
#include "runtime/onnx/importer.h"
#include "runtime/onnx/summary.h"

namespace tpusim::jobs {
namespace {

namespace ox = runtime::onnx_import;

// The images' side and channels for the ONNX input `in`.
absl::Status onnx_image_geometry(const ox::TensorInfo& in, const std::string& path,
                                 ImportedModel* job) {
  if (!in.batched) {
    return absl::InvalidArgumentError(str_cat(path, ": input '", in.name, "' is ",
                                              runtime::dtype_name(in.dtype), in.shape.str(),
                                              "; tpusim feeds images: float with the batch first"));
  }
  auto layout = image_geometry(path, in.name, in.dtype, in.shape.dims(), job);
  return layout.ok() ? absl::OkStatus() : layout.status();
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

// The forward pass of the ONNX file `bytes` (at `path`): its input `input` fed the images, its
// value `logits` returned in f32.
struct OnnxForward {
  std::string path, input, logits;
  std::shared_ptr<const std::string> bytes;  // the file, parsed again at each batch size

  absl::StatusOr<ImportedModel::Forward> operator()(
      runtime::GraphBuilder& b, runtime::Value images,
      const ImportedModel::ForwardOptions& options) const {
    auto model = ox::parse_onnx(*bytes, path, options.batch);
    if (!model.ok()) return model.status();
    const ox::TensorInfo* in = nullptr;
    for (const ox::TensorInfo& t : model->inputs) {
      if (t.name == input) in = &t;
    }
    if (in == nullptr) return absl::InternalError(str_cat(path, ": no input ", input));
    // An NCHW input takes the NHWC images as they are (the importer holds NCHW images NHWC);
    // any other the images reshaped to it (a flat 784 for an MLP).
    const bool nchw = nchw_input(*in, images.shape());
    ox::ImportOptions import;
    if (nchw) import.nhwc_inputs = {input};
    if (options.mixed) import.compute = runtime::DType::kBF16;
    import.training = options.training;
    import.seed = 1;
    import.also_return = {logits};
    auto imported = ox::import_graph(
        b, *model, {{input, nchw ? images : b.reshape(images, in->shape)}}, import);
    if (!imported.ok()) return imported.status();
    ImportedModel::Forward out;
    out.logits = imported->outputs.at(logits);
    if (out.logits.dtype() != runtime::DType::kF32)
      out.logits = b.cast(out.logits, runtime::DType::kF32);
    out.initial_values = std::move(imported->initial_values);
    return out;
  }
};

// What an ONNX model's tensors are called.
std::vector<std::string> names_of(const std::vector<ox::TensorInfo>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  return names;
}

// The input or output of `all` named `name`.
const ox::TensorInfo& named(const std::vector<ox::TensorInfo>& all, const std::string& name) {
  for (const auto& t : all) {
    if (t.name == name) return t;
  }
  return all.front();  // choose_name returned one of `all`
}

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
                                            const std::string& output) {
  auto bytes = ox::read_onnx_file(path);  // read once: the job keeps them for each batch size
  if (!bytes.ok()) return bytes.status();
  auto model = ox::parse_onnx(*bytes, path, 1);
  if (!model.ok()) return model.status();
  if (auto s = check_supported(*model, path); !s.ok()) return s;
  auto in_name = choose_name(names_of(model->inputs), input, "input", path, "--onnx-input");
  if (!in_name.ok()) return in_name.status();
  auto out_name = choose_name(names_of(model->outputs), output, "output", path, "--onnx-output");
  if (!out_name.ok()) return out_name.status();
  if (model->inputs.size() != 1) {
    return absl::InvalidArgumentError(
        str_cat(path, " has ", model->inputs.size(), " inputs; tpusim feeds one (images)"));
  }
  ImportedModel job;
  job.path = path;
  job.name = std::filesystem::path(path).stem().string();
  if (auto s = onnx_image_geometry(named(model->inputs, *in_name), path, &job); !s.ok()) return s;
  const ox::TensorInfo& out = named(model->outputs, *out_name);
  const std::vector<int64_t>& o = out.shape.dims();
  if (o.size() != 2 || o[1] < 2) {
    return absl::InvalidArgumentError(str_cat(path, ": output '", out.name, "' is ",
                                              out.shape.str(),
                                              "; tpusim trains classifiers: [N, classes] logits"));
  }
  job.classes = o[1];
  job.forward = OnnxForward{path, *in_name, logits_of(*model, out.name),
                            std::make_shared<const std::string>(*std::move(bytes))};
  return job;
}

}  // namespace tpusim::jobs
