#include "configs/loader.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include "common/input_file.h"
#include "common/strings.h"
#include "configs/embedded_files.h"
#include "configs/field_checker.h"
#include "configs/validator.h"

namespace tpusim::config {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Message;
using google::protobuf::TextFormat;

// Collects the parser's syntax errors as "file:line:col: message" (1-based line and column).
class ErrorList : public google::protobuf::io::ErrorCollector {
 public:
  ErrorList(std::string label, const google::protobuf::Descriptor* root)
      : label_(std::move(label)), root_(root) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    errors.push_back(str_cat(label_, ":", line + 1, ":", column + 1, ": ", message,
                             unknown_field_hint(message)));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    AddError(line, column, message);
  }
  std::vector<std::string> errors;

 private:
  // For 'Message type "tpusim.config.X" has no field named "y"', lists the fields X has.
  std::string unknown_field_hint(const std::string& message) const {
    static const std::regex kUnknown(R"re(Message type "([\w.]+)" has no field named)re");
    std::smatch m;
    if (!std::regex_search(message, m, kUnknown)) return "";
    const auto* desc = root_->file()->pool()->FindMessageTypeByName(m[1].str());
    if (desc == nullptr) return "";
    std::vector<std::string> names;
    for (int i = 0; i < desc->field_count(); ++i) names.push_back(desc->field(i)->name());
    return str_cat(" (fields of ", desc->name(), ": ", str_join(names, ", "), ")");
  }
  std::string label_;
  const google::protobuf::Descriptor* root_;
};

absl::Status rejected(const std::string& label, const std::vector<std::string>& errors) {
  return absl::InvalidArgumentError(str_cat("config ", label, " rejected (", errors.size(),
                                            errors.size() == 1 ? " problem" : " problems", "):\n  ",
                                            str_join(errors, "\n  ")));
}

// Parses text into `msg`, recording field locations in `tree`.
absl::Status parse_text(const ConfigText& text, Message* msg, TextFormat::ParseInfoTree* tree) {
  ErrorList errors(text.label, msg->GetDescriptor());
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree);
  if (!parser.ParseFromString(text.text, msg) || !errors.errors.empty()) {
    if (errors.errors.empty()) errors.errors.push_back(str_cat(text.label, ": parse error"));
    return rejected(text.label, errors.errors);
  }
  return absl::OkStatus();
}

// A config file is kilobytes (the largest shipped, a pod slice, is under 2 kB): 16 MiB is far
// past any, and refuses a mistaken file (a trace, a data shard) before it is read.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;

absl::StatusOr<std::string> read_file(const fs::path& path) {
  return read_input_file(path.string(), "config file", kMaxConfigBytes);
}

// A file a slice names (chip_file, host_file): relative to the slice's folder; for an
// embedded slice, or a name absent next to the slice, the embedded copy of that name.
absl::StatusOr<ConfigText> read_referenced(const ConfigText& slice, std::string_view field,
                                           const std::string& name) {
  if (!slice.embedded) {
    const fs::path path = fs::path(slice.dir) / name;
    // The error_code form: a name the file system refuses (too long, say) is a name not there,
    // not an exception.
    std::error_code error;
    if (fs::exists(path, error)) return read_config(path.string());
  }
  const std::string base = fs::path(name).filename().string();
  if (auto found = find_embedded(base)) {
    return ConfigText{str_cat("<embedded>/", base), std::string(*found), "", true};
  }
  return absl::NotFoundError(str_cat(
      slice.label, ": ", field, " \"", name, "\" not found",
      slice.embedded ? "" : str_cat(" in ", slice.dir.empty() ? "." : slice.dir),
      " and no embedded config has that name (embedded: ", str_join(embedded_names(), ", "), ")"));
}

// Where a part of a slice (its chip, its host) was written: in its own file, or inline.
struct PartSource {
  std::string label;                                // file that holds the part
  std::unique_ptr<TextFormat::ParseInfoTree> tree;  // locations in that file
  bool own_file = false;
};

// A checker for a part: the part's own file from its top, or the slice's nested block.
FieldChecker part_checker(FieldChecker& slice_checker, const SliceConfig& slice,
                          std::string_view field, const PartSource* source,
                          std::vector<std::string>* errors) {
  if (source != nullptr && source->own_file) {
    return FieldChecker(source->label, source->tree.get(), "", 0, errors);
  }
  bool present = false;
  return slice_checker.nested(slice, field, &present);
}

