// The CLI's pure parts (tpusim::cli, no process): the progress bar's text, the sweep's grid and
// its CSV.

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/studies/farm_messages.h"
#include "tools/studies/sweep_grid.h"
#include "tools/studies/sweep_table.h"
#include "tools/tpusim/progress_bar.h"
#include "tools/tpusim/thread_environment.h"

namespace tpusim::cli {
namespace cli_parts_test {
using studies::describe_point;
using studies::FarmJob;
using studies::parse_sweep_axis;
using studies::report_columns;
using studies::row_number;
using studies::run_option_flag;
using studies::set_report;
using studies::sweep_csv;
using studies::sweep_points;
using studies::SweepRow;

using ::testing::HasSubstr;

TEST(ProgressBar, RendersTheFractionTheCountAndTheEta) {
  EXPECT_EQ(ProgressBar::render(0, 200, 0, 10), "[..........] 0/200 steps");
  EXPECT_EQ(ProgressBar::render(100, 200, 0.5, 10),
            "[#####.....] 100/200 steps  0.50 steps/s  ETA 3:20");
  EXPECT_EQ(ProgressBar::render(200, 200, 2, 10),
            "[##########] 200/200 steps  2.00 steps/s  ETA 0:00");
  // Resumed past the target (a model_dir already there) stays full.
  EXPECT_EQ(ProgressBar::render(250, 200, 0, 4), "[####] 250/200 steps");
}

TEST(ProgressBar, LogLinesPrintAboveTheBar) {
  std::ostringstream out;
  ProgressBar bar(out, 4);
  bar.line("first");  // no bar yet: the line alone
  bar.update(1, 4);
  bar.line("saved");
  bar.finish();
  EXPECT_EQ(out.str(),
            "\r\033[Kfirst\n"
            "\r\033[K[#...] 1/4 steps"
            "\r\033[Ksaved\n\r\033[K[#...] 1/4 steps"
            "\n");
}

TEST(SweepGrid, EveryCombinationLastAxisFastest) {
  auto a = parse_sweep_axis("chip.core.mxu_count=1,2");
  auto b = parse_sweep_axis("iterations_per_loop=10,50,100");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->config);
  EXPECT_FALSE(b->config);
  const auto points = sweep_points({*a, *b});
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].id, "p000");
  EXPECT_EQ(points[1].values, (std::vector<std::string>{"1", "50"}));
  EXPECT_EQ(points[5].values, (std::vector<std::string>{"2", "100"}));
  EXPECT_EQ(describe_point({*a, *b}, points[4]), "chip.core.mxu_count=2 iterations_per_loop=50");
  EXPECT_EQ(run_option_flag("iterations_per_loop"), "--iterations-per-loop");
}

TEST(SweepGrid, BadSpecsAreNamed) {
  for (const char* bad :
       {"mxu", "=1,2", "batch_size=", "batch_size=1,,2", "batch_size=1,", "bad field=1"}) {
    auto axis = parse_sweep_axis(bad);
    EXPECT_FALSE(axis.ok()) << bad;
    if (!axis.ok()) {
      EXPECT_THAT(std::string(axis.status().message()), HasSubstr(bad));
    }
  }
}

TEST(SweepTable, FlattensReportsIntoColumnsAndKeepsFailedPoints) {
  auto axis = parse_sweep_axis("batch_size=256,100");
  ASSERT_TRUE(axis.ok());
  const auto points = sweep_points({*axis});
  std::vector<SweepRow> rows(2);
  rows[0].point = points[0];
  set_report(
      &rows[0],
      nlohmann::ordered_json::parse(
          R"({"model": "mlp, small", "sim_seconds_per_step": 0.5, "analysis": {"step_seconds": 0.5,
          "step_breakdown": {"compute": 0.4, "idle": 0.1}, "advice": ["a"]}})"));
  rows[1].point = points[1];
  rows[1].exit_code = 1;
  EXPECT_EQ(report_columns(rows),
            (std::vector<std::string>{"model", "sim_seconds_per_step", "analysis.step_seconds",
                                      "analysis.step_breakdown.compute",
                                      "analysis.step_breakdown.idle"}));
  EXPECT_EQ(sweep_csv({*axis}, rows),
            "point,batch_size,exit_code,model,sim_seconds_per_step,analysis.step_seconds,"
            "analysis.step_breakdown.compute,analysis.step_breakdown.idle\n"
            "p000,256,0,\"mlp, small\",0.5,0.5,0.4,0.1\n"
            "p001,100,1,,,,,\n");
  EXPECT_DOUBLE_EQ(row_number(rows[0], "analysis.step_breakdown.compute"), 0.4);
  EXPECT_TRUE(std::isnan(row_number(rows[1], "sim_seconds_per_step")));
  EXPECT_TRUE(std::isnan(row_number(rows[0], "model")));
}

