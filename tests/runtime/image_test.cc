#include "runtime/data/image.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include "tests/under_sanitizer.h"

namespace tpusim::runtime::data {
namespace image_test {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

FloatImage make(int h, int w, int c, std::vector<float> px) {
  FloatImage im;
  im.height = h;
  im.width = w;
  im.channels = c;
  im.pixels = std::move(px);
  return im;
}

TEST(Image, ResizeBilinearUsesHalfPixelCentresLikeTensorFlow2) {
  // One row [0, 4] to four columns: sources at -0.25, 0.25, 0.75, 1.25, clamped at the edges.
  const FloatImage out = resize_bilinear(make(1, 2, 1, {0, 4}), 1, 4);
  EXPECT_THAT(out.pixels, ElementsAre(0.0F, 1.0F, 3.0F, 4.0F));
  // 2x2 to 3x3: the centre is the mean of the four corners.
  const FloatImage sq = resize_bilinear(make(2, 2, 1, {0, 4, 8, 12}), 3, 3);
  EXPECT_FLOAT_EQ(sq.at(1, 1, 0), 6.0F);
  // Downscale 4 -> 2 samples at 0.5 and 2.5: means of neighbours.
  const FloatImage down = resize_bilinear(make(1, 4, 1, {0, 2, 4, 6}), 1, 2);
  EXPECT_THAT(down.pixels, ElementsAre(1.0F, 5.0F));
}

TEST(Image, CropFlipBrightnessContrastNormalize) {
  const FloatImage im = make(2, 3, 1, {1, 2, 3, 4, 5, 6});
  auto c = crop(im, 1, 1, 1, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(c->pixels, ElementsAre(5.0F, 6.0F));
  EXPECT_THAT(crop(im, 1, 2, 2, 2).status().message(), HasSubstr("does not fit a 2x3 image"));
  EXPECT_THAT(flip_left_right(im).pixels, ElementsAre(3.0F, 2.0F, 1.0F, 6.0F, 5.0F, 4.0F));
  EXPECT_THAT(adjust_brightness(im, 0.5F).pixels, ElementsAre(1.5F, 2.5F, 3.5F, 4.5F, 5.5F, 6.5F));
  // Mean 3.5; factor 2 doubles each distance from it.
  EXPECT_THAT(adjust_contrast(im, 2.0F).pixels, ElementsAre(-1.5F, 0.5F, 2.5F, 4.5F, 6.5F, 8.5F));
  auto n = normalize(make(1, 1, 2, {1, 10}), {1, 4}, {1, 2});
  ASSERT_TRUE(n.ok());
  EXPECT_THAT(n->pixels, ElementsAre(0.0F, 3.0F));
  EXPECT_FALSE(normalize(im, {1, 2, 3}, {1}).ok());
}

TEST(Image, ContrastIsPerChannel) {
  const FloatImage rgb = make(1, 2, 2, {0, 10, 2, 30});  // channel means 1 and 20
  EXPECT_THAT(adjust_contrast(rgb, 0.0F).pixels, ElementsAre(1.0F, 20.0F, 1.0F, 20.0F));
}

TEST(Image, RandomOpsAreSeededAndStayInRange) {
  std::vector<float> px(10 * 10);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<float>(i);
  const FloatImage im = make(10, 10, 1, px);
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 20; ++i) {
    auto ca = random_crop(im, 4, 3, a);
    auto cb = random_crop(im, 4, 3, b);
    ASSERT_TRUE(ca.ok() && cb.ok());
    EXPECT_EQ(ca->pixels, cb->pixels);
    // A window of the source: consecutive columns, rows 10 apart.
    EXPECT_EQ(ca->at(0, 1, 0) - ca->at(0, 0, 0), 1.0F);
    EXPECT_EQ(ca->at(1, 0, 0) - ca->at(0, 0, 0), 10.0F);
    const FloatImage bright = random_brightness(im, 0.25F, a);
    EXPECT_EQ(random_brightness(im, 0.25F, b).pixels, bright.pixels);
    EXPECT_LE(std::abs(bright.pixels[0] - im.pixels[0]), 0.25F);
  }
  int flipped = 0;
  for (int i = 0; i < 200; ++i) flipped += random_flip_left_right(im, a).pixels[0] != im.pixels[0];
  EXPECT_GT(flipped, 60);  // about half of 200
  EXPECT_LT(flipped, 140);
  EXPECT_FALSE(random_crop(im, 11, 3, a).ok());
}

TEST(Image, HwcnPutsTheBatchInnermost) {
  auto hwcn = to_hwcn({make(1, 2, 1, {1, 2}), make(1, 2, 1, {3, 4}), make(1, 2, 1, {5, 6})});
  ASSERT_TRUE(hwcn.ok());
  EXPECT_THAT(*hwcn, ElementsAre(1.0F, 3.0F, 5.0F, 2.0F, 4.0F, 6.0F));
  EXPECT_THAT(to_hwcn({make(1, 2, 1, {1, 2}), make(2, 1, 1, {3, 4})}).status().message(),
              HasSubstr("image 1 is 2x1x1, image 0 is 1x2x1"));
}

TEST(Image, DecodeRawChecksTheSize) {
  auto im = decode_raw(std::string("\x01\x02\x03\x04\x05\x06", 6), 2, 3, 1);
  ASSERT_TRUE(im.ok());
  EXPECT_EQ(im->at(1, 0, 0), 4);
  EXPECT_THAT(decode_raw("abc", 2, 2, 1).status().message(),
              HasSubstr("3 bytes cannot be a 2x2x1 image"));
}

// An 8 x 8 grey JPEG whose frame header (SOF0: FF C0, length, precision, height, width) is edited
// to claim `side` x `side`; empty if the encoder wrote no SOF0.
std::string grey_jpeg_claiming(uint16_t side) {
  Image grey;
  grey.height = 8;
  grey.width = 8;
  grey.channels = 1;
  grey.pixels.assign(64, 100);
  auto jpeg = encode_jpeg(grey, 90);
  if (!jpeg.ok()) return "";
  const size_t sof = jpeg->find("\xff\xc0");
  if (sof == std::string::npos) return "";
  std::string edited = *jpeg;
  for (size_t at : {sof + 5, sof + 7}) {  // height, then width: big-endian
    edited[at] = static_cast<char>(side >> 8);
    edited[at + 1] = static_cast<char>(side & 0xff);
  }
  return edited;
}

// A JPEG's frame header edited to claim
// 65500 x 65500: decode_jpeg allocated the 12.9 GB image before reading a scan of a few hundred
// bytes. Past kMaxJpegPixels it is refused before anything is allocated.
TEST(Image, AJpegClaimingAHugeSizeIsRefusedBeforeAllocating) {
  const std::string huge = grey_jpeg_claiming(65500);
  ASSERT_FALSE(huge.empty());
  auto decoded = decode_jpeg(huge);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("decode_jpeg: a 65500x65500 image is over the limit of 268435456 pixels"));
}

// The same edit to claim 16384 x 16384, at kMaxJpegPixels: the header is allowed, and the scan of
// one 8 x 8 block runs out in the first row. The decode stops there, refused as corrupt, and
// holds none of the 268 MB image it would have filled: it used to zero the image, decode every
// row of it from no data, and only then report the truncation.
TEST(Image, ATruncatedJpegAtTheSizeLimitStopsWithoutHoldingItsImage) {
  const std::string huge = grey_jpeg_claiming(16384);
  ASSERT_FALSE(huge.empty());
  rusage before{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &before), 0);
  auto decoded = decode_jpeg(huge);
  rusage after{};
  ASSERT_EQ(getrusage(RUSAGE_SELF, &after), 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_THAT(decoded.status().message(),
              HasSubstr("decode_jpeg: corrupt JPEG (" + std::to_string(huge.size()) +
                        " bytes, 16384x16384)"));
  // Peak resident set, in KiB: the image alone would be 262,144 KiB.
  // (Not under a sanitizer, whose shadow memory counts in the resident set too.)
  if (!testing::kUnderSanitizer) {
    EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 32 * 1024);
  }
}

