#pragma once
// The interface every backend implements (ARCHITECTURE.md, "The runtime"): compile a graph once
// into an executable, then run it for a number of steps. Each step reads one batch for every
// infeed, computes the graph's outputs and applies its variable updates, so a training step and
// an inference step are the same call. Backends are chosen by name (make_backend); a model
// runs on any of them with no change.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/graph.h"

namespace tpusim::runtime {

struct CompileOptions {
  // "fp32": matmuls and convolutions in f32; "mxu": their inputs rounded to bf16 and products
  // accumulated in f32, as the TPU's MXU does at DEFAULT precision.
  std::string precision = "fp32";
};

using Feeds = std::map<std::string, HostTensor>;      // infeed name -> one batch
using Variables = std::map<std::string, HostTensor>;  // variable name -> value
using Outputs = std::map<std::string, HostTensor>;    // output name -> value

class Executable {
 public:
  virtual ~Executable() = default;
  virtual const Graph& graph() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                              const CompileOptions& options) = 0;
  // Runs one step per element of `feeds`, steps numbered from `first_step` (the counter that
  // random ops such as dropout use). `variables` must hold every variable of the graph; the
  // updates of each step are written back into it. Returns each step's outputs.
  virtual absl::StatusOr<std::vector<Outputs>> run(Executable& executable, Variables& variables,
                                                   const std::vector<Feeds>& feeds,
                                                   uint64_t first_step) = 0;
};

// The backend named `name` ("cpu", ...); NotFound lists the known ones.
absl::StatusOr<std::unique_ptr<Backend>> make_backend(const std::string& name);

// Checks that `feeds` has a batch of the right type and shape for every infeed of `graph`, and
// `variables` every variable; errors name the infeed or variable and both shapes.
absl::Status check_inputs(const Graph& graph, const Variables& variables, const Feeds& feeds);

}  // namespace tpusim::runtime