// The messages a study's ranks send each other: a round trip keeps every byte (a log need not be
// UTF-8), and bytes that are no farm message are refused, not thrown. fuzz_cli_values found a
// CBOR array header declaring 11 x 10^18 elements, on which nlohmann's from_cbor throws even when
// told not to, then arrays nested deep enough to overflow the stack; both inputs are its seeds.
// OMP_NUM_THREADS: a team size per nesting level, each 1..1024; 65536 crashed libgomp.
TEST(ThreadEnvironment, OmpNumThreadsIsACommaListOfTeamsUpToTheFlagsBound) {
  for (const char* ok : {"1", "2", "1024", "4,2", "8,1,1"})
    EXPECT_TRUE(check_omp_num_threads(ok).ok()) << ok;
  EXPECT_TRUE(check_omp_num_threads(nullptr).ok());
  EXPECT_THAT(std::string(check_omp_num_threads("65536").message()),
              ::testing::HasSubstr("OMP_NUM_THREADS=65536: each team size (a comma list, one per "
                                   "nesting level) is a whole number 1..1024, not '65536'"));
  for (const char* bad :
       {"0", "-4", "", "4,", ",4", "4,65536", "four", "2.5", "99999999999999999999"})
    EXPECT_FALSE(check_omp_num_threads(bad).ok()) << bad;
}

TEST(FarmMessages, RoundTripAndRefuseWhatIsNoMessage) {
  using namespace std::string_literals;
  FarmJob job;
  job.id = "p003";
  job.args = {"train", "--model", "mlp"};
  job.log = "/s/logs/p003.log";
  job.report = "/s/reports/p003.json";
  job.run_dir = "/s/runs/p003";
  job.inputs = {{"/s/configs/p003.pbtxt", "name: \"\xff\xfe\""s}};
  auto task = studies::farm::decode_task(studies::farm::encode_task(3, job, "/s/.farm-h-1"));
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->index, 3u);
  EXPECT_EQ(task->job.args, job.args);
  EXPECT_EQ(task->job.inputs, job.inputs);
  EXPECT_EQ(task->marker, "/s/.farm-h-1");
  studies::farm::Result result;
  result.index = 3;
  result.exit_code = 137;
  result.log = "\x80 not utf-8\n"s;
  auto back = studies::farm::decode_result(studies::farm::encode_result(result));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->exit_code, 137);
  EXPECT_EQ(back->log, result.log);
  // An array of 11 x 10^18 elements declared in 9 bytes, inside an object.
  const std::string huge = "\xa6\x65index\x9b\x9b\x9b\x9b\x9b\x9b\x9b\x9b\x9b"s;
  // fuzz_cli_values' second find: arrays of one element nested 100,000 deep overflowed the stack
  // of nlohmann's recursive CBOR reader.
  const std::string nested = "\xa1\x65index"s + std::string(100000, '\x81') + "\x00"s;
  EXPECT_THAT(std::string(studies::farm::decode_task(nested).status().message()),
              ::testing::HasSubstr("nests past 16 levels"));
  for (const std::string& bad : {huge, nested, std::string("not cbor"), std::string()}) {
    auto t = studies::farm::decode_task(bad);
    EXPECT_FALSE(t.ok());
    EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("message of"));
    EXPECT_FALSE(studies::farm::decode_result(bad).ok());
  }
}

}  // namespace cli_parts_test
}  // namespace tpusim::cli
