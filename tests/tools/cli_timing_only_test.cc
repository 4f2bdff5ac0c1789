// What a run that computes no values says and keeps: a timing-only run shows no loss or
// accuracy and writes no checkpoint (a model_dir it resumed keeps its own), and a run whose
// checkpoint is already at max_steps shows no loss or step time.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_timing_only_test {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_tpusim;

// A timing-only run computed no values: its log, summary and report say so, with no loss or
// accuracy figures (null in the report, not a 0 that reads as a result).
TEST(Cli, TimingOnlyRunsShowNoLossOrAccuracy) {
  const std::string dir = ::testing::TempDir() + "tpusim-timing-only-train";
  std::filesystem::remove_all(dir);
  auto r = run_tpusim({"train", "--model", "mlp", "--train-steps", "2", "--iterations-per-loop",
                       "1", "--log-every", "1", "--timing-only", "--host-timing", "config",
                       "--model-dir", dir, "--report", dir + "/report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("global_step 2: no loss (timing-only) ("));
  EXPECT_THAT(r.out, HasSubstr("global step 2: no loss or accuracy (timing-only: no values "
                               "computed)"));
  EXPECT_THAT(r.out, Not(HasSubstr("final loss")));
  EXPECT_THAT(r.out, Not(HasSubstr("accuracy 0.0000")));
  std::ifstream in(dir + "/report.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_TRUE(report["final_loss"].is_null()) << report["final_loss"];
  EXPECT_TRUE(report["eval_accuracy"].is_null()) << report["eval_accuracy"];
  EXPECT_TRUE(report["eval_loss"].is_null()) << report["eval_loss"];
  EXPECT_GT(report["sim_seconds_per_step"].get<double>(), 0);
  // Its variables held no values, so no checkpoint claims them and there is no fingerprint.
  EXPECT_THAT(r.out + r.err, HasSubstr("timing-only: no checkpoint written (no values computed)"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/checkpoint"));
  EXPECT_TRUE(report["weights_fingerprint"].is_null()) << report["weights_fingerprint"];
  std::filesystem::remove_all(dir);
}

// A timing-only run from a trained model_dir starts at its global step and leaves its checkpoint
// as it was: the newest is still the trained one, byte for byte.
TEST(Cli, TimingOnlyRunsLeaveTheModelDirsCheckpoint) {
  const std::string dir = ::testing::TempDir() + "tpusim-timing-only-resume";
  std::filesystem::remove_all(dir);
  auto trained =
      run_tpusim({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1",
                  "--iterations-per-loop", "1", "--eval-steps", "1", "--model-dir", dir});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string ckpt = dir + "/model.ckpt-1.tpuckpt";
  const std::string before = bytes(ckpt);
  ASSERT_FALSE(before.empty());
  auto timing = run_tpusim({"train", "--model", "mlp", "--train-steps", "3", "--timing-only",
                            "--host-timing", "config", "--model-dir", dir});
  ASSERT_EQ(timing.exit_code, 0) << timing.err;
  EXPECT_THAT(timing.out + timing.err, HasSubstr("restored " + ckpt + " at global step 1"));
  EXPECT_THAT(timing.out, HasSubstr("global step 3: no loss or accuracy (timing-only"));
  EXPECT_EQ(bytes(ckpt), before);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".tpuckpt") files.push_back(e.path().filename().string());
  }
  EXPECT_THAT(files, ::testing::ElementsAre("model.ckpt-1.tpuckpt"));
  std::filesystem::remove_all(dir);
}

// A run whose checkpoint already reaches max_steps trains no step: it shows no loss and no step
// time (a 0 would read as a result), and its report holds null for them; a timing-only one
// still says that it computes no values.
TEST(Cli, ARunThatTrainsNoStepShowsNoLossOrStepTime) {
  const std::string dir = ::testing::TempDir() + "tpusim-no-step-train";
  std::filesystem::remove_all(dir);
  const std::vector<std::string> train = {"train", "--model",       "mlp", "--backend",
                                          "cpu",   "--train-steps", "1",   "--iterations-per-loop",
                                          "1",     "--eval-steps",  "1",   "--model-dir",
                                          dir};
  auto first = run_tpusim(train);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("global step 1: final loss "));
  std::vector<std::string> again = train;
  again.insert(again.end(), {"--report", dir + "/again.json"});
  auto r = run_tpusim(again);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("global step 1: no loss (no step trained: the checkpoint is at "
                               "max_steps), test accuracy "));
  EXPECT_THAT(r.out, HasSubstr("no simulated step (no step trained)"));
  EXPECT_THAT(r.out, Not(HasSubstr("final loss")));
  std::ifstream in(dir + "/again.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["steps_run"], 0);
  EXPECT_TRUE(report["final_loss"].is_null()) << report["final_loss"];
  auto timing = run_tpusim({"train", "--model", "mlp", "--train-steps", "1", "--timing-only",
                            "--host-timing", "config", "--model-dir", dir});
  ASSERT_EQ(timing.exit_code, 0) << timing.err;
  EXPECT_THAT(timing.out, HasSubstr("global step 1: no loss or accuracy (timing-only: no values "
                                    "computed)"));
  EXPECT_THAT(timing.out, Not(HasSubstr("0.000 ms")));
  std::filesystem::remove_all(dir);
}

}  // namespace cli_timing_only_test
}  // namespace tpusim::cli
