#pragma once
// Option values several subcommands share, parsed with messages that list what is accepted.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <absl/status/statusor.h>
#include <boost/program_options.hpp>

#include "common/named_values.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/models/zoo.h"
#include "sim/isa/isa.pb.h"
#include "sim/timing/mxu_policy.h"
#include "tools/tpusim/refusal.h"

namespace tpusim::cli {

// Bytes from "268435456", "256MiB", "1GiB", "64KiB" or "100MB", a whole number of f32 (rounded
// down to a multiple of 4), in [min, 64 GiB]; errors name `flag`.
absl::StatusOr<uint64_t> parse_bytes(const std::string& flag, const std::string& text,
                                     uint64_t min);
// A whole number in [min, max] from decimal digits (an optional '-'), nothing else; errors name
// `flag` and the range. For flags parsed by hand (sweep, tune), where atoi would be undefined
// past the type's range.
absl::StatusOr<int64_t> parse_count(const std::string& flag, const std::string& text, int64_t min,
                                    int64_t max);
// --rank-timeout's value: seconds from 5 to 86400 (a study's ranks say they are still there each
// second, so a shorter limit would lose ranks that are only busy; tools/studies/point_farm.h).
absl::StatusOr<double> parse_rank_timeout(const std::string& value);
// "A:B", global steps with 0 <= A <= B (--trace-steps); errors name `flag`.
absl::StatusOr<std::pair<int64_t, int64_t>> parse_step_range(const std::string& flag,
                                                             const std::string& text);
// The MXU's precisions by the words matmul's --precision takes (1, 3 and 6 bf16 passes).
inline constexpr NamedValues<isa::Precision, 3> kMatmulPrecisions{
    {{{isa::DEFAULT, "default"}, {isa::HIGH, "high"}, {isa::HIGHEST, "highest"}}}};
// "default" | "high" | "highest".
absl::StatusOr<isa::Precision> parse_precision(const std::string& name);
// A switch written as a word (compare's --baseline).
inline constexpr NamedValues<bool, 2> kOnOff{{{{true, "on"}, {false, "off"}}}};
// The words for a tensor's dtype in HBM or on the host link: matmul's --input-dtype, the data
// flags' --infeed-dtype.
inline constexpr NamedValues<isa::DType, 2> kTensorDTypes{
    {{{isa::F32, "f32"}, {isa::BF16, "bf16"}}}};
// "tpu" | "scalesim_ws" (sim/timing/mxu_policy.h).
absl::StatusOr<sim::MxuPolicy> parse_mxu_policy(const std::string& name);
// The zoo's model names joined by `separator`, for help texts: "mlp | mnist_cnn | ...".
std::string zoo_model_names(const std::string& separator);

// --dtype-policy float32|mixed_bfloat16 (the zoo model's Keras-style dtype policy), for the jobs
// that build a zoo model: train, evaluate, predict, compare.
void add_dtype_policy_option(boost::program_options::options_description& options);
// InvalidArgument (a usage error) names the flag and the accepted values.
absl::StatusOr<runtime::models::DTypePolicy> dtype_policy_from(
    const boost::program_options::variables_map& vm);

// --seq-length N: a BERT's tokens per sequence (the zoo's default 128; 512 at most, BERT's
// max_position_embeddings), for the jobs that build a zoo model.
void add_seq_length_option(boost::program_options::options_description& options);
// --onnx FILE (--onnx-input NAME, --onnx-output NAME) or --saved-model DIR
// (--saved-model-output NAME): a model from a file in place of --model.
void add_imported_model_options(boost::program_options::options_description& options);
// The model those flags name (jobs::open_onnx_job, jobs::open_saved_model_job) into `model`;
// nothing when they name none. A usage problem when --model names one too (a command whose
// --model has a default) or both are given, a failure when the file is refused.
Refused imported_model_from(const boost::program_options::variables_map& vm,
                            std::optional<jobs::ImportedModel>* model);
// Whether --onnx or --saved-model is given.
bool names_imported_model(const boost::program_options::variables_map& vm);
// The sequence length for `model`: 0 for an image model (a --seq-length given to one is a usage
// error naming the model), else the flag's value in [8, 512].
absl::StatusOr<int64_t> seq_length_from(const boost::program_options::variables_map& vm,
                                        const std::string& model);

}  // namespace tpusim::cli
