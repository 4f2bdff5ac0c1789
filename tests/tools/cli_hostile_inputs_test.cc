// What a hostile user found (issue 35's list), each now a clear error naming what was wrong and
// never an abort, a hang, a silent wrap-around or an allocation a few bytes of input ask for: a
// batch too big for the host's memory, a checkpoint at a negative step, negative values for
// unsigned flags, topologies of absurd sizes or endless bytes, trace slices of negative or huge
// durations, a saved model whose prediction has no output, a config name that is not UTF-8,
// truncated or out-of-range IDX files, and a TFRecord whose length field promises 2 GB.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <zlib.h>

#include "estimator/checkpoint.h"
#include "estimator/saved_model.h"
#include "estimator/saved_model.pb.h"
#include "runtime/data/crc32c.h"
#include "runtime/graph/builder.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/hostile_inputs.h"

namespace tpusim::cli {
namespace cli_hostile_inputs_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

using testing::kGiB;
using testing::refusal;
using testing::write_file;

std::filesystem::path scratch(const std::string& name) { return testing::hostile_scratch(name); }

// A batch of 2^20 Fashion-MNIST images (3.3 GB) on a host limited to 3 GB: the input pipeline's
// worker thread ran out of memory and the process aborted (std::bad_alloc on a thread nothing
// caught). Now the batch, or the loop's feeds, are held against the host's memory budget first.
TEST(HostileInputs, ABatchTooBigForTheHostIsAnError) {
  if (testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an address-space limit, which ASan cannot run under";
  const auto dir = scratch("batch");
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1",
                       "--iterations-per-loop", "1", "--eval-steps", "1", "--batch-size", "1048576",
                       "--data", (dir / "data").string(), "--model-dir", (dir / "run").string()},
                      3 * kGiB),
              HasSubstr("over this host's memory budget of"));
  std::filesystem::remove_all(dir);
}

// A checkpoint whose header says global step -5 (valid CRCs): train resumed "at step -5" and
// spun in the infeed's skip (-5 became 2^64 batches).
TEST(HostileInputs, ACheckpointAtANegativeStepIsRefused) {
  const auto dir = scratch("step");
  runtime::Variables v;
  v["w"] = runtime::HostTensor::from({2}, {1, 2});
  ASSERT_TRUE(estimator::write_checkpoint((dir / "model.ckpt-5.tpuckpt").string(), -5, v).ok());
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--backend", "cpu", "--train-steps", "1",
                       "--model-dir", dir.string(), "--data", (dir / "data").string()}),
              HasSubstr("model.ckpt-5.tpuckpt: the header's global_step is -5, below 0"));
  std::filesystem::remove_all(dir);
}

// "-1" for an unsigned flag read as 2^32 - 1: --iterations-per-loop -1 ran, --core -1 became
// core 4294967295.
TEST(HostileInputs, NegativeValuesForCountsAreRefused) {
  EXPECT_THAT(refusal({"train", "--iterations-per-loop", "-1"}),
              HasSubstr("--iterations-per-loop takes a number >= 0 (got -1)"));
  EXPECT_THAT(refusal({"matmul", "--core", "-1"}),
              HasSubstr("--core takes a number >= 0 (got -1)"));
  EXPECT_THAT(refusal({"data", "convert-idx", "--images", "a", "--labels", "b", "--out", "c",
                       "--limit", "-1"}),
              HasSubstr("--limit takes a number >= 0 (got -1)"));
}

// A GEMM of N = 10^9 ended in an unnamed std::bad_alloc, M = 2^56 in an overflowed VMEM figure,
// and /dev/zero as a topology read forever.
TEST(HostileInputs, TopologiesOfAbsurdSizesAreRefused) {
  const auto dir = scratch("topology");
  write_file(dir / "wide.csv", "Layer, M, N, K,\nL1, 128, 1000000000, 256,\n");
  EXPECT_THAT(refusal({"layers", "--topology", (dir / "wide.csv").string()}),
              HasSubstr("wide.csv:2: field 3 (\"1000000000\") of layer L1 must be a positive "
                        "integer up to 2^24"));
  write_file(dir / "deep.csv", "Layer, M, N, K,\nL1, 72057594037927936, 16, 16,\n");
  EXPECT_THAT(refusal({"layers", "--topology", (dir / "deep.csv").string()}),
              HasSubstr("deep.csv:2: field 2 (\"72057594037927936\")"));
  write_file(dir / "big.csv", "Layer, M, N, K,\nL1, 16777216, 16777216, 16,\n");
  EXPECT_THAT(refusal({"layers", "--topology", (dir / "big.csv").string()}),
              HasSubstr("layer L1's M x N operand holds 281474976710656 elements, over 2^32"));
  EXPECT_THAT(refusal({"layers", "--topology", "/dev/zero"}, 2 * kGiB),
              HasSubstr("topology file /dev/zero is a character device, not a regular file"));
  write_file(dir / "huge.csv", "Layer, M, N, K,\n");
  std::filesystem::resize_file(dir / "huge.csv", (16 << 20) + 1);
  EXPECT_THAT(refusal({"layers", "--topology", (dir / "huge.csv").string()}, 2 * kGiB),
              HasSubstr("huge.csv is over 16 MiB: not a SCALE-Sim topology"));
  std::filesystem::remove_all(dir);
}

