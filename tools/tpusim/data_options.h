#pragma once
// The data flags of the Fashion-MNIST jobs (train, evaluate, predict, compare):
//   --data DIR  --input raw|jpeg  --image-size S  --map-threads N  --batch-threads N
//   --enqueue-threads N  --infeed-dtype f32|bf16
// and the FashionData they describe.

#include <optional>
#include <string>

#include <absl/status/statusor.h>
#include <boost/program_options.hpp>

#include "common/named_values.h"
#include "estimator/jobs/bert_job.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/jobs/imported_data.h"

namespace tpusim::cli {

// --input: where a job's examples come from (FashionData says what each reads).
enum class InputKind { kRaw, kJpeg, kSynthetic, kExamples };
inline constexpr NamedValues<InputKind, 4> kInputKinds{{{{InputKind::kRaw, "raw"},
                                                         {InputKind::kJpeg, "jpeg"},
                                                         {InputKind::kSynthetic, "synthetic"},
                                                         {InputKind::kExamples, "examples"}}}};
// --input's value; InvalidArgument (a usage error) lists the kinds.
absl::StatusOr<InputKind> input_kind_from(const boost::program_options::variables_map& vm);

void add_data_options(boost::program_options::options_description& options);

// InvalidArgument (a usage error) names the flag; --data defaults by --input and --image-size.
// `--input synthetic` only where `synthetic_allowed` (train: a performance run with no test set;
// compare: the same batches on every backend).
absl::StatusOr<jobs::FashionData> fashion_data_from(const boost::program_options::variables_map& vm,
                                                    bool synthetic_allowed = false);

// The same flags for a BERT `model` of `seq_length` tokens: its records in --data (default
// ~/.cache/tpusim/bert-<N>) or synthetic features, on the data's threads. --input jpeg,
// --image-size and --infeed-dtype bf16 do not apply: InvalidArgument names them.
absl::StatusOr<jobs::BertData> bert_data_from(const boost::program_options::variables_map& vm,
                                              const jobs::FashionData& data,
                                              const std::string& model, int64_t seq_length);

// The data an imported model is fed by name, or nothing where images feed it: --input examples
// (the records in --data, which it needs), or --input synthetic for a model images cannot feed
// (no image input, or a mean squared error's float labels).
absl::StatusOr<std::optional<jobs::ImportedData>> named_data_from(
    const boost::program_options::variables_map& vm, const jobs::FashionData& data,
    const jobs::ImportedModel& model);

// InvalidArgument when a zoo model is given what only an imported one takes: --input examples
// or --loss.
absl::Status check_zoo_inputs(const boost::program_options::variables_map& vm,
                              const jobs::FashionData& data);

}  // namespace tpusim::cli
