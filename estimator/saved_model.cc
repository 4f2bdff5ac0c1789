#include "estimator/saved_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/input_file.h"
#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/saved_model.pb.h"
#include "runtime/graph/serialize.h"

namespace tpusim::estimator {

absl::Status write_saved_model(const std::string& dir, const runtime::Graph& graph,
                               const runtime::Variables& variables,
                               const std::vector<TensorSpec>& inputs,
                               const std::vector<std::string>& predictions, int64_t batch_size,
                               int64_t global_step) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(str_cat("cannot create ", dir, ": ", ec.message()));
  SavedModel m;
  m.set_format_version(1);
  *m.mutable_graph() = runtime::to_proto(graph);
  for (const auto& in : inputs) {
    auto* i = m.add_inputs();
    i->set_name(in.name);
    i->set_dtype(runtime::dtype_name(in.dtype));
    for (int64_t d : in.shape.dims()) i->add_shape(d);
  }
  for (const auto& p : predictions) m.add_predictions(p);
  m.set_batch_size(batch_size);
  m.set_global_step(global_step);
  if (auto s = write_checkpoint(dir + "/variables.tpuckpt", global_step, variables); !s.ok())
    return s;
  const std::string path = dir + "/saved_model.pb", tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!m.SerializeToOstream(&out)) return absl::InternalError(str_cat("cannot write ", tmp));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(str_cat("cannot rename ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

namespace {

// The signature's predictions against the graph: each named once, each a graph output
// "prediction/<name>" (one output of that name) whose value has the batch first, as predict and
// train slice it by example. DataLoss names the file and the prediction.
absl::Status check_predictions(const SavedModel& m, const runtime::Graph& graph,
                               const std::string& path) {
  if (m.batch_size() < 1)
    return absl::DataLossError(str_cat(path, ": batch_size ", m.batch_size(), " is below 1"));
  // export_saved_model's serving signature has outputs: one of none predicts nothing.
  if (m.predictions().empty())
    return absl::DataLossError(
        str_cat(path, ": declares no predictions; there is nothing to predict"));
  std::set<std::string> seen;
  for (const std::string& name : m.predictions()) {
    auto bad = [&](const std::string& why) {
      return absl::DataLossError(str_cat(path, ": prediction '", name, "' ", why));
    };
    if (!seen.insert(name).second) return bad("is listed twice");
    const std::string output = "prediction/" + name;
    const runtime::NamedValue* found = nullptr;
    for (const auto& o : graph.outputs()) {
      if (o.name != output) continue;
      if (found != nullptr) return bad(str_cat("has more than one graph output '", output, "'"));
      found = &o;
    }
    if (found == nullptr) return bad(str_cat("has no graph output '", output, "'"));
    const runtime::Node& node = graph.node(found->node);
    if (node.shape.rank() < 1 || node.shape.dim(0) != m.batch_size()) {
      return bad(str_cat("is graph node ", found->node, ", ", runtime::dtype_name(node.dtype),
                         node.shape.str(), ", which does not have the batch (", m.batch_size(),
                         ") first"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedModel> load_saved_model(const std::string& dir) {
  const std::string path = dir + "/saved_model.pb";
  auto bytes = read_input_file(path, "saved model", UINT64_MAX);
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(str_cat("no saved model at ", path));
  }
  if (!bytes.ok()) return bytes.status();
  SavedModel m;
  if (!m.ParseFromString(*bytes) || m.format_version() != 1) {
    return absl::DataLossError(str_cat(path, ": not a version-1 tpusim saved model"));
  }
  if (const std::string unknown = runtime::first_unknown_field(m); !unknown.empty()) {
    return absl::DataLossError(
        str_cat(path, ": field ", unknown, " is not in tpusim's saved model schema"));
  }
  LoadedModel out;
  auto graph = runtime::from_proto(m.graph());
  if (!graph.ok())
    return absl::Status(graph.status().code(), str_cat(path, ": ", graph.status().message()));
  out.graph = *std::move(graph);
  for (const auto& i : m.inputs()) {
    TensorSpec spec;
    spec.name = i.name();
    spec.shape = runtime::Shape(std::vector<int64_t>(i.shape().begin(), i.shape().end()));
    const int id = [&] {
      for (int n : out.graph.infeeds())
        if (out.graph.node(n).attrs.name == i.name()) return n;
      return -1;
    }();
    if (id < 0) return absl::DataLossError(str_cat(path, ": input '", i.name(), "' is no infeed"));
    const runtime::Shape& fed = out.graph.node(id).shape;
    if (spec.shape != fed) {
      return absl::DataLossError(str_cat(path, ": input '", i.name(), "' is ", spec.shape.str(),
                                         " in the signature, ", fed.str(), " in the graph"));
    }
    if (fed.rank() < 1 || fed.dim(0) != m.batch_size()) {
      return absl::DataLossError(str_cat(path, ": input '", i.name(), "' is ", fed.str(),
                                         ", whose first dimension is not the saved model's "
                                         "batch_size, ",
                                         m.batch_size()));
    }
    spec.dtype = out.graph.node(id).dtype;
    if (i.dtype() != runtime::dtype_name(spec.dtype)) {
      return absl::DataLossError(str_cat(path, ": input '", i.name(), "' is ", i.dtype(),
                                         " in the signature, ", runtime::dtype_name(spec.dtype),
                                         " in the graph"));
    }
    out.inputs.push_back(spec);
  }
  if (auto s = check_predictions(m, out.graph, path); !s.ok()) return s;
  out.predictions.assign(m.predictions().begin(), m.predictions().end());
  out.batch_size = m.batch_size();
  out.global_step = m.global_step();
  auto ckpt = load_checkpoint(dir + "/variables.tpuckpt");
  if (!ckpt.ok()) return ckpt.status();
  if (ckpt->global_step != m.global_step()) {
    return absl::DataLossError(str_cat(dir, "/variables.tpuckpt: its header's global_step is ",
                                       ckpt->global_step, " where ", path, " says ",
                                       m.global_step()));
  }
  for (int id : out.graph.variables()) {
    const runtime::Node& v = out.graph.node(id);
    auto it = ckpt->variables.find(v.attrs.name);
    if (it == ckpt->variables.end() || it->second.shape != v.shape) {
      return absl::DataLossError(str_cat(dir, "/variables.tpuckpt: no ", v.shape.str(),
                                         " value for variable '", v.attrs.name, "'"));
    }
    out.variables[v.attrs.name] = it->second;
  }
  return out;
}

absl::Status check_classifier(const LoadedModel& model, const std::string& dir) {
  for (const auto& o : model.graph.outputs()) {
    const runtime::Node& n = model.graph.node(o.node);
    const bool cls = o.name == "prediction/class",
               probabilities = o.name == "prediction/probabilities";
    if ((cls && (n.dtype != runtime::DType::kS32 || n.shape.rank() != 1)) ||
        (probabilities &&
         (n.dtype != runtime::DType::kF32 || n.shape.rank() != 2 || n.shape.dim(1) < 1))) {
      return absl::DataLossError(str_cat(dir, "/saved_model.pb: prediction '", o.name.substr(11),
                                         "' is ", runtime::dtype_name(n.dtype), n.shape.str(),
                                         ", where a classifier's is ",
                                         cls ? "s32[batch]" : "f32[batch, classes]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::estimator