TEST(Image, JpegRoundTripsAndRejectsCorruption) {
  Image rgb;
  rgb.height = 16;
  rgb.width = 24;
  rgb.channels = 3;
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 24; ++x) {
      rgb.pixels.push_back(static_cast<uint8_t>(x * 10));
      rgb.pixels.push_back(static_cast<uint8_t>(y * 15));
      rgb.pixels.push_back(128);
    }
  }
  auto jpeg = encode_jpeg(rgb, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  EXPECT_EQ(jpeg->substr(0, 2), "\xff\xd8");
  auto back = decode_jpeg(*jpeg);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->height, 16);
  EXPECT_EQ(back->width, 24);
  EXPECT_EQ(back->channels, 3);
  std::vector<float> want(rgb.pixels.begin(), rgb.pixels.end()),
      got(back->pixels.begin(), back->pixels.end());
  EXPECT_THAT(got, Pointwise(FloatNear(12.0F), want));
  auto gray = decode_jpeg(*jpeg, 1);
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ(gray->channels, 1);

  EXPECT_THAT(decode_jpeg("not a jpeg").status().message(), HasSubstr("not a JPEG (10 bytes)"));
  auto truncated = decode_jpeg(jpeg->substr(0, jpeg->size() / 2));
  EXPECT_FALSE(truncated.ok());
  EXPECT_FALSE(decode_jpeg(*jpeg, 2).ok());
  EXPECT_FALSE(encode_jpeg(rgb, 0).ok());
}

}  // namespace image_test
}  // namespace tpusim::runtime::data
