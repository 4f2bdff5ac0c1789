#include "runtime/graph/graph.h"

#include "common/strings.h"

namespace tpusim::runtime {

const char* op_name(Op op) {
  switch (op) {
    case Op::kConstant:
      return "constant";
    case Op::kVariable:
      return "variable";
    case Op::kInfeed:
      return "infeed";
    case Op::kRngUniform:
      return "rng_uniform";
    case Op::kAdd:
      return "add";
    case Op::kSub:
      return "sub";
    case Op::kMul:
      return "mul";
    case Op::kDiv:
      return "div";
    case Op::kMax:
      return "max";
    case Op::kMin:
      return "min";
    case Op::kEqual:
      return "equal";
    case Op::kGreater:
      return "greater";
    case Op::kSelect:
      return "select";
    case Op::kNeg:
      return "neg";
    case Op::kRelu:
      return "relu";
    case Op::kTanh:
      return "tanh";
    case Op::kSigmoid:
      return "sigmoid";
    case Op::kExp:
      return "exp";
    case Op::kLog:
      return "log";
    case Op::kRsqrt:
      return "rsqrt";
    case Op::kSquare:
      return "square";
    case Op::kErf:
      return "erf";
    case Op::kStopGradient:
      return "stop_gradient";
    case Op::kCast:
      return "cast";
    case Op::kReduceSum:
      return "reduce_sum";
    case Op::kReduceMax:
      return "reduce_max";
    case Op::kArgMax:
      return "argmax";
    case Op::kReshape:
      return "reshape";
    case Op::kTranspose:
      return "transpose";
    case Op::kBroadcast:
      return "broadcast";
    case Op::kConcat:
      return "concat";
    case Op::kSlice:
      return "slice";
    case Op::kPad:
      return "pad";
    case Op::kMatMul:
      return "matmul";
    case Op::kExtractPatches:
      return "extract_patches";
    case Op::kPatchesToImage:
      return "patches_to_image";
    case Op::kOneHot:
      return "one_hot";
    case Op::kGather:
      return "gather";
    case Op::kScatterAdd:
      return "scatter_add";
    case Op::kCrossReplicaSum:
      return "cross_replica_sum";
  }
  return "?";
}

bool is_binary_elementwise(Op op) {
  switch (op) {
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMax:
    case Op::kMin:
    case Op::kEqual:
    case Op::kGreater:
      return true;
    default:
      return false;
  }
}

bool is_unary_elementwise(Op op) {
  switch (op) {
    case Op::kNeg:
    case Op::kRelu:
    case Op::kTanh:
    case Op::kSigmoid:
    case Op::kExp:
    case Op::kLog:
    case Op::kRsqrt:
    case Op::kSquare:
    case Op::kErf:
      return true;
    default:
      return false;
  }
}

bool is_elementwise(Op op) {
  return is_binary_elementwise(op) || is_unary_elementwise(op) || op == Op::kSelect ||
         op == Op::kCast;
}

int Graph::add(Node node) {
  nodes_.push_back(std::move(node));
  return size() - 1;
}

std::vector<int> Graph::variables() const {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)].op == Op::kVariable) out.push_back(i);
  }
  return out;
}

std::vector<int> Graph::infeeds() const {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    if (nodes_[static_cast<size_t>(i)].op == Op::kInfeed) out.push_back(i);
  }
  return out;
}

int Graph::find_variable(const std::string& name) const {
  for (int i = 0; i < size(); ++i) {
    const Node& n = nodes_[static_cast<size_t>(i)];
    if (n.op == Op::kVariable && n.attrs.name == name) return i;
  }
  return -1;
}

std::vector<bool> live_nodes(const Graph& graph) {
  std::vector<bool> live(static_cast<size_t>(graph.size()), false);
  for (const auto& o : graph.outputs()) live[static_cast<size_t>(o.node)] = true;
  for (const auto& u : graph.updates()) live[static_cast<size_t>(u.value)] = true;
  for (int id = graph.size() - 1; id >= 0; --id) {  // ids are topological: readers come later
    if (!live[static_cast<size_t>(id)]) continue;
    for (int in : graph.node(id).inputs) live[static_cast<size_t>(in)] = true;
  }
  return live;
}

bool is_statistic(const std::string& variable_name) {
  return variable_name.find("moving_") != std::string::npos;
}

GraphSize graph_size(const Graph& graph) {
  GraphSize size;
  for (const Node& n : graph.nodes()) {
    if (n.op == Op::kVariable) {
      size.parameters += n.shape.elements();
      if (!is_statistic(n.attrs.name)) size.trainable_parameters += n.shape.elements();
    } else if (n.op == Op::kMatMul) {
      // [..., M, K] x [..., K, N] -> [..., M, N]: every output element takes K products.
      const Shape& lhs = graph.node(n.inputs[0]).shape;
      size.matmul_flops += 2.0 * static_cast<double>(n.shape.elements()) *
                           static_cast<double>(lhs.dim(lhs.rank() - 1));
    }
  }
  return size;
}

std::string Graph::dump() const {
  std::string out;
  for (int i = 0; i < size(); ++i) {
    const Node& n = nodes_[static_cast<size_t>(i)];
    std::vector<std::string> args;
    for (int in : n.inputs) args.push_back(str_cat("%", in));
    out += str_cat("%", i, " = ", op_name(n.op), "(", str_join(args, ", "),
                   ") : ", dtype_name(n.dtype), n.shape.str(),
                   n.label.empty() ? "" : str_cat("  # ", n.label), "\n");
  }
  for (const auto& o : outputs_) out += str_cat("output ", o.name, " = %", o.node, "\n");
  for (const auto& u : updates_) out += str_cat("update %", u.variable, " <- %", u.value, "\n");
  return out;
}

}  // namespace tpusim::runtime
