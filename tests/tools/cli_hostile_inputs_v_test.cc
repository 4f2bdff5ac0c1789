// What the fifth hostile probe (2026-12-03) found, each now a clean refusal or an answer:
// `predict --saved-model` past the end of its test set (SIGSEGV); an `opcheck --ops` pattern of
// 100,000 terms (SIGSEGV in the regex compiler) or one matching no op (a check of nothing that
// passed); names that are not UTF-8 in `layers --json` and a `--report` ("internal error" after
// the run); standard output that cannot be written (exit 0); the profile's and evaluation's
// folders inside model_dir tried only after the run.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/tools/cli_runner.h"
#include "tests/tools/hostile_inputs.h"

namespace tpusim::cli {
namespace cli_hostile_inputs_v_test {

using ::testing::HasSubstr;
using testing::refusal;
using testing::run_tpusim;
using testing::write_file;

std::filesystem::path scratch(const std::string& name) {
  return testing::hostile_scratch("v-" + name);
}

// A saved model asked for 65 predictions of a test set of 64 read past its examples: "internal
// error: map::at" there, SIGSEGV past the 10,000 of Fashion-MNIST's. It predicts the set, as the
// zoo's and ONNX models' paths do.
TEST(HostileInputs5, ASavedModelPredictsAtMostItsTestSet) {
  const auto dir = scratch("saved-count");
  testing::write_mnist_records(dir, 64, 28 * 28, [](int i) { return i % 10; });
  auto r = run_tpusim({"train", "--model", "mlp", "--backend", "cpu", "--data", dir.string(),
                       "--batch-size", "64", "--train-steps", "2", "--iterations-per-loop", "2",
                       "--eval-steps", "1", "--model-dir", (dir / "md").string(), "--export-dir",
                       (dir / "sm").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_tpusim({"predict", "--saved-model", (dir / "sm").string(), "--backend", "cpu", "--data",
                  dir.string(), "--count", "65", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"label\": 3"));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '{'), 64);
  std::filesystem::remove_all(dir);
}

// libstdc++ compiles a regex by recursion: 100,000 terms overflowed the stack. And a pattern
// that selects no op (a comma list where a regex is wanted) checked nothing and passed.
TEST(HostileInputs5, AnOpsPatternPastItsBoundOrMatchingNothingIsRefused) {
  EXPECT_THAT(refusal({"opcheck", "--ops", std::string(100000, 'a') + "*"}),
              HasSubstr("--ops is 100001 bytes; a pattern over op names may be 1000 at most"));
  EXPECT_THAT(refusal({"opcheck", "--ops", "matmul,conv2d"}),
              HasSubstr("--ops 'matmul,conv2d' matches none of the "));
}

// JSON out of names that are not UTF-8 (a layer's, a model_dir's) failed with the JSON library's
// "internal error" (after the whole run, for a report); they print as U+FFFD as the rest of the
// CLI's JSON does.
TEST(HostileInputs5, NamesThatAreNotUtf8PrintAsReplacementCharacters) {
  const auto dir = scratch("utf8");
  write_file(dir / "t.csv",
             "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num "
             "Filter, Strides,\n\xff\xfe,8,8,3,3,4,4,1,\n");
  auto r = run_tpusim({"layers", "--topology", (dir / "t.csv").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"\xef\xbf\xbd\xef\xbf\xbd\""));
  const std::string model_dir = (dir / "md\xff").string();
  r = run_tpusim({"train", "--model", "mlp", "--train-steps", "1", "--iterations-per-loop", "1",
                  "--input", "synthetic", "--timing-only", "--model-dir", model_dir, "--report",
                  (dir / "r.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "r.json"));
  std::filesystem::remove_all(dir);
}

// `tpusim config list > /dev/full` lost its answer and exited 0.
TEST(HostileInputs5, StandardOutputThatCannotBeWrittenFailsTheCommand) {
  const auto r = testing::run_program(
      "/bin/sh", {"-c", "exec '" + testing::tpusim_path() + "' config list > /dev/full"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tpusim config: cannot write standard output (No space left on "
                               "device); what the command printed is lost"));
}

// A model_dir whose plugins (or eval) is a file failed after the whole run; it is tried first.
TEST(HostileInputs5, TheProfilesAndEvaluationsFoldersAreTriedBeforeTheRun) {
  const auto dir = scratch("folders");
  write_file(dir / "plugins", "");
  const std::vector<std::string> train = {
      "train", "--model", "mlp",       "--train-steps", "1",           "--iterations-per-loop",
      "1",     "--input", "synthetic", "--timing-only", "--model-dir", dir.string()};
  std::vector<std::string> args = train;
  args.push_back("--profile");
  EXPECT_THAT(refusal(args), HasSubstr("--profile " + (dir / "plugins" / "profile").string() +
                                       ": cannot create it: Not a directory"));
  write_file(dir / "eval", "");
  args = train;
  args.insert(args.end(), {"--eval-steps", "1"});
  EXPECT_THAT(refusal(args), HasSubstr("--eval-steps " + (dir / "eval").string() +
                                       ": cannot create it: Not a directory"));
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().rfind("model.ckpt", 0), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace cli_hostile_inputs_v_test
}  // namespace tpusim::cli
