#pragma once
// Rematerialised patches: XLA compiles a convolution's gradient with respect to its kernel as a
// convolution of the layer's input with the output gradient, so the im2col patches of the forward
// pass are never kept from the forward to the backward pass; only the input activation is. The
// graph's convolutions are im2col patches times the kernel (layers::conv2d), and autodiff reads
// the forward's patches again for the kernel gradient, which would keep every layer's patches
// (kh x kw times its input) alive in HBM across the whole step. This rewrite gives each later
// reader of an extract_patches node a copy of it, placed right before that reader, so the
// patches are built again from the input where the backward pass needs them (in VMEM, when the
// reader is a fused convolution gradient) and live only there. Building them twice costs vector
// work, so the compiler does it, as XLA's rematerialization pass, only for a step whose tensors
// do not fit its HBM otherwise (compile_graph).

#include <memory>
#include <vector>

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

}  // namespace tpusim::runtime::tpusim_backend
