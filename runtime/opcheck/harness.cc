#include "runtime/opcheck/harness.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "common/strings.h"
#include "runtime/backend/registry.h"
#include "runtime/graph/autodiff.h"
#include "runtime/graph/initializers.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/random.h"

namespace tpusim::runtime::opcheck {
namespace {

int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  return std::llabs(key(a) - key(b));
}

std::string index_of(const Shape& s, int64_t linear) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = linear % s.dim(d);
    linear /= s.dim(d);
  }
  return str_cat("[", str_join(idx, ", "), "]");
}

// The first element whose low 16 bits are not zero (not a bf16 value), or -1.
int64_t first_non_bf16(const std::vector<float>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (sim::round_to_bf16(values[i]) != values[i] && !std::isnan(values[i]))
      return static_cast<int64_t>(i);
  }
  return -1;
}

std::vector<float> as_floats(const HostTensor& t) {
  if (t.dtype != DType::kS32) return t.f;
  return std::vector<float>(t.i.begin(), t.i.end());
}

}  // namespace

TensorError tensor_error(const std::vector<float>& got, const std::vector<float>& ref) {
  TensorError t;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const float a = got[i], e = ref[i];
    double diff = 0;
    if (a == e || (std::isnan(a) && std::isnan(e))) {
      diff = 0;
    } else if (!std::isfinite(a) || !std::isfinite(e)) {
      diff = std::numeric_limits<double>::infinity();
    } else {
      diff = std::abs(static_cast<double>(a) - e);
    }
    if (t.worst < 0 || diff > t.max_abs) {
      t.max_abs = diff;
      t.worst = static_cast<int64_t>(i);
    }
    t.ulp = std::max(t.ulp, ulp_distance(a, e));
  }
  return t;
}

absl::StatusOr<BackendSpec> parse_backend_spec(const std::string& text) {
  BackendSpec spec;
  const size_t colon = text.find(':');
  spec.name = text.substr(0, colon);
  if (spec.name.empty())
    return absl::InvalidArgumentError(str_cat("empty backend name in '", text, "'"));
  if (colon != std::string::npos) {
    const std::string word = text.substr(colon + 1);
    const std::optional<Precision> precision = kPrecisions.parse(word);
    if (!precision) {
      return absl::InvalidArgumentError(
          str_cat("unknown precision '", word, "' in '", text, "' (fp32 or mxu)"));
    }
    spec.precision = *precision;
  }
  return spec;
}

Feeds make_feeds(const OpCase& c, uint32_t seed) {
  Feeds feeds;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const InputSpec& in = c.inputs[i];
    sim::RandomStream rng(sim::mix64(seed) ^ (i + 1));
    HostTensor t = HostTensor::zeros(in.dtype, in.shape);
    if (in.dtype == DType::kS32) {
      for (int32_t& v : t.i)
        v = static_cast<int32_t>(in.low + std::floor(rng.uniform() * (in.high - in.low)));
    } else {
      for (float& v : t.f) v = static_cast<float>(in.low + rng.uniform() * (in.high - in.low));
    }
    feeds[in.name] = std::move(t);
  }
  return feeds;
}

HostTensor make_cotangent(const Shape& shape, uint32_t seed) {
  HostTensor cot = HostTensor::zeros(DType::kF32, shape);
  sim::RandomStream rng(sim::mix64(seed) ^ 0xc07);
  for (float& v : cot.f) v = static_cast<float>(2 * rng.uniform() - 1);
  return cot;
}

absl::StatusOr<Graph> build_case_graph(const OpCase& c, uint32_t seed, bool with_loss) {
  GraphBuilder b;
  std::vector<Value> inputs;
  for (const InputSpec& in : c.inputs) inputs.push_back(b.infeed(in.name, in.dtype, in.shape));
  const Value y = c.build(b, inputs);
  b.output("output", y);
  if (c.differentiable && y.valid()) {
    HostTensor cot = make_cotangent(y.shape(), seed);
    if (y.dtype() == DType::kBF16) {  // the cotangent of a bf16 value is a bf16 value
      cot.dtype = DType::kBF16;
      for (float& v : cot.f) v = sim::round_to_bf16(v);
    }
    std::vector<Value> wrt;
    std::vector<std::string> names;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (is_floating(c.inputs[i].dtype)) {
        wrt.push_back(inputs[i]);
        names.push_back(c.inputs[i].name);
      }
    }
    for (int id : b.graph().variables()) {
      wrt.push_back(Value{id, &b});
      names.push_back(b.graph().node(id).attrs.name);
    }
    const Value cotangent = b.constant(std::move(cot));
    if (with_loss) {
      std::vector<int64_t> all(static_cast<size_t>(y.shape().rank()));
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
      b.output("loss", b.reduce(Op::kReduceSum, cotangent * y, all));
    }
    auto grads = vjp(b, y, cotangent, wrt);
    if (!grads.ok()) return grads.status();
    for (size_t i = 0; i < grads->size(); ++i)
      b.output(str_cat("grad(", names[i], ")"), (*grads)[i]);
  }
  if (!b.status().ok()) return b.status();
  return b.graph();
}

