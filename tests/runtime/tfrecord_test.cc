#include "runtime/data/tfrecord.h"

#include <fstream>
#include <sstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "common/strings.h"
#include "runtime/data/crc32c.h"
#include "runtime/data/example.pb.h"
#include "tests/configs/config_test_util.h"
#include "tests/under_sanitizer.h"

namespace tpusim::runtime::data {
namespace tfrecord_test {

using config::testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spill(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::vector<std::string> sample_records() {
  std::vector<std::string> r = {"", "a", "CRC test, one two", std::string(100000, 'x')};
  std::string binary;
  for (int i = 0; i < 1000; ++i) binary.push_back(static_cast<char>(i * 37));
  r.push_back(binary);
  return r;
}

void write_all(const std::string& path, Compression c, const std::vector<std::string>& records) {
  auto w = TFRecordWriter::open(path, c);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const auto& r : records) ASSERT_TRUE((*w)->write(r).ok());
  ASSERT_TRUE((*w)->close().ok());
}

absl::StatusOr<std::vector<std::string>> read_all(const std::string& path,
                                                  ReaderOptions options = {}) {
  auto r = TFRecordReader::open(path, options);
  if (!r.ok()) return r.status();
  std::vector<std::string> out;
  std::string rec;
  for (;;) {
    auto more = (*r)->next(&rec);
    if (!more.ok()) return more.status();
    if (!*more) break;
    out.push_back(rec);
  }
  return out;
}

// 32 records of 16 MiB of zeros, written sparse (each record's header and data checksum, the
// data a hole), read through the mapping: the reader holds a window of the file at a time, not
// the 512 MiB it maps. It mapped the file with MAP_POPULATE, so `data inspect` on a 3 GB file
// held 3.16 GB resident.
TEST(TFRecord, AMappedFileIsHeldAWindowAtATime) {
  TempDir dir;
  const std::string path = (dir.path() / "sparse.tfrecord").string();
  constexpr uint64_t kRecord = uint64_t{16} << 20;
  constexpr int kRecords = 32;
  std::string header(12, '\0'), trailer(4, '\0');
  {
    const std::string zeros(kRecord, '\0');
    const std::string framed = frame_record(zeros);
    header = framed.substr(0, 12);
    trailer = framed.substr(12 + kRecord);
  }
  {
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < kRecords; ++i) {
      out << header;
      out.seekp(static_cast<std::streamoff>(kRecord), std::ios::cur);
      out << trailer;
    }
  }
  rusage before{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &before), 0);
  auto reader = TFRecordReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string record;
  int read = 0;
  for (;;) {
    auto more = (*reader)->next(&record);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    ASSERT_EQ(record.size(), kRecord);
    ++read;
  }
  rusage after{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &after), 0);
  EXPECT_EQ(read, kRecords);
  // Peak resident set, in KiB: the file is 524,288 KiB; the reader's windows and a record's copy
  // are under 160 MiB.
  // (Not under a sanitizer: its shadow of the pages read counts in the resident set too.)
  if (!testing::kUnderSanitizer) {
    EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 160 * 1024);
  }
}

TEST(TFRecord, FramesARecordExactlyAsTensorFlowDoes) {
  const std::string framed = frame_record("CRC test, one two");
  ASSERT_EQ(framed.size(), 8u + 4 + 17 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x11\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(framed.substr(8, 4), std::string("\x9d\x6d\xb5\x2e", 4));  // masked crc of the length
  EXPECT_EQ(framed.substr(12, 17), "CRC test, one two");
  EXPECT_EQ(framed.substr(29, 4), std::string("\x18\xe0\x7f\x85", 4));  // masked crc of the data
}

class TFRecordRoundTrip : public ::testing::TestWithParam<Compression> {};

TEST_P(TFRecordRoundTrip, ReadsBackWhatItWrote) {
  TempDir dir;
  const std::string path = (dir.path() / "records.tfrecord").string();
  write_all(path, GetParam(), sample_records());
  auto got = read_all(path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, sample_records());
  auto reader = TFRecordReader::open(path);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->compression(), GetParam());  // detected, not told
}

