#include "runtime/graph/optimizers.h"

#include <cmath>

#include "common/strings.h"

namespace tpusim::runtime {
namespace {

// sqrt on the ops every backend has: x * rsqrt(x), with 0 for x = 0 (not 0 * inf).
Value sqrt_of(GraphBuilder& b, Value x) {
  const Value safe = b.binary(Op::kMax, x, b.scalar(1e-30f));
  return x * b.unary(Op::kRsqrt, safe);
}

Value slot(GraphBuilder& b, Value var, const std::string& name, float init = 0.0f) {
  const Node& n = b.node(var);
  Initializer zero;
  zero.kind = init == 0.0f ? InitKind::kZeros : InitKind::kConstant;
  zero.value = init;
  return b.variable(str_cat(n.attrs.name, "/", name), DType::kF32, n.shape, zero);
}

// The L2 norm of `x` over every element, a scalar.
Value norm_of(GraphBuilder& b, Value x) {
  std::vector<int64_t> axes(static_cast<size_t>(x.shape().rank()));
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  return sqrt_of(b, b.reduce(Op::kReduceSum, b.unary(Op::kSquare, x), axes));
}

// tf.clip_by_global_norm: every gradient times clip / max(clip, sqrt(sum of squares)).
std::vector<Value> clipped(GraphBuilder& b, const std::vector<Value>& grads, float clip) {
  Value sum_of_squares = b.scalar(0.0f);
  for (const Value& g : grads) {
    const Value n = norm_of(b, g);
    sum_of_squares = sum_of_squares + n * n;
  }
  const Value global_norm = sqrt_of(b, sum_of_squares);
  const Value clipped_norm = b.binary(Op::kMax, global_norm, b.scalar(clip));
  const Value scale = b.binary(Op::kDiv, b.scalar(clip), clipped_norm);
  std::vector<Value> out;
  for (const Value& g : grads) out.push_back(g * scale);
  return out;
}

bool decays(const OptimizerSpec& spec, const std::string& name) {
  for (const std::string& part : spec.exclude_from_weight_decay) {
    if (name.find(part) != std::string::npos) return false;
  }
  return true;
}

// beta^t as TensorFlow's pow computes it for t >= 1: exp(t * log(beta)).
Value power_of(GraphBuilder& b, float beta, Value t) {
  return b.unary(Op::kExp, t * std::log(beta));
}

// LAMB's update of every variable (the header's formula).
void apply_lamb(GraphBuilder& b, const OptimizerSpec& spec, Value lr, Value step,
                const std::vector<Value>& vars, const std::vector<Value>& grads) {
  const Value t = step + 1.0f;
  const Value m_correction = 1.0f - power_of(b, spec.beta1, t);
  const Value s_correction = 1.0f - power_of(b, spec.beta2, t);
  for (size_t i = 0; i < vars.size(); ++i) {
    const Value m = slot(b, vars[i], "lamb_m");
    const Value s = slot(b, vars[i], "lamb_v");
    const Value m_part = grads[i] * (1.0f - spec.beta1);
    const Value m_next = m * spec.beta1 + m_part;
    const Value s_part = b.unary(Op::kSquare, grads[i]) * (1.0f - spec.beta2);
    const Value s_next = s * spec.beta2 + s_part;
    b.update(m, m_next);
    b.update(s, s_next);
    const Value denominator = sqrt_of(b, s_next / s_correction) + spec.epsilon;
    Value update = (m_next / m_correction) / denominator;
    if (spec.weight_decay != 0 && decays(spec, b.node(vars[i]).attrs.name))
      update = update + vars[i] * spec.weight_decay;
    const Value w_norm = norm_of(b, vars[i]), u_norm = norm_of(b, update);
    const Value zero = b.scalar(0.0f), one = b.scalar(1.0f);
    const Value norms_ratio = w_norm / u_norm;
    const Value when_w = b.select(b.binary(Op::kGreater, u_norm, zero), norms_ratio, one);
    const Value ratio = b.select(b.binary(Op::kGreater, w_norm, zero), when_w, one);
    b.update(vars[i], vars[i] - lr * ratio * update);
  }
}

}  // namespace

absl::StatusOr<OptimizerSpec::Kind> optimizer_kind(const std::string& name) {
  if (auto kind = kOptimizers.parse(name)) return *kind;
  return absl::InvalidArgumentError(
      str_cat("unknown optimizer '", name, "' (", kOptimizers.list(", ", ", "), ")"));
}

OptimizerSpec optimizer_defaults(OptimizerSpec::Kind kind) {
  OptimizerSpec spec;
  spec.kind = kind;
  if (kind == OptimizerSpec::Kind::kLamb) spec.epsilon = 1e-6f;
  return spec;
}

const char* optimizer_name(OptimizerSpec::Kind kind) { return kOptimizers.name(kind).data(); }

Value global_step(GraphBuilder& b) {
  const int existing = b.graph().find_variable("global_step");
  if (existing >= 0) return Value{existing, &b};
  return b.variable("global_step", DType::kF32, Shape{}, Initializer{});
}

absl::StatusOr<Value> learning_rate(GraphBuilder& b, const LearningRate& s, Value step) {
  if (!(s.initial >= 0) || !std::isfinite(s.initial))
    return absl::InvalidArgumentError(
        str_cat("learning rate ", s.initial, " must be a finite number >= 0"));
  switch (s.kind) {
    case LearningRate::Kind::kConstant:
      return b.scalar(s.initial);
    case LearningRate::Kind::kExponentialDecay: {
      if (s.decay_steps < 1) {
        return absl::InvalidArgumentError(
            str_cat("exponential decay: decay_steps ", s.decay_steps, " must be >= 1"));
      }
      if (!(s.decay_rate > 0) || !std::isfinite(s.decay_rate)) {
        return absl::InvalidArgumentError(str_cat("exponential decay: decay_rate ", s.decay_rate,
                                                  " must be a finite number > 0"));
      }
      Value p = step * (1.0f / static_cast<float>(s.decay_steps));
      if (s.staircase) p = b.cast(b.cast(p, DType::kS32), DType::kF32);  // floor: p >= 0
      return b.unary(Op::kExp, p * std::log(s.decay_rate)) * s.initial;
    }
    case LearningRate::Kind::kPiecewiseConstant: {
      if (s.values.size() != s.boundaries.size() + 1) {
        return absl::InvalidArgumentError(
            str_cat("piecewise constant: ", s.values.size(), " values for ", s.boundaries.size(),
                    " boundaries (need one more value than boundaries)"));
      }
      for (size_t i = 1; i < s.boundaries.size(); ++i) {
        if (s.boundaries[i] <= s.boundaries[i - 1]) {
          return absl::InvalidArgumentError(
              str_cat("piecewise constant: boundaries must increase (", s.boundaries[i - 1],
                      " then ", s.boundaries[i], ")"));
        }
      }
      Value lr = b.scalar(s.values[0]);
      for (size_t i = 0; i < s.boundaries.size(); ++i) {
        const Value past =
            b.binary(Op::kGreater, step, b.scalar(static_cast<float>(s.boundaries[i])));
        lr = b.select(past, b.scalar(s.values[i + 1]), lr);
      }
      return lr;
    }
  }
  return absl::InvalidArgumentError("unknown learning-rate schedule");
}

absl::StatusOr<Value> apply_gradients(GraphBuilder& b, const OptimizerSpec& spec,
                                      const std::vector<Value>& vars,
                                      const std::vector<Value>& raw_grads) {
  if (vars.size() != raw_grads.size()) {
    return absl::InvalidArgumentError(str_cat("apply_gradients: ", vars.size(), " variables but ",
                                              raw_grads.size(), " gradients"));
  }
  const Value step = global_step(b);
  auto lr = learning_rate(b, spec.learning_rate, step);
  if (!lr.ok()) return lr.status();
  GraphBuilder::Scope scope(b, optimizer_name(spec.kind));
  if (!(spec.clip_global_norm >= 0) || !std::isfinite(spec.clip_global_norm)) {
    return absl::InvalidArgumentError(
        str_cat("clip_global_norm ", spec.clip_global_norm, " must be >= 0"));
  }
  const std::vector<Value> grads =
      spec.clip_global_norm > 0 ? clipped(b, raw_grads, spec.clip_global_norm) : raw_grads;
  switch (spec.kind) {
    case OptimizerSpec::Kind::kLamb:
      apply_lamb(b, spec, *lr, step, vars, grads);
      break;
    case OptimizerSpec::Kind::kSgd:
      for (size_t i = 0; i < vars.size(); ++i) b.update(vars[i], vars[i] - *lr * grads[i]);
      break;
    case OptimizerSpec::Kind::kMomentum:
      for (size_t i = 0; i < vars.size(); ++i) {
        const Value accum = slot(b, vars[i], "Momentum");
        const Value next = accum * spec.momentum + grads[i];
        b.update(accum, next);
        const Value direction = spec.nesterov ? grads[i] + next * spec.momentum : next;
        b.update(vars[i], vars[i] - *lr * direction);
      }
      break;
    case OptimizerSpec::Kind::kAdam: {
      // TF keeps beta1^t and beta2^t as variables, multiplied once per step.
      Initializer b1;
      b1.kind = InitKind::kConstant;
      b1.value = spec.beta1;
      Initializer b2 = b1;
      b2.value = spec.beta2;
      const Value beta1_power = b.variable("beta1_power", DType::kF32, Shape{}, b1);
      const Value beta2_power = b.variable("beta2_power", DType::kF32, Shape{}, b2);
      const Value beta1_correction = 1.0f - beta1_power;
      const Value lr_t = *lr * sqrt_of(b, 1.0f - beta2_power) / beta1_correction;
      for (size_t i = 0; i < vars.size(); ++i) {
        const Value m = slot(b, vars[i], "Adam");
        const Value s = slot(b, vars[i], "Adam_1");
        const Value m_part = grads[i] * (1.0f - spec.beta1);
        const Value m_next = m * spec.beta1 + m_part;
        const Value s_part = grads[i] * grads[i] * (1.0f - spec.beta2);
        const Value s_next = s * spec.beta2 + s_part;
        b.update(m, m_next);
        b.update(s, s_next);
        const Value denominator = sqrt_of(b, s_next) + spec.epsilon;
        b.update(vars[i], vars[i] - lr_t * m_next / denominator);
      }
      b.update(beta1_power, beta1_power * spec.beta1);
      b.update(beta2_power, beta2_power * spec.beta2);
      break;
    }
  }
  b.update(step, step + 1.0f);
  if (!b.status().ok()) return b.status();
  return *lr;
}

}  // namespace tpusim::runtime
