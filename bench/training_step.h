#pragma once
// What the training-step benchmarks (cpu and gpu backends) share: a zoo model's graph compiled
// on a backend with its variables initialised, and the inputs fed to it.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/backend/registry.h"
#include "runtime/graph/graph.h"
#include "runtime/graph/initializers.h"
#include "runtime/models/zoo.h"
#include "runtime/opcheck/harness.h"

namespace tpusim::bench {

// One seeded batch per replica for each of the graph's infeeds: floats in [0, 1), integers in
// {0, 1} (a label, a token id, a segment or a mask: every one a valid value).
inline std::vector<runtime::Feeds> replica_feeds(const runtime::Graph& graph, uint32_t replicas) {
  runtime::opcheck::OpCase c;
  for (int id : graph.infeeds()) {
    const runtime::Node& n = graph.node(id);
    c.inputs.push_back(
        {n.attrs.name, n.dtype, n.shape, 0, n.dtype == runtime::DType::kS32 ? 2.0f : 1.0f});
  }
  std::vector<runtime::Feeds> feeds;
  for (uint32_t r = 0; r < replicas; ++r) feeds.push_back(runtime::opcheck::make_feeds(c, 7 + r));
  return feeds;
}

// Zoo model `model`'s fp32 training step (SGD at 0.01) for a global batch split over
// `replicas` into `b`; false once the benchmark is skipped.
inline bool build_step(benchmark::State& state, runtime::GraphBuilder& b, const char* model,
                       int64_t batch, uint32_t replicas) {
  if (runtime::models::build_training_step(b, model, batch / replicas, 0.01f, 1,
                                           runtime::models::DTypePolicy::kFloat32, replicas)
          .ok()) {
    return true;
  }
  state.SkipWithError("build failed");
  return false;
}

struct PreparedStep {
  std::unique_ptr<runtime::Backend> backend;
  std::unique_ptr<runtime::Executable> exe;
  runtime::Variables vars;
};

// Backend `name` with `graph` compiled at `precision` over `replicas` and its variables
// initialised; nullopt once the benchmark is skipped with the reason.
inline std::optional<PreparedStep> prepare_step(benchmark::State& state, const std::string& name,
                                                const runtime::Graph& graph,
                                                runtime::Precision precision, uint32_t replicas) {
  auto backend = runtime::make_backend(name);
  if (!backend.ok()) {
    state.SkipWithError(std::string(backend.status().message()).c_str());
    return std::nullopt;
  }
  runtime::CompileOptions options{precision};
  options.replicas = replicas;
  auto exe = (*backend)->compile(graph, options);
  if (!exe.ok()) {
    state.SkipWithError(std::string(exe.status().message()).c_str());
    return std::nullopt;
  }
  return PreparedStep{*std::move(backend), *std::move(exe), runtime::initial_variables(graph)};
}

}  // namespace tpusim::bench
