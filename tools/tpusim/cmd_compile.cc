// tpusim compile: a zoo model's training step compiled for one core of a slice, and its static
// figures (or the program itself with --dump).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/jobs/imported_job.h"
#include "runtime/backend/backend.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/models/zoo.h"
#include "sim/isa/dump.h"
#include "sim/isa/ops.h"
#include "sim/isa/program_stats.h"
#include "tools/tpusim/backend_options.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {

namespace po = boost::program_options;

namespace {

// The flags compile binds to numbers.
struct CompileFlags {
  int64_t batch = 0;
  uint32_t replicas = 1;
};

// compile's options, the numbers bound to `f`.
po::options_description compile_command_options(CompileFlags* f) {
  po::options_description options("options");
  add_model_flag(
      options, nullptr,
      OtherDefault<std::string>{"", "here no default: name one of " + zoo_model_names(", ") +
                                        ", or give --onnx FILE or --saved-model DIR"});
  add_config_flag(options);
  options.add_options()("batch", po::value<int64_t>(&f->batch)->default_value(128),
                        "examples per core")(
      "replicas", po::value<uint32_t>(&f->replicas)->default_value(1),
      "replicas of the step, cores 0..N-1: CrossShardOptimizer sums the gradients over them");
  add_dump_flag(options);
  add_json_flag(options);
  add_compile_flags(options);
  add_dtype_policy_option(options);
  add_seq_length_option(options);
  add_imported_model_options(options);
  return options;
}

constexpr char kCompileUsage[] =
    "usage: tpusim compile (--model NAME | --onnx FILE [--onnx-input NAME] [--onnx-output NAME] |\n"
    "                       --saved-model DIR [--saved-model-output NAME])\n"
    "                      [--config SLICE] [--batch N] [--seq-length N]\n"
    "                      [--dtype-policy float32|mixed_bfloat16]\n"
    "                      [--fuse-convolutions on|off] [--fuse-pools on|off]\n"
    "                      [--fuse-reductions on|off] [--recompute-shared-producers on|off]\n"
    "                      [--fuse-multi-output on|off] [--fuse-producers on|off]\n"
    "                      [--fuse-conv-reductions on|off] [--fuse-pointwise-convolutions on|off]\n"
    "                      [--fuse-conv-producers on|off] [--fuse-conv-windows on|off]\n"
    "                      [--fuse-rng on|off] [--fuse-matmul-producers on|off]\n"
    "                      [--fuse-matmul-consumers on|off] [--fuse-conv-consumers on|off]\n"
    "                      [--replicas N [--allreduce ring|bidir_ring|torus2d|torus]\n"
    "                       [--allreduce-combine-threshold BYTES]] [--dump] [--json]\n\n"
    "Compiles one training step of a model (forward, backward and SGD updates; the device\n"
    "loop around it) for one core and prints the program's static figures: instructions per "
    "unit,\n"
    "HBM footprint and VMEM high-water mark. --dump prints the program itself.\n";

// What to compile, and for what.
struct CompileJob {
  std::string model;
  std::optional<jobs::ImportedModel> imported;  // --onnx or --saved-model in place of a zoo model
  int64_t batch = 0;
  int64_t seq_length = 0;  // BERT models: tokens per sequence
  uint32_t replicas = 1;
  runtime::models::DTypePolicy policy = runtime::models::DTypePolicy::kFloat32;
  std::shared_ptr<const config::SliceSpec> slice;
  runtime::CompileOptions compile;
};

// The job from the flags, or why not.
Refused compile_job_from(const po::variables_map& vm, const CompileFlags& f, CompileJob* job) {
  if ((vm.count("model") > 0) == names_imported_model(vm))
    return usage_problem("which model? give --model NAME, --onnx FILE or --saved-model DIR");
  if (Refused r = imported_model_from(vm, &job->imported)) return r;
  job->model = job->imported.has_value() ? job->imported->name : vm["model"].as<std::string>();
  job->batch = f.batch;
  job->replicas = f.replicas;
  if (f.batch < 1 || f.batch > (1 << 20)) return usage_problem("--batch must be in [1, 2^20]");
  if (job->imported.has_value()) {  // a saved model's graph fixes the batch
    auto batch = jobs::imported_global_batch(*job->imported, f.batch, !vm["batch"].defaulted(), 1);
    if (!batch.ok()) return usage_problem(batch.status());
    job->batch = *batch;
  } else {
    auto seq = seq_length_from(vm, job->model);
    if (!seq.ok()) return usage_problem(seq.status());
    job->seq_length = *seq;
  }
  auto policy = dtype_policy_from(vm);
  if (!policy.ok()) return usage_problem(policy.status());
  job->policy = *policy;
  if (job->imported.has_value()) {
    if (auto s = jobs::check_imported_policy(*job->imported, job->policy); !s.ok())
      return usage_problem(s);
  }
  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure_of(slice.status());
  job->slice = *slice;
  if (f.replicas < 1 || f.replicas > job->slice->cores) {
    return usage_problem(str_cat("--replicas must be in [1, ", job->slice->cores,
                                 "] (the cores of ", job->slice->name, ")"));
  }
  auto compile = compile_options_from(vm);
  if (!compile.ok()) return usage_problem(compile.status());
  job->compile = *compile;
  job->compile.replicas = f.replicas;
  return std::nullopt;
}

// The compiled step's static figures, as --json prints them.
nlohmann::ordered_json compile_report(const CompileJob& job, const runtime::Graph& graph,
                                      const runtime::tpusim_backend::CompiledStep& step,
                                      const sim::ProgramStats& stats, double seconds) {
  int64_t parameters = 0;
  for (int id : graph.variables()) parameters += graph.node(id).shape.elements();
  nlohmann::ordered_json units = nlohmann::ordered_json::object();
  for (const auto& [unit, count] : stats.per_unit) units[unit] = count;
  uint64_t all_reduces = 0;
  for (const isa::Instruction& in : step.program->cores(0).instructions())
    all_reduces += in.has_collective() ? 1 : 0;
  return {{"model", job.model},
          {"dtype_policy", runtime::models::dtype_policy_name(job.policy)},
          {"config", job.slice->name},
          {"batch_per_core", job.batch},
          {"seq_length", job.seq_length > 0 ? nlohmann::ordered_json(job.seq_length) : nullptr},
          {"graph_nodes", graph.size()},
          {"parameters", parameters},
          {"instructions", stats.instructions},
          {"instructions_per_unit", units},
          {"instructions_per_op", step.instructions_per_op},
          {"fused_nodes", step.fused_nodes},
          {"fused_convolutions", step.fused_convolutions},
          {"fused_pools", step.fused_pools},
          {"fused_reductions", step.fused_reductions},
          {"recomputed_nodes", step.recomputed_nodes},
          {"multi_output_fusions", step.multi_output_fusions},
          {"producer_fusions", step.producer_fusions},
          {"reader_recomputed_groups", step.reader_recomputed_groups},
          {"conv_producers", step.conv_producers},
          {"matmul_producers", step.matmul_producers},
          {"matmul_consumers", step.matmul_consumers},
          {"merged_products", step.merged_products},
          {"conv_consumers", step.conv_consumers},
          {"conv_output_reductions", step.conv_output_reductions},
          {"rematerialized_nodes", step.rematerialized_nodes},
          {"replicas", job.replicas},
          {"all_reduces", all_reduces},
          {"combined_allreduces", step.combined_allreduces},
          {"combined_sums", step.combined_sums},
          {"hbm_footprint_bytes", step.hbm_bytes},
          {"hbm_tensors_peak_bytes", step.plan.device_peak_bytes},
          {"hbm_persistent_bytes", step.plan.device_persistent_bytes},
          {"vmem_high_water_bytes", stats.vmem_high_water_bytes},
          {"vmem_bytes", job.slice->chip.core.vmem_bytes},
          {"compile_seconds", seconds}};
}

void print_compiled(const CompileJob& job, const runtime::tpusim_backend::CompiledStep& step,
                    const sim::ProgramStats& stats, const nlohmann::ordered_json& out) {
  std::cout << "compiled " << out["model"].get<std::string>() << " (training step, batch "
            << job.batch << " per core) for " << job.slice->name << " core 0 in "
            << out["compile_seconds"].get<double>() << " s\n"
            << "  graph          " << out["graph_nodes"].get<int>() << " nodes ("
            << step.fused_nodes << " elementwise ones fused into shared fragments, "
            << step.fused_convolutions << " convolution fragments with their patches in VMEM, "
            << step.fused_pools << " max pool fragments without windows, " << step.fused_reductions
            << " reductions of their elementwise inputs in VMEM, " << step.recomputed_nodes
            << " shared producers recomputed by their readers, " << step.multi_output_fusions
            << " pairs of sibling reductions in one fragment, " << step.producer_fusions
            << " groups written by the reductions of their value, " << step.reader_recomputed_groups
            << " groups recomputed by their readers (" << step.conv_producers
            << " convolutions and " << step.matmul_producers << " matmuls among those), "
            << step.matmul_consumers << " groups computed by the matmul they consume, "
            << step.conv_consumers << " by the input gradient they consume, "
            << step.conv_output_reductions
            << " reductions computed by the convolution they reduce), "
            << out["parameters"].get<int64_t>() << " parameters\n";
  if (job.replicas > 1) {
    std::cout << "  all-reduces    " << out["all_reduces"].get<uint64_t>() << " a step over "
              << job.replicas << " replicas (" << step.combined_allreduces << " combined from "
              << step.combined_sums << " gradient sums)\n";
  }
  std::cout << "  instructions   " << stats.instructions << ":";
  for (const auto& [unit, count] : stats.per_unit) std::cout << " " << unit << " " << count;
  std::vector<std::pair<uint64_t, std::string>> by_op;
  for (const auto& [op, count] : step.instructions_per_op) by_op.emplace_back(count, op);
  std::sort(by_op.rbegin(), by_op.rend());
  std::cout << "\n  most from      ";
  for (size_t i = 0; i < std::min<size_t>(5, by_op.size()); ++i)
    std::cout << (i ? ", " : "") << by_op[i].second << " " << by_op[i].first;
  std::cout << "\n  HBM            " << step.hbm_bytes / 1048576.0
            << " MiB footprint (tensors peak " << step.plan.device_peak_bytes / 1048576.0
            << " MiB, of which variables and constants "
            << step.plan.device_persistent_bytes / 1048576.0 << " MiB)\n";
  if (step.rematerialized_nodes > 0) {
    std::cout << "  rematerialized " << step.rematerialized_nodes
              << " nodes computed again where read, to fit HBM (XLA's rematerialization)\n";
  }
  std::cout << "  VMEM           " << stats.vmem_high_water_bytes / 1048576.0
            << " MiB high-water of " << job.slice->chip.core.vmem_bytes / 1048576.0 << " MiB\n";
}

// One training step of the job's model at its batch: the zoo's, or the imported model's loss (its
// model_fn in training) with the same SGD updates.
absl::Status build_step(const CompileJob& job, runtime::GraphBuilder& b) {
  if (!job.imported.has_value()) {
    return runtime::models::build_training_step(b, job.model, job.batch, 0.01f, 1, job.policy,
                                                job.replicas, 0, job.seq_length);
  }
  const jobs::ImportedModel& m = *job.imported;
  // Fed as training feeds it: images for an image model under cross-entropy, else by name.
  const bool images = !m.image_input.empty() && m.loss == jobs::Loss::kSoftmaxCrossEntropy;
  runtime::Value label;
  const estimator::Features features = jobs::imported_infeeds(b, m, job.batch, images, &label);
  estimator::Params params;
  params.batch_size = job.batch;
  params.num_shards = job.replicas;
  auto spec = jobs::imported_model_fn(m, {}, job.policy)(b, features, label,
                                                         estimator::Mode::kTrain, params);
  if (!spec.ok()) return spec.status();
  return runtime::models::add_sgd_step(b, spec->loss, 0.01f, job.replicas);
}

}  // namespace

int run_compile(const std::vector<std::string>& args) {
  CompileFlags flags;
  const po::options_description options = compile_command_options(&flags);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kCompileUsage, &vm); rc >= 0) return rc;
  CompileJob job;
  if (Refused r = compile_job_from(vm, flags, &job)) return refuse(*r, kCompileUsage);

  const auto start = std::chrono::steady_clock::now();
  runtime::GraphBuilder b;
  if (auto s = build_step(job, b); !s.ok()) return failure(std::string(s.message()));
  auto step = runtime::tpusim_backend::compile_graph(
      b.graph(), *job.slice, 0, runtime::tpusim_backend::step_options_from(job.compile));
  if (!step.ok()) return failure(std::string(step.status().message()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (vm["dump"].as<bool>()) {
    std::cout << sim::dump_program(*step->program);
    return kOk;
  }
  const sim::ProgramStats stats = sim::program_stats(*step->program);
  const nlohmann::ordered_json out = compile_report(job, b.graph(), *step, stats, seconds);
  if (vm["json"].as<bool>()) {
    std::cout << json_text(out) << "\n";
    return kOk;
  }
  print_compiled(job, *step, stats, out);
  return kOk;
}

}  // namespace tpusim::cli
