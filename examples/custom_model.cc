// A user's own model on tpusim, as the TPUEstimator MNIST guide writes it: a model_fn (conv 5x5
// to 32 and 2x2 max pool, conv 5x5 to 64 and pool, dense 1024 with dropout 0.4, dense 10) and an
// input_fn over TFRecords of tf.Example, trained with iterations_per_loop steps per host loop on
// a simulated v3-8 (CrossShardOptimizer over its 8 cores), then evaluated with a host metric_fn.
// It uses only the installed libraries: find_package(tpusim) and tpusim::estimator
// (examples/standalone/CMakeLists.txt builds it that way).
//
//   custom_model [--steps N] [--backend tpusim|cpu] [--idx DIR] [--work DIR]
//
// The records are made from Debian's Fashion-MNIST IDX files (dataset-fashion-mnist) on first use.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "estimator/estimator.h"
#include "runtime/data/mnist_records.h"
#include "runtime/graph/layers.h"

namespace {

using namespace tpusim;
using estimator::Mode;
using runtime::Value;
namespace layers = runtime::layers;

// model_fn: the guide's CNN on [batch, 28, 28, 1] images.
absl::StatusOr<estimator::TPUEstimatorSpec> cnn_model_fn(runtime::GraphBuilder& b,
                                                         const estimator::Features& features,
                                                         std::optional<Value> labels, Mode mode,
                                                         const estimator::Params&) {
  const bool training = mode == Mode::kTrain;
  Value x = features.at("image");
  x = layers::conv2d(b, x, 32, 5, 1, layers::Padding::kSame, layers::Activation::kRelu);
  x = layers::max_pooling2d(b, x, 2, 2);
  x = layers::conv2d(b, x, 64, 5, 1, layers::Padding::kSame, layers::Activation::kRelu);
  x = layers::max_pooling2d(b, x, 2, 2);
  x = layers::flatten(b, x);
  x = layers::dense(b, x, 1024, layers::Activation::kRelu);
  x = layers::dropout(b, x, 0.4f, training, /*seed=*/1);
  const Value logits = layers::dense(b, x, 10);

  estimator::TPUEstimatorSpec spec;
  spec.loss = layers::reduce_mean(layers::sparse_softmax_cross_entropy(*labels, logits), {0});
  if (training) {
    runtime::OptimizerSpec sgd;
    sgd.kind = runtime::OptimizerSpec::Kind::kSgd;
    sgd.learning_rate.initial = 0.05f;
    spec.train_op = sgd;  // wrapped in CrossShardOptimizer by the estimator
  }
  if (mode == Mode::kEval) {
    // eval_metrics = (metric_fn, [labels, logits]), computed on the host.
    spec.metric_tensors = {{"labels", *labels}, {"logits", logits}};
    spec.metric_fn = [](const std::map<std::string, runtime::HostTensor>& t)
        -> absl::StatusOr<std::map<std::string, double>> {
      const runtime::HostTensor& y = t.at("labels");
      const runtime::HostTensor& z = t.at("logits");
      const int64_t n = y.shape.dim(0);
      int64_t right = 0;
      for (int64_t i = 0; i < n; ++i) {
        int64_t best = 0;
        for (int64_t c = 1; c < 10; ++c) {
          if (z.f[static_cast<size_t>(i * 10 + c)] > z.f[static_cast<size_t>(i * 10 + best)])
            best = c;
        }
        right += best == y.i[static_cast<size_t>(i)] ? 1 : 0;
      }
      return std::map<std::string, double>{{"accuracy", static_cast<double>(right) / n}};
    };
  }
  return spec;
}

// input_fn: the TFRecord shards, shuffled and repeated, parsed to {"image", "label"}, in
// per-shard batches (params.batch_size) of whole batches, prefetched.
estimator::InputFn records_input_fn(const std::string& pattern) {
  return [pattern](const estimator::Params& params) -> absl::StatusOr<runtime::data::DatasetPtr> {
    return runtime::data::Dataset::list_files(pattern)
        ->interleave_tfrecords({})
        ->shuffle(1000, 7)
        ->repeat()
        ->map(runtime::data::mnist_parse_fn(28, 28, 1, false))
        ->batch(params.batch_size, true)
        ->prefetch(2);
  };
}

struct Options {
  int64_t steps = 20;
  std::string backend = "tpusim";
  std::string idx = "/usr/share/datasets/fashion-mnist";
  std::string work = (std::filesystem::temp_directory_path() / "tpusim-custom-model").string();
};

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--steps") {
      o->steps = std::atoll(value.c_str());
    } else if (flag == "--backend") {
      o->backend = value;
    } else if (flag == "--idx") {
      o->idx = value;
    } else if (flag == "--work") {
      o->work = value;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && o->steps > 0;
}

int fail(const absl::Status& s) {
  std::cerr << "custom_model: " << s.message() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) {
    std::cerr
        << "usage: custom_model [--steps N] [--backend tpusim|cpu] [--idx DIR] [--work DIR]\n";
    return 2;
  }
  const std::string records = o.work + "/records";
  if (!std::filesystem::exists(records + "/t10k-00000-of-00002.tfrecord")) {
    runtime::data::IdxConversion job;
    job.images = o.idx + "/t10k-images-idx3-ubyte.gz";
    job.labels = o.idx + "/t10k-labels-idx1-ubyte.gz";
    job.output_dir = records;
    job.prefix = "t10k";
    job.shards = 2;
    if (auto made = runtime::data::convert_idx_to_tfrecord(job); !made.ok())
      return fail(made.status());
  }
  estimator::RunConfig config;
  config.model_dir = o.work + "/model";
  std::filesystem::remove_all(config.model_dir);  // train from scratch every run
  config.tpu_config.iterations_per_loop = 10;
  config.tpu_config.num_shards = 8;  // a v3-8's cores
  config.save_checkpoints_steps = o.steps;
  config.log_step_count_steps = 10;
  estimator::SimulatorOptions simulator;  // where it runs: tpusim's v3-8, or --backend cpu|gpu
  simulator.backend = o.backend;
  auto est = estimator::TPUEstimator::create(cnn_model_fn, config, {}, /*use_tpu=*/true,
                                             /*train_batch_size=*/128, /*eval_batch_size=*/128,
                                             /*predict_batch_size=*/128, simulator);
  if (!est.ok()) return fail(est.status());
  const estimator::InputFn input = records_input_fn(records + "/t10k-*");
  auto trained = (*est)->train(input, o.steps);
  if (!trained.ok()) return fail(trained.status());
  auto metrics = (*est)->evaluate(input, 4);
  if (!metrics.ok()) return fail(metrics.status());
  std::printf("trained %lld steps on %s: final loss %.4f, %.3f ms a step simulated\n",
              static_cast<long long>(trained->steps_run), o.backend.c_str(), trained->final_loss,
              trained->sim_seconds_per_step * 1e3);
  std::printf("eval: loss %.4f, accuracy %.4f over %d examples\n", metrics->at("loss"),
              metrics->at("accuracy"), 4 * 128);
  return 0;
}
