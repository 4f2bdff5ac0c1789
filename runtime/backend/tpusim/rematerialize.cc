#include "runtime/backend/tpusim/rematerialize.h"

#include <map>
#include <utility>

namespace tpusim::runtime::tpusim_backend {
namespace {

// Per extract_patches node, its first reader (the forward product or pool that builds on it);
// -1 for other nodes or patches nothing reads.
std::vector<int> first_readers(const Graph& graph) {
  std::vector<int> first(static_cast<size_t>(graph.size()), -1);
  for (int id = 0; id < graph.size(); ++id) {
    for (int in : graph.node(id).inputs) {
      if (graph.node(in).op == Op::kExtractPatches && first[static_cast<size_t>(in)] < 0)
        first[static_cast<size_t>(in)] = id;
    }
  }
  return first;
}

// Whether some extract_patches node has a reader after its first; outputs and updates count as
// readers that keep the node itself (they are never rewritten).
bool any_later_reader(const Graph& graph, const std::vector<int>& first) {
  for (int id = 0; id < graph.size(); ++id) {
    for (int in : graph.node(id).inputs) {
      if (graph.node(in).op == Op::kExtractPatches && first[static_cast<size_t>(in)] != id)
        return true;
    }
  }
  return false;
}

}  // namespace

std::unique_ptr<Rematerialized> rematerialize_patches(const Graph& graph) {
  const std::vector<int> first = first_readers(graph);
  if (!any_later_reader(graph, first)) return nullptr;
  auto out = std::make_unique<Rematerialized>();
  out->new_id.assign(static_cast<size_t>(graph.size()), -1);
  for (int id = 0; id < graph.size(); ++id) {
    Node node = graph.node(id);
    // A reader after the first gets its own copy of each patches node it reads, added just
    // before it (one copy per reader, shared by its inputs naming the same patches).
    std::map<int, int> copies;
    for (int& in : node.inputs) {
      const int old = in;
      in = out->new_id[static_cast<size_t>(old)];
      if (graph.node(old).op != Op::kExtractPatches || first[static_cast<size_t>(old)] == id)
        continue;
      auto [it, fresh] = copies.emplace(old, -1);
      if (fresh) {
        Node copy = graph.node(old);
        copy.inputs = {out->new_id[static_cast<size_t>(copy.inputs[0])]};
        copy.label += "/rematerialized";
        it->second = out->graph.add(std::move(copy));
        out->old_id.push_back(old);
      }
      in = it->second;
    }
    out->new_id[static_cast<size_t>(id)] = out->graph.add(std::move(node));
    out->old_id.push_back(id);
  }
  for (const NamedValue& o : graph.outputs())
    out->graph.add_output(o.name, out->new_id[static_cast<size_t>(o.node)]);
  for (const VariableUpdate& u : graph.updates()) {
    out->graph.add_update(out->new_id[static_cast<size_t>(u.variable)],
                          out->new_id[static_cast<size_t>(u.value)]);
  }
  return out;
}

}  // namespace tpusim::runtime::tpusim_backend
