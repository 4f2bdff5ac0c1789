// What the third hostile probe (2026-12-02) found, each now a clean refusal naming its input:
// special files (FIFOs, /dev/zero, folders) where a file is read, files over their kind's cap,
// a slice whose SystemC stacks do not fit the address space, values a model indexes with outside
// what they index (a label of 12 for 10 classes), and a checkpoint whose global_step variable
// disagrees with its header; a sweep resumed after its arguments were edited.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "estimator/checkpoint.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/hostile_inputs.h"

namespace tpusim::cli {
namespace cli_hostile_inputs_iii_test {

using ::testing::HasSubstr;
using testing::kGiB;
using testing::refusal;
using testing::run_tpusim;
using testing::write_file;

std::filesystem::path scratch(const std::string& name) {
  return testing::hostile_scratch("iii-" + name);
}

// A FIFO with no writer made every reader wait in open(2) for ever; now each is refused as what
// it is, at once.
TEST(HostileInputs3, AFifoWhereAFileIsReadIsRefusedWithoutWaiting) {
  const auto dir = scratch("fifo");
  const std::string fifo = (dir / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string is_a_fifo = fifo + " is a FIFO, not a regular file";
  EXPECT_THAT(refusal({"analyze", fifo}), HasSubstr("trace " + is_a_fifo));
  EXPECT_THAT(refusal({"data", "inspect", fifo}), HasSubstr("TFRecord file " + is_a_fifo));
  EXPECT_THAT(refusal({"layers", "--topology", fifo}), HasSubstr("topology file " + is_a_fifo));
  EXPECT_THAT(refusal({"data", "convert-idx", "--images", fifo, "--labels", fifo, "--out",
                       (dir / "out").string()}),
              HasSubstr("IDX file " + is_a_fifo));
  EXPECT_THAT(refusal({"allreduce", "--config", fifo, "--bytes", "4096"}),
              HasSubstr("config file " + is_a_fifo));
  std::filesystem::create_directories(dir / "saved");
  ASSERT_EQ(::mkfifo((dir / "saved" / "saved_model.pb").c_str(), 0600), 0);
  EXPECT_THAT(refusal({"predict", "--saved-model", (dir / "saved").string(), "--backend", "cpu"}),
              HasSubstr("saved model " + (dir / "saved" / "saved_model.pb").string() +
                        " is a FIFO, not a regular file"));
  std::filesystem::remove_all(dir);
}

// A sweep's journal as /dev/zero was read to 2.18 GB, and as a folder the resume exited 0.
TEST(HostileInputs3, ASweepJournalThatIsNoFileIsRefused) {
  const auto dir = scratch("journal");
  const std::string sweep = (dir / "sweep").string();
  const auto r = run_tpusim({"sweep", "--set", "chip.hbm.bandwidth_gb_per_s=900,1800", "--out",
                             sweep, "--", "matmul", "--m", "128", "--n", "128", "--k", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto journal = std::filesystem::path(sweep) / "points.jsonl";
  std::filesystem::remove(journal);
  std::filesystem::create_symlink("/dev/zero", journal);
  EXPECT_THAT(refusal({"sweep", "--resume", sweep}),
              HasSubstr("sweep journal " + journal.string() +
                        " is a character device, not a regular file"));
  std::filesystem::remove(journal);
  std::filesystem::create_directories(journal);
  EXPECT_THAT(refusal({"sweep", "--resume", sweep}), HasSubstr(" is a directory"));
  std::filesystem::remove_all(dir);
}

// sweep-args.json edited after its points ran (its axis' values swapped) was taken on --resume:
// p000's result, run at 900 GB/s, was then shown as 1800's.
TEST(HostileInputs3, ASweepWhoseArgumentsWereEditedIsNotResumed) {
  const auto dir = scratch("edited");
  const std::string sweep = (dir / "sweep").string();
  const auto r = run_tpusim({"sweep", "--set", "chip.hbm.bandwidth_gb_per_s=900,1800", "--out",
                             sweep, "--", "matmul", "--m", "128", "--n", "128", "--k", "128"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto args = std::filesystem::path(sweep) / "sweep-args.json";
  std::string text = testing::read_file(args);
  const size_t at = text.find("900,1800");
  ASSERT_NE(at, std::string::npos) << text;
  write_file(args, text.replace(at, 8, "1800,900"));
  EXPECT_THAT(refusal({"sweep", "--resume", sweep}),
              HasSubstr("points.jsonl: point p000 ended under other arguments than " +
                        args.string() + " holds now"));
  std::filesystem::remove_all(dir);
}

// A 1 GB sparse config took 13-20 s and 3.2 GB before its refusal; it is refused by its size.
TEST(HostileInputs3, AConfigOverItsCapIsRefusedByItsSize) {
  const auto dir = scratch("config");
  const auto big = dir / "big.pbtxt";
  write_file(big, "name: \"big\"\n");
  std::filesystem::resize_file(big, 1'000'000'000);
  EXPECT_THAT(refusal({"allreduce", "--config", big.string(), "--bytes", "4096"}),
              HasSubstr("config file " + big.string() +
                        " is 1.00 GB, over the cap of 16.78 MB for a config file"));
  std::filesystem::remove_all(dir);
}

// `allreduce --config v3-2048` under a 4 GB address-space limit aborted on an uncaught
// std::bad_alloc: the kernel could not map its 24,833 thread stacks, and unwinding the half-built
// System failed again. The stacks are held against the limit before the kernel starts.
TEST(HostileInputs3, ASliceWhoseStacksDoNotFitTheAddressSpaceIsRefused) {
  if (testing::kUnderSanitizer) GTEST_SKIP() << "an address-space limit under ASan";
  EXPECT_THAT(
      refusal({"allreduce", "--bytes", "4096", "--config", "v3-2048", "--timing-only"}, 4 * kGiB),
      HasSubstr("slice v3-2048's 24833 SystemC thread processes map stacks of 266.24 kB "
                "each, 6.61 GB in all, over the"));
}

// Records whose label is 12 trained a 10-way classifier on a class it has no output for.
TEST(HostileInputs3, ALabelOutsideTheModelsClassesIsRefused) {
  const auto dir = scratch("labels");
  testing::write_mnist_records(dir, 64, 28 * 28, [](int i) { return i == 5 ? 12 : i % 10; });
  const std::string err = refusal(
      {"train", "--model", "mlp", "--backend", "cpu", "--data", dir.string(), "--batch-size", "64",
       "--train-steps", "4", "--iterations-per-loop", "1", "--model-dir", (dir / "run").string()});
  EXPECT_THAT(err, HasSubstr("feature 'label' value 0 is 12, outside [0, 10) (the zoo's "
                             "classifiers' 10 classes)"));
  // The record is named by its file and place, not only by its position in the map.
  EXPECT_THAT(err, HasSubstr("train-00000-of-00001.tfrecord, record 5 at byte offset "));
  std::filesystem::remove_all(dir);
}

// OMP_NUM_THREADS=65536 crashed the cpu backend's first OpenMP region (SIGSEGV in libgomp's
// GOMP_parallel); it is refused before any command runs.
TEST(HostileInputs3, AnOpenMpTeamPastTheThreadFlagsBoundIsRefused) {
  const auto r = run_tpusim(
      {"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1", "--input", "synthetic"},
      "", {{"OMP_NUM_THREADS", "65536"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("OMP_NUM_THREADS=65536: each team size"));
}

}  // namespace cli_hostile_inputs_iii_test
}  // namespace tpusim::cli
