#include "runtime/backend/backend.h"

#include "common/strings.h"
#include "sim/numerics/bf16.h"

namespace tpusim::runtime {

const std::string& Backend::name() const { return declaration().name; }

absl::Status Backend::set_timing_only(bool timing_only) {
  RunFeatures run;
  run.timing_only = timing_only;
  return check_backend_options(declaration(), CompileOptions{}, run);
}

void add_op_timings(const std::vector<OpTiming>& loop, std::vector<OpTiming>* total) {
  for (size_t i = 0; i < loop.size(); ++i) {
    const OpTiming& o = loop[i];
    // The same executable lists its ops in the same order every loop: try the same index first.
    OpTiming* into = i < total->size() && (*total)[i].label == o.label && (*total)[i].op == o.op
                         ? &(*total)[i]
                         : nullptr;
    for (size_t j = 0; into == nullptr && j < total->size(); ++j) {
      if ((*total)[j].label == o.label && (*total)[j].op == o.op) into = &(*total)[j];
    }
    if (into == nullptr) {
      total->push_back(o);
      continue;
    }
    into->flops += o.flops;
    into->mxu_flops += o.mxu_flops;
    into->hbm_bytes += o.hbm_bytes;
    into->ici_bytes += o.ici_bytes;
    into->seconds += o.seconds;
    into->instructions += o.instructions;
  }
}

traces::TraceRouter& device_trace_router() {
  static traces::TraceRouter router;
  return router;
}

absl::StatusOr<std::vector<Outputs>> Backend::run(Executable& executable, Variables& variables,
                                                  const std::vector<Feeds>& feeds,
                                                  uint64_t first_step) {
  if (executable.replicas() != 1) {
    return absl::InvalidArgumentError(str_cat("run() feeds one replica; the executable has ",
                                              executable.replicas(), " (use run_loop)"));
  }
  std::vector<LoopStep> steps(feeds.size());
  for (size_t s = 0; s < feeds.size(); ++s) steps[s].replicas = {feeds[s]};
  auto loop = run_loop(executable, variables, steps, first_step);
  if (!loop.ok()) return loop.status();
  std::vector<Outputs> outputs;
  outputs.reserve(loop->outputs.size());
  for (auto& step : loop->outputs) outputs.push_back(std::move(step.front()));
  return outputs;
}

std::vector<int> last_uses(const Graph& graph) {
  std::vector<int> last(static_cast<size_t>(graph.size()), -1);
  const std::vector<bool> live = live_nodes(graph);
  for (int i = 0; i < graph.size(); ++i) {
    if (!live[static_cast<size_t>(i)]) continue;
    for (int in : graph.node(i).inputs) last[static_cast<size_t>(in)] = i;
  }
  for (const auto& o : graph.outputs()) last[static_cast<size_t>(o.node)] = graph.size();
  for (const auto& u : graph.updates()) last[static_cast<size_t>(u.value)] = graph.size();
  return last;
}

absl::Status check_loop(const Executable& executable, const Variables& variables,
                        const std::vector<LoopStep>& steps, uint64_t first_step) {
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].replicas.size() != executable.simulated_replicas()) {
      return absl::InvalidArgumentError(str_cat("step ", first_step + s, ": ",
                                                steps[s].replicas.size(), " batches for ",
                                                executable.simulated_replicas(), " replicas"));
    }
    for (size_t r = 0; r < steps[s].replicas.size(); ++r) {
      if (absl::Status st = check_inputs(executable.graph(), variables, steps[s].replicas[r]);
          !st.ok()) {
        const std::string replica = executable.replicas() > 1 ? str_cat(", replica ", r) : "";
        return absl::Status(st.code(),
                            str_cat("step ", first_step + s, replica, ": ", st.message()));
      }
    }
  }
  return absl::OkStatus();
}

const HostTensor& infeed_value(const Node& infeed, const HostTensor& batch, HostTensor& rounded) {
  if (infeed.dtype != DType::kBF16) return batch;
  rounded = batch;
  rounded.dtype = DType::kBF16;
  for (float& x : rounded.f) x = sim::round_to_bf16(x);
  return rounded;
}

absl::Status check_inputs(const Graph& graph, const Variables& variables, const Feeds& feeds) {
  for (int id : graph.infeeds()) {
    const Node& n = graph.node(id);
    auto it = feeds.find(n.attrs.name);
    if (it == feeds.end())
      return absl::InvalidArgumentError(str_cat("no batch for infeed '", n.attrs.name, "'"));
    const HostTensor& t = it->second;
    const size_t have = t.dtype == DType::kS32 ? t.i.size() : t.f.size();
    if (t.shape != n.shape || (t.dtype == DType::kS32) != (n.dtype == DType::kS32) ||
        have != static_cast<size_t>(n.shape.elements())) {
      return absl::InvalidArgumentError(
          str_cat("infeed '", n.attrs.name, "' takes ", dtype_name(n.dtype), n.shape.str(),
                  "; the batch is ", dtype_name(t.dtype), t.shape.str()));
    }
  }
  for (int id : graph.variables()) {
    const Node& n = graph.node(id);
    auto it = variables.find(n.attrs.name);
    if (it == variables.end())
      return absl::InvalidArgumentError(str_cat("no value for variable '", n.attrs.name, "'"));
    if (it->second.shape != n.shape) {
      return absl::InvalidArgumentError(str_cat("variable '", n.attrs.name, "' is ", n.shape.str(),
                                                "; its value is ", it->second.shape.str()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime
