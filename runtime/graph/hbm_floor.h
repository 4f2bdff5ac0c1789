#pragma once
// The HBM traffic of a training step that stores every value its backward pass reads, from its
// graph alone: what a compiler that recomputes nothing must move between the chip's HBM and its
// cores however well it fuses, the floor the per-op account of a simulated step is held against
// (docs/validation.md, "The HBM account"). XLA's rematerialization can go below it by computing a
// cheap value again instead of storing it. Per replica, in bytes as the device stores them (bf16
// 2 bytes an element):
//   inputs             the infeed's batch, read once;
//   variables          every variable read once, and written once when the step updates it (the
//                      weights, the optimizer's slots, batch norm's moving statistics);
//   gradients          each value of the backward pass that leaves it (read by the all-reduce or
//                      the optimizer), written once and read once;
//   saved activations  each forward value the backward pass reads, written once and read once.
// A value is known by what it is stored as: reshapes, transposes, broadcasts, stop_gradient,
// casts to as many bytes or more, and im2col patches are views of their input (XLA folds them
// into the reader's layout or computes them while it reads), so the value a backward op reads
// through them is their input's. Dead nodes (live_nodes, graph.h) read nothing. The backward pass
// is the nodes autodiff names "gradients/..." (gradients() called outside any scope, as the
// estimator and the zoo call it); the forward pass, the nodes that depend on none of them; what
// depends on the gradients and is not one (the all-reduce, the optimizer) is neither.

#include <cstdint>

#include "runtime/graph/graph.h"

namespace tpusim::runtime {

struct HbmFloor {
  double inputs = 0;
  double variables = 0;
  double gradients = 0;
  double saved_activations = 0;
  double total() const { return inputs + variables + gradients + saved_activations; }
  HbmFloor scaled(double replicas) const {
    return {inputs * replicas, variables * replicas, gradients * replicas,
            saved_activations * replicas};
  }
};

HbmFloor hbm_floor(const Graph& step);

}  // namespace tpusim::runtime
