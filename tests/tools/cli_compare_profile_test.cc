// `tpusim compare-profile`: two profiles of the same model on a v3-8, the second with its HBM
// bandwidth halved, compared op by op; the per-category ratios are what the roofline predicts
// from the ops' own FLOPs and bytes and each profile's peaks (an HBM-bound category twice as
// long, a mixed one in between), wherever the roofline is what sets a category's time. And
// `tpusim analyze` lists a profile's ops.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"
#include "traces/xspace_ops.h"

namespace tpusim::cli {
namespace cli_compare_profile_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

// A v3-8 slice file whose chip (tpu_v3.pbtxt, copied) has half its HBM bandwidth; its path.
std::string v3_8_with_half_the_hbm_bandwidth(const std::filesystem::path& dir) {
  std::ifstream v3(std::string(TPUSIM_SOURCE_DIR) + "/configs/tpu_v3.pbtxt");
  std::string chip((std::istreambuf_iterator<char>(v3)), std::istreambuf_iterator<char>());
  const std::string field = "\n  bandwidth_gb_per_s: 900 ";
  const size_t at = chip.find(field);
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) chip.replace(at, field.size(), "\n  bandwidth_gb_per_s: 450 ");
  std::ofstream(dir / "tpu_v3_half_hbm.pbtxt") << chip;
  const std::string path = (dir / "v3-8-half-hbm.pbtxt").string();
  std::ofstream(path) << "name: \"v3-8-half-hbm\"\nchip_file: \"tpu_v3_half_hbm.pbtxt\"\n"
                         "topology { shape: 2 shape: 2 kind: TORUS }\n"
                         "chips_per_host: 4\nhost_file: \"host_96.pbtxt\"\n";
  return path;
}

// Trains image_cnn on 96x96 synthetic images, 256 a step, for two timing-only steps on `config`
// with a profile; the profile's path.
std::string profile_on(const std::string& config, const std::filesystem::path& dir) {
  const std::string report = (dir / "report.json").string();
  auto r = run_tpusim({"train",
                       "--model",
                       "image_cnn",
                       "--input",
                       "synthetic",
                       "--image-size",
                       "96",
                       "--batch-size",
                       "256",
                       "--timing-only",
                       "--train-steps",
                       "2",
                       "--iterations-per-loop",
                       "2",
                       "--host-timing",
                       "config",
                       "--config",
                       config,
                       "--model-dir",
                       (dir / "model").string(),
                       "--profile",
                       "--report",
                       report});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  return nlohmann::json::parse(in).value("profile", "");
}

// Each category's roofline time a step: every op's max(FLOPs / peak, bytes / HBM bandwidth)
// times its executions, with the profile's own peaks.
std::map<std::string, double> roofline_by_category(const traces::OpProfile& p) {
  std::map<std::string, double> out;
  for (const traces::ProfileOp& op : p.ops) {
    const double compute = static_cast<double>(op.flops) / (p.peak_teraflops_per_second * 1e12);
    const double memory =
        static_cast<double>(op.bytes_accessed) / (p.peak_hbm_gigabytes_per_second * 1e9);
    out[op.category] += std::max(compute, memory) * static_cast<double>(op.executions);
  }
  return out;
}

TEST(CompareProfile, HalvedHbmBandwidthMovesEachCategoryAsTheRooflinePredicts) {
  const auto tmp = std::filesystem::temp_directory_path() / "tpusim_cli_compare_profile";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp / "full");
  std::filesystem::create_directories(tmp / "half");
  const std::string full = profile_on("v3-8", tmp / "full");
  const std::string half = profile_on(v3_8_with_half_the_hbm_bandwidth(tmp), tmp / "half");
  auto measured = traces::read_op_profile(full);
  auto simulated = traces::read_op_profile(half);
  ASSERT_TRUE(measured.ok()) << measured.status();
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  EXPECT_DOUBLE_EQ(simulated->peak_hbm_gigabytes_per_second,
                   measured->peak_hbm_gigabytes_per_second / 2);
  const auto roof_full = roofline_by_category(*measured);
  const auto roof_half = roofline_by_category(*simulated);

  auto r = run_tpusim({"compare-profile", full, half, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["matched"].size(), measured->ops.size());
  EXPECT_TRUE(j["only_measured"].empty());
  EXPECT_TRUE(j["only_simulated"].empty());
  EXPECT_GT(j["step_ratio"].get<double>(), 1.1);
  const double ops_total = j["ops_total"]["measured_seconds_per_step"].get<double>();
  // The categories whose time the roofline sets (the MXUs and HBM of the core), each at least
  // 5% of the ops' time; all-reduce and infeed are set by the interconnect and the host.
  std::map<std::string, double> checked;
  for (const auto& row : j["categories"]) {
    const std::string category = row["category"];
    if (category == "all-reduce" || category == "infeed" || category == "outfeed") continue;
    if (row["measured_seconds_per_step"].get<double>() < 0.05 * ops_total) continue;
    const double predicted = roof_half.at(category) / roof_full.at(category);
    EXPECT_NEAR(row["ratio"].get<double>(), predicted, 0.1 * predicted) << category;
    checked[category] = predicted;
  }
  // The elementwise fusions are HBM-bound (twice as long); the convolution fusions partly
  // MXU-bound, so between.
  ASSERT_EQ(checked.count("loop fusion"), 1u);
  ASSERT_EQ(checked.count("convolution fusion"), 1u);
  EXPECT_DOUBLE_EQ(checked["loop fusion"], 2.0);
  EXPECT_GT(checked["convolution fusion"], 1.2);
  EXPECT_LT(checked["convolution fusion"], 1.8);

  r = run_tpusim({"compare-profile", full, half, "--top", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("by category (ms a step on one device; ratio simulated/measured)"));
  EXPECT_THAT(r.out, HasSubstr("costliest ops in both (3 of "));
  EXPECT_THAT(r.out, HasSubstr("only in the simulated profile: none"));

  r = run_tpusim({"analyze", full, "--ops", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("ops (5 of "));
  EXPECT_THAT(r.out, HasSubstr("convolution fusion"));
  std::filesystem::remove_all(tmp);
}

TEST(CompareProfile, ProfilesAndFlagsAreChecked) {
  auto r = run_tpusim({"compare-profile", "/nonexistent/a.xplane.pb"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("REAL and SIMULATED are both required"));
  const auto tmp = std::filesystem::temp_directory_path() / "tpusim_cli_compare_profile_bad";
  std::filesystem::create_directories(tmp);
  const std::string junk = (tmp / "junk.xplane.pb").string();
  std::ofstream(junk) << "\xff\xff\xff";
  r = run_tpusim({"compare-profile", junk, "/nonexistent/b.xplane.pb"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(junk + ": not an XSpace"));
  r = run_tpusim({"compare-profile", junk, junk, "--top", "-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--top takes a number >= 0 (got -1)"));
  std::filesystem::remove_all(tmp);
}

}  // namespace cli_compare_profile_test
}  // namespace tpusim::cli
