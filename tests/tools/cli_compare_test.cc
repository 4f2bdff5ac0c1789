// tpusim compare from the command line: verdicts against the rounding baseline (one nudge or
// several), the JSON scripts read, and the usage errors.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_compare_test {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_tpusim;

// The same 3 steps on tpusim and cpu:mxu agree: their differences are within 5x of the rounding
// baseline's (the cpu against itself from initial weights one ulp apart). cpu:fp32 against tpusim
// (a device that forgot the MXU's bf16 rounding) differs by 50x that at step 2. Both verdicts
// rest on the baseline: at --noise-factor 0 the first differs at step 3 (1.93e-05 > 1e-05), at
// 100 the second's losses pass. With the baseline off, the tolerances alone decide.
// --input synthetic feeds every backend the same batch of the model's published images (here
// resnet_small's 28x28x1), made once from a seed: no files are read or written.
TEST(Cli, CompareOnSyntheticImagesAgrees) {
  auto r = run_tpusim({"compare", "--model", "resnet_small", "--input", "synthetic", "--batch-size",
                       "16", "--steps", "2", "--data", "/nonexistent/no-data", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "agree") << r.out;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent/no-data"));
}

// Three nudges: the baseline is their largest drift, at least the first pattern's alone at
// every step and in every variable (`j`, one nudge's), and larger somewhere.
void expect_three_nudges_bound_one(const std::filesystem::path& data, const nlohmann::json& j) {
  const auto r = run_tpusim(
      {"compare", "--steps", "3", "--data", data.string(), "--baseline-runs", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto three = nlohmann::json::parse(r.out)["baseline"];
  EXPECT_EQ(three["runs"], 3);
  EXPECT_THAT(r.err, HasSubstr("(initial weights nudged one ulp, pattern 2, sums in f32)"));
  bool larger = false;
  for (size_t s = 0; s < 3; ++s) {
    const double one = j["baseline"]["loss_differences"][s], most = three["loss_differences"][s];
    EXPECT_GE(most, one) << "step " << s + 1;
    larger = larger || most > one;
  }
  for (const auto& [name, w] : j["baseline"]["variables"].items()) {
    EXPECT_GE(three["variables"][name]["max_abs"].get<double>(), w["max_abs"].get<double>())
        << name;
    larger = larger || three["variables"][name]["max_abs"] > w["max_abs"];
  }
  EXPECT_TRUE(larger);
}

// A difference over one nudge's drift is judged again against three (--baseline-runs auto):
// cpu:fp32 still differs.
void expect_fp32_to_differ(const std::filesystem::path& data) {
  const auto r = run_tpusim(
      {"compare", "--steps", "2", "--data", data.string(), "--backends", "tpusim,cpu:fp32"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rounding baseline: cpu:mxu from initial weights one ulp apart "
                               "(the largest drift of 3 nudges)"));
  EXPECT_THAT(r.err, HasSubstr("(initial weights nudged one ulp, pattern 2, sums in f32)"));
  EXPECT_THAT(r.out, HasSubstr("cpu:fp32 vs tpusim over 2 steps"));
  EXPECT_THAT(r.out, HasSubstr("verdict: DIFFER (1 of 2 steps' losses over 1e-05 or 5 x the "
                               "baseline's, the first step 2 by"));
}

// Without the baseline the tolerances alone decide.
void expect_the_tolerances_to_decide(const std::filesystem::path& data) {
  auto r = run_tpusim({"compare", "--steps", "3", "--data", data.string(), "--baseline", "off",
                       "--weight-tolerance", "0", "--weight-atol", "0", "--loss-tolerance", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, Not(HasSubstr("rounding baseline")));
  EXPECT_THAT(r.out, HasSubstr("verdict: DIFFER (every step's loss within 1; "));
  EXPECT_THAT(r.out, HasSubstr("variables over 0 + 0 x their largest value)"));
  EXPECT_THAT(r.out, HasSubstr("  over tolerance\n"));
  r = run_tpusim({"compare", "--steps", "3", "--data", data.string(), "--baseline", "off",
                  "--weight-tolerance", "0", "--weight-atol", "1", "--loss-tolerance", "1",
                  "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.contains("baseline"));
  EXPECT_EQ(j["against"]["cpu"]["verdict"], "agree");
  EXPECT_TRUE(j["against"]["cpu"]["variables_over_tolerance"].empty());
}

// Adam: a rate of 1 diverges, and compare says so; at 0.002 tpusim and the cpu agree.
void expect_adam_verdicts(const std::filesystem::path& data) {
  // Adam at a rate of 1 blows mlp's loss up at step 2: compare says the training diverges.
  auto r = run_tpusim({"compare", "--steps", "2", "--data", data.string(), "--optimizer", "adam",
                       "--learning-rate", "1", "--baseline", "off", "--loss-tolerance", "1e9",
                       "--weight-tolerance", "1e9"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("note: tpusim's loss goes from 2.391 at step 1 to "));
  EXPECT_THAT(r.out, HasSubstr("at step 2: the training diverges"));

  // Adam (whose per-element scaling amplifies rounding most) agrees on mlp too.
  r = run_tpusim({"compare", "--steps", "3", "--data", data.string(), "--optimizer", "adam",
                  "--learning-rate", "0.002", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["verdict"], "agree");
}

// Mixed precision: tpusim and the cpu agree under mixed_bfloat16, and a policy per backend
// compares the policies.
void expect_mixed_precision_verdicts(const std::filesystem::path& data) {
  // Under mixed_bfloat16 (activations in bf16) tpusim and the cpu agree as well; the baseline is
  // still the f32 ulp's.
  auto r = run_tpusim({"compare", "--steps", "3", "--data", data.string(), "--dtype-policy",
                       "mixed_bfloat16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dtype_policy"], "mixed_bfloat16");
  EXPECT_EQ(j["verdict"], "agree");
  EXPECT_THAT(r.err, HasSubstr("3 steps of mlp (mixed_bfloat16) on tpusim"));
  // A policy per backend compares the policies: the runs are labelled with theirs, and mixed
  // precision moves mlp's loss beyond what rounding alone does (2.25e-04 at step 1).
  r = run_tpusim({"compare", "--steps", "2", "--data", data.string(), "--backends", "cpu,cpu",
                  "--dtype-policy", "float32,mixed_bfloat16", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reference"], "cpu@float32");
  EXPECT_EQ(j["baseline"]["backend"], "cpu:mxu@float32");
  EXPECT_EQ(j["against"]["cpu@mixed_bfloat16"]["verdict"], "differ");
  EXPECT_GT(j["against"]["cpu@mixed_bfloat16"]["losses"][0]["difference"].get<double>(), 1e-4);
}

// Usage errors, each named.
void expect_usage_errors() {
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {{"--backends", "cpu"}, "--backends needs at least two backends"},
      {{"--dtype-policy", "mixed_float16"},
       "--dtype-policy: unknown dtype policy 'mixed_float16' (float32 or mixed_bfloat16)"},
      {{"--dtype-policy", "float32,float32,mixed_bfloat16"},
       "--dtype-policy takes one policy or one per backend (2 backends, 3 policies)"},
      {{"--backends", "tpusim:fp32,cpu"}, "'tpusim:fp32': tpusim's precision is its MXU's"},
      {{"--backends", "tpusim,cpu:fp16"}, "unknown precision 'fp16' in 'cpu:fp16'"},
      {{"--backends", "tpusim,tpu"}, "unknown backend 'tpu'"},
      {{"--baseline", "maybe"}, "--baseline is on or off (got 'maybe')"},
      {{"--baseline-runs", "0"}, "--baseline-runs is a count from 1 to 64 or auto (got '0')"},
      {{"--baseline-runs", "65"}, "--baseline-runs is a count from 1 to 64 or auto (got '65')"},
      {{"--baseline-runs", "some"}, "--baseline-runs is a count from 1 to 64 or auto (got 'some')"},
      {{"--noise-factor", "-1"}, "--noise-factor must be >= 0 (got -1)"},
      {{"--loss-tolerance", "nan"}, "--loss-tolerance must be >= 0 (got nan)"},
      {{"--steps", "0"}, "--steps must be >= 1 (got 0)"},
      {{"--batch-size", "-8"}, "--batch-size takes a number >= 0 (got -8)"},
      {{"--optimizer", "adagrad"}, "unknown optimizer 'adagrad'"},
      {{"--learning-rate", "0"}, "--learning-rate must be > 0 (got 0)"}};
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args{"compare"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_tpusim(args);
    EXPECT_EQ(r.exit_code, 2) << flags[1];
    EXPECT_THAT(r.err, HasSubstr(message));
  }
}

TEST(Cli, CompareTrainsOnEachBackendAndGivesAVerdict) {
  const auto data =
      std::filesystem::temp_directory_path() / ("tpusim-cli-compare-" + std::to_string(::getpid()));
  auto r = run_tpusim({"compare", "--steps", "3", "--data", data.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["reference"], "tpusim");
  EXPECT_EQ(j["baseline"]["backend"], "cpu:mxu");
  EXPECT_EQ(j["baseline"]["runs"], 1);
  EXPECT_EQ(j["baseline"]["loss_differences"].size(), 3u);
  EXPECT_GT(j["baseline"]["loss_differences"][2].get<double>(), 0);
  const auto& cpu = j["against"]["cpu"];
  EXPECT_EQ(cpu["verdict"], "agree");
  ASSERT_EQ(cpu["losses"].size(), 3u);
  EXPECT_TRUE(cpu["variables"].contains("dense_1/kernel"));
  EXPECT_TRUE(cpu["variables"]["dense_1/kernel"].contains("baseline_max_abs"));

  expect_three_nudges_bound_one(data, j);
  expect_fp32_to_differ(data);
  expect_the_tolerances_to_decide(data);
  expect_adam_verdicts(data);
  expect_mixed_precision_verdicts(data);
  expect_usage_errors();
  std::filesystem::remove_all(data);
}

}  // namespace cli_compare_test
}  // namespace tpusim::cli
