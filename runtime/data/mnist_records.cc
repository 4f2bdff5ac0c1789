#include "runtime/data/mnist_records.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "common/strings.h"
#include "runtime/data/example.pb.h"
#include "runtime/data/idx.h"

namespace tpusim::runtime::data {

absl::StatusOr<IdxConversionResult> convert_idx_to_tfrecord(const IdxConversion& job) {
  auto images = read_idx(job.images);
  if (!images.ok()) return images.status();
  auto labels = read_idx(job.labels);
  if (!labels.ok()) return labels.status();
  if (images->dims.size() != 3 && images->dims.size() != 4) {
    return absl::InvalidArgumentError(str_cat(job.images, ": an image file has rank 3 or 4, not ", images->dims.size()));
  }
  if (labels->dims.size() != 1) {
    return absl::InvalidArgumentError(str_cat(job.labels, ": a label file has rank 1, not ", labels->dims.size()));
  }
  if (images->dims[0] != labels->dims[0]) {
    return absl::InvalidArgumentError(str_cat(job.images, " holds ", images->dims[0], " images but ", job.labels,
                                              " holds ", labels->dims[0], " labels"));
  }
  IdxConversionResult result;
  result.height = images->dims[1];
  result.width = images->dims[2];
  result.depth = images->dims.size() == 4 ? images->dims[3] : 1;
  const uint64_t count = job.limit == 0 ? images->dims[0] : std::min<uint64_t>(job.limit, images->dims[0]);
  const size_t row = images->row_size();

  auto writer = TFRecordWriter::open(job.output, job.compression);
  if (!writer.ok()) return writer.status();
  tensorflow::Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  features["height"].mutable_int64_list()->add_value(result.height);
  features["width"].mutable_int64_list()->add_value(result.width);
  features["depth"].mutable_int64_list()->add_value(result.depth);
  auto* label = features["label"].mutable_int64_list();
  label->add_value(0);
  auto* image = features["image_raw"].mutable_bytes_list()->add_value();
  std::string bytes;
  for (uint64_t i = 0; i < count; ++i) {
    label->set_value(0, labels->values[i]);
    image->assign(reinterpret_cast<const char*>(images->values.data() + i * row), row);
    // Deterministic: the same input gives the same bytes (map order fixed).
    bytes.clear();
    {
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      ex.SerializeToCodedStream(&coded);
    }
    if (auto s = (*writer)->write(bytes); !s.ok()) return s;
  }
  if (auto s = (*writer)->close(); !s.ok()) return s;
  result.examples = count;
  return result;
}

}  // namespace tpusim::runtime::data
