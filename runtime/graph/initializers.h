#pragma once
// Initial values of variables, as TensorFlow defines the initialisers: fans are taken from the
// shape ([in, out] for dense kernels, [kh, kw, in, out] for conv kernels: receptive field x
// channels). Values depend only on the initializer's seed and the variable's name, so every
// backend starts from the same weights.

#include <map>
#include <string>

#include <absl/status/statusor.h>

#include "runtime/graph/graph.h"

namespace tpusim::runtime {

// The initial value of one variable node.
HostTensor initial_value(const Node& variable);

// Name -> value for every variable of `graph`.
std::map<std::string, HostTensor> initial_variables(const Graph& graph);

// Name -> the variable's dtype and shape with no elements, for a run that computes no values
// (timing-only): BERT-Large's 335 M parameters and their optimizer slots are 4 GB of values.
std::map<std::string, HostTensor> variable_shapes(const Graph& graph);

}  // namespace tpusim::runtime
