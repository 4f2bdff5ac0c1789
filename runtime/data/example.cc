#include "runtime/data/example.h"

#include <cmath>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "common/strings.h"

namespace tpusim::runtime::data {

const char* feature_type_name(FeatureType t) {
  switch (t) {
    case FeatureType::kBytes:
      return "bytes";
    case FeatureType::kFloat:
      return "float";
    case FeatureType::kInt64:
      return "int64";
  }
  return "?";
}

int64_t FeatureValue::size() const {
  switch (type) {
    case FeatureType::kBytes:
      return static_cast<int64_t>(bytes.size());
    case FeatureType::kFloat:
      return static_cast<int64_t>(floats.size());
    case FeatureType::kInt64:
      return static_cast<int64_t>(ints.size());
  }
  return 0;
}

FeatureSpecEntry fixed_len(FeatureType type, std::vector<int64_t> shape) {
  FeatureSpecEntry e;
  e.type = type;
  e.shape = std::move(shape);
  return e;
}

FeatureSpecEntry fixed_len(FeatureType type, std::vector<int64_t> shape,
                           FeatureValue default_value) {
  FeatureSpecEntry e = fixed_len(type, std::move(shape));
  default_value.type = type;
  default_value.shape = e.shape;
  e.default_value = std::move(default_value);
  return e;
}

FeatureSpecEntry var_len(FeatureType type) {
  FeatureSpecEntry e;
  e.type = type;
  e.var_len = true;
  return e;
}

FeatureSpecEntry in_range(FeatureSpecEntry entry, int64_t lo, int64_t end, std::string indexes) {
  entry.range = IntRange{lo, end, std::move(indexes)};
  return entry;
}

namespace {

// OK, or the first of `v`'s values outside `range`, named with its feature and place.
absl::Status check_range(const FeatureValue& v, const IntRange& range, const std::string& name,
                         const std::string& where) {
  for (size_t i = 0; i < v.ints.size(); ++i) {
    if (v.ints[i] >= range.lo && v.ints[i] < range.end) continue;
    return absl::InvalidArgumentError(str_cat(where, ": feature '", name, "' value ", i, " is ",
                                              v.ints[i], ", outside [", range.lo, ", ", range.end,
                                              ") (", range.indexes, ")"));
  }
  return absl::OkStatus();
}

// OK, or the first of `v`'s float values that is not a finite number: a record's float features
// reach the model as they are, and one NaN or infinity turns its loss and weights to NaN (a run
// that then "succeeds" with a poisoned checkpoint).
absl::Status check_finite(const FeatureValue& v, const std::string& name,
                          const std::string& where) {
  for (size_t i = 0; i < v.floats.size(); ++i) {
    if (std::isfinite(v.floats[i])) continue;
    return absl::InvalidArgumentError(str_cat(where, ": feature '", name, "' value ", i, " is ",
                                              v.floats[i], ", not a finite number"));
  }
  return absl::OkStatus();
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  return str_cat("[", str_join(shape, ", "), "]");
}

std::optional<FeatureType> feature_type(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kBytesList:
      return FeatureType::kBytes;
    case tensorflow::Feature::kFloatList:
      return FeatureType::kFloat;
    case tensorflow::Feature::kInt64List:
      return FeatureType::kInt64;
    case tensorflow::Feature::KIND_NOT_SET:
      return std::nullopt;
  }
  return std::nullopt;
}

FeatureValue feature_values(const tensorflow::Feature& f) {
  FeatureValue v;
  v.type = feature_type(f).value_or(FeatureType::kBytes);
  v.bytes.assign(f.bytes_list().value().begin(), f.bytes_list().value().end());
  v.floats.assign(f.float_list().value().begin(), f.float_list().value().end());
  v.ints.assign(f.int64_list().value().begin(), f.int64_list().value().end());
  v.shape = {v.size()};
  return v;
}

absl::StatusOr<ParsedExample> parse_example(const std::string& serialized, const FeatureSpec& spec,
                                            const std::string& where) {
  tensorflow::Example ex;
  if (!ex.ParseFromString(serialized)) {
    return absl::InvalidArgumentError(
        str_cat(where, ": not a tf.Example (", serialized.size(), " bytes)"));
  }
  const auto& features = ex.features().feature();
  ParsedExample out;
  for (const auto& [name, entry] : spec) {
    const auto it = features.find(name);
    // A feature with no kind counts as absent, as in TensorFlow.
    const std::optional<FeatureType> kind =
        it == features.end() ? std::nullopt : feature_type(it->second);
    if (!kind) {
      if (entry.var_len) {
        FeatureValue empty;
        empty.type = entry.type;
        empty.shape = {0};
        out.emplace(name, std::move(empty));
        continue;
      }
      if (!entry.default_value) {
        return absl::InvalidArgumentError(str_cat(
            where, ": feature '", name, "' is required (no default) but the example lacks it"));
      }
      out.emplace(name, *entry.default_value);
      continue;
    }
    if (*kind != entry.type) {
      return absl::InvalidArgumentError(str_cat(where, ": feature '", name, "' holds ",
                                                feature_type_name(*kind), " values; the spec says ",
                                                feature_type_name(entry.type)));
    }
    FeatureValue v = feature_values(it->second);
    if (entry.var_len) {
      v.shape = {v.size()};
    } else {
      if (v.size() != elements(entry.shape)) {
        return absl::InvalidArgumentError(str_cat(where, ": feature '", name, "' has ", v.size(),
                                                  " values; shape ", shape_string(entry.shape),
                                                  " needs ", elements(entry.shape)));
      }
      v.shape = entry.shape;
    }
    if (entry.range) {
      if (auto s = check_range(v, *entry.range, name, where); !s.ok()) return s;
    }
    if (auto s = check_finite(v, name, where); !s.ok()) return s;
    out.emplace(name, std::move(v));
  }
  return out;
}

ExampleBuilder& ExampleBuilder::bytes(const std::string& name, std::vector<std::string> values) {
  auto* list = (*example_.mutable_features()->mutable_feature())[name].mutable_bytes_list();
  for (auto& v : values) list->add_value(std::move(v));
  return *this;
}

ExampleBuilder& ExampleBuilder::floats(const std::string& name, const std::vector<float>& values) {
  auto* list = (*example_.mutable_features()->mutable_feature())[name].mutable_float_list();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

ExampleBuilder& ExampleBuilder::ints(const std::string& name, const std::vector<int64_t>& values) {
  auto* list = (*example_.mutable_features()->mutable_feature())[name].mutable_int64_list();
  list->mutable_value()->Add(values.begin(), values.end());
  return *this;
}

std::string ExampleBuilder::serialize() const { return serialize_deterministic(example_); }

std::string serialize_deterministic(const tensorflow::Example& example) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    example.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace tpusim::runtime::data
