#include "estimator/jobs/saved_model_job.h"

#include <filesystem>
#include <memory>

#include "common/strings.h"
#include "estimator/saved_model.h"
#include "runtime/graph/serialize.h"

namespace tpusim::jobs {
namespace {

using runtime::Graph;
using runtime::Node;
using runtime::Op;

// `id`, or what it is a cast of.
int through_casts(const Graph& g, int id) {
  while (g.node(id).op == Op::kCast) id = g.node(id).inputs[0];
  return id;
}

// The logits `id` is the softmax of, as layers::softmax builds it (exp(x - max) / sum, in f32
// with casts around it for bf16), or `id` itself.
int softmax_input(const Graph& g, int id) {
  const Node& div = g.node(through_casts(g, id));
  if (div.op != Op::kDiv) return id;
  const Node& exp = g.node(div.inputs[0]);
  if (exp.op != Op::kExp) return id;
  const Node& sub = g.node(exp.inputs[0]);
  if (sub.op != Op::kSub) return id;
  return through_casts(g, sub.inputs[0]);
}

// The rows of the smallest table the infeed `name` indexes directly (a gather of a variable or
// constant, the ids maybe cast first), or 0.
int64_t id_bound(const Graph& g, const std::string& name) {
  int64_t bound = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::kGather || n.inputs.size() != 2) continue;
    const Node& ids = g.node(through_casts(g, n.inputs[1]));
    const Node& table = g.node(n.inputs[0]);
    if (ids.op != Op::kInfeed || ids.attrs.name != name ||
        (table.op != Op::kVariable && table.op != Op::kConstant) || table.shape.rank() < 1)
      continue;
    if (bound == 0 || table.shape.dim(0) < bound) bound = table.shape.dim(0);
  }
  return bound;
}

// The predictions `loss` can train on: float with the batch first, and for cross-entropy
// [batch, classes >= 2].
std::vector<std::string> trainable_predictions(const estimator::LoadedModel& m, Loss loss) {
  std::vector<std::string> names;
  for (const std::string& p : m.predictions) {
    for (const auto& o : m.graph.outputs()) {
      const Node& n = m.graph.node(o.node);
      if (o.name != "prediction/" + p || n.dtype == runtime::DType::kS32 || n.shape.rank() < 1 ||
          n.shape.dim(0) != m.batch_size)
        continue;
      if (loss == Loss::kMeanSquaredError || (n.shape.rank() == 2 && n.shape.dim(1) >= 2))
        names.push_back(p);
    }
  }
  return names;
}

int output_node(const Graph& g, const std::string& name) {
  for (const auto& o : g.outputs()) {
    if (o.name == name) return o.node;
  }
  return -1;
}

// The folder's graph replayed on the job's builder: its infeeds fed from the features.
struct SavedModelForward {
  std::string dir, image_input;
  std::shared_ptr<const estimator::LoadedModel> model;
  std::shared_ptr<const runtime::GraphDef> graph;
  int output = -1;    // the graph's node trained on
  bool nchw = false;  // the image infeed takes [N, C, H, W]

  // The value infeed `in` is fed.
  absl::StatusOr<runtime::Value> fed(runtime::GraphBuilder& b, const estimator::TensorSpec& in,
                                     const estimator::Features& features) const {
    runtime::Value v;
    const auto it = features.find(in.name);
    const auto image = features.find("image");
    if (in.name == image_input && image != features.end() &&
        (it == features.end() || it->second.shape() != in.shape)) {
      v = nchw ? b.transpose(image->second, {0, 3, 1, 2}) : b.reshape(image->second, in.shape);
    } else if (it != features.end()) {
      v = it->second;
    } else {
      return absl::InvalidArgumentError(
          str_cat(dir, ": no feature '", in.name, "' for the model's input"));
    }
    if (v.dtype() != in.dtype) v = b.cast(v, in.dtype);
    return v;
  }

