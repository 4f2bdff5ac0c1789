// tpusim compare: the same training run on several backends, from the same initial weights and
// the same batches, and how far apart they end: per-step loss differences and per-variable max
// absolute and relative differences, with a verdict against tolerances.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "common/strings.h"
#include "configs/loader.h"
#include "estimator/checkpoint.h"
#include "estimator/estimator.h"
#include "runtime/backend/backend.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/data_options.h"
#include "tools/tpusim/fashion_job.h"
#include "tools/tpusim/weight_agreement.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;

struct Run {
  std::string backend;
  estimator::TrainResult result;
  runtime::Variables variables;
};

}  // namespace

int run_compare(const std::vector<std::string>& args) {
  po::options_description options("options");
  int64_t steps = 0, batch = 0;
  double loss_tol = 0, weight_tol = 0, weight_atol = 0;
  options.add_options()("model", po::value<std::string>()->default_value("mlp"), "zoo model")(
      "backends", po::value<std::string>()->default_value("tpusim,cpu"),
      "comma-separated: tpusim, cpu, gpu (cpu and gpu in mxu precision: bf16 products)")(
      "steps", po::value<int64_t>(&steps)->default_value(20), "training steps on each")(
      "batch-size", po::value<int64_t>(&batch)->default_value(256), "global batch size")(
      "config", po::value<std::string>()->default_value("v3-8"), "the tpusim backend's slice")(
      "loss-tolerance", po::value<double>(&loss_tol)->default_value(1e-3),
      "largest acceptable |loss difference| at any step")(
      "weight-tolerance", po::value<double>(&weight_tol)->default_value(1e-2),
      "largest acceptable weight difference at the end, relative to the variable's largest value")(
      "weight-atol", po::value<double>(&weight_atol)->default_value(1e-6),
      "absolute weight difference always accepted (a variable agrees when its max difference is "
      "<= weight-atol + weight-tolerance x its largest value): variables that stay near zero")(
      "json", po::bool_switch(), "print JSON");
  add_data_options(options);
  const std::string usage =
      "usage: tpusim compare [--model NAME] [--backends tpusim,cpu] [--steps N] [--batch-size N]\n"
      "                      [--loss-tolerance X] [--weight-tolerance X] [--weight-atol X] [--json]\n\n"
      "Trains N steps on each backend from the same initial weights and batches (SGD), then\n"
      "prints the per-step loss differences against the first backend, each variable's max\n"
      "absolute and relative difference, and a verdict against the tolerances. A variable\n"
      "agrees when its max |difference| <= weight-atol + weight-tolerance x its largest |value|.\n"
      "Exit status 1 when a difference exceeds its tolerance.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  std::vector<std::string> backends;
  for (std::string rest = vm["backends"].as<std::string>(); !rest.empty();) {
    const size_t comma = rest.find(',');
    backends.push_back(rest.substr(0, comma));
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  if (backends.size() < 2) return usage_error("--backends needs at least two backends", usage);
  for (const auto& b : backends) {
    if (b != "tpusim" && b != "cpu" && b != "gpu")
      return usage_error(str_cat("unknown backend '", b, "' (tpusim, cpu, gpu)"), usage);
    if (b == "gpu") {  // without a usable GPU, say so before training on the others
      auto gpu = runtime::make_backend(b);
      if (!gpu.ok()) return failure(std::string(gpu.status().message()));
    }
  }
  const std::string model = vm["model"].as<std::string>();
  auto data = fashion_data_from(vm);
  if (!data.ok()) return usage_error(std::string(data.status().message()), usage);
  if (auto s = ensure_fashion_mnist(*data); !s.ok()) return failure(std::string(s.message()));
  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  const auto root = std::filesystem::temp_directory_path() / str_cat("tpusim-compare-", ::getpid());
  runtime::OptimizerSpec sgd;
  sgd.learning_rate.initial = 0.05f;
  std::vector<Run> runs;
  for (const auto& backend : backends) {
    estimator::RunConfig config;
    config.model_dir = (root / backend).string();
    config.backend = backend;
    config.slice = vm["config"].as<std::string>();
    config.precision = backend == "tpusim" ? "fp32" : "mxu";
    config.tpu_config.num_shards = (*slice)->cores;  // the same replicas everywhere
    config.tpu_config.iterations_per_loop = static_cast<uint32_t>(steps);
    config.save_checkpoints_steps = steps;
    config.log = [](const std::string&) {};
    use_data_options(*data, &config);
    auto est = estimator::TPUEstimator::create(zoo_model_fn(model, sgd), config, {}, true, batch,
                                               batch, batch);
    if (!est.ok()) return failure(std::string(est.status().message()));
    auto trained = (*est)->train(fashion_train_input(*data), steps);
    if (!trained.ok()) return failure(str_cat(backend, ": ", trained.status().message()));
    auto ckpt = estimator::load_latest_checkpoint(config.model_dir);
    if (!ckpt.ok() || !ckpt->has_value()) return failure(str_cat(backend, ": no checkpoint"));
    runs.push_back({backend, *trained, (*ckpt)->variables});
  }
  std::filesystem::remove_all(root);

  nlohmann::ordered_json out = {{"model", model}, {"steps", steps}, {"reference", backends[0]}};
  bool ok = true;
  for (size_t k = 1; k < runs.size(); ++k) {
    const Run& a = runs[k];
    const Run& ref = runs[0];
    nlohmann::ordered_json losses = nlohmann::ordered_json::array();
    double worst_loss = 0;
    const size_t common_steps = std::min(a.result.losses.size(), ref.result.losses.size());
    for (size_t s = 0; s < common_steps; ++s) {
      const double d = std::abs(static_cast<double>(a.result.losses[s]) - ref.result.losses[s]);
      if (std::isnan(d) || d > worst_loss) worst_loss = d;  // a NaN loss stays the worst
      losses.push_back({{"step", s + 1},
                        {"loss", a.result.losses[s]},
                        {"reference_loss", ref.result.losses[s]},
                        {"difference", d}});
    }
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    nlohmann::ordered_json over = nlohmann::ordered_json::array();
    double worst_rel = 0;
    for (const auto& [name, value] : ref.variables) {
      if (value.dtype == runtime::DType::kS32) continue;
      auto it = a.variables.find(name);
      if (it == a.variables.end() || it->second.f.size() != value.f.size()) {
        return failure(str_cat(a.backend, ": variable '", name, "' is ",
                               it == a.variables.end() ? "missing" : "of another size",
                               " in its checkpoint (", ref.backend, " has ", value.f.size(),
                               " values)"));
      }
      const WeightDifference w = weight_difference(it->second.f, value.f, weight_tol, weight_atol);
      if (std::isnan(w.max_rel) || w.max_rel > worst_rel) worst_rel = w.max_rel;
      vars[name] = {{"max_abs", w.max_abs}, {"max_rel", w.max_rel}, {"agree", w.agree}};
      if (!w.agree) over.push_back(name);
    }
    const bool loss_ok = worst_loss <= loss_tol;  // false for NaN
    const bool pass = loss_ok && over.empty();
    ok = ok && pass;
    out["against"][a.backend] = {{"max_loss_difference", worst_loss},
                                 {"max_relative_weight_difference", worst_rel},
                                 {"variables_over_tolerance", over},
                                 {"verdict", pass ? "agree" : "differ"},
                                 {"losses", losses},
                                 {"variables", vars}};
    if (!vm["json"].as<bool>()) {
      std::cout << fmt::format("{} vs {} over {} steps of {} (batch {}):\n", a.backend, ref.backend,
                               steps, model, batch);
      for (const auto& l : losses) {
        std::cout << fmt::format("  step {:4}  loss {:.6f} vs {:.6f}  diff {:.2e}\n",
                                 l["step"].get<int>(), l["loss"].get<double>(),
                                 l["reference_loss"].get<double>(), l["difference"].get<double>());
      }
      for (auto it = vars.begin(); it != vars.end(); ++it) {
        std::cout << fmt::format("  {:40} max abs {:.2e}  max rel {:.2e}{}\n", it.key(),
                                 it.value()["max_abs"].get<double>(),
                                 it.value()["max_rel"].get<double>(),
                                 it.value()["agree"].get<bool>() ? "" : "  over tolerance");
      }
      const std::string weights =
          over.empty() ? fmt::format("every variable within {:g} + {:g} x its largest value",
                                     weight_atol, weight_tol)
                       : fmt::format("{} of {} variables over {:g} + {:g} x their largest value",
                                     over.size(), vars.size(), weight_atol, weight_tol);
      std::cout << fmt::format("  verdict: {} (max loss difference {:.2e} {} {:g}; {})\n",
                               pass ? "agree" : "DIFFER", worst_loss, loss_ok ? "<=" : ">",
                               loss_tol, weights);
    }
  }
  if (vm["json"].as<bool>()) std::cout << out.dump(2) << "\n";
  return ok ? kOk : kFailed;
}

}  // namespace tpusim::cli
