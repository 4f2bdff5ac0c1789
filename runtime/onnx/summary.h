#pragma once
// What `tpusim import` reports about an ONNX model: its inputs and outputs, its ops, its
// parameters and forward FLOPs per example, and every node the importer does not take.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/onnx/onnx_model.h"

namespace tpusim::runtime::onnx_import {

struct UnsupportedNode {
  std::string node;     // its name, else its first output
  std::string op_type;  // "domain::Op" outside the default domain
};

struct ModelSummary {
  std::map<std::string, int64_t> ops;  // nodes by op type
  std::vector<UnsupportedNode> unsupported;
  // With every node supported (the graph imported at batch 1):
  int64_t parameters = 0;            // elements of the variables
  int64_t trainable_parameters = 0;  // of them, not batch-norm statistics
  int64_t constant_elements = 0;     // initializers and constants that stay constants
  double flops_per_example = 0;      // forward matmul FLOPs (2 a multiply-accumulate)
  // The model's outputs with the shapes the import gives them (shape inference may leave a
  // dimension it could not follow unknown).
  std::vector<TensorInfo> outputs;
};

// The summary of `model` loaded at batch 1 (load_onnx(path, 1)). Nodes outside supported_ops()
// are listed, not an error; an error is a node the importer refuses for another reason.
absl::StatusOr<ModelSummary> summarize(const OnnxModel& model);

}  // namespace tpusim::runtime::onnx_import
