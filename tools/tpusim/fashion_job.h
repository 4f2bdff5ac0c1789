#pragma once
// The job `tpusim train | evaluate` runs: a zoo model on Fashion-MNIST TFRecords, with the
// seeds' input_fn (shuffled shards, parse, batch, prefetch) and a model_fn that trains with the
// chosen optimizer and evaluates accuracy.

#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"

namespace tpusim::cli {

// DIR holding train-*.tfrecord and t10k-*.tfrecord; when it has none, converts the Fashion-MNIST
// IDX files (Debian's dataset-fashion-mnist) into it first, saying so on stderr. Processes
// that call it at once (tpusim sweep -j) convert once: a lock on the folder orders them.
absl::Status ensure_fashion_mnist(const std::string& dir);

// The default data folder: $XDG_CACHE_HOME/tpusim/fashion-mnist or ~/.cache/tpusim/fashion-mnist.
std::string default_data_dir();

estimator::InputFn fashion_train_input(const std::string& dir);
// The 10,000 test images once, batched per shard (drop_remainder: whole eval batches only).
estimator::InputFn fashion_eval_input(const std::string& dir);
// Charges the train input pipeline from the slice's host config instead of measuring it: the
// fashion_train_input stages (4 interleaved readers, a 2-thread parse map, batch, enqueue)
// with one Fashion-MNIST example's work (an 840-byte tf.Example record, 784 raw pixels, 3,140
// bytes of f32 image and label in the batch).
void use_host_config_timing(estimator::RunConfig* config);

estimator::ModelFn zoo_model_fn(const std::string& model, runtime::OptimizerSpec optimizer);

}  // namespace tpusim::cli
