// The CLI's backend commands, run as a subprocess: `tpusim backends` (what is built and why a
// backend cannot run here) and `tpusim opcheck` (every op case on the named backends).
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_backends_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

TEST(Cli, BackendsJsonSaysWhetherCudaWasBuiltAndWhyNoDeviceRuns) {
  const auto r = run_tpusim({"backends", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["backends"].is_array());
  for (const auto& b : j["backends"]) {
    for (const char* key : {"name", "built", "available", "reason"}) EXPECT_TRUE(b.contains(key));
  }
  EXPECT_EQ(j["cuda"]["built"].get<bool>(), static_cast<bool>(TPUSIM_HAVE_CUDA_BUILD));
  if (j["cuda"]["devices"].empty()) {
    EXPECT_FALSE(j["cuda"]["reason"].get<std::string>().empty());
  }
  std::vector<std::string> names;
  for (const auto& b : j["backends"]) names.push_back(b["name"].get<std::string>());
  EXPECT_EQ(names, (std::vector<std::string>{"tpusim", "cpu", "gpu"}));
  const auto& gpu = j["backends"][2];
  EXPECT_EQ(gpu["built"].get<bool>(), static_cast<bool>(TPUSIM_HAVE_CUDA_BUILD));
  if (j["cuda"]["devices"].empty()) {
    EXPECT_FALSE(gpu["available"].get<bool>());
    EXPECT_EQ(gpu["reason"], j["cuda"]["reason"]);
  }
}

// Without a usable GPU, asking for the gpu backend fails with the probe's reason, not a crash.
TEST(Cli, GpuBackendWithoutADeviceSaysWhy) {
  const auto j = nlohmann::json::parse(run_tpusim({"backends", "--json"}).out);
  if (j["backends"][2]["available"].get<bool>()) GTEST_SKIP() << "a GPU is usable here";
  const std::string reason = j["backends"][2]["reason"].get<std::string>();
  auto r = run_tpusim({"opcheck", "--backends", "gpu", "--ops", "^add$"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("gpu backend unavailable: " + reason));
  r = run_tpusim({"opcheck", "--backends", "cpu", "--reference", "gpu:mxu", "--ops", "^add$"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("gpu backend unavailable: "));
}

// A short run of the main job: mlp on the 8 simulated cores of a v3-8, Fashion-MNIST converted
// into a fresh data folder on first use; then the same model_dir trained on to a later step.

TEST(Cli, OpcheckJsonListsEveryCaseWithItsFigures) {
  const auto r = run_tpusim({"opcheck", "--backends", "cpu,cpu:mxu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GE(j["ops"].get<int>(), 30);
  EXPECT_EQ(j["failed"], 0);
  EXPECT_EQ(j["reference"], "cpu");
  std::set<std::string> modes, backends;
  for (const auto& c : j["cases"]) {
    for (const char* key : {"op", "backend", "mode", "shape", "max_abs_error", "max_rel_error",
                            "ulp", "tolerance", "passed"}) {
      ASSERT_TRUE(c.contains(key)) << key;
    }
    modes.insert(c["mode"].get<std::string>());
    backends.insert(c["backend"].get<std::string>());
  }
  EXPECT_EQ(modes, (std::set<std::string>{"backward", "forward"}));
  EXPECT_EQ(backends, (std::set<std::string>{"cpu", "cpu:mxu"}));
}

TEST(Cli, OpcheckFiltersOpsAndRejectsBadBackends) {
  auto r = run_tpusim({"opcheck", "--ops", "^conv2d$"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("conv2d"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("matmul ")));
  EXPECT_THAT(r.out, HasSubstr("(1 ops)"));
  r = run_tpusim({"opcheck", "--backends", "cpu:fp4"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown precision 'fp4'"));
  r = run_tpusim({"opcheck", "--backends", "warp-drive"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no backend named 'warp-drive'"));
  r = run_tpusim({"opcheck", "--ops", "("});
  EXPECT_EQ(r.exit_code, 2);
}

// A v3-8 slice file whose chip (tpu_v3.pbtxt, copied) has `mib` MiB of VMEM per core; its path.
std::string v3_8_slice_with_vmem(const std::string& mib, const std::string& name) {
  std::ifstream v3(std::string(TPUSIM_SOURCE_DIR) + "/configs/tpu_v3.pbtxt");
  std::string chip((std::istreambuf_iterator<char>(v3)), std::istreambuf_iterator<char>());
  const size_t at = chip.find("vmem_mib: 16");
  EXPECT_NE(at, std::string::npos);
  if (at != std::string::npos) chip.replace(at, 12, "vmem_mib: " + mib);
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/tpu_v3_" + name + ".pbtxt") << chip;
  const std::string path = dir + "/slice-" + name + ".pbtxt";
  std::ofstream(path) << "name: \"" << name << "\"\nchip_file: \"tpu_v3_" << name
                      << ".pbtxt\"\ntopology { shape: 2 shape: 2 kind: TORUS }\n"
                         "chips_per_host: 4\nhost_file: \"host_96.pbtxt\"\n";
  return path;
}

// --config is the slice tpusim simulates: a v3-8 with 256 KiB of VMEM (a slice file whose chip
// is inline) runs the matmul and conv2d cases in small tiles and still passes; a missing file
// is named.
TEST(Cli, OpcheckRunsTpusimOnTheGivenSlice) {
  const std::string path = v3_8_slice_with_vmem("0.25", "small-vmem");
  auto shown = run_tpusim({"config", "show", path});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("VMEM 0.25 MiB per core"));
  auto r = run_tpusim(
      {"opcheck", "--backends", "tpusim", "--ops", "^(matmul|conv2d)$", "--config", path});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("(2 ops)"));
  r = run_tpusim({"opcheck", "--backends", "tpusim", "--ops", "^add$", "--config",
                  "/nonexistent/slice.pbtxt"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/slice.pbtxt"));
}

// A case a backend cannot run is an ERROR naming the reason, and the rest still run: at 2 KiB of
// VMEM not even a row of add's [4, 9] operands fits tpusim's tile budget (its three blocks take
// 512 aligned bytes each); cpu:mxu's cases pass.
TEST(Cli, OpcheckListsACaseABackendCannotRunAndGoesOn) {
  const std::string path = v3_8_slice_with_vmem("0.002", "2k-vmem");
  auto r = run_tpusim(
      {"opcheck", "--backends", "tpusim,cpu:mxu", "--ops", "^(add|sub)$", "--config", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out,
              HasSubstr("ERROR add                          tpusim   [4, 9] [4, 9]: a row of "
                        "108 bytes (operands, output and scratch: 3 blocks of 512-byte "
                        "aligned VMEM, 1536 bytes) does not fit the VMEM tile budget of 786 "
                        "bytes"));
  EXPECT_THAT(r.out, HasSubstr("ERROR sub "));
  EXPECT_THAT(r.out, HasSubstr("ok   sub                           cpu:mxu"));
  EXPECT_THAT(r.out, HasSubstr("9 passed, 3 failed (2 ops)"));  // add has 2 cases, sub 1
  r = run_tpusim({"opcheck", "--backends", "tpusim", "--ops", "^add$", "--config", path, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["cases"].size(), 2u);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["passed"], false);
    EXPECT_THAT(c["error"].get<std::string>(), HasSubstr("does not fit the VMEM"));
  }
}

}  // namespace cli_backends_test
}  // namespace tpusim::cli
