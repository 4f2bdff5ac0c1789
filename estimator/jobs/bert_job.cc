#include "estimator/jobs/bert_job.h"

#include "common/strings.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/metrics.h"
#include "runtime/data/bert_records.h"
#include "runtime/models/bert.h"

namespace tpusim::jobs {
namespace {

namespace data = runtime::data;
using runtime::HostTensor;
using runtime::Value;

// The records ensure_bert_records makes when a folder has none.
constexpr int64_t kDefaultExamples = 10240;
constexpr int kDefaultShards = 10;

data::BertRecordShape record_shape(const BertData& d) {
  data::BertRecordShape shape;
  shape.seq_length = static_cast<int>(d.seq_length);
  shape.max_predictions = static_cast<int>(runtime::models::bert_max_predictions(d.seq_length));
  return shape;
}

// Fake data: one batch per shard, made once from a seed with the shard's index mixed in.
estimator::InputFn synthetic_input(const BertData& d) {
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    data::Element batch = data::synthetic_bert_batch(record_shape(d), p.batch_size,
                                                     0x5eed + 1000003 * uint64_t{p.shard_index});
    return data::Dataset::from_elements({std::move(batch)})->repeat();
  };
}

// run_pretraining.py's features from the model_fn's inputs.
runtime::models::BertFeatures features_of(const estimator::Features& f) {
  runtime::models::BertFeatures b;
  b.input_ids = f.at("input_ids");
  b.input_mask = f.at("input_mask");
  b.segment_ids = f.at("segment_ids");
  b.masked_lm_positions = f.at("masked_lm_positions");
  b.masked_lm_ids = f.at("masked_lm_ids");
  b.masked_lm_weights = f.at("masked_lm_weights");
  b.next_sentence_labels = f.at("next_sentence_labels");
  return b;
}

// run_pretraining.py's metric_fn on the outfed tensors: tf.metrics.accuracy and tf.metrics.mean,
// the masked-LM ones weighted by masked_lm_weights.
absl::StatusOr<std::map<std::string, double>> pretraining_metrics(
    const std::map<std::string, HostTensor>& t) {
  const HostTensor& weights = t.at("masked_lm_weights");
  std::map<std::string, double> out;
  const std::pair<const char*, absl::StatusOr<double>> metrics[] = {
      {"masked_lm_accuracy", estimator::metrics::accuracy(t.at("masked_lm_ids"),
                                                          t.at("masked_lm_predictions"), &weights)},
      {"masked_lm_loss", estimator::metrics::mean(t.at("masked_lm_example_loss"), &weights)},
      {"next_sentence_accuracy", estimator::metrics::accuracy(t.at("next_sentence_labels"),
                                                              t.at("next_sentence_predictions"))},
      {"next_sentence_loss", estimator::metrics::mean(t.at("next_sentence_example_loss"))},
  };
  for (const auto& [name, value] : metrics) {
    if (!value.ok()) return value.status();
    out[name] = *value;
  }
  return out;
}

// The eval spec's metric tensors: predictions, labels, weights and per-example losses, flat.
void add_metric_tensors(runtime::GraphBuilder& b, const runtime::models::BertFeatures& f,
                        const runtime::models::BertOutputs& out,
                        estimator::TPUEstimatorSpec* spec) {
  const int64_t n = out.masked_lm_log_probs.shape().dim(0);
  const int64_t batch = out.next_sentence_log_probs.shape().dim(0);
  spec->metric_tensors = {
      {"masked_lm_predictions", b.argmax(out.masked_lm_log_probs, 1)},
      {"masked_lm_ids", b.reshape(f.masked_lm_ids, {n})},
      {"masked_lm_weights", b.reshape(f.masked_lm_weights, {n})},
      {"masked_lm_example_loss", out.masked_lm_example_loss},
      {"next_sentence_predictions", b.argmax(out.next_sentence_log_probs, 1)},
      {"next_sentence_labels", b.reshape(f.next_sentence_labels, {batch})},
      {"next_sentence_example_loss", out.next_sentence_example_loss},
  };
  spec->metric_fn = pretraining_metrics;
}

}  // namespace

std::string default_bert_data_dir(int64_t seq_length) {
  return cache_dir(str_cat("bert-", seq_length));
}

