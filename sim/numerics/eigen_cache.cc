#include "sim/numerics/eigen_cache.h"

#include <cstdlib>
#include <string>

#include <Eigen/Core>

namespace tpusim::sim {
namespace {

constexpr int64_t kMinSize = int64_t{1} << 10;
constexpr int64_t kMaxSize = int64_t{4} << 30;

// One size: digits, then an optional K or M.
bool parse_size(std::string_view text, int64_t* bytes) {
  int64_t scale = 1;
  if (!text.empty() && (text.back() == 'K' || text.back() == 'k')) scale = int64_t{1} << 10;
  if (!text.empty() && (text.back() == 'M' || text.back() == 'm')) scale = int64_t{1} << 20;
  if (scale != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 10) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *bytes = value * scale;
  return *bytes >= kMinSize && *bytes <= kMaxSize;
}

}  // namespace

absl::Status parse_cache_sizes(std::string_view spec, CacheSizes* out) {
  const auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(std::string(kEigenCacheSizesVariable) + "='" +
                                      std::string(spec) + "': " + why +
                                      " (expected L1,L2,L3 in bytes, each with an optional K or "
                                      "M suffix, e.g. 48K,2M,105M)");
  };
  int64_t sizes[3] = {0, 0, 0};
  std::string_view rest = spec;
  for (int i = 0; i < 3; ++i) {
    const size_t comma = rest.find(',');
    if ((comma == std::string_view::npos) != (i == 2)) return refuse("three sizes are needed");
    const std::string_view part = rest.substr(0, comma);
    if (!parse_size(part, &sizes[i])) {
      return refuse("'" + std::string(part) + "' is not a size in [1K, 4096M]");
    }
    if (comma != std::string_view::npos) rest.remove_prefix(comma + 1);
  }
  if (sizes[0] > sizes[1] || sizes[1] > sizes[2]) return refuse("L1 <= L2 <= L3 is needed");
  *out = CacheSizes{sizes[0], sizes[1], sizes[2]};
  return absl::OkStatus();
}

absl::Status apply_eigen_cache_sizes_from_environment() {
  const char* spec = std::getenv(kEigenCacheSizesVariable);
  if (spec == nullptr) return absl::OkStatus();
  CacheSizes sizes;
  if (absl::Status s = parse_cache_sizes(spec, &sizes); !s.ok()) return s;
  Eigen::setCpuCacheSizes(sizes.l1, sizes.l2, sizes.l3);
  return absl::OkStatus();
}

}  // namespace tpusim::sim