// A trace's slices with "dur": -1000 gave a step of 9223372037 ms and compute at 200%; 1e300 made
// everything idle.
TEST(HostileInputs, TraceSlicesOfNegativeOrHugeDurationsAreRefused) {
  const auto dir = scratch("trace");
  const std::string trace = (dir / "t.json").string();
  const auto made =
      run_tpusim({"train", "--model", "mlp", "--data", (dir / "data").string(), "--model-dir",
                  (dir / "run").string(), "--train-steps", "2", "--iterations-per-loop", "2",
                  "--timing-only", "--host-timing", "config", "--trace", trace});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  std::ifstream in(trace);
  const nlohmann::json good = nlohmann::json::parse(in);
  size_t slice = 0;
  while (good["traceEvents"][slice]["ph"] != "X") ++slice;
  for (const double dur : {-1000.0, 1e300}) {
    nlohmann::json bad = good;
    bad["traceEvents"][slice]["dur"] = dur;
    write_file(dir / "bad.json", bad.dump());
    EXPECT_THAT(refusal({"analyze", (dir / "bad.json").string()}),
                HasSubstr("traceEvents[" + std::to_string(slice) + "]: \"dur\": "));
  }
  std::filesystem::create_symlink("/dev/zero", dir / "zero.json");
  EXPECT_THAT(refusal({"analyze", (dir / "zero.json").string()}, 2 * kGiB),
              HasSubstr("zero.json is a character device, not a regular file"));
  std::filesystem::remove_all(dir);
}

// A flipped byte in a prediction's name stopped predict with "internal error: map::at".
TEST(HostileInputs, ASavedModelWhosePredictionHasNoOutputIsRefused) {
  const auto dir = scratch("saved");
  runtime::GraphBuilder b;
  const runtime::Value image = b.infeed("image", runtime::DType::kF32, {2, 28, 28, 1});
  b.output("prediction/sum", b.reduce(runtime::Op::kReduceSum, image, {1, 2, 3}));
  ASSERT_TRUE(estimator::write_saved_model(dir.string(), b.graph(), {},
                                           {{"image", runtime::DType::kF32, {2, 28, 28, 1}}},
                                           {"sum"}, 2, 0)
                  .ok());
  const auto pb = dir / "saved_model.pb";
  estimator::SavedModel m;
  {
    std::ifstream in(pb, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&in));
  }
  m.set_predictions(0, "sun");
  write_file(pb, m.SerializeAsString());
  EXPECT_THAT(refusal({"predict", "--saved-model", dir.string(), "--backend", "cpu"}),
              HasSubstr("prediction 'sun' has no graph output 'prediction/sun'"));
  std::filesystem::remove_all(dir);
}

// A config named "\xff\xfe" stopped `config show --json` with a JSON UTF-8 exception.
TEST(HostileInputs, AConfigNameThatIsNotUtf8PrintsAsReplacementCharacters) {
  const auto dir = scratch("config");
  const std::filesystem::path configs = std::filesystem::path(TPUSIM_SOURCE_DIR) / "configs";
  for (const char* file : {"tpu_v3.pbtxt", "host_96.pbtxt"})
    std::filesystem::copy_file(configs / file, dir / file);
  std::ifstream in(configs / "v3-8.pbtxt");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("name: \"v3-8\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 12, "name: \"\\xff\\xfe\"");
  write_file(dir / "c.textproto", text);
  const auto r = run_tpusim({"config", "show", (dir / "c.textproto").string(), "--json"});
  if (r.exit_code == 0) {
    EXPECT_THAT(r.out, HasSubstr("\"\xEF\xBF\xBD\xEF\xBF\xBD\""));  // two U+FFFD
  } else {
    EXPECT_EQ(r.exit_code, 1) << r.err;  // refused as a config, by name
    EXPECT_THAT(r.err, HasSubstr("c.textproto"));
  }
  std::filesystem::remove_all(dir);
}

