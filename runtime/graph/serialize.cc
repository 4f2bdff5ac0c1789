#include "runtime/graph/serialize.h"

#include <map>

#include <google/protobuf/unknown_field_set.h>

#include "common/strings.h"
#include "runtime/graph/builder.h"

namespace tpusim::runtime {
namespace {

constexpr std::pair<InitKind, const char*> kInits[] = {
    {InitKind::kZeros, "zeros"},
    {InitKind::kConstant, "constant"},
    {InitKind::kGlorotUniform, "glorot_uniform"},
    {InitKind::kGlorotNormal, "glorot_normal"},
    {InitKind::kHeUniform, "he_uniform"},
    {InitKind::kHeNormal, "he_normal"},
    {InitKind::kTruncatedNormal, "truncated_normal"}};

// A node of more elements than this is refused (2^40: four TiB of f32; ResNet-50's largest
// activation at a batch of 1024 is 2^29.6), so a stored shape's count never overflows.
constexpr int64_t kMaxNodeElements = int64_t{1} << 40;

absl::StatusOr<DType> dtype_of(const std::string& name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kS32}) {
    if (name == dtype_name(d)) return d;
  }
  return absl::InvalidArgumentError(str_cat("unknown dtype '", name, "' (f32, bf16, s32)"));
}

std::vector<int64_t> vec(const google::protobuf::RepeatedField<int64_t>& r) {
  return {r.begin(), r.end()};
}

void put(const HostTensor& t, TensorDef* def) {
  def->set_dtype(dtype_name(t.dtype));
  for (int64_t d : t.shape.dims()) def->add_shape(d);
  def->mutable_f()->Add(t.f.begin(), t.f.end());
  def->mutable_i()->Add(t.i.begin(), t.i.end());
}

absl::StatusOr<HostTensor> get(const TensorDef& def) {
  auto dtype = dtype_of(def.dtype());
  if (!dtype.ok()) return dtype.status();
  const Shape shape(vec(def.shape()));
  const bool ints = *dtype == DType::kS32;
  const int64_t held = ints ? def.i_size() : def.f_size();
  // Checked against the values there before anything is reserved for the shape.
  if (shape.elements_within(held) != held) {
    return absl::InvalidArgumentError(str_cat(
        "the constant holds ", held, " values; its shape ", shape.str(), " needs ",
        shape.elements_within(kMaxNodeElements) < 0 ? std::string("more, or has a negative size")
                                                    : str_cat(shape.elements())));
  }
  HostTensor t = HostTensor::zeros(*dtype, shape);
  if (ints) {
    t.i.assign(def.i().begin(), def.i().end());
  } else {
    t.f.assign(def.f().begin(), def.f().end());
  }
  return t;
}

Window window_of(const WindowDef& w) {
  Window out;
  out.kh = w.kh();
  out.kw = w.kw();
  out.sh = w.sh();
  out.sw = w.sw();
  out.same = w.same();
  if (w.explicit_padding_size() > 0) {  // four values; fewer or more fail the window's check
    const bool four = w.explicit_padding_size() == 4;
    out.explicit_padding = true;
    out.pad_top = four ? w.explicit_padding(0) : -1;
    out.pad_bottom = four ? w.explicit_padding(1) : -1;
    out.pad_left = four ? w.explicit_padding(2) : -1;
    out.pad_right = four ? w.explicit_padding(3) : -1;
  }
  out.image = Shape(vec(w.image()));
  return out;
}

}  // namespace

std::string first_unknown_field(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* r = message.GetReflection();
  const google::protobuf::UnknownFieldSet& unknown = r->GetUnknownFields(message);
  if (unknown.field_count() > 0) return str_cat("#", unknown.field(0).number());
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (!f->is_repeated()) {
      if (std::string in = first_unknown_field(r->GetMessage(message, f)); !in.empty())
        return str_cat(f->name(), ".", in);
      continue;
    }
    for (int i = 0; i < r->FieldSize(message, f); ++i) {
      if (std::string in = first_unknown_field(r->GetRepeatedMessage(message, f, i)); !in.empty())
        return str_cat(f->name(), "[", i, "].", in);
    }
  }
  return "";
}

