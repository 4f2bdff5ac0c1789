#include "runtime/graph/builder.h"

#include <algorithm>
#include <numeric>

#include "common/strings.h"
#include "runtime/graph/builder_checks.h"

namespace tpusim::runtime {

using builder_checks::shapes_of;
using builder_checks::valid_axes;

Shape Value::shape() const {
  if (!valid()) throw InvalidValueError();
  return builder->node(*this).shape;
}
DType Value::dtype() const {
  if (!valid()) throw InvalidValueError();
  return builder->node(*this).dtype;
}

GraphBuilder::Scope::Scope(GraphBuilder& b, const std::string& name) : b_(b) {
  b_.scopes_.push_back(name);
}
GraphBuilder::Scope::~Scope() { b_.scopes_.pop_back(); }

std::string GraphBuilder::unique_name(const std::string& base) {
  for (auto& [name, count] : name_counts_) {
    if (name == base) return str_cat(base, "_", ++count);
  }
  name_counts_.emplace_back(base, 1);
  return str_cat(base, "_1");
}

std::string GraphBuilder::label_for(Op op) const {
  std::string label;
  for (const auto& s : scopes_) label += s + "/";
  return label + op_name(op);
}

Value GraphBuilder::fail(Op op, const std::string& message) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(str_cat(op_name(op), " '", label_for(op), "': ", message));
  }
  return Value{};
}

void GraphBuilder::set_composite_gradient(Value output, CompositeGradient kind,
                                          const std::vector<Value>& inputs,
                                          const std::vector<Value>& saved, float epsilon) {
  if (!usable({output})) return;
  Composite c{kind, {}, {}, epsilon};
  for (const Value& v : inputs) {
    if (!usable({v})) return;
    c.inputs.push_back(v.id);
  }
  for (const Value& v : saved) {
    if (!usable({v})) return;
    c.saved.push_back(v.id);
  }
  composites_[output.id] = std::move(c);
}

const GraphBuilder::Composite* GraphBuilder::composite_gradient(int id) const {
  auto it = composites_.find(id);
  return it == composites_.end() ? nullptr : &it->second;
}

bool GraphBuilder::usable(std::initializer_list<Value> values) const {
  if (!status_.ok()) return false;
  return std::all_of(values.begin(), values.end(), [](const Value& v) { return v.valid(); });
}

Value GraphBuilder::add(Op op, std::vector<Value> inputs, DType dtype, Shape shape, Attrs attrs) {
  Node n;
  n.op = op;
  for (const Value& v : inputs) n.inputs.push_back(v.id);
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.attrs = std::move(attrs);
  n.label = label_for(op);
  return Value{graph_.add(std::move(n)), this};
}

namespace {

// numpy broadcasting of two shapes; false when they do not broadcast.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const int ai = a.rank() - rank + i, bi = b.rank() - rank + i;
    const int64_t da = ai >= 0 ? a.dim(ai) : 1, db = bi >= 0 ? b.dim(bi) : 1;
    if (da != db && da != 1 && db != 1) return false;
    dims[static_cast<size_t>(i)] = std::max(da, db);
  }
  *out = Shape(dims);
  return true;
}

}  // namespace

Value GraphBuilder::constant(HostTensor value) {
  if (!status_.ok()) return {};
  const size_t want = static_cast<size_t>(value.shape.elements());
  if ((value.dtype == DType::kS32 ? value.i.size() : value.f.size()) != want) {
    return fail(Op::kConstant,
                str_cat("holds the wrong number of values for shape ", value.shape.str()));
  }
  Attrs attrs;
  const DType dtype = value.dtype;
  const Shape shape = value.shape;
  attrs.value = std::move(value);
  return add(Op::kConstant, {}, dtype, shape, std::move(attrs));
}

Value GraphBuilder::scalar(float value) { return constant(HostTensor::scalar(value)); }