// convert-idx took a GZIP file whose CRC32 and length trailer was cut off and labels of 255; an
// 18-byte label header claiming 3e9 labels held 2.9 GB.
TEST(HostileInputs, BrokenIdxFilesAreRefused) {
  const auto dir = scratch("idx");
  std::string images = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x1c\0\0\0\x1c", 16);
  images += std::string(2 * 784, '\x10');
  {  // gzip framing, written with zlib's gz* calls
    gzFile f = gzopen((dir / "images.gz").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, images.data(), static_cast<unsigned>(images.size())),
              static_cast<int>(images.size()));
    gzclose(f);
  }
  std::ifstream in(dir / "images.gz", std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(dir / "cut.gz", whole.substr(0, whole.size() - 8));
  write_file(dir / "labels", std::string("\0\0\x08\x01\0\0\0\x02\x03\x04", 10));
  write_file(dir / "bad-labels", std::string("\0\0\x08\x01\0\0\0\x02\x03\xff", 10));
  write_file(dir / "huge-labels", std::string("\0\0\x08\x01\xb2\xd0\x5e\x00\x01\x02", 10));
  const auto convert = [&](const std::string& images_file, const std::string& labels_file) {
    return refusal({"data", "convert-idx", "--images", (dir / images_file).string(), "--labels",
                    (dir / labels_file).string(), "--out", (dir / "out").string()},
                   2 * kGiB);
  };
  EXPECT_THAT(convert("cut.gz", "labels"),
              HasSubstr("cut.gz: the compressed stream is truncated (after 1584 decompressed "
                        "bytes)"));
  // Bytes after the gzip member were ignored by zlib's gzread (the fifth probe); they are read as
  // a TFRecord file's are: not a member, and refused.
  write_file(dir / "junk.gz", whole + std::string(100, '\x07'));
  EXPECT_THAT(convert("junk.gz", "labels"),
              HasSubstr("junk.gz: corrupt compressed data after 1584 decompressed bytes (in what "
                        "follows gzip member 1): "));
  EXPECT_THAT(convert("images.gz", "bad-labels"),
              HasSubstr("bad-labels: label 1 (byte offset 9) is 255; the classes are 0-9"));
  EXPECT_THAT(convert("images.gz", "huge-labels"),
              HasSubstr("huge-labels: the file ends at byte offset 10 while reading the values"));
  std::filesystem::remove_all(dir);
}

// A 2 KB GZIP TFRecord whose first length field is 2^31 (its CRC valid) took 2.1 GB and 4.8 s;
// then it held no more than the file. Issue 57's probe: 2^31 - 1 bytes promised and that many
// zeros after it (2 MB of gzip) grew `data inspect` to 3.1 GB before std::bad_alloc. Now a record
// the host's memory (here `ulimit -v` 1 GiB) cannot hold is refused at its header.
TEST(HostileInputs, ATfrecordLengthOf2GbIsRefusedAtItsHeader) {
  if (testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an address-space limit, which ASan cannot run under";
  const auto dir = scratch("tfrecord");
  for (const uint64_t length : {uint64_t{1} << 31, (uint64_t{1} << 31) - 1}) {
    std::string header(12, '\0');
    std::memcpy(header.data(), &length, 8);
    const uint32_t crc = runtime::data::mask_crc(runtime::data::crc32c(header.data(), 8));
    std::memcpy(header.data() + 8, &crc, 4);
    {
      gzFile f = gzopen((dir / "bomb.tfrecord.gz").c_str(), "wb");
      ASSERT_NE(f, nullptr);
      gzwrite(f, header.data(), static_cast<unsigned>(header.size()));
      const std::string data =
          length % 2 == 0 ? std::string(1000, 'x') : std::string(8 << 20, '\0');
      gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
      gzclose(f);
    }
    EXPECT_THAT(refusal({"data", "inspect", (dir / "bomb.tfrecord.gz").string()}, 1 * kGiB),
                HasSubstr("bomb.tfrecord.gz: the record at byte 0 (" + std::to_string(length) +
                          " bytes) needs 4.29 GB, over this host's memory budget of"));
  }
  std::filesystem::remove_all(dir);
}

// The tpusim backend under `ulimit -v`: simulated memories reserve their whole capacity (a v3-8's
// HBM is 4 x 32 GiB of address space), and where that was refused a buffer grew to the highest
// byte touched, 16 GiB and more for the core whose share of its chip's HBM starts there. Now
// windows map what is touched: the run fits in 4 GB.
TEST(HostileInputs, TheTpusimBackendTrainsUnderAnAddressSpaceLimit) {
  if (testing::kUnderSanitizer)
    GTEST_SKIP() << "needs an address-space limit, which ASan cannot run under";
  const auto dir = scratch("ulimit");
  const auto r =
      testing::run_tpusim({"train", "--model", "mlp", "--train-steps", "2", "--iterations-per-loop",
                           "1", "--eval-steps", "1", "--model-dir", (dir / "run").string()},
                          "", {}, testing::RunLimits{4 * kGiB, 0});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("global step 2: final loss"));
  std::filesystem::remove_all(dir);
}