GraphDef to_proto(const Graph& graph) {
  GraphDef def;
  for (const Node& n : graph.nodes()) {
    NodeDef* d = def.add_node();
    d->set_op(op_name(n.op));
    for (int in : n.inputs) d->add_input(in);
    d->set_dtype(dtype_name(n.dtype));
    for (int64_t x : n.shape.dims()) d->add_shape(x);
    d->set_label(n.label);
    const Attrs& a = n.attrs;
    d->mutable_axes()->Add(a.axes.begin(), a.axes.end());
    d->mutable_begin()->Add(a.begin.begin(), a.begin.end());
    d->mutable_end()->Add(a.end.begin(), a.end.end());
    d->set_axis(a.axis);
    d->set_depth(a.depth);
    if (n.op == Op::kExtractPatches || n.op == Op::kPatchesToImage) {
      WindowDef* w = d->mutable_window();
      w->set_kh(a.window.kh);
      w->set_kw(a.window.kw);
      w->set_sh(a.window.sh);
      w->set_sw(a.window.sw);
      w->set_same(a.window.same);
      if (a.window.explicit_padding) {
        for (int64_t p :
             {a.window.pad_top, a.window.pad_bottom, a.window.pad_left, a.window.pad_right})
          w->add_explicit_padding(p);
      }
      for (int64_t x : a.window.image.dims()) w->add_image(x);
    }
    if (n.op == Op::kConstant) put(a.value, d->mutable_value());
    d->set_name(a.name);
    if (n.op == Op::kVariable) {
      InitializerDef* init = d->mutable_initializer();
      for (const auto& [kind, name] : kInits) {
        if (kind == a.initializer.kind) init->set_kind(name);
      }
      init->set_value(a.initializer.value);
      init->set_stddev(a.initializer.stddev);
      init->set_seed(a.initializer.seed);
    }
    d->set_seed(a.seed);
    d->set_to(dtype_name(a.to));
  }
  for (const auto& o : graph.outputs()) {
    auto* out = def.add_output();
    out->set_name(o.name);
    out->set_node(o.node);
  }
  for (const auto& u : graph.updates()) {
    auto* up = def.add_update();
    up->set_variable(u.variable);
    up->set_value(u.value);
  }
  return def;
}

namespace {

// Node `d` rebuilt on `b` from its inputs `in` (op, dtype and shape already read from it), or
// why it cannot be.
absl::StatusOr<Value> rebuild_node(GraphBuilder& b, const NodeDef& d, Op op, DType dtype,
                                   const Shape& shape, const std::vector<Value>& in) {
  const auto arity = [&](size_t n) { return in.size() == n; };
  if (op == Op::kConstant) {
    auto t = get(d.value());
    if (!t.ok()) return absl::InvalidArgumentError(std::string(t.status().message()));
    return b.constant(*t);
  } else if (op == Op::kVariable || op == Op::kInfeed) {
    if (d.name().empty()) return absl::InvalidArgumentError("has no name");
    if (op == Op::kInfeed) {
      return b.infeed(d.name(), dtype, shape);
    } else {
      Initializer init;
      bool known = false;
      for (const auto& [kind, name] : kInits) {
        if (d.initializer().kind() == name) {
          init.kind = kind;
          known = true;
        }
      }
      if (!known)
        return absl::InvalidArgumentError(
            str_cat("unknown initializer '", d.initializer().kind(), "'"));
      init.value = d.initializer().value();
      init.stddev = d.initializer().stddev();
      init.seed = d.initializer().seed();
      return b.variable(d.name(), dtype, shape, init);
    }
  } else if (op == Op::kRngUniform) {
    return b.rng_uniform(shape, d.seed());
  } else if (is_binary_elementwise(op) && arity(2)) {
    return b.binary(op, in[0], in[1]);
  } else if ((is_unary_elementwise(op) || op == Op::kStopGradient) && arity(1)) {
    return b.unary(op, in[0]);
  } else if (op == Op::kSelect && arity(3)) {
    return b.select(in[0], in[1], in[2]);
  } else if (op == Op::kCast && arity(1)) {
    auto to = dtype_of(d.to());
    if (!to.ok()) return absl::InvalidArgumentError(std::string(to.status().message()));
    return b.cast(in[0], *to);
  } else if ((op == Op::kReduceSum || op == Op::kReduceMax) && arity(1)) {
    return b.reduce(op, in[0], vec(d.axes()));
  } else if (op == Op::kArgMax && arity(1)) {
    return b.argmax(in[0], d.axis());
  } else if (op == Op::kReshape && arity(1)) {
    return b.reshape(in[0], shape);
  } else if (op == Op::kTranspose && arity(1)) {
    return b.transpose(in[0], vec(d.axes()));
  } else if (op == Op::kBroadcast && arity(1)) {
    return b.broadcast(in[0], shape, vec(d.axes()));
  } else if (op == Op::kConcat && !in.empty()) {
    return b.concat(in, d.axis());
  } else if (op == Op::kSlice && arity(1)) {
    return b.slice(in[0], vec(d.begin()), vec(d.end()));
  } else if (op == Op::kPad && arity(1)) {
    return b.pad(in[0], vec(d.begin()), vec(d.end()));
  } else if (op == Op::kMatMul && arity(2)) {
    return b.matmul(in[0], in[1]);
  } else if (op == Op::kExtractPatches && arity(1)) {
    return b.extract_patches(in[0], window_of(d.window()));
  } else if (op == Op::kPatchesToImage && arity(1)) {
    return b.patches_to_image(in[0], window_of(d.window()));
  } else if (op == Op::kOneHot && arity(1)) {
    return b.one_hot(in[0], d.depth());
  } else if (op == Op::kGather && arity(2)) {
    return b.gather(in[0], in[1]);
  } else if (op == Op::kScatterAdd && arity(2)) {
    return b.scatter_add(in[0], in[1], d.depth());
  } else if (op == Op::kCrossReplicaSum && arity(1)) {
    return b.cross_replica_sum(in[0]);
  } else {
    return absl::InvalidArgumentError(
        str_cat("takes a different number of inputs than ", in.size()));
  }
}

}  // namespace