Value GraphBuilder::variable(const std::string& name, DType dtype, const Shape& shape,
                             Initializer init) {
  if (!status_.ok()) return {};
  if (graph_.find_variable(name) >= 0)
    return fail(Op::kVariable, str_cat("a variable named '", name, "' exists already"));
  if (dtype == DType::kS32 && init.kind != InitKind::kZeros && init.kind != InitKind::kConstant) {
    return fail(Op::kVariable,
                str_cat("s32 variable '", name, "' takes a zeros or constant initializer"));
  }
  Attrs attrs;
  attrs.name = name;
  attrs.initializer = init;
  if (dtype == DType::kBF16 && in_bfloat16_scope())
    return cast(add(Op::kVariable, {}, DType::kF32, shape, std::move(attrs)), DType::kBF16);
  return add(Op::kVariable, {}, dtype, shape, std::move(attrs));
}

Value GraphBuilder::infeed(const std::string& name, DType dtype, const Shape& shape) {
  if (!status_.ok()) return {};
  for (int id : graph_.infeeds()) {
    if (graph_.node(id).attrs.name == name)
      return fail(Op::kInfeed, str_cat("an infeed named '", name, "' exists already"));
  }
  Attrs attrs;
  attrs.name = name;
  return add(Op::kInfeed, {}, dtype, shape, std::move(attrs));
}

Value GraphBuilder::rng_uniform(const Shape& shape, uint64_t seed) {
  if (!status_.ok()) return {};
  Attrs attrs;
  attrs.seed = seed;
  return add(Op::kRngUniform, {}, DType::kF32, shape, std::move(attrs));
}

Value GraphBuilder::binary(Op op, Value a, Value b) {
  if (!usable({a, b})) return {};
  if (a.dtype() != b.dtype()) return fail(op, str_cat("operand types differ: ", shapes_of({a, b})));
  const bool comparison = op == Op::kEqual || op == Op::kGreater;
  if (!comparison && !is_floating(a.dtype()))
    return fail(op, str_cat("needs floating operands, got ", shapes_of({a, b})));
  Shape out;
  if (!broadcast_shapes(a.shape(), b.shape(), &out)) {
    return fail(op, str_cat("shapes do not broadcast: ", shapes_of({a, b})));
  }
  // A comparison of floats gives 1 or 0 in their type (exact in bf16 too), so a mask multiplies
  // the values it compares without a cast; of integers, f32.
  const DType dtype = comparison && !is_floating(a.dtype()) ? DType::kF32 : a.dtype();
  return add(op, {a, b}, dtype, out);
}

Value GraphBuilder::unary(Op op, Value a) {
  if (!usable({a})) return {};
  if (!is_floating(a.dtype()) && op != Op::kStopGradient) {
    return fail(op, str_cat("needs a floating operand, got ", shapes_of({a})));
  }
  return add(op, {a}, a.dtype(), a.shape());
}

Value GraphBuilder::select(Value condition, Value a, Value b) {
  if (!usable({condition, a, b})) return {};
  if (condition.shape() != a.shape() || a.shape() != b.shape() || a.dtype() != b.dtype()) {
    return fail(Op::kSelect, str_cat("condition and branches must share one shape and type: ",
                                     shapes_of({condition, a, b})));
  }
  return add(Op::kSelect, {condition, a, b}, a.dtype(), a.shape());
}

Value GraphBuilder::cast(Value a, DType to) {
  if (!usable({a})) return {};
  Attrs attrs;
  attrs.to = to;
  return add(Op::kCast, {a}, to, a.shape(), std::move(attrs));
}

Value GraphBuilder::reduce(Op op, Value a, std::vector<int64_t> axes) {
  if (!usable({a})) return {};
  if (!is_floating(a.dtype()))
    return fail(op, str_cat("needs a floating operand, got ", shapes_of({a})));
  if (!valid_axes(axes, a.shape().rank())) {
    return fail(
        op, str_cat("axes [", str_join(axes, ", "), "] are not distinct axes of ", shapes_of({a})));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < a.shape().rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) dims.push_back(a.shape().dim(i));
  }
  std::sort(axes.begin(), axes.end());
  Attrs attrs;
  attrs.axes = std::move(axes);
  return add(op, {a}, a.dtype(), Shape(dims), std::move(attrs));
}

