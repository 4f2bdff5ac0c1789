#include "estimator/jobs/fashion_job.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/strings.h"
#include "estimator/metrics.h"
#include "runtime/data/jpeg_preprocessing.h"
#include "runtime/data/mnist_records.h"
#include "runtime/data/tfrecord.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {
namespace {

namespace data = runtime::data;
namespace fs = std::filesystem;

// Where the Fashion-MNIST idx files are: TPUSIM_FASHION_MNIST_IDX, else Debian's
// dataset-fashion-mnist (a machine without our packages, such as a lent GPU machine, gets them
// from tools/device/bundle.sh, whose run script sets the variable).
std::string idx_dir() {
  const char* dir = std::getenv("TPUSIM_FASHION_MNIST_IDX");
  return dir != nullptr && *dir != '\0' ? dir : "/usr/share/datasets/fashion-mnist";
}

absl::Status convert_missing(const FashionData& data,
                             const std::function<void(const std::string&)>& log);

// A raw record's image: Fashion-MNIST's, 28x28 grey bytes.
constexpr int kRawSide = 28;

// The map stage: the raw parse or the JPEG preprocessing, timed as `stage` when profiled.
data::MapFn fashion_map_fn(const FashionData& d, bool training) {
  if (!d.jpeg) return data::mnist_parse_fn(kRawSide, kRawSide, 1, /*jpeg=*/false);
  data::JpegPreprocessing options;
  options.image_size = d.image_size;
  options.training = training;
  options.seed = 3;
  return data::jpeg_preprocess_fn(options);
}

}  // namespace

std::vector<std::string> shard_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix + "-", 0) == 0) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<uint64_t> mean_train_record_bytes(const std::string& dir) {
  const std::vector<std::string> shards = shard_files(dir, "train");
  if (shards.empty()) return absl::NotFoundError(str_cat("no train-* shards in ", dir));
  auto reader = data::TFRecordReader::open(shards[0]);
  if (!reader.ok()) return reader.status();
  std::string record;
  uint64_t bytes = 0;
  for (;;) {
    auto more = (*reader)->next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    bytes += record.size();
  }
  if ((*reader)->records() == 0) return absl::NotFoundError(str_cat(shards[0], " has no records"));
  return bytes / (*reader)->records();
}

runtime::data::BatchOptions whole_batches(int batch_threads, const estimator::Params& p) {
  runtime::data::BatchOptions o;
  o.drop_remainder = true;
  o.num_parallel_calls = batch_threads;
  o.profile = p.profile;
  return o;
}

void use_host_config_stages(int map_threads, int batch_threads,
                            estimator::SimulatorOptions* config) {
  config->host_timing = estimator::SimulatorOptions::HostTiming::kHostConfig;
  config->host_read_threads = 4;
  config->host_map_threads = static_cast<uint32_t>(map_threads);
  config->host_batch_threads = static_cast<uint32_t>(batch_threads);
}

runtime::data::ReaderOptions named_records() {
  runtime::data::ReaderOptions reader;
  reader.name_records = true;
  return reader;
}

runtime::data::DatasetPtr sharded_train_records(const std::string& dir, const estimator::Params& p,
                                                runtime::data::ReaderOptions reader) {
  reader.name_records = true;
  data::InterleaveOptions files;
  files.cycle_length = 4;
  files.parallel = true;
  // Hosts shard the files, or, with fewer files than hosts (a pod reading the 10 shards), every
  // host reads them all and keeps its share of the examples: tf.data's AUTO sharding.
  const auto file_count = static_cast<int64_t>(shard_files(dir, "train").size());
  auto ds = data::Dataset::list_files(dir + "/train-*", /*shuffle=*/true, /*seed=*/1);
  if (file_count >= p.num_shards)
    return ds->shard(p.num_shards, p.shard_index)->interleave_tfrecords(files, reader);
  return ds->interleave_tfrecords(files, reader)->shard(p.num_shards, p.shard_index);
}

// How the pipeline reads its records: named, so that an error about a record's contents gives
// its file and place; and a raw record (not JPEG) bounded by what it can hold, so that one far
// larger is refused as it is read rather than after the shuffle buffer has held thousands like
// it: the image's 28x28 bytes and its label, with room for the tf.Example's framing and names.
runtime::data::ReaderOptions record_reader(const FashionData& d) {
  runtime::data::ReaderOptions reader = named_records();
  if (d.jpeg) return reader;  // a JPEG's size follows its source photo, not the model
  reader.max_record_bytes = kRawSide * kRawSide + 1024;
  reader.max_record_what = str_cat("an MNIST-family record (a ", kRawSide, "x", kRawSide,
                                   " image of bytes and its label)");
  return reader;
}

