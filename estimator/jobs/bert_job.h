#pragma once
// The job `tpusim train` runs for a BERT (runtime/models/bert.h): google-research/bert's
// run_pretraining.py in TPUEstimator form. input_fn reads TFRecords of its seven features
// (`tpusim data make-bert` writes them; runtime/data/bert_records.h) through shuffled shards,
// the parse, batch and prefetch; or, with `synthetic`, one batch made on the host once (TF's
// fake data for performance runs). model_fn: the masked-LM plus next-sentence loss in training,
// run_pretraining's metric_fn (masked_lm_accuracy and _loss, next_sentence_accuracy and _loss)
// in evaluation.

#include <functional>
#include <string>

#include <absl/status/statusor.h>

#include "estimator/estimator.h"
#include "runtime/models/zoo.h"

namespace tpusim::jobs {

struct BertData {
  std::string dir;  // records: train-* shards of `seq_length` tokens
  bool synthetic = false;
  int64_t seq_length = 128;
  int map_threads = 2;
  int batch_threads = 1;
  int enqueue_threads = 1;
};

// $XDG_CACHE_HOME/tpusim/bert-<seq_length> (or ~/.cache/...): where records are made on first use.
std::string default_bert_data_dir(int64_t seq_length);

// When data.dir has no train-* shards, writes synthetic ones there first (10 shards, 10,240
// examples at data.seq_length, seed 1: what `tpusim data make-bert --out DIR --seq-length N
// --examples 10240 --shards 10` writes), saying so on `log`. Nothing for synthetic input.
absl::Status ensure_bert_records(const BertData& data,
                                 const std::function<void(const std::string&)>& log);

// Shuffled shards read by 4 interleaved threads, a 1,000-record shuffle, repeat, the parse on
// map_threads, batch (whole batches), prefetch 2: run_pretraining.py's input_fn.
estimator::InputFn bert_train_input(const BertData& data);
// The records once, in order, whole batches only (run_pretraining's evaluation reads the same
// files).
estimator::InputFn bert_eval_input(const BertData& data);

// The host config's stage costs for the train input (SimulatorOptions::HostTiming::kHostConfig):
// one record's bytes (the first shard's mean), a tf.Example parse, and the batch's bytes an example
// (the five int features as s32, the weights as f32, the label). Synthetic input: no stage work.
absl::Status use_bert_host_config_timing(const BertData& data, estimator::SimulatorOptions* config);

// BERT's model_fn: `model` (bert_large, bert_base, bert_tiny) under `policy`; train with
// `optimizer`, evaluate run_pretraining's metrics. Predict is refused (pretraining has no
// serving signature).
estimator::ModelFn bert_model_fn(const std::string& model, runtime::OptimizerSpec optimizer,
                                 runtime::models::DTypePolicy policy);

// BERT's optimizer as run_pretraining.py's MLPerf form sets it up: LAMB (weight decay 0.01,
// epsilon 1e-6, layer norms and biases undecayed) after clipping the gradients to global norm 1.
runtime::OptimizerSpec bert_lamb(float learning_rate);

}  // namespace tpusim::jobs