absl::StatusOr<std::vector<Value>> replay(const GraphDef& def, GraphBuilder& b,
                                          const std::map<std::string, Value>& feeds) {
  std::map<std::string, Op> ops;
  for (const OpInfo& info : op_table()) ops[info.name] = info.op;
  std::vector<Value> made;
  for (int k = 0; k < def.node_size(); ++k) {
    const NodeDef& d = def.node(k);
    auto fail = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          str_cat("graph node ", k, " (", d.op(), " '", d.label(), "'): ", why));
    };
    auto op_it = ops.find(d.op());
    if (op_it == ops.end()) return fail("unknown op");
    const Op op = op_it->second;
    std::vector<Value> in;
    for (const int64_t i : d.input()) {
      if (i < 0 || i >= k) return fail(str_cat("input ", i, " is not an earlier node"));
      in.push_back(made[static_cast<size_t>(i)]);
    }
    auto dtype = dtype_of(d.dtype());
    if (!dtype.ok()) return fail(std::string(dtype.status().message()));
    const Shape shape(vec(d.shape()));
    if (shape.elements_within(kMaxNodeElements) < 0) {
      return fail(str_cat("its shape ", shape.str(),
                          " has a negative size or more than 2^40 "
                          "elements"));
    }
    const auto fed = op == Op::kInfeed ? feeds.find(d.name()) : feeds.end();
    absl::StatusOr<Value> made_node =
        fed != feeds.end() ? fed->second : rebuild_node(b, d, op, *dtype, shape, in);
    if (!made_node.ok()) return fail(std::string(made_node.status().message()));
    const Value v = *made_node;
    if (!b.status().ok()) return fail(std::string(b.status().message()));
    if (v.shape() != shape || v.dtype() != *dtype) {
      return fail(str_cat(fed != feeds.end() ? "is fed " : "is stored as ", d.dtype(), shape.str(),
                          fed != feeds.end() ? " but is given " : " but its inputs make ",
                          dtype_name(v.dtype()), v.shape().str()));
    }
    if (fed == feeds.end()) b.mutable_graph().mutable_node(v.id).label = d.label();
    made.push_back(v);
  }
  return made;
}

absl::StatusOr<Graph> from_proto(const GraphDef& def) {
  GraphBuilder b;
  auto replayed = replay(def, b, {});
  if (!replayed.ok()) return replayed.status();
  const std::vector<Value>& made = *replayed;
  for (const auto& o : def.output()) {
    if (o.node() < 0 || o.node() >= def.node_size())
      return absl::InvalidArgumentError(str_cat("output '", o.name(), "' names no node"));
    b.output(o.name(), made[static_cast<size_t>(o.node())]);
  }
  for (const auto& u : def.update()) {
    if (u.variable() < 0 || u.variable() >= def.node_size() || u.value() < 0 ||
        u.value() >= def.node_size()) {
      return absl::InvalidArgumentError("an update names no node");
    }
    b.update(made[static_cast<size_t>(u.variable())], made[static_cast<size_t>(u.value())]);
  }
  if (!b.status().ok()) return b.status();
  return b.graph();
}

}  // namespace tpusim::runtime
