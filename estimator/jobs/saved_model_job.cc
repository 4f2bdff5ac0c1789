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

// The predictions that could be logits: float, [batch, classes >= 2].
std::vector<std::string> classifier_outputs(const estimator::LoadedModel& m) {
  std::vector<std::string> names;
  for (const std::string& p : m.predictions) {
    for (const auto& o : m.graph.outputs()) {
      const Node& n = m.graph.node(o.node);
      if (o.name == "prediction/" + p && n.dtype != runtime::DType::kS32 && n.shape.rank() == 2 &&
          n.shape.dim(0) == m.batch_size && n.shape.dim(1) >= 2)
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

// The folder's graph replayed on the job's builder: its image infeed fed the images.
struct SavedModelForward {
  std::string dir;
  std::shared_ptr<const estimator::LoadedModel> model;
  std::shared_ptr<const runtime::GraphDef> graph;
  int logits = -1;    // the graph's node
  bool nchw = false;  // the infeed takes [N, C, H, W]

  absl::StatusOr<ImportedModel::Forward> operator()(
      runtime::GraphBuilder& b, runtime::Value images,
      const ImportedModel::ForwardOptions& options) const {
    const estimator::TensorSpec& in = model->inputs.front();
    if (options.mixed) {
      ImportedModel own;
      own.path = dir;
      own.own_dtypes = true;
      return check_imported_policy(own, runtime::models::DTypePolicy::kMixedBFloat16);
    }
    if (options.batch != model->batch_size) {
      return absl::InvalidArgumentError(str_cat(dir, "'s graph takes ", model->batch_size,
                                                " examples a replica, not ", options.batch));
    }
    runtime::Value fed = nchw ? b.transpose(images, {0, 3, 1, 2}) : b.reshape(images, in.shape);
    if (fed.dtype() != in.dtype) fed = b.cast(fed, in.dtype);
    auto values = runtime::replay(*graph, b, {{in.name, fed}});
    if (!values.ok())
      return absl::Status(values.status().code(), str_cat(dir, ": ", values.status().message()));
    ImportedModel::Forward out;
    out.logits = (*values)[static_cast<size_t>(logits)];
    if (out.logits.dtype() != runtime::DType::kF32)
      out.logits = b.cast(out.logits, runtime::DType::kF32);
    out.initial_values = model->variables;
    return out;
  }
};

// The images' geometry from the saved model's one input.
absl::Status saved_image_geometry(const estimator::LoadedModel& m, const std::string& dir,
                                  ImportedModel* job, bool* nchw) {
  if (m.inputs.size() != 1) {
    return absl::InvalidArgumentError(
        str_cat(dir, " has ", m.inputs.size(), " inputs; tpusim feeds one (images)"));
  }
  const estimator::TensorSpec& in = m.inputs.front();
  auto geometry = image_geometry(dir, in.name, in.dtype, in.shape.dims(), job);
  if (!geometry.ok()) return geometry.status();
  *nchw = *geometry == ImageLayout::kNCHW;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImportedModel> open_saved_model_job(const std::string& dir,
                                                   const std::string& output) {
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
  bool nchw = false;
  if (auto s = saved_image_geometry(*model, dir, &job, &nchw); !s.ok()) return s;
  const std::vector<std::string> candidates = classifier_outputs(*model);
  if (candidates.empty()) {
    return absl::InvalidArgumentError(str_cat(
        dir, " has no float [", model->batch_size, ", classes] prediction (it has ",
        str_join(model->predictions, ", "), "); tpusim trains classifiers on their logits"));
  }
  auto chosen = choose_name(output.empty() ? candidates : model->predictions, output,
                            "classifier prediction", dir, "--saved-model-output");
  if (!chosen.ok()) return chosen.status();
  if (std::find(candidates.begin(), candidates.end(), *chosen) == candidates.end()) {
    return absl::InvalidArgumentError(str_cat(dir, ": prediction '", *chosen, "' is no float [",
                                              model->batch_size,
                                              ", classes] logits or probabilities"));
  }
  const int out = output_node(model->graph, "prediction/" + *chosen);
  job.classes = model->graph.node(out).shape.dim(1);
  job.forward = SavedModelForward{
      dir, model, std::make_shared<const runtime::GraphDef>(runtime::to_proto(model->graph)),
      softmax_input(model->graph, out), nchw};
  return job;
}

}  // namespace tpusim::jobs
