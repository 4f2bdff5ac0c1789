// Figures that hold on any host: what `tpusim` prints is the same whatever the host's CPU caches
// and thread count (TPUSIM_EIGEN_CACHE_SIZES pretends to another CPU; docs/reliability.md,
// "Figures that hold on any host").
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_any_host_test {

using testing::Environment;
using ::testing::HasSubstr;
using testing::run_tpusim;

// A GEMM 1024 terms deep: Eigen's own product would cut each sum into depth blocks of 208 terms
// on a host with 24 KiB of L1, 288 with 32 KiB and 432 with 48 KiB (and by another rule on
// several threads), each giving other bits. matmul's references are summed as the cpu backend
// sums, so its error figures are the same on every host; the MXU's tiles (128 terms) are one
// block on each.
TEST(CliAnyHost, MatmulsErrorFiguresAreTheSameOnEveryHost) {
  const std::vector<Environment> hosts = {
      {},
      {{"TPUSIM_EIGEN_CACHE_SIZES", "24K,1M,8M"}, {"OMP_NUM_THREADS", "1"}},
      {{"TPUSIM_EIGEN_CACHE_SIZES", "48K,2M,105M"}, {"OMP_NUM_THREADS", "3"}},
      {{"TPUSIM_EIGEN_CACHE_SIZES", "64K,512K,32M"}, {"OMP_NUM_THREADS", "2"}},
  };
  for (const char* precision : {"default", "high"}) {
    std::vector<std::pair<double, double>> errors;
    for (const Environment& host : hosts) {
      const auto r = run_tpusim(
          {"matmul", "--m", "256", "--k", "1024", "--n", "64", "--precision", precision, "--json"},
          "", host);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      errors.emplace_back(j["max_rel_error_vs_bf16_ref"].get<double>(),
                          j["max_rel_error_vs_fp32_ref"].get<double>());
      EXPECT_EQ(errors.back(), errors.front()) << precision << " on host " << errors.size() - 1;
    }
  }
}

TEST(CliAnyHost, AnUnreadableCacheSizeIsAUsageErrorNamingTheVariable) {
  const auto r = run_tpusim({"config", "list"}, "", {{"TPUSIM_EIGEN_CACHE_SIZES", "48K,2M"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("TPUSIM_EIGEN_CACHE_SIZES='48K,2M': three sizes are needed"));
}

}  // namespace cli_any_host_test
}  // namespace tpusim::cli
