#include "runtime/data/jpeg_preprocessing.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/data/example.h"
#include "runtime/data/image.h"

namespace tpusim::runtime::data {
namespace jpeg_preprocessing_test {

using ::testing::HasSubstr;

// A 32x32 grey JPEG whose pixel (y, x) is 4x + 2y (a ramp: every crop and flip differs), as a
// {"record", "index"} element.
Element ramp_record(int64_t index, int64_t label = 7) {
  Image im;
  im.height = im.width = 32;
  im.channels = 1;
  for (int y = 0; y < 32; ++y)
    for (int x = 0; x < 32; ++x) im.pixels.push_back(static_cast<uint8_t>(4 * x + 2 * y));
  auto jpeg = encode_jpeg(im, 100);
  EXPECT_TRUE(jpeg.ok());
  const std::string record =
      ExampleBuilder().bytes("image_raw", {*jpeg}).ints("label", {label}).serialize();
  FeatureValue r;
  r.type = FeatureType::kBytes;
  r.bytes = {record};
  FeatureValue i;
  i.type = FeatureType::kInt64;
  i.ints = {index};
  return {{"record", r}, {"index", i}};
}

JpegPreprocessing options(bool training) {
  JpegPreprocessing o;
  o.image_size = 24;
  o.training = training;
  o.seed = 5;
  return o;
}

TEST(JpegPreprocessing, ResizesBySevenEighthsOfTheCropLikeImageNet) {
  EXPECT_EQ(resize_size(224), 256);
  EXPECT_EQ(resize_size(24), 27);
}

TEST(JpegPreprocessing, TrainingGivesAnSxSImageTheSameForTheSameIndex) {
  const MapFn fn = jpeg_preprocess_fn(options(true));
  auto a = fn(ramp_record(3));
  auto b = fn(ramp_record(3));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  const FeatureValue& image = a->at("image");
  EXPECT_EQ(image.shape, (std::vector<int64_t>{24, 24, 1}));
  EXPECT_EQ(image.floats.size(), 24u * 24u);
  EXPECT_EQ(image.floats, b->at("image").floats);
  EXPECT_EQ(a->at("label").ints, std::vector<int64_t>{7});
  // Other indices draw other crops and flips: among 16 of them several distinct images.
  std::set<std::vector<float>> seen;
  for (int64_t i = 0; i < 16; ++i) {
    auto e = fn(ramp_record(i));
    ASSERT_TRUE(e.ok());
    seen.insert(e->at("image").floats);
  }
  EXPECT_GE(seen.size(), 4u);
}

TEST(JpegPreprocessing, TrainingFlipsSomeImages) {
  // On the ramp a flipped image falls from left to right along its first row.
  const MapFn fn = jpeg_preprocess_fn(options(true));
  int flipped = 0;
  for (int64_t i = 0; i < 32; ++i) {
    auto e = fn(ramp_record(i));
    ASSERT_TRUE(e.ok());
    const auto& px = e->at("image").floats;
    if (px[0] > px[23]) ++flipped;
  }
  EXPECT_GT(flipped, 4);
  EXPECT_LT(flipped, 28);
}

TEST(JpegPreprocessing, EvalTakesTheCentralCropOfTheResizedImage) {
  const MapFn fn = jpeg_preprocess_fn(options(false));
  auto e = fn(ramp_record(0));
  ASSERT_TRUE(e.ok()) << e.status();
  // The same steps by hand: decode, resize to 27, crop at (1, 1).
  auto record = ramp_record(0);
  auto ex = parse_example(record.at("record").bytes[0],
                          {{"image_raw", fixed_len(FeatureType::kBytes, {})}});
  ASSERT_TRUE(ex.ok());
  auto decoded = decode_jpeg(ex->at("image_raw").bytes[0], 1);
  ASSERT_TRUE(decoded.ok());
  auto want = crop(resize_bilinear(to_float(*decoded), 27, 27), 1, 1, 24, 24);
  ASSERT_TRUE(want.ok());
  EXPECT_EQ(e->at("image").floats, want->pixels);
}

TEST(JpegPreprocessing, ErrorsSayWhatIsMissingOrBroken) {
  Element no_index = ramp_record(0);
  no_index.erase("index");
  EXPECT_THAT(jpeg_preprocess_fn(options(true))(no_index).status().message(),
              HasSubstr("enumerate()"));
  EXPECT_TRUE(jpeg_preprocess_fn(options(false))(no_index).ok());  // eval draws nothing
  Element bad = ramp_record(0);
  bad.at("record").bytes[0] =
      ExampleBuilder().bytes("image_raw", {"not a jpeg"}).ints("label", {1}).serialize();
  EXPECT_THAT(jpeg_preprocess_fn(options(false))(bad).status().message(), HasSubstr("image_raw"));
}

TEST(Dataset, EnumerateCountsAcrossRepeatedPasses) {
  auto ds = Dataset::range(3)->repeat(2)->enumerate(10);
  auto all = collect(*ds);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ((*all)[i].at("index").ints[0], static_cast<int64_t>(10 + i));
    EXPECT_EQ((*all)[i].at("value").ints[0], static_cast<int64_t>(i % 3));
  }
  auto twice = collect(*Dataset::range(2)->enumerate()->enumerate());
  EXPECT_THAT(twice.status().message(), HasSubstr("already has an 'index'"));
}

}  // namespace jpeg_preprocessing_test
}  // namespace tpusim::runtime::data