std::string check_fashion_data(const FashionData& data) {
  if (!data.jpeg && !data.synthetic && data.image_size != 28)
    return "--image-size needs --input jpeg or synthetic (raw records are 28x28)";
  if (data.image_size < 8 || data.image_size > 1024)
    return str_cat("--image-size must be in [8, 1024] (got ", data.image_size, ")");
  const std::pair<const char*, int> thread_flags[] = {{"--map-threads", data.map_threads},
                                                      {"--batch-threads", data.batch_threads},
                                                      {"--enqueue-threads", data.enqueue_threads}};
  for (const auto& [flag, threads] : thread_flags) {
    if (threads < 1 || threads > 1024)
      return str_cat(flag, " must be in [1, 1024] (got ", threads, ")");
  }
  return "";
}

std::string cache_dir(const std::string& name) {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return str_cat(cache, "/tpusim/", name);
  const char* home = std::getenv("HOME");
  return str_cat(home != nullptr ? home : "/tmp", "/.cache/tpusim/", name);
}

std::string default_data_dir(bool jpeg, int image_size) {
  return cache_dir(str_cat("fashion-mnist", jpeg ? str_cat("-jpeg", image_size) : ""));
}

absl::Status ensure_fashion_mnist(const FashionData& data,
                                  const std::function<void(const std::string&)>& log) {
  if (data.synthetic) return absl::OkStatus();  // no files
  const std::string& dir = data.dir;
  // Runs started together (tpusim sweep -j) convert once: the first holds the folder's lock
  // while it writes, the others wait and then find the shards complete.
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string lock_path = dir + "/.convert.lock";
  const int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) {
    return absl::PermissionDeniedError(
        str_cat("cannot open ", lock_path, ": ", std::strerror(errno)));
  }
  while (::flock(lock, LOCK_EX) != 0) {
    if (errno != EINTR) {
      ::close(lock);
      return absl::InternalError(str_cat("cannot lock ", lock_path, ": ", std::strerror(errno)));
    }
  }
  absl::Status status = convert_missing(data, log);
  ::close(lock);  // releases the lock
  return status;
}

namespace {

absl::Status convert_missing(const FashionData& data,
                             const std::function<void(const std::string&)>& log) {
  const std::string& dir = data.dir;
  for (const char* prefix : {"train", "t10k"}) {
    if (!shard_files(dir, prefix).empty()) continue;
    const std::string images = str_cat(idx_dir(), "/", prefix, "-images-idx3-ubyte.gz");
    const std::string labels = str_cat(idx_dir(), "/", prefix, "-labels-idx1-ubyte.gz");
    std::error_code error;  // a name the file system refuses (too long) is a file not there
    if (!fs::exists(images, error)) {
      return absl::NotFoundError(str_cat("no ", prefix, "-*.tfrecord in ", dir, " and no ", images,
                                         " to make them from (make deps installs "
                                         "dataset-fashion-mnist; TPUSIM_FASHION_MNIST_IDX names "
                                         "another folder of the idx files)"));
    }
    if (log) {
      log(str_cat("converting ", images, " to ",
                  data.jpeg ? str_cat(data.image_size, "x", data.image_size, " JPEG ") : "",
                  "TFRecords in ", dir, "\n"));
    }
    data::IdxConversion job;
    job.images = images;
    job.labels = labels;
    job.output_dir = dir;
    job.prefix = prefix;
    job.shards = 10;
    job.jpeg = data.jpeg;
    job.jpeg_size = data.jpeg ? data.image_size : 0;
    auto done = data::convert_idx_to_tfrecord(job);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

// TensorFlow's fake data: one batch per shard of uniform [0, 1) images and labels 0..9, made once
// from a fixed seed (the shard's index mixed in) and repeated; no stage is profiled, so the
// run charges the host nothing for it but the host link's transfers.
estimator::InputFn synthetic_input(const FashionData& d) {
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    std::mt19937_64 rng(0x5eed + static_cast<uint64_t>(p.shard_index));
    std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
    std::uniform_int_distribution<int64_t> label(0, d.classes - 1);
    const int64_t side = d.image_size;
    data::Element batch;
    data::FeatureValue& images = batch["image"];
    images.type = data::FeatureType::kFloat;
    images.shape = {p.batch_size, side, side, d.channels};
    images.floats.resize(static_cast<size_t>(p.batch_size * side * side * d.channels));
    for (float& v : images.floats) v = pixel(rng);
    data::FeatureValue& labels = batch["label"];
    labels.type = data::FeatureType::kInt64;
    labels.shape = {p.batch_size};
    for (int64_t i = 0; i < p.batch_size; ++i) labels.ints.push_back(label(rng));
    return data::Dataset::from_elements({std::move(batch)})->repeat();
  };
}

}  // namespace

absl::Status use_model_inputs(const std::string& model, bool side_given, FashionData* data) {
  auto info = runtime::models::model_info(model);
  if (!info.ok()) return info.status();
  if (!data->synthetic) return absl::OkStatus();
  data->channels = static_cast<int>(info->image_channels);
  data->classes = static_cast<int>(info->classes);
  if (!side_given) data->image_size = static_cast<int>(info->image_side);
  return absl::OkStatus();
}

void use_data_options(const FashionData& data, estimator::SimulatorOptions* config) {
  config->host_enqueue_threads = static_cast<uint32_t>(data.enqueue_threads);
  config->bf16_infeeds.clear();
  if (data.bf16_images) config->bf16_infeeds.insert("image");
}

estimator::InputFn fashion_train_input(const FashionData& d) {
  if (d.synthetic) return synthetic_input(d);
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    const char* stage = d.jpeg ? "decode" : "parse";
    auto map = fashion_map_fn(d, /*training=*/true);
    if (p.profile != nullptr) map = p.profile->timed(stage, map, d.map_threads);
    auto ds =
        sharded_train_records(d.dir, p, record_reader(d))->shuffle(10000, /*seed=*/2)->repeat();
    if (d.jpeg) ds = ds->enumerate();  // each example's crop and flip follow its position
    return ds->map(map, d.map_threads)
        ->batch(p.batch_size, whole_batches(d.batch_threads, p))
        ->prefetch(2);
  };
}

