// BERT's layers: gelu, embedding and layer normalisation (layers.h).
#include <cmath>
#include <optional>

#include "common/strings.h"
#include "runtime/graph/layers.h"

namespace tpusim::runtime::layers {
namespace {

// A scalar of `like`'s floating type.
Value scalar_of(Value like, float value) {
  HostTensor t = HostTensor::scalar(value);
  t.dtype = like.dtype();
  return like.builder->constant(std::move(t));
}

}  // namespace

Value gelu(Value x) {
  if (!x.valid()) return x;
  GraphBuilder& b = *x.builder;
  // BERT's order: cdf = 0.5 * (1.0 + erf(x / sqrt(2.0))); x * cdf. sqrt(2) as f32 (tf.sqrt(2.0)).
  const Value scaled = b.binary(Op::kDiv, x, scalar_of(x, std::sqrt(2.0f)));
  const Value cdf = (b.unary(Op::kErf, scaled) + 1.0f) * 0.5f;
  return x * cdf;
}

Value embedding(GraphBuilder& b, Value ids, int64_t vocab, int64_t dim, uint64_t seed,
                const std::string& name) {
  if (!ids.valid()) return ids;
  if (vocab < 1 || dim < 1) {
    return b.fail(Op::kGather, str_cat("embedding '", name, "' needs vocab and dim >= 1, got ",
                                       vocab, " x ", dim));
  }
  GraphBuilder::Scope scope(b, name);
  const DType dtype = b.in_bfloat16_scope() ? DType::kBF16 : DType::kF32;
  const Value table = b.variable(name, dtype, {vocab, dim},
                                 Initializer{InitKind::kTruncatedNormal, 0, 0.02f, seed});
  return b.gather(table, ids);
}

Value layer_normalization(GraphBuilder& b, Value x, float epsilon, bool scale_and_center) {
  if (!x.valid()) return x;
  if (x.dtype() == DType::kBF16) {
    return in_f32(
        x, [&](Value x32) { return layer_normalization(b, x32, epsilon, scale_and_center); });
  }
  const int last = x.shape().rank() - 1;
  if (last < 0) return b.fail(Op::kReduceSum, "layer_normalization needs a rank >= 1 input");
  std::optional<GraphBuilder::Scope> scope;
  Value gamma, beta;
  if (scale_and_center) {  // the variables first, as tf.contrib's layer_norm makes them
    const std::string name = b.unique_name("layer_normalization");
    scope.emplace(b, name);
    const int64_t d = x.shape().dim(last);
    gamma = b.variable(name + "/gamma", x.dtype(), {d}, Initializer{InitKind::kConstant, 1.0f});
    beta = b.variable(name + "/beta", x.dtype(), {d}, Initializer{});
  }
  return layer_normalize(b, x, gamma, beta, epsilon);
}

Value layer_normalize(GraphBuilder& b, Value x, Value gamma, Value beta, float epsilon) {
  if (!x.valid()) return x;
  if (x.dtype() == DType::kBF16)
    return in_f32(x, [&](Value x32) { return layer_normalize(b, x32, gamma, beta, epsilon); });
  const int last = x.shape().rank() - 1;
  if (last < 0) return b.fail(Op::kReduceSum, "layer normalization needs a rank >= 1 input");
  std::vector<int64_t> keep(static_cast<size_t>(last));
  for (int i = 0; i < last; ++i) keep[static_cast<size_t>(i)] = i;
  const Value mean = b.broadcast(reduce_mean(x, {last}), x.shape(), keep);
  const Value centred = x - mean;
  // The inverse deviation a row at a time, then broadcast (as tf.nn.moments' keepdims result
  // meets the centred values): the rsqrt is computed once a row, and the backward pass keeps
  // [rows] of it, not [rows, dim].
  const Value inverse =
      b.unary(Op::kRsqrt, reduce_mean(b.unary(Op::kSquare, centred), {last}) + epsilon);
  Value y = centred * b.broadcast(inverse, x.shape(), keep);
  if (gamma.valid()) y = y * gamma;
  if (beta.valid()) y = y + beta;
  return y;
}

}  // namespace tpusim::runtime::layers
