#include "runtime/data/shard_files.h"

#include <algorithm>
#include <filesystem>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/host_budget.h"
#include "common/strings.h"

namespace tpusim::runtime::data {

std::string shard_name(const std::string& prefix, int shard, int shards, Compression compression) {
  const char* suffix = compression == Compression::kGzip   ? ".gz"
                       : compression == Compression::kZlib ? ".zz"
                                                           : "";
  return fmt::format("{}-{:05d}-of-{:05d}.tfrecord{}", prefix, shard, shards, suffix);
}

std::pair<uint64_t, uint64_t> shard_range(uint64_t count, int shard, int shards) {
  const auto n = static_cast<uint64_t>(shards);
  return {count * static_cast<uint64_t>(shard) / n, count * static_cast<uint64_t>(shard + 1) / n};
}

absl::Status check_shard_plan(const std::string& prefix, const char* prefix_field, int64_t shards,
                              uint64_t examples, uint64_t min_example_bytes,
                              const std::string& dir) {
  if (prefix.empty() || prefix == "." || prefix == ".." || prefix.find('/') != std::string::npos ||
      prefix.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(str_cat(
        prefix_field, " must be a file name prefix (no '/', not . or ..), not '", prefix, "'"));
  }
  if (shards < 1 || static_cast<uint64_t>(shards) > examples) {
    return absl::InvalidArgumentError(
        str_cat("shards must be 1..", examples, " (the examples: no empty shard), not ", shards));
  }
  std::error_code ec;
  std::filesystem::path existing = std::filesystem::absolute(dir, ec);
  if (ec) return absl::FailedPreconditionError(str_cat("cannot resolve ", dir, ": ", ec.message()));
  while (!std::filesystem::exists(existing, ec) && existing.has_parent_path() &&
         existing.parent_path() != existing) {
    existing = existing.parent_path();
  }
  return check_free_disk(str_cat(examples, " examples of at least ", min_example_bytes, " bytes"),
                         saturating_product(examples, min_example_bytes), existing.string());
}

absl::Status make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(str_cat("cannot create ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status write_shards_in_parallel(int shards, int threads,
                                      const std::function<absl::Status(int shard)>& write) {
  const int workers = std::max(
      1, std::min(shards,
                  threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<absl::Status> done(static_cast<size_t>(std::max(shards, 0)));
  auto work = [&](int w) {
    for (int sh = w; sh < shards; sh += workers) done[static_cast<size_t>(sh)] = write(sh);
  };
  std::vector<std::thread> pool;
  for (int w = 1; w < workers; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& t : pool) t.join();
  for (const auto& s : done) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::data
