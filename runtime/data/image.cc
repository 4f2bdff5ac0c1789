#include "runtime/data/image.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <turbojpeg.h>

#include "common/host_budget.h"
#include "common/strings.h"

namespace tpusim::runtime::data {
namespace {

struct TjCloser {
  void operator()(void* h) const { tjDestroy(h); }
};
using TjHandle = std::unique_ptr<void, TjCloser>;

template <typename T>
ImageT<T> blank_like(int height, int width, int channels) {
  ImageT<T> out;
  out.height = height;
  out.width = width;
  out.channels = channels;
  out.pixels.resize(static_cast<size_t>(height) * width * channels);
  return out;
}

}  // namespace

absl::StatusOr<Image> decode_raw(const std::string& bytes, int height, int width, int channels) {
  const size_t want = static_cast<size_t>(height) * width * channels;
  if (height <= 0 || width <= 0 || channels <= 0) {
    return absl::InvalidArgumentError(
        str_cat("decode_raw: bad shape ", height, "x", width, "x", channels));
  }
  if (bytes.size() != want) {
    return absl::InvalidArgumentError(str_cat("decode_raw: ", bytes.size(), " bytes cannot be a ",
                                              height, "x", width, "x", channels, " image (", want,
                                              " bytes)"));
  }
  Image out = blank_like<uint8_t>(height, width, channels);
  std::copy(bytes.begin(), bytes.end(), out.pixels.begin());
  return out;
}

absl::StatusOr<Image> decode_jpeg(const std::string& bytes, int channels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(
        str_cat("decode_jpeg: channels must be 0, 1 or 3, not ", channels));
  }
  TjHandle tj(tjInitDecompress());
  if (tj == nullptr) return absl::InternalError("decode_jpeg: TurboJPEG failed to initialise");
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  if (tjDecompressHeader3(tj.get(), src, bytes.size(), &width, &height, &subsamp, &colorspace) !=
      0) {
    return absl::InvalidArgumentError(
        str_cat("decode_jpeg: not a JPEG (", bytes.size(), " bytes): ", tjGetErrorStr2(tj.get())));
  }
  if (channels == 0) channels = colorspace == TJCS_GRAY ? 1 : 3;
  // The header's size is allocated before the scan is read, and a few hundred bytes of
  // progressive JPEG can claim 65500 x 65500 (an EOB run covers 32767 blocks), so the size is
  // bounded, not trusted.
  if (static_cast<uint64_t>(width) * static_cast<uint64_t>(height) > kMaxJpegPixels) {
    return absl::InvalidArgumentError(str_cat("decode_jpeg: a ", width, "x", height,
                                              " image is over the limit of ", kMaxJpegPixels,
                                              " pixels (", bytes.size(), " bytes)"));
  }
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  const uint64_t decoded_bytes = static_cast<uint64_t>(width) * height * channels;
  if (absl::Status fits = check_host_memory(
          str_cat("decode_jpeg: a ", width, "x", height, "x", channels, " image"), decoded_bytes);
      !fits.ok()) {
    return fits;
  }
  // The pixels go into a buffer nothing has touched, and the decode stops at its first warning
  // (a truncated scan, say: an error here, as in tf.io.decode_jpeg, no grey fill) and after 500
  // progressive scans: a few hundred bytes claiming 16384 x 16384 cost the rows decoded before
  // the data ran out, not a zeroed 268 MB image and a full decode.
  std::unique_ptr<unsigned char[]> decoded(new unsigned char[decoded_bytes]);
  if (tjDecompress2(tj.get(), src, bytes.size(), decoded.get(), width, 0, height, format,
                    TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0) {
    return absl::DataLossError(str_cat("decode_jpeg: corrupt JPEG (", bytes.size(), " bytes, ",
                                       width, "x", height, "): ", tjGetErrorStr2(tj.get())));
  }
  Image out;
  out.height = height;
  out.width = width;
  out.channels = channels;
  out.pixels.assign(decoded.get(), decoded.get() + decoded_bytes);
  return out;
}

absl::StatusOr<std::string> encode_jpeg(const Image& image, int quality) {
  if (image.channels != 1 && image.channels != 3) {
    return absl::InvalidArgumentError(
        str_cat("encode_jpeg: 1 or 3 channels, not ", image.channels));
  }
  if (quality < 1 || quality > 100)
    return absl::InvalidArgumentError(str_cat("encode_jpeg: quality ", quality));
  TjHandle tj(tjInitCompress());
  if (tj == nullptr) return absl::InternalError("encode_jpeg: TurboJPEG failed to initialise");
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;  // NOLINT(runtime/int): TurboJPEG's type
  const bool gray = image.channels == 1;
  if (tjCompress2(tj.get(), image.pixels.data(), image.width, 0, image.height,
                  gray ? TJPF_GRAY : TJPF_RGB, &jpeg, &size, gray ? TJSAMP_GRAY : TJSAMP_420,
                  quality, 0) != 0) {
    const std::string why = tjGetErrorStr2(tj.get());
    tjFree(jpeg);
    return absl::InternalError(str_cat("encode_jpeg: ", why));
  }
  std::string out(reinterpret_cast<const char*>(jpeg), size);
  tjFree(jpeg);
  return out;
}

FloatImage to_float(const Image& image) {
  FloatImage out = blank_like<float>(image.height, image.width, image.channels);
  for (size_t i = 0; i < image.pixels.size(); ++i)
    out.pixels[i] = image.pixels[i] * (1.0F / 255.0F);
  return out;
}

Image to_uint8(const FloatImage& image) {
  Image out = blank_like<uint8_t>(image.height, image.width, image.channels);
  for (size_t i = 0; i < image.pixels.size(); ++i) {
    out.pixels[i] =
        static_cast<uint8_t>(std::clamp(std::lround(image.pixels[i] * 255.0F), 0L, 255L));
  }
  return out;
}

FloatImage resize_bilinear(const FloatImage& image, int height, int width) {
  FloatImage out = blank_like<float>(height, width, image.channels);
  // Source coordinate of each output row/column: (o + 0.5) * scale - 0.5 (half-pixel centres).
  struct Lerp {
    int lo, hi;
    float frac;
  };
  auto lerps = [](int in, int out_size) {
    std::vector<Lerp> v(out_size);
    const float scale = static_cast<float>(in) / static_cast<float>(out_size);
    for (int o = 0; o < out_size; ++o) {
      const float src = (static_cast<float>(o) + 0.5F) * scale - 0.5F;
      const float fl = std::floor(src);
      v[o] = {std::max(static_cast<int>(fl), 0), std::min(static_cast<int>(std::ceil(src)), in - 1),
              src - fl};
    }
    return v;
  };
  const auto ys = lerps(image.height, height), xs = lerps(image.width, width);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < image.channels; ++c) {
        const float tl = image.at(ys[y].lo, xs[x].lo, c), tr = image.at(ys[y].lo, xs[x].hi, c);
        const float bl = image.at(ys[y].hi, xs[x].lo, c), br = image.at(ys[y].hi, xs[x].hi, c);
        const float top = tl + (tr - tl) * xs[x].frac;
        const float bottom = bl + (br - bl) * xs[x].frac;
        out.at(y, x, c) = top + (bottom - top) * ys[y].frac;
      }
    }
  }
  return out;
}

