#include "runtime/data/mnist_records.h"

#include <filesystem>

#include "common/strings.h"
#include "runtime/data/example.h"
#include "runtime/data/idx.h"
#include "runtime/data/image.h"

namespace tpusim::runtime::data {
namespace {

// MNIST's and Fashion-MNIST's classes are 0-9.
constexpr uint8_t kMaxLabel = 9;

absl::Status check_job(const IdxConversion& job, const IdxArray& images, const IdxArray& labels) {
  if (images.dims.size() != 3 && images.dims.size() != 4) {
    return absl::InvalidArgumentError(
        str_cat(job.images, ": an image file has rank 3 or 4, not ", images.dims.size()));
  }
  // An image of no rows, columns or channels is not an image (the JPEG encoder and the trainer's
  // shapes take at least one of each): refused naming the dimension and its header offset.
  for (size_t d = 1; d < images.dims.size(); ++d) {
    if (images.dims[d] == 0) {
      static constexpr const char* kNames[] = {"", "rows", "columns", "channels"};
      return absl::InvalidArgumentError(str_cat(job.images, ": byte offset ", 4 + 4 * d,
                                                ": an image has ", kNames[d],
                                                " of 0; each dimension of an image is at least 1"));
    }
  }
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(
        str_cat(job.labels, ": a label file has rank 1, not ", labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(str_cat(job.images, " holds ", images.dims[0], " images but ",
                                              job.labels, " holds ", labels.dims[0], " labels"));
  }
  for (size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] > kMaxLabel) {
      return absl::InvalidArgumentError(str_cat(
          job.labels, ": label ", i, " (byte offset ", 8 + i, ") is ", int{labels.values[i]},
          "; the classes are 0-", int{kMaxLabel}, " (the zoo's classifiers have 10 outputs)"));
    }
  }
  if (job.shards < 1)
    return absl::InvalidArgumentError(str_cat("shards must be at least 1, not ", job.shards));
  if (job.jpeg && (job.jpeg_size < 0 || job.jpeg_size > 4096)) {
    return absl::InvalidArgumentError(
        str_cat("the JPEG image size must be 1..4096 (0: as stored), not ", job.jpeg_size));
  }
  if (job.jpeg && images.dims.size() == 4 && images.dims[3] != 1 && images.dims[3] != 3) {
    return absl::InvalidArgumentError(
        str_cat(job.images, ": JPEG needs 1 or 3 channels, not ", images.dims[3]));
  }
  return absl::OkStatus();
}

struct ShardSource {
  const IdxConversion* job;
  const IdxArray* images;
  const IdxArray* labels;
  uint32_t height, width, depth;
};

struct MnistShardWritten {
  std::string path;
  uint64_t examples = 0;
  uint64_t image_bytes = 0;
};

// Examples [first, end) into one shard file.
absl::StatusOr<MnistShardWritten> write_mnist_shard(const ShardSource& src, const std::string& path,
                                                    uint64_t first, uint64_t end) {
  const IdxConversion& job = *src.job;
  const size_t row = src.images->row_size();
  auto writer = TFRecordWriter::open(path, job.compression);
  if (!writer.ok()) return writer.status();
  tensorflow::Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  auto* label = features["label"].mutable_int64_list();
  label->add_value(0);
  std::string* image = features["image_raw"].mutable_bytes_list()->add_value();
  MnistShardWritten out;
  out.path = path;
  for (uint64_t i = first; i < end; ++i) {
    label->set_value(0, src.labels->values[i]);
    const auto* pixels = reinterpret_cast<const char*>(src.images->values.data() + i * row);
    if (job.jpeg) {
      Image im;
      im.height = static_cast<int>(src.height);
      im.width = static_cast<int>(src.width);
      im.channels = static_cast<int>(src.depth);
      im.pixels.assign(pixels, pixels + row);
      if (job.jpeg_size > 0 && (job.jpeg_size != im.height || job.jpeg_size != im.width)) {
        im = to_uint8(resize_bilinear(to_float(im), job.jpeg_size, job.jpeg_size));
      }
      auto jpeg = encode_jpeg(im, job.jpeg_quality);
      if (!jpeg.ok()) {
        return absl::InternalError(
            str_cat(job.images, ": example ", i, ": ", jpeg.status().message()));
      }
      *image = std::move(*jpeg);
    } else {
      image->assign(pixels, row);
    }
    out.image_bytes += image->size();
    if (auto st = (*writer)->write(serialize_deterministic(ex)); !st.ok()) return st;
  }
  if (auto st = (*writer)->close(); !st.ok()) return st;
  out.examples = end - first;
  return out;
}

}  // namespace

