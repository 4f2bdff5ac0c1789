// `tpusim validate`: the published cases, each run in a process of its own, and --set's edits of
// their slices.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_validate_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

// tpusim validate --list: every published case with its measured figure, none pending now that
// bert_large is in the zoo; an unknown case is a usage error naming the cases.
TEST(Cli, ValidateListsThePublishedCases) {
  auto r = run_tpusim({"validate", "--list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json cases = nlohmann::json::parse(r.out);
  ASSERT_GE(cases.size(), 8u);
  EXPECT_EQ(cases[1]["name"], "resnet50-v3-8");
  EXPECT_EQ(cases[1]["measured_examples_per_second"], 7459.0);
  EXPECT_TRUE(cases[1]["pending"].is_null());
  EXPECT_FALSE(cases[1].contains("predicted_step_seconds"));
  EXPECT_EQ(cases[2]["measured_examples_per_second"], 31226.0);
  EXPECT_EQ(cases[6]["name"], "bert_large-512-v3-32");
  // BERT's logs give the step: 460 ms at 448 sequences.
  EXPECT_DOUBLE_EQ(cases[6]["measured_step_seconds"].get<double>(), 0.460);
  for (const auto& c : cases) EXPECT_FALSE(c["measured_examples_per_second"].is_null()) << c;
  EXPECT_TRUE(cases[6]["pending"].is_null());
  auto bad = run_tpusim({"validate", "--case", "resnet51-v3-8"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("no validation case 'resnet51-v3-8' (cases: resnet50-v2-8"));
}

// --jobs is a count from 1 to 256.
TEST(Cli, ValidateRefusesAJobCountOutOfRange) {
  for (const char* bad : {"0", "257"}) {
    auto r = run_tpusim({"validate", "--jobs", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--jobs must be from 1 to 256")) << r.err;
  }
}

// --set takes one slice config field and one value; a run option, a list of values or an unknown
// field is a usage error naming it.
TEST(Cli, ValidateRefusesEditsThatAreNotOneConfigValue) {
  for (const char* bad :
       {"iterations_per_loop=5", "chip.hbm.capacity_gib=1,2", "chip.hbm.no_such_field=3"}) {
    auto r = run_tpusim({"validate", "--case", "bert_large-512-v3-32", "--set", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(std::string(bad).substr(0, 10))) << r.err;
  }
}

// Several cases run each in a process of its own (SystemC elaborates one slice per process), -j
// at once, each with a log of its own (a case named twice too); a case that fails is reported
// with its reason, the refusal naming both sizes, and the run exits 1.
TEST(Cli, ValidateRunsEachCaseInItsOwnProcessAndReportsWhyOneFailed) {
  const std::string report =
      (std::filesystem::temp_directory_path() / "validate_bert.json").string();
  // On a v3 chip with 8 GiB of HBM (4 GiB a core), BERT-Large's LAMB state alone does not fit:
  // each child process refuses the step at once, and the edit reaches it.
  auto r =
      run_tpusim({"validate", "--case", "bert_large-512-v3-32", "--case", "bert_large-512-v3-32",
                  "--set", "chip.hbm.capacity_gib=8", "-j", "2", "--report", report});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("-bert_large-512-v3-32.log)"));
  const std::regex log_line("validate: bert_large-512-v3-32 \\(log: (\\S+)\\)");
  std::vector<std::string> logs;
  for (std::sregex_iterator m(r.err.begin(), r.err.end(), log_line), end; m != end; ++m)
    logs.push_back((*m)[1].str());
  ASSERT_EQ(logs.size(), 2u) << r.err;
  EXPECT_NE(logs[0], logs[1]);
  for (const std::string& log : logs) EXPECT_TRUE(std::filesystem::exists(log)) << log;
  EXPECT_THAT(r.err, HasSubstr("validate: bert_large-512-v3-32 ended, "));
  EXPECT_THAT(r.out, HasSubstr("failed: tpusim backend: the step's tensors need"));
  std::ifstream in(report);
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) {
    EXPECT_THAT(c["error"].get<std::string>(), HasSubstr("a core has 4294967296"));
    EXPECT_FALSE(c.contains("predicted_step_seconds"));
  }
  std::filesystem::remove(report);
}

}  // namespace cli_validate_test
}  // namespace tpusim::cli