absl::StatusOr<FloatImage> crop(const FloatImage& image, int top, int left, int height, int width) {
  if (top < 0 || left < 0 || height <= 0 || width <= 0 || top + height > image.height ||
      left + width > image.width) {
    return absl::InvalidArgumentError(str_cat("crop: a ", height, "x", width, " window at (", top,
                                              ", ", left, ") does not fit a ", image.height, "x",
                                              image.width, " image"));
  }
  FloatImage out = blank_like<float>(height, width, image.channels);
  const size_t row = static_cast<size_t>(width) * image.channels;
  for (int y = 0; y < height; ++y) {
    const float* src = &image.at(top + y, left, 0);
    std::copy(src, src + row, &out.at(y, 0, 0));
  }
  return out;
}

absl::StatusOr<FloatImage> random_crop(const FloatImage& image, int height, int width,
                                       std::mt19937_64& rng) {
  if (height > image.height || width > image.width)
    return crop(image, 0, 0, height, width);  // its error
  const int top = std::uniform_int_distribution<int>(0, image.height - height)(rng);
  const int left = std::uniform_int_distribution<int>(0, image.width - width)(rng);
  return crop(image, top, left, height, width);
}

FloatImage flip_left_right(const FloatImage& image) {
  FloatImage out = image;
  for (int y = 0; y < image.height; ++y) {
    for (int x = 0; x < image.width; ++x) {
      for (int c = 0; c < image.channels; ++c)
        out.at(y, x, c) = image.at(y, image.width - 1 - x, c);
    }
  }
  return out;
}