// Validates a slice whose chip and host are inline (read from their own files or not; the
// sources say where their fields are written, for the messages).
absl::StatusOr<std::shared_ptr<const SliceSpec>> check_slice(const SliceConfig& slice,
                                                             const std::string& label,
                                                             const TextFormat::ParseInfoTree* tree,
                                                             const PartSource* chip_source,
                                                             const PartSource* host_source) {
  std::vector<std::string> errors;
  FieldChecker c(label, tree, "", 0, &errors);
  auto spec = std::make_shared<SliceSpec>();
  spec->name = c.nonempty_string(slice, "name");
  if (slice.has_chip()) {
    FieldChecker chip = part_checker(c, slice, "chip", chip_source, &errors);
    validate_chip(slice.chip(), chip, &spec->chip);
    spec->chip.source = chip_source != nullptr ? chip_source->label : label;
  } else {
    c.fail(slice, "", "the slice names no chip: give chip_file: \"tpu_v3.pbtxt\" or chip { ... }");
  }
  bool present = false;
  FieldChecker topo = c.nested(slice, "topology", &present);
  if (present) validate_topology(slice.topology(), topo, &spec->topology);
  if (slice.has_host()) {
    FieldChecker host = part_checker(c, slice, "host", host_source, &errors);
    validate_host(slice.host(), host, &spec->host);
  } else {
    c.fail(slice, "", "the slice names no host: give host_file: \"host_96.pbtxt\" or host { ... }");
  }
  if (errors.empty()) validate_slice_relations(slice, c, spec.get());
  if (!errors.empty()) return rejected(label, errors);
  spec->source = label;
  spec->proto = slice;
  finish_slice(spec.get());
  return std::shared_ptr<const SliceSpec>(std::move(spec));
}

// Reads the file `name` that field `field` of a slice names into `msg`.
absl::StatusOr<PartSource> read_part(const ConfigText& slice, std::string_view field,
                                     const std::string& name, Message* msg) {
  auto text = read_referenced(slice, field, name);
  if (!text.ok()) return text.status();
  PartSource source{text->label, std::make_unique<TextFormat::ParseInfoTree>(), true};
  if (absl::Status s = parse_text(*text, msg, source.tree.get()); !s.ok()) return s;
  return source;
}

}  // namespace

absl::StatusOr<ConfigText> read_config(std::string_view path_or_name) {
  const fs::path path{std::string(path_or_name)};
  std::error_code ec;
  // Anything there but a folder is read as the file (a FIFO or a device refused as what it is).
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) {
    auto text = read_file(path);
    if (!text.ok()) return text.status();
    return ConfigText{path.string(), *std::move(text), path.parent_path().string(), false};
  }
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        str_cat(path.string(), " is a folder; name a .pbtxt config file"));
  }
  std::string name = path.filename().string();
  if (name.size() < 6 || name.compare(name.size() - 6, 6, ".pbtxt") != 0) name += ".pbtxt";
  if (auto found = find_embedded(name)) {
    return ConfigText{str_cat("<embedded>/", name), std::string(*found), "", true};
  }
  return absl::NotFoundError(str_cat(
      "no config file \"", path_or_name,
      "\" and no embedded config of that name (embedded: ", str_join(embedded_names(), ", "), ")"));
}

namespace {

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// X of a "# proto-message: tpusim.config.X" line (its word characters; the package is optional),
// or nullopt for any other line. Read by hand, in one pass: libstdc++'s std::regex recurses once
// a matched character, and a header of 29 KB of word characters (fuzz_config's) overflowed the
// stack.
std::optional<std::string_view> header_message(std::string_view line) {
  size_t at = 0;
  auto skip_spaces = [&] {
    while (at < line.size() && is_space(line[at])) ++at;
  };
  auto word_at = [&](size_t from) {
    size_t end = from;
    while (end < line.size() && is_word(line[end])) ++end;
    return line.substr(from, end - from);
  };
  if (line.empty() || line[0] != '#') return std::nullopt;
  ++at;
  skip_spaces();
  constexpr std::string_view kKey = "proto-message:", kPackage = "tpusim.config.";
  if (line.substr(at, kKey.size()) != kKey) return std::nullopt;
  at += kKey.size();
  skip_spaces();
  if (line.substr(at, kPackage.size()) == kPackage && !word_at(at + kPackage.size()).empty())
    return word_at(at + kPackage.size());
  const std::string_view word = word_at(at);
  if (word.empty()) return std::nullopt;
  return word;
}

}  // namespace