namespace {
// Whether `b` rounds matmul inputs to bf16: asked for mxu, or a backend that always does (tpusim).
bool rounds_to_bf16(const BackendSpec& b) {
  auto declared = find_backend(b.name);
  const Precision precision =
      declared.ok() ? effective_precision(**declared, b.precision) : b.precision;
  return precision == Precision::kMxu;
}
}  // namespace

double tolerance_for(const OpCase& c, const BackendSpec& backend, const BackendSpec& reference) {
  if (c.exact) return 0;  // bit for bit, as the case promises
  const double root = std::sqrt(static_cast<double>(std::max<int64_t>(1, c.reduction_length)));
  // In bf16 the inputs of every matmul are bf16 values on every backend, and sums that differ in
  // their last f32 bits may round to neighbouring bf16 values: an ulp of bf16 (2^-8 of the value)
  // in a result and one in an operand it came from.
  if (c.bf16) return 2 * std::ldexp(1.0, -8) + 8 * std::ldexp(1.0, -23) * root;
  if (rounds_to_bf16(backend) && rounds_to_bf16(reference)) {
    // Same bf16 inputs on both sides: only the f32 accumulation order differs.
    return 8 * std::ldexp(1.0, -23) * root * (c.uses_matmul ? 4 : 1);
  }
  // bf16 rounding of both inputs puts each product within ~2^-8 of the f32 one; relative to
  // the largest output the sum's error stays near that (measured 1.5e-3 to 3e-3): 4 x 2^-8.
  if ((rounds_to_bf16(backend) || rounds_to_bf16(reference)) && c.uses_matmul)
    return 4 * std::ldexp(1.0, -8);
  return 8 * std::ldexp(1.0, -23) * root;
}

absl::StatusOr<std::vector<CaseResult>> run_case(const OpCase& c, const BackendSpec& spec,
                                                 uint32_t seed, const BackendSpec& reference) {
  auto graph = build_case_graph(c, seed);
  if (!graph.ok()) return graph.status();
  const Feeds feeds = make_feeds(c, seed);
  auto run_on = [&](const BackendSpec& s) -> absl::StatusOr<Outputs> {
    BackendArgs args;
    args.slice = s.slice;
    absl::StatusOr<std::unique_ptr<Backend>> backend = make_backend(s.name, args);
    if (!backend.ok()) return backend.status();
    auto exe = (*backend)->compile(*graph, CompileOptions{s.precision});
    if (!exe.ok()) return exe.status();
    Variables vars = initial_variables(*graph);
    auto out = (*backend)->run(**exe, vars, {feeds}, 0);
    if (!out.ok()) return out.status();
    return (*out)[0];
  };
  auto ref = run_on(reference);
  if (!ref.ok()) {
    return absl::Status(ref.status().code(),
                        str_cat("the reference ", reference.label(), ": ", ref.status().message()));
  }
  auto got = run_on(spec);
  if (!got.ok()) return got.status();

  std::vector<CaseResult> results;
  for (const auto& [name, ref_tensor] : *ref) {
    CaseResult r;
    r.op = c.op;
    r.backend = spec.label();
    r.mode = name == "output" ? "forward" : "backward";
    r.shape = c.shape;
    r.tensor = name;
    r.tolerance = tolerance_for(c, spec, reference);
    const std::vector<float> a = as_floats(got->at(name));
    const std::vector<float> e = as_floats(ref_tensor);
    double scale = 0;
    for (float v : e) scale = std::max(scale, static_cast<double>(std::abs(v)));
    const TensorError error = tensor_error(a, e);
    const int64_t worst = error.worst;
    r.max_abs_error = error.max_abs;
    r.ulp = error.ulp;
    r.max_rel_error = scale > 0 ? r.max_abs_error / scale : r.max_abs_error;
    r.passed = a.size() == e.size() && r.max_rel_error <= r.tolerance;  // false for infinity
    // A bf16 output holds bf16 values, and so do the gradients of the f32 input the case casts to
    // bf16 on entry and of the variables it reads as bf16 (each cast's gradient casts a bf16
    // gradient back): a backend that skipped a rounding fails even when the value is close (an
    // unrounded sum is within half a bf16 ulp, inside the tolerance).
    const bool bf16_valued = c.bf16 && (name == "output" || name == "grad(x)" || !c.f32_variables);
    const int64_t unrounded = bf16_valued ? first_non_bf16(a) : -1;
    if (unrounded >= 0) {
      r.passed = false;
      r.worst = str_cat(name, index_of(ref_tensor.shape, unrounded), ": got ",
                        a[static_cast<size_t>(unrounded)], ", not a bf16 value");
    } else if (worst >= 0) {
      r.worst =
          str_cat(name, index_of(ref_tensor.shape, worst), ": got ", a[static_cast<size_t>(worst)],
                  ", reference ", e[static_cast<size_t>(worst)]);
    }
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace tpusim::runtime::opcheck
