// tpusim train: the main job. A zoo model trained on Fashion-MNIST with TPUEstimator on a
// simulated slice (or the cpu backend), then evaluated on the test set; prints accuracy and the
// simulated step time with its breakdown, and writes a JSON report. With no arguments it runs
// the demo: the seeds' MNIST CNN on a v3-8, global batch 1024, 50 steps per host loop, Adam at
// 2e-3 for 200 steps (about 3.4 epochs; the cpu backend reaches 0.881 test accuracy at 180).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/json_text.h"
#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/estimator.h"
#include "estimator/jobs/bert_job.h"
#include "estimator/jobs/fashion_job.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/backend/registry.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/progress_bar.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"
#include "tools/tpusim/train_job.h"
#include "tools/tpusim/train_report.h"
#include "traces/trace_writer.h"

namespace tpusim::cli {

using jobs::ensure_fashion_mnist;
using jobs::fashion_eval_input;
using jobs::fashion_train_input;
using jobs::FashionData;
using jobs::use_data_options;
using jobs::use_host_config_timing;
using jobs::use_model_inputs;
using jobs::zoo_model_fn;
namespace {

namespace po = boost::program_options;
using HostTiming = estimator::SimulatorOptions::HostTiming;

// --host-timing: the input pipeline's measured stage times, or the host config's costs.
constexpr NamedValues<HostTiming, 2> kHostTimings{
    {{{HostTiming::kMeasured, "measured"}, {HostTiming::kHostConfig, "config"}}}};

std::string fresh_model_dir(const std::string& model) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return str_cat(std::filesystem::temp_directory_path().string(), "/tpusim-", model, "-",
                 std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

// train's options, the numbers bound to `f`.
po::options_description train_options(TrainFlags* f) {
  po::options_description options("options");
  add_model_flag(options);
  add_config_flag(options);
  add_batch_size_flag(options, &f->batch);
  add_optimizer_flags(options, &f->lr);
  add_eval_steps_flag(options, &f->eval_steps);
  add_report_flag(options);
  add_timing_only_flag(options);
  options.add_options()("train-steps", po::value<int64_t>(&f->steps)->default_value(200),
                        "the global step to train to (like max_steps: resumes from model_dir)")(
      "iterations-per-loop", po::value<uint32_t>(&f->ipl)->default_value(50),
      "device steps per host round trip")(
      "lr-decay-rate", po::value<float>(&f->decay_rate)->default_value(1.0f),
      "exponential decay: the rate is multiplied by this every --lr-decay-steps (1: constant)")(
      "host-timing", po::value<std::string>()->default_value("measured"),
      "measured: the input pipeline's real stage times on this machine (vary run to run); "
      "config: the host config's stage costs (the same every run)")(
      "lr-decay-steps", po::value<int64_t>(&f->decay_steps)->default_value(1),
      "steps over which the rate decays by --lr-decay-rate (continuously)")(
      "model-dir", po::value<std::string>(), "checkpoints and TensorBoard files (default: new)")(
      "log-every", po::value<int64_t>(&f->log_every)->default_value(50), "steps between log lines")(
      "fold-replicas", po::value<bool>()->default_value(false, "off"),
      "with --timing-only on a slice of several hosts: simulate only the first host's replicas "
      "cycle-level; every other core only joins the collectives, so the interconnect is "
      "simulated in full (replica folding: pods in the memory and time of one host)")(
      "trace", po::value<std::string>(),
      "write the device timeline to FILE: .pftrace (Perfetto) or .json (Chrome trace)")(
      "trace-steps", po::value<std::string>(),
      "A:B: trace only the device loops holding global steps A..B (default: all)")(
      "trace-counter-window-ns", po::value<uint64_t>()->default_value(0),
      "average the trace's rate counters (link utilisation, HBM bandwidth) over windows of N ns, "
      "one sample a window at most: a pod's trace shrinks many times (0: every change)")(
      "profile", po::bool_switch(),
      "write an XProf profile of the run to MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb "
      "(xprof --logdir MODEL_DIR)")(
      "profile-steps", po::value<std::string>(),
      "A:B: profile only the device loops holding global steps A..B (default: all)")(
      "export-dir", po::value<std::string>(),
      "also write a saved model there (tpusim predict --saved-model DIR)");
  add_backend_flag(options);
  add_precision_flag(options);
  add_compile_flags(options);
  add_dtype_policy_option(options);
  add_data_options(options);
  add_seq_length_option(options);
  add_imported_model_options(options);
  return options;
}

constexpr char kTrainUsage[] =
    "usage: tpusim train [--model NAME | --onnx FILE [--onnx-input NAME] [--onnx-output NAME] |\n"
    "                     --saved-model DIR [--saved-model-output NAME]]\n"
    "                    [--loss softmax_cross_entropy|mean_squared_error (--onnx, "
    "--saved-model)]\n"
    "                    [--data DIR] [--config SLICE | --backend cpu|gpu [--precision mxu|fp32]]\n"
    "                    [--dtype-policy float32|mixed_bfloat16]\n"
    "                    [--allreduce ring|bidir_ring|torus2d|torus]\n"
    "                    [--overlap-allreduce on|off] [--allreduce-combine-threshold BYTES]\n"
    "                    [--fuse-convolutions on|off]\n"
    "                    [--fuse-pools on|off] [--fuse-reductions on|off]\n"
    "                    [--recompute-shared-producers on|off] [--fuse-multi-output on|off]\n"
    "                    [--fuse-producers on|off] [--fuse-conv-reductions on|off]\n"
    "                    [--fuse-pointwise-convolutions on|off] [--fuse-conv-producers on|off]\n"
    "                    [--fuse-conv-windows on|off] [--fuse-rng on|off]\n"
    "                    [--fuse-matmul-producers on|off] [--fuse-matmul-consumers on|off]\n"
    "                    [--fuse-conv-consumers on|off]\n"
    "                    [--train-steps N] [--iterations-per-loop N] [--batch-size N]\n"
    "                    [--optimizer adam|momentum|sgd|lamb] [--learning-rate R]\n"
    "                    [--seq-length N (BERT models)]\n"
    "                    [--model-dir DIR] [--report FILE.json]\n"
    "                    [--trace FILE.pftrace|FILE.json [--trace-steps A:B]\n"
    "                     [--trace-counter-window-ns N]] [--profile [--profile-steps A:B]]\n"
    "                    [--timing-only [--fold-replicas on|off]]\n"
    "                    [--input raw|jpeg|synthetic|examples [--image-size S]] [--map-threads N]\n"
    "                    [--batch-threads N] [--enqueue-threads N] [--infeed-dtype f32|bf16]\n"
    "                    [--host-timing measured|config]\n\n"
    "Trains a zoo model on Fashion-MNIST with TPUEstimator: input_fn reads the TFRecords on\n"
    "host threads, the infeed driver feeds every core, the gradients are all-reduced\n"
    "(CrossShardOptimizer), and iterations_per_loop steps run per host loop. Then evaluates\n"
    "on the test set and prints accuracy, the simulated step time and its breakdown.\n"
    "With no arguments: the demo (mnist_cnn, v3-8, batch 1024, Adam).\n"
    "The infeed study: --input jpeg --image-size 224 --map-threads N --timing-only reads\n"
    "JPEG records through a flowers-style pipeline (decode, resize, random crop, flip).\n"
    "BERT models (bert_large, bert_base, bert_tiny) pretrain on BERT's TFRecords from --data\n"
    "(written by tpusim data make-bert; synthetic ones are made on first use) or on\n"
    "--input synthetic, with LAMB unless --optimizer says otherwise (MLPerf's BERT; gradients\n"
    "clipped to global norm 1 as run_pretraining.py does) at 5e-5 unless --learning-rate says\n"
    "otherwise (run_pretraining.py's default); --eval-steps N evaluates run_pretraining's\n"
    "metrics.\n"
    "An imported model (--onnx FILE, --saved-model DIR) trains as a zoo model on images, or,\n"
    "fed by its inputs' names, on its own tf.Example records (--input examples --data DIR:\n"
    "train-*, eval-*) or synthetic inputs, with --loss softmax_cross_entropy or\n"
    "mean_squared_error.\n";

// --trace, --trace-steps, --trace-counter-window-ns, --profile and --profile-steps into `config`.
Refused trace_flags(const po::variables_map& vm, estimator::SimulatorOptions* config) {
  if (vm.count("trace") > 0) {
    config->trace_path = vm["trace"].as<std::string>();
    if (auto format = traces::trace_format_of(config->trace_path); !format.ok())
      return usage_problem(format.status());
  }
  if (vm.count("trace-steps") > 0) {
    auto range = parse_step_range("--trace-steps", vm["trace-steps"].as<std::string>());
    if (!range.ok()) return usage_problem(range.status());
    config->trace_first_step = range->first;
    config->trace_last_step = range->second;
  }
  config->trace_counter_window_ns = vm["trace-counter-window-ns"].as<uint64_t>();
  config->profile = vm["profile"].as<bool>();
  if (vm.count("profile-steps") > 0) {
    if (!config->profile) return Refusal{true, "--profile-steps needs --profile"};
    auto range = parse_step_range("--profile-steps", vm["profile-steps"].as<std::string>());
    if (!range.ok()) return usage_problem(range.status());
    config->profile_first_step = range->first;
    config->profile_last_step = range->second;
  }
  return std::nullopt;
}

// --timing-only, --fold-replicas and the trace flags, then the registry's check of every flag
// only some backends take.
Refused run_mode_flags(const po::variables_map& vm, estimator::SimulatorOptions* config) {
  config->timing_only = vm["timing-only"].as<bool>();
  config->fold_replicas = vm["fold-replicas"].as<bool>();
  if (config->fold_replicas && !config->timing_only)
    return Refusal{true, "--fold-replicas needs --timing-only (folded replicas compute no values)"};
  if (Refused r = trace_flags(vm, config)) return r;
  runtime::RunFeatures features;
  features.timing_only = config->timing_only;
  features.trace = !config->trace_path.empty();
  features.profile = config->profile;
  if (auto s = runtime::check_registered_options(config->backend, config->compile, features,
                                                 runtime::OptionNames::kFlags);
      !s.ok())
    return usage_problem(s);
  return std::nullopt;
}

// The RunConfig and the SimulatorOptions the flags ask for (the log and progress callbacks
// aside).
Refused run_config_from(const po::variables_map& vm, const TrainFlags& f,
                        const runtime::BackendDeclaration& backend, const FashionData& data,
                        const std::string& model_dir, estimator::RunConfig* config,
                        estimator::SimulatorOptions* sim) {
  config->model_dir = model_dir;
  sim->backend = backend.name;
  sim->slice = vm["config"].as<std::string>();
  auto compile = compile_options_from(vm);
  if (!compile.ok()) return usage_problem(compile.status());
  sim->compile = *compile;
  auto precision = precision_from(vm, backend);
  if (!precision.ok()) return usage_problem(precision.status());
  sim->compile.precision = *precision;
  config->tpu_config.iterations_per_loop = f.ipl;
  auto replicas = run_replicas(backend, sim->slice);
  if (!replicas.ok()) return Refusal{false, std::string(replicas.status().message())};
  config->tpu_config.num_shards = *replicas;
  config->log_step_count_steps = f.log_every;
  config->save_summary_steps = std::max<int64_t>(f.ipl, 10);
  config->save_checkpoints_steps = std::max<int64_t>(f.steps / 4, f.ipl);
  use_data_options(data, sim);
  const std::string host_timing = vm["host-timing"].as<std::string>();
  const auto timing = kHostTimings.parse(host_timing);
  if (!timing)
    return Refusal{true, "--host-timing is measured or config (got '" + host_timing + "')"};
  sim->host_timing = *timing;
  return run_mode_flags(vm, sim);
}

// --optimizer, --learning-rate and the decay flags.
absl::StatusOr<runtime::OptimizerSpec> optimizer_from(const po::variables_map& vm,
                                                      const TrainFlags& f) {
  auto kind = runtime::optimizer_kind(vm["optimizer"].as<std::string>());
  if (!kind.ok()) return kind.status();
  runtime::OptimizerSpec optimizer = runtime::optimizer_defaults(*kind);
  optimizer.learning_rate.initial = f.lr;
  if (f.decay_rate != 1.0f) {
    if (f.decay_rate <= 0 || f.decay_steps < 1)
      return absl::InvalidArgumentError("--lr-decay-rate must be > 0 and --lr-decay-steps >= 1");
    optimizer.learning_rate.kind = runtime::LearningRate::Kind::kExponentialDecay;
    optimizer.learning_rate.decay_rate = f.decay_rate;
    optimizer.learning_rate.decay_steps = f.decay_steps;
  }
  return optimizer;
}

// A BERT's input and optimizer from the flags: records (--data, else the default folder) or
// synthetic input, of `seq_length` tokens; LAMB at run_pretraining's 5e-5 unless the flags say
// otherwise, the gradients clipped to global norm 1 whatever the optimizer.
Refused bert_job_from(const po::variables_map& vm, int64_t seq_length, TrainJob* job) {
  auto bert = bert_data_from(vm, job->data, job->model, seq_length);
  if (!bert.ok()) return usage_problem(bert.status());
  if (vm.count("export-dir") > 0)
    return usage_problem(str_cat(job->model, " is a pretraining model: nothing to export"));
  job->bert = *bert;
  const float lr = vm["learning-rate"].defaulted() ? 5e-5f : job->flags.lr;
  if (vm["optimizer"].defaulted() || job->optimizer.kind == runtime::OptimizerSpec::Kind::kLamb) {
    runtime::OptimizerSpec lamb = jobs::bert_lamb(lr);
    lamb.learning_rate = job->optimizer.learning_rate;  // the decay flags
    lamb.learning_rate.initial = lr;
    job->optimizer = lamb;
  } else {
    job->optimizer.learning_rate.initial = lr;
    job->optimizer.clip_global_norm = 1.0f;
  }
  job->flags.lr = lr;
  return std::nullopt;
}

// An imported model's job: its images (synthetic at its input's size, or records of that size).
Refused imported_train_job_from(const po::variables_map& vm, TrainJob* job) {
  if (!vm["seq-length"].defaulted())
    return usage_problem("--seq-length is for the zoo's BERT models");
  if (Refused r = imported_model_from(vm, &job->imported)) return r;
  job->model = job->imported->name;
  auto named = named_data_from(vm, job->data, *job->imported);
  if (!named.ok()) return usage_problem(named.status());
  job->named = *named;
  if (job->named.has_value()) return std::nullopt;
  if (auto s = jobs::use_imported_inputs(*job->imported, !vm["image-size"].defaulted(), &job->data);
      !s.ok())
    return usage_problem(s);
  return std::nullopt;
}

// A zoo model's inputs: a BERT's records, or images of the model's published size.
Refused zoo_inputs_from(const po::variables_map& vm, TrainJob* job) {
  auto seq_length = seq_length_from(vm, job->model);
  if (!seq_length.ok()) return usage_problem(seq_length.status());
  if (*seq_length > 0) {
    if (Refused r = bert_job_from(vm, *seq_length, job)) return r;
  } else if (auto s = use_model_inputs(job->model, !vm["image-size"].defaulted(), &job->data);
             !s.ok()) {
    return usage_problem(s);
  }
  return std::nullopt;
}

// The job from the flags, or why not.
Refused train_job_from(const po::variables_map& vm, const TrainFlags& f, TrainJob* job) {
  job->model = vm["model"].as<std::string>();
  job->flags = f;
  auto backend = backend_from(vm);
  if (!backend.ok()) return usage_problem(backend.status());
  job->backend = *backend;
  auto optimizer = optimizer_from(vm, f);
  if (!optimizer.ok()) return usage_problem(optimizer.status());
  job->optimizer = *optimizer;
  auto policy = dtype_policy_from(vm);
  if (!policy.ok()) return usage_problem(policy.status());
  job->policy = *policy;
  if (auto s = runtime::check_dtype_policy(**backend, *policy); !s.ok()) return usage_problem(s);
  if (f.steps < 1 || f.batch < 1 || f.ipl < 1)
    return Refusal{true, "--train-steps, --batch-size and --iterations-per-loop must be >= 1"};
  auto data = fashion_data_from(vm, /*synthetic_allowed=*/true);
  if (!data.ok()) return usage_problem(data.status());
  job->data = *data;
  if (names_imported_model(vm)) {
    if (Refused r = imported_train_job_from(vm, job)) return r;
    if (auto s = jobs::check_imported_policy(*job->imported, job->policy); !s.ok())
      return usage_problem(s);
  } else if (auto s = check_zoo_inputs(vm, job->data); !s.ok()) {
    return usage_problem(s);
  } else if (Refused r = zoo_inputs_from(vm, job)) {
    return r;
  }
  const std::string model_dir =
      vm.count("model-dir") > 0 ? vm["model-dir"].as<std::string>() : fresh_model_dir(job->model);
  if (Refused r = run_config_from(vm, f, **backend, job->data, model_dir, &job->config, &job->sim))
    return r;
  if (job->imported.has_value()) {  // a saved model's graph fixes the batch a replica
    auto batch = jobs::imported_global_batch(*job->imported, f.batch, !vm["batch-size"].defaulted(),
                                             job->config.tpu_config.num_shards);
    if (!batch.ok()) return usage_problem(batch.status());
    job->flags.batch = *batch;
  }
  return std::nullopt;
}

// The model_fn and the input_fns of a job: a BERT's or a zoo image model's on Fashion-MNIST.
struct JobFunctions {
  estimator::ModelFn model_fn;
  estimator::InputFn train_input, eval_input;
  int64_t default_eval_steps = 0;  // when --eval-steps is 0
};

// An imported model fed by name: its records (or synthetic inputs), evaluated on the eval-*
// records (whole batches of them) unless --eval-steps says otherwise.
absl::StatusOr<JobFunctions> named_job_functions(bool config_timing, TrainJob& job) {
  const jobs::ImportedData& named = *job.named;
  if (config_timing || named.synthetic) {
    if (auto s = jobs::use_imported_host_config_timing(*job.imported, named, &job.sim); !s.ok())
      return s;
  }
  auto examples = jobs::imported_eval_examples(named);
  if (!examples.ok()) return examples.status();
  return JobFunctions{jobs::imported_model_fn(*job.imported, job.optimizer, job.policy),
                      jobs::imported_train_input(*job.imported, named),
                      jobs::imported_eval_input(*job.imported, named), *examples / job.flags.batch};
}

// Makes the job's records when missing, sets the host timing, and returns its functions.
absl::StatusOr<JobFunctions> prepare_job(TrainJob& job) {
  const bool config_timing = job.sim.host_timing == HostTiming::kHostConfig;
  if (job.bert.has_value()) {
    const jobs::BertData& bert = *job.bert;
    if (auto s = jobs::ensure_bert_records(bert, log_to_stderr); !s.ok()) return s;
    if (config_timing || bert.synthetic) {
      if (auto s = jobs::use_bert_host_config_timing(bert, &job.sim); !s.ok()) return s;
    }
    return JobFunctions{jobs::bert_model_fn(job.model, job.optimizer, job.policy),
                        jobs::bert_train_input(bert), jobs::bert_eval_input(bert), 0};
  }
  if (job.named.has_value()) return named_job_functions(config_timing, job);
  if (auto s = ensure_fashion_mnist(job.data, log_to_stderr); !s.ok()) return s;
  // Synthetic input has no pipeline to measure: its (zero) stage costs come from the config.
  if (config_timing || job.data.synthetic) {
    if (auto s = use_host_config_timing(job.data, &job.sim); !s.ok()) return s;
  }
  const estimator::ModelFn model_fn =
      job.imported.has_value() ? jobs::imported_model_fn(*job.imported, job.optimizer, job.policy)
                               : zoo_model_fn(job.model, job.optimizer, job.policy);
  return JobFunctions{model_fn, fashion_train_input(job.data), fashion_eval_input(job.data),
                      10000 / job.flags.batch};
}

// Trains, evaluates (unless timing-only) and exports when asked.
absl::StatusOr<nlohmann::ordered_json> train_and_report(const po::variables_map& vm, TrainJob& job,
                                                        ProgressBar& bar) {
  auto functions = prepare_job(job);
  if (!functions.ok()) return functions.status();
  const int64_t batch = job.flags.batch;
  auto est = estimator::TPUEstimator::create(functions->model_fn, job.config, {}, true, batch,
                                             batch, batch, job.sim);
  if (!est.ok()) return est.status();
  print_start(job);
  auto trained = (*est)->train(functions->train_input, job.flags.steps);
  bar.finish();
  if (!trained.ok()) return trained.status();
  const int64_t per_eval = job.sim.timing_only || job.data.synthetic ? 0
                           : job.flags.eval_steps > 0                ? job.flags.eval_steps
                                                      : functions->default_eval_steps;
  std::map<std::string, double> eval;
  if (per_eval > 0) {
    auto evaluated = (*est)->evaluate(functions->eval_input, per_eval);
    if (!evaluated.ok()) return evaluated.status();
    eval = *evaluated;
  }
  const nlohmann::ordered_json report = train_report(job, *trained, eval);
  print_summary(job, *trained, eval, report);
  if (vm.count("export-dir") > 0) {
    const std::string dir = vm["export-dir"].as<std::string>();
    const int64_t per_shard = batch / job.config.tpu_config.num_shards;
    const int64_t side = job.data.image_size;
    const std::vector<estimator::TensorSpec> features =
        job.imported.has_value()
            ? jobs::imported_signature(*job.imported, !job.named.has_value())
            : std::vector<estimator::TensorSpec>{
                  {"image", runtime::DType::kF32, runtime::Shape{side, side, job.data.channels}}};
    if (auto s = (*est)->export_saved_model(dir, features, per_shard); !s.ok()) {
      return s;
    }
    std::cout << "saved model: " << dir << "\n";
  }
  return report;
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  TrainFlags flags;
  po::options_description options = train_options(&flags);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kTrainUsage, &vm); rc >= 0) return rc;
  TrainJob job;
  if (Refused r = train_job_from(vm, flags, &job)) return refuse(*r, kTrainUsage);
  if (absl::Status s = check_output_destinations(vm); !s.ok())
    return failure(std::string(s.message()));
  // On a terminal a progress bar moves as the device finishes steps, log lines above it;
  // otherwise the log lines alone.
  const bool tty = isatty(STDERR_FILENO) != 0;
  ProgressBar bar(std::cerr);
  job.sim.log = [tty, &bar](const std::string& line) {
    if (tty) {
      bar.line(line);
    } else {
      std::cerr << line << "\n" << std::flush;
    }
  };
  if (tty) job.sim.progress = [&bar](int64_t step, int64_t target) { bar.update(step, target); };
  auto report = train_and_report(vm, job, bar);
  if (!report.ok()) return failure(std::string(report.status().message()));
  if (vm.count("report") > 0) {
    const absl::Status written =
        write_report_file(vm["report"].as<std::string>(), json_text(*report) + "\n");
    if (!written.ok()) return failure(std::string(written.message()));
    std::cout << "report: " << vm["report"].as<std::string>() << "\n";
  }
  return kOk;
}

}  // namespace tpusim::cli
