#include "runtime/graph/graph.h"

#include "common/strings.h"

namespace tpusim::runtime {

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = {
#define TPUSIM_OP_ROW(op, name, op_class) {Op::op, name, OpClass::op_class},
      TPUSIM_GRAPH_OPS(TPUSIM_OP_ROW)
#undef TPUSIM_OP_ROW
  };
  return table;
}

const char* op_name(Op op) {
  const auto index = static_cast<size_t>(op);
  return index < op_table().size() ? op_table()[index].name : "?";
}

OpClass op_class(Op op) { return op_table().at(static_cast<size_t>(op)).op_class; }

bool is_binary_elementwise(Op op) { return op_class(op) == OpClass::kBinary; }

bool is_unary_elementwise(Op op) { return op_class(op) == OpClass::kUnary; }

bool is_elementwise(Op op) {
  const OpClass c = op_class(op);
  return c == OpClass::kBinary || c == OpClass::kUnary || c == OpClass::kOtherElementwise;
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
