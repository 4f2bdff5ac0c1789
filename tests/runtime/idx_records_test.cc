// IDX reading and the IDX-to-TFRecord conversion, on the real Fashion-MNIST test set (Debian
// package dataset-fashion-mnist) and on broken copies of it.
#include <cstring>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "runtime/data/dataset.h"
#include "runtime/data/example.pb.h"
#include "runtime/data/idx.h"
#include "runtime/data/image.h"
#include "runtime/data/mnist_records.h"
#include "runtime/data/tfrecord.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::runtime::data {
namespace idx_records_test {

using config::testing::TempDir;

const std::string kDir = "/usr/share/datasets/fashion-mnist/";
const std::string kImages = kDir + "t10k-images-idx3-ubyte.gz";
const std::string kLabels = kDir + "t10k-labels-idx1-ubyte.gz";

void spill(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::string b = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>((d >> s) & 0xff));
  }
  b.append(values.begin(), values.end());
  return b;
}

TEST(Idx, ReadsTheFashionMnistTestSet) {
  auto images = read_idx(kImages);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->dims, (std::vector<uint32_t>{10000, 28, 28}));
  EXPECT_EQ(images->row_size(), 784u);
  auto labels = read_idx(kLabels);
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dims, (std::vector<uint32_t>{10000}));
  // The documented first test labels: ankle boot, pullover, trouser, trouser, shirt.
  EXPECT_EQ(std::vector<uint8_t>(labels->values.begin(), labels->values.begin() + 5),
            (std::vector<uint8_t>{9, 2, 1, 1, 6}));
  for (uint8_t l : labels->values) ASSERT_LT(l, 10);
}

TEST(Idx, ReadsUncompressedFiles) {
  TempDir dir;
  const std::string path = (dir.path() / "tiny.idx").string();
  spill(path, idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto a = read_idx(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(a->values, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Idx, BadFilesNameTheFileAndOffset) {
  TempDir dir;
  const std::string path = (dir.path() / "bad.idx").string();
  spill(path, "PK\x03\x04 not an idx file");
  auto a = read_idx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(path + ": not an IDX file (byte offset 0"),
            absl::string_view::npos)
      << a.status();

  spill(path, idx_bytes({2, 3}, {1, 2, 3, 4}));  // two values short
  a = read_idx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("ends at byte offset 16 while reading the values"),
            absl::string_view::npos)
      << a.status();

  std::string f32 = idx_bytes({1}, {0, 0, 0, 0});
  f32[2] = 0x0d;  // float32 values
  spill(path, f32);
  a = read_idx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("IDX type 0x0d is not supported"), absl::string_view::npos)
      << a.status();

  spill(path, idx_bytes({2}, {1, 2, 3}));
  a = read_idx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("byte offset 10: trailing bytes"), absl::string_view::npos)
      << a.status();

  EXPECT_EQ(read_idx(dir.path() / "absent.idx").status().code(), absl::StatusCode::kNotFound);
}

std::vector<std::string> read_records(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& path : paths) {
    auto reader = TFRecordReader::open(path);
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) break;
    std::string rec;
    while (*(*reader)->next(&rec)) out.push_back(rec);
  }
  return out;
}

TEST(IdxToTFRecord, ShardsHoldEveryExampleInOrderWithItsPixelsAndLabel) {
  TempDir dir;
  IdxConversion job;
  job.images = kImages;
  job.labels = kLabels;
  job.output_dir = (dir.path() / "shards").string();
  job.shards = 3;
  job.compression = Compression::kGzip;
  job.limit = 500;
  auto done = convert_idx_to_tfrecord(job);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->examples, 500u);
  EXPECT_EQ(done->height, 28u);
  EXPECT_EQ(done->depth, 1u);
  EXPECT_EQ(done->shard_examples, (std::vector<uint64_t>{166, 167, 167}));
  ASSERT_EQ(done->shard_paths.size(), 3u);
  EXPECT_EQ(done->shard_paths[1], job.output_dir + "/t10k-00001-of-00003.tfrecord.gz");

  auto images = read_idx(kImages);
  auto labels = read_idx(kLabels);
  ASSERT_TRUE(images.ok() && labels.ok());
  const auto records = read_records(done->shard_paths);
  ASSERT_EQ(records.size(), 500u);
  for (size_t i = 0; i < records.size(); ++i) {
    tensorflow::Example ex;
    ASSERT_TRUE(ex.ParseFromString(records[i]));
    const auto& f = ex.features().feature();
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f.at("label").int64_list().value(0), labels->values[i]);
    const std::string& pixels = f.at("image_raw").bytes_list().value(0);
    ASSERT_EQ(pixels.size(), 784u);
    ASSERT_EQ(0, std::memcmp(pixels.data(), images->values.data() + i * 784, 784))
        << "example " << i;
  }
}

