#pragma once
// Saved models: a model's predict step and weights in a folder that needs no model code to run
// (`tpusim predict --saved-model DIR`). DIR/saved_model.pb is a SavedModel proto
// (estimator/saved_model.proto) holding the graph (runtime/graph/graph.proto), its input
// signature and prediction names; DIR/variables.tpuckpt holds the weights in the checkpoint
// format. Loading rebuilds and re-checks the graph and checks the weights against it.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/graph/graph.h"

namespace tpusim::estimator {

struct TensorSpec {
  std::string name;
  runtime::DType dtype = runtime::DType::kF32;
  // export_saved_model's features: one example's shape. A LoadedModel's inputs: the whole batch's,
  // batch first (LoadedModel::batch_size examples).
  runtime::Shape shape;
};

struct LoadedModel {
  runtime::Graph graph;
  runtime::Variables variables;
  std::vector<TensorSpec> inputs;
  std::vector<std::string> predictions;  // output "prediction/<name>" of the graph
  int64_t batch_size = 0;
  int64_t global_step = 0;
};

absl::Status write_saved_model(const std::string& dir, const runtime::Graph& graph,
                               const runtime::Variables& variables,
                               const std::vector<TensorSpec>& inputs,
                               const std::vector<std::string>& predictions, int64_t batch_size,
                               int64_t global_step);
absl::StatusOr<LoadedModel> load_saved_model(const std::string& dir);
// A saved model whose predictions are "class" and "probabilities" must be the classifier those
// names promise: class s32 [batch], probabilities f32 [batch, classes >= 1] (load_saved_model
// checked that each is one graph output with the batch first). `dir` names it in the error.
absl::Status check_classifier(const LoadedModel& model, const std::string& dir);

}  // namespace tpusim::estimator
