// Checkpoints: a bitwise round trip, atomic writes, the index, keep_max, the newest found, and
// corruption reported with file and byte offset; the weights fingerprint.
#include "estimator/checkpoint.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/configs/config_test_util.h"

namespace tpusim::estimator {
namespace {

using config::testing::TempDir;
using runtime::DType;
using runtime::HostTensor;
using ::testing::HasSubstr;

runtime::Variables sample(float bias) {
  runtime::Variables v;
  v["dense/kernel"] = HostTensor::from({2, 3}, {1.5f, -2, 3.25f, 1e-30f, -0.0f, 7});
  v["dense/bias"] = HostTensor::from({3}, {bias, 0, -1});
  v["count"] = HostTensor::from_ints({2}, {-5, 1 << 30});
  v["global_step"] = HostTensor::scalar(20);
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
    EXPECT_EQ(std::memcmp(u.f.data(), t.f.data(), t.f.size() * 4), 0) << name;
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
  for (int64_t step : {10, 20, 30, 40}) ASSERT_TRUE(save_checkpoint(d, step, sample(step), 2).ok());
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
  auto path = save_checkpoint(dir.path().string(), 7, sample(1), 0);
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

}  // namespace
}  // namespace tpusim::estimator
