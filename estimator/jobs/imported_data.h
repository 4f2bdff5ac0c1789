#pragma once
// The input of an imported model fed by name (imported_job.h): TFRecords of tf.Example with a
// feature of each input's name and "label", parsed as tf.io.parse_single_example does with the
// model's feature spec, or TensorFlow's fake data for performance runs. The records are what a
// user's own tf.data pipeline would write:
//
//   input NAME   int inputs: int64 list, float inputs: float list; the example's elements
//   label        softmax cross-entropy: one int64 in [0, classes); mean squared error: a float
//                list of the output's example elements
//
// Training reads DIR/train-* (shuffled shards, 4 interleaved readers, a 1,000-record shuffle,
// repeat, the parse, batch, prefetch 2); evaluation DIR/eval-* once, or the train-* records once
// where there are no eval-* ones (as BERT's run_pretraining evaluates).

#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/data/example.h"

namespace tpusim::jobs {

struct ImportedData {
  std::string dir;  // the records: train-*, eval-*
  // One batch made on the host once and fed every step: float inputs uniform in [0, 1), integer
  // ones uniform below their id bound (0 or 1 without one), labels uniform classes or floats in
  // [0, 1); no files, no pipeline stage costs.
  bool synthetic = false;
  int map_threads = 2;
  int batch_threads = 1;
  int enqueue_threads = 1;
};

// The records' feature spec for `model`: each input and "label", fixed length.
runtime::data::FeatureSpec imported_feature_spec(const ImportedModel& model);

estimator::InputFn imported_train_input(const ImportedModel& model, const ImportedData& data);
estimator::InputFn imported_eval_input(const ImportedModel& model, const ImportedData& data);

// How many records evaluation reads (eval-*, else train-*): the whole global batches they fill
// are evaluate's and train's default evaluation steps. 0 for synthetic input.
absl::StatusOr<int64_t> imported_eval_examples(const ImportedData& data);

// The host config's stage costs for the train input (SimulatorOptions::HostTiming::kHostConfig):
// the first train shard's mean record, a tf.Example parse, and the batch's bytes an example (4 an
// element); synthetic input: no stage work. NotFound names a folder with no train-* records.
absl::Status use_imported_host_config_timing(const ImportedModel& model, const ImportedData& data,
                                             estimator::SimulatorOptions* config);

}  // namespace tpusim::jobs
