#include "runtime/graph/hbm_floor.h"

#include <set>
#include <string_view>
#include <vector>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime {

namespace {

double stored_bytes(const Node& n) {
  const double element = n.dtype == DType::kBF16 ? 2 : 4;
  return element * static_cast<double>(n.shape.elements());
}

bool in_backward_pass(const Node& n) {
  return std::string_view(n.label).substr(0, 10) == "gradients/";
}

// Whether `n` is a view of its first input rather than a value of its own (hbm_floor.h).
bool is_view(const Graph& g, const Node& n) {
  switch (n.op) {
    case Op::kReshape:
    case Op::kTranspose:
    case Op::kBroadcast:
    case Op::kExtractPatches:
    case Op::kStopGradient:
      return true;
    case Op::kCast:  // widening or as wide: the input, no larger, is what is stored
      return stored_bytes(n) >= stored_bytes(g.node(n.inputs.at(0)));
    default:
      return false;
  }
}

// The node whose value `id` is a view of (itself when it is none).
int stored_value(const Graph& g, int id) {
  while (!g.node(id).inputs.empty() && is_view(g, g.node(id))) id = g.node(id).inputs[0];
  return id;
}

bool is_source(const Node& n) {
  return n.op == Op::kVariable || n.op == Op::kConstant || n.op == Op::kInfeed;
}

}  // namespace

HbmFloor hbm_floor(const Graph& g) {
  HbmFloor floor;
  // Every input is an earlier node (ids are creation order; serialize.cc refuses any other), so
  // one pass in id order finds what depends on the backward pass.
  std::vector<bool> after_backward(static_cast<size_t>(g.size()), false);
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    bool after = in_backward_pass(n);
    for (int in : n.inputs) after = after || after_backward[static_cast<size_t>(in)];
    after_backward[static_cast<size_t>(id)] = after;
  }
  std::set<int> updated;
  for (const VariableUpdate& u : g.updates()) updated.insert(u.variable);
  // A dead node (autodiff's gradient of a constant or of a mask, which no output or update
  // needs) is computed by no backend, so what it reads is not read.
  const std::vector<bool> live = live_nodes(g);
  std::set<int> saved, gradients;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (!live[static_cast<size_t>(id)]) continue;
    if (n.op == Op::kInfeed) floor.inputs += stored_bytes(n);
    if (n.op == Op::kVariable) floor.variables += stored_bytes(n) * (updated.count(id) ? 2 : 1);
    for (int in : n.inputs) {
      const int value = stored_value(g, in);
      const Node& v = g.node(value);
      if (in_backward_pass(n) && !after_backward[static_cast<size_t>(value)] && !is_source(v))
        saved.insert(value);
      if (!in_backward_pass(n) && after_backward[static_cast<size_t>(id)] && in_backward_pass(v))
        gradients.insert(value);
    }
  }
  for (int id : saved) floor.saved_activations += 2 * stored_bytes(g.node(id));
  for (int id : gradients) floor.gradients += 2 * stored_bytes(g.node(id));
  return floor;
}

}  // namespace tpusim::runtime