ConfigKind detect_kind(const ConfigText& text) {
  // Only the comment block at the top of the file counts: a slice that pastes a chip file
  // inline carries that file's header further down.
  std::istringstream lines(text.text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line[0] != '#') break;
    if (const auto message = header_message(line)) {
      if (*message == "ChipConfig") return ConfigKind::kChip;
      if (*message == "HostConfig") return ConfigKind::kHost;
      return ConfigKind::kSlice;
    }
  }
  return ConfigKind::kSlice;
}

namespace {

// Parses and validates a stand-alone chip or host file.
template <typename Spec, typename Msg, typename Validate>
absl::StatusOr<std::shared_ptr<const Spec>> parse_part(const ConfigText& text, ConfigKind kind,
                                                       std::string_view what, Validate validate) {
  if (detect_kind(text) != kind) {
    return absl::InvalidArgumentError(str_cat(
        text.label, " is not a ", what,
        " config: its first lines lack \"# proto-message: ", Msg::descriptor()->full_name(), "\""));
  }
  Msg msg;
  TextFormat::ParseInfoTree tree;
  if (absl::Status s = parse_text(text, &msg, &tree); !s.ok()) return s;
  std::vector<std::string> errors;
  FieldChecker c(text.label, &tree, "", 0, &errors);
  auto spec = std::make_shared<Spec>();
  validate(msg, c, spec.get());
  if (!errors.empty()) return rejected(text.label, errors);
  return std::shared_ptr<const Spec>(std::move(spec));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ChipSpec>> parse_chip(const ConfigText& text) {
  return parse_part<ChipSpec, ChipConfig>(
      text, ConfigKind::kChip, "chip", [&](const ChipConfig& msg, FieldChecker& c, ChipSpec* spec) {
        validate_chip(msg, c, spec);
        spec->source = text.label;
        finish_chip(spec);
      });
}

absl::StatusOr<std::shared_ptr<const HostSpec>> parse_host(const ConfigText& text) {
  return parse_part<HostSpec, HostConfig>(text, ConfigKind::kHost, "host", validate_host);
}

absl::StatusOr<std::shared_ptr<const SliceSpec>> parse_slice(const ConfigText& text) {
  if (detect_kind(text) != ConfigKind::kSlice) {
    return absl::InvalidArgumentError(
        str_cat(text.label,
                " is not a slice config (its proto-message header names another kind); "
                "name a slice file such as v3-8.pbtxt"));
  }
  SliceConfig slice;
  TextFormat::ParseInfoTree tree;
  if (absl::Status s = parse_text(text, &slice, &tree); !s.ok()) return s;
  // Resolve chip_file and host_file into inline messages: the spec's proto then holds the
  // whole slice, for reports and for sweeps that edit it.
  std::optional<PartSource> chip_source;
  std::optional<PartSource> host_source;
  if (slice.chip_source_case() == SliceConfig::kChipFile) {
    const std::string name = slice.chip_file();
    auto source = read_part(text, "chip_file", name, slice.mutable_chip());
    if (!source.ok()) return source.status();
    chip_source = *std::move(source);
  }
  if (slice.host_source_case() == SliceConfig::kHostFile) {
    const std::string name = slice.host_file();
    auto source = read_part(text, "host_file", name, slice.mutable_host());
    if (!source.ok()) return source.status();
    host_source = *std::move(source);
  }
  return check_slice(slice, text.label, &tree, chip_source ? &*chip_source : nullptr,
                     host_source ? &*host_source : nullptr);
}

absl::StatusOr<std::shared_ptr<const SliceSpec>> load_slice(std::string_view path_or_name) {
  auto text = read_config(path_or_name);
  if (!text.ok()) return text.status();
  return parse_slice(*text);
}

absl::StatusOr<std::shared_ptr<const ChipSpec>> load_chip(std::string_view path_or_name) {
  auto text = read_config(path_or_name);
  if (!text.ok()) return text.status();
  return parse_chip(*text);
}

absl::StatusOr<std::shared_ptr<const HostSpec>> load_host(std::string_view path_or_name) {
  auto text = read_config(path_or_name);
  if (!text.ok()) return text.status();
  return parse_host(*text);
}

absl::StatusOr<std::shared_ptr<const SliceSpec>> validate_slice(const SliceConfig& slice,
                                                                std::string label) {
  if (slice.chip_source_case() == SliceConfig::kChipFile ||
      slice.host_source_case() == SliceConfig::kHostFile) {
    return absl::InvalidArgumentError(str_cat(
        label, ": validate_slice needs the chip and host inline, not chip_file or host_file"));
  }
  return check_slice(slice, label, nullptr, nullptr, nullptr);
}

}  // namespace tpusim::config
