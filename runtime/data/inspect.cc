#include "runtime/data/inspect.h"

#include <algorithm>

#include "common/strings.h"
#include "runtime/data/example.pb.h"

namespace tpusim::runtime::data {
namespace {

constexpr int kPreviewValues = 4;

template <typename List>
std::string preview_numbers(const List& list) {
  std::vector<std::string> shown;
  for (int i = 0; i < std::min(list.value_size(), kPreviewValues); ++i)
    shown.push_back(str_cat(list.value(i)));
  if (list.value_size() > kPreviewValues) shown.push_back("...");
  return str_cat("[", str_join(shown, ", "), "]");
}

FeatureSummary summarize_feature(const std::string& name, const tensorflow::Feature& f) {
  FeatureSummary s;
  s.name = name;
  switch (f.kind_case()) {
    case tensorflow::Feature::kBytesList: {
      s.kind = "bytes";
      s.values = f.bytes_list().value_size();
      std::vector<std::string> shown;
      for (int i = 0; i < std::min(s.values, kPreviewValues); ++i) {
        shown.push_back(str_cat(f.bytes_list().value(i).size(), " B"));
      }
      if (s.values > kPreviewValues) shown.push_back("...");
      s.preview = str_cat("[", str_join(shown, ", "), "]");
      break;
    }
    case tensorflow::Feature::kFloatList:
      s.kind = "float";
      s.values = f.float_list().value_size();
      s.preview = preview_numbers(f.float_list());
      break;
    case tensorflow::Feature::kInt64List:
      s.kind = "int64";
      s.values = f.int64_list().value_size();
      s.preview = preview_numbers(f.int64_list());
      break;
    case tensorflow::Feature::KIND_NOT_SET:
      s.kind = "empty";
      break;
  }
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
