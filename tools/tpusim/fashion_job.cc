#include "tools/tpusim/fashion_job.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/strings.h"
#include "estimator/metrics.h"
#include "runtime/data/mnist_records.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"

namespace tpusim::cli {
namespace {

namespace data = runtime::data;
namespace fs = std::filesystem;
constexpr char kIdxDir[] = "/usr/share/datasets/fashion-mnist";

bool has_shards(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().filename().string().rfind(prefix + "-", 0) == 0) return true;
  }
  return false;
}

absl::Status convert_missing(const std::string& dir);

}  // namespace

std::string default_data_dir() {
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0')
    return str_cat(cache, "/tpusim/fashion-mnist");
  const char* home = std::getenv("HOME");
  return str_cat(home != nullptr ? home : "/tmp", "/.cache/tpusim/fashion-mnist");
}

absl::Status ensure_fashion_mnist(const std::string& dir) {
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
  absl::Status status = convert_missing(dir);
  ::close(lock);  // releases the lock
  return status;
}

namespace {

absl::Status convert_missing(const std::string& dir) {
  for (const char* prefix : {"train", "t10k"}) {
    if (has_shards(dir, prefix)) continue;
    const std::string images = str_cat(kIdxDir, "/", prefix, "-images-idx3-ubyte.gz");
    const std::string labels = str_cat(kIdxDir, "/", prefix, "-labels-idx1-ubyte.gz");
    if (!fs::exists(images)) {
      return absl::NotFoundError(str_cat("no ", prefix, "-*.tfrecord in ", dir, " and no ", images,
                                         " to make them from (make deps installs "
                                         "dataset-fashion-mnist)"));
    }
    std::cerr << "converting " << images << " to TFRecords in " << dir << "\n";
    data::IdxConversion job;
    job.images = images;
    job.labels = labels;
    job.output_dir = dir;
    job.prefix = prefix;
    job.shards = 10;
    auto done = data::convert_idx_to_tfrecord(job);
    if (!done.ok()) return done.status();
  }
  return absl::OkStatus();
}

}  // namespace

estimator::InputFn fashion_train_input(const std::string& dir) {
  return [dir](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    data::InterleaveOptions files;
    files.cycle_length = 4;
    files.parallel = true;
    auto parse = data::mnist_parse_fn(28, 28, 1, /*jpeg=*/false);
    if (p.profile != nullptr) parse = p.profile->timed("parse", parse, 2);
    auto ds = data::Dataset::list_files(dir + "/train-*", /*shuffle=*/true, /*seed=*/1)
                  ->shard(p.num_shards, p.shard_index)
                  ->interleave_tfrecords(files)
                  ->shuffle(10000, /*seed=*/2)
                  ->repeat()
                  ->map(parse, 2)
                  ->batch(p.batch_size, /*drop_remainder=*/true);
    if (p.profile != nullptr) ds = ds->profiled(p.profile, "batch");
    return ds->prefetch(2);
  };
}

estimator::InputFn fashion_eval_input(const std::string& dir) {
  return [dir](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    return data::Dataset::list_files(dir + "/t10k-*")
        ->interleave_tfrecords({})
        ->map(data::mnist_parse_fn(28, 28, 1, false), 2)
        ->batch(p.batch_size, /*drop_remainder=*/true)
        ->prefetch(2);
  };
}

void use_host_config_timing(estimator::RunConfig* config) {
  config->host_timing = estimator::RunConfig::HostTiming::kHostConfig;
  config->host_read_threads = 4;
  config->host_map_threads = 2;
  runtime::ExampleWork& w = config->host_work;
  w.record_bytes = 840;
  w.parse_example = true;
  w.raw_bytes = 28 * 28;
  w.batch_bytes = 28 * 28 * 4 + 4;
}

estimator::ModelFn zoo_model_fn(const std::string& model, runtime::OptimizerSpec optimizer) {
  return [model, optimizer](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params&) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    auto logits =
        runtime::models::build_model(b, model, f.at("image"), mode == estimator::Mode::kTrain, 1);
    if (!logits.ok()) return logits.status();
    estimator::TPUEstimatorSpec spec;
    const runtime::Value classes = b.argmax(*logits, 1);
    if (mode == estimator::Mode::kPredict) {
      spec.predictions = {{"class", classes}, {"probabilities", runtime::layers::softmax(*logits)}};
      return spec;
    }
    spec.loss = runtime::layers::reduce_mean(
        runtime::layers::sparse_softmax_cross_entropy(*labels, *logits), {0});
    spec.train_op = optimizer;
    spec.metric_tensors = {{"labels", *labels}, {"classes", classes}};
    spec.metric_fn = [](const std::map<std::string, runtime::HostTensor>& t)
        -> absl::StatusOr<std::map<std::string, double>> {
      auto acc = estimator::metrics::accuracy(t.at("labels"), t.at("classes"));
      if (!acc.ok()) return acc.status();
      return std::map<std::string, double>{{"accuracy", *acc}};
    };
    return spec;
  };
}

}  // namespace tpusim::cli
