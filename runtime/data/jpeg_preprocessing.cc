#include "runtime/data/jpeg_preprocessing.h"

#include <cmath>
#include <random>

#include "common/strings.h"
#include "runtime/data/example.h"
#include "runtime/data/image.h"

namespace tpusim::runtime::data {
namespace {

// SplitMix64's finaliser: neighbouring indices give unrelated generator seeds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int resize_size(int image_size) {
  return static_cast<int>(std::lround(static_cast<double>(image_size) * 8.0 / 7.0));
}

MapFn jpeg_preprocess_fn(const JpegPreprocessing& options) {
  FeatureSpec spec;
  spec["image_raw"] = fixed_len(FeatureType::kBytes, {});
  spec["label"] = in_range(fixed_len(FeatureType::kInt64, {}), 0, options.classes,
                           str_cat("the model's ", options.classes, " classes"));
  const JpegPreprocessing o = options;
  return [spec, o](Element in) -> absl::StatusOr<Element> {
    const auto record = in.find("record");
    if (record == in.end() || record->second.bytes.size() != 1) {
      return absl::InvalidArgumentError("jpeg_preprocess_fn: the element has no scalar 'record'");
    }
    std::mt19937_64 rng;
    if (o.training) {
      const auto index = in.find("index");
      if (index == in.end() || index->second.ints.size() != 1) {
        return absl::InvalidArgumentError(
            "jpeg_preprocess_fn: training needs each element's 'index' for its random crop and "
            "flip (enumerate() the dataset before the map)");
      }
      rng.seed(mix(o.seed ^ mix(static_cast<uint64_t>(index->second.ints[0]))));
    }
    auto ex = parse_example(record->second.bytes[0], spec, "a JPEG record");
    if (!ex.ok()) return ex.status();
    auto decoded = decode_jpeg(ex->at("image_raw").bytes[0], o.channels);
    if (!decoded.ok())
      return absl::InvalidArgumentError(str_cat("image_raw: ", decoded.status().message()));
    const int side = resize_size(o.image_size);
    const FloatImage resized = resize_bilinear(to_float(*decoded), side, side);
    absl::StatusOr<FloatImage> image =
        o.training ? random_crop(resized, o.image_size, o.image_size, rng)
                   : crop(resized, (side - o.image_size) / 2, (side - o.image_size) / 2,
                          o.image_size, o.image_size);
    if (!image.ok()) return image.status();
    FloatImage out = o.training ? random_flip_left_right(*image, rng) : *std::move(image);
    Element result;  // emplaced, not from an initializer list, which would copy the pixels
    result.emplace("image",
                   image_value(std::move(out.pixels), o.image_size, o.image_size, o.channels));
    result.emplace("label", std::move(ex->at("label")));
    return result;
  };
}

}  // namespace tpusim::runtime::data
