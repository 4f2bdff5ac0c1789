// tf.Example parsing against a feature spec of every kind: fixed-length floats, int64s and bytes
// of several shapes, a default, and a var-length feature.
#include "runtime/data/example.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = tpusim::runtime::data;
  static const d::FeatureSpec spec = [] {
    d::FeatureSpec s;
    s["image"] = d::fixed_len(d::FeatureType::kFloat, {2, 3});
    s["label"] = d::fixed_len(d::FeatureType::kInt64, {});
    s["ids"] = d::fixed_len(d::FeatureType::kInt64, {4});
    s["name"] = d::fixed_len(d::FeatureType::kBytes, {});
    d::FeatureValue zero;
    zero.type = d::FeatureType::kFloat;
    zero.floats = {0.0f};
    s["weight"] = d::fixed_len(d::FeatureType::kFloat, {}, zero);
    s["tokens"] = d::var_len(d::FeatureType::kInt64);
    return s;
  }();
  (void)d::parse_example(std::string(reinterpret_cast<const char*>(data), size), spec, "fuzz");
  return 0;
}
