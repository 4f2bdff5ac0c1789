// Checkpoints: a bitwise round trip, atomic writes, the index, keep_max, the newest found, and
// corruption reported with file and byte offset; hostile contents (a negative step, an unknown
// dtype, a shape its bytes do not hold, a name twice, records or bytes past the header's count, a
// garbage index) refused by name; the weights fingerprint.
#include "estimator/checkpoint.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "estimator/checkpoint.pb.h"
#include "runtime/data/tfrecord.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::estimator {
namespace checkpoint_test {

using config::testing::TempDir;
using runtime::DType;
using runtime::HostTensor;
using ::testing::HasSubstr;

// Variables as a model at `step` holds them (its global_step variable counts the steps).
runtime::Variables sample(float bias, int64_t step = 20) {
  runtime::Variables v;
  v["dense/kernel"] = HostTensor::from({2, 3}, {1.5f, -2, 3.25f, 1e-30f, -0.0f, 7});
  v["dense/bias"] = HostTensor::from({3}, {bias, 0, -1});
  v["count"] = HostTensor::from_ints({2}, {-5, 1 << 30});
  v["global_step"] = HostTensor::scalar(static_cast<float>(step));
  return v;
}

void expect_bitwise(const runtime::Variables& a, const runtime::Variables& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    const HostTensor& u = b.at(name);
    EXPECT_EQ(u.dtype, t.dtype) << name;
    EXPECT_EQ(u.shape, t.shape) << name;
    EXPECT_EQ(u.i, t.i) << name;
    ASSERT_EQ(u.f.size(), t.f.size());
    if (!t.f.empty()) {  // memcmp of an empty vector's data() (null) is undefined
      EXPECT_EQ(std::memcmp(u.f.data(), t.f.data(), t.f.size() * 4), 0) << name;
    }
  }
}

TEST(Checkpoint, RoundTripsBitwise) {
  TempDir dir;
  const auto vars = sample(0.5f);
  auto path = save_checkpoint(dir.path().string(), 20, vars, 5);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(std::filesystem::path(*path).filename(), "model.ckpt-20.tpuckpt");
  auto loaded = load_checkpoint(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->global_step, 20);
  expect_bitwise(vars, loaded->variables);
  EXPECT_EQ(weights_fingerprint(loaded->variables), weights_fingerprint(vars));
  // No temporary file is left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Checkpoint, KeepsTheNewestAndFindsTheLatest) {
  TempDir dir;
  const std::string d = dir.path().string();
  auto none = load_latest_checkpoint(d);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  for (int64_t step : {10, 20, 30, 40})
    ASSERT_TRUE(save_checkpoint(d, step, sample(step, step), 2).ok());
  const auto all = list_checkpoints(d);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_THAT(all[0], HasSubstr("model.ckpt-30.tpuckpt"));
  auto latest = load_latest_checkpoint(d);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->global_step, 40);
  EXPECT_EQ((*latest)->variables.at("dense/bias").f[0], 40.0f);
  std::ifstream index(dir.path() / "checkpoint");
  const std::string text((std::istreambuf_iterator<char>(index)), {});
  EXPECT_EQ(text,
            "model_checkpoint_path: \"model.ckpt-40.tpuckpt\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-30.tpuckpt\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-40.tpuckpt\"\n");
}

TEST(Checkpoint, CorruptionIsReportedWithFileAndOffset) {
  TempDir dir;
  auto path = save_checkpoint(dir.path().string(), 7, sample(1, 7), 0);
  ASSERT_TRUE(path.ok());
  std::string bytes;
  {
    std::ifstream in(*path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), {});
  }
  // Flip a byte inside the last variable's data.
  std::string bad = bytes;
  bad[bad.size() - 10] ^= 0x40;
  const std::string flipped = dir.write("flipped.tpuckpt", bad);
  auto loaded = load_checkpoint(flipped);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(flipped));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("offset"));
  // Cut off in the middle.
  const std::string cut = dir.write("cut.tpuckpt", bytes.substr(0, bytes.size() / 2));
  loaded = load_checkpoint(cut);
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(cut));
  // Not a checkpoint at all.
  const std::string other = dir.write("other.tpuckpt", std::string(40, 'x'));
  EXPECT_FALSE(load_checkpoint(other).ok());
}

