#include "runtime/graph/autodiff.h"

#include <algorithm>
#include <numeric>

#include "common/strings.h"

namespace tpusim::runtime {
namespace {

Value value_of(GraphBuilder& b, int id) { return Value{id, &b}; }

Value zeros_like(GraphBuilder& b, const Shape& shape, DType dtype) {
  HostTensor t = HostTensor::zeros(dtype, Shape{});
  return b.broadcast(b.constant(t), shape, {});
}

// Sums a numpy-broadcast gradient back to the operand's shape.
Value unbroadcast(GraphBuilder& b, Value g, const Shape& to) {
  if (g.shape() == to) return g;
  const int offset = g.shape().rank() - to.rank();
  std::vector<int64_t> axes;
  for (int d = 0; d < g.shape().rank(); ++d) {
    if (d < offset || to.dim(d - offset) == 1) axes.push_back(d);
  }
  return b.reshape(b.reduce(Op::kReduceSum, g, axes), to);
}

// A value with the reduced axes put back as size-1... then broadcast to `shape`.
Value expand_reduced(GraphBuilder& b, Value reduced, const Shape& shape,
                     const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;
  for (int d = 0; d < shape.rank(); ++d) {
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
  }
  return b.broadcast(reduced, shape, kept);
}

// Swaps the last two dimensions.
Value transpose_last(GraphBuilder& b, Value v) {
  std::vector<int64_t> perm(static_cast<size_t>(v.shape().rank()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return b.transpose(v, perm);
}

// The gradients of an elementwise node's inputs (numpy broadcasting summed back); false for
// other ops.
bool elementwise_vjp(GraphBuilder& b, int id, const Node& n, Value g, std::vector<Value>* grads) {
  auto in = [&](int i) { return value_of(b, n.inputs[static_cast<size_t>(i)]); };
  auto out = [&]() { return value_of(b, id); };
  *grads = [&]() -> std::vector<Value> {
    switch (n.op) {
      case Op::kAdd:
        return {unbroadcast(b, g, in(0).shape()), unbroadcast(b, g, in(1).shape())};
      case Op::kSub:
        return {unbroadcast(b, g, in(0).shape()), unbroadcast(b, -g, in(1).shape())};
      case Op::kMul:
        return {unbroadcast(b, g * in(1), in(0).shape()), unbroadcast(b, g * in(0), in(1).shape())};
      case Op::kDiv: {
        const Value da = unbroadcast(b, g / in(1), in(0).shape());  // builder.h: node order
        const Value squared = in(1) * in(1);
        return {da, unbroadcast(b, -(g * in(0)) / squared, in(1).shape())};
      }
      case Op::kMax:
      case Op::kMin: {
        // The winner takes the gradient; a tie splits it in half.
        const Value a = in(0), c = in(1);
        const Value wins =
            n.op == Op::kMax ? b.binary(Op::kGreater, a, c) : b.binary(Op::kGreater, c, a);
        const Value half_ties = b.binary(Op::kEqual, a, c) * 0.5f;
        const Value wa = wins + half_ties;
        const Value wb = (1.0f - wins) - half_ties;
        return {unbroadcast(b, g * wa, a.shape()), unbroadcast(b, g * wb, c.shape())};
      }
      case Op::kSelect: {
        const Value zero = zeros_like(b, n.shape, n.dtype);
        return {Value{}, b.select(in(0), g, zero), b.select(in(0), zero, g)};
      }
      case Op::kNeg:
        return {-g};
      case Op::kRelu:  // from the output, as TensorFlow's ReluGrad: the input need not be kept
        return {g * b.binary(Op::kGreater, out(), zeros_like(b, n.shape, n.dtype))};
      case Op::kTanh:
        return {g * (1.0f - out() * out())};
      case Op::kSigmoid: {
        const Value complement = 1.0f - out();  // first (builder.h: node order)
        return {g * out() * complement};
      }
      case Op::kExp:
        return {g * out()};
      case Op::kLog:
        return {g / in(0)};
      case Op::kRsqrt:  // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
        return {g * out() * out() * out() * -0.5f};
      case Op::kSquare:
        return {g * in(0) * 2.0f};
      case Op::kErf:  // d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2)
        return {g * b.unary(Op::kExp, -b.unary(Op::kSquare, in(0))) * 1.1283791670955126f};
      case Op::kCast:
        return {is_floating(in(0).dtype()) ? b.cast(g, in(0).dtype()) : Value{}};
      default:
        return {};
    }
  }();
  return !grads->empty();
}

// The gradient of a layout node's input (transpose, broadcast, concat, slice, pad); false for
// other ops.
bool layout_vjp(GraphBuilder& b, const Node& n, Value g, std::vector<Value>* grads) {
  auto in = [&](int i) { return value_of(b, n.inputs[static_cast<size_t>(i)]); };
  switch (n.op) {
    case Op::kTranspose: {
      std::vector<int64_t> inverse(n.attrs.axes.size());
      for (size_t i = 0; i < inverse.size(); ++i)
        inverse[static_cast<size_t>(n.attrs.axes[i])] = static_cast<int64_t>(i);
      *grads = {b.transpose(g, inverse)};
      return true;
    }
    case Op::kBroadcast: {
      // Sum over the output dims no input dim maps to, and over stretched size-1 dims.
      const Shape& from = in(0).shape();
      std::vector<int64_t> axes;
      for (int d = 0; d < n.shape.rank(); ++d) {
        auto it = std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d);
        if (it == n.attrs.axes.end() ||
            from.dim(static_cast<int>(it - n.attrs.axes.begin())) != n.shape.dim(d)) {
          axes.push_back(d);
        }
      }
      *grads = {b.reshape(b.reduce(Op::kReduceSum, g, axes), from)};
      return true;
    }
    case Op::kConcat: {
      int64_t offset = 0;
      grads->clear();
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const Shape& s = in(static_cast<int>(i)).shape();
        std::vector<int64_t> begin(static_cast<size_t>(s.rank()), 0), end = n.shape.dims();
        begin[static_cast<size_t>(n.attrs.axis)] = offset;
        end[static_cast<size_t>(n.attrs.axis)] = offset + s.dim(static_cast<int>(n.attrs.axis));
        offset = end[static_cast<size_t>(n.attrs.axis)];
        grads->push_back(b.slice(g, begin, end));
      }
      return true;
    }
    case Op::kSlice: {
      std::vector<int64_t> after;
      for (int d = 0; d < n.shape.rank(); ++d)
        after.push_back(in(0).shape().dim(d) - n.attrs.end[static_cast<size_t>(d)]);
      *grads = {b.pad(g, n.attrs.begin, after)};
      return true;
    }
    case Op::kPad: {
      std::vector<int64_t> end;
      for (int d = 0; d < n.shape.rank(); ++d)
        end.push_back(n.attrs.begin[static_cast<size_t>(d)] + in(0).shape().dim(d));
      *grads = {b.slice(g, n.attrs.begin, end)};
      return true;
    }
    default:
      return false;
  }
}

// The gradients of a matmul's operands a [..., M, K] and w ([..., K, N], or rank 2 shared by the
// batch) given the product's gradient g.
std::vector<Value> matmul_vjp(GraphBuilder& b, Value a, Value w, Value g) {
  const Value ga = b.matmul(g, transpose_last(b, w));
  Value gw;
  if (w.shape().rank() == a.shape().rank()) {
    gw = b.matmul(transpose_last(b, a), g);
  } else {  // shared rank-2 rhs: fold the batch dims into rows
    const int64_t k = a.shape().dim(a.shape().rank() - 1),
                  cols = g.shape().dim(g.shape().rank() - 1);
    const int64_t rows = a.shape().elements() / k;
    const Value g_rows = b.reshape(g, {rows, cols});  // first (builder.h: node order)
    gw = b.matmul(b.transpose(b.reshape(a, {rows, k}), {1, 0}), g_rows);
  }
  return {ga, gw};
}

// Gradients of node `id`'s inputs given its output's gradient g; an invalid Value means "none".
std::vector<Value> node_vjp(GraphBuilder& b, int id, Value g) {
  const Node n = b.graph().node(id);  // copy: adding nodes may move the graph's storage
  auto in = [&](int i) { return value_of(b, n.inputs[static_cast<size_t>(i)]); };
  auto out = [&]() { return value_of(b, id); };
  if (std::vector<Value> grads; elementwise_vjp(b, id, n, g, &grads)) return grads;
  if (std::vector<Value> grads; layout_vjp(b, n, g, &grads)) return grads;
  switch (n.op) {
    case Op::kReduceSum:
      return {expand_reduced(b, g, in(0).shape(), n.attrs.axes)};
    case Op::kReduceMax: {
      const Value hit =
          b.binary(Op::kEqual, in(0), expand_reduced(b, out(), in(0).shape(), n.attrs.axes));
      const Value count = b.reduce(Op::kReduceSum, hit, n.attrs.axes);
      return {hit * expand_reduced(b, g / count, in(0).shape(), n.attrs.axes)};
    }
    case Op::kReshape:
      return {b.reshape(g, in(0).shape())};
    case Op::kMatMul:
      return matmul_vjp(b, in(0), in(1), g);
    case Op::kExtractPatches:
      return {b.patches_to_image(g, n.attrs.window)};
    case Op::kPatchesToImage:
      return {b.extract_patches(g, n.attrs.window)};
    case Op::kCrossReplicaSum:
      return {b.cross_replica_sum(g)};
    // Each other's adjoints; the s32 indices get none. A clamped index's row gets its gradient.
    case Op::kGather:
      return {b.scatter_add(g, in(1), in(0).shape().dim(0)), Value{}};
    case Op::kScatterAdd:
      return {b.gather(g, in(1)), Value{}};
    default:  // sources, comparisons, argmax, one_hot, stop_gradient: no gradient flows
      return std::vector<Value>(n.inputs.size());
  }
}

// FusedBatchNormGrad in training, as XLA's BatchNormGrad expands it (N elements a feature):
//   d_beta  = sum(g)
//   d_gamma = sum(g * (x - mean)) * rsqrt(var + eps)
//   dx      = gamma * rsqrt(var + eps) / N
//             * (N * g - sum(g) - (x - mean) * sum(g * (x - mean)) / (var + eps))
// The per-feature factors are computed on [C] and broadcast, so every pass over x's shape reads
// g, x and rows of per-feature values only.
std::vector<Value> batch_norm_vjp(GraphBuilder& b, const GraphBuilder::Composite& c, Value g) {
  const Value x = value_of(b, c.inputs[0]), gamma = value_of(b, c.inputs[1]);
  const Value mean = value_of(b, c.saved[0]), var = value_of(b, c.saved[1]);
  const Shape& shape = x.shape();
  std::vector<int64_t> axes(static_cast<size_t>(shape.rank() - 1));
  std::iota(axes.begin(), axes.end(), 0);
  const float n =
      static_cast<float>(shape.elements() / std::max<int64_t>(1, mean.shape().elements()));
  auto per_feature = [&](Value v) { return expand_reduced(b, v, shape, axes); };
  const Value centred = x - per_feature(mean);
  const Value sum_g = b.reduce(Op::kReduceSum, g, axes);
  const Value sum_g_centred = b.reduce(Op::kReduceSum, g * centred, axes);
  const Value var_eps = var + c.epsilon;
  const Value rstd = b.unary(Op::kRsqrt, var_eps);
  const Value scale = gamma * rstd * (1.0f / n);
  // dx = scale * (g * n - sum_g - centred * sum_g_centred / var_eps), per feature, its nodes
  // made one by one (builder.h: node order).
  const Value centred_term = centred * per_feature(sum_g_centred / var_eps);
  const Value sum_g_term = per_feature(sum_g);
  const Value inner = g * n - sum_g_term - centred_term;
  const Value dx = per_feature(scale) * inner;
  return {dx, sum_g_centred * rstd, sum_g};
}

// The gradients TensorFlow registers for a composite op, with respect to its inputs (in the
// composite's order).
std::vector<Value> composite_vjp(GraphBuilder& b, int id, const GraphBuilder::Composite& c,
                                 Value g) {
  const Value y = value_of(b, id);
  switch (c.kind) {
    case GraphBuilder::CompositeGradient::kSoftmax: {
      // _SoftmaxGrad: (g - sum(g * y, last, keepdims)) * y, from the output alone.
      const int last = y.shape().rank() - 1;
      const Value dot = expand_reduced(b, b.reduce(Op::kReduceSum, g * y, {last}), y.shape(),
                                       {static_cast<int64_t>(last)});
      return {(g - dot) * y};
    }
    case GraphBuilder::CompositeGradient::kBatchNorm:
      return batch_norm_vjp(b, c, g);
  }
  return {};
}

// The gradients of node `id`'s inputs, by the inputs' ids: a composite's rule (its inputs) or
// the primitive's vector-Jacobian product.
std::vector<std::pair<int, Value>> input_gradients(GraphBuilder& b, int id, Value g) {
  std::vector<std::pair<int, Value>> out;
  std::vector<int> inputs;
  std::vector<Value> grads;
  if (const GraphBuilder::Composite* c = b.composite_gradient(id)) {
    inputs = c->inputs;  // copied: the rule adds nodes, and composites may grow
    grads = composite_vjp(b, id, GraphBuilder::Composite(*c), g);
  } else {
    inputs = b.graph().node(id).inputs;
    grads = node_vjp(b, id, g);
  }
  for (size_t i = 0; i < inputs.size() && i < grads.size(); ++i)
    out.emplace_back(inputs[i], grads[i]);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Value>> vjp(GraphBuilder& b, Value output, Value cotangent,
                                       const std::vector<Value>& wrt) {
  if (!b.status().ok()) return b.status();
  if (!output.valid() || !cotangent.valid())
    return absl::InvalidArgumentError("gradients: invalid output or cotangent");
  if (cotangent.shape() != output.shape()) {
    return absl::InvalidArgumentError(str_cat("gradients: cotangent ", cotangent.shape().str(),
                                              " does not match output ", output.shape().str()));
  }
  // Adjoints, filled from the output backwards. Node ids are topological, so one reverse pass
  // sees every node after all its users.
  std::vector<Value> adjoint(static_cast<size_t>(output.id + 1));
  adjoint[static_cast<size_t>(output.id)] = cotangent;
  for (int id = output.id; id >= 0; --id) {
    const Value g = adjoint[static_cast<size_t>(id)];
    if (!g.valid()) continue;
    const Node& n = b.graph().node(id);
    if (!is_floating(n.dtype)) continue;
    // Named as TensorFlow names them: "gradients/dense/matmul_grad/transpose".
    GraphBuilder::Scope scope(b, str_cat("gradients/", n.label, "_grad"));
    const Op op = n.op;  // `n` may move as gradient nodes are added
    const std::vector<std::pair<int, Value>> grads = input_gradients(b, id, g);
    if (!b.status().ok())
      return absl::InternalError(str_cat("gradients of ", op_name(op), ": ", b.status().message()));
    for (const auto& [input, grad] : grads) {
      if (!grad.valid()) continue;
      Value& slot = adjoint[static_cast<size_t>(input)];
      slot = slot.valid() ? slot + grad : grad;
    }
  }
  std::vector<Value> out;
  for (const Value& x : wrt) {
    if (!x.valid()) return absl::InvalidArgumentError("gradients: invalid value in wrt");
    const Value g = x.id <= output.id ? adjoint[static_cast<size_t>(x.id)] : Value{};
    out.push_back(g.valid() ? g : zeros_like(b, x.shape(), x.dtype()));
  }
  if (!b.status().ok()) return b.status();
  return out;
}

absl::StatusOr<std::vector<Value>> gradients(GraphBuilder& b, Value loss,
                                             const std::vector<Value>& wrt) {
  if (!loss.valid())
    return b.status().ok() ? absl::InvalidArgumentError("gradients: invalid loss") : b.status();
  if (loss.shape().rank() != 0 || !is_floating(loss.dtype())) {
    return absl::InvalidArgumentError(str_cat("gradients: the loss must be a floating scalar, got ",
                                              dtype_name(loss.dtype()), loss.shape().str()));
  }
  HostTensor one = HostTensor::scalar(1.0f);
  one.dtype = loss.dtype();
  return vjp(b, loss, b.constant(one), wrt);
}

}  // namespace tpusim::runtime