Value GraphBuilder::argmax(Value a, int64_t axis) {
  if (!usable({a})) return {};
  if (axis < 0 || axis >= a.shape().rank())
    return fail(Op::kArgMax, str_cat("axis ", axis, " is not an axis of ", shapes_of({a})));
  std::vector<int64_t> dims = a.shape().dims();
  dims.erase(dims.begin() + axis);
  Attrs attrs;
  attrs.axis = axis;
  return add(Op::kArgMax, {a}, DType::kS32, Shape(dims), std::move(attrs));
}

Value GraphBuilder::matmul(Value a, Value b) {
  if (!usable({a, b})) return {};
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (a.dtype() != b.dtype() || !is_floating(a.dtype())) {
    return fail(Op::kMatMul,
                str_cat("needs floating operands of one type, got ", shapes_of({a, b})));
  }
  if (sa.rank() < 2 || sb.rank() < 2 || (sb.rank() != 2 && sb.rank() != sa.rank())) {
    return fail(Op::kMatMul,
                str_cat("needs [..., M, K] x [..., K, N] (rhs rank 2 or equal ranks), got ",
                        shapes_of({a, b})));
  }
  if (sa.dim(sa.rank() - 1) != sb.dim(sb.rank() - 2)) {
    return fail(Op::kMatMul, str_cat("inner dimensions differ: ", shapes_of({a, b})));
  }
  if (sb.rank() == sa.rank()) {
    for (int i = 0; i < sa.rank() - 2; ++i) {
      if (sa.dim(i) != sb.dim(i))
        return fail(Op::kMatMul, str_cat("batch dimensions differ: ", shapes_of({a, b})));
    }
  }
  std::vector<int64_t> dims = sa.dims();
  dims.back() = sb.dim(sb.rank() - 1);
  return add(Op::kMatMul, {a, b}, a.dtype(), Shape(dims));
}

bool resolve_window(const Shape& image, Window* w, int64_t* out_h, int64_t* out_w,
                    std::string* error) {
  if (image.rank() != 4) {
    *error = str_cat("needs an NHWC image, got ", image.str());
    return false;
  }
  if (w->kh < 1 || w->kw < 1 || w->sh < 1 || w->sw < 1) {
    *error = "window and strides must be >= 1";
    return false;
  }
  const int64_t h = image.dim(1), wd = image.dim(2);
  if (w->explicit_padding) {
    const int64_t pads[] = {w->pad_top, w->pad_bottom, w->pad_left, w->pad_right};
    for (int64_t p : pads) {
      if (p < 0 || p >= std::max(w->kh, w->kw)) {
        *error =
            str_cat("explicit padding (", w->pad_top, ", ", w->pad_bottom, ", ", w->pad_left, ", ",
                    w->pad_right, ") must be in [0, window) for a ", w->kh, "x", w->kw, " window");
        return false;
      }
    }
    const int64_t ph = h + w->pad_top + w->pad_bottom, pw = wd + w->pad_left + w->pad_right;
    if (w->kh > ph || w->kw > pw) {
      *error = str_cat("a ", w->kh, "x", w->kw, " window does not fit the padded ", ph, "x", pw,
                       " image ", image.str());
      return false;
    }
    *out_h = (ph - w->kh) / w->sh + 1;
    *out_w = (pw - w->kw) / w->sw + 1;
  } else if (w->same) {
    *out_h = (h + w->sh - 1) / w->sh;
    *out_w = (wd + w->sw - 1) / w->sw;
    w->pad_top = std::max<int64_t>((*out_h - 1) * w->sh + w->kh - h, 0) / 2;
    w->pad_left = std::max<int64_t>((*out_w - 1) * w->sw + w->kw - wd, 0) / 2;
  } else {
    if (w->kh > h || w->kw > wd) {
      *error = str_cat("a ", w->kh, "x", w->kw, " VALID window does not fit the ", h, "x", wd,
                       " image ", image.str());
      return false;
    }
    *out_h = (h - w->kh) / w->sh + 1;
    *out_w = (wd - w->kw) / w->sw + 1;
    w->pad_top = w->pad_left = 0;
  }
  w->image = image;
  return true;
}