TEST_P(TFRecordRoundTrip, ReadsAnEmptyFile) {
  TempDir dir;
  const std::string path = (dir.path() / "empty.tfrecord").string();
  write_all(path, GetParam(), {});
  auto got = read_all(path, {GetParam()});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
}

INSTANTIATE_TEST_SUITE_P(Compressions, TFRecordRoundTrip,
                         ::testing::Values(Compression::kNone, Compression::kGzip,
                                           Compression::kZlib),
                         [](const auto& p) { return std::string(compression_name(p.param)); });

TEST(TFRecord, UncompressedFileIsTheConcatenationOfFramedRecords) {
  TempDir dir;
  const std::string path = (dir.path() / "r.tfrecord").string();
  write_all(path, Compression::kNone, {"one", "two"});
  EXPECT_EQ(slurp(path), frame_record("one") + frame_record("two"));
}

TEST(TFRecord, ReadsConcatenatedGzipMembers) {
  TempDir dir;
  const std::string a = (dir.path() / "a").string(), b = (dir.path() / "b").string();
  write_all(a, Compression::kGzip, {"first"});
  write_all(b, Compression::kGzip, {"second", "third"});
  const std::string joined = (dir.path() / "joined.tfrecord.gz").string();
  spill(joined, slurp(a) + slurp(b));
  auto got = read_all(joined);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<std::string>{"first", "second", "third"}));
}

// Junk after a complete gzip member was said to come "after 0 decompressed bytes": the count
// restarted with each member. It counts over every member now (the fourth probe's finding).
TEST(TFRecord, JunkAfterAGzipMemberIsPlacedAfterEverythingDecompressed) {
  TempDir dir;
  const std::string path = (dir.path() / "junk.tfrecord.gz").string();
  write_all(path, Compression::kGzip, {"first", "second"});
  spill(path, slurp(path) + std::string(100, '\0'));
  auto got = read_all(path);
  ASSERT_FALSE(got.ok());
  const size_t decompressed = frame_record("first").size() + frame_record("second").size();
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::HasSubstr(str_cat(path, ": corrupt compressed data after ", decompressed,
                                           " decompressed bytes (in what follows gzip member "
                                           "1): ")));
}

// The fifth probe's messages: bytes after a ZLIB stream were "in what follows gzip member 1"
// (and a second stream read on, which TensorFlow's ZLIB reader does not); a record whose data is
// whole but whose data checksum is cut "promises 826 bytes but ends after 829".
TEST(TFRecord, AZlibFilesTrailAndACutChecksumAreSaidAsWhatTheyAre) {
  TempDir dir;
  const std::string zlib = (dir.path() / "junk.tfrecord.zz").string();
  write_all(zlib, Compression::kZlib, {"first", "second"});
  spill(zlib, slurp(zlib) + "garbage");
  auto got = read_all(zlib, {Compression::kZlib});
  ASSERT_FALSE(got.ok());
  const size_t decompressed = frame_record("first").size() + frame_record("second").size();
  EXPECT_THAT(
      std::string(got.status().message()),
      ::testing::HasSubstr(str_cat(zlib, ": bytes after the ZLIB stream's end (at ", decompressed,
                                   " decompressed bytes): a ZLIB file holds one stream")));
  const std::string cut = (dir.path() / "cut.tfrecord").string();
  const std::string whole = frame_record("good") + frame_record("checksum cut");
  spill(cut, whole.substr(0, whole.size() - 1));
  got = read_all(cut);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::HasSubstr(": corrupt record at byte offset 20: truncated: the record's 12 "
                                   "bytes of data are whole but the file ends 3 bytes into its "
                                   "4-byte data checksum"));
}

