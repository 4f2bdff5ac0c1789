// Elementwise ops, softmax, casts and reductions (importer.h). Operands held channels-last meet
// others in that layout; tensors known at import time are folded on the host.
#include <cmath>
#include <numeric>

#include "common/strings.h"
#include "runtime/graph/layers.h"
#include "runtime/onnx/importer_context.h"

namespace tpusim::runtime::onnx_import {
namespace {

// `x` (not held channels-last) in the layout of a channels-last partner: its dims padded to rank
// 4 with leading ones as numpy broadcasting pads them, then NCHW -> NHWC.
Value to_channels_last(Importer& im, const Operand& x) {
  std::vector<int64_t> dims = Importer::logical_dims(x);
  dims.insert(dims.begin(), 4 - dims.size(), 1);
  if (!x.on_device()) {
    Folded f = *x.folded;
    f.dims = dims;
    return im.constant(fold_transpose(f, {0, 2, 3, 1}));
  }
  return im.nhwc(Operand{im.b.reshape(x.value, Shape(dims)), false, {}});
}

// Both operands of a binary op on the device in one layout; `channels_last` says which.
struct Aligned {
  Value a, b;
  bool channels_last = false;
};
Aligned align(Importer& im, const Operand& a, const Operand& b) {
  const bool fits = Importer::logical_dims(a).size() <= 4 && Importer::logical_dims(b).size() <= 4;
  Aligned x;
  if ((a.channels_last || b.channels_last) && fits) {
    x = {a.channels_last ? a.value : to_channels_last(im, a),
         b.channels_last ? b.value : to_channels_last(im, b), true};
  } else {
    x = {im.logical(a), im.logical(b), false};
  }
  im.match_types(&x.a, &x.b);
  return x;
}

double add(double x, double y) { return x + y; }
double sub(double x, double y) { return x - y; }
double mul(double x, double y) { return x * y; }
double div_float(double x, double y) { return x / y; }
double div_int(double x, double y) { return y == 0 ? 0 : std::trunc(x / y); }
double equal(double x, double y) { return x == y ? 1 : 0; }
double greater(double x, double y) { return x > y ? 1 : 0; }
double less(double x, double y) { return x < y ? 1 : 0; }
double maximum(double x, double y) { return std::max(x, y); }
double minimum(double x, double y) { return std::min(x, y); }

// A binary op: folded when both operands are known, else `op` on the device.
// Input `i` of an Add, Sub or Mul: a float initializer of more than one element beside a
// device value is a weight (a dense layer's bias, as tf2onnx writes MatMul + Add; a scale), so
// a variable; anything else as it is.
// (Decided from the initializer's header: a weight's values are read once, into its variable.)
absl::StatusOr<Operand> bias_or_input(Importer& im, const onnx::NodeProto& node, int i, Op op) {
  const bool weight_op = op == Op::kAdd || op == Op::kSub || op == Op::kMul;
  if (!weight_op || !im.has_input(node, i) || !im.is_float_tensor_initializer(node.input(i)) ||
      !im.on_device(node, 1 - i)) {
    return im.input(node, i);
  }
  auto w = im.weight(node.input(i));
  if (!w.ok()) return w.status();
  return Operand{*w, false, {}};
}

// `swapped`: op(b, a) (Less is Greater with its operands swapped).
Converter binary(Op op, double (*fold)(double, double), bool comparison = false,
                 bool swapped = false) {
  return [op, fold, comparison, swapped](Importer& im,
                                         const onnx::NodeProto& node) -> absl::Status {
    auto a = bias_or_input(im, node, 0, op);
    auto c = bias_or_input(im, node, 1, op);
    if (!a.ok()) return a.status();
    if (!c.ok()) return c.status();
    if (!a->on_device() && !c->on_device()) {
      const bool integer = comparison || (a->folded->integer && c->folded->integer);
      auto f =
          fold_binary(*a->folded, *c->folded, op == Op::kDiv && integer ? div_int : fold, integer);
      if (!f.ok()) return im.error(node, std::string(f.status().message()));
      im.set_output(node, 0, Operand{{}, false, *std::move(f)});
      return absl::OkStatus();
    }
    Aligned x = align(im, *a, *c);
    // Integer arithmetic (index fix-ups an exporter writes, as ids + vocab) in f32, exact below
    // 2^24, then back to s32: the IR's arithmetic takes floating operands.
    const bool integer = x.a.dtype() == DType::kS32 && x.b.dtype() == DType::kS32;
    if (integer) {
      x.a = im.b.cast(x.a, DType::kF32);
      x.b = im.b.cast(x.b, DType::kF32);
    }
    Value y = swapped ? im.b.binary(op, x.b, x.a) : im.b.binary(op, x.a, x.b);
    if (integer && !comparison) y = im.b.cast(y, DType::kS32);
    im.set_output(node, 0, Operand{y, x.channels_last, {}});
    return absl::OkStatus();
  };
}

// Not of booleans (s32 0 or 1 on the device): 1 - x.
absl::Status convert_not(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (!x->on_device()) {
    Folded f = *x->folded;
    for (double& v : f.data) v = v != 0 ? 0 : 1;
    im.set_output(node, 0, Operand{{}, false, f});
    return absl::OkStatus();
  }
  Value v = x->value;
  if (v.dtype() == DType::kS32) v = im.b.cast(v, DType::kF32);
  Value one = im.b.broadcast(im.b.scalar(1.0f), v.shape(), {});
  im.set_output(node, 0, Operand{im.b.cast(one - v, DType::kS32), x->channels_last, {}});
  return absl::OkStatus();
}

// Max and Min take any number of inputs.
Converter variadic(Op op, double (*fold)(double, double)) {
  return [op, fold](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto acc = im.input(node, 0);
    if (!acc.ok()) return acc.status();
    Operand result = *acc;
    for (int i = 1; i < node.input_size(); ++i) {
      auto next = im.input(node, i);
      if (!next.ok()) return next.status();
      if (!result.on_device() && !next->on_device()) {
        auto f = fold_binary(*result.folded, *next->folded, fold, result.folded->integer);
        if (!f.ok()) return im.error(node, std::string(f.status().message()));
        result = Operand{{}, false, *std::move(f)};
        continue;
      }
      const Aligned x = align(im, result, *next);
      result = Operand{im.b.binary(op, x.a, x.b), x.channels_last, {}};
    }
    im.set_output(node, 0, result);
    return absl::OkStatus();
  };
}

// A unary op keeps its operand's layout; `fold` computes it at import time.
Converter unary(const std::function<Value(GraphBuilder&, Value)>& op, double (*fold)(double)) {
  return [op, fold](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    if (!x->on_device()) {
      Folded f = *x->folded;
      for (double& v : f.data) v = fold(v);
      im.set_output(node, 0, Operand{{}, false, f});
      return absl::OkStatus();
    }
    im.set_output(node, 0, Operand{op(im.b, x->value), x->channels_last, {}});
    return absl::OkStatus();
  };
}

Converter unary_op(Op op, double (*fold)(double)) {
  return unary([op](GraphBuilder& b, Value v) { return b.unary(op, v); }, fold);
}

double relu(double x) { return std::max(0.0, x); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double tanh_(double x) { return std::tanh(x); }
double exp_(double x) { return std::exp(x); }
double log_(double x) { return std::log(x); }
double neg(double x) { return -x; }
double erf_(double x) { return std::erf(x); }
double sqrt_(double x) { return std::sqrt(x); }
double reciprocal(double x) { return 1 / x; }
double identity(double x) { return x; }

// 1 / v, the one in v's type.
Value reciprocal_op(GraphBuilder& b, Value v) {
  Value one = b.broadcast(b.scalar(1.0f), v.shape(), {});
  if (v.dtype() != DType::kF32) one = b.cast(one, v.dtype());
  return b.binary(Op::kDiv, one, v);
}
// sqrt(v) = 1 / rsqrt(v): 0 at 0, where v * rsqrt(v) would be 0 * inf.
Value sqrt_op(GraphBuilder& b, Value v) { return reciprocal_op(b, b.unary(Op::kRsqrt, v)); }

// Pow with an exponent known at import time: the products and roots XLA expands it into.
absl::Status convert_pow(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  auto e = im.folded_input(node, 1, "the exponent");
  if (!e.ok()) return e.status();
  if (e->elements() != 1) return im.error(node, "tpusim takes a scalar exponent");
  const double p = e->data[0];
  if (!x->on_device()) {
    Folded f = *x->folded;
    for (double& v : f.data) v = std::pow(v, p);
    im.set_output(node, 0, Operand{{}, false, f});
    return absl::OkStatus();
  }
  GraphBuilder& b = im.b;
  const Value v = x->value;
  Value y;
  if (p == 1)
    y = v;
  else if (p == 2)
    y = b.unary(Op::kSquare, v);
  else if (p == 3)
    y = b.unary(Op::kSquare, v) * v;
  else if (p == 0.5)
    y = sqrt_op(b, v);
  else if (p == -0.5)
    y = b.unary(Op::kRsqrt, v);
  else if (p == -1)
    y = reciprocal_op(b, v);
  else
    return im.error(node, str_cat("exponent ", static_cast<float>(p),
                                  ": tpusim takes -1, -0.5, 0.5, 1, 2 and 3"));
  im.set_output(node, 0, Operand{y, x->channels_last, {}});
  return absl::OkStatus();
}

// Clip(x, min, max): the bounds from inputs (opset 11+) or attributes, known at import time.
absl::Status convert_clip(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (!x->on_device()) return im.error(node, "clipping a tensor known at import time");
  Value y = x->value;
  for (int i : {1, 2}) {
    if (!im.has_input(node, i)) continue;
    auto bound = im.folded_input(node, i, i == 1 ? "the minimum" : "the maximum");
    if (!bound.ok()) return bound.status();
    if (bound->elements() != 1) return im.error(node, "tpusim takes scalar bounds");
    const Value limit = im.as_type(
        im.b.broadcast(im.b.scalar(static_cast<float>(bound->data[0])), y.shape(), {}), y.dtype());
    y = im.b.binary(i == 1 ? Op::kMax : Op::kMin, y, limit);
  }
  im.set_output(node, 0, Operand{y, x->channels_last, {}});
  return absl::OkStatus();
}

// LeakyRelu(x) = max(x, alpha x) for 0 <= alpha <= 1.
absl::Status convert_leaky_relu(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  if (!x->on_device()) return im.error(node, "a tensor known at import time");
  const float alpha = im.attr_float(node, "alpha", 0.01f);
  if (alpha < 0 || alpha > 1) return im.error(node, str_cat("alpha ", alpha, " outside [0, 1]"));
  im.set_output(node, 0,
                Operand{im.b.binary(Op::kMax, x->value, x->value * alpha), x->channels_last, {}});
  return absl::OkStatus();
}

absl::Status convert_where(Importer& im, const onnx::NodeProto& node) {
  auto c = im.input(node, 0);
  auto x = im.input(node, 1);
  auto y = im.input(node, 2);
  for (auto* s : {&c, &x, &y}) {
    if (!s->ok()) return s->status();
  }
  if (!c->on_device() && !x->on_device() && !y->on_device()) {
    auto picked = fold_binary(
        *c->folded, *x->folded, [](double k, double v) { return k != 0 ? v : NAN; },
        x->folded->integer);
    if (!picked.ok()) return im.error(node, std::string(picked.status().message()));
    auto out = fold_binary(
        *picked, *y->folded, [](double p, double v) { return std::isnan(p) ? v : p; },
        y->folded->integer);
    if (!out.ok()) return im.error(node, std::string(out.status().message()));
    im.set_output(node, 0, Operand{{}, false, *std::move(out)});
    return absl::OkStatus();
  }
  Value cond = im.logical(*c);
  Value a = im.logical(*x), other = im.logical(*y);
  im.match_types(&a, &other);
  auto dims = broadcast_dims(cond.shape().dims(), a.shape().dims());
  if (dims.ok()) dims = broadcast_dims(*dims, other.shape().dims());
  if (!dims.ok()) return im.error(node, std::string(dims.status().message()));
  const Shape s(*dims);
  if (cond.dtype() == DType::kS32) cond = im.b.cast(cond, a.dtype());
  // One at a time, the last argument first (graph/builder.h: node order).
  const Value other_s = im.b.broadcast_to(other, s);
  const Value a_s = im.b.broadcast_to(a, s);
  const Value cond_s = im.b.broadcast_to(cond, s);
  im.set_output(node, 0, Operand{im.b.select(cond_s, a_s, other_s), false, {}});
  return absl::OkStatus();
}

absl::Status convert_cast(Importer& im, const onnx::NodeProto& node) {
  auto x = im.input(node, 0);
  if (!x.ok()) return x.status();
  const int64_t to = im.attr_int(node, "to", 0);
  const bool to_float = to == onnx::TensorProto::FLOAT || to == onnx::TensorProto::DOUBLE ||
                        to == onnx::TensorProto::FLOAT16;
  const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32 ||
                      to == onnx::TensorProto::BOOL;
  if (!to_float && !to_int && to != onnx::TensorProto::BFLOAT16)
    return im.error(node, str_cat("a cast to ", elem_type_name(static_cast<int32_t>(to))));
  if (!x->on_device()) {
    Folded f = *x->folded;
    if (to_int) {
      for (double& v : f.data) v = to == onnx::TensorProto::BOOL ? (v != 0) : std::trunc(v);
    }
    f.integer = to_int;
    im.set_output(node, 0, Operand{{}, false, f});
    return absl::OkStatus();
  }
  const DType target = to_int ? DType::kS32 : to_float ? DType::kF32 : DType::kBF16;
  if (to == onnx::TensorProto::BOOL && x->value.dtype() != DType::kS32)
    return im.error(node, "a cast of floats to bool");
  const Value y = x->value.dtype() == target ? x->value : im.b.cast(x->value, target);
  im.set_output(node, 0, Operand{y, x->channels_last, {}});
  return absl::OkStatus();
}

// Softmax and LogSoftmax: over `axis` from opset 13; before it, over every dimension from
// `axis` on (default 1), as a 2-D [outer, inner] softmax.
Converter softmax(bool log) {
  return [log](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    Value v = im.logical(*x);
    const int64_t rank = v.shape().rank();
    const bool coerced = im.model.opset < 13;
    auto axis = normalize_axis(im.attr_int(node, "axis", coerced ? 1 : -1), rank);
    if (!axis.ok()) return im.error(node, std::string(axis.status().message()));
    auto apply = [&](Value t) { return log ? layers::log_softmax(t) : layers::softmax(t); };
    const Shape shape = v.shape();
    Value y;
    if (*axis == rank - 1) {
      y = apply(v);
    } else if (coerced) {
      int64_t outer = 1;
      for (int64_t i = 0; i < *axis; ++i) outer *= shape.dim(static_cast<int>(i));
      y = im.b.reshape(apply(im.b.reshape(v, {outer, shape.elements() / outer})), shape);
    } else {
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      std::swap(perm[static_cast<size_t>(*axis)], perm.back());
      y = im.b.transpose(apply(im.b.transpose(v, perm)), perm);
    }
    im.set_output(node, 0, Operand{y, false, {}});
    return absl::OkStatus();
  };
}

// ReduceProd of a tensor known at import time (exporters multiply shapes with it).
absl::Status convert_reduce_prod(Importer& im, const onnx::NodeProto& node) {
  auto x = im.folded_input(node, 0, "ReduceProd's input");
  if (!x.ok()) return x.status();
  const std::optional<std::vector<int64_t>> axes = im.attr_ints(node, "axes");
  const bool all = !axes || axes->empty() || (axes->size() == x->dims.size());
  if (!all && !(x->dims.size() == 1)) return im.error(node, "a product over some axes only");
  double p = 1;
  for (double v : x->data) p *= v;
  Folded out = fold_scalar(p, x->integer);
  if (im.attr_int(node, "keepdims", 1) != 0) out.dims.assign(x->dims.size(), 1);
  im.set_output(node, 0, Operand{{}, false, out});
  return absl::OkStatus();
}

// ReduceMean, ReduceSum and ReduceMax over the axes (an attribute, or ReduceSum's input from
// opset 13); every axis when none are given.
Converter reduce(Op op, bool mean) {
  return [op, mean](Importer& im, const onnx::NodeProto& node) -> absl::Status {
    auto x = im.input(node, 0);
    if (!x.ok()) return x.status();
    if (!x->on_device()) return im.error(node, "reducing a tensor known at import time");
    std::optional<std::vector<int64_t>> axes = im.attr_ints(node, "axes");
    if (!axes && im.has_input(node, 1)) {
      auto given = im.folded_input(node, 1, "the axes");
      if (!given.ok()) return given.status();
      auto ints = given->ints("the axes");
      if (!ints.ok()) return im.error(node, std::string(ints.status().message()));
      axes = *ints;
    }
    const std::vector<int64_t> dims = Importer::logical_dims(*x);
    const auto rank = static_cast<int64_t>(dims.size());
    std::vector<int64_t> over;
    if (!axes || axes->empty()) {
      if (axes && im.attr_int(node, "noop_with_empty_axes", 0) != 0) {
        im.set_output(node, 0, *x);
        return absl::OkStatus();
      }
      for (int64_t i = 0; i < rank; ++i) over.push_back(i);
    } else {
      for (int64_t a : *axes) {
        auto n = normalize_axis(a, rank);
        if (!n.ok()) return im.error(node, std::string(n.status().message()));
        over.push_back(*n);
      }
      std::sort(over.begin(), over.end());
    }
    const bool keep = im.attr_int(node, "keepdims", 1) != 0;
    auto apply = [&](Value v, std::vector<int64_t> a) {
      return mean ? layers::reduce_mean(v, std::move(a)) : im.b.reduce(op, v, std::move(a));
    };
    // A spatial reduction of an image held NHWC (a global pool): over its H and W.
    if (x->channels_last && over == std::vector<int64_t>{2, 3}) {
      Value y = apply(x->value, {1, 2});
      if (keep) {
        const Shape s = y.shape();
        im.set_output(node, 0, Operand{im.b.reshape(y, {s.dim(0), 1, 1, s.dim(1)}), true, {}});
      } else {
        im.set_output(node, 0, Operand{y, false, {}});
      }
      return absl::OkStatus();
    }
    Value y = apply(im.logical(*x), over);
    if (keep) {
      std::vector<int64_t> kept = dims;
      for (int64_t a : over) kept[static_cast<size_t>(a)] = 1;
      y = im.b.reshape(y, Shape(kept));
    }
    im.set_output(node, 0, Operand{y, false, {}});
    return absl::OkStatus();
  };
}

}  // namespace

void add_elementwise_converters(std::map<std::string, Converter>* table) {
  auto& t = *table;
  t["Add"] = binary(Op::kAdd, add);
  t["Sub"] = binary(Op::kSub, sub);
  t["Mul"] = binary(Op::kMul, mul);
  t["Div"] = binary(Op::kDiv, div_float);
  t["Equal"] = binary(Op::kEqual, equal, true);
  t["Greater"] = binary(Op::kGreater, greater, true);
  t["Less"] = binary(Op::kGreater, less, true, true);
  t["Max"] = variadic(Op::kMax, maximum);
  t["Min"] = variadic(Op::kMin, minimum);
  t["Relu"] = unary_op(Op::kRelu, relu);
  t["Sigmoid"] = unary_op(Op::kSigmoid, sigmoid);
  t["Tanh"] = unary_op(Op::kTanh, tanh_);
  t["Exp"] = unary_op(Op::kExp, exp_);
  t["Log"] = unary_op(Op::kLog, log_);
  t["Neg"] = unary_op(Op::kNeg, neg);
  t["Erf"] = unary_op(Op::kErf, erf_);
  t["Sqrt"] = unary(sqrt_op, sqrt_);
  t["Reciprocal"] = unary(reciprocal_op, reciprocal);
  t["Identity"] = unary([](GraphBuilder&, Value v) { return v; }, identity);
  t["Pow"] = convert_pow;
  t["Clip"] = convert_clip;
  t["LeakyRelu"] = convert_leaky_relu;
  t["Where"] = convert_where;
  t["Cast"] = convert_cast;
  t["Softmax"] = softmax(false);
  t["LogSoftmax"] = softmax(true);
  t["ReduceMean"] = reduce(Op::kReduceSum, true);
  t["ReduceSum"] = reduce(Op::kReduceSum, false);
  t["ReduceMax"] = reduce(Op::kReduceMax, false);
  t["ReduceProd"] = convert_reduce_prod;
  t["Not"] = convert_not;
}

}  // namespace tpusim::runtime::onnx_import
