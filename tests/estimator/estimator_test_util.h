#pragma once
// A small classification problem for estimator tests: 4 features, 3 classes, a linear model.

#include <cmath>
#include <string>

#include "estimator/estimator.h"
#include "estimator/metrics.h"
#include "runtime/data/mnist_records.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"

namespace tpusim::estimator::testing {

// 256 examples whose label is the largest of the first three features.
inline runtime::data::DatasetPtr examples() {
  std::vector<runtime::data::Element> all;
  for (int i = 0; i < 256; ++i) {
    runtime::data::FeatureValue x;
    x.type = runtime::data::FeatureType::kFloat;
    x.shape = {4};
    for (int k = 0; k < 4; ++k) x.floats.push_back(std::sin(1.7f * i + 2.3f * k));
    int64_t label = 0;
    for (int k = 1; k < 3; ++k) {
      if (x.floats[static_cast<size_t>(k)] > x.floats[static_cast<size_t>(label)]) label = k;
    }
    all.push_back({{"x", x}, {"label", runtime::data::scalar_int(label)}});
  }
  return runtime::data::Dataset::from_elements(std::move(all));
}

inline InputFn train_input() {
  return [](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->shuffle(64, 7)->repeat()->batch(p.batch_size, true);
  };
}

inline ModelFn linear_model(runtime::OptimizerSpec::Kind kind) {
  return [kind](runtime::GraphBuilder& b, const Features& f, std::optional<runtime::Value> labels,
                Mode mode, const Params&) -> absl::StatusOr<TPUEstimatorSpec> {
    const runtime::Value logits =
        runtime::layers::dense(b, f.at("x"), 3, runtime::layers::Activation::kNone, 5);
    TPUEstimatorSpec spec;
    const runtime::Value classes = b.argmax(logits, 1);
    if (mode == Mode::kPredict) {
      spec.predictions = {{"class", classes}, {"logits", logits}};
      return spec;
    }
    spec.loss = runtime::layers::reduce_mean(
        runtime::layers::sparse_softmax_cross_entropy(*labels, logits), {0});
    spec.metric_tensors = {{"labels", *labels}, {"classes", classes}};
    spec.metric_fn = [](const std::map<std::string, runtime::HostTensor>& t)
        -> absl::StatusOr<std::map<std::string, double>> {
      auto acc = metrics::accuracy(t.at("labels"), t.at("classes"));
      if (!acc.ok()) return acc.status();
      return std::map<std::string, double>{{"accuracy", *acc}};
    };
    runtime::OptimizerSpec opt;
    opt.kind = kind;
    opt.learning_rate.initial = kind == runtime::OptimizerSpec::Kind::kAdam ? 0.05f : 0.5f;
    spec.train_op = opt;
    return spec;
  };
}

// The examples once, in order, batched per shard; the last batch padded (with a "mask").
inline InputFn predict_input(int64_t count) {
  return [count](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->take(count)->batch(p.batch_size, false, /*pad_to_full=*/true);
  };
}

inline InputFn eval_input() {
  return [](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return examples()->batch(p.batch_size, true);
  };
}

// A run's configs, its log silenced, and the checkpoint create() warm-starts from ("": none).
struct QuietRun {
  RunConfig config;
  SimulatorOptions sim;
  std::string warm_start_from;
};

inline QuietRun quiet_run(const std::string& model_dir, const std::string& backend,
                          uint32_t shards) {
  QuietRun run;
  run.config.model_dir = model_dir;
  run.config.tpu_config.num_shards = shards;
  run.config.tpu_config.iterations_per_loop = 5;
  run.config.save_checkpoints_steps = 10;
  run.config.save_summary_steps = 5;
  run.sim.backend = backend;
  run.sim.log = [](const std::string&) {};
  return run;
}

// TPUEstimator::create(model_fn, run's configs, no params, use_tpu) at these batch sizes.
inline absl::StatusOr<std::unique_ptr<TPUEstimator>> create_quiet(ModelFn model_fn,
                                                                  const QuietRun& run,
                                                                  int64_t train_batch_size,
                                                                  int64_t eval_batch_size,
                                                                  int64_t predict_batch_size) {
  return TPUEstimator::create(std::move(model_fn), run.config, {}, true, train_batch_size,
                              eval_batch_size, predict_batch_size, run.sim, run.warm_start_from);
}

// The Fashion-MNIST test set as TFRecords in `dir` (from Debian's dataset-fashion-mnist), and an
// input_fn over it: shuffled, repeated, parsed to {"image": [28, 28, 1], "label"}, per-shard
// batches.
inline absl::Status write_fashion(const std::string& dir) {
  runtime::data::IdxConversion job;
  job.images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  job.labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  job.output_dir = dir;
  job.prefix = "t10k";
  job.shards = 2;
  return runtime::data::convert_idx_to_tfrecord(job).status();
}

inline InputFn fashion_input(const std::string& dir) {
  return [dir](const Params& p) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return runtime::data::Dataset::list_files(dir + "/t10k-*")
        ->interleave_tfrecords({})
        ->shuffle(1000, 3)
        ->repeat()
        ->map(runtime::data::mnist_parse_fn(28, 28, 1, false))
        ->batch(p.batch_size, true);
  };
}

// A zoo model (logits from build_model) trained with Adam.
inline ModelFn zoo_model(const std::string& name) {
  return [name](runtime::GraphBuilder& b, const Features& f, std::optional<runtime::Value> labels,
                Mode mode, const Params&) -> absl::StatusOr<TPUEstimatorSpec> {
    auto logits = runtime::models::build_model(b, name, f.at("image"), mode == Mode::kTrain, 1);
    if (!logits.ok()) return logits.status();
    TPUEstimatorSpec spec;
    spec.loss = runtime::layers::reduce_mean(
        runtime::layers::sparse_softmax_cross_entropy(*labels, *logits), {0});
    runtime::OptimizerSpec adam;
    adam.kind = runtime::OptimizerSpec::Kind::kAdam;
    adam.learning_rate.initial = 2e-3f;
    spec.train_op = adam;
    return spec;
  };
}

// mnist_cnn trained 12 steps of 2 x 16 Fashion-MNIST images on `backend`, in `dir`.
inline absl::StatusOr<TrainResult> train_mnist_cnn_briefly(const std::string& dir,
                                                           const std::string& backend) {
  const std::string data = dir + "/data";
  if (auto s = write_fashion(data); !s.ok()) return s;
  QuietRun c = quiet_run(dir + "/model", backend, 2);
  c.config.tpu_config.iterations_per_loop = 12;
  auto est = create_quiet(zoo_model("mnist_cnn"), c, 32, 32, 32);
  if (!est.ok()) return est.status();
  return (*est)->train(fashion_input(data), 12);
}

// The mean of the first and of the last `n` losses.
inline std::pair<double, double> loss_ends(const std::vector<float>& losses, size_t n) {
  double first = 0, last = 0;
  for (size_t i = 0; i < n; ++i) {
    first += losses[i] / static_cast<double>(n);
    last += losses[losses.size() - 1 - i] / static_cast<double>(n);
  }
  return {first, last};
}

// The linear model trained `steps` steps on the cpu backend's 4 replicas into `dir`.
inline absl::StatusOr<TrainResult> train_linear(
    const std::string& dir, int64_t steps,
    runtime::OptimizerSpec::Kind kind = runtime::OptimizerSpec::Kind::kAdam) {
  auto est = create_quiet(linear_model(kind), quiet_run(dir, "cpu", 4), 32, 32, 32);
  if (!est.ok()) return est.status();
  return (*est)->train(train_input(), steps);
}

}  // namespace tpusim::estimator::testing
