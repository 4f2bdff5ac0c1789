#pragma once
// Image ops for input_fn, after tf.image: images are HWC, uint8 as decoded or float32 once
// converted. Random ops take an explicit std::mt19937_64 so a seeded pipeline is deterministic.
// JPEG goes through libjpeg-turbo's TurboJPEG API.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::runtime::data {

template <typename T>
struct ImageT {
  int height = 0, width = 0, channels = 0;
  std::vector<T> pixels;  // HWC, row-major
  T& at(int y, int x, int c) { return pixels[(static_cast<size_t>(y) * width + x) * channels + c]; }
  const T& at(int y, int x, int c) const {
    return pixels[(static_cast<size_t>(y) * width + x) * channels + c];
  }
};
using Image = ImageT<uint8_t>;
using FloatImage = ImageT<float>;

// `bytes` as a height x width x channels uint8 image (tf.io.decode_raw then reshape); the size
// must match exactly.
absl::StatusOr<Image> decode_raw(const std::string& bytes, int height, int width, int channels);

// The most pixels decode_jpeg decodes (16384 x 16384; 805 MB at 3 channels): a header claiming
// more is refused before anything is allocated.
constexpr uint64_t kMaxJpegPixels = uint64_t{1} << 28;
// channels 0 keeps the file's (1 or 3); 1 or 3 converts.
absl::StatusOr<Image> decode_jpeg(const std::string& bytes, int channels = 0);
absl::StatusOr<std::string> encode_jpeg(const Image& image, int quality = 90);

// uint8 -> float in [0, 1] (tf.image.convert_image_dtype) and back (rounded, saturated).
FloatImage to_float(const Image& image);
Image to_uint8(const FloatImage& image);

// tf.image.resize(method="bilinear", antialias=False): half-pixel centres, as TensorFlow 2.
FloatImage resize_bilinear(const FloatImage& image, int height, int width);

// A height x width window at (top, left); the window must fit.
absl::StatusOr<FloatImage> crop(const FloatImage& image, int top, int left, int height, int width);
// tf.image.random_crop: a uniformly placed window.
absl::StatusOr<FloatImage> random_crop(const FloatImage& image, int height, int width,
                                       std::mt19937_64& rng);
FloatImage flip_left_right(const FloatImage& image);
FloatImage random_flip_left_right(const FloatImage& image, std::mt19937_64& rng);
// tf.image.adjust_brightness: x + delta. random_brightness: delta uniform in [-max_delta,
// max_delta).
FloatImage adjust_brightness(const FloatImage& image, float delta);
FloatImage random_brightness(const FloatImage& image, float max_delta, std::mt19937_64& rng);
// tf.image.adjust_contrast: (x - mean) * factor + mean, the mean per channel over the image.
FloatImage adjust_contrast(const FloatImage& image, float factor);
FloatImage random_contrast(const FloatImage& image, float lower, float upper, std::mt19937_64& rng);
// (x - mean[c]) / stddev[c]; one value each broadcasts to every channel.
absl::StatusOr<FloatImage> normalize(const FloatImage& image, const std::vector<float>& mean,
                                     const std::vector<float>& stddev);

// A batch of equally sized HWC images as one HWCN buffer (the TPU-friendly layout the seeds'
// input_fn transposes to: the batch is the minor dimension).
absl::StatusOr<std::vector<float>> to_hwcn(const std::vector<FloatImage>& batch);

}  // namespace tpusim::runtime::data
