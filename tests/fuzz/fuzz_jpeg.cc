// JPEG decoding and the preprocessing after it on any bytes: decode_jpeg at each channel count,
// then the flowers-style map (decode, resize, random or central crop, flip) of a tf.Example whose
// image_raw is the input, for training and evaluation.
#include <cstdint>
#include <string>

#include "runtime/data/example.pb.h"
#include "runtime/data/image.h"
#include "runtime/data/jpeg_preprocessing.h"

namespace {

using namespace tpusim::runtime::data;

std::string example_of(const std::string& jpeg) {
  tensorflow::Example ex;
  auto& features = *ex.mutable_features()->mutable_feature();
  features["image_raw"].mutable_bytes_list()->add_value(jpeg);
  features["label"].mutable_int64_list()->add_value(3);
  return ex.SerializeAsString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (int channels : {0, 1, 3}) {
    auto image = decode_jpeg(bytes, channels);
    if (!image.ok()) return 0;  // every channel count reads the same header and scan
  }
  for (bool training : {true, false}) {
    JpegPreprocessing options;
    options.image_size = 24;
    options.channels = 3;
    options.training = training;
    Element element;
    element.emplace("record", scalar_bytes(example_of(bytes)));
    element.emplace("index", scalar_int(7));
    (void)jpeg_preprocess_fn(options)(std::move(element));
  }
  return 0;
}
