#pragma once
// The importer's state while it walks a graph (importer.cc), and what its op converters
// (ops_*.cc) share. Not part of the API.

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <onnx/onnx_pb.h>

#include "runtime/graph/builder.h"
#include "runtime/onnx/folded.h"
#include "runtime/onnx/importer.h"

namespace tpusim::runtime::onnx_import {

// A value of the ONNX graph as the importer holds it: on the device (`value`), or known at import
// time (`folded`, put on the device as a constant when an op needs it there).
struct Operand {
  Value value;
  // A rank-4 tensor the file orders NCHW, held NHWC (`value` is the NHWC one).
  bool channels_last = false;
  std::optional<Folded> folded;
  bool on_device() const { return !folded.has_value(); }
};

class Importer;
using Converter = std::function<absl::Status(Importer&, const onnx::NodeProto&)>;

// The converters of each family, by op type (ops_elementwise.cc, ops_nn.cc, ops_shape.cc).
void add_elementwise_converters(std::map<std::string, Converter>* table);
void add_nn_converters(std::map<std::string, Converter>* table);
void add_shape_converters(std::map<std::string, Converter>* table);

class Importer {
 public:
  Importer(GraphBuilder& b, const OnnxModel& model, const ImportOptions& options);

  GraphBuilder& b;
  const OnnxModel& model;
  const ImportOptions& options;
  ImportedGraph result;

  // The node's input `i` (an empty name: absent, which is an error naming the node).
  absl::StatusOr<Operand> input(const onnx::NodeProto& node, int i) const;
  bool has_input(const onnx::NodeProto& node, int i) const;
  // The node's input `i` known at import time; an error names what it is for when it is not.
  absl::StatusOr<Folded> folded_input(const onnx::NodeProto& node, int i,
                                      const std::string& what) const;
  void set_output(const onnx::NodeProto& node, int i, Operand value);

  // The operand in the file's layout, on the device.
  Value logical(const Operand& x);
  // A rank-4 operand as NHWC on the device (the file's NCHW transposed, unless held so already).
  Value nhwc(const Operand& x);
  // A folded tensor as a device constant (f32, or s32 for integers).
  Value constant(const Folded& f);
  // The operand's dims in the file's layout.
  static std::vector<int64_t> logical_dims(const Operand& x);

  // A variable for initializer `name` (made once), its value from the file passed through
  // `to_ir_layout` (identity when null); a batch norm moving statistic's variable is
  // "<name>/moving_mean" or "/moving_variance" (`suffix`). Read in the compute type
  // (ImportOptions::compute) unless `f32` (normalisations' weights).
  absl::StatusOr<Value> weight(const std::string& name,
                               const std::function<Folded(const Folded&)>& to_ir_layout = nullptr,
                               const std::string& suffix = "", bool f32 = false);
  // `a` and `b` in one floating type: an f32 one cast to the other's bf16 (mixed precision's
  // constants and weights meeting bf16 values).
  void match_types(Value* a, Value* b);
  // `v` cast to `dtype` when it is another floating type.
  Value as_type(Value v, DType dtype);
  bool is_initializer(const std::string& name) const { return initializers_.count(name) > 0; }
  // Whether `name` is a floating initializer of more than one element (a weight's shape),
  // read from its header without folding its values.
  bool is_float_tensor_initializer(const std::string& name) const;
  // Whether the node's input `i` is a device value (computed, or a weight made already), also
  // without folding it.
  bool on_device(const onnx::NodeProto& node, int i) const;

  // Errors about `node`: "FILE: node 'NAME' (OpType): why".
  absl::Status error(const onnx::NodeProto& node, const std::string& why) const;
  // The attribute, or `fallback` when absent.
  int64_t attr_int(const onnx::NodeProto& node, const std::string& name, int64_t fallback) const;
  float attr_float(const onnx::NodeProto& node, const std::string& name, float fallback) const;
  std::string attr_string(const onnx::NodeProto& node, const std::string& name,
                          const std::string& fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(const onnx::NodeProto& node,
                                                const std::string& name) const;
  const onnx::AttributeProto* attr(const onnx::NodeProto& node, const std::string& name) const;

  absl::Status run(const std::map<std::string, Value>& inputs);

 private:
  absl::Status convert(const onnx::NodeProto& node);

  std::map<std::string, const onnx::TensorProto*> initializers_;
  std::map<std::string, Operand> values_;
  std::map<std::string, Value> weights_;  // variables made, by variable name
  std::map<std::string, Converter> converters_;
};

// A node's label for errors: its name, else its first output.
std::string node_label(const onnx::NodeProto& node);
// `axis` counted from the end when negative, checked against `rank`.
absl::StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace tpusim::runtime::onnx_import
