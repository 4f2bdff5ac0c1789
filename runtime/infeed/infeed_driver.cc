#include "runtime/infeed/infeed_driver.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "common/host_budget.h"
#include "common/strings.h"
#include "sim/numerics/bf16.h"

namespace tpusim::runtime {
namespace {

std::string shape_str(const std::vector<int64_t>& dims) {
  return str_cat("[", str_join(dims, ", "), "]");
}

// check_loop_memory for feeds of `values` values a replica a step, 4 bytes each on the host (f32,
// bf16 held as f32, s32).
absl::Status check_loop_values(uint64_t values, uint32_t replicas, uint64_t steps,
                               const std::string& steps_flag) {
  const uint64_t step = saturating_product(saturating_product(values, 4), replicas);
  return check_host_memory(str_cat("a loop of ", steps, " steps (", steps_flag, ") of ", replicas,
                                   " replicas' feeds, ", byte_size(step), " a step,"),
                           saturating_product(step, steps));
}

}  // namespace

absl::Status check_loop_memory(const Graph& graph, uint32_t replicas, uint64_t steps,
                               const std::string& steps_flag) {
  uint64_t values = 0;
  for (int id : graph.infeeds()) values += static_cast<uint64_t>(graph.node(id).shape.elements());
  return check_loop_values(values, replicas, steps, steps_flag);
}

absl::StatusOr<std::unique_ptr<InfeedDriver>> InfeedDriver::create(
    const Graph& graph, std::vector<InputPipeline> pipelines, InfeedOptions options) {
  const size_t p = pipelines.size();
  if (p == 0) return absl::InvalidArgumentError("infeed driver: no input pipeline");
  if (options.replicas == 0 || options.replicas % p != 0) {
    return absl::InvalidArgumentError(str_cat("infeed driver: ", options.replicas,
                                              " replicas do not split evenly over ", p,
                                              " input pipelines"));
  }
  std::vector<Feed> feeds;
  for (int id : graph.infeeds()) {
    const Node& n = graph.node(id);
    feeds.push_back({n.attrs.name, n.dtype, n.shape});
  }
  const HostTiming& t = options.timing;
  const bool measured = t.stages.empty();
  if (!measured && t.stage_seconds.size() != t.stages.size()) {
    return absl::InvalidArgumentError(str_cat("infeed driver: ", t.stages.size(), " stages but ",
                                              t.stage_seconds.size(), " stage costs"));
  }
  if (t.hosts == 0) return absl::InvalidArgumentError("infeed driver: hosts must be at least 1");
  const uint32_t pipelines_per_host = static_cast<uint32_t>((p + t.hosts - 1) / t.hosts);
  const uint32_t cores = std::max<uint32_t>(1, t.cpu_cores / pipelines_per_host);
  std::vector<HostPipelineModel> models;
  for (size_t i = 0; i < p; ++i) {
    if (pipelines[i].dataset == nullptr)
      return absl::InvalidArgumentError(str_cat("infeed driver: input pipeline ", i, " is null"));
    std::vector<HostStage> stages = t.stages;
    if (measured) {
      if (pipelines[i].profile == nullptr) {
        return absl::InvalidArgumentError(
            str_cat("infeed driver: input pipeline ", i,
                    " has no stage profile, and no fixed stage costs were given"));
      }
      for (const auto& s : pipelines[i].profile->snapshot())
        stages.push_back({s.name, static_cast<uint32_t>(s.threads)});
      stages.push_back({"enqueue", t.enqueue_threads});
    }
    models.emplace_back(std::move(stages), cores, t.prefetch_depth);
  }
  const uint32_t per_step =
      options.deal_per_core_batches ? static_cast<uint32_t>(options.replicas / p) : 1;
  auto timeline = std::make_shared<HostTimeline>(std::move(models), per_step, t.hosts);
  return std::unique_ptr<InfeedDriver>(new InfeedDriver(std::move(pipelines), std::move(options),
                                                        std::move(feeds), std::move(timeline)));
}

InfeedDriver::InfeedDriver(std::vector<InputPipeline> pipelines, InfeedOptions options,
                           std::vector<Feed> feeds, std::shared_ptr<HostTimeline> timeline)
    : pipelines_(std::move(pipelines)),
      options_(std::move(options)),
      feeds_(std::move(feeds)),
      timeline_(std::move(timeline)),
      last_cpu_(pipelines_.size()) {
  for (const InputPipeline& p : pipelines_) iterators_.push_back(p.dataset->make_iterator());
  stall_watch_ = StallWatch::after_seconds(options_.stall_report_seconds, options_.log);
}

std::string input_wait_report(const std::string& subject, const std::string& item,
                              const data::StageProfile* profile, double seconds, bool ended) {
  if (ended)
    return str_cat(subject, ": ", item, " came after ", fmt::format("{:.1f}", seconds), " s");
  std::string stages;
  if (profile != nullptr) {
    for (const data::StageSample& s : profile->snapshot()) {
      stages += str_cat(stages.empty() ? "" : "; ", s.name, ": ", s.elements, " done, ",
                        fmt::format("{:.2f}", s.cpu_seconds), " s of CPU");
    }
  }
  return str_cat(subject, ": no ", item, " after ", fmt::format("{:.1f}", seconds),
                 " s, still waiting (a source or map function that never returns stops the "
                 "pipeline here",
                 stages.empty() ? "" : "; its stages so far: " + stages, ")");
}

absl::StatusOr<std::optional<data::Element>> next_watched(data::Iterator& it, StallWatch* watch,
                                                          const std::string& subject,
                                                          const std::string& item,
                                                          const data::StageProfile* profile) {
  StallWatch::Scope watched;
  if (watch != nullptr) {
    watched = watch->watch([&subject, &item, profile](double seconds, bool ended) {
      return input_wait_report(subject, item, profile, seconds, ended);
    });
  }
  return it.next();
}

absl::StatusOr<std::vector<LoopStep>> InfeedDriver::next_loop(uint32_t steps,
                                                              double device_now_seconds) {
  uint64_t values = 0;
  for (const Feed& f : feeds_) values += static_cast<uint64_t>(f.shape.elements());
  if (auto s = check_loop_values(values, options_.replicas, steps, "the loop's steps"); !s.ok())
    return s;
  timeline_->start_at(device_now_seconds);
  std::vector<LoopStep> loop;
  loop.reserve(steps);
  for (uint32_t s = 0; s < steps; ++s) {
    LoopStep step;
    step.replicas.resize(options_.replicas);
    for (size_t p = 0; p < pipelines_.size(); ++p) {
      if (absl::Status st = pull(p, &step.replicas); !st.ok()) return st;
    }
    step.host = timeline_;
    step.host_step = timeline_->add_step();
    loop.push_back(std::move(step));
    ++steps_taken_;
  }
  return loop;
}

absl::Status InfeedDriver::pull(size_t p, std::vector<Feeds>* replicas) {
  const size_t per_pipeline = options_.replicas / pipelines_.size();
  // Dealing: each batch is one replica's, and the pipeline's replicas take them in turn.
  const bool deal = options_.deal_per_core_batches;
  const size_t pulls = deal ? per_pipeline : 1;
  const bool measured = options_.timing.stage_seconds.empty();
  std::vector<data::Element> batches;
  std::vector<std::vector<double>> costs;  // per batch, its stages' CPU seconds
  for (size_t j = 0; j < pulls; ++j) {
    auto next = next_watched(*iterators_[p], stall_watch_.get(), str_cat("input pipeline ", p),
                             str_cat("batch for step ", steps_taken_), pipelines_[p].profile.get());
    if (!next.ok()) {
      return absl::Status(
          next.status().code(),
          str_cat("input pipeline ", p, ", step ", steps_taken_, ": ", next.status().message()));
    }
    if (!next->has_value()) {
      return absl::OutOfRangeError(
          str_cat("input pipeline ", p, " ended after ", steps_taken_, " steps"));
    }
    if (replicas == nullptr) continue;  // skipping
    batches.push_back(std::move(**next));
    if (!measured) {
      costs.push_back(options_.timing.stage_seconds);
      continue;
    }
    // Measured: each profiled stage's CPU time since the previous batch.
    const auto samples = pipelines_[p].profile->snapshot();
    std::vector<double>& last = last_cpu_[p];
    last.resize(samples.size(), 0.0);
    std::vector<double>& batch_costs = costs.emplace_back();
    for (size_t i = 0; i < samples.size(); ++i) {
      batch_costs.push_back(samples[i].cpu_seconds - last[i]);
      last[i] = samples[i].cpu_seconds;
    }
  }
  if (replicas == nullptr) return absl::OkStatus();
  auto enqueue_seconds = enqueue(p, batches, *replicas);
  if (!enqueue_seconds.ok()) {
    return absl::Status(enqueue_seconds.status().code(),
                        str_cat("input pipeline ", p, ", step ", steps_taken_, ": ",
                                enqueue_seconds.status().message()));
  }
  for (size_t b = 0; b < costs.size(); ++b) {
    if (measured) costs[b].push_back((*enqueue_seconds)[b]);  // the driver's "enqueue" stage
    host_models()[p].push(std::move(costs[b]));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> InfeedDriver::enqueue(size_t p,
                                                          const std::vector<data::Element>& batches,
                                                          std::vector<Feeds>& replicas) const {
  const size_t per_pipeline = options_.replicas / pipelines_.size();
  const bool deal = options_.deal_per_core_batches;
  // A job is one replica's rows of its batch; each writes its own replica's feeds and its own
  // CPU time, so the jobs run on any threads.
  struct Job {
    size_t batch = 0;
    int64_t part = 0, parts = 1;  // the replica's rows: part `part` of `parts` parts of the batch
    size_t replica = 0;
    uint64_t cpu_ns = 0;
    absl::Status status;
  };
  std::vector<Job> jobs(per_pipeline);
  for (size_t j = 0; j < per_pipeline; ++j) {
    jobs[j].batch = deal ? j : 0;
    jobs[j].part = deal ? 0 : static_cast<int64_t>(j);
    jobs[j].parts = deal ? 1 : static_cast<int64_t>(per_pipeline);
    jobs[j].replica = p * per_pipeline + j;
  }
  auto run_jobs = [&](size_t first, size_t stride) {
    for (size_t k = first; k < jobs.size(); k += stride) {
      Job& job = jobs[k];
      const uint64_t start_ns = data::thread_cpu_ns();
      job.status = convert(batches[job.batch], job.part, job.parts, replicas[job.replica]);
      job.cpu_ns = data::thread_cpu_ns() - start_ns;
    }
  };
  const size_t threads =
      std::min<size_t>(std::max<uint32_t>(options_.timing.enqueue_threads, 1), jobs.size());
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run_jobs, t, threads);
  run_jobs(0, threads);  // this thread is one of them
  for (std::thread& h : helpers) h.join();

  std::vector<double> seconds(batches.size(), 0.0);
  for (const Job& job : jobs) {
    if (!job.status.ok()) return job.status;  // the first replica's in order
    seconds[job.batch] += static_cast<double>(job.cpu_ns) * 1e-9;
  }
  return seconds;
}

absl::Status InfeedDriver::skip(uint64_t steps) {
  for (uint64_t s = 0; s < steps; ++s) {
    for (size_t p = 0; p < pipelines_.size(); ++p) {
      if (absl::Status st = pull(p, nullptr); !st.ok()) return st;
    }
    ++steps_taken_;
  }
  return absl::OkStatus();
}

absl::Status InfeedDriver::convert(const data::Element& batch, int64_t part, int64_t parts,
                                   Feeds& feeds) const {
  for (const Feed& f : feeds_) {
    std::string component = f.infeed;
    for (const auto& [from, to] : options_.infeed_of) {
      if (to == f.infeed) component = from;
    }
    auto it = batch.find(component);
    if (it == batch.end()) {
      std::vector<std::string> names;
      for (const auto& [name, value] : batch) names.push_back(name);
      return absl::InvalidArgumentError(str_cat("no component '", component, "' for infeed '",
                                                f.infeed, "'; the batch has ",
                                                str_join(names, ", ")));
    }
    const data::FeatureValue& v = it->second;
    // The host batch is `parts` replicas' batches stacked along dimension 0.
    std::vector<int64_t> want = f.shape.dims();
    if (!want.empty()) want[0] *= parts;
    if (v.shape != want) {
      return absl::InvalidArgumentError(str_cat(
          "component '", component, "' is ", data::feature_type_name(v.type), shape_str(v.shape),
          "; infeed '", f.infeed, "' takes ", dtype_name(f.dtype), f.shape.str(), " on each of ",
          parts, " replicas, so the host batch must be ", shape_str(want)));
    }
    const bool is_int = f.dtype == DType::kS32;
    if (v.type == data::FeatureType::kBytes || (is_int && v.type != data::FeatureType::kInt64)) {
      return absl::InvalidArgumentError(
          str_cat("component '", component, "' holds ", data::feature_type_name(v.type),
                  "; infeed '", f.infeed, "' takes ", dtype_name(f.dtype),
                  v.type == data::FeatureType::kBytes ? " (decode it in the map function)" : ""));
    }
    const int64_t n = f.shape.elements();
    const int64_t offset = part * n;
    if (f.dtype == DType::kF32 && v.type == data::FeatureType::kFloat) {  // a plain copy
      HostTensor t;
      t.dtype = f.dtype;
      t.shape = f.shape;
      t.f.assign(v.floats.begin() + offset, v.floats.begin() + offset + n);  // no zeroing first
      feeds[f.infeed] = std::move(t);
      continue;
    }
    HostTensor t = HostTensor::zeros(f.dtype, f.shape);
    for (int64_t j = 0; j < n; ++j) {
      const auto src = static_cast<size_t>(offset + j);
      if (is_int) {
        const int64_t x = v.ints[src];
        if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
          return absl::OutOfRangeError(str_cat("component '", component, "' element ", src, " is ",
                                               x, ", outside infeed '", f.infeed, "''s s32"));
        }
        t.i[static_cast<size_t>(j)] = static_cast<int32_t>(x);
      } else {
        const float x =
            v.type == data::FeatureType::kFloat ? v.floats[src] : static_cast<float>(v.ints[src]);
        t.f[static_cast<size_t>(j)] = f.dtype == DType::kBF16 ? sim::round_to_bf16(x) : x;
      }
    }
    feeds[f.infeed] = std::move(t);
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime
