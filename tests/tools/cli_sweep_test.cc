// `tpusim sweep` in one process: a grid of config fields and run options over train, compare and
// the kernel commands, its table, its plots and what they say.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_sweep_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

// A sweep takes any subcommand that reports JSON: the kernels print theirs (--json, chosen by
// sweep), config fields go into each point's config, and a metric in seconds plots in the unit
// that suits it.
TEST(Cli, SweepRunsTheKernelCommandsToo) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-kernels-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  const std::string matmul = (tmp / "matmul").string();
  auto r = run_tpusim({"sweep", "--set", "m=128,512", "--set", "chip.core.mxu_count=1,2", "--out",
                       matmul, "--", "matmul", "--k", "256", "--n", "256", "--timing-only"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream csv(matmul + "/sweep.csv");
  std::string header, first;
  std::getline(csv, header);
  std::getline(csv, first);
  EXPECT_EQ(header.rfind("point,m,chip.core.mxu_count,exit_code,config,m,k,n,", 0), 0u) << header;
  EXPECT_THAT(header, HasSubstr(",cycles,seconds,"));
  EXPECT_EQ(first.rfind("p000,128,1,0,", 0), 0u) << first;
  EXPECT_THAT(r.out, HasSubstr("point  values"));
  EXPECT_THAT(r.out, HasSubstr("seconds"));
  // Two MXUs per core shorten the 512-row product.
  std::ifstream json_in(matmul + "/sweep.json");
  const auto j = nlohmann::json::parse(json_in);
  EXPECT_LT(j["points"][3]["report"]["cycles"].get<int64_t>(),
            j["points"][2]["report"]["cycles"].get<int64_t>());
  if (std::filesystem::exists("/usr/bin/gnuplot")) {
    std::stringstream script;
    script << std::ifstream(matmul + "/plots/metric.gp").rdbuf();
    EXPECT_THAT(script.str(), HasSubstr("set ylabel \"seconds (us)\""));
  }
  r = run_tpusim({"sweep", "--set", "bytes=1MiB,4MiB", "--out", (tmp / "allreduce").string(), "--",
                  "allreduce", "--timing-only"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_tpusim(
      {"sweep", "--set", "chip.core.mxu_count=1,2", "--out", (tmp / "layers").string(), "--",
       "layers", "--topology",
       std::string(TPUSIM_SOURCE_DIR) + "/tests/runtime/data/scalesim_topologies/resnet18.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("total_cycles"));
  r = run_tpusim({"sweep", "--set", "m=1", "--out", matmul, "--", "matmul", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--json is chosen by sweep for each point"));
  r = run_tpusim({"sweep", "--set", "m=1", "--out", matmul, "--", "opcheck"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("one of train, compare, matmul, allreduce, layers, validate"));
  std::filesystem::remove_all(tmp);
}

// sweep.csv: a header, then a row of as many cells per point, failed points kept with their exit
// code, and an empty loss cell for timing-only points.
void expect_the_sweep_table(const std::string& out) {
  std::ifstream csv(out + "/sweep.csv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(csv, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].rfind("point,chip.core.mxu_count,batch_size,exit_code,", 0), 0u) << lines[0];
  EXPECT_THAT(lines[0], HasSubstr(",sim_seconds_per_step,"));
  EXPECT_THAT(lines[0], HasSubstr(",analysis.step_breakdown.compute,"));
  const auto cells = [](const std::string& line) {
    size_t n = 1;
    for (char c : line) n += c == ',';
    return n;
  };
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_EQ(cells(lines[i]), cells(lines[0])) << lines[i];
  EXPECT_EQ(lines[1].rfind("p000,1,256,0,", 0), 0u) << lines[1];
  // Timing-only points computed no loss: the column is there, its cells empty.
  const auto cell = [](const std::string& line, size_t index) {
    size_t start = 0;
    for (size_t k = 0; k < index; ++k) start = line.find(',', start) + 1;
    return line.substr(start, line.find(',', start) - start);
  };
  const size_t loss_column = [&] {
    size_t n = 0;
    const size_t at = lines[0].find(",final_loss,");
    for (size_t k = 0; k <= at && at != std::string::npos; ++k) n += lines[0][k] == ',';
    return at == std::string::npos ? 0 : n;
  }();
  ASSERT_GT(loss_column, 0u) << lines[0];
  EXPECT_EQ(cell(lines[1], loss_column), "") << lines[1];
  EXPECT_EQ(lines[2].rfind("p001,1,100,1,", 0), 0u) << lines[2];
  EXPECT_EQ(lines[4].rfind("p003,2,100,1,", 0), 0u) << lines[4];
}

// The metric, breakdown and roofline plots as PNG and SVG, with their scripts' labels (when
// gnuplot is installed).
void expect_the_plots(const std::string& out) {
  if (std::filesystem::exists("/usr/bin/gnuplot")) {
    std::stringstream metric_script, roofline_script;
    metric_script << std::ifstream(out + "/plots/metric.gp").rdbuf();
    EXPECT_THAT(metric_script.str(), HasSubstr("set ylabel \"sim_seconds_per_step (ms)\""));
    EXPECT_THAT(metric_script.str(), HasSubstr("set yrange [0:*]"));
    EXPECT_THAT(metric_script.str(), HasSubstr("batch_size=256: compute per step"));
    EXPECT_THAT(metric_script.str(), HasSubstr("every point is input-bound"));
    // Each roof names the points under it, which share its colour.
    roofline_script << std::ifstream(out + "/plots/roofline.gp").rdbuf();
    EXPECT_THAT(roofline_script.str(), HasSubstr("roof of p000: MXU"));
    EXPECT_THAT(roofline_script.str(), HasSubstr("set key outside right"));
    for (const char* plot : {"metric", "breakdown", "roofline"}) {
      std::ifstream png(out + "/plots/" + plot + ".png", std::ios::binary);
      std::string magic(4, '\0');
      png.read(magic.data(), 4);
      EXPECT_EQ(magic, "\x89PNG") << plot;
      std::ifstream svg(out + "/plots/" + plot + ".svg");
      std::stringstream text;
      text << svg.rdbuf();
      EXPECT_THAT(text.str(), HasSubstr("<svg")) << plot;
    }
  }
}

// Each report's op profile and roofs (one MXU per core halves the roof), and the roofline's data.
void expect_the_op_profiles(const nlohmann::json& j, const std::string& out) {
  // Each report carries the op profile the roofline draws: one MXU per core halves the roof.
  const auto& roofs_1 = j["points"][0]["report"]["roofline"];
  const auto& roofs_2 = j["points"][2]["report"]["roofline"];
  EXPECT_DOUBLE_EQ(roofs_2["peak_flops"].get<double>(), 2 * roofs_1["peak_flops"].get<double>());
  EXPECT_EQ(roofs_1["hbm_bytes_per_second"], roofs_2["hbm_bytes_per_second"]);
  // The vector units' roof does not move with the MXU count.
  EXPECT_EQ(roofs_1["peak_vector_flops"], roofs_2["peak_vector_flops"]);
  EXPECT_GT(roofs_1["peak_vector_flops"].get<double>(), 0);
  double matmul_flops = 0;
  int big_all_reduces = 0;
  std::map<std::string, int> units;
  for (const auto& op : j["points"][0]["report"]["ops"]) {
    if (op["op"] == "matmul") {
      matmul_flops += op["flops"].get<double>();
      EXPECT_EQ(op["unit"], "mxu") << op["label"];
      EXPECT_EQ(op["mxu_flops"], op["flops"]) << op["label"];  // both per step
    }
    // A gradient's all-reduce over the 8 replicas: each core sends 2 x 7/8 of the gradient and
    // reads and writes it once in HBM, and rates against no roof of this chart.
    if (op["op"] == "cross_replica_sum" && op["ici_bytes"].get<double>() > 1e5) {
      ++big_all_reduces;
      EXPECT_EQ(op["unit"], "ici") << op["label"];
      EXPECT_EQ(op["bound"], "interconnect") << op["label"];
      EXPECT_NEAR(op["ici_bytes"].get<double>() / op["hbm_bytes"].get<double>(), 7.0 / 8, 1e-3)
          << op["label"];
    }
    ++units[op["unit"].get<std::string>()];
  }
  EXPECT_GT(matmul_flops, 0);
  EXPECT_GT(units["vector"], 0);  // relu, the loss, the optimizer
  EXPECT_GT(units["none"], 0);    // infeed, transposes
  EXPECT_GT(units["ici"], 0);     // the gradients' all-reduces
  EXPECT_GT(big_all_reduces, 0);
  if (std::filesystem::exists("/usr/bin/gnuplot")) {
    std::ifstream dat(out + "/plots/roofline_0.dat");
    std::string header, first;
    std::getline(dat, header);
    std::getline(dat, first);
    EXPECT_THAT(header, HasSubstr("MXU ops: FLOP/byte"));
    EXPECT_FALSE(first.empty());
    std::stringstream rest;
    rest << dat.rdbuf();
    EXPECT_THAT(rest.str(), HasSubstr("\n\n# vector unit ops: FLOP/byte"));
  }
}

// Usage errors, each before anything runs.
void expect_usage_errors(const std::string& out) {
  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"sweep", "--out", out, "--", "train"},
           {"sweep", "--set", "chip.core.mxu_count=1", "--", "train"},
           {"sweep", "--set", "chip.core.mxu_count=1", "--out", out},
           {"sweep", "--set", "chip.core.mxu_count=0", "--out", out, "--", "train"},
           {"sweep", "--set", "chip.core.warp=1", "--out", out, "--", "train"},
           {"sweep", "--set", "iterations_per_loop=1,2", "--out", out, "--", "train",
            "--iterations-per-loop", "5"},
           {"sweep", "--set", "batch_size=", "--out", out, "--", "train"},
           {"sweep", "--set", "batch_size=1", "--out", out, "--", "train", "--report", "x"}}) {
    const auto r = run_tpusim(bad);
    EXPECT_EQ(r.exit_code, 2) << bad[2] << ": " << r.err;
  }
  EXPECT_THAT(run_tpusim({"sweep", "--set", "chip.core.warp=1", "--out", out, "--", "train"}).err,
              HasSubstr("CoreConfig has no field 'warp'"));
}

// A sweep over a config field and a run option: a process per point, a CSV row per point
// (failed points kept, with their exit code), each point's config written out, and plots when
// gnuplot is installed (make deps installs it).
TEST(Cli, SweepRunsEveryPointAndWritesTheTableAndPlots) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-sweep-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  const std::string out = (tmp / "out").string();
  // Global batch 100 does not divide over the 8 cores: those two points fail.
  const std::vector<std::string> job = {"train",
                                        "--model",
                                        "mlp",
                                        "--data",
                                        (tmp / "data").string(),
                                        "--train-steps",
                                        "4",
                                        "--iterations-per-loop",
                                        "2",
                                        "--timing-only",
                                        "--host-timing",
                                        "config"};
  std::vector<std::string> sweep = {"sweep",
                                    "--set",
                                    "chip.core.mxu_count=1,2",
                                    "--set",
                                    "batch_size=256,100",
                                    "--out",
                                    out,
                                    "-j",
                                    "2",
                                    "--"};
  sweep.insert(sweep.end(), job.begin(), job.end());
  auto r = run_tpusim(sweep);
  const auto sweep_run = r;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("2 point(s) failed"));
  expect_the_sweep_table(out);
  std::ifstream json_in(out + "/sweep.json");
  auto j = nlohmann::json::parse(json_in);
  EXPECT_EQ(j["points"].size(), 4u);
  EXPECT_EQ(j["axes"][0]["kind"], "config");
  EXPECT_EQ(j["axes"][1]["kind"], "run_option");
  EXPECT_GT(j["points"][2]["report"]["sim_seconds_per_step"].get<double>(), 0);
  // With the host config's costs the point's timing repeats exactly in a run of its own.
  const std::string again = (tmp / "again.json").string();
  std::vector<std::string> alone = job;
  alone.insert(alone.end(), {"--batch-size", "256", "--config", out + "/configs/p002.pbtxt",
                             "--model-dir", (tmp / "again").string(), "--report", again});
  r = run_tpusim(alone);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream again_in(again);
  EXPECT_EQ(nlohmann::json::parse(again_in)["sim_seconds_per_step"],
            j["points"][2]["report"]["sim_seconds_per_step"]);
  EXPECT_EQ(run_tpusim({"train", "--host-timing", "guessed"}).exit_code, 2);
  r = run_tpusim({"config", "show", out + "/configs/p002.pbtxt", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["mxus_per_core"], 2);
  // The host pipeline (charged from the host config) bounds every point: the table says so, and
  // the metric plot draws the step time in ms from zero with each series' compute beside it.
  EXPECT_THAT(sweep_run.out, HasSubstr("every point is input-bound (analysis.classification): the "
                                       "host's input pipeline sets the step time; compute per "
                                       "step goes from "));
  expect_the_plots(out);
  expect_the_op_profiles(j, out);
  expect_usage_errors(out);
  std::filesystem::remove_all(tmp);
}

// A first axis whose values span a factor of 16 or more is drawn on a log2 axis (VMEM 1 and 16
// MiB); a sweep whose every point fails writes its table, says how many failed and draws no
// metric plot, rather than reporting gnuplot's complaint about empty data.
TEST(Cli, SweepDrawsGeometricValuesOnALogAxisAndNoPlotOfNothing) {
  if (!std::filesystem::exists("/usr/bin/gnuplot")) GTEST_SKIP() << "gnuplot is not installed";
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-sweep-log-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  const std::vector<std::string> job = {"--",
                                        "train",
                                        "--model",
                                        "mlp",
                                        "--data",
                                        (tmp / "data").string(),
                                        "--train-steps",
                                        "1",
                                        "--iterations-per-loop",
                                        "1",
                                        "--timing-only",
                                        "--host-timing",
                                        "config"};
  auto sweep = [&](const std::string& set, const std::string& out) {
    std::vector<std::string> args = {"sweep", "--set", set, "--out", (tmp / out).string()};
    args.insert(args.end(), job.begin(), job.end());
    return run_tpusim(args);
  };
  auto r = sweep("chip.core.vmem_mib=1,16", "vmem");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream gp(tmp / "vmem" / "plots" / "metric.gp");
  std::stringstream script;
  script << gp.rdbuf();
  EXPECT_THAT(script.str(), HasSubstr("set logscale x 2"));
  // 10 MiB of HBM holds none of mlp's steps.
  r = sweep("chip.hbm.capacity_gib=0.01", "full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("1 point(s) failed"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("gnuplot")));
  EXPECT_THAT(r.out, HasSubstr("plots: none (no point reported a figure to draw)"));
  EXPECT_TRUE(std::filesystem::exists(tmp / "full" / "sweep.csv"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "full" / "plots" / "metric.png"));
  std::filesystem::remove_all(tmp);
}

// sweep runs compare at each point: the table and CSV carry each point's verdict and its
// max_loss_difference (the default metric). One step of mlp agrees exactly; three steps differ
// by 1.93e-05 in loss, over 1e-05 with the baseline's share turned off (--noise-factor 0): that
// point keeps its figures, counts as differing, not failed, and the sweep exits 1. (The cpu
// backend's sums are cut the same on every host since fix_gemm_blocking; before, this step's
// difference was 2.55e-05 on one machine and 0 on another.)
TEST(Cli, SweepRunsCompareAndKeepsTheVerdicts) {
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-sweep-cmp-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  const std::string out = (tmp / "out").string();
  auto r = run_tpusim({"sweep", "--set", "steps=1,3", "--out", out, "--", "compare", "--model",
                       "mlp", "--noise-factor", "0", "--data", (tmp / "data").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("p000 steps=1: done, agree"));
  EXPECT_THAT(r.err, HasSubstr("p001 steps=3: done, DIFFER"));
  EXPECT_THAT(r.err, HasSubstr("at 1 point(s) the backends differ"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("failed")));
  EXPECT_THAT(r.out, HasSubstr("max_loss_difference  verdict"));
  EXPECT_THAT(r.out, ::testing::MatchesRegex("(.|\n)*p000   steps=1 +0  agree\n(.|\n)*"
                                             "p001   steps=3 +1\\.93[0-9]*e-05  differ\n(.|\n)*"));
  std::ifstream csv(out + "/sweep.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(
      header.rfind("point,steps,exit_code,model,dtype_policy,steps,batch_size,reference,verdict,"
                   "max_loss_difference,",
                   0),
      0u)
      << header;
  EXPECT_TRUE(std::filesystem::exists(out + "/reports/p001.json"));
  // Run again into the same DIR: each point is redone (its old runs and report removed first).
  const std::string first_out = r.out;
  r = run_tpusim({"sweep", "--set", "steps=1,3", "--out", out, "--", "compare", "--model", "mlp",
                  "--noise-factor", "0", "--data", (tmp / "data").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("p000 steps=1: done, agree"));
  EXPECT_THAT(r.err, HasSubstr("p001 steps=3: done, DIFFER"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("FAILED")));
  EXPECT_EQ(r.out, first_out);
  // compare's --model-dir must be new: it trains every backend from the start.
  r = run_tpusim({"compare", "--model-dir", out, "--steps", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("is not empty (compare trains every backend from the start)"));
  std::filesystem::remove_all(tmp);
}

}  // namespace cli_sweep_test
}  // namespace tpusim::cli