TEST(IdxToTFRecord, JpegShardsDecodeToTheUpscaledImage) {
  TempDir dir;
  IdxConversion job;
  job.images = kImages;
  job.labels = kLabels;
  job.output_dir = dir.path().string();
  job.prefix = "flowers_like";
  job.limit = 20;
  job.jpeg = true;
  job.jpeg_size = 64;
  job.jpeg_quality = 95;
  auto done = convert_idx_to_tfrecord(job);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->shard_paths[0], job.output_dir + "/flowers_like-00000-of-00001.tfrecord");
  auto images = read_idx(kImages);
  ASSERT_TRUE(images.ok());
  const auto records = read_records(done->shard_paths);
  ASSERT_EQ(records.size(), 20u);
  for (size_t i = 0; i < records.size(); ++i) {
    tensorflow::Example ex;
    ASSERT_TRUE(ex.ParseFromString(records[i]));
    auto decoded = decode_jpeg(ex.features().feature().at("image_raw").bytes_list().value(0));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    ASSERT_EQ(decoded->height, 64);
    ASSERT_EQ(decoded->channels, 1);
    // Against the same upscale done here: JPEG at quality 95 keeps the mean error small.
    Image original;
    original.height = original.width = 28;
    original.channels = 1;
    original.pixels.assign(images->values.begin() + i * 784,
                           images->values.begin() + (i + 1) * 784);
    const Image want = to_uint8(resize_bilinear(to_float(original), 64, 64));
    double err = 0;
    for (size_t p = 0; p < want.pixels.size(); ++p)
      err += std::abs(want.pixels[p] - decoded->pixels[p]);
    EXPECT_LT(err / want.pixels.size(), 3.0) << "example " << i;
  }
}

// The input_fn of the demo: shards -> interleave -> parse (2 threads) -> batch, against the IDX.
TEST(IdxToTFRecord, ADatasetPipelineParsesTheShardsBackIntoImagesAndLabels) {
  TempDir dir;
  IdxConversion job;
  job.images = kImages;
  job.labels = kLabels;
  job.output_dir = dir.path().string();
  job.shards = 2;
  job.limit = 300;
  ASSERT_TRUE(convert_idx_to_tfrecord(job).ok());
  InterleaveOptions one_file_at_a_time;  // cycle_length 1: file order, so the IDX order
  auto ds = Dataset::list_files((dir.path() / "t10k-*").string())
                ->interleave_tfrecords(one_file_at_a_time)
                ->map(mnist_parse_fn(28, 28, 1, false), 2)
                ->batch(128, /*drop_remainder=*/false, /*pad_to_full=*/true)
                ->prefetch(2);
  auto batches = collect(*ds);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 3u);  // 128 + 128 + 44 padded to 128
  const auto images = read_idx(kImages);
  const auto labels = read_idx(kLabels);
  ASSERT_TRUE(images.ok() && labels.ok());
  for (size_t b = 0; b < 3; ++b) {
    const auto& batch = (*batches)[b];
    EXPECT_EQ(batch.at("image").shape, (std::vector<int64_t>{128, 28, 28, 1}));
    for (int64_t r = 0; r < 128; ++r) {
      const size_t i = b * 128 + static_cast<size_t>(r);
      if (i >= 300) {
        EXPECT_EQ(batch.at("mask").floats[r], 0.0F);
        continue;
      }
      EXPECT_EQ(batch.at("mask").floats[r], 1.0F);
      EXPECT_EQ(batch.at("label").ints[r], labels->values[i]);
      for (int p : {0, 300, 783}) {
        ASSERT_FLOAT_EQ(batch.at("image").floats[r * 784 + p], images->values[i * 784 + p] / 255.0F)
            << i;
      }
    }
  }
  // The same pipeline over JPEG shards decodes and resizes to the asked size.
  job.output_dir = (dir.path() / "jpeg").string();
  job.jpeg = true;
  job.jpeg_size = 32;
  ASSERT_TRUE(convert_idx_to_tfrecord(job).ok());
  auto jpeg = collect(*Dataset::list_files(job.output_dir + "/t10k-*")
                           ->interleave_tfrecords(one_file_at_a_time)
                           ->map(mnist_parse_fn(28, 28, 1, true))
                           ->take(3));
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  EXPECT_EQ((*jpeg)[2].at("image").shape, (std::vector<int64_t>{28, 28, 1}));
  // A spec that does not fit the data is an error naming the problem.
  auto wrong = collect(*Dataset::list_files((dir.path() / "t10k-*").string())
                            ->interleave_tfrecords(one_file_at_a_time)
                            ->map(mnist_parse_fn(32, 32, 1, false)));
  EXPECT_NE(wrong.status().message().find(
                "map, element 0: image_raw: decode_raw: 784 bytes cannot be a 32x32x1 image"),
            absl::string_view::npos)
      << wrong.status();
}

