#pragma once
// Rematerialization: values a step would keep in HBM for a later reader are computed again right
// before that reader instead, as XLA's rematerialization pass does for a program that would not
// fit its device's memory otherwise. The compiler tries them in this order, each only when the
// step does not fit as planned (compile_graph):
//
// 1. Patches (rematerialize_patches). XLA compiles a convolution's gradient with respect to its
//    kernel as a convolution of the layer's input with the output gradient, so the im2col patches
//    of the forward pass are never kept from the forward to the backward pass; only the input
//    activation is. The graph's convolutions are im2col patches times the kernel
//    (layers::conv2d), and autodiff reads the forward's patches again for the kernel gradient,
//    which would keep every layer's patches (kh x kw times its input) alive across the whole
//    step. Each later reader of an extract_patches node gets its own copy, built again from the
//    input where the backward pass needs it (in VMEM, when the reader is a fused convolution
//    gradient).
// 2. Elementwise values at the memory peak (rematerialize_at_peak). Where the planned step's
//    device peak is reached, a value held there for readers after it, that is computed by
//    elementwise ops (casts, selects, broadcasts of smaller values included) from values that
//    are held there anyway (or are variables and constants), is computed again right before each
//    of those readers: the buffer is freed after its earlier readers and the recomputation costs
//    vector work only, in the reader's fused fragment when the reader is elementwise. As XLA's
//    pass, it takes the largest such values first until they cover the excess, plans again and
//    repeats at the new peak; when all of them together could not cover it, the step is refused
//    as it stands. Random numbers are never recomputed (TensorFlow's are stateful), so a dropout
//    mask stays.
//
// Building a value twice costs vector work, so neither runs for a step that fits.

#include <memory>
#include <vector>

#include "runtime/backend/tpusim/step_plan.h"
#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

struct Rematerialized {
  Graph graph;
  std::vector<int> new_id;  // per node of the given graph, its id in `graph`
  std::vector<int> old_id;  // per node of `graph`, the given node it is (or is a copy of)
};

// The graph with every extract_patches read again after its first reader recomputed for that
// reader; null when there is none.
std::unique_ptr<Rematerialized> rematerialize_patches(const Graph& graph);

// `graph` with values held at `refused`'s device peak computed again for their readers after it
// (the largest first, until they cover the excess over `refused.hbm_share`); null when no value
// there can be, or all of them together would not cover it. `refused` is plan_step's plan of
// `graph` that did not fit; `recomputable_bytes`, when given, gets the bytes of all of them.
std::unique_ptr<Rematerialized> rematerialize_at_peak(const Graph& graph, const StepPlan& refused,
                                                      uint64_t* recomputable_bytes = nullptr);

// `second` (a rewrite of `first`'s graph) with its ids mapped back to the graph `first` rewrote.
std::unique_ptr<Rematerialized> compose(const Rematerialized& first, Rematerialized second);

}  // namespace tpusim::runtime::tpusim_backend
