// TensorBoard event files read back by our own TFRecord reader: the name, the file_version
// record, then scalars with their tags, steps and values, every record under a valid CRC.
#include "estimator/summary_writer.h"

#include <filesystem>
#include <regex>

#include <gtest/gtest.h>

#include "estimator/event.pb.h"
#include "runtime/data/tfrecord.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::estimator {
namespace summary_writer_test {

using config::testing::TempDir;

std::vector<tensorflow::Event> read_events(const std::string& path) {
  std::vector<tensorflow::Event> events;
  auto reader = runtime::data::TFRecordReader::open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::string record;
  for (;;) {
    auto more = (*reader)->next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    tensorflow::Event e;
    EXPECT_TRUE(e.ParseFromString(record));
    events.push_back(e);
  }
  return events;
}

TEST(SummaryWriter, WritesTensorBoardEventFiles) {
  TempDir dir;
  const std::string model_dir = (dir.path() / "model").string();  // created by the writer
  auto w = SummaryWriter::create(model_dir);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_TRUE(std::regex_match(std::filesystem::path((*w)->path()).filename().string(),
                               std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")));
  ASSERT_TRUE((*w)->add_scalar("loss", 2.5, 10).ok());
  ASSERT_TRUE((*w)->add_scalar("learning_rate", 0.01, 10).ok());
  ASSERT_TRUE((*w)->add_scalar("loss", 1.25, 20).ok());
  // Flushed as written: readable while the writer is open.
  const auto events = read_events((*w)->path());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.7e9);
  EXPECT_EQ(events[1].step(), 10);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), 2.5f);
  EXPECT_EQ(events[2].summary().value(0).tag(), "learning_rate");
  EXPECT_EQ(events[3].step(), 20);
  EXPECT_EQ(events[3].summary().value(0).simple_value(), 1.25f);
}

TEST(SummaryWriter, TwoWritersGetTwoFiles) {
  TempDir dir;
  auto a = SummaryWriter::create(dir.path().string());
  auto b = SummaryWriter::create(dir.path().string());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

TEST(SummaryWriter, AnUnwritableFolderIsNamed) {
  auto w = SummaryWriter::create("/proc/tpusim-no-such/model");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find("/proc/tpusim-no-such/model"),
            std::string::npos);
}

}  // namespace summary_writer_test
}  // namespace tpusim::estimator
