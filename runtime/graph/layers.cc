#include "runtime/graph/layers.h"

#include <algorithm>
#include <numeric>

#include "common/strings.h"

namespace tpusim::runtime::layers {
namespace {

std::vector<int64_t> all_but_last(const Shape& s) {
  std::vector<int64_t> axes(static_cast<size_t>(std::max(0, s.rank() - 1)));
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

// Value reduced over the last axis, broadcast back to x's shape.
Value expand_last(GraphBuilder& b, Value reduced, const Shape& shape) {
  std::vector<int64_t> dims(static_cast<size_t>(shape.rank() - 1));
  std::iota(dims.begin(), dims.end(), 0);
  return b.broadcast(reduced, shape, dims);
}

Window pool_window(int64_t pool, int64_t stride, Padding padding) {
  Window w;
  w.kh = w.kw = pool;
  w.sh = w.sw = stride;
  w.same = padding == Padding::kSame;
  if (padding == Padding::kFixed) {
    w.explicit_padding = true;
    w.pad_top = w.pad_left = (pool - 1) / 2;
    w.pad_bottom = w.pad_right = pool - 1 - w.pad_top;
  }
  return w;
}

// Patches of an NHWC image as [N, OH, OW, window elements, C].
Value window_view(GraphBuilder& b, Value patches, int64_t window, int64_t channels) {
  const Shape& s = patches.shape();
  return b.reshape(patches, {s.dim(0), s.dim(1), s.dim(2), window, channels});
}

// `v` as `dtype` (a cast only when it differs): a mask or count of f32 ones meets bf16 values.
Value as_dtype(GraphBuilder& b, Value v, DType dtype) {
  return v.valid() && v.dtype() != dtype ? b.cast(v, dtype) : v;
}

// XLA's lowering of softmax over the last axis, in f32.
Value softmax_f32(Value logits) {
  GraphBuilder& b = *logits.builder;
  const int last = logits.shape().rank() - 1;
  const Value e = b.unary(
      Op::kExp,
      logits - expand_last(b, b.unary(Op::kStopGradient, b.reduce(Op::kReduceMax, logits, {last})),
                           logits.shape()));
  return e / expand_last(b, b.reduce(Op::kReduceSum, e, {last}), logits.shape());
}

}  // namespace

Value in_f32(Value x, const std::function<Value(Value)>& f) {
  if (!x.valid() || x.dtype() != DType::kBF16) return f(x);
  GraphBuilder& b = *x.builder;
  return as_dtype(b, f(b.cast(x, DType::kF32)), DType::kBF16);
}

Value activate(Value x, Activation activation) {
  if (!x.valid()) return x;
  switch (activation) {
    case Activation::kRelu:
      return x.builder->unary(Op::kRelu, x);
    case Activation::kTanh:
      return x.builder->unary(Op::kTanh, x);
    case Activation::kSigmoid:
      return x.builder->unary(Op::kSigmoid, x);
    case Activation::kNone:
      break;
  }
  return x;
}

Value reduce_mean(Value x, std::vector<int64_t> axes) {
  if (!x.valid()) return x;
  double count = 1;
  for (int64_t a : axes)
    count *= a >= 0 && a < x.shape().rank()
                 ? static_cast<double>(x.shape().dim(static_cast<int>(a)))
                 : 1;
  return x.builder->reduce(Op::kReduceSum, x, axes) * static_cast<float>(1.0 / count);
}

Value log_softmax(Value logits) {
  if (!logits.valid()) return logits;
  GraphBuilder& b = *logits.builder;
  const int last = logits.shape().rank() - 1;
  // Shifting by the (constant) maximum keeps exp in range and changes nothing mathematically.
  const Value shifted =
      logits - expand_last(b, b.unary(Op::kStopGradient, b.reduce(Op::kReduceMax, logits, {last})),
                           logits.shape());
  const Value log_sum =
      b.unary(Op::kLog, b.reduce(Op::kReduceSum, b.unary(Op::kExp, shifted), {last}));
  return shifted - expand_last(b, log_sum, logits.shape());
}

Value softmax(Value logits) {
  if (!logits.valid()) return logits;
  // tf.nn.softmax is one op: its gradient reads its output (in the logits' type), not the
  // exponentials the lowering computes, so those are not kept for the backward pass.
  const Value probs = in_f32(logits, softmax_f32);
  logits.builder->set_composite_gradient(probs, GraphBuilder::CompositeGradient::kSoftmax,
                                         {logits});
  return probs;
}

Value sparse_softmax_cross_entropy(Value labels, Value logits) {
  if (!labels.valid() || !logits.valid()) return {};
  GraphBuilder& b = *logits.builder;
  if (logits.shape().rank() != 2 || labels.shape().rank() != 1 ||
      labels.shape().dim(0) != logits.shape().dim(0)) {
    return b.fail(
        Op::kOneHot,
        str_cat("sparse_softmax_cross_entropy needs labels [N] and logits [N, classes], got ",
                labels.shape().str(), " and ", logits.shape().str()));
  }
  // Operands made one by one (builder.h: node order must not depend on the compiler).
  const Value log_probs = log_softmax(logits);
  const Value picked = b.one_hot(labels, logits.shape().dim(1)) * log_probs;
  return -b.reduce(Op::kReduceSum, picked, {1});
}

Value flatten(GraphBuilder& b, Value x) {
  const Shape s = x.shape();
  return b.reshape(x, {s.dim(0), s.elements() / s.dim(0)});
}

Value dense(GraphBuilder& b, Value x, int64_t units, Activation activation, uint64_t seed,
            bool use_bias) {
  return dense(b, x, units, activation, Initializer{InitKind::kGlorotUniform, 0, 1, seed},
               use_bias);
}

Value dense(GraphBuilder& b, Value x, int64_t units, Activation activation,
            const Initializer& kernel_init, bool use_bias) {
  if (!x.valid()) return x;
  const std::string name = b.unique_name("dense");
  GraphBuilder::Scope scope(b, name);
  const int64_t in = x.shape().dim(x.shape().rank() - 1);
  Value y = b.matmul(x, b.variable(name + "/kernel", x.dtype(), {in, units}, kernel_init));
  if (use_bias) y = y + b.variable(name + "/bias", x.dtype(), {units}, Initializer{});
  return activate(y, activation);
}

Value convolve(GraphBuilder& b, Value x, Value kernel, const Window& window) {
  if (!x.valid() || !kernel.valid()) return x.valid() ? kernel : x;
  const Shape& k = kernel.shape();
  if (x.shape().rank() != 4 || k.rank() != 4 || k.dim(0) != window.kh || k.dim(1) != window.kw ||
      k.dim(2) != x.shape().dim(3)) {
    return b.fail(Op::kExtractPatches,
                  str_cat("a convolution takes an NHWC input and a [", window.kh, ", ", window.kw,
                          ", in, out] kernel; got ", x.shape().str(), " and ", k.str()));
  }
  const Value patches = b.extract_patches(x, window);
  if (!patches.valid()) return patches;
  // [N, OH, OW, KH*KW*C] x [KH*KW*C, F]: the kernel's [kh, kw, c] order matches the patches'.
  return b.matmul(patches, b.reshape(kernel, {k.dim(0) * k.dim(1) * k.dim(2), k.dim(3)}));
}

Value conv2d(GraphBuilder& b, Value x, int64_t filters, int64_t kernel, int64_t stride,
             Padding padding, Activation activation, uint64_t seed, bool use_bias) {
  if (!x.valid()) return x;
  const std::string name = b.unique_name("conv2d");
  GraphBuilder::Scope scope(b, name);
  if (x.shape().rank() != 4)
    return b.fail(Op::kExtractPatches,
                  str_cat("conv2d needs an NHWC input, got ", x.shape().str()));
  const int64_t channels = x.shape().dim(3);
  Initializer glorot{InitKind::kGlorotUniform, 0, 1, seed};
  const Value k =
      b.variable(name + "/kernel", x.dtype(), {kernel, kernel, channels, filters}, glorot);
  Value y = convolve(b, x, k, pool_window(kernel, stride, padding));
  if (use_bias) y = y + b.variable(name + "/bias", x.dtype(), {filters}, Initializer{});
  return activate(y, activation);
}

Value max_pool(GraphBuilder& b, Value x, const Window& w) {
  const Value patches = b.extract_patches(x, w);
  if (!patches.valid()) return patches;
  const int64_t channels = x.shape().dim(3);
  Value view = window_view(b, patches, w.kh * w.kw, channels);
  if (w.same || w.pad_top + w.pad_left + w.pad_bottom + w.pad_right > 0) {
    // Padded positions must never win: push them far below any value.
    const Value ones = as_dtype(b, b.broadcast(b.scalar(1.0f), x.shape(), {}), x.dtype());
    const Value inside = window_view(b, b.extract_patches(ones, w), w.kh * w.kw, channels);
    view = view + (1.0f - inside) * -3.0e38f;
  }
  return b.reduce(Op::kReduceMax, view, {3});
}

Value max_pooling2d(GraphBuilder& b, Value x, int64_t pool, int64_t stride, Padding padding) {
  if (!x.valid()) return x;
  GraphBuilder::Scope scope(b, b.unique_name("max_pooling2d"));
  return max_pool(b, x, pool_window(pool, stride, padding));
}

Value average_pool(GraphBuilder& b, Value x, const Window& w, bool count_padding) {
  const Value patches = b.extract_patches(x, w);
  if (!patches.valid()) return patches;
  const int64_t channels = x.shape().dim(3);
  const int64_t window = w.kh * w.kw;
  const Value sums = b.reduce(Op::kReduceSum, window_view(b, patches, window, channels), {3});
  if (count_padding) return sums * (1.0f / static_cast<float>(window));
  // Divide by the window elements inside the image (TensorFlow's SAME semantics).
  const Value ones = as_dtype(b, b.broadcast(b.scalar(1.0f), x.shape(), {}), x.dtype());
  const Value counts =
      b.reduce(Op::kReduceSum, window_view(b, b.extract_patches(ones, w), window, channels), {3});
  return sums / counts;
}

Value average_pooling2d(GraphBuilder& b, Value x, int64_t pool, int64_t stride, Padding padding) {
  if (!x.valid()) return x;
  GraphBuilder::Scope scope(b, b.unique_name("average_pooling2d"));
  return average_pool(b, x, pool_window(pool, stride, padding), /*count_padding=*/false);
}

Value dropout(GraphBuilder& b, Value x, float rate, bool training, uint64_t seed) {
  if (!x.valid() || !training || rate <= 0) return x;
  GraphBuilder::Scope scope(b, b.unique_name("dropout"));
  if (rate >= 1) return b.fail(Op::kRngUniform, str_cat("dropout rate ", rate, " must be below 1"));
  const Value threshold = b.broadcast(b.scalar(rate), x.shape(), {});  // builder.h: node order
  const Value keep = b.binary(Op::kGreater, b.rng_uniform(x.shape(), seed), threshold);
  return x * as_dtype(b, keep, x.dtype()) * (1.0f / (1.0f - rate));
}

Value batch_normalization(GraphBuilder& b, Value x, bool training, float momentum, float epsilon) {
  if (!x.valid()) return x;
  if (x.dtype() == DType::kBF16) {
    return in_f32(
        x, [&](Value x32) { return batch_normalization(b, x32, training, momentum, epsilon); });
  }
  const std::string name = b.unique_name("batch_normalization");
  GraphBuilder::Scope scope(b, name);
  const int64_t c = x.shape().dim(x.shape().rank() - 1);
  BatchNormVariables v;
  v.gamma = b.variable(name + "/gamma", x.dtype(), {c}, Initializer{InitKind::kConstant, 1.0f});
  v.beta = b.variable(name + "/beta", x.dtype(), {c}, Initializer{});
  v.moving_mean = b.variable(name + "/moving_mean", x.dtype(), {c}, Initializer{});
  v.moving_variance =
      b.variable(name + "/moving_variance", x.dtype(), {c}, Initializer{InitKind::kConstant, 1.0f});
  return batch_normalize(b, x, v, training, momentum, epsilon);
}

Value batch_normalize(GraphBuilder& b, Value x, const BatchNormVariables& v, bool training,
                      float momentum, float epsilon) {
  if (!x.valid()) return x;
  if (x.dtype() == DType::kBF16) {
    return in_f32(
        x, [&](Value x32) { return batch_normalize(b, x32, v, training, momentum, epsilon); });
  }
  const int64_t c = x.shape().dim(x.shape().rank() - 1);
  const std::vector<int64_t> axes = all_but_last(x.shape());
  if (!training) {
    const Value rstd = b.unary(Op::kRsqrt, v.moving_variance + epsilon);  // builder.h: node order
    return (x - v.moving_mean) * rstd * v.gamma + v.beta;
  }
  // FusedBatchNormV3 in training, as XLA's BatchNormExpander computes it: both moments from one
  // read of x (the sum and the sum of squares, sibling reductions XLA fuses into one pass),
  // Var[x] = E[x^2] - E[x]^2.
  const Value mean = reduce_mean(x, axes);
  const Value mean_squared = b.unary(Op::kSquare, mean);  // first (builder.h: node order)
  const Value var = reduce_mean(b.unary(Op::kSquare, x), axes) - mean_squared;
  // The moving variance takes the batch variance with Bessel's correction, n / (n - 1), as the
  // fused op's variance output does (tf2xla's FusedBatchNormOp).
  const int64_t n = x.shape().elements() / std::max<int64_t>(1, c);
  const float bessel =
      static_cast<float>(static_cast<double>(n) / static_cast<double>(std::max<int64_t>(1, n - 1)));
  // Each sum's right operand made first (builder.h: node order).
  const Value batch_mean = mean * (1.0f - momentum);
  b.update(v.moving_mean, v.moving_mean * momentum + batch_mean);
  const Value batch_var = var * (bessel * (1.0f - momentum));
  b.update(v.moving_variance, v.moving_variance * momentum + batch_var);
  const Value rstd = b.unary(Op::kRsqrt, var + epsilon);
  const Value y = (x - mean) * rstd * v.gamma + v.beta;
  // FusedBatchNormGrad: the gradient reads x, the batch statistics and gamma only.
  b.set_composite_gradient(y, GraphBuilder::CompositeGradient::kBatchNorm, {x, v.gamma, v.beta},
                           {mean, var}, epsilon);
  return y;
}

}  // namespace tpusim::runtime::layers
