#include "estimator/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include <fcntl.h>
#include <unistd.h>

#include "common/strings.h"
#include "estimator/checkpoint.pb.h"
#include "runtime/data/tfrecord.h"

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
  return std::stoll(m[1].str());
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

}  // namespace

std::vector<std::string> list_checkpoints(const std::string& model_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const int64_t step = step_of(entry.path());
    if (step >= 0 && entry.is_regular_file()) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

absl::Status write_checkpoint(const std::string& path, int64_t global_step,
                              const runtime::Variables& variables) {
  const std::string tmp = path + ".tmp";
  {
    auto writer = runtime::data::TFRecordWriter::open(tmp);
    if (!writer.ok()) return writer.status();
    CheckpointHeader header;
    header.set_format_version(1);
    header.set_global_step(global_step);
    header.set_variables(static_cast<uint32_t>(variables.size()));
    header.set_created_by("tpusim");
    if (auto s = (*writer)->write(header.SerializeAsString()); !s.ok()) return s;
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
  return commit_file(tmp, path);
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
  if (keep_max > 0) {
    while (all.size() > static_cast<size_t>(keep_max)) {
      fs::remove(all.front(), ec);
      all.erase(all.begin());
    }
  }
  std::string index = str_cat("model_checkpoint_path: \"", name, "\"\n");
  for (const auto& p : all)
    index += str_cat("all_model_checkpoint_paths: \"", fs::path(p).filename().string(), "\"\n");
  if (auto s = write_atomically(str_cat(model_dir, "/checkpoint"), index); !s.ok()) return s;
  return path;
}

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
  ckpt.global_step = header.global_step();
  for (uint32_t k = 0; k < header.variables(); ++k) {
    const uint64_t offset = (*reader)->offset();
    got = (*reader)->next(&record);
    if (!got.ok()) return got.status();
    if (!*got) {
      return absl::DataLossError(str_cat(path, ": ends after ", k, " of ", header.variables(),
                                         " variables (at byte ", offset, ")"));
    }
    VariableRecord r;
    if (!r.ParseFromString(record)) {
      return absl::DataLossError(
          str_cat(path, ": variable record ", k, " at byte ", offset, " does not parse"));
    }
    HostTensor t;
    t.dtype = r.dtype() == VariableRecord::S32    ? DType::kS32
              : r.dtype() == VariableRecord::BF16 ? DType::kBF16
                                                  : DType::kF32;
    t.shape = runtime::Shape(std::vector<int64_t>(r.shape().begin(), r.shape().end()));
    const uint64_t bytes = static_cast<uint64_t>(t.elements()) * 4;
    if (r.data().size() != bytes || r.dtype() == VariableRecord::DTYPE_UNSPECIFIED) {
      return absl::DataLossError(str_cat(path, ": variable '", r.name(), "' (record ", k, ", byte ",
                                         offset, ") holds ", r.data().size(), " bytes; its shape ",
                                         t.shape.str(), " needs ", bytes));
    }
    if (t.dtype == DType::kS32) {
      t.i.resize(static_cast<size_t>(t.elements()));
      std::memcpy(t.i.data(), r.data().data(), bytes);
    } else {
      t.f.resize(static_cast<size_t>(t.elements()));
      std::memcpy(t.f.data(), r.data().data(), bytes);
    }
    ckpt.variables[r.name()] = std::move(t);
  }
  return ckpt;
}

absl::StatusOr<std::optional<Checkpoint>> load_latest_checkpoint(const std::string& model_dir) {
  const std::vector<std::string> all = list_checkpoints(model_dir);
  if (all.empty()) return std::optional<Checkpoint>();
  auto ckpt = load_checkpoint(all.back());
  if (!ckpt.ok()) return ckpt.status();
  return std::optional<Checkpoint>(*std::move(ckpt));
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
