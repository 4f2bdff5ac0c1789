#pragma once
// tf.Example in C++: building examples and parsing them with a feature spec, as
// tf.io.parse_single_example does. A fixed-length feature has a dtype and a shape (its value
// count must equal the shape's element count) and an optional default used when the example
// lacks it; a var-length feature takes whatever values are there (shape [n]).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/data/example.pb.h"

namespace tpusim::runtime::data {

enum class FeatureType { kBytes, kFloat, kInt64 };
const char* feature_type_name(FeatureType t);  // "bytes" | "float" | "int64"

// A typed dense value: one of the three vectors, by `type`, row-major in `shape`.
struct FeatureValue {
  FeatureType type = FeatureType::kFloat;
  std::vector<int64_t> shape;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  int64_t size() const;
};

// The values an int64 feature may hold where a model indexes with them (a label, a token id, a
// position): [lo, end), and what they index, for the refusal ("the model's 10 classes").
struct IntRange {
  int64_t lo = 0;
  int64_t end = 0;
  std::string indexes;
};

struct FeatureSpecEntry {
  FeatureType type = FeatureType::kFloat;
  std::vector<int64_t> shape;                 // fixed length: the value's shape ({} for a scalar)
  std::optional<FeatureValue> default_value;  // fixed length: used when absent
  bool var_len = false;                       // tf.io.VarLenFeature: any count, shape [n]
  std::optional<IntRange> range;  // int64: every value the example holds in range, or refused
};
using FeatureSpec = std::map<std::string, FeatureSpecEntry>;

FeatureSpecEntry fixed_len(FeatureType type, std::vector<int64_t> shape);
FeatureSpecEntry fixed_len(FeatureType type, std::vector<int64_t> shape,
                           FeatureValue default_value);
FeatureSpecEntry var_len(FeatureType type);
// `entry` (int64) with its values held to [lo, end), `indexes` naming what they index.
FeatureSpecEntry in_range(FeatureSpecEntry entry, int64_t lo, int64_t end, std::string indexes);

using ParsedExample = std::map<std::string, FeatureValue>;

// The type a Feature holds; nullopt when it holds none (TensorFlow treats that as absent).
std::optional<FeatureType> feature_type(const tensorflow::Feature& feature);
// A Feature's values as a FeatureValue of shape [n]; empty when it holds none.
FeatureValue feature_values(const tensorflow::Feature& feature);
// "[2, 3]"; "[]" for a scalar.
std::string shape_string(const std::vector<int64_t>& shape);

// Parses a serialized tf.Example. Errors name the feature and what was wrong; `where`
// (e.g. "train-00000-of-00010.tfrecord record 17") starts each message.
absl::StatusOr<ParsedExample> parse_example(const std::string& serialized, const FeatureSpec& spec,
                                            const std::string& where = "example");

// Builds a tf.Example feature by feature; serialize() is deterministic (sorted map keys).
class ExampleBuilder {
 public:
  ExampleBuilder& bytes(const std::string& name, std::vector<std::string> values);
  ExampleBuilder& floats(const std::string& name, const std::vector<float>& values);
  ExampleBuilder& ints(const std::string& name, const std::vector<int64_t>& values);
  const tensorflow::Example& proto() const { return example_; }
  std::string serialize() const;

 private:
  tensorflow::Example example_;
};

// The deterministic serialization ExampleBuilder uses, for any Example.
std::string serialize_deterministic(const tensorflow::Example& example);

}  // namespace tpusim::runtime::data
