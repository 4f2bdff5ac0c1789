// Saved models on any bytes: the folder's saved_model.pb fuzzed, beside a weights file written
// for it (zeros for each variable its graph declares, at the step it names, so loading gets past
// the weights to the signature), then loaded (the graph rebuilt and checked, the signature and
// predictions against it), and, when it loads, what `tpusim predict --saved-model` runs on it: the
// classifier check, the graph compiled for the tpusim backend on a v3-8 and one step run on zeros
// of its inputs, under a cap of 200,000 cycles (a run past it stops and the System recovers for the
// next input). Models with a node past 2^20 elements are loaded but not run: legal, only slow to
// fuzz.
#include <cstdlib>
#include <filesystem>

#include "estimator/checkpoint.h"
#include "estimator/saved_model.h"
#include "estimator/saved_model.pb.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/serialize.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace tpusim;

constexpr uint64_t kMaxRunCycles = 200000;
constexpr int64_t kMaxNodeElements = int64_t{1} << 20;

runtime::Backend& tpusim_backend() {
  static const std::unique_ptr<runtime::Backend> backend = [] {
    runtime::BackendArgs args;
    args.slice = "v3-8";
    args.max_run_cycles = kMaxRunCycles;
    auto made = runtime::make_backend("tpusim", args);
    if (!made.ok()) std::abort();
    return *std::move(made);
  }();
  return *backend;
}

// The weights a saved model of these bytes needs, as export_saved_model writes them: every
// variable of its graph (zeros) at its global_step. Nothing when the bytes are no saved model
// or its graph does not rebuild (loading refuses those first) or a variable is too large.
void write_weights_for(const uint8_t* data, size_t size, const std::string& path) {
  estimator::SavedModel m;
  runtime::Variables zeros;
  int64_t step = 0;
  if (m.ParseFromArray(data, static_cast<int>(size))) {
    step = m.global_step();
    if (auto graph = runtime::from_proto(m.graph()); graph.ok()) {
      for (int id : graph->variables()) {
        const runtime::Node& v = graph->node(id);
        if (v.shape.elements_within(kMaxNodeElements) < 0) break;
        zeros[v.attrs.name] = runtime::HostTensor::zeros(v.dtype, v.shape);
      }
    }
  }
  (void)estimator::write_checkpoint(path, step, zeros);
}

bool small_enough(const runtime::Graph& graph) {
  for (const runtime::Node& node : graph.nodes()) {
    if (node.shape.elements_within(kMaxNodeElements) < 0) return false;
  }
  return true;
}

// What predict runs on a loaded model. Errors are answers; an exception or a crash is a finding.
void predict(const estimator::LoadedModel& model, const std::string& dir) {
  if (!estimator::check_classifier(model, dir).ok() || !small_enough(model.graph)) return;
  runtime::Backend& backend = tpusim_backend();
  auto exe = backend.compile(model.graph, runtime::CompileOptions{});
  if (!exe.ok()) return;
  runtime::Feeds feeds;
  for (const estimator::TensorSpec& input : model.inputs)
    feeds.emplace(input.name, runtime::HostTensor::zeros(input.dtype, input.shape));
  runtime::Variables variables = model.variables;
  (void)backend.run(**exe, variables, {feeds}, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d =
        std::filesystem::path(tpusim::fuzz::write_input(nullptr, 0, "saved")).string() + "-dir";
    std::filesystem::create_directories(d);
    return d;
  }();
  write_weights_for(data, size, dir + "/variables.tpuckpt");
  const std::string pb = tpusim::fuzz::write_input(data, size, "saved_model.pb");
  std::error_code ec;
  std::filesystem::copy_file(pb, dir + "/saved_model.pb",
                             std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return 0;
  auto model = tpusim::estimator::load_saved_model(dir);
  if (model.ok()) predict(*model, dir);
  return 0;
}
