#pragma once
// The job `tpusim train | evaluate` runs: a zoo model on Fashion-MNIST TFRecords, with the
// seeds' input_fn (shuffled shards, parse, batch, prefetch) and a model_fn that trains with the
// chosen optimizer and evaluates accuracy. With JPEG records the input_fn is flowers-style
// (decode, resize, random crop, flip: runtime/data/jpeg_preprocessing.h) at a chosen image size:
// the infeed study.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {

// Which records the job reads and how its input_fn turns them into images.
struct FashionData {
  std::string dir;    // the TFRecords: train-* and t10k-*
  bool jpeg = false;  // JPEG records, flowers-style preprocessing; else 28x28 raw pixels
  // TensorFlow's fake-data mode for performance runs: one batch of random images and labels made
  // on the host once and fed every step; no files, no pipeline stage costs (the host link still
  // carries every step's batch). Images image_size x image_size x channels, labels in
  // [0, classes): the model's published inputs (use_model_inputs).
  bool synthetic = false;
  // --input examples: not Fashion-MNIST but TFRecords of tf.Example in `dir` with a feature of
  // each input's name, for an imported model (imported_data.h).
  bool examples = false;
  int image_size = 28;       // the side of the images the model sees (JPEG: also the stored side)
  int channels = 1;          // synthetic: the images' channels (Fashion-MNIST's are grey)
  int classes = 10;          // synthetic: labels are drawn from [0, classes)
  int map_threads = 2;       // the parse / decode map's threads
  int batch_threads = 1;     // batches assembled at once (the batch's num_parallel_calls)
  int enqueue_threads = 1;   // threads enqueueing a step's batches for the cores
  bool bf16_images = false;  // the host casts the images to bfloat16 for the infeed
};

// Synthetic input for `model`: its published images' channels and classes, and its side unless
// `side_given` (--image-size). NotFound names an unknown model.
absl::Status use_model_inputs(const std::string& model, bool side_given, FashionData* data);

// The run's side of the data options: the enqueue threads (SimulatorOptions::host_enqueue_threads)
// and the images' infeed dtype (SimulatorOptions::bf16_infeeds).
void use_data_options(const FashionData& data, estimator::SimulatorOptions* config);

// A usage problem with the data flags (raw records at a size other than 28, a side or thread
// count out of range), or "" when they are fine.
std::string check_fashion_data(const FashionData& data);

// When data.dir has no train-* or t10k-* shards, converts the Fashion-MNIST IDX files (Debian's
// dataset-fashion-mnist) into it first, saying so on `log` (a line for each conversion; may be
// empty): raw pixels, or JPEGs upscaled to the image size. Processes that call it at once
// (tpusim sweep -j) convert once: a lock on the folder orders them.
absl::Status ensure_fashion_mnist(const FashionData& data,
                                  const std::function<void(const std::string&)>& log);

// $XDG_CACHE_HOME/tpusim/NAME, or ~/.cache/tpusim/NAME: where the jobs keep data they make.
std::string cache_dir(const std::string& name);

// The default data folder: $XDG_CACHE_HOME/tpusim/fashion-mnist or ~/.cache/tpusim/fashion-mnist,
// with "-jpeg<S>" added for JPEG records of side S.
std::string default_data_dir(bool jpeg = false, int image_size = 28);

// Shuffled shards read by 4 interleaved threads, a 10,000-example shuffle, repeat, the map
// (parse, or decode-resize-crop-flip), batch, prefetch 2; stages profiled for the host model.
estimator::InputFn fashion_train_input(const FashionData& data);
// The 10,000 test images once, batched per shard (drop_remainder: whole eval batches only);
// JPEGs get the eval preprocessing (resize, central crop).
estimator::InputFn fashion_eval_input(const FashionData& data);
// Charges the train input pipeline from the slice's host config instead of measuring it: the
// fashion_train_input stages (4 interleaved readers, the map on data.map_threads, batch on
// data.batch_threads, enqueue on data.enqueue_threads) with one example's work. Raw: an 840-byte
// tf.Example record, 784 raw pixels, 3,140 bytes of f32 image and label in the batch. JPEG: the
// first train shard's mean record size, an S x S decode, a resize to S*8/7, the crop and flip,
// S*S*4+4 bytes in the batch. With bf16_images the batch holds 2 bytes a pixel (the cast done in
// the map, as TPU input_fns do). Errors name the shard that could not be read for its record size.
absl::Status use_host_config_timing(const FashionData& data, estimator::SimulatorOptions* config);

// Shared by the jobs: the files of `dir` named PREFIX-*, sorted (none when the folder is
// missing), and the first train-* shard's mean record size in bytes (the host model's read cost
// per example; NotFound when there is no shard or it has no records).
std::vector<std::string> shard_files(const std::string& dir, const std::string& prefix);
absl::StatusOr<uint64_t> mean_train_record_bytes(const std::string& dir);
// A train or eval batch's options: whole batches only, assembled on `batch_threads`, profiled as
// "batch" when the run measures its stages.
runtime::data::BatchOptions whole_batches(int batch_threads, const estimator::Params& p);
// Reader options whose records are named (ReaderOptions::name_records): an error about a
// record's contents gives its file and place.
runtime::data::ReaderOptions named_records();
// The train-* records of `dir` for shard p.shard_index of p.num_shards, in a shuffled file
// order, read by 4 interleaved threads: each host its files, or with fewer files than shards
// every host all of them and its share of the records (tf.data's AUTO sharding).
// A record larger than `reader.max_record_bytes` (when set) is refused as it is read; the records
// are named (ReaderOptions::name_records), so an error about one's contents gives its file.
runtime::data::DatasetPtr sharded_train_records(const std::string& dir, const estimator::Params& p,
                                                runtime::data::ReaderOptions reader = {});
// The host config's timing of the standard stages: 4 interleaved readers, the map and the batch
// on so many threads (SimulatorOptions::HostTiming::kHostConfig).
void use_host_config_stages(int map_threads, int batch_threads,
                            estimator::SimulatorOptions* config);

// The threads of an input pipeline's stages.
struct PipelineThreads {
  int map = 2, batch = 1, enqueue = 1;
};
// The host config's stage costs (SimulatorOptions::HostTiming::kHostConfig) of a tf.Example
// pipeline over the train-* records of `dir`: the standard stages on `threads`, the first shard's
// mean record read and parsed, `batch_bytes` an example in the batch. With `synthetic` (one batch
// made once) no stage does any work per example. NotFound names a folder with no records.
absl::Status use_example_host_config(const std::string& dir, bool synthetic,
                                     const PipelineThreads& threads, uint64_t batch_bytes,
                                     estimator::SimulatorOptions* config);

// A classifier's spec from its logits [batch, classes]: class and probabilities in prediction;
// the mean softmax cross-entropy on `labels` with `optimizer` in training, and accuracy in
// evaluation.
estimator::TPUEstimatorSpec classifier_spec(runtime::GraphBuilder& b, runtime::Value logits,
                                            std::optional<runtime::Value> labels,
                                            estimator::Mode mode,
                                            const runtime::OptimizerSpec& optimizer);

// The zoo model as a model_fn: cross-entropy loss and `optimizer` in training, accuracy in
// evaluation, class and probabilities in prediction; built under `policy`.
estimator::ModelFn zoo_model_fn(
    const std::string& model, runtime::OptimizerSpec optimizer,
    runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32);

}  // namespace tpusim::jobs
