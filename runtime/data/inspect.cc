#include "runtime/data/inspect.h"

#include <algorithm>

#include "common/strings.h"
#include "runtime/data/example.h"

namespace tpusim::runtime::data {
namespace {

constexpr int kPreviewValues = 4;

FeatureSummary summarize_feature(const std::string& name, const tensorflow::Feature& f) {
  FeatureSummary s;
  s.name = name;
  const auto type = feature_type(f);
  if (!type) {
    s.kind = "empty";
    return s;
  }
  const FeatureValue v = feature_values(f);
  s.kind = feature_type_name(*type);
  s.values = static_cast<int>(v.size());
  std::vector<std::string> shown;
  for (int i = 0; i < std::min(s.values, kPreviewValues); ++i) {
    switch (*type) {
      case FeatureType::kBytes:
        shown.push_back(str_cat(v.bytes[i].size(), " B"));
        break;
      case FeatureType::kFloat:
        shown.push_back(str_cat(v.floats[i]));
        break;
      case FeatureType::kInt64:
        shown.push_back(str_cat(v.ints[i]));
        break;
    }
  }
  if (s.values > kPreviewValues) shown.push_back("...");
  s.preview = str_cat("[", str_join(shown, ", "), "]");
  return s;
}

}  // namespace

absl::StatusOr<TFRecordSummary> summarize_tfrecord(const std::string& path, ReaderOptions options) {
  auto reader = TFRecordReader::open(path, options);
  if (!reader.ok()) return reader.status();
  TFRecordSummary out;
  out.path = path;
  out.compression = (*reader)->compression();
  out.examples = true;
  std::string record;
  tensorflow::Example ex;
  for (;;) {
    auto more = (*reader)->next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.min_record_bytes =
        out.records == 0 ? record.size() : std::min<uint64_t>(out.min_record_bytes, record.size());
    out.max_record_bytes = std::max<uint64_t>(out.max_record_bytes, record.size());
    out.record_bytes += record.size();
    ++out.records;
    if (out.examples && !ex.ParseFromString(record)) out.examples = false;
    if (out.examples && out.records == 1) {
      for (const auto& [name, feature] : ex.features().feature()) {
        out.first_example.push_back(summarize_feature(name, feature));
      }
      std::sort(out.first_example.begin(), out.first_example.end(),
                [](const auto& a, const auto& b) { return a.name < b.name; });
    }
  }
  out.skipped = (*reader)->skipped();
  if (out.records == 0) out.examples = false;
  if (!out.examples) out.first_example.clear();
  return out;
}

}  // namespace tpusim::runtime::data