// A checkpoint file written record by record: a header of `step` and `count`, then `records`.
void write_raw(const std::string& path, int64_t step, uint32_t count,
               const std::vector<VariableRecord>& records) {
  auto w = runtime::data::TFRecordWriter::open(path);
  ASSERT_TRUE(w.ok()) << w.status();
  CheckpointHeader h;
  h.set_format_version(1);
  h.set_global_step(step);
  h.set_variables(count);
  ASSERT_TRUE((*w)->write(h.SerializeAsString()).ok());
  for (const auto& r : records) ASSERT_TRUE((*w)->write(r.SerializeAsString()).ok());
  ASSERT_TRUE((*w)->close().ok());
}

VariableRecord raw_variable(const std::string& name, int dtype, std::vector<int64_t> shape,
                            size_t bytes) {
  VariableRecord r;
  r.set_name(name);
  r.set_dtype(static_cast<VariableRecord::DType>(dtype));
  for (int64_t d : shape) r.add_shape(d);
  r.set_data(std::string(bytes, '\0'));
  return r;
}

std::string load_error(const std::string& path) {
  auto c = load_checkpoint(path);
  return c.ok() ? std::string("loaded") : std::string(c.status().message());
}

TEST(Checkpoint, HostileContentsAreRefusedByName) {
  TempDir dir;
  const std::string p = dir.path().string() + "/model.ckpt-1.tpuckpt";
  const VariableRecord a = raw_variable("a", VariableRecord::F32, {2}, 8);
  write_raw(p, -5, 1, {a});
  EXPECT_THAT(load_error(p), HasSubstr(p + ": the header's global_step is -5, below 0"));
  write_raw(p, 1, 1, {raw_variable("a", 99, {2}, 8)});
  EXPECT_THAT(load_error(p), HasSubstr("variable record 0 at byte 22 ('a') has unknown dtype 99"));
  write_raw(p, 1, 2, {a, a});
  EXPECT_THAT(load_error(p), HasSubstr("variable 'a' again in record 1"));
  write_raw(p, 1, 1, {a, raw_variable("b", VariableRecord::F32, {1}, 4)});
  EXPECT_THAT(load_error(p), HasSubstr("another record after the header's 1 variables"));
  write_raw(p, 1, 1, {raw_variable("huge", VariableRecord::F32, {1000000, 1000000}, 4)});
  EXPECT_THAT(load_error(p),
              HasSubstr("('huge') has shape [1000000, 1000000], which its 4 bytes do not hold"));
  write_raw(p, 1, 1, {raw_variable("neg", VariableRecord::F32, {-2, -2}, 16)});
  EXPECT_THAT(load_error(p), HasSubstr("('neg') has shape [-2, -2]"));
  // 4 x (2^62 + 2) wraps to the record's 8 bytes: the count is held to the data before it wraps
  // (the fourth probe's shape, which reached an allocation of 2^62 floats).
  write_raw(p, 1, 1, {raw_variable("wraps", VariableRecord::F32, {(int64_t{1} << 62) + 2}, 8)});
  EXPECT_THAT(load_error(p), HasSubstr("('wraps') has shape [4611686018427387906], which its 8 "
                                       "bytes do not hold"));
  write_raw(p, 1, 1, {raw_variable("empty", VariableRecord::F32, {1 << 30, 0}, 0)});
  EXPECT_EQ(load_error(p), "loaded");  // no elements, whatever its other dimensions
  write_raw(p, 1, 1, {a});
  ASSERT_EQ(load_error(p), "loaded");
  std::ofstream(p, std::ios::binary | std::ios::app) << std::string(20, 'x');
  EXPECT_THAT(load_error(p), HasSubstr("bytes after the header's 1 variables (at byte"));
}