absl::StatusOr<IdxConversionResult> convert_idx_to_tfrecord(const IdxConversion& job) {
  auto images = read_idx(job.images);
  if (!images.ok()) return images.status();
  auto labels = read_idx(job.labels);
  if (!labels.ok()) return labels.status();
  if (auto s = check_job(job, *images, *labels); !s.ok()) return s;

  IdxConversionResult result;
  result.height = images->dims[1];
  result.width = images->dims[2];
  result.depth = images->dims.size() == 4 ? images->dims[3] : 1;
  const uint64_t count =
      job.limit == 0 ? images->dims[0] : std::min<uint64_t>(job.limit, images->dims[0]);
  std::string prefix = job.prefix;
  if (prefix.empty()) {
    prefix = std::filesystem::path(job.images).filename().string();
    prefix = prefix.substr(0, prefix.find('-'));
  }
  // A raw image takes its bytes; a JPEG one at least a byte.
  const uint64_t per_image =
      job.jpeg ? 1 : static_cast<uint64_t>(result.height * result.width * result.depth);
  if (auto s = check_shard_plan(prefix, "prefix", job.shards, count, per_image, job.output_dir);
      !s.ok()) {
    return s;
  }
  if (auto s = make_output_dir(job.output_dir); !s.ok()) return s;

  // Shards are independent (JPEG encoding is the cost).
  std::vector<MnistShardWritten> shards(static_cast<size_t>(job.shards));
  const ShardSource source{&job, &*images, &*labels, result.height, result.width, result.depth};
  auto write = [&](int sh) -> absl::Status {
    const auto [first, end] = shard_range(count, sh, job.shards);
    const std::string path = (std::filesystem::path(job.output_dir) /
                              shard_name(prefix, sh, job.shards, job.compression))
                                 .string();
    auto written = write_mnist_shard(source, path, first, end);
    if (!written.ok()) return written.status();
    shards[static_cast<size_t>(sh)] = std::move(*written);
    return absl::OkStatus();
  };
  if (auto s = write_shards_in_parallel(job.shards, job.threads, write); !s.ok()) return s;
  for (auto& shard : shards) {
    result.shard_paths.push_back(shard.path);
    result.shard_examples.push_back(shard.examples);
    result.image_bytes += shard.image_bytes;
  }
  result.examples = count;
  return result;
}

MapFn mnist_parse_fn(int height, int width, int depth, bool jpeg) {
  FeatureSpec spec;
  spec["image_raw"] = fixed_len(FeatureType::kBytes, {});
  spec["label"] = in_range(fixed_len(FeatureType::kInt64, {}), 0, kMaxLabel + 1,
                           "the zoo's classifiers' 10 classes");
  return [spec, height, width, depth, jpeg](Element in) -> absl::StatusOr<Element> {
    const auto record = in.find("record");
    if (record == in.end() || record->second.bytes.size() != 1) {
      return absl::InvalidArgumentError("mnist_parse_fn: the element has no scalar 'record'");
    }
    auto ex = parse_example(record->second.bytes[0], spec, "an MNIST-family record");
    if (!ex.ok()) return ex.status();
    const std::string& bytes = ex->at("image_raw").bytes[0];
    auto image = jpeg ? decode_jpeg(bytes, depth) : decode_raw(bytes, height, width, depth);
    if (!image.ok())
      return absl::InvalidArgumentError(str_cat("image_raw: ", image.status().message()));
    FloatImage f = to_float(*image);
    if (f.height != height || f.width != width) f = resize_bilinear(f, height, width);
    Element out;
    out.emplace("image", image_value(std::move(f.pixels), height, width, depth));
    out.emplace("label", std::move(ex->at("label")));
    return out;
  };
}

}  // namespace tpusim::runtime::data
