#pragma once
// An ONNX graph (onnx_model.h) as a forward graph of the IR: each node becomes the IR's ops (a
// convolution is im2col patches times the kernel, as the zoo's layers build it, so an imported
// model compiles as the same model written in C++ would), initializers that feed weights become
// variables holding the file's values, the others constants, and shape arithmetic is folded at
// import time. Images stay channels-last on the device whatever the file's layout: an NCHW
// tensor is held as NHWC and transposed only where an op needs the file's order (what XLA's
// layout assignment does for a TPU). An op outside supported_ops() is refused naming the node,
// its op type, the opset and the supported set.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/graph/builder.h"
#include "runtime/onnx/onnx_model.h"

namespace tpusim::runtime::onnx_import {

struct ImportOptions {
  // Training graphs: batch normalisation from the batch's statistics (updating the moving ones),
  // dropout active. Otherwise the file's inference semantics.
  bool training = false;
  // kBF16: Keras's mixed_bfloat16 policy, as the zoo applies it (the caller gives bf16 inputs):
  // weights that meet activations read as bf16 through a cast of their f32 variable, tensors
  // known at import time cast where they meet bf16 values, batch and layer norm and softmax in
  // f32 with f32 variables. kF32: everything f32.
  DType compute = DType::kF32;
  uint64_t seed = 0;  // dropout masks
  // Values inside the graph to return with its outputs (ImportedGraph::outputs), by ONNX name:
  // a classifier's logits before its Softmax.
  std::vector<std::string> also_return;
  // Inputs the file orders NCHW that are given NHWC (images as the input pipeline makes them):
  // held so on the device from the start, with no transpose.
  std::vector<std::string> nhwc_inputs;
};

struct ImportedGraph {
  std::map<std::string, Value> outputs;  // by ONNX name (and also_return's), the file's layout
  // Each variable's value from the file, in the IR's layout (a convolution kernel [kh, kw, in,
  // out] where the file holds [out, in, kh, kw]): what the model starts from.
  std::map<std::string, HostTensor> initial_values;
  // Variables that batch normalisation updates rather than the optimizer ("*/moving_mean",
  // "*/moving_variance": graph.h's is_statistic).
  std::vector<std::string> statistics;
};

// Builds `model`'s graph on `b` from `inputs` (by ONNX input name, each of the input's shape and
// type). Errors name the file, the node (its name, or its first output) and its op type.
absl::StatusOr<ImportedGraph> import_graph(GraphBuilder& b, const OnnxModel& model,
                                           const std::map<std::string, Value>& inputs,
                                           const ImportOptions& options);

// The op types the importer takes, sorted.
std::vector<std::string> supported_ops();

}  // namespace tpusim::runtime::onnx_import
