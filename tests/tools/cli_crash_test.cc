// Crash consistency: `tpusim train` killed with SIGKILL at 22 points (a checkpoint half written,
// written but not renamed, renamed before the index, indexed before old ones go; after summary
// events; between device loops) and then resumed: the newest complete checkpoint loads, the run
// ends bitwise where an uninterrupted one does, every event record still parses and no temporary
// file outlives the resumed run. A disk that fills up during a save (RLIMIT_FSIZE) is a clear
// error that leaves the previous checkpoint intact; a model_dir that cannot be written is
// refused before training. The kill points are common/fault_point.h's (TPUSIM_KILL_AT).
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "estimator/checkpoint.h"
#include "estimator/event.pb.h"
#include "runtime/data/tfrecord.h"
#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_crash_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

class CrashConsistency : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("tpusim-crash-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  // 8 steps of the mlp on the cpu, a checkpoint and summaries every 2-step loop.
  std::vector<std::string> train(const std::string& model_dir) const {
    return {"train",
            "--model",
            "mlp",
            "--backend",
            "cpu",
            "--train-steps",
            "8",
            "--iterations-per-loop",
            "2",
            "--batch-size",
            "128",
            "--eval-steps",
            "1",
            "--data",
            (root_ / "data").string(),
            "--model-dir",
            model_dir};
  }

  static std::string fingerprint(const std::string& model_dir) {
    auto latest = estimator::load_latest_checkpoint(model_dir);
    if (!latest.ok()) return std::string(latest.status().message());
    if (!latest->has_value()) return "no checkpoint";
    return str_of((*latest)->global_step) + " " +
           estimator::weights_fingerprint((*latest)->variables);
  }
  static std::string str_of(int64_t v) { return std::to_string(v); }

  // Kills a run at `point` (its `n`th pass), checks what the kill left, resumes and checks the
  // end against `reference`.
  void kill_and_resume(const std::string& point, int n, const std::string& reference) {
    const std::string where = point + ":" + std::to_string(n);
    const std::string dir = (root_ / ("kill-" + point + "-" + std::to_string(n))).string();
    const auto killed = run_tpusim(train(dir), "", {{"TPUSIM_KILL_AT", where}});
    ASSERT_EQ(killed.exit_code, -1) << where << " was never reached: " << killed.out;
    // Whatever the kill left, the newest complete checkpoint (if any) loads.
    auto latest = estimator::load_latest_checkpoint(dir);
    ASSERT_TRUE(latest.ok()) << where << ": " << latest.status();
    const auto resumed = run_tpusim(train(dir));
    ASSERT_EQ(resumed.exit_code, 0) << where << ": " << resumed.err;
    EXPECT_EQ(fingerprint(dir), reference) << where;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      EXPECT_NE(entry.path().extension(), ".tmp") << where << " left " << name;
      if (name.rfind("events.out.tfevents", 0) == 0) expect_events_parse(entry.path(), where);
    }
  }

  // Every record of an event file has its CRCs and parses as an Event: TensorBoard reads it.
  static void expect_events_parse(const std::filesystem::path& file, const std::string& where) {
    auto reader = runtime::data::TFRecordReader::open(file.string());
    ASSERT_TRUE(reader.ok()) << where << ": " << reader.status();
    std::string record;
    int events = 0;
    for (;;) {
      auto got = (*reader)->next(&record);
      ASSERT_TRUE(got.ok()) << where << ": " << file << ": " << got.status();
      if (!*got) break;
      tensorflow::Event e;
      EXPECT_TRUE(e.ParseFromString(record)) << where << ": " << file << " record " << events;
      ++events;
    }
    EXPECT_GT(events, 0) << where << ": " << file;
  }

  std::string reference() {
    const std::string dir = (root_ / "uninterrupted").string();
    const auto r = run_tpusim(train(dir));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return fingerprint(dir);
  }

  std::filesystem::path root_;
};

TEST_F(CrashConsistency, KilledWhileSavingCheckpointsTheRunResumesBitwise) {
  const std::string ref = reference();
  ASSERT_THAT(ref, ::testing::StartsWith("8 "));
  for (const char* point :
       {"checkpoint.partial", "checkpoint.written", "checkpoint.renamed", "checkpoint.indexed"}) {
    for (int n = 1; n <= 4; ++n) kill_and_resume(point, n, ref);
  }
}

// How many events the uninterrupted run appended, over all its event files.
int count_events(const std::filesystem::path& dir) {
  int events = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("events.out.tfevents", 0) != 0) continue;
    auto reader = runtime::data::TFRecordReader::open(entry.path().string());
    if (!reader.ok()) continue;
    std::string record;
    for (auto got = (*reader)->next(&record); got.ok() && *got; got = (*reader)->next(&record))
      ++events;
  }
  return events;
}

TEST_F(CrashConsistency, KilledAfterSummariesOrBetweenLoopsTheRunResumesBitwise) {
  const std::string ref = reference();
  const int events = count_events(root_ / "uninterrupted");
  ASSERT_GE(events, 3);
  for (int n : {1, events / 2, events}) kill_and_resume("summary.event", n, ref);
  for (int n : {1, 2, 3}) kill_and_resume("loop.done", n, ref);
}

// A disk that fills up during a save: the error names the file and the previous checkpoint
// stays the newest, bitwise; nothing half written is left beside it.
TEST_F(CrashConsistency, AFullDiskLeavesThePreviousCheckpointIntact) {
  const std::string dir = (root_ / "full").string();
  auto args = train(dir);
  args[6] = "2";  // --train-steps 2: one checkpoint
  const auto first = run_tpusim(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string before = fingerprint(dir);
  ASSERT_THAT(before, ::testing::StartsWith("2 "));
  // Files may grow to 512 KB: the mlp's 0.9 MB checkpoint cannot be written.
  const auto full = run_tpusim(train(dir), "", {}, testing::RunLimits{0, 512 << 10});
  EXPECT_EQ(full.exit_code, 1) << full.out << full.err;
  EXPECT_THAT(full.err, HasSubstr("model.ckpt-4.tpuckpt.tmp"));
  EXPECT_EQ(fingerprint(dir), before);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
}

// A model_dir whose parent is a file cannot be created: refused before any training.
TEST_F(CrashConsistency, AModelDirThatCannotBeWrittenIsRefusedBeforeTraining) {
  std::ofstream(root_ / "file") << "x";
  const auto r = run_tpusim(train((root_ / "file" / "run").string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err,
              HasSubstr("model_dir " + (root_ / "file" / "run").string() + " cannot be created"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("global_step")));
}

}  // namespace cli_crash_test
}  // namespace tpusim::cli
