// What the fourth hostile probe (2026-12-03) found, each now a clean refusal or an answer: a
// model whose outputs are not numbers (a training run that diverged) predicted a class past its
// probabilities and `predict` read past them (SIGSEGV on the tpusim backend); a saved model that
// predicts a class without probabilities stopped with a JSON type error; validate's --steps
// wrapped at 2^32; a resumed sweep's report or table that is a folder; a report written to a
// full disk; an all-reduce's values past the host's memory budget; outputs whose destination
// fails, tried only after the run; records far larger than their pipeline's, held by the
// thousand before the first was parsed.
#include <filesystem>
#include <fstream>
#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "estimator/saved_model.pb.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/hostile_inputs.h"
#include "tests/under_sanitizer.h"

namespace tpusim::cli {
namespace cli_hostile_inputs_iv_test {

using ::testing::HasSubstr;
using testing::refusal;
using testing::run_tpusim;
using testing::write_file;

std::filesystem::path scratch(const std::string& name) {
  return testing::hostile_scratch("iv-" + name);
}

// An SGD rate of 1e30 sends the mlp's weights past float: its logits, and so its probabilities,
// are NaN, and their argmax named no class (2^31 - 1 on the tpusim backend, before its argmax took
// the first NaN as XLA's does). Predicting read the probability at that index; now the example is
// named and the NaN said, on both backends.
TEST(HostileInputs4, APredictionOfOutputsThatAreNotNumbersIsRefusedByExample) {
  const auto dir = scratch("diverged");
  testing::write_mnist_records(dir, 64, 28 * 28, [](int i) { return i % 10; });
  const std::string model_dir = (dir / "run").string();
  auto r = run_tpusim(
      {"train",      "--model",      "mlp",    "--backend",       "cpu",  "--data",
       dir.string(), "--batch-size", "64",     "--train-steps",   "2",    "--iterations-per-loop",
       "1",          "--eval-steps", "1",      "--learning-rate", "1e30", "--optimizer",
       "sgd",        "--model-dir",  model_dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* backend : {"tpusim", "cpu"}) {
    EXPECT_THAT(refusal({"predict", "--model-dir", model_dir, "--model", "mlp", "--data",
                         dir.string(), "--count", "4", "--backend", backend}),
                HasSubstr("example 0: the model's 10 probabilities are NaN (the model's outputs "
                          "are not numbers, as after a training run that diverged); its class, 0, "
                          "is the argmax of NaN"));
  }
  std::filesystem::remove_all(dir);
}

// Trains the mlp for 2 steps on the cpu backend and exports it into `dir`/export; then `edit`
// changes its saved_model.pb. The export's folder.
std::string edited_export(const std::filesystem::path& dir,
                          const std::function<void(estimator::SavedModel*)>& edit) {
  const std::string model_dir = (dir / "run").string(), export_dir = (dir / "export").string();
  auto r = run_tpusim({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "2",
                       "--iterations-per-loop", "1", "--model-dir", model_dir, "--export-dir",
                       export_dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string pb = export_dir + "/saved_model.pb";
  estimator::SavedModel model;
  {
    std::ifstream in(pb, std::ios::binary);
    EXPECT_TRUE(model.ParseFromIstream(&in));
  }
  edit(&model);
  std::ofstream out(pb, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(model.SerializeToOstream(&out));
  return export_dir;
}

// A saved model whose predictions are its class alone is a user's model: each example's values
// are printed by name (it stopped with "internal error: [json.exception.type_error.302]").
TEST(HostileInputs4, ASavedModelPredictingOnlyAClassPrintsItsValues) {
  const auto dir = scratch("only-class");
  const std::string export_dir = edited_export(dir, [](estimator::SavedModel* m) {
    m->clear_predictions();
    m->add_predictions("class");
  });
  auto r = run_tpusim({"predict", "--saved-model", export_dir, "--backend", "cpu", "--count", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("    0  \\{\"class\":[0-9],\"label\":[0-9]\\}\n"
                                             "    1  \\{\"class\":[0-9],\"label\":[0-9]\\}\n"));
  std::filesystem::remove_all(dir);
}

// A batch_size that is not the graph's was said with the signature's and the graph's shapes,
// equal: the batch and the shape are now said apart.
TEST(HostileInputs4, ASavedModelsBatchThatIsNotItsGraphsIsNamed) {
  const auto dir = scratch("batch");
  const std::string export_dir =
      edited_export(dir, [](estimator::SavedModel* m) { m->set_batch_size(3); });
  EXPECT_THAT(refusal({"predict", "--saved-model", export_dir, "--backend", "cpu"}),
              HasSubstr("saved_model.pb: input 'image' is [128, 28, 28, 1], whose first "
                        "dimension is not the saved model's batch_size, 3"));
  std::filesystem::remove_all(dir);
}

// validate's --steps was narrowed to 32 bits: 2^32 + 2^31 ran as a loop of 2^31 steps.
TEST(HostileInputs4, AValidationLoopPastIterationsPerLoopsRangeIsRefused) {
  auto r = run_tpusim({"validate", "--case", "resnet50-v2-8", "--steps", "6442450944"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--steps must be from 1 to 4294967295 (the steps of one loop)"));
}

// A resumed sweep whose point report is a folder stopped with "internal error: basic_filebuf";
// one whose table is a folder printed "table: .../sweep.csv" and exited 0 without writing it.
TEST(HostileInputs4, ASweepsReportsAndTablesThatAreNoFilesAreNamed) {
  const auto dir = scratch("sweep");
  const std::string out = (dir / "sw").string();
  auto r = run_tpusim({"sweep", "--set", "m=128,256", "--out", out, "--", "matmul", "--k", "128",
                       "--n", "128", "--timing-only"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::remove(dir / "sw" / "reports" / "p001.json");
  std::filesystem::create_directory(dir / "sw" / "reports" / "p001.json");
  r = run_tpusim({"sweep", "--resume", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tpusim sweep: point report " + out +
                               "/reports/p001.json is a directory, not a regular file"));
  std::filesystem::remove(dir / "sw" / "sweep.csv");
  std::filesystem::create_directory(dir / "sw" / "sweep.csv");
  r = run_tpusim({"sweep", "--resume", out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot write " + out + "/sweep.csv"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("table: ")));
  std::filesystem::remove_all(dir);
}

// A report small enough to sit in its stream's buffer failed only when the stream closed, after
// the check: `train --report /dev/full` exited 0 with the report lost.
TEST(HostileInputs4, AReportThatCannotBeWrittenIsNamed) {
  const auto dir = scratch("report");
  auto r = run_tpusim({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1",
                       "--iterations-per-loop", "1", "--model-dir", (dir / "run").string(),
                       "--report", "/dev/full"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.err, HasSubstr("cannot write the report to /dev/full"));
  std::filesystem::remove_all(dir);
}

// `allreduce --bytes 256MiB`, the size its --help shows, under a 4 GB address-space limit grew to
// 3.95 GB in 9-11 s and failed inside SystemC with std::bad_alloc, naming no flag: its values'
// memory was held against a fixed 8 GiB, not the host's budget, and counted a third of it.
TEST(HostileInputs4, AnAllReduceWhoseValuesDoNotFitTheBudgetIsRefusedFirst) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "an address-space limit under ASan";
  EXPECT_THAT(refusal({"allreduce", "--bytes", "256MiB"}, 4 * testing::kGiB),
              HasSubstr("--bytes 268435456: computing the values of 268435456 bytes on each of 8 "
                        "cores (in, out and the interconnect's chunks in the simulated HBM, and "
                        "the host's copies) needs 9.93 GB, over this host's memory budget of"));
}

// --report and --export-dir were first tried after the run they end: a report under /proc, or
// an export there, failed after the whole run. Both are tried first now (a report's folder is
// made, as the run makes its model_dir).
TEST(HostileInputs4, OutputDestinationsAreTriedBeforeTheRun) {
  const auto dir = scratch("destinations");
  const std::vector<std::string> train = {"train",
                                          "--model",
                                          "mlp",
                                          "--backend",
                                          "cpu",
                                          "--train-steps",
                                          "1",
                                          "--iterations-per-loop",
                                          "1",
                                          "--model-dir",
                                          (dir / "run").string()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = train;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tpusim(args);
  };
  auto r = with({"--report", "/proc/no/such/r.json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--report /proc/no/such/r.json: cannot create its folder "
                               "/proc/no/such: "));
  EXPECT_FALSE(std::filesystem::exists(dir / "run"));  // refused before the run made its folder
  r = with({"--report", "/proc/r.json"});
  EXPECT_THAT(r.err, HasSubstr("--report /proc/r.json: cannot write it: "));
  r = with({"--report", dir.string()});
  EXPECT_THAT(r.err, HasSubstr(": cannot write it: Is a directory"));
  r = with({"--export-dir", "/proc/tpusim-export"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--export-dir /proc/tpusim-export: cannot create it:"));
  // A report that is there is appended to by the check, not cut: the run then writes it whole.
  write_file(dir / "old.json", "{}");
  r = with({"--report", (dir / "old.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::remove_all(dir);
}

// Records of 1 MB images filled the shuffle buffer (10,000 records) before the first was parsed:
// 1,024 of them took 4 s and 1.09 GB before the refusal, 2,100 of 2 MB 17 s and 3.8 GB. A raw
// record is bounded by what it can hold, as it is read.
TEST(HostileInputs4, ARecordFarLargerThanItsPipelinesIsRefusedAsItIsRead) {
  const auto dir = scratch("big-records");
  testing::write_mnist_records(dir, 8, 1 << 20, [](int i) { return i % 10; });
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--backend", "cpu", "--data", dir.string(),
                       "--train-steps", "1", "--iterations-per-loop", "1", "--model-dir",
                       (dir / "run").string()}),
              HasSubstr("train-00000-of-00001.tfrecord: corrupt record at byte offset 0: a "
                        "record of 1048623 bytes, where an MNIST-family record (a 28x28 image of "
                        "bytes and its label) is at most 1808"));
  std::filesystem::remove_all(dir);
}

// A config of 4,096 v4 chips (16x16x16, the largest shape a config may declare) under a 1 GiB
// address-space limit was refused for its thread stacks only once elaborated: 4.8 s and 600 MB
// of modules first. Its stacks are counted from the config before anything is built.
TEST(HostileInputs4, ASliceTooLargeForItsStacksIsRefusedBeforeItIsBuilt) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "an address-space limit under ASan";
  const auto dir = scratch("pod");
  write_file(dir / "big.pbtxt",
             "name: \"v4-8192\"\nchip_file: \"tpu_v4.pbtxt\"\n"
             "topology { shape: 16 shape: 16 shape: 16 kind: TORUS }\n"
             "chips_per_host: 4\nhost_file: \"host_240.pbtxt\"\n");
  // 4,096 chips x (2 cores x (4 DMA + 4 MXU + 4 units + sequencer) + 2 host-link threads),
  // 1,024 hosts' infeed threads, the collective engine.
  EXPECT_THAT(refusal({"allreduce", "--bytes", "4096", "--config", (dir / "big.pbtxt").string(),
                       "--timing-only"},
                      testing::kGiB),
              HasSubstr("slice v4-8192's 115713 SystemC thread processes map stacks of "
                        "266.24 kB each, 30.81 GB in all, over the"));
  std::filesystem::remove_all(dir);
}

}  // namespace cli_hostile_inputs_iv_test
}  // namespace tpusim::cli
