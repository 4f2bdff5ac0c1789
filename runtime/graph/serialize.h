#pragma once
// Graphs to and from GraphDef protos (graph.proto). from_proto rebuilds the graph through
// GraphBuilder, op by op, so a stored graph is held to the same shape rules as a built one; a
// bad node is named by index, op and label.

#include <absl/status/statusor.h>

#include "runtime/graph/graph.h"
#include "runtime/graph/graph.pb.h"

namespace tpusim::runtime {

GraphDef to_proto(const Graph& graph);
absl::StatusOr<Graph> from_proto(const GraphDef& def);

}  // namespace tpusim::runtime
