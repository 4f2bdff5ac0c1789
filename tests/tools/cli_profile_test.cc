// `tpusim train --profile` and `evaluate --profile`: the XProf profile written where XProf's
// profile plugin looks for it (MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb), named in the
// report, and readable as an XSpace with a plane a TensorCore and one for the host, holding the
// steps asked for. That XProf itself reads it is the interop tier's check
// (tests/interop/check_xprof_profile.py).
#include <filesystem>
#include <fstream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"
#include "traces/xplane.pb.h"

namespace tpusim::cli {
namespace cli_profile_test {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::run_tpusim;

// The step numbers on a plane's "Steps" line, in order.
std::vector<std::string> steps_of(const xprof::XPlane& plane) {
  std::vector<std::string> steps;
  for (const xprof::XLine& line : plane.lines()) {
    if (line.name() != "Steps") continue;
    for (const xprof::XEvent& e : line.events())
      steps.push_back(plane.event_metadata().at(e.metadata_id()).name());
  }
  return steps;
}

// The number of events on a plane's line `name`.
int events_on(const xprof::XPlane& plane, const std::string& name) {
  for (const xprof::XLine& line : plane.lines())
    if (line.name() == name) return line.events_size();
  return 0;
}

// Trains the mlp for 4 steps of 2-step loops on a v3-8 (synthetic input) with `extra` flags and
// returns the profile the report names, parsed.
xprof::XSpace profiled_run(const std::filesystem::path& tmp, std::vector<std::string> extra) {
  std::filesystem::remove_all(tmp);
  const std::string model_dir = (tmp / "model").string(), report = (tmp / "report.json").string();
  std::vector<std::string> args = {
      "train",    "--model", "mlp",       "--train-steps", "4",           "--iterations-per-loop",
      "2",        "--input", "synthetic", "--timing-only", "--model-dir", model_dir,
      "--report", report,    "--profile"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_tpusim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  const auto j = nlohmann::json::parse(in);
  const std::string path = j.value("profile", "");
  EXPECT_TRUE(std::regex_match(
      path, std::regex(model_dir + "/plugins/profile/\\d{4}(_\\d\\d){5}/[^/]+\\.xplane\\.pb")))
      << path;
  EXPECT_THAT(r.out, HasSubstr("profile: " + path + " (xprof --logdir " + model_dir + ")"));
  xprof::XSpace space;
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(space.ParseFromIstream(&file)) << path;
  return space;
}

TEST(Cli, TrainProfileWritesAnXSpaceOfEveryCoreAndTheHost) {
  const auto tmp = std::filesystem::temp_directory_path() / "tpusim_cli_profile";
  const xprof::XSpace space = profiled_run(tmp, {});
  // A v3-8 is four chips of two TensorCores: eight device planes, then the host's.
  ASSERT_EQ(space.planes_size(), 9);
  for (int core = 0; core < 8; ++core) {
    const xprof::XPlane& plane = space.planes(core);
    EXPECT_EQ(plane.name(), "/device:TPU:" + std::to_string(core));
    EXPECT_THAT(steps_of(plane), ElementsAre("1", "2", "3", "4")) << plane.name();
    EXPECT_GT(events_on(plane, "XLA Ops"), 0) << plane.name();
    EXPECT_EQ(events_on(plane, "XLA Modules"), 4) << plane.name();
  }
  EXPECT_EQ(space.planes(8).name(), "/host:CPU");
  EXPECT_GT(space.planes(8).lines_size(), 0);
  // --profile-steps keeps the loops holding those steps: 3..4 is the second loop.
  const xprof::XSpace second = profiled_run(tmp, {"--profile-steps", "3:4"});
  ASSERT_EQ(second.planes_size(), 9);
  EXPECT_THAT(steps_of(second.planes(0)), ElementsAre("3", "4"));
  std::filesystem::remove_all(tmp);
}

// evaluate --profile: the eval loop's steps, numbered on from the checkpoint's step as the
// backend numbers them, each running the eval_step module.
TEST(Cli, EvaluateProfileWritesTheEvalLoop) {
  const auto tmp = std::filesystem::temp_directory_path() / "tpusim_cli_eval_profile";
  std::filesystem::remove_all(tmp);
  const std::string model_dir = (tmp / "model").string();
  auto r = run_tpusim({"train", "--model", "mlp", "--train-steps", "2", "--iterations-per-loop",
                       "2", "--input", "synthetic", "--model-dir", model_dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Evaluation reads the Fashion-MNIST test set (converted into DATA on first use).
  const std::string data = (tmp / "data").string();
  r = run_tpusim({"evaluate", "--model", "mlp", "--model-dir", model_dir, "--data", data,
                  "--eval-steps", "3", "--profile", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string path = j.value("profile", "");
  EXPECT_TRUE(std::regex_match(
      path, std::regex(model_dir + "/plugins/profile/\\d{4}(_\\d\\d){5}/[^/]+\\.xplane\\.pb")))
      << path;
  xprof::XSpace space;
  std::ifstream file(path, std::ios::binary);
  ASSERT_TRUE(space.ParseFromIstream(&file)) << path;
  ASSERT_EQ(space.planes_size(), 9);
  for (int core = 0; core < 8; ++core) {
    const xprof::XPlane& plane = space.planes(core);
    EXPECT_THAT(steps_of(plane), ElementsAre("3", "4", "5")) << plane.name();
    EXPECT_EQ(events_on(plane, "XLA Modules"), 3) << plane.name();
    EXPECT_GT(events_on(plane, "XLA Ops"), 0) << plane.name();
  }
  r = run_tpusim({"evaluate", "--model", "mlp", "--model-dir", model_dir, "--data", data,
                  "--eval-steps", "1", "--profile", "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--profile"));
  std::filesystem::remove_all(tmp);
}

// `tpusim analyze` reads the profile back: the same steps, step time, classification and
// slowest host stage as the run's own analysis (the profile's infeed ops hold their dequeue too,
// so the input share may differ in its last digit).
TEST(Cli, AnalyzeReadsAProfileAsTheRunAnalysedItself) {
  const auto tmp = std::filesystem::temp_directory_path() / "tpusim_cli_analyze_profile";
  std::filesystem::remove_all(tmp);
  const std::string model_dir = (tmp / "model").string(), report = (tmp / "report.json").string();
  auto r = run_tpusim({"train", "--model", "mlp", "--train-steps", "6", "--iterations-per-loop",
                       "2", "--timing-only", "--host-timing", "config", "--model-dir", model_dir,
                       "--profile", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  const auto run = nlohmann::json::parse(in);
  r = run_tpusim({"analyze", run["profile"].get<std::string>(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto read = nlohmann::json::parse(r.out);
  const auto& own = run["analysis"];
  EXPECT_EQ(read["steps"], own["steps"]);
  EXPECT_NEAR(read["step_seconds"].get<double>(), own["step_seconds"].get<double>(),
              1e-9 * own["step_seconds"].get<double>());
  EXPECT_EQ(read["classification"], own["classification"]);
  EXPECT_EQ(read["slowest_host_stage"]["name"], own["slowest_host_stage"]["name"]);
  std::filesystem::remove_all(tmp);
}

TEST(Cli, TrainProfileFlagsAreChecked) {
  auto r = run_tpusim({"train", "--model", "mlp", "--profile-steps", "1:2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--profile-steps needs --profile"));
  r = run_tpusim({"train", "--model", "mlp", "--profile", "--profile-steps", "3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--profile-steps"));
  r = run_tpusim({"train", "--model", "mlp", "--profile", "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--profile"));
}

}  // namespace cli_profile_test
}  // namespace tpusim::cli