estimator::InputFn fashion_eval_input(const FashionData& d) {
  if (d.synthetic) return synthetic_input(d);
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    auto map = fashion_map_fn(d, /*training=*/false);
    if (p.profile != nullptr) map = p.profile->timed(d.jpeg ? "decode" : "parse", map, 2);
    auto ds = data::Dataset::list_files(d.dir + "/t10k-*")
                  ->interleave_tfrecords({}, record_reader(d))
                  ->map(map, 2)
                  ->batch(p.batch_size, whole_batches(d.batch_threads, p));
    return ds->prefetch(2);
  };
}

absl::Status use_host_config_timing(const FashionData& d, estimator::SimulatorOptions* config) {
  use_host_config_stages(d.map_threads, d.batch_threads, config);
  use_data_options(d, config);
  runtime::ExampleWork& w = config->host_work;
  if (d.synthetic) {  // the batch was made once: no stage does any work per example
    w = runtime::ExampleWork{};
    w.parse_example = false;
    return absl::OkStatus();
  }
  w.parse_example = true;
  const auto side = static_cast<uint64_t>(d.image_size);
  w.batch_bytes = side * side * (d.bf16_images ? 2 : 4) + 4;
  if (!d.jpeg) {
    w.record_bytes = 840;
    w.raw_bytes = 28 * 28;
    return absl::OkStatus();
  }
  auto record = mean_train_record_bytes(d.dir);
  if (!record.ok()) return record.status();
  w.record_bytes = *record;
  w.jpeg_pixels = side * side;
  const auto resized = static_cast<uint64_t>(data::resize_size(d.image_size));
  w.resized_pixels = resized * resized;
  w.augmented_pixels = 2 * side * side;  // the crop and the flip
  return absl::OkStatus();
}

absl::Status use_example_host_config(const std::string& dir, bool synthetic,
                                     const PipelineThreads& threads, uint64_t batch_bytes,
                                     estimator::SimulatorOptions* config) {
  use_host_config_stages(threads.map, threads.batch, config);
  config->host_enqueue_threads = static_cast<uint32_t>(threads.enqueue);
  runtime::ExampleWork& w = config->host_work;
  w = runtime::ExampleWork{};
  if (synthetic) {  // the batch was made once: no stage does any work per example
    w.parse_example = false;
    return absl::OkStatus();
  }
  auto record = mean_train_record_bytes(dir);
  if (!record.ok()) return record.status();
  w.record_bytes = *record;
  w.parse_example = true;
  w.batch_bytes = batch_bytes;
  return absl::OkStatus();
}

estimator::TPUEstimatorSpec classifier_spec(runtime::GraphBuilder& b, runtime::Value logits,
                                            std::optional<runtime::Value> labels,
                                            estimator::Mode mode,
                                            const runtime::OptimizerSpec& optimizer) {
  estimator::TPUEstimatorSpec spec;
  const runtime::Value classes = b.argmax(logits, 1);
  if (mode == estimator::Mode::kPredict) {
    spec.predictions = {{"class", classes}, {"probabilities", runtime::layers::softmax(logits)}};
    return spec;
  }
  spec.loss = runtime::layers::reduce_mean(
      runtime::layers::sparse_softmax_cross_entropy(*labels, logits), {0});
  spec.train_op = optimizer;
  spec.metric_tensors = {{"labels", *labels}, {"classes", classes}};
  spec.metric_fn = [](const std::map<std::string, runtime::HostTensor>& t)
      -> absl::StatusOr<std::map<std::string, double>> {
    auto acc = estimator::metrics::accuracy(t.at("labels"), t.at("classes"));
    if (!acc.ok()) return acc.status();
    return std::map<std::string, double>{{"accuracy", *acc}};
  };
  return spec;
}

estimator::ModelFn zoo_model_fn(const std::string& model, runtime::OptimizerSpec optimizer,
                                runtime::models::DTypePolicy policy) {
  return [model, optimizer, policy](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params&) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    auto logits = runtime::models::build_model(b, model, f.at("image"),
                                               mode == estimator::Mode::kTrain, 1, policy);
    if (!logits.ok()) return logits.status();
    return classifier_spec(b, *logits, labels, mode, optimizer);
  };
}

}  // namespace tpusim::jobs
