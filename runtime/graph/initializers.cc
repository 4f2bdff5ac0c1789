#include "runtime/graph/initializers.h"

#include <cmath>

#include "sim/numerics/random.h"

namespace tpusim::runtime {
namespace {

void fans(const Shape& s, double* fan_in, double* fan_out) {
  if (s.rank() == 0) {
    *fan_in = *fan_out = 1;
  } else if (s.rank() == 1) {
    *fan_in = *fan_out = static_cast<double>(s.dim(0));
  } else {
    double receptive = 1;
    for (int i = 0; i < s.rank() - 2; ++i) receptive *= static_cast<double>(s.dim(i));
    *fan_in = receptive * static_cast<double>(s.dim(s.rank() - 2));
    *fan_out = receptive * static_cast<double>(s.dim(s.rank() - 1));
  }
}

uint64_t name_hash(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

HostTensor initial_value(const Node& v) {
  HostTensor t = HostTensor::zeros(v.dtype, v.shape);
  const Initializer& init = v.attrs.initializer;
  if (v.dtype == DType::kS32) {
    if (init.kind == InitKind::kConstant) t.i.assign(t.i.size(), static_cast<int32_t>(init.value));
    return t;
  }
  double fan_in = 1, fan_out = 1;
  fans(v.shape, &fan_in, &fan_out);
  sim::RandomStream rng(init.seed ^ name_hash(v.attrs.name));
  for (float& x : t.f) {
    switch (init.kind) {
      case InitKind::kZeros:
        x = 0;
        break;
      case InitKind::kConstant:
        x = init.value;
        break;
      case InitKind::kGlorotUniform: {
        const double limit = std::sqrt(6.0 / (fan_in + fan_out));
        x = static_cast<float>((2 * rng.uniform() - 1) * limit);
        break;
      }
      case InitKind::kGlorotNormal:
        // TensorFlow draws from a normal truncated at 2 stddev, scaled so the stddev is right.
        for (double z = 2.5;; z = rng.normal()) {
          if (std::abs(z) <= 2) {
            x = static_cast<float>(z * std::sqrt(2.0 / (fan_in + fan_out)) / 0.87962566103423978);
            break;
          }
        }
        break;
      case InitKind::kHeUniform: {
        const double limit = std::sqrt(6.0 / fan_in);
        x = static_cast<float>((2 * rng.uniform() - 1) * limit);
        break;
      }
      case InitKind::kHeNormal:
        for (double z = 2.5;; z = rng.normal()) {
          if (std::abs(z) <= 2) {
            x = static_cast<float>(z * std::sqrt(2.0 / fan_in) / 0.87962566103423978);
            break;
          }
        }
        break;
      case InitKind::kTruncatedNormal:
        for (double z = 2.5;; z = rng.normal()) {
          if (std::abs(z) <= 2) {
            x = static_cast<float>(z * init.stddev);
            break;
          }
        }
        break;
    }
  }
  return t;
}

std::map<std::string, HostTensor> initial_variables(const Graph& graph) {
  std::map<std::string, HostTensor> out;
  for (int id : graph.variables()) out[graph.node(id).attrs.name] = initial_value(graph.node(id));
  return out;
}

std::map<std::string, HostTensor> variable_shapes(const Graph& graph) {
  std::map<std::string, HostTensor> out;
  for (int id : graph.variables()) {
    const Node& n = graph.node(id);
    HostTensor& t = out[n.attrs.name];
    t.dtype = n.dtype;
    t.shape = n.shape;
  }
  return out;
}

}  // namespace tpusim::runtime