// The global_step variable the optimizer's schedules read agrees with the header's step, or the
// checkpoint is refused: a header of step 4 holding 999 would resume at 4 and decay as at 999.
TEST(Checkpoint, TheGlobalStepVariableAgreesWithTheHeader) {
  TempDir dir;
  const std::string d = dir.path().string();
  auto path = save_checkpoint(d, 4, sample(1, 999), 0);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(load_error(*path),
              HasSubstr(*path + ": variable 'global_step' holds 999 where the header's "
                                "global_step is 4"));
  auto vars = sample(1, 4);
  vars["global_step"] = HostTensor::from({2}, {4, 4});
  path = save_checkpoint(d, 4, vars, 0);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(load_error(*path), HasSubstr("variable 'global_step' has shape [2]; it is a scalar"));
  path = save_checkpoint(d, 4, sample(1, 4), 0);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(load_error(*path), "loaded");
  // Past 2^24 the f32 counter stops (adding one rounds back), and the header counts on.
  path = save_checkpoint(d, (int64_t{1} << 24) + 5, sample(1, int64_t{1} << 24), 0);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(load_error(*path), "loaded");
}

// The index is checked when there is one: a garbage line, a folder in its place, or a newest
// entry naming a file that is not there are refused naming it; a step too big to be a number is
// no checkpoint.
TEST(Checkpoint, TheIndexIsCheckedAndAnOverlongStepIgnored) {
  TempDir dir;
  ASSERT_TRUE(save_checkpoint(dir.path().string(), 3, sample(1, 3), 0).ok());
  std::ofstream(dir.path().string() + "/model.ckpt-99999999999999999999999.tpuckpt") << "x";
  auto latest = load_latest_checkpoint(dir.path().string());
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ((*latest)->global_step, 3);
  const std::string index = dir.path().string() + "/checkpoint";
  std::ofstream(index, std::ios::trunc) << "model_checkpoint_path: \"model.ckpt-9.tpuckpt\"\n";
  EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
              HasSubstr(index + " line 1 names model.ckpt-9.tpuckpt, which is not in"));
  std::ofstream(index, std::ios::trunc) << std::string(64, '\0');
  EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
              HasSubstr(index + " line 1 is not a checkpoint index line"));
  std::filesystem::remove(index);
  std::filesystem::create_directory(index);
  EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
              HasSubstr(index + " is not a regular file"));
}

// An index line is read without a regular expression (libstdc++'s regex recurses once a matched
// character): a quoted name of 900 KB, under the index's 1 MB limit, is refused as any name not
// there is, where the regex overflowed the stack.
TEST(Checkpoint, AnIndexLineOfAnyLengthIsReadWithoutRecursion) {
  TempDir dir;
  ASSERT_TRUE(save_checkpoint(dir.path().string(), 3, sample(1, 3), 0).ok());
  const std::string index = dir.path().string() + "/checkpoint";
  const std::string name(900 << 10, 'n');
  std::ofstream(index, std::ios::trunc) << "model_checkpoint_path: \"" << name << "\"\n";
  EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
              HasSubstr(index + " line 1 names nnnn"));
  std::ofstream(index, std::ios::trunc) << "model_checkpoint_path: \"" << name << "\n";
  EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
              HasSubstr(index + " line 1 is not a checkpoint index line"));
  std::ofstream(index, std::ios::trunc)
      << "model_checkpoint_path: \"model.ckpt-3.tpuckpt\"\nall_model_checkpoint_paths: \"" << name
      << "\"\n";
  auto latest = load_latest_checkpoint(dir.path().string());
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ((*latest)->global_step, 3);
  for (const char* bad :
       {"model_checkpoint_path:\"a\"", "model_checkpoint_path: \"a\" ",
        "model_checkpoint_path: \"a\"b\"", "other: \"a\"", "model_checkpoint_path: a"}) {
    std::ofstream(index, std::ios::trunc) << bad << "\n";
    EXPECT_THAT(std::string(load_latest_checkpoint(dir.path().string()).status().message()),
                HasSubstr(index + " line 1 is not a checkpoint index line"))
        << bad;
  }
}

TEST(Checkpoint, TheFingerprintSeesEveryBit) {
  const auto a = sample(0.5f);
  auto b = a;
  EXPECT_EQ(weights_fingerprint(a), weights_fingerprint(b));
  EXPECT_EQ(weights_fingerprint(a).size(), 16u);
  b["dense/bias"].f[0] = std::nextafter(0.5f, 1.0f);
  EXPECT_NE(weights_fingerprint(a), weights_fingerprint(b));
  b = a;
  b["dense/kernel"].f[4] = 0.0f;  // -0 -> +0: a different bit pattern
  EXPECT_NE(weights_fingerprint(a), weights_fingerprint(b));
}

}  // namespace checkpoint_test
}  // namespace tpusim::estimator