TEST(IdxToTFRecord, ParallelShardWritingGivesTheSameBytes) {
  TempDir dir;
  IdxConversion job;
  job.images = kImages;
  job.labels = kLabels;
  job.shards = 3;
  job.limit = 90;
  job.jpeg = true;
  job.jpeg_size = 40;
  job.output_dir = (dir.path() / "one").string();
  job.threads = 1;
  auto one = convert_idx_to_tfrecord(job);
  job.output_dir = (dir.path() / "three").string();
  job.threads = 3;
  auto three = convert_idx_to_tfrecord(job);
  ASSERT_TRUE(one.ok() && three.ok());
  EXPECT_EQ(one->image_bytes, three->image_bytes);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(read_records({one->shard_paths[s]}), read_records({three->shard_paths[s]}))
        << "shard " << s;
  }
}

TEST(IdxToTFRecord, RefusesMismatchedFiles) {
  TempDir dir;
  const std::string labels = (dir.path() / "labels.idx").string();
  spill(labels, idx_bytes({3}, {1, 2, 3}));
  IdxConversion job;
  job.images = kImages;
  job.labels = labels;
  job.output_dir = dir.path().string();
  auto done = convert_idx_to_tfrecord(job);
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("holds 10000 images but " + labels + " holds 3 labels"),
            absl::string_view::npos)
      << done.status();
  job.images = labels;  // rank 1 is no image file
  done = convert_idx_to_tfrecord(job);
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("rank 3 or 4"), absl::string_view::npos) << done.status();
}

// An image file of 0 rows or 0 columns crashed `convert-idx --jpeg` (SIGSEGV in the encoder).
TEST(IdxToTFRecord, RefusesImagesOfNoRowsOrColumns) {
  TempDir dir;
  const std::string labels = (dir.path() / "labels.idx").string();
  const std::string images = (dir.path() / "images.idx").string();
  spill(labels, idx_bytes({1}, {1}));
  for (const auto& [dims, named] :
       {std::pair{std::vector<uint32_t>{1, 0, 28}, "byte offset 8: an image has rows of 0"},
        std::pair{std::vector<uint32_t>{1, 28, 0}, "byte offset 12: an image has columns of 0"},
        std::pair{std::vector<uint32_t>{1, 2, 2, 0},
                  "byte offset 16: an image has channels of 0"}}) {
    spill(images, idx_bytes(dims, {}));
    IdxConversion job;
    job.images = images;
    job.labels = labels;
    job.output_dir = (dir.path() / "out").string();
    job.jpeg = true;
    const auto done = convert_idx_to_tfrecord(job);
    ASSERT_FALSE(done.ok());
    EXPECT_EQ(done.status().message(),
              images + ": " + named + "; each dimension of an image is at least 1");
  }
}

// A record's label is one of the classifiers' 10 classes, or the parse refuses it: a label of 12
// would train a 10-way softmax on a class it has no output for.
TEST(IdxToTFRecord, TheParseRefusesALabelOutsideTheTenClasses) {
  const auto parsed = [](int64_t label) {
    ExampleBuilder b;
    b.bytes("image_raw", {std::string(28 * 28, '\x7f')}).ints("label", {label});
    Element in;
    in.emplace("record", scalar_bytes(b.serialize()));
    return mnist_parse_fn(28, 28, 1, false)(std::move(in));
  };
  ASSERT_TRUE(parsed(9).ok());
  EXPECT_EQ(parsed(12).status().message(),
            "an MNIST-family record: feature 'label' value 0 is 12, outside [0, 10) (the zoo's "
            "classifiers' 10 classes)");
  EXPECT_THAT(std::string(parsed(-1).status().message()), ::testing::HasSubstr("is -1"));
}

}  // namespace idx_records_test
}  // namespace tpusim::runtime::data
