#include "estimator/jobs/compare_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/strings.h"
#include "estimator/checkpoint.h"
#include "estimator/jobs/compare_verdict.h"

namespace tpusim::jobs {

// The zoo model (or BERT) under `policy`, its initial weights nudged when `nudge` is set.
estimator::ModelFn model_fn(const CompareJob& job, runtime::models::DTypePolicy policy,
                            Nudge nudge) {
  estimator::ModelFn zoo = job.imported.has_value()
                               ? imported_model_fn(*job.imported, job.optimizer, policy)
                           : job.bert.has_value() ? bert_model_fn(job.model, job.optimizer, policy)
                                                  : zoo_model_fn(job.model, job.optimizer, policy);
  if (!nudge) return zoo;
  return [zoo, pattern = *nudge](
             runtime::GraphBuilder& b, const estimator::Features& f,
             std::optional<runtime::Value> labels, estimator::Mode mode,
             const estimator::Params& p) -> absl::StatusOr<estimator::TPUEstimatorSpec> {
    auto spec = zoo(b, f, labels, mode, p);
    if (spec.ok()) {
      // The model's own start (an imported file's weights) first, then the nudge.
      spec->init_fn = [pattern, start = spec->init_fn](runtime::Variables* variables) {
        if (start) {
          if (auto s = start(variables); !s.ok()) return s;
        }
        for (auto& [name, value] : *variables) {
          if (value.dtype == runtime::DType::kF32) nudge_one_ulp(name, &value.f, pattern);
        }
        return absl::OkStatus();
      };
    }
    return spec;
  };
}

absl::StatusOr<CompareRun> train_once(const CompareJob& job, const CompareBackend& backend,
                                      const std::string& dir, Nudge nudge) {
  estimator::RunConfig config;
  estimator::SimulatorOptions sim;
  config.model_dir = (job.root / dir).string();
  sim.backend = backend.name;
  sim.slice = job.slice;
  sim.compile.precision = backend.precision;
  // The baseline's nudged run also sums in f32, as tpusim does: the cpu's own reductions are in
  // double, and the baseline should drift by what f32 sums add too.
  sim.compile.f32_reductions = nudge.has_value();
  config.tpu_config.num_shards = job.replicas;  // the same replicas everywhere
  config.tpu_config.iterations_per_loop = static_cast<uint32_t>(job.steps);
  config.save_checkpoints_steps = job.steps;
  sim.log = [](const std::string&) {};
  use_data_options(job.data, &sim);
  auto est = estimator::TPUEstimator::create(model_fn(job, backend.policy, nudge), config, {}, true,
                                             job.batch, job.batch, job.batch, sim);
  if (!est.ok()) return est.status();
  auto trained =
      (*est)->train(job.bert.has_value()    ? bert_train_input(*job.bert)
                    : job.named.has_value() ? imported_train_input(*job.imported, *job.named)
                                            : fashion_train_input(job.data),
                    job.steps);
  if (!trained.ok()) return trained.status();
  auto ckpt = estimator::load_latest_checkpoint(config.model_dir);
  if (!ckpt.ok()) return ckpt.status();
  if (!ckpt->has_value())
    return absl::NotFoundError(str_cat("no checkpoint in ", config.model_dir));
  return CompareRun{backend.label, *trained, (*ckpt)->variables};
}

absl::StatusOr<CompareRun> train_on(const CompareJob& job, const CompareBackend& backend,
                                    const std::string& dir, Nudge nudge) {
  const auto start = std::chrono::steady_clock::now();
  if (job.log) {
    job.log(fmt::format("compare: {} steps of {}{} on {}{}...", job.steps, job.model,
                        job.policy_note, backend.label,
                        nudge ? fmt::format(" (initial weights nudged one ulp, pattern {}, "
                                            "sums in f32)",
                                            *nudge)
                              : ""));
  }
  absl::StatusOr<CompareRun> run = train_once(job, backend, dir, nudge);
  if (job.log) {
    job.log(fmt::format(
        " {} in {:.1f} s\n", run.ok() ? "done" : "failed",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  }
  return run;
}

absl::StatusOr<Differences> differences(const CompareRun& a, const CompareRun& ref, double rtol,
                                        double atol) {
  Differences d;
  const size_t steps = std::min(a.result.losses.size(), ref.result.losses.size());
  for (size_t s = 0; s < steps; ++s)
    d.losses.push_back(std::abs(static_cast<double>(a.result.losses[s]) - ref.result.losses[s]));
  for (const auto& [name, value] : ref.variables) {
    if (value.dtype == runtime::DType::kS32) continue;
    auto it = a.variables.find(name);
    if (it == a.variables.end() || it->second.f.size() != value.f.size()) {
      return absl::InternalError(str_cat(a.backend, ": variable '", name, "' is ",
                                         it == a.variables.end() ? "missing" : "of another size",
                                         " in its checkpoint (", ref.backend, " has ",
                                         value.f.size(), " values)"));
    }
    d.variables[name] = weight_difference(it->second.f, value.f, rtol, atol);
  }
  return d;
}

// Adds the nudged runs of patterns `from` .. `to`-1 to the rounding baseline `drift` (empty
// before pattern 0): trainings of `cpu` from initial weights nudged one ulp each against `plain`,
// its run from the model's own. One draw of the nudges' signs drifts anywhere within a factor of
// 20 of another at a given step, so the baseline is the largest drift of them all, step by step
// and variable by variable.
absl::Status add_to_baseline(const CompareJob& job, const CompareBackend& cpu,
                             const CompareRun& plain, uint32_t from, uint32_t to, double rtol,
                             double atol, Differences* drift) {
  for (uint32_t pattern = from; pattern < to; ++pattern) {
    auto nudged = train_on(job, cpu, str_cat("baseline-cpu-nudged-", pattern), pattern);
    if (!nudged.ok()) {
      return absl::Status(nudged.status().code(), str_cat("the baseline's nudged cpu run ", pattern,
                                                          ": ", nudged.status().message()));
    }
    auto d = differences(*nudged, plain, rtol, atol);
    if (!d.ok()) return d.status();
    if (pattern == 0) {
      *drift = *std::move(d);
      continue;
    }
    for (size_t s = 0; s < drift->losses.size() && s < d->losses.size(); ++s)
      drift->losses[s] = max_or_nan(drift->losses[s], d->losses[s]);
    for (auto& [name, w] : drift->variables) {
      const WeightDifference& other = d->variables.at(name);
      w.max_abs = max_or_nan(w.max_abs, other.max_abs);
      w.max_rel = max_or_nan(w.max_rel, other.max_rel);
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::jobs