TEST(TFRecord, CorruptDataNamesTheFileAndOffset) {
  TempDir dir;
  const std::string path = (dir.path() / "bad.tfrecord").string();
  std::string bytes = frame_record("good") + frame_record("flipped") + frame_record("after");
  bytes[20 + 12 + 3] ^= 0x01;  // a data byte of the second record (the first is 20 bytes)
  spill(path, bytes);
  auto got = read_all(path);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  const std::string msg(got.status().message());
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset 20"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
}

TEST(TFRecord, SkipCorruptDropsOnlyTheBadRecord) {
  TempDir dir;
  const std::string path = (dir.path() / "bad.tfrecord").string();
  std::string bytes = frame_record("good") + frame_record("flipped") + frame_record("after");
  bytes[20 + 12 + 3] ^= 0x01;
  spill(path, bytes);
  ReaderOptions options;
  options.skip_corrupt = true;
  auto reader = TFRecordReader::open(path, options);
  ASSERT_TRUE(reader.ok());
  std::vector<std::string> got;
  std::string rec;
  while (*(*reader)->next(&rec)) got.push_back(rec);
  EXPECT_EQ(got, (std::vector<std::string>{"good", "after"}));
  EXPECT_EQ((*reader)->skipped(), 1u);
  EXPECT_EQ((*reader)->records(), 2u);
}

TEST(TFRecord, CorruptLengthIsAnErrorOrAResync) {
  TempDir dir;
  const std::string path = (dir.path() / "bad_length.tfrecord").string();
  std::string bytes = frame_record("good") + frame_record("bad length") + frame_record("after");
  bytes[20 + 2] ^= 0x40;  // the second record's length field
  spill(path, bytes);
  auto strict = read_all(path);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("length field fails its checksum"),
            absl::string_view::npos)
      << strict.status();
  EXPECT_NE(strict.status().message().find("byte offset 20"), absl::string_view::npos)
      << strict.status();
  ReaderOptions options;
  options.skip_corrupt = true;
  auto lenient = read_all(path, options);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(*lenient, (std::vector<std::string>{"good", "after"}));
}

// A length written wrong with its checksum computed over it (the header checks out) once hid the
// records it covered: skipped by the length, "after" and "last" were lost as one bad record.
// The length is followed only where it lands on a record or the end; else the reader scans.
TEST(TFRecord, AnOverlongLengthWhoseChecksumHoldsHidesNoRecord) {
  TempDir dir;
  const std::string path = (dir.path() / "overlong.tfrecord").string();
  const std::string good = frame_record("good"), after = frame_record("after"),
                    last = frame_record("last");
  for (const uint64_t length : {uint64_t{30}, uint64_t{5000}}) {  // inside the file; past its end
    std::string bad = frame_record("bad length");
    for (int i = 0; i < 8; ++i) bad[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    const uint32_t crc = masked_crc32c(bad.data(), 8);
    for (int i = 0; i < 4; ++i) bad[8 + i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    spill(path, good + bad + after + last);
    ReaderOptions options;
    options.skip_corrupt = true;
    auto reader = TFRecordReader::open(path, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::vector<std::string> got;
    std::string rec;
    for (;;) {
      auto more = (*reader)->next(&rec);
      ASSERT_TRUE(more.ok()) << more.status();
      if (!*more) break;
      got.push_back(rec);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"good", "after", "last"})) << length;
    EXPECT_EQ((*reader)->skipped(), 1u) << length;
    EXPECT_FALSE(read_all(path).ok()) << length;  // without skip_corrupt, an error as before
  }
}

TEST(TFRecord, TruncatedFilesAreErrorsThatSayHowMuchIsMissing) {
  TempDir dir;
  const std::string whole = frame_record("complete") + frame_record("cut short");
  const std::string path = (dir.path() / "cut.tfrecord").string();
  spill(path, whole.substr(0, whole.size() - 5));
  auto got = read_all(path);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("truncated"), absl::string_view::npos) << got.status();
  EXPECT_NE(got.status().message().find("byte offset 24"), absl::string_view::npos) << got.status();

  spill(path, whole.substr(0, 24 + 7));  // half a header
  got = read_all(path);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("truncated header: 7 bytes of 12"), absl::string_view::npos)
      << got.status();
}

