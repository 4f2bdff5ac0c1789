#pragma once
// The flags several commands share, each declared once here with its meaning and its one
// default. A command that wants another default passes it with the reason, which its --help
// shows after the flag's meaning ("(here 256: ...)"). Each add_* may bind the value to a
// variable, as Boost.Program_options' po::value(&x) does.

#include <cstdint>
#include <optional>
#include <string>

#include <absl/status/status.h>
#include <boost/program_options.hpp>

namespace tpusim::cli {

// A command's own default for a shared flag, and why it is not the shared one.
template <typename T>
struct OtherDefault {
  T value;
  std::string why;
};

// --config SLICE: the slice config file or built-in name the tpusim backend simulates (v3-8).
void add_config_flag(boost::program_options::options_description& options,
                     std::string* bound = nullptr);
// --json: print JSON instead of text.
void add_json_flag(boost::program_options::options_description& options);
// --report FILE: also write the JSON report to FILE.
void add_report_flag(boost::program_options::options_description& options);
// Writes a report's text to `path`, flushed and checked (a full disk, /dev/full, a folder):
// "cannot write the report to PATH" when any of it did not reach the file.
absl::Status write_report_file(const std::string& path, const std::string& text);
// Checks before a run that its outputs can go where the flags say, so that no run is spent on a
// destination that fails at its end: --report's folder created and its file opened for writing
// (appending: nothing in it is lost, and a file the check created is removed again),
// --export-dir's folder created.
// Errors name the flag and the path.
absl::Status check_output_destinations(const boost::program_options::variables_map& vm);
// --batch-size N: the global batch, over every replica (1024, a v3-8 at 128 a core).
void add_batch_size_flag(boost::program_options::options_description& options,
                         int64_t* bound = nullptr,
                         const std::optional<OtherDefault<int64_t>>& other = std::nullopt);
// --model NAME: a zoo model (mnist_cnn). An OtherDefault with an empty value: no default (the
// command needs --model, --onnx or --saved-model).
void add_model_flag(boost::program_options::options_description& options,
                    std::string* bound = nullptr,
                    const std::optional<OtherDefault<std::string>>& other = std::nullopt);
// --optimizer NAME (adam) and --learning-rate R (2e-3), the training jobs' optimizer.
void add_optimizer_flags(boost::program_options::options_description& options, float* learning_rate,
                         const std::optional<OtherDefault<std::string>>& other_optimizer = {},
                         const std::optional<OtherDefault<float>>& other_rate = {});
// --eval-steps N: test batches to evaluate (0: as many whole batches as the test set fills).
void add_eval_steps_flag(boost::program_options::options_description& options,
                         int64_t* bound = nullptr);
// --mxu-policy tpu|scalesim_ws: the MXU timing policy (tpu).
void add_mxu_policy_flag(boost::program_options::options_description& options);
// --timing-only: simulate time only, computing no values.
void add_timing_only_flag(boost::program_options::options_description& options);
// --dump: print the ISA program (and run nothing).
void add_dump_flag(boost::program_options::options_description& options);

}  // namespace tpusim::cli
