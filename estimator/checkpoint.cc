#include "estimator/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "common/fault_point.h"
#include "common/strings.h"
#include "estimator/checkpoint.pb.h"
#include "runtime/data/tfrecord.h"
#include "runtime/graph/serialize.h"

namespace tpusim::estimator {
namespace {

namespace fs = std::filesystem;
using runtime::DType;
using runtime::HostTensor;

constexpr char kSuffix[] = ".tpuckpt";

VariableRecord::DType to_record(DType d) {
  switch (d) {
    case DType::kBF16:
      return VariableRecord::BF16;
    case DType::kS32:
      return VariableRecord::S32;
    default:
      return VariableRecord::F32;
  }
}

// The step in "model.ckpt-<step>.tpuckpt", or -1.
int64_t step_of(const fs::path& p) {
  static const std::regex kName(R"(model\.ckpt-(\d+)\.tpuckpt)");
  std::smatch m;
  const std::string name = p.filename().string();
  if (!std::regex_match(name, m, kName)) return -1;
  int64_t step = -1;
  const std::string digits = m[1].str();
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  return ec == std::errc() && end == digits.data() + digits.size() ? step : -1;  // -1: too big
}

absl::Status sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::InternalError(str_cat("cannot open ", path, " to sync it"));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::InternalError(str_cat("cannot sync ", path));
  return absl::OkStatus();
}

// Syncs the finished temporary file `tmp` and renames it to `path`: all of it or nothing there.
absl::Status commit_file(const std::string& tmp, const std::string& path) {
  if (auto s = sync_file(tmp); !s.ok()) return s;
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(str_cat("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  return absl::OkStatus();
}

// Writes `text` to `path` through a temporary file and a rename.
absl::Status write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return absl::InternalError(str_cat("cannot write ", tmp));
  }
  return commit_file(tmp, path);
}

// Temporary files a killed save left ("*.tmp"): a save that completes removes them, so none
// outlives the next one.
void remove_stale_temporaries(const std::string& model_dir) {
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    if (entry.path().extension() == ".tmp" && entry.is_regular_file())
      stale.push_back(entry.path());
  }
  for (const fs::path& p : stale) fs::remove(p, ec);
}

}  // namespace

absl::Status check_writable_dir(const std::string& model_dir) {
  std::error_code ec;
  fs::create_directories(model_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        str_cat("model_dir ", model_dir, " cannot be created: ", ec.message()));
  }
  const std::string probe = str_cat(model_dir, "/.tpusim-write-probe.tmp");
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        str_cat("model_dir ", model_dir, " is not writable: ", std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return absl::OkStatus();
}