FloatImage random_flip_left_right(const FloatImage& image, std::mt19937_64& rng) {
  return std::bernoulli_distribution(0.5)(rng) ? flip_left_right(image) : image;
}

FloatImage adjust_brightness(const FloatImage& image, float delta) {
  FloatImage out = image;
  for (float& p : out.pixels) p += delta;
  return out;
}

FloatImage random_brightness(const FloatImage& image, float max_delta, std::mt19937_64& rng) {
  return adjust_brightness(image,
                           std::uniform_real_distribution<float>(-max_delta, max_delta)(rng));
}

FloatImage adjust_contrast(const FloatImage& image, float factor) {
  FloatImage out = image;
  const size_t n = static_cast<size_t>(image.height) * image.width;
  for (int c = 0; c < image.channels; ++c) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += image.pixels[i * image.channels + c];
    const auto mean = static_cast<float>(sum / static_cast<double>(std::max<size_t>(n, 1)));
    for (size_t i = 0; i < n; ++i) {
      float& p = out.pixels[i * image.channels + c];
      p = (p - mean) * factor + mean;
    }
  }
  return out;
}

FloatImage random_contrast(const FloatImage& image, float lower, float upper,
                           std::mt19937_64& rng) {
  return adjust_contrast(image, std::uniform_real_distribution<float>(lower, upper)(rng));
}

absl::StatusOr<FloatImage> normalize(const FloatImage& image, const std::vector<float>& mean,
                                     const std::vector<float>& stddev) {
  auto fits = [&](const std::vector<float>& v) {
    return v.size() == 1 || static_cast<int>(v.size()) == image.channels;
  };
  if (!fits(mean) || !fits(stddev)) {
    return absl::InvalidArgumentError(str_cat("normalize: ", mean.size(), " means and ",
                                              stddev.size(), " stddevs for ", image.channels,
                                              " channels (give 1 or one per channel)"));
  }
  FloatImage out = image;
  for (size_t i = 0; i < out.pixels.size(); ++i) {
    const size_t c = i % image.channels;
    const float m = mean.size() == 1 ? mean[0] : mean[c];
    const float s = stddev.size() == 1 ? stddev[0] : stddev[c];
    out.pixels[i] = (out.pixels[i] - m) / s;
  }
  return out;
}

absl::StatusOr<std::vector<float>> to_hwcn(const std::vector<FloatImage>& batch) {
  if (batch.empty()) return std::vector<float>{};
  const FloatImage& first = batch.front();
  const size_t n = batch.size();
  std::vector<float> out(first.pixels.size() * n);
  for (size_t b = 0; b < n; ++b) {
    const FloatImage& im = batch[b];
    if (im.height != first.height || im.width != first.width || im.channels != first.channels) {
      return absl::InvalidArgumentError(
          str_cat("to_hwcn: image ", b, " is ", im.height, "x", im.width, "x", im.channels,
                  ", image 0 is ", first.height, "x", first.width, "x", first.channels));
    }
    for (size_t i = 0; i < im.pixels.size(); ++i) out[i * n + b] = im.pixels[i];
  }
  return out;
}

}  // namespace tpusim::runtime::data
