#pragma once
// An ONNX model file read for import, on Debian's libonnx (its protobuf classes, checker and shape
// inference). Everything a file can get wrong is refused here or by the importer with the file's
// name and the reason: bytes that are not an ONNX model, a model the checker rejects, an opset
// outside 11-17, data in external files, a dimension other than an input's first (the batch)
// left unbound. Nothing throws past this interface.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <onnx/onnx_pb.h>

#include "runtime/graph/tensor.h"

namespace tpusim::runtime::onnx_import {

// The default-domain opsets the importer knows (ai.onnx 11 to 17).
inline constexpr int64_t kMinOpset = 11;
inline constexpr int64_t kMaxOpset = 17;
// The largest file read: protobuf's own limit on one message.
inline constexpr int64_t kMaxFileBytes = int64_t{2} << 30;
// The most elements a graph input may have at the bound batch (a saved model's nodes' bound):
// more is no machine's, and multiplying a larger shape out could overflow.
inline constexpr int64_t kMaxInputElements = int64_t{1} << 40;

// A graph input or output: its element type and shape, the batch bound.
struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;  // float and double become f32, integers s32
  Shape shape;
  bool batched = false;  // its first dimension was symbolic and is the batch
};

struct OnnxModel {
  std::string path;  // what errors name
  onnx::ModelProto proto;
  int64_t opset = 0;
  std::string producer;            // "tf2onnx 1.16.1", "pytorch 2.5.1": what made the file
  std::vector<TensorInfo> inputs;  // the graph inputs that are not initializers
  std::vector<TensorInfo> outputs;
};

// The bytes of the ONNX file `path` (NotFound when it is missing; refused at 2 GiB and over).
absl::StatusOr<std::string> read_onnx_file(const std::string& path);

// Reads `path` and checks it, binding every input's symbolic first dimension to `batch` and
// inferring the graph's shapes with it.
absl::StatusOr<OnnxModel> load_onnx(const std::string& path, int64_t batch);
// The same for a file's bytes; `path` is what errors name.
absl::StatusOr<OnnxModel> parse_onnx(const std::string& bytes, const std::string& path,
                                     int64_t batch);

// "float", "int64", ...: an ONNX element type's name, for errors.
std::string elem_type_name(int32_t elem_type);

}  // namespace tpusim::runtime::onnx_import