  absl::StatusOr<ImportedModel::Forward> operator()(
      runtime::GraphBuilder& b, const estimator::Features& features,
      const ImportedModel::ForwardOptions& options) const {
    if (options.mixed) return own_dtypes_refusal(dir);
    if (options.batch != model->batch_size) {
      return absl::InvalidArgumentError(str_cat(dir, "'s graph takes ", model->batch_size,
                                                " examples a replica, not ", options.batch));
    }
    std::map<std::string, runtime::Value> feeds;
    for (const estimator::TensorSpec& in : model->inputs) {
      auto v = fed(b, in, features);
      if (!v.ok()) return v.status();
      feeds[in.name] = *v;
    }
    auto values = runtime::replay(*graph, b, feeds);
    if (!values.ok())
      return absl::Status(values.status().code(), str_cat(dir, ": ", values.status().message()));
    ImportedModel::Forward out;
    out.output = (*values)[static_cast<size_t>(output)];
    if (out.output.dtype() != runtime::DType::kF32)
      out.output = b.cast(out.output, runtime::DType::kF32);
    out.initial_values = model->variables;
    return out;
  }
};

// The prediction to train on: `output`, or the only one `loss` can train on.
absl::StatusOr<std::string> trained_prediction(const estimator::LoadedModel& m,
                                               const std::string& dir, const std::string& output,
                                               Loss loss) {
  const std::vector<std::string> candidates = trainable_predictions(m, loss);
  if (output.empty() && candidates.empty()) {
    return absl::InvalidArgumentError(str_cat(
        dir, " has no prediction ", loss_name(loss), " can train on (it has ",
        str_join(m.predictions, ", "),
        loss == Loss::kSoftmaxCrossEntropy ? "; cross-entropy takes float [batch, classes] logits "
                                             "or their softmax)"
                                           : "; it takes a float prediction, the batch first)"));
  }
  return choose_name(output.empty() ? candidates : m.predictions, output, "prediction", dir,
                     "--saved-model-output");
}

}  // namespace

absl::StatusOr<ImportedModel> open_saved_model_job(const std::string& dir,
                                                   const std::string& output, Loss loss) {
  auto loaded = estimator::load_saved_model(dir);
  if (!loaded.ok()) return loaded.status();
  auto model = std::make_shared<const estimator::LoadedModel>(*std::move(loaded));
  ImportedModel job;
  job.path = dir;
  job.name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (job.name.empty() || job.name == ".")
    job.name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  job.fixed_batch = model->batch_size;
  job.global_step = model->global_step;
  job.own_dtypes = true;
  job.loss = loss;
  std::vector<FileTensor> inputs;
  for (const estimator::TensorSpec& in : model->inputs)
    inputs.push_back({in.name, in.dtype, in.shape.dims(), true, id_bound(model->graph, in.name)});
  if (auto s = set_model_inputs(inputs, "", &job); !s.ok()) return s;
  auto chosen = trained_prediction(*model, dir, output, loss);
  if (!chosen.ok()) return chosen.status();
  const int out = output_node(model->graph, "prediction/" + *chosen);
  const Node& node = model->graph.node(out);
  if (auto s = set_model_output({*chosen, node.dtype, node.shape.dims(), true}, &job); !s.ok())
    return s;
  const bool nchw = !job.image_input.empty() && [&] {
    for (const auto& in : model->inputs) {
      if (in.name == job.image_input)
        return is_nchw(in.shape.dims(), ImageGeometry{job.image_side, job.image_channels});
    }
    return false;
  }();
  job.forward =
      SavedModelForward{dir,
                        job.image_input,
                        model,
                        std::make_shared<const runtime::GraphDef>(runtime::to_proto(model->graph)),
                        loss == Loss::kSoftmaxCrossEntropy ? softmax_input(model->graph, out) : out,
                        nchw};
  return job;
}

}  // namespace tpusim::jobs
