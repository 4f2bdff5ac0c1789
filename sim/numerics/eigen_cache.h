#pragma once
// Eigen's view of the host's caches, set as another CPU's would be. Eigen cuts a GEMM's depth into
// blocks sized from the L1 cache it reads off the host CPU (and by another rule when it runs a
// product on several threads), and the blocks' partial sums round differently, so a product left
// to Eigen's own blocking gives other bits on another machine. Every figure tpusim's tests and
// docs compare is summed in an order the code fixes (the cpu backend's GEMMs, the MXU's tiles of
// at most 128 terms); TPUSIM_EIGEN_CACHE_SIZES lets a run prove it on this machine by pretending
// to be another one (docs/reliability.md, "Figures that hold on any host").

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace tpusim::sim {

// The environment variable the CLI and the test binaries read at start: "L1,L2,L3", each a size
// in bytes with an optional K or M suffix (powers of 1024), e.g. "48K,2M,105M".
inline constexpr char kEigenCacheSizesVariable[] = "TPUSIM_EIGEN_CACHE_SIZES";

struct CacheSizes {
  int64_t l1 = 0, l2 = 0, l3 = 0;  // bytes
};

// Parses "L1,L2,L3" as above; every size must be in [1 KiB, 4 GiB] and L1 <= L2 <= L3. The error
// names the variable and the part it could not read.
absl::Status parse_cache_sizes(std::string_view spec, CacheSizes* out);

// When TPUSIM_EIGEN_CACHE_SIZES is set, parses it and hands the sizes to Eigen
// (Eigen::setCpuCacheSizes) in place of those it reads off the host; unset, does nothing.
absl::Status apply_eigen_cache_sizes_from_environment();

}  // namespace tpusim::sim
