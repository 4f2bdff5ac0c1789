#pragma once
// The graph patterns the fused convolutions match (conv_fusion.cc): the ops layers::conv2d and
// autodiff make of a convolution, its kernel gradient and its input gradient.

#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

// The node reading `id`, when exactly one needed node does and `id` is no output or update value;
// else -1.
int sole_reader(const Graph& graph, const std::vector<bool>& needed, int id);

// A matmul of a rank-4 lhs by a shared rank-2 rhs, as conv2d and its input gradient make.
bool image_matmul(const Graph& graph, int id);

// For a kernel gradient matmul(transpose(reshape(extract_patches(x))), g2) with g2 [pixels,
// filters], as autodiff makes it, the extract_patches node; else -1.
int filter_grad_patches(const Graph& graph, int id);

}  // namespace tpusim::runtime::tpusim_backend
