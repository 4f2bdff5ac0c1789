#include "estimator/jobs/imported_data.h"

#include <random>

#include "common/strings.h"
#include "estimator/jobs/fashion_job.h"
#include "runtime/data/dataset.h"

namespace tpusim::jobs {
namespace {

namespace data = runtime::data;

data::FeatureSpecEntry entry(runtime::DType dtype, const runtime::Shape& example) {
  return data::fixed_len(
      dtype == runtime::DType::kS32 ? data::FeatureType::kInt64 : data::FeatureType::kFloat,
      example.dims());
}

// A batch's component of `batch` examples of `example` shape, drawn by `draw`.
template <typename Draw>
data::FeatureValue drawn(runtime::DType dtype, int64_t batch, const runtime::Shape& example,
                         Draw draw) {
  data::FeatureValue v;
  v.type = dtype == runtime::DType::kS32 ? data::FeatureType::kInt64 : data::FeatureType::kFloat;
  v.shape = example.dims();
  v.shape.insert(v.shape.begin(), batch);
  const auto n = static_cast<size_t>(batch * example.elements());
  for (size_t i = 0; i < n; ++i) {
    if (v.type == data::FeatureType::kInt64) {
      v.ints.push_back(static_cast<int64_t>(draw()));
    } else {
      v.floats.push_back(static_cast<float>(draw()));
    }
  }
  return v;
}

// TensorFlow's fake data: one batch per shard made once from a fixed seed (the shard's index
// mixed in) and repeated.
estimator::InputFn synthetic_input(const ImportedModel& m) {
  return [m](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    std::mt19937_64 rng(0x5eed + 1000003 * static_cast<uint64_t>(p.shard_index));
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    data::Element batch;
    for (const ModelInput& in : m.inputs) {
      std::uniform_int_distribution<int64_t> id(0, std::max<int64_t>(in.id_bound, 2) - 1);
      batch[in.name] = in.dtype == runtime::DType::kS32
                           ? drawn(in.dtype, p.batch_size, in.example, [&] { return id(rng); })
                           : drawn(in.dtype, p.batch_size, in.example, [&] { return unit(rng); });
    }
    if (m.loss == Loss::kSoftmaxCrossEntropy) {
      std::uniform_int_distribution<int64_t> label(0, m.classes - 1);
      batch["label"] =
          drawn(runtime::DType::kS32, p.batch_size, runtime::Shape{}, [&] { return label(rng); });
    } else {
      batch["label"] =
          drawn(runtime::DType::kF32, p.batch_size, m.output_example, [&] { return unit(rng); });
    }
    return data::Dataset::from_elements({std::move(batch)})->repeat();
  };
}

// The parse: {"record": bytes} to the model's features and label.
data::MapFn parse_fn(const ImportedModel& m) {
  const data::FeatureSpec spec = imported_feature_spec(m);
  const std::string where = str_cat("a record for ", m.path);
  return [spec, where](data::Element in) -> absl::StatusOr<data::Element> {
    const auto record = in.find("record");
    if (record == in.end() || record->second.bytes.size() != 1)
      return absl::InvalidArgumentError("imported parse: the element has no scalar 'record'");
    return data::parse_example(record->second.bytes[0], spec, where);
  };
}

absl::Status check_records(const ImportedData& d) {
  if (!shard_files(d.dir, "train").empty()) return absl::OkStatus();
  return absl::NotFoundError(
      str_cat("no train-* TFRecords in ", d.dir,
              " (--input examples reads tf.Example records with a feature of each input's "
              "name and 'label')"));
}

}  // namespace

data::FeatureSpec imported_feature_spec(const ImportedModel& m) {
  data::FeatureSpec spec;
  for (const ModelInput& in : m.inputs) {
    spec[in.name] = entry(in.dtype, in.example);
    if (in.dtype == runtime::DType::kS32 && in.id_bound > 0) {
      spec[in.name] = data::in_range(spec[in.name], 0, in.id_bound,
                                     str_cat("the rows of the table it indexes: ", in.id_bound));
    }
  }
  spec["label"] = m.loss == Loss::kSoftmaxCrossEntropy
                      ? data::in_range(entry(runtime::DType::kS32, runtime::Shape{}), 0, m.classes,
                                       str_cat("the model's ", m.classes, " classes"))
                      : entry(runtime::DType::kF32, m.output_example);
  return spec;
}

estimator::InputFn imported_train_input(const ImportedModel& m, const ImportedData& d) {
  if (d.synthetic) return synthetic_input(m);
  return [m, d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    if (auto s = check_records(d); !s.ok()) return s;
    auto parse = parse_fn(m);
    if (p.profile != nullptr) parse = p.profile->timed("parse", parse, d.map_threads);
    return sharded_train_records(d.dir, p)
        ->shuffle(1000, /*seed=*/2)
        ->repeat()
        ->map(parse, d.map_threads)
        ->batch(p.batch_size, whole_batches(d.batch_threads, p))
        ->prefetch(2);
  };
}

estimator::InputFn imported_eval_input(const ImportedModel& m, const ImportedData& d) {
  if (d.synthetic) return synthetic_input(m);
  return [m, d](const estimator::Params& p) -> absl::StatusOr<data::DatasetPtr> {
    if (auto s = check_records(d); !s.ok()) return s;
    const std::string prefix = shard_files(d.dir, "eval").empty() ? "train" : "eval";
    return data::Dataset::list_files(d.dir + "/" + prefix + "-*")
        ->interleave_tfrecords({}, named_records())
        ->shard(p.num_shards, p.shard_index)
        ->map(parse_fn(m), 2)
        ->batch(p.batch_size, whole_batches(d.batch_threads, p))
        ->prefetch(2);
  };
}

absl::StatusOr<int64_t> imported_eval_examples(const ImportedData& d) {
  if (d.synthetic) return 0;
  if (auto s = check_records(d); !s.ok()) return s;
  const std::string prefix = shard_files(d.dir, "eval").empty() ? "train" : "eval";
  auto it = data::Dataset::list_files(d.dir + "/" + prefix + "-*")
                ->interleave_tfrecords({})
                ->make_iterator();
  int64_t count = 0;
  for (;;) {
    auto next = it->next();
    if (!next.ok()) return next.status();
    if (!next->has_value()) return count;
    ++count;
  }
}

absl::Status use_imported_host_config_timing(const ImportedModel& m, const ImportedData& d,
                                             estimator::SimulatorOptions* config) {
  int64_t elements = m.loss == Loss::kSoftmaxCrossEntropy ? 1 : m.output_example.elements();
  for (const ModelInput& in : m.inputs) elements += in.example.elements();
  return use_example_host_config(d.dir, d.synthetic,
                                 {d.map_threads, d.batch_threads, d.enqueue_threads},
                                 static_cast<uint64_t>(elements) * 4, config);
}

}  // namespace tpusim::jobs
