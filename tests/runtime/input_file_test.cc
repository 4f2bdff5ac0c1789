// Files a user names, opened as common/input_file.h promises: what is not a regular file is
// refused by what it is without blocking (a FIFO with no writer, a device, a folder), a file over
// its kind's cap is refused by its size before a byte is read, and the readers that stream a file
// (TFRecord, IDX) ask the same question first.
#include "common/input_file.h"

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "runtime/data/idx.h"
#include "runtime/data/tfrecord.h"

namespace tpusim {
namespace input_file_test {

using ::testing::HasSubstr;

struct Folder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("tpusim_input_file_" + std::to_string(::getpid()));
  Folder() { std::filesystem::create_directories(path); }
  ~Folder() { std::filesystem::remove_all(path); }
};

TEST(InputFile, ARegularFileIsReadWhole) {
  Folder dir;
  const std::string p = (dir.path / "a.pbtxt").string();
  std::ofstream(p, std::ios::binary) << std::string("chip {\0}", 8);
  auto text = read_input_file(p, "config file", 100);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("chip {\0}", 8));
  std::ofstream(p, std::ios::binary | std::ios::trunc);
  EXPECT_EQ(*read_input_file(p, "config file", 100), "");
}

// Each refusal comes at once: the FIFO has no writer, so an open(2) without O_NONBLOCK would
// wait for one for ever.
TEST(InputFile, WhatIsNotARegularFileIsRefusedByWhatItIs) {
  Folder dir;
  const std::string fifo = (dir.path / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_input_file(fifo, "trace", UINT64_MAX).status().message(),
            "trace " + fifo + " is a FIFO, not a regular file");
  EXPECT_EQ(check_regular_file(fifo, "TFRecord file").message(),
            "TFRecord file " + fifo + " is a FIFO, not a regular file");
  EXPECT_EQ(read_input_file("/dev/zero", "sweep journal", 100).status().message(),
            "sweep journal /dev/zero is a character device, not a regular file");
  EXPECT_EQ(read_input_file(dir.path.string(), "config file", 100).status().message(),
            "config file " + dir.path.string() + " is a directory, not a regular file");
  const auto missing = read_input_file((dir.path / "none").string(), "config file", 100);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("none: No such file or directory"));
  // The streaming readers ask first.
  EXPECT_THAT(runtime::data::TFRecordReader::open(fifo).status().message(),
              HasSubstr("is a FIFO, not a regular file"));
  EXPECT_THAT(runtime::data::read_idx(fifo).status().message(),
              HasSubstr("IDX file " + fifo + " is a FIFO"));
}

// A 3 GB sparse file over a 16 MiB cap is refused by its size: nothing is read or held.
TEST(InputFile, AFileOverItsCapIsRefusedByItsSize) {
  Folder dir;
  const std::string p = (dir.path / "huge.pbtxt").string();
  std::ofstream(p, std::ios::binary).close();
  std::filesystem::resize_file(p, 3'000'000'000);
  EXPECT_EQ(read_input_file(p, "config file", uint64_t{16} << 20).status().message(),
            "config file " + p + " is 3.00 GB, over the cap of 16.78 MB for a config file");
  const std::string just = (dir.path / "just.pbtxt").string();
  std::ofstream(just, std::ios::binary) << std::string(101, 'x');
  EXPECT_THAT(read_input_file(just, "config file", 100).status().message(),
              HasSubstr("is 101 bytes, over the cap of 100 bytes for a config file"));
}

}  // namespace input_file_test
}  // namespace tpusim
