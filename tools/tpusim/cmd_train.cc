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

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/estimator.h"
#include "runtime/backend/backend.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/fashion_job.h"
#include "tools/tpusim/op_report.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/progress_bar.h"
#include "traces/trace_writer.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;

std::string fresh_model_dir(const std::string& model) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return str_cat(std::filesystem::temp_directory_path().string(), "/tpusim-", model, "-",
                 std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  po::options_description options("options");
  int64_t steps = 0, batch = 0, eval_steps = 0, log_every = 0;
  uint32_t ipl = 0;
  float lr = 0, decay_rate = 1;
  int64_t decay_steps = 1;
  options.add_options()("model", po::value<std::string>()->default_value("mnist_cnn"),
                        ("zoo model: " + zoo_model_names(" | ")).c_str())(
      "config", po::value<std::string>()->default_value("v3-8"),
      "slice config file or built-in name (the tpusim backend)")(
      "backend", po::value<std::string>()->default_value("tpusim"), "tpusim | cpu | gpu")(
      "allreduce", po::value<std::string>()->default_value("ring"),
      "how tpusim all-reduces the gradients: ring | bidir_ring | torus2d | torus (the torus ones "
      "over every core of the slice)")(
      "overlap-allreduce", po::value<bool>()->default_value(true, "on"),
      "on: each gradient's all-reduce runs while the step computes the rest (as XLA's "
      "asynchronous all-reduce); off: it waits for all the step's earlier work and holds up all "
      "later work")(
      "allreduce-combine-threshold", po::value<std::string>()->default_value("0"),
      "combine the gradients' all-reduces, in the order they run, into all-reduces of up to this "
      "many bytes (and 256 tensors) each (4MiB, 32MiB, ...), each paying one latency, as XLA's "
      "AllReduceCombiner; 0: every gradient its own all-reduce")(
      "fuse-convolutions", po::value<bool>()->default_value(true, "on"),
      "on: each convolution and each of its gradients is one fragment whose im2col patches stay "
      "in VMEM, as XLA's convolutions; off: the patches go through HBM between separate "
      "im2col, matmul and col2im fragments")(
      "fuse-pools", po::value<bool>()->default_value(true, "on"),
      "on: each max pool whose windows tile the image, and its gradient, is one vector-unit "
      "fragment reading the images (XLA's reduce-window and select-and-scatter); off: the "
      "windows and the gradient's masks go through HBM between separate fragments")(
      "fuse-reductions", po::value<bool>()->default_value(true, "on"),
      "on: a reduce_sum or reduce_max over the last axis or all but the last computes the "
      "elementwise ops producing its input in its own fragment, in VMEM (XLA's input fusion); "
      "off: their value goes through HBM")(
      "recompute-shared-producers", po::value<bool>()->default_value(true, "on"),
      "on: an elementwise value that several elementwise fragments of its shape read is computed "
      "again in each of them (XLA's producer duplication); off: it goes through HBM")(
      "train-steps", po::value<int64_t>(&steps)->default_value(200),
      "the global step to train to (like max_steps: resumes from model_dir)")(
      "iterations-per-loop", po::value<uint32_t>(&ipl)->default_value(50),
      "device steps per host round trip")("batch-size",
                                          po::value<int64_t>(&batch)->default_value(1024),
                                          "global batch size, over every core of the slice")(
      "optimizer", po::value<std::string>()->default_value("adam"), "sgd | momentum | adam")(
      "learning-rate", po::value<float>(&lr)->default_value(2e-3f), "the optimizer's rate")(
      "lr-decay-rate", po::value<float>(&decay_rate)->default_value(1.0f),
      "exponential decay: the rate is multiplied by this every --lr-decay-steps (1: constant)")(
      "host-timing", po::value<std::string>()->default_value("measured"),
      "measured: the input pipeline's real stage times on this machine (vary run to run); "
      "config: the host config's stage costs (the same every run)")(
      "lr-decay-steps", po::value<int64_t>(&decay_steps)->default_value(1),
      "steps over which the rate decays by --lr-decay-rate (continuously)")(
      "eval-steps", po::value<int64_t>(&eval_steps)->default_value(0),
      "test batches to evaluate (0: as many whole batches as the 10,000 test images fill)")(
      "model-dir", po::value<std::string>(), "checkpoints and TensorBoard files (default: new)")(
      "log-every", po::value<int64_t>(&log_every)->default_value(50), "steps between log lines")(
      "report", po::value<std::string>(), "write the run's figures as JSON to FILE")(
      "timing-only",
      "simulate time only: skip the device's numerics (no accuracy; the input pipeline still "
      "runs for real)")(
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
      "export-dir", po::value<std::string>(),
      "also write a saved model there (tpusim predict --saved-model DIR)");
  add_dtype_policy_option(options);
  add_data_options(options);
  const std::string usage =
      "usage: tpusim train [--model NAME] [--data DIR] [--config SLICE | --backend cpu|gpu]\n"
      "                    [--dtype-policy float32|mixed_bfloat16]\n"
      "                    [--allreduce ring|bidir_ring|torus2d|torus]\n"
      "                    [--overlap-allreduce on|off] [--allreduce-combine-threshold BYTES]\n"
      "                    [--fuse-convolutions on|off]\n"
      "                    [--fuse-pools on|off] [--fuse-reductions on|off]\n"
      "                    [--recompute-shared-producers on|off]\n"
      "                    [--train-steps N] [--iterations-per-loop N] [--batch-size N]\n"
      "                    [--optimizer adam|momentum|sgd] [--learning-rate R]\n"
      "                    [--model-dir DIR] [--report FILE.json]\n"
      "                    [--trace FILE.pftrace|FILE.json [--trace-steps A:B]\n"
      "                     [--trace-counter-window-ns N]]\n"
      "                    [--timing-only [--fold-replicas on|off]]\n"
      "                    [--input raw|jpeg [--image-size S]] [--map-threads N]\n"
      "                    [--batch-threads N] [--enqueue-threads N] [--infeed-dtype f32|bf16]\n"
      "                    [--host-timing measured|config]\n\n"
      "Trains a zoo model on Fashion-MNIST with TPUEstimator: input_fn reads the TFRecords on\n"
      "host threads, the infeed driver feeds every core, the gradients are all-reduced\n"
      "(CrossShardOptimizer), and iterations_per_loop steps run per host loop. Then evaluates\n"
      "on the test set and prints accuracy, the simulated step time and its breakdown.\n"
      "With no arguments: the demo (mnist_cnn, v3-8, batch 1024, Adam).\n"
      "The infeed study: --input jpeg --image-size 224 --map-threads N --timing-only reads\n"
      "JPEG records through a flowers-style pipeline (decode, resize, random crop, flip).\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  const std::string model = vm["model"].as<std::string>();
  const std::string backend = vm["backend"].as<std::string>();
  if (backend != "tpusim" && backend != "cpu" && backend != "gpu")
    return usage_error("--backend must be tpusim, cpu or gpu", usage);
  auto kind = runtime::optimizer_kind(vm["optimizer"].as<std::string>());
  if (!kind.ok()) return usage_error(std::string(kind.status().message()), usage);
  auto policy = dtype_policy_from(vm);
  if (!policy.ok()) return usage_error(std::string(policy.status().message()), usage);
  if (steps < 1 || batch < 1 || ipl < 1)
    return usage_error("--train-steps, --batch-size and --iterations-per-loop must be >= 1", usage);
  auto data = fashion_data_from(vm);
  if (!data.ok()) return usage_error(std::string(data.status().message()), usage);
  const std::string model_dir =
      vm.count("model-dir") > 0 ? vm["model-dir"].as<std::string>() : fresh_model_dir(model);
  estimator::RunConfig config;
  config.model_dir = model_dir;
  config.backend = backend;
  config.slice = vm["config"].as<std::string>();
  config.precision = backend == "tpusim" ? "fp32" : "mxu";  // cpu and gpu: the MXU's bf16 products
  config.allreduce = vm["allreduce"].as<std::string>();
  if (!runtime::is_allreduce_algorithm(config.allreduce)) {
    return usage_error(str_cat("--allreduce '", config.allreduce, "' is not one of ",
                               runtime::kAllReduceAlgorithms),
                       usage);
  }
  if (config.allreduce != "ring" && backend != "tpusim")
    return usage_error("--allreduce needs the tpusim backend (cpu and gpu add in ring order)",
                       usage);
  config.overlap_allreduce = vm["overlap-allreduce"].as<bool>();
  if (!config.overlap_allreduce && backend != "tpusim")
    return usage_error(
        "--overlap-allreduce needs the tpusim backend (cpu and gpu do not time "
        "the all-reduce)",
        usage);
  if (const std::string t = vm["allreduce-combine-threshold"].as<std::string>(); t != "0") {
    auto bytes = parse_bytes("--allreduce-combine-threshold", t, 4);
    if (!bytes.ok())
      return usage_error(str_cat(bytes.status().message(), " (or 0: no combining)"), usage);
    if (*bytes > 0 && backend != "tpusim") {
      return usage_error(
          "--allreduce-combine-threshold needs the tpusim backend (cpu and gpu do not time the "
          "all-reduce)",
          usage);
    }
    config.allreduce_combine_bytes = *bytes;
  }
  config.fuse_convolutions = vm["fuse-convolutions"].as<bool>();
  if (!config.fuse_convolutions && backend != "tpusim")
    return usage_error("--fuse-convolutions needs the tpusim backend (cpu and gpu do not time it)",
                       usage);
  config.fuse_pools = vm["fuse-pools"].as<bool>();
  if (!config.fuse_pools && backend != "tpusim")
    return usage_error("--fuse-pools needs the tpusim backend (cpu and gpu do not time it)", usage);
  config.recompute_shared_producers = vm["recompute-shared-producers"].as<bool>();
  if (!config.recompute_shared_producers && backend != "tpusim")
    return usage_error(
        "--recompute-shared-producers needs the tpusim backend (cpu and gpu do not time it)",
        usage);
  config.fuse_reductions = vm["fuse-reductions"].as<bool>();
  if (!config.fuse_reductions && backend != "tpusim")
    return usage_error("--fuse-reductions needs the tpusim backend (cpu and gpu do not time it)",
                       usage);
  config.tpu_config.iterations_per_loop = ipl;
  config.tpu_config.num_shards = 8;
  if (backend == "tpusim") {
    auto slice = config::load_slice(config.slice);
    if (!slice.ok()) return failure(std::string(slice.status().message()));
    config.tpu_config.num_shards = (*slice)->cores;
  }
  config.log_step_count_steps = log_every;
  config.save_summary_steps = std::max<int64_t>(ipl, 10);
  config.save_checkpoints_steps = std::max<int64_t>(steps / 4, ipl);
  // On a terminal a progress bar moves as the device finishes steps, log lines above it;
  // otherwise the log lines alone.
  const bool tty = isatty(STDERR_FILENO) != 0;
  ProgressBar bar(std::cerr);
  config.log = [tty, &bar](const std::string& line) {
    if (tty) {
      bar.line(line);
    } else {
      std::cerr << line << "\n" << std::flush;
    }
  };
  if (tty) config.progress = [&bar](int64_t step, int64_t target) { bar.update(step, target); };
  config.timing_only = vm.count("timing-only") > 0;
  use_data_options(*data, &config);
  const std::string host_timing = vm["host-timing"].as<std::string>();
  if (host_timing != "config" && host_timing != "measured")
    return usage_error("--host-timing is measured or config (got '" + host_timing + "')", usage);
  if (config.timing_only && backend != "tpusim")
    return usage_error("--timing-only needs the tpusim backend", usage);
  config.fold_replicas = vm["fold-replicas"].as<bool>();
  if (config.fold_replicas && !config.timing_only)
    return usage_error("--fold-replicas needs --timing-only (folded replicas compute no values)",
                       usage);
  if (vm.count("trace") > 0) {
    if (backend != "tpusim")
      return usage_error("--trace needs the tpusim backend (the cpu backend has no timeline)",
                         usage);
    config.trace_path = vm["trace"].as<std::string>();
    if (auto format = traces::trace_format_of(config.trace_path); !format.ok())
      return usage_error(std::string(format.status().message()), usage);
  }
  if (vm.count("trace-steps") > 0) {
    const std::string range = vm["trace-steps"].as<std::string>();
    long long a = 0, b = 0;
    char end = 0;
    if (std::sscanf(range.c_str(), "%lld:%lld%c", &a, &b, &end) != 2 || a < 0 || b < a)
      return usage_error(
          "--trace-steps takes A:B, global steps with 0 <= A <= B (got '" + range + "')", usage);
    config.trace_first_step = a;
    config.trace_last_step = b;
  }
  config.trace_counter_window_ns = vm["trace-counter-window-ns"].as<uint64_t>();
  runtime::OptimizerSpec optimizer;
  optimizer.kind = *kind;
  optimizer.learning_rate.initial = lr;
  if (decay_rate != 1.0f) {
    if (decay_rate <= 0 || decay_steps < 1)
      return usage_error("--lr-decay-rate must be > 0 and --lr-decay-steps >= 1", usage);
    optimizer.learning_rate.kind = runtime::LearningRate::Kind::kExponentialDecay;
    optimizer.learning_rate.decay_rate = decay_rate;
    optimizer.learning_rate.decay_steps = decay_steps;
  }
  if (auto s = ensure_fashion_mnist(*data); !s.ok()) return failure(std::string(s.message()));
  if (host_timing == "config") {
    if (auto s = use_host_config_timing(*data, &config); !s.ok())
      return failure(std::string(s.message()));
  }
  auto est = estimator::TPUEstimator::create(zoo_model_fn(model, optimizer, *policy), config, {},
                                             true, batch, batch, batch);
  if (!est.ok()) return failure(std::string(est.status().message()));
  std::cout << fmt::format(
      "training {}{} on {} ({} cores), global batch {}, {} steps per loop, {} "
      "at {}; model_dir {}\n",
      model,
      *policy == runtime::models::DTypePolicy::kFloat32
          ? ""
          : str_cat(" (", runtime::models::dtype_policy_name(*policy), ")"),
      backend == "tpusim" ? config.slice : str_cat("the ", backend, " backend"),
      config.tpu_config.num_shards, batch, ipl, runtime::optimizer_name(*kind), lr, model_dir);
  if (backend == "tpusim" && *policy == runtime::models::DTypePolicy::kMixedBFloat16) {
    std::cout << "note: tpusim charges bf16 transfers at 2 bytes an element, as a TPU's, but "
                 "rounds each reduction's (and unfused patches_to_image's) result to bf16 in a "
                 "pass of its own, which a TPU fuses into the op, and counts 4 bytes a bf16 "
                 "element in the HBM footprint (docs/estimator.md, mixed precision)\n";
  }
  auto trained = (*est)->train(fashion_train_input(*data), steps);
  bar.finish();
  if (!trained.ok()) return failure(std::string(trained.status().message()));
  const int64_t per_eval = config.timing_only ? 0 : eval_steps > 0 ? eval_steps : 10000 / batch;
  std::map<std::string, double> eval;
  if (per_eval > 0) {
    auto evaluated = (*est)->evaluate(fashion_eval_input(*data), per_eval);
    if (!evaluated.ok()) return failure(std::string(evaluated.status().message()));
    eval = *evaluated;
  }
  const estimator::TrainResult& r = *trained;
  const double steps_run = std::max<double>(1, static_cast<double>(r.steps_run));
  const double compute = (r.device_seconds - r.input_seconds) / steps_run;
  const double input = r.input_seconds / steps_run;
  const double idle = r.host_overhead_seconds / steps_run;
  nlohmann::ordered_json report = {
      {"model", model},
      {"dtype_policy", runtime::models::dtype_policy_name(*policy)},
      {"backend", backend},
      {"config", backend == "tpusim" ? config.slice : backend},
      {"model_dir", model_dir},
      {"global_step", r.global_step},
      {"steps_run", r.steps_run},
      {"final_loss", r.final_loss},
      {"eval_accuracy", eval.count("accuracy") > 0 ? eval.at("accuracy") : 0.0},
      {"eval_loss", eval.count("loss") > 0 ? eval.at("loss") : 0.0},
      {"sim_seconds_per_step", r.sim_seconds_per_step},
      {"host_seconds", r.host_seconds},
      {"infeed_wait_fraction", r.infeed_wait_fraction},
      {"mxu_utilization", r.mxu_utilization},
      {"step_breakdown", {{"compute", compute}, {"input", input}, {"idle", idle}}},
      {"weights_fingerprint", r.weights_fingerprint},
      {"timing_only", config.timing_only},
      {"fold_replicas", config.fold_replicas},
      {"allreduce_combine_bytes", config.allreduce_combine_bytes},
      {"input", data->jpeg ? "jpeg" : "raw"},
      {"image_size", data->image_size},
      {"map_threads", data->map_threads},
      {"batch_threads", data->batch_threads},
      {"enqueue_threads", data->enqueue_threads},
      {"infeed_dtype", data->bf16_images ? "bf16" : "f32"},
  };
  // The analyzer's breakdown has every profiler category and sums to its step time, the
  // slowest core's each step (a little above sim_seconds_per_step, the loops' average).
  if (r.analysis.has_value()) report["analysis"] = r.analysis->to_json();
  add_op_profile(r.ops, r.roofs, &report);
  if (!config.trace_path.empty()) {
    report["trace"] = config.trace_path;
    report["trace_bytes"] = r.trace_bytes;
  }
  std::cout << fmt::format(
      "global step {}: final loss {:.4f}, test accuracy {:.4f}\n"
      "simulated step {:.3f} ms = compute {:.3f} + input {:.3f} + host round trips {:.3f} "
      "(infeed wait {:.1f}%, MXU {:.1f}%); {:.1f} s on this host\n"
      "TensorBoard: tensorboard --logdir {}\n",
      r.global_step, r.final_loss, report["eval_accuracy"].get<double>(),
      r.sim_seconds_per_step * 1e3, compute * 1e3, input * 1e3, idle * 1e3,
      100 * r.infeed_wait_fraction, 100 * r.mxu_utilization, r.host_seconds, model_dir);
  if (r.analysis.has_value()) std::cout << "\n" << r.analysis->to_text();
  if (!r.ops.empty()) std::cout << "\n" << op_profile_text(r.ops, r.roofs, 8);
  if (!config.trace_path.empty()) {
    std::cout << fmt::format("trace: {} ({:.1f} MB); tpusim analyze {}\n", config.trace_path,
                             static_cast<double>(r.trace_bytes) / 1e6, config.trace_path);
  }
  if (vm.count("export-dir") > 0) {
    const std::string dir = vm["export-dir"].as<std::string>();
    const int64_t per_shard = batch / config.tpu_config.num_shards;
    if (auto s =
            (*est)->export_saved_model(dir,
                                       {{"image", runtime::DType::kF32,
                                         runtime::Shape{data->image_size, data->image_size, 1}}},
                                       per_shard);
        !s.ok()) {
      return failure(std::string(s.message()));
    }
    std::cout << "saved model: " << dir << "\n";
  }
  if (vm.count("report") > 0) {
    std::ofstream out(vm["report"].as<std::string>());
    out << report.dump(2) << "\n";
    if (!out) return failure("cannot write the report to " + vm["report"].as<std::string>());
    std::cout << "report: " << vm["report"].as<std::string>() << "\n";
  }
  return kOk;
}

}  // namespace tpusim::cli