TEST(TFRecord, AnAbsurdLengthIsRefusedNotAllocated) {
  TempDir dir;
  const std::string path = (dir.path() / "huge.tfrecord").string();
  std::string header(8, '\0');
  header[5] = 0x01;  // 2^40 bytes
  const uint32_t crc = masked_crc32c(header.data(), 8);
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  spill(path, header + "tiny");
  auto got = read_all(path);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("promises 1099511627776 bytes"), absl::string_view::npos)
      << got.status();
}

TEST(TFRecord, TruncatedGzipIsAnError) {
  TempDir dir;
  const std::string path = (dir.path() / "r.tfrecord.gz").string();
  write_all(path, Compression::kGzip, sample_records());
  const std::string bytes = slurp(path);
  spill(path, bytes.substr(0, bytes.size() / 2));
  auto got = read_all(path);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find(path), absl::string_view::npos) << got.status();
}

// The buffered path (map_file off), with a buffer smaller than one header, refills at every
// step and must give the same records and the same errors as the mapped one.
TEST(TFRecord, BufferedReadsMatchMappedReadsWithATinyBuffer) {
  TempDir dir;
  const std::string path = (dir.path() / "r.tfrecord").string();
  write_all(path, Compression::kNone, sample_records());
  ReaderOptions buffered;
  buffered.map_file = false;
  buffered.buffer_bytes = 7;
  auto got = read_all(path, buffered);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, sample_records());

  std::string bytes = frame_record("good") + frame_record("flipped") + frame_record("after");
  bytes[20 + 12 + 3] ^= 0x01;
  spill(path, bytes);
  auto strict = read_all(path, buffered);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("byte offset 20"), absl::string_view::npos)
      << strict.status();
  buffered.skip_corrupt = true;
  bytes[20 + 2] ^= 0x40;  // now the length too: a resync
  spill(path, bytes);
  auto lenient = read_all(path, buffered);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_EQ(*lenient, (std::vector<std::string>{"good", "after"}));
}

TEST(TFRecord, MissingFileIsNotFound) {
  auto r = TFRecordReader::open("/nonexistent/records.tfrecord");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/records.tfrecord"), absl::string_view::npos);
}

TEST(TFRecord, ParsesCompressionNames) {
  EXPECT_EQ(*parse_compression("GZIP"), Compression::kGzip);
  EXPECT_EQ(*parse_compression(""), Compression::kNone);
  EXPECT_FALSE(parse_compression("lz4").ok());
}

TEST(TFRecord, CarriesTfExamples) {
  tensorflow::Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  features["label"].mutable_int64_list()->add_value(7);
  for (int i = 0; i < 4; ++i) features["pixels"].mutable_float_list()->add_value(0.25F * i);
  features["name"].mutable_bytes_list()->add_value("sneaker");
  TempDir dir;
  const std::string path = (dir.path() / "examples.tfrecord").string();
  write_all(path, Compression::kZlib, {ex.SerializeAsString()});
  auto got = read_all(path);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  tensorflow::Example back;
  ASSERT_TRUE(back.ParseFromString(got->front()));
  EXPECT_EQ(back.features().feature().at("label").int64_list().value(0), 7);
  EXPECT_EQ(back.features().feature().at("pixels").float_list().value_size(), 4);
  EXPECT_FLOAT_EQ(back.features().feature().at("pixels").float_list().value(3), 0.75F);
  EXPECT_EQ(back.features().feature().at("name").bytes_list().value(0), "sneaker");
}

}  // namespace tfrecord_test
}  // namespace tpusim::runtime::data
