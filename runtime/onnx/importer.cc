#include "runtime/onnx/importer.h"

#include <algorithm>

#include "common/strings.h"
#include "runtime/onnx/importer_context.h"

namespace tpusim::runtime::onnx_import {

std::string node_label(const onnx::NodeProto& node) {
  if (!node.name().empty()) return node.name();
  return node.output_size() > 0 ? node.output(0) : std::string("(unnamed)");
}

absl::StatusOr<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return absl::InvalidArgumentError(
        str_cat("axis ", axis, " is outside a rank-", rank, " tensor"));
  return a;
}

Importer::Importer(GraphBuilder& builder, const OnnxModel& m, const ImportOptions& o)
    : b(builder), model(m), options(o) {
  for (const onnx::TensorProto& t : model.proto.graph().initializer()) initializers_[t.name()] = &t;
  add_elementwise_converters(&converters_);
  add_nn_converters(&converters_);
  add_shape_converters(&converters_);
}

absl::Status Importer::error(const onnx::NodeProto& node, const std::string& why) const {
  return absl::InvalidArgumentError(
      str_cat(model.path, ": node '", node_label(node), "' (", node.op_type(), "): ", why));
}

bool Importer::has_input(const onnx::NodeProto& node, int i) const {
  return i < node.input_size() && !node.input(i).empty();
}

absl::StatusOr<Operand> Importer::input(const onnx::NodeProto& node, int i) const {
  if (!has_input(node, i)) return error(node, str_cat("input ", i, " is missing"));
  const std::string& name = node.input(i);
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto w = weights_.find(name); w != weights_.end()) return Operand{w->second, false, {}};
  if (auto it = initializers_.find(name); it != initializers_.end()) {
    auto folded = fold_tensor(*it->second);
    if (!folded.ok()) return error(node, std::string(folded.status().message()));
    Operand o;
    o.folded = *std::move(folded);
    return o;
  }
  return error(node, str_cat("input '", name, "' is produced by no earlier node"));
}

bool Importer::is_float_tensor_initializer(const std::string& name) const {
  auto it = initializers_.find(name);
  if (it == initializers_.end()) return false;
  const int32_t type = it->second->data_type();
  int64_t elements = 1;
  for (int64_t d : it->second->dims()) elements *= std::max<int64_t>(d, 0);
  return elements > 1 &&
         (type == onnx::TensorProto::FLOAT || type == onnx::TensorProto::DOUBLE ||
          type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16);
}

bool Importer::on_device(const onnx::NodeProto& node, int i) const {
  if (!has_input(node, i)) return false;
  const std::string& name = node.input(i);
  if (auto it = values_.find(name); it != values_.end()) return it->second.on_device();
  return weights_.count(name) > 0;
}

absl::StatusOr<Folded> Importer::folded_input(const onnx::NodeProto& node, int i,
                                              const std::string& what) const {
  auto x = input(node, i);
  if (!x.ok()) return x.status();
  if (x->on_device()) {
    return error(node, str_cat(what, " (input '", node.input(i),
                               "') is computed on the device; tpusim needs it known at import "
                               "time (static shapes)"));
  }
  return *x->folded;
}

void Importer::set_output(const onnx::NodeProto& node, int i, Operand value) {
  if (i < node.output_size() && !node.output(i).empty()) values_[node.output(i)] = std::move(value);
}

std::vector<int64_t> Importer::logical_dims(const Operand& x) {
  if (!x.on_device()) return x.folded->dims;
  std::vector<int64_t> d = x.value.shape().dims();
  if (x.channels_last) return {d[0], d[3], d[1], d[2]};
  return d;
}

Value Importer::constant(const Folded& f) {
  auto t = f.host_tensor();
  if (!t.ok()) return b.fail(Op::kConstant, std::string(t.status().message()));
  return b.constant(*std::move(t));
}

Value Importer::logical(const Operand& x) {
  if (!x.on_device()) return constant(*x.folded);
  if (!x.channels_last) return x.value;
  const Shape s = x.value.shape();
  // [N, 1, 1, C] is [N, C, 1, 1] in the same order: a reshape, no data moves.
  if (s.dim(1) == 1 && s.dim(2) == 1) return b.reshape(x.value, {s.dim(0), s.dim(3), 1, 1});
  return b.transpose(x.value, {0, 3, 1, 2});
}

Value Importer::nhwc(const Operand& x) {
  if (x.channels_last) return x.value;
  if (!x.on_device()) return constant(fold_transpose(*x.folded, {0, 2, 3, 1}));
  const Shape s = x.value.shape();
  if (s.rank() == 4 && s.dim(2) == 1 && s.dim(3) == 1)
    return b.reshape(x.value, {s.dim(0), 1, 1, s.dim(1)});
  return b.transpose(x.value, {0, 2, 3, 1});
}

Value Importer::as_type(Value v, DType dtype) {
  if (!v.valid() || v.dtype() == dtype || !is_floating(v.dtype()) || !is_floating(dtype)) return v;
  return b.cast(v, dtype);
}

void Importer::match_types(Value* x, Value* y) {
  if (!x->valid() || !y->valid()) return;
  if (x->dtype() == DType::kBF16) *y = as_type(*y, DType::kBF16);
  if (y->dtype() == DType::kBF16) *x = as_type(*x, DType::kBF16);
}

