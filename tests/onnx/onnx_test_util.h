#pragma once
// Helpers for the importer's tests: models from ONNX's text syntax, imported and run on the cpu
// backend (fp32) with the file's weights.

#include <map>
#include <string>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/onnx/importer.h"

namespace tpusim::runtime::onnx_import::testing {

// The bytes of the model `text` (ONNX's text syntax) or an error naming the parser's complaint.
std::string model_bytes(const std::string& text);

struct Run {
  ImportedGraph imported;
  Graph graph;
  Outputs outputs;  // by ONNX output name
};
// Parses `text` at `batch`, imports it with its inputs as infeeds (by their ONNX names) and runs
// it once on the cpu backend with the file's weights.
// With `compute` kBF16 (mixed_bfloat16) the float inputs are cast to bf16 on entry and the
// outputs back to f32.
absl::StatusOr<Run> import_and_run(const std::string& text, int64_t batch,
                                   const std::map<std::string, HostTensor>& feeds,
                                   bool training = false, DType compute = DType::kF32);

// How many nodes of `graph` are `op`.
int count_ops(const Graph& graph, Op op);

}  // namespace tpusim::runtime::onnx_import::testing
