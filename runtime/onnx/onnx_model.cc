#include "runtime/onnx/onnx_model.h"

#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include "common/strings.h"

namespace tpusim::runtime::onnx_import {
namespace {

absl::Status refused(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(str_cat(path, ": ", why));
}

// The default domain's opset the model imports (0 when it imports none).
int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  }
  return 0;
}

// libonnx's shape inference for Conv and the pools divides by each stride and kernel extent
// unchecked (a stride of 0 ends the process on SIGFPE), so a node's window attributes are
// bounded first: strides, dilations and kernel_shape at least 1, pads at least 0, each at most
// 2^20.
absl::Status check_window_attributes(const onnx::NodeProto& node, const std::string& path) {
  constexpr int64_t kMaxWindowValue = int64_t{1} << 20;
  for (const onnx::AttributeProto& a : node.attribute()) {
    const bool extent =
        a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape";
    if (!extent && a.name() != "pads") continue;
    const int64_t least = extent ? 1 : 0;
    for (int64_t v : a.ints()) {
      if (v < least || v > kMaxWindowValue) {
        return refused(
            path, str_cat("node '", node.name(), "' (", node.op_type(), "): ", a.name(), " holds ",
                          v, ", outside [", least, ", ", kMaxWindowValue, "]"));
      }
    }
  }
  return absl::OkStatus();
}

// libonnx's shape inference for the convolutions takes a kernel without kernel_shape from W's
// dimensions 2.. and indexes the input's spatial dimensions, the dilations, strides and pads by
// it unchecked, and reads W's dimension 1 of a ConvTranspose unchecked: a W of a higher rank
// than the input reads past their ends (fuzz_onnx found a SEGV in convPoolShapeInference). So
// each such node's W must be an initializer (as the importer needs anyway) of rank 3 or more,
// and a missing kernel_shape is written from it, which is what ONNX says it defaults to and
// what libonnx then checks against the input's rank. The input that holds W, per op.
int convolution_weight_input(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return -1;
  const std::string& op = node.op_type();
  if (op == "Conv" || op == "ConvTranspose" || op == "ConvInteger") return 1;
  if (op == "QLinearConv") return 3;
  return -1;
}

using Initializers = std::map<std::string, const onnx::TensorProto*>;

absl::Status spell_out_convolution_kernel(onnx::NodeProto& node, const Initializers& scope,
                                          const std::string& path) {
  const int w = convolution_weight_input(node);
  if (w < 0) return absl::OkStatus();
  const std::string what = str_cat("node '", node.name(), "' (", node.op_type(), ")");
  const auto found = node.input_size() > w ? scope.find(node.input(w)) : scope.end();
  if (found == scope.end()) {
    return refused(path, str_cat(what, ": its weights (input ", w,
                                 ") are no initializer; tpusim takes a convolution's weights "
                                 "from an initializer"));
  }
  const onnx::TensorProto& weights = *found->second;
  if (weights.dims_size() < 3) {
    return refused(
        path, str_cat(what, ": its weights '", weights.name(), "' have rank ", weights.dims_size(),
                      "; a convolution's are [M, C / group, k1, k2, ...]"));
  }
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == "kernel_shape") return absl::OkStatus();
  }
  onnx::AttributeProto* kernel = node.add_attribute();
  kernel->set_name("kernel_shape");
  kernel->set_type(onnx::AttributeProto::INTS);
  for (int d = 2; d < weights.dims_size(); ++d) kernel->add_ints(weights.dims(d));
  return absl::OkStatus();
}