std::vector<std::string> list_checkpoints(const std::string& model_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const int64_t step = step_of(entry.path());
    // A checkpoint's name whose file cannot be examined (a symlink loop, say) is kept, so that
    // loading it names what is wrong, rather than an older checkpoint being taken for the newest.
    std::error_code unreadable;
    const bool regular = entry.is_regular_file(unreadable);
    if (step >= 0 && (regular || unreadable)) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

namespace {

// The checkpoint's records into the temporary file `tmp`.
absl::Status write_records(const std::string& tmp, int64_t global_step,
                           const runtime::Variables& variables) {
  {
    auto writer = runtime::data::TFRecordWriter::open(tmp);
    if (!writer.ok()) return writer.status();
    CheckpointHeader header;
    header.set_format_version(1);
    header.set_global_step(global_step);
    header.set_variables(static_cast<uint32_t>(variables.size()));
    header.set_created_by("tpusim");
    if (auto s = (*writer)->write(header.SerializeAsString()); !s.ok()) return s;
    fault_point("checkpoint.partial");
    for (const auto& [var, value] : variables) {  // a std::map: name order
      VariableRecord r;
      r.set_name(var);
      r.set_dtype(to_record(value.dtype));
      for (int64_t d : value.shape.dims()) r.add_shape(d);
      const void* data = value.dtype == DType::kS32 ? static_cast<const void*>(value.i.data())
                                                    : static_cast<const void*>(value.f.data());
      r.set_data(data, static_cast<size_t>(value.elements()) * 4);
      if (auto s = (*writer)->write(r.SerializeAsString()); !s.ok()) return s;
    }
    if (auto s = (*writer)->close(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status write_checkpoint(const std::string& path, int64_t global_step,
                              const runtime::Variables& variables) {
  const std::string tmp = path + ".tmp";
  if (auto s = write_records(tmp, global_step, variables); !s.ok()) {
    std::error_code ec;
    fs::remove(tmp, ec);  // a full disk leaves no half file beside the previous checkpoints
    return s;
  }
  fault_point("checkpoint.written");
  if (auto s = commit_file(tmp, path); !s.ok()) return s;
  fault_point("checkpoint.renamed");
  return absl::OkStatus();
}

absl::StatusOr<std::string> save_checkpoint(const std::string& model_dir, int64_t global_step,
                                            const runtime::Variables& variables, int keep_max) {
  std::error_code ec;
  fs::create_directories(model_dir, ec);
  if (ec) return absl::InternalError(str_cat("cannot create ", model_dir, ": ", ec.message()));
  const std::string name = str_cat("model.ckpt-", global_step, kSuffix);
  const std::string path = str_cat(model_dir, "/", name);
  if (auto s = write_checkpoint(path, global_step, variables); !s.ok()) return s;

  std::vector<std::string> all = list_checkpoints(model_dir);
  std::vector<std::string> dropped;
  while (keep_max > 0 && all.size() > static_cast<size_t>(keep_max)) {
    dropped.push_back(all.front());
    all.erase(all.begin());
  }
  // The index first, then the old files: a kill in between leaves files the index does not
  // name, never an index naming a removed file.
  std::string index = str_cat("model_checkpoint_path: \"", name, "\"\n");
  for (const auto& p : all)
    index += str_cat("all_model_checkpoint_paths: \"", fs::path(p).filename().string(), "\"\n");
  if (auto s = write_atomically(str_cat(model_dir, "/checkpoint"), index); !s.ok()) return s;
  fault_point("checkpoint.indexed");
  for (const std::string& old : dropped) fs::remove(old, ec);
  remove_stale_temporaries(model_dir);
  return path;
}

namespace {

// The variable of record `k` (at byte `offset` of `path`): a known dtype, dimensions that are
// not negative and data of exactly the shape's bytes.
absl::StatusOr<std::pair<std::string, HostTensor>> read_variable(const std::string& record,
                                                                 const std::string& path,
                                                                 uint32_t k, uint64_t offset) {
  const std::string where = str_cat(path, ": variable record ", k, " at byte ", offset);
  VariableRecord r;
  if (!r.ParseFromString(record)) return absl::DataLossError(str_cat(where, " does not parse"));
  if (const std::string unknown = runtime::first_unknown_field(r); !unknown.empty())
    return absl::DataLossError(str_cat(where, ": field ", unknown, " is not a VariableRecord's"));
  HostTensor t;
  switch (r.dtype()) {
    case VariableRecord::F32:
      t.dtype = DType::kF32;
      break;
    case VariableRecord::BF16:
      t.dtype = DType::kBF16;
      break;
    case VariableRecord::S32:
      t.dtype = DType::kS32;
      break;
    default:
      return absl::DataLossError(
          str_cat(where, " ('", r.name(), "') has unknown dtype ", static_cast<int>(r.dtype())));
  }
  // The elements, counted against the data so no claimed shape can overflow or allocate: every
  // partial product stays within the elements the data holds (a shape with a 0 holds none).
  const uint64_t elements_held = r.data().size() / 4;
  const bool empty = std::find(r.shape().begin(), r.shape().end(), 0) != r.shape().end();
  uint64_t elements = empty ? 0 : 1;
  for (int64_t d : r.shape()) {
    if (d < 0 || (!empty && elements > elements_held / static_cast<uint64_t>(d))) {
      return absl::DataLossError(str_cat(where, " ('", r.name(), "') has shape [",
                                         str_join(r.shape(), ", "), "], which its ",
                                         r.data().size(), " bytes do not hold"));
    }
    if (!empty) elements *= static_cast<uint64_t>(d);
  }
  t.shape = runtime::Shape(std::vector<int64_t>(r.shape().begin(), r.shape().end()));
  const uint64_t bytes = elements * 4;
  if (r.data().size() != bytes) {
    return absl::DataLossError(str_cat(path, ": variable '", r.name(), "' (record ", k, ", byte ",
                                       offset, ") holds ", r.data().size(), " bytes; its shape ",
                                       t.shape.str(), " needs ", bytes));
  }
  if (t.dtype == DType::kS32) {
    t.i.resize(static_cast<size_t>(elements));
  } else {
    t.f.resize(static_cast<size_t>(elements));
  }
  // An empty tensor's vector has no storage to copy into (memcpy of a null pointer).
  if (bytes > 0) {
    std::memcpy(t.dtype == DType::kS32 ? static_cast<void*>(t.i.data()) : t.f.data(),
                r.data().data(), bytes);
  }
  return std::make_pair(r.name(), std::move(t));
}

// A checkpoint's `global_step` variable, where it has one, against its header's step: the
// optimizer's schedules (learning-rate decay, Adam's bias correction) read the variable, so a
// step that disagrees with the header would resume at one step and train as if at another. The
// variable is an f32 counted up by one a step, which stops at 2^24 (the next step rounds back).
absl::Status check_step_variable(const Checkpoint& ckpt, const std::string& path) {
  auto it = ckpt.variables.find("global_step");
  if (it == ckpt.variables.end()) return absl::OkStatus();
  const runtime::HostTensor& step = it->second;
  if (step.shape.elements() != 1) {
    return absl::DataLossError(
        str_cat(path, ": variable 'global_step' has shape ", step.shape.str(), "; it is a scalar"));
  }
  constexpr int64_t kLastExactF32Step = int64_t{1} << 24;
  const double held = step.dtype == DType::kS32 ? static_cast<double>(step.i[0]) : step.f[0];
  const double expected = static_cast<double>(std::min(ckpt.global_step, kLastExactF32Step));
  if (held != expected) {
    return absl::DataLossError(str_cat(path, ": variable 'global_step' holds ", held,
                                       " where the header's global_step is ", ckpt.global_step));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> load_checkpoint(const std::string& path) {
  auto reader = runtime::data::TFRecordReader::open(path);
  if (!reader.ok()) return reader.status();
  Checkpoint ckpt;
  ckpt.path = path;
  std::string record;
  auto got = (*reader)->next(&record);
  if (!got.ok()) return got.status();
  CheckpointHeader header;
  if (!*got || !header.ParseFromString(record) || header.format_version() != 1) {
    return absl::DataLossError(
        str_cat(path, ": not a tpusim checkpoint (no version-1 header at byte 0)"));
  }
  if (const std::string unknown = runtime::first_unknown_field(header); !unknown.empty()) {
    return absl::DataLossError(
        str_cat(path, ": the header's field ", unknown, " is not a CheckpointHeader's"));
  }
  if (header.global_step() < 0) {
    return absl::DataLossError(
        str_cat(path, ": the header's global_step is ", header.global_step(), ", below 0"));
  }
  if (const int64_t named = step_of(path); named >= 0 && named != header.global_step()) {
    return absl::DataLossError(str_cat(path, ": the header's global_step is ", header.global_step(),
                                       " where the file's name says ", named));
  }
  ckpt.global_step = header.global_step();
  for (uint32_t k = 0; k < header.variables(); ++k) {
    const uint64_t offset = (*reader)->offset();
    got = (*reader)->next(&record);
    if (!got.ok()) return got.status();
    if (!*got) {
      return absl::DataLossError(str_cat(path, ": ends after ", k, " of ", header.variables(),
                                         " variables (at byte ", offset, ")"));
    }
    auto variable = read_variable(record, path, k, offset);
    if (!variable.ok()) return variable.status();
    auto [name, value] = *std::move(variable);
    if (ckpt.variables.count(name) > 0) {
      return absl::DataLossError(
          str_cat(path, ": variable '", name, "' again in record ", k, " (byte ", offset, ")"));
    }
    ckpt.variables[name] = std::move(value);
  }
  if (auto s = check_step_variable(ckpt, path); !s.ok()) return s;
  const uint64_t end = (*reader)->offset();
  got = (*reader)->next(&record);
  if (!got.ok()) {
    return absl::DataLossError(str_cat(path, ": bytes after the header's ", header.variables(),
                                       " variables (at byte ", end, "): ", got.status().message()));
  }
  if (*got) {
    return absl::DataLossError(str_cat(path, ": another record after the header's ",
                                       header.variables(), " variables (at byte ", end, ")"));
  }
  return ckpt;
}

absl::StatusOr<std::optional<Checkpoint>> load_latest_checkpoint(const std::string& model_dir) {
  const std::vector<std::string> all = list_checkpoints(model_dir);
  if (auto s = check_checkpoint_index(model_dir, all); !s.ok()) return s;
  if (all.empty()) return std::optional<Checkpoint>();
  auto ckpt = load_checkpoint(all.back());
  if (!ckpt.ok()) return ckpt.status();
  return std::optional<Checkpoint>(*std::move(ckpt));
}

namespace {

// A line of the `checkpoint` index: `model_checkpoint_path: "PATH"` (the newest) or
// `all_model_checkpoint_paths: "PATH"`, PATH without quotes, nothing after it.
struct IndexLine {
  bool newest = false;
  std::string path;
};

// Read by hand, in one pass: libstdc++'s std::regex recurses once a matched character, and a
// quoted path of 900 KB (under the index's 1 MB limit) overflowed the stack.
std::optional<IndexLine> index_line(std::string_view line) {
  for (const bool newest : {true, false}) {
    const std::string prefix =
        str_cat(newest ? "model_checkpoint_path" : "all_model_checkpoint_paths", ": \"");
    if (line.size() <= prefix.size() || line.substr(0, prefix.size()) != prefix ||
        line.back() != '"') {
      continue;
    }
    const std::string_view path = line.substr(prefix.size(), line.size() - prefix.size() - 1);
    if (path.find('"') != std::string_view::npos) return std::nullopt;
    return IndexLine{newest, std::string(path)};
  }
  return std::nullopt;
}

}  // namespace

absl::Status check_checkpoint_index(const std::string& model_dir,
                                    const std::vector<std::string>& checkpoints) {
  const fs::path index = fs::path(model_dir) / "checkpoint";
  std::error_code ec;
  const fs::file_status st = fs::status(index, ec);
  if (ec || st.type() == fs::file_type::not_found) return absl::OkStatus();  // none: the listing
  if (st.type() != fs::file_type::regular)
    return absl::DataLossError(str_cat(index.string(), " is not a regular file"));
  constexpr uintmax_t kMaxIndexBytes = 1 << 20;
  if (fs::file_size(index, ec) > kMaxIndexBytes || ec) {
    return absl::DataLossError(
        str_cat(index.string(), " is over ", kMaxIndexBytes, " bytes: not a checkpoint index"));
  }
  std::ifstream in(index);
  std::set<std::string> present;
  for (const std::string& p : checkpoints) present.insert(fs::path(p).filename().string());
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::optional<IndexLine> entry = index_line(line);
    if (!entry) {
      return absl::DataLossError(str_cat(index.string(), " line ", number,
                                         " is not a checkpoint index line (model_checkpoint_path: "
                                         "\"NAME\")"));
    }
    const std::string name = fs::path(entry->path).filename().string();
    if (entry->newest && present.count(name) == 0) {
      return absl::DataLossError(str_cat(index.string(), " line ", number, " names ", entry->path,
                                         ", which is not in ", model_dir));
    }
  }
  return absl::OkStatus();
}

std::string weights_fingerprint(const runtime::Variables& variables) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  };
  for (const auto& [name, t] : variables) {
    mix(name.data(), name.size());
    const auto dtype = static_cast<uint8_t>(t.dtype);
    mix(&dtype, 1);
    for (int64_t d : t.shape.dims()) mix(&d, sizeof(d));
    if (t.dtype == DType::kS32) {
      mix(t.i.data(), t.i.size() * 4);
    } else {
      mix(t.f.data(), t.f.size() * 4);
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace tpusim::estimator