absl::StatusOr<Value> Importer::weight(const std::string& name,
                                       const std::function<Folded(const Folded&)>& to_ir_layout,
                                       const std::string& suffix, bool f32) {
  const std::string var = name + suffix;
  const bool cast = !f32 && options.compute == DType::kBF16;
  if (cast) {
    if (auto it = weights_.find(var + "#bf16"); it != weights_.end()) return it->second;
    auto v = weight(name, to_ir_layout, suffix, /*f32=*/true);
    if (!v.ok()) return v;
    return weights_[var + "#bf16"] = b.cast(*v, DType::kBF16);
  }
  if (auto it = weights_.find(var); it != weights_.end()) return it->second;
  auto init = initializers_.find(name);
  if (init == initializers_.end())
    return absl::InvalidArgumentError(str_cat(model.path, ": '", name, "' is not an initializer"));
  auto folded = fold_tensor(*init->second);
  if (!folded.ok())
    return absl::InvalidArgumentError(str_cat(model.path, ": ", folded.status().message()));
  if (folded->integer) {
    return absl::InvalidArgumentError(
        str_cat(model.path, ": initializer '", name, "' feeds a weight but holds integers"));
  }
  Folded laid_out = to_ir_layout ? to_ir_layout(*folded) : *std::move(folded);
  auto value = laid_out.host_tensor();
  if (!value.ok()) return value.status();
  const Value v = b.variable(var, DType::kF32, value->shape, Initializer{});
  result.initial_values[var] = *std::move(value);
  if (!suffix.empty()) result.statistics.push_back(var);
  weights_[var] = v;
  return v;
}

const onnx::AttributeProto* Importer::attr(const onnx::NodeProto& node,
                                           const std::string& name) const {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t Importer::attr_int(const onnx::NodeProto& node, const std::string& name,
                           int64_t fallback) const {
  const onnx::AttributeProto* a = attr(node, name);
  return a != nullptr ? a->i() : fallback;
}

float Importer::attr_float(const onnx::NodeProto& node, const std::string& name,
                           float fallback) const {
  const onnx::AttributeProto* a = attr(node, name);
  return a != nullptr ? a->f() : fallback;
}

std::string Importer::attr_string(const onnx::NodeProto& node, const std::string& name,
                                  const std::string& fallback) const {
  const onnx::AttributeProto* a = attr(node, name);
  return a != nullptr ? a->s() : fallback;
}

std::optional<std::vector<int64_t>> Importer::attr_ints(const onnx::NodeProto& node,
                                                        const std::string& name) const {
  const onnx::AttributeProto* a = attr(node, name);
  if (a == nullptr) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

absl::Status Importer::convert(const onnx::NodeProto& node) {
  const bool default_domain = node.domain().empty() || node.domain() == "ai.onnx";
  auto it = converters_.find(node.op_type());
  if (!default_domain || it == converters_.end()) {
    const std::string op = default_domain ? node.op_type() : node.domain() + "::" + node.op_type();
    return absl::InvalidArgumentError(
        str_cat(model.path, ": node '", node_label(node), "' is ", op, " (opset ", model.opset,
                "), which tpusim does not import; it imports ", str_join(supported_ops(), ", ")));
  }
  GraphBuilder::Scope scope(b, node_label(node));
  try {
    if (auto s = it->second(*this, node); !s.ok()) return s;
  } catch (const InvalidValueError& e) {
    // A converter read the shape of an operation the builder refused: the builder says why.
    if (b.status().ok()) return error(node, e.what());
  }
  if (!b.status().ok()) return error(node, std::string(b.status().message()));
  return absl::OkStatus();
}

absl::Status Importer::run(const std::map<std::string, Value>& inputs) {
  for (const TensorInfo& in : model.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      return absl::InvalidArgumentError(
          str_cat(model.path, ": no value for input '", in.name, "'"));
    if (!it->second.valid()) {
      return absl::InvalidArgumentError(str_cat(model.path, ": the value given for input '",
                                                in.name, "' is invalid: ", b.status().message()));
    }
    const bool nhwc = std::find(options.nhwc_inputs.begin(), options.nhwc_inputs.end(), in.name) !=
                      options.nhwc_inputs.end();
    const std::vector<int64_t>& d = in.shape.dims();
    const Shape expected = nhwc && d.size() == 4 ? Shape({d[0], d[2], d[3], d[1]}) : in.shape;
    if (it->second.shape() != expected) {
      return absl::InvalidArgumentError(str_cat(model.path, ": input '", in.name, "' is ",
                                                in.shape.str(), nhwc ? " (NCHW, given NHWC: " : "",
                                                nhwc ? expected.str() + ")" : "",
                                                "; the value given is ", it->second.shape().str()));
    }
    values_[in.name] = Operand{it->second, nhwc && d.size() == 4, {}};
  }
  for (const onnx::NodeProto& node : model.proto.graph().node()) {
    if (auto s = convert(node); !s.ok()) return s;
  }
  std::vector<std::string> wanted;
  for (const TensorInfo& out : model.outputs) wanted.push_back(out.name);
  wanted.insert(wanted.end(), options.also_return.begin(), options.also_return.end());
  for (const std::string& name : wanted) {
    auto it = values_.find(name);
    if (it == values_.end())
      return absl::InvalidArgumentError(str_cat(model.path, ": '", name, "' is never computed"));
    result.outputs[name] = logical(it->second);
  }
  return b.status();
}

absl::StatusOr<ImportedGraph> import_graph(GraphBuilder& b, const OnnxModel& model,
                                           const std::map<std::string, Value>& inputs,
                                           const ImportOptions& options) {
  Importer importer(b, model, options);
  if (auto s = importer.run(inputs); !s.ok()) return s;
  return std::move(importer.result);
}

std::vector<std::string> supported_ops() {
  std::map<std::string, Converter> table;
  add_elementwise_converters(&table);
  add_nn_converters(&table);
  add_shape_converters(&table);
  std::vector<std::string> ops;
  for (const auto& [op, converter] : table) ops.push_back(op);
  return ops;
}

}  // namespace tpusim::runtime::onnx_import