// A gzip bomb (here 6 MB of zeros per KB of file) under --skip-corrupt: every header fails its
// checksum, and the reader scanned the whole inflated stream for the next valid one (6 GiB at
// about 100 MB/s). A scan now passes over at most --max-skip-bytes.
TEST(HostileInputs, AGzipBombUnderSkipCorruptStopsAtTheScanLimit) {
  const auto dir = scratch("gzip-bomb");
  {
    gzFile f = gzopen((dir / "zeros.tfrecord.gz").c_str(), "wb9");
    ASSERT_NE(f, nullptr);
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 96; ++i) gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size()));
    gzclose(f);
  }
  const std::string file = (dir / "zeros.tfrecord.gz").string();
  EXPECT_THAT(refusal({"data", "inspect", file, "--skip-corrupt", "--max-skip-bytes", "1MiB"}),
              HasSubstr("zeros.tfrecord.gz: no valid record header in the 1048576 bytes after the "
                        "corrupt one at byte offset 0 of the decompressed stream (skip_corrupt "
                        "scans at most max_resync_bytes; 0 records read, 1 skipped)"));
  // The default, 64 MiB, stops it too (96 MiB of zeros).
  EXPECT_THAT(refusal({"data", "inspect", file, "--skip-corrupt"}),
              HasSubstr("no valid record header in the 67108864 bytes after"));
  EXPECT_THAT(refusal({"data", "inspect", file, "--skip-corrupt", "--max-skip-bytes", "8"}),
              HasSubstr("--max-skip-bytes 8 must be in [12 B, 64 GiB]"));
  std::filesystem::remove_all(dir);
}

// Counts and step ranges parsed by hand went through atoi and sscanf, undefined past their
// type's range ("-j 99999999999999999999" was whatever the C library made of it).
TEST(HostileInputs, OutOfRangeCountsAreRefusedNamingTheFlag) {
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--trace", "/tmp/t.json", "--trace-steps",
                       "1:99999999999999999999"}),
              HasSubstr("--trace-steps takes A:B, global steps with 0 <= A <= B (got "
                        "'1:99999999999999999999')"));
  EXPECT_THAT(refusal({"sweep", "--set", "chip.core.mxu_count=1,2", "--out", "/tmp/x", "-j",
                       "99999999999999999999", "--", "train"}),
              HasSubstr("-j takes a whole number from 1 to 256 (got '99999999999999999999')"));
  EXPECT_THAT(refusal({"tune", "--iterations-per-loop", "1,2", "--steps", "1e3"}),
              HasSubstr("--steps takes a whole number from 1 to 9223372036854775807 (got '1e3')"));
}

// A grid of three axes of 100 values each is a million points: its list alone was built before
// anything ran. Over kMaxSweepPoints it is refused with its size.
TEST(HostileInputs, ASweepGridOfAMillionPointsIsRefused) {
  std::string values;
  for (int i = 1; i <= 100; ++i) values += (i > 1 ? "," : "") + std::to_string(i);
  EXPECT_THAT(refusal({"sweep", "--set", "a=" + values, "--set", "b=" + values, "--set",
                       "c=" + values, "--out", "/tmp/x", "--", "train"}),
              HasSubstr("the grid of 100 x 100 x 100 values has more than 100000 points; split "
                        "the study"));
}

}  // namespace cli_hostile_inputs_test
}  // namespace tpusim::cli