// Every node libonnx's shape inference will see, in subgraphs too (which see their outer
// graphs' initializers): its convolution kernel spelled out, then its window attributes bounded.
absl::Status prepare_for_shape_inference(onnx::GraphProto* g, Initializers scope,
                                         const std::string& path) {
  for (const onnx::TensorProto& t : g->initializer()) scope[t.name()] = &t;
  for (onnx::NodeProto& node : *g->mutable_node()) {
    for (onnx::AttributeProto& a : *node.mutable_attribute()) {
      if (a.has_g()) {
        if (auto s = prepare_for_shape_inference(a.mutable_g(), scope, path); !s.ok()) return s;
      }
      for (onnx::GraphProto& sub : *a.mutable_graphs()) {
        if (auto s = prepare_for_shape_inference(&sub, scope, path); !s.ok()) return s;
      }
    }
    if (auto s = spell_out_convolution_kernel(node, scope, path); !s.ok()) return s;
    if (auto s = check_window_attributes(node, path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// An initializer whose bytes live in another file: the importer reads one file only.
absl::Status check_no_external_data(const onnx::ModelProto& m, const std::string& path) {
  for (const onnx::TensorProto& t : m.graph().initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0) {
      return refused(path, str_cat("initializer '", t.name(),
                                   "' keeps its data in an external file, which tpusim does not "
                                   "read (save the model with its weights inside)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DType> dtype_of(int32_t elem_type, const std::string& path,
                               const std::string& what) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::FLOAT16:
      return DType::kF32;
    case onnx::TensorProto::BFLOAT16:
      return DType::kBF16;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::BOOL:
      return DType::kS32;
    default:
      return refused(path, str_cat(what, " has element type ", elem_type_name(elem_type),
                                   ", which tpusim does not take"));
  }
}

// Binds input `v`'s symbolic first dimension to `batch`; any other unbound dimension is refused.
absl::StatusOr<TensorInfo> bind_input(onnx::ValueInfoProto* v, int64_t batch,
                                      const std::string& path) {
  TensorInfo info;
  info.name = v->name();
  if (!v->type().has_tensor_type())
    return refused(path, str_cat("input '", v->name(), "' is not a tensor"));
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  auto dtype = dtype_of(t->elem_type(), path, str_cat("input '", v->name(), "'"));
  if (!dtype.ok()) return dtype.status();
  info.dtype = *dtype;
  if (!t->has_shape())
    return refused(path, str_cat("input '", v->name(),
                                 "' has no shape: tpusim needs static "
                                 "shapes (the batch dimension aside)"));
  std::vector<int64_t> dims;
  for (int d = 0; d < t->shape().dim_size(); ++d) {
    onnx::TensorShapeProto::Dimension* dim = t->mutable_shape()->mutable_dim(d);
    if (dim->has_dim_value() && dim->dim_value() > 0) {
      dims.push_back(dim->dim_value());
      continue;
    }
    if (d != 0) {
      const std::string label = dim->has_dim_param() ? str_cat(" ('", dim->dim_param(), "')") : "";
      return refused(path, str_cat("input '", v->name(), "' dimension ", d, label,
                                   " is not bound: tpusim binds only the first (the batch); every "
                                   "other dimension must be static"));
    }
    dim->clear_dim_param();
    dim->set_dim_value(batch);
    dims.push_back(batch);
    info.batched = true;
  }
  info.shape = Shape(dims);
  if (info.shape.elements_within(kMaxInputElements) < 0)
    return refused(path, str_cat("input '", v->name(), "' of shape ", info.shape.str(),
                                 " at batch ", batch, " has more than 2^40 elements"));
  return info;
}

absl::StatusOr<std::vector<TensorInfo>> bind_inputs(onnx::ModelProto& m, int64_t batch,
                                                    const std::string& path) {
  std::set<std::string> initializers;
  for (const auto& t : m.graph().initializer()) initializers.insert(t.name());
  std::vector<TensorInfo> inputs;
  for (int i = 0; i < m.graph().input_size(); ++i) {
    onnx::ValueInfoProto* v = m.mutable_graph()->mutable_input(i);
    if (initializers.count(v->name()) > 0) continue;  // an initializer listed as an input
    auto info = bind_input(v, batch, path);
    if (!info.ok()) return info.status();
    inputs.push_back(*std::move(info));
  }
  if (inputs.empty()) return refused(path, "the graph has no input");
  return inputs;
}

// The graph's outputs as shape inference leaves them; each must be a static tensor.
absl::StatusOr<std::vector<TensorInfo>> graph_outputs(const onnx::ModelProto& m,
                                                      const std::string& path) {
  std::vector<TensorInfo> outputs;
  for (const onnx::ValueInfoProto& v : m.graph().output()) {
    TensorInfo info;
    info.name = v.name();
    auto dtype =
        dtype_of(v.type().tensor_type().elem_type(), path, str_cat("output '", v.name(), "'"));
    if (!dtype.ok()) return dtype.status();
    info.dtype = *dtype;
    std::vector<int64_t> dims;
    for (const auto& dim : v.type().tensor_type().shape().dim())
      dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    info.shape = Shape(dims);
    outputs.push_back(info);
  }
  if (outputs.empty()) return refused(path, "the graph has no output");
  return outputs;
}

}  // namespace

std::string elem_type_name(int32_t elem_type) {
  if (onnx::TensorProto::DataType_IsValid(elem_type) && elem_type != 0) {
    std::string name =
        onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(elem_type));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
  }
  return str_cat("unknown (", elem_type, ")");
}

absl::StatusOr<OnnxModel> parse_onnx(const std::string& bytes, const std::string& path,
                                     int64_t batch) {
  if (batch <= 0)
    return refused(path, str_cat("the batch size must be positive (got ", batch, ")"));
  OnnxModel model;
  model.path = path;
  if (!model.proto.ParseFromString(bytes))
    return refused(path,
                   "not an ONNX model (its bytes do not parse as onnx.ModelProto; truncated?)");
  if (!model.proto.has_graph() || model.proto.graph().node_size() == 0)
    return refused(path, "not an ONNX model (no graph, or a graph without nodes)");
  model.opset = default_opset(model.proto);
  if (model.opset < kMinOpset || model.opset > kMaxOpset) {
    return refused(path, str_cat("opset ", model.opset,
                                 " of the default domain; tpusim imports "
                                 "opsets ",
                                 kMinOpset, " to ", kMaxOpset, " (re-export with one of them)"));
  }
  if (auto s = check_no_external_data(model.proto, path); !s.ok()) return s;
  model.producer = model.proto.producer_name();
  if (!model.proto.producer_version().empty())
    model.producer += " " + model.proto.producer_version();
  // libonnx's checker refuses an ir_version past its own with a bare "higher than the checker's":
  // name both, and the fix (onnx.helper.make_model(..., ir_version=N) writes 11 or more today).
  if (model.proto.ir_version() > onnx::Version::IR_VERSION) {
    return refused(
        path, str_cat("its ir_version is ", model.proto.ir_version(),
                      "; this build's ONNX library checks models up to ir_version ",
                      static_cast<int>(onnx::Version::IR_VERSION), " (re-export with ir_version ",
                      static_cast<int>(onnx::Version::IR_VERSION), ": model.ir_version = ",
                      static_cast<int>(onnx::Version::IR_VERSION), " in Python)"));
  }
  // libonnx throws; nothing of it leaves this function.
  try {
    onnx::checker::check_model(model.proto);
  } catch (const std::exception& e) {
    return refused(path, str_cat("the ONNX checker rejects it: ", e.what()));
  }
  auto inputs = bind_inputs(model.proto, batch, path);
  if (!inputs.ok()) return inputs.status();
  model.inputs = *std::move(inputs);
  if (auto s = prepare_for_shape_inference(model.proto.mutable_graph(), {}, path); !s.ok())
    return s;
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1,
                                        /*data_propagation=*/true);
    onnx::shape_inference::InferShapes(model.proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return refused(path, str_cat("shape inference fails at batch ", batch, ": ", e.what()));
  }
  auto outputs = graph_outputs(model.proto, path);
  if (!outputs.ok()) return outputs.status();
  model.outputs = *std::move(outputs);
  return model;
}

absl::StatusOr<OnnxModel> load_onnx(const std::string& path, int64_t batch) {
  auto bytes = read_onnx_file(path);
  if (!bytes.ok()) return bytes.status();
  return parse_onnx(*bytes, path, batch);
}

absl::StatusOr<std::string> read_onnx_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return absl::NotFoundError(str_cat(path, ": no such file (an ONNX model)"));
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(str_cat(path, ": cannot read its size: ", ec.message()));
  if (static_cast<int64_t>(size) >= kMaxFileBytes) {
    return refused(path, str_cat("is ", size,
                                 " bytes; an ONNX file holds at most 2 GiB (larger "
                                 "models keep their weights in external files, which tpusim "
                                 "does not read)"));
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return absl::DataLossError(str_cat(path, ": cannot read its ", size, " bytes"));
  return bytes;
}

}  // namespace tpusim::runtime::onnx_import
