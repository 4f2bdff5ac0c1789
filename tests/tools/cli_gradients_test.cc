// CLI runs of replicated training, and how its gradients' all-reduces run: the algorithm
// (--allreduce), overlap with the backward pass (--overlap-allreduce), combining
// (--allreduce-combine-threshold, and compile --replicas to see it), and the trace's link
// counters (--trace-counter-window-ns).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_gradients_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

// The step analysis of 4 timing-only steps of mlp on v3-8 (2 per loop, the host config's costs),
// with `option` set to `value`; model_dir and report under `tmp`, named by the value.
nlohmann::json mlp_analysis(const std::filesystem::path& tmp, const std::string& option,
                            const std::string& value) {
  const std::string report = (tmp / (value + ".json")).string();
  const auto r =
      run_tpusim({"train", "--model", "mlp", "--data", (tmp / "data").string(), "--model-dir",
                  (tmp / value).string(), "--train-steps", "4", "--iterations-per-loop", "2",
                  "--timing-only", "--host-timing", "config", option, value, "--report", report});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(report);
  return r.exit_code == 0 ? nlohmann::json::parse(in)["analysis"] : nlohmann::json();
}

// --allreduce picks how the gradients cross the interconnect: on v3-8 the every-dimension torus
// moves mlp's gradients (latency-bound, a few hundred KiB) in less all-reduce time per step than
// the ring over cores 0..7 in core order, whose hops 3->4 and 7->0 cross two chips. A name the
// interconnect does not have, or a backend without one, is a usage error.
TEST(Cli, TrainAllReduceChoosesHowTheGradientsMove) {
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-allreduce-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::map<std::string, double> all_reduce;
  for (const char* algorithm : {"ring", "torus"}) {
    const nlohmann::json analysis = mlp_analysis(tmp, "--allreduce", algorithm);
    ASSERT_FALSE(analysis.is_null()) << algorithm;
    all_reduce[algorithm] = analysis["step_breakdown"]["all_reduce"].get<double>();
  }
  EXPECT_GT(all_reduce["torus"], 0);
  EXPECT_LT(all_reduce["torus"], all_reduce["ring"]);
  auto r = run_tpusim({"train", "--allreduce", "tree"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--allreduce 'tree' is not one of ring, bidir_ring, torus2d or torus"));
  r = run_tpusim({"train", "--backend", "cpu", "--allreduce", "torus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allreduce needs the tpusim backend"));
  std::filesystem::remove_all(tmp);
}

// --overlap-allreduce on (the default) runs each gradient's all-reduce behind the backward pass:
// less of it holds the step up, and the report says how much ran hidden. Off, none does. Only
// tpusim times the all-reduce.
TEST(Cli, TrainOverlapAllReduceHidesItBehindTheBackwardPass) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-overlap-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::map<std::string, nlohmann::json> analysis;
  for (const char* overlap : {"on", "off"}) {
    analysis[overlap] = mlp_analysis(tmp, "--overlap-allreduce", overlap);
    ASSERT_FALSE(analysis[overlap].is_null()) << overlap;
  }
  const auto exposed = [&](const char* overlap) {
    return analysis[overlap]["step_breakdown"]["all_reduce"].get<double>() +
           analysis[overlap]["step_breakdown"]["all_reduce_wait"].get<double>();
  };
  EXPECT_GT(analysis["on"]["all_reduce_hidden"].get<double>(), 0);
  EXPECT_EQ(analysis["off"]["all_reduce_hidden"].get<double>(), 0);
  EXPECT_LT(exposed("on"), exposed("off"));
  EXPECT_LT(analysis["on"]["step_seconds"].get<double>(),
            analysis["off"]["step_seconds"].get<double>());
  auto r = run_tpusim({"train", "--backend", "cpu", "--overlap-allreduce", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--overlap-allreduce needs the tpusim backend"));
  r = run_tpusim({"train", "--overlap-allreduce", "sometimes"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("overlap-allreduce"));
  std::filesystem::remove_all(tmp);
}

// --allreduce-combine-threshold packs mlp's six gradients (0.9 MiB) into one all-reduce: the
// op profile has one cross_replica_sum instead of six, and the step spends less time in
// all-reduces. A size that is not one, or a backend without an interconnect, is a usage error.
TEST(Cli, TrainCombinesTheGradientsAllReduces) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-combine-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::map<std::string, nlohmann::json> report;
  for (const char* threshold : {"0", "4MiB"}) {
    const std::string path = (tmp / (std::string(threshold) + ".json")).string();
    const auto r =
        run_tpusim({"train", "--model", "mlp", "--data", (tmp / "data").string(), "--model-dir",
                    (tmp / threshold).string(), "--train-steps", "4", "--iterations-per-loop", "2",
                    "--timing-only", "--host-timing", "config", "--allreduce-combine-threshold",
                    threshold, "--report", path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(path);
    report[threshold] = nlohmann::json::parse(in);
  }
  const auto all_reduces = [&](const char* threshold) {
    int n = 0;
    for (const auto& op : report[threshold]["ops"]) n += op["op"] == "cross_replica_sum" ? 1 : 0;
    return n;
  };
  EXPECT_EQ(all_reduces("0"), 6);
  EXPECT_EQ(all_reduces("4MiB"), 1);
  EXPECT_EQ(report["4MiB"]["allreduce_combine_bytes"], 4 << 20);
  const auto all_reduce = [&](const char* threshold) {
    return report[threshold]["analysis"]["step_breakdown"]["all_reduce"].get<double>();
  };
  EXPECT_LT(all_reduce("4MiB"), all_reduce("0"));
  auto r = run_tpusim({"train", "--allreduce-combine-threshold", "4 parsecs"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allreduce-combine-threshold '4 parsecs': unknown unit"));
  r = run_tpusim({"train", "--allreduce-combine-threshold", "3B"});  // rounds to no f32 at all
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allreduce-combine-threshold 3B must be in [4 B, 64 GiB] (or 0: "
                               "no combining)"));
  r = run_tpusim({"train", "--backend", "cpu", "--allreduce-combine-threshold", "1MiB"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allreduce-combine-threshold needs the tpusim backend"));
  std::filesystem::remove_all(tmp);
}

// compile --replicas shows the all-reduces a replicated step emits: mnist_cnn's 8 gradient sums
// apart, or within 256 KiB in 3 (the first dense layer's 1.6 MB kernel alone, the rest in 2).
TEST(Cli, CompileShowsTheCombinedAllReduces) {
  std::map<std::string, nlohmann::json> out;
  for (const char* threshold : {"0", "256KiB"}) {
    const auto r = run_tpusim({"compile", "--model", "mnist_cnn", "--replicas", "8",
                               "--allreduce-combine-threshold", threshold, "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    out[threshold] = nlohmann::json::parse(r.out);
  }
  EXPECT_EQ(out["0"]["all_reduces"], 8);
  EXPECT_EQ(out["0"]["combined_allreduces"], 0);
  EXPECT_EQ(out["256KiB"]["all_reduces"], 3);
  EXPECT_EQ(out["256KiB"]["combined_allreduces"], 2);
  EXPECT_EQ(out["256KiB"]["combined_sums"], 7);
  const auto r = run_tpusim({"compile", "--model", "mlp", "--replicas", "9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--replicas must be in [1, 8] (the cores of v3-8)"));
}

// --trace-counter-window-ns averages the trace's rate counters (link utilisation, HBM
// bandwidth) over windows: far fewer counter samples, and the same step analysis, which reads
// the steps and collectives, not the counters.
TEST(Cli, TrainTraceCounterWindowShrinksTheTraceNotItsAnalysis) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-window-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::map<std::string, size_t> samples;
  std::map<std::string, double> step;
  for (const char* window : {"0", "2000"}) {
    const std::string trace = (tmp / (std::string(window) + ".json")).string();
    const auto r = run_tpusim({"train", "--model", "mlp", "--data", (tmp / "data").string(),
                               "--model-dir", (tmp / window).string(), "--train-steps", "4",
                               "--iterations-per-loop", "2", "--timing-only", "--host-timing",
                               "config", "--trace", trace, "--trace-counter-window-ns", window});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(trace);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t at = text.find("\"ph\":\"C\""); at != std::string::npos;
         at = text.find("\"ph\":\"C\"", at + 1)) {
      ++samples[window];
    }
    const auto a = run_tpusim({"analyze", trace, "--json"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    step[window] = nlohmann::json::parse(a.out)["step_seconds"].get<double>();
  }
  EXPECT_GT(samples["2000"], 0u);
  EXPECT_LT(samples["2000"] * 2, samples["0"]);
  EXPECT_EQ(step["2000"], step["0"]);
  std::filesystem::remove_all(tmp);
}

}  // namespace cli_gradients_test
}  // namespace tpusim::cli
