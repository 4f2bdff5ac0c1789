#pragma once
// Graphs to and from GraphDef protos (graph.proto). from_proto rebuilds the graph through
// GraphBuilder, op by op, so a stored graph is held to the same shape rules as a built one; a
// bad node is named by index, op and label.

#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"
#include "runtime/graph/graph.h"
#include "runtime/graph/graph.pb.h"

namespace tpusim::runtime {

// Where `message` (or a message within it) holds a field its schema does not declare, as a path
// ("graph.node[3].#17", "#99" at the top), or "" when nothing is unknown. Protobuf keeps such
// bytes and parses on; a stored file (a saved model, a checkpoint record) holding them was not
// written by tpusim, and is refused rather than read around.
std::string first_unknown_field(const google::protobuf::Message& message);

GraphDef to_proto(const Graph& graph);
absl::StatusOr<Graph> from_proto(const GraphDef& def);

// `def`'s nodes built again on `b` as part of the graph it is building (a saved model's predict
// graph as the forward pass of a training step): an infeed named in `feeds` becomes that value,
// which must have the infeed's dtype and shape; every other node is rebuilt as from_proto does
// (variables by their names and initializers). The values, by node index; outputs and updates
// are the caller's to add.
absl::StatusOr<std::vector<Value>> replay(const GraphDef& def, GraphBuilder& b,
                                          const std::map<std::string, Value>& feeds);

}  // namespace tpusim::runtime