Value GraphBuilder::extract_patches(Value image, Window window) {
  if (!usable({image})) return {};
  int64_t oh = 0, ow = 0;
  std::string error;
  if (!resolve_window(image.shape(), &window, &oh, &ow, &error))
    return fail(Op::kExtractPatches, error);
  const Shape& s = image.shape();
  Attrs attrs;
  attrs.window = window;
  return add(Op::kExtractPatches, {image}, image.dtype(),
             Shape{s.dim(0), oh, ow, window.kh * window.kw * s.dim(3)}, std::move(attrs));
}

Value GraphBuilder::patches_to_image(Value patches, const Window& window) {
  if (!usable({patches})) return {};
  Window w = window;
  int64_t oh = 0, ow = 0;
  std::string error;
  if (!resolve_window(window.image, &w, &oh, &ow, &error)) return fail(Op::kPatchesToImage, error);
  const Shape want{window.image.dim(0), oh, ow, w.kh * w.kw * window.image.dim(3)};
  if (patches.shape() != want) {
    return fail(Op::kPatchesToImage,
                str_cat("patches ", patches.shape().str(), " do not come from image ",
                        window.image.str(), " (want ", want.str(), ")"));
  }
  Attrs attrs;
  attrs.window = w;
  return add(Op::kPatchesToImage, {patches}, patches.dtype(), window.image, std::move(attrs));
}

Value GraphBuilder::one_hot(Value labels, int64_t depth) {
  if (!usable({labels})) return {};
  if (labels.dtype() != DType::kS32)
    return fail(Op::kOneHot, str_cat("needs s32 labels, got ", shapes_of({labels})));
  if (depth < 1) return fail(Op::kOneHot, str_cat("depth ", depth, " must be >= 1"));
  std::vector<int64_t> dims = labels.shape().dims();
  dims.push_back(depth);
  Attrs attrs;
  attrs.depth = depth;
  return add(Op::kOneHot, {labels}, DType::kF32, Shape(dims), std::move(attrs));
}

Value GraphBuilder::cross_replica_sum(Value a) {
  if (!usable({a})) return {};
  if (a.dtype() != DType::kF32) {
    // The backends sum replicas in f32 in ring order; a bf16 sum would round at every hop.
    return fail(Op::kCrossReplicaSum,
                str_cat("sums f32 values only (cast to f32 first), got ", shapes_of({a})));
  }
  return add(Op::kCrossReplicaSum, {a}, a.dtype(), a.shape());
}

void GraphBuilder::output(const std::string& name, Value v) {
  if (!usable({v})) return;
  graph_.add_output(name, v.id);
}

void GraphBuilder::update(Value variable, Value value) {
  if (!usable({variable, value})) return;
  if (node(variable).op != Op::kVariable) {
    fail(Op::kVariable, "update: the target is not a variable");
    return;
  }
  if (variable.shape() != value.shape() || variable.dtype() != value.dtype()) {
    fail(Op::kVariable,
         str_cat("update of '", node(variable).attrs.name, "': value ", shapes_of({value}),
                 " does not match the variable ", shapes_of({variable})));
    return;
  }
  graph_.add_update(variable.id, value.id);
}

namespace {
// A scalar of `like`'s type, so arithmetic with literals works on bf16 values too.
Value scalar_like(Value like, float s) {
  HostTensor t = HostTensor::scalar(s);
  t.dtype = like.dtype();
  return like.builder->constant(std::move(t));
}
Value binary_op(Op op, Value a, Value b) {
  if (!a.valid() || !b.valid()) return {};
  return a.builder->binary(op, a, b);
}
}  // namespace

Value operator+(Value a, Value b) { return binary_op(Op::kAdd, a, b); }
Value operator-(Value a, Value b) { return binary_op(Op::kSub, a, b); }
Value operator*(Value a, Value b) { return binary_op(Op::kMul, a, b); }
Value operator/(Value a, Value b) { return binary_op(Op::kDiv, a, b); }
Value operator-(Value a) { return a.valid() ? a.builder->unary(Op::kNeg, a) : Value{}; }
Value operator+(Value a, float s) { return a.valid() ? a + scalar_like(a, s) : Value{}; }
Value operator*(Value a, float s) { return a.valid() ? a * scalar_like(a, s) : Value{}; }
Value operator-(float s, Value a) { return a.valid() ? scalar_like(a, s) - a : Value{}; }

}  // namespace tpusim::runtime
