#include "tools/tpusim/data_options.h"

#include "common/strings.h"
#include "tools/tpusim/options.h"

namespace tpusim::cli {

using jobs::check_fashion_data;
using jobs::default_data_dir;
using jobs::FashionData;

namespace po = boost::program_options;

void add_data_options(po::options_description& options) {
  options.add_options()("data", po::value<std::string>(),
                        "folder of Fashion-MNIST TFRecords (train-*, t10k-*), converted on first "
                        "use (default: ~/.cache/tpusim/fashion-mnist, -jpeg<S> for JPEG)")(
      "input", po::value<std::string>()->default_value("raw"),
      "raw: 28x28 pixels, parsed; jpeg: JPEG records, flowers-style (decode, resize, random "
      "crop, flip); synthetic (train, compare): one batch of random images (or an imported "
      "model's inputs) made once, no files and no pipeline costs (TensorFlow's fake data for "
      "performance runs); examples (--onnx, --saved-model): TFRecords of tf.Example in --data "
      "with a feature of each model input's name and 'label'")(
      "image-size", po::value<int>()->default_value(28),
      "jpeg or synthetic: the side S of the images the model sees")(
      "map-threads", po::value<int>()->default_value(2), "threads of the parse / decode map")(
      "batch-threads", po::value<int>()->default_value(1),
      "batches assembled at once, each on a thread (tf.data's batch(num_parallel_calls))")(
      "enqueue-threads", po::value<int>()->default_value(1),
      "threads enqueueing each step's batches for the cores (TensorFlow runs the per-core "
      "infeed enqueue ops at once)")(
      "infeed-dtype", po::value<std::string>()->default_value("f32"),
      "f32 | bf16: the images' dtype on the host link (bf16: the host casts them to bfloat16, "
      "half the bytes; the model sees them widened to f32)");
}

absl::StatusOr<InputKind> input_kind_from(const po::variables_map& vm) {
  const std::string input = vm["input"].as<std::string>();
  if (auto kind = kInputKinds.parse(input)) return *kind;
  return absl::InvalidArgumentError("--input is " + kInputKinds.list() + " (got '" + input + "')");
}

absl::StatusOr<FashionData> fashion_data_from(const po::variables_map& vm, bool synthetic_allowed) {
  FashionData d;
  auto input = input_kind_from(vm);
  if (!input.ok()) return input.status();
  d.jpeg = *input == InputKind::kJpeg;
  d.synthetic = *input == InputKind::kSynthetic;
  d.examples = *input == InputKind::kExamples;
  if (d.examples && vm.count("data") == 0)
    return absl::InvalidArgumentError("--input examples reads the records in --data DIR");
  if (d.synthetic && !synthetic_allowed) {
    return absl::InvalidArgumentError(
        "--input synthetic is for train's performance runs and compare's numerics (random "
        "images: no test set to evaluate or predict)");
  }
  d.image_size = vm["image-size"].as<int>();
  d.map_threads = vm["map-threads"].as<int>();
  d.batch_threads = vm["batch-threads"].as<int>();
  d.enqueue_threads = vm["enqueue-threads"].as<int>();
  const std::string infeed_dtype = vm["infeed-dtype"].as<std::string>();
  const std::optional<isa::DType> dtype = kTensorDTypes.parse(infeed_dtype);
  if (!dtype)
    return absl::InvalidArgumentError("--infeed-dtype is f32 or bf16 (got '" + infeed_dtype + "')");
  d.bf16_images = *dtype == isa::BF16;
  if (std::string problem = check_fashion_data(d); !problem.empty())
    return absl::InvalidArgumentError(problem);
  d.dir =
      vm.count("data") > 0 ? vm["data"].as<std::string>() : default_data_dir(d.jpeg, d.image_size);
  return d;
}

absl::StatusOr<jobs::BertData> bert_data_from(const po::variables_map& vm, const FashionData& data,
                                              const std::string& model, int64_t seq_length) {
  if (data.jpeg || !vm["image-size"].defaulted() || data.bf16_images) {
    return absl::InvalidArgumentError(
        model +
        " reads token ids: --input is raw (its records) or synthetic, and --image-size "
        "and --infeed-dtype bf16 do not apply");
  }
  jobs::BertData bert;
  bert.synthetic = data.synthetic;
  bert.seq_length = seq_length;
  bert.map_threads = data.map_threads;
  bert.batch_threads = data.batch_threads;
  bert.enqueue_threads = data.enqueue_threads;
  bert.dir =
      vm.count("data") > 0 ? vm["data"].as<std::string>() : jobs::default_bert_data_dir(seq_length);
  return bert;
}

absl::StatusOr<std::optional<jobs::ImportedData>> named_data_from(
    const po::variables_map& vm, const FashionData& data, const jobs::ImportedModel& model) {
  const bool by_name =
      data.examples || (data.synthetic && (model.image_input.empty() ||
                                           model.loss != jobs::Loss::kSoftmaxCrossEntropy));
  if (!by_name) return std::nullopt;
  if (!vm["image-size"].defaulted() || data.bf16_images) {
    return absl::InvalidArgumentError(
        str_cat(model.path,
                " is fed by input name: --image-size and --infeed-dtype bf16 do not "
                "apply"));
  }
  jobs::ImportedData named;
  named.dir = data.dir;
  named.synthetic = data.synthetic;
  named.map_threads = data.map_threads;
  named.batch_threads = data.batch_threads;
  named.enqueue_threads = data.enqueue_threads;
  return named;
}

absl::Status check_zoo_inputs(const po::variables_map& vm, const FashionData& data) {
  if (data.examples) {
    return absl::InvalidArgumentError(
        "--input examples feeds an --onnx or --saved-model model by its inputs' names; a zoo "
        "model reads raw, jpeg or synthetic input");
  }
  if (vm.count("loss") > 0 && !vm["loss"].defaulted())
    return absl::InvalidArgumentError(
        "--loss is for --onnx and --saved-model models (a zoo model has its own)");
  return absl::OkStatus();
}

}  // namespace tpusim::cli