absl::Status ensure_bert_records(const BertData& d,
                                 const std::function<void(const std::string&)>& log) {
  if (d.synthetic || !shard_files(d.dir, "train").empty()) return absl::OkStatus();
  if (log) {
    log(str_cat("writing ", kDefaultExamples, " synthetic BERT pretraining examples of ",
                d.seq_length, " tokens to ", d.dir, " (tpusim data make-bert)\n"));
  }
  data::BertRecordJob job;
  job.shape = record_shape(d);
  job.output_dir = d.dir;
  job.examples = kDefaultExamples;
  job.shards = kDefaultShards;
  auto written = data::write_bert_records(job);
  return written.ok() ? absl::OkStatus() : written.status();
}

estimator::InputFn bert_train_input(const BertData& d) {
  if (d.synthetic) return synthetic_input(d);
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    if (shard_files(d.dir, "train").empty())
      return absl::NotFoundError(str_cat("no train-* BERT records in ", d.dir,
                                         " (tpusim data make-bert --out ", d.dir, " writes them)"));
    auto parse = data::bert_parse_fn(record_shape(d));
    if (p.profile != nullptr) parse = p.profile->timed("parse", parse, d.map_threads);
    auto ds = sharded_train_records(d.dir, p)->shuffle(1000, /*seed=*/2)->repeat();
    return ds->map(parse, d.map_threads)
        ->batch(p.batch_size, whole_batches(d.batch_threads, p))
        ->prefetch(2);
  };
}

estimator::InputFn bert_eval_input(const BertData& d) {
  if (d.synthetic) return synthetic_input(d);
  return [d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    auto ds = data::Dataset::list_files(d.dir + "/train-*")
                  ->interleave_tfrecords({}, named_records())
                  ->shard(p.num_shards, p.shard_index)
                  ->map(data::bert_parse_fn(record_shape(d)), 2)
                  ->batch(p.batch_size, whole_batches(d.batch_threads, p));
    return ds->prefetch(2);
  };
}

absl::Status use_bert_host_config_timing(const BertData& d, estimator::SimulatorOptions* config) {
  const auto per = static_cast<uint64_t>(runtime::models::bert_max_predictions(d.seq_length));
  return use_example_host_config(
      d.dir, d.synthetic, {d.map_threads, d.batch_threads, d.enqueue_threads},
      3 * static_cast<uint64_t>(d.seq_length) * 4 + 3 * per * 4 + 4, config);
}

estimator::ModelFn bert_model_fn(const std::string& model, runtime::OptimizerSpec optimizer,
                                 runtime::models::DTypePolicy policy) {
  return [model, optimizer, policy](
             runtime::GraphBuilder& b, const estimator::Features& f, std::optional<Value>,
             estimator::Mode mode,
             const estimator::Params&) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    if (mode == estimator::Mode::kPredict) {
      return absl::UnimplementedError(
          str_cat(model,
                  " is a pretraining model: it trains and evaluates, and has no "
                  "predictions to serve"));
    }
    for (const char* name : {"input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                             "masked_lm_ids", "masked_lm_weights", "next_sentence_labels"}) {
      if (f.count(name) == 0)
        return absl::InvalidArgumentError(str_cat(model, " needs the input feature '", name,
                                                  "' (run_pretraining.py's features)"));
    }
    auto config = runtime::models::bert_config(model);
    if (!config.ok()) return config.status();
    const runtime::models::BertFeatures features = features_of(f);
    auto out = runtime::models::build_bert_pretraining(b, *config, features,
                                                       mode == estimator::Mode::kTrain, 1, policy);
    if (!out.ok()) return out.status();
    estimator::TPUEstimatorSpec spec;
    spec.loss = out->loss;
    spec.train_op = optimizer;
    if (mode == estimator::Mode::kEval) add_metric_tensors(b, features, *out, &spec);
    return spec;
  };
}

runtime::OptimizerSpec bert_lamb(float learning_rate) {
  runtime::OptimizerSpec spec = runtime::optimizer_defaults(runtime::OptimizerSpec::Kind::kLamb);
  spec.learning_rate.initial = learning_rate;
  spec.clip_global_norm = 1.0f;
  return spec;
}

}  // namespace tpusim::jobs
