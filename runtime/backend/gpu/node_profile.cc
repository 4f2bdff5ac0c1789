#include "runtime/backend/gpu/node_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/node_plan.h"

namespace tpusim::runtime::gpu {

std::unique_ptr<NodeProfile> NodeProfile::from_environment(const Graph& graph) {
  const char* path = std::getenv("TPUSIM_GPU_PROFILE");
  if (path == nullptr || *path == '\0') return nullptr;
  return std::unique_ptr<NodeProfile>(new NodeProfile(graph, path));
}

NodeProfile::NodeProfile(const Graph& graph, std::string path)
    : graph_(graph),
      path_(std::move(path)),
      start_(static_cast<size_t>(graph.size()), nullptr),
      stop_(static_cast<size_t>(graph.size()), nullptr),
      recorded_(static_cast<size_t>(graph.size()), false),
      ran_(static_cast<size_t>(graph.size()), false),
      total_ms_(static_cast<size_t>(graph.size()), 0.0) {}

NodeProfile::~NodeProfile() {
  for (cudaEvent_t e : start_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  for (cudaEvent_t e : stop_) {
    if (e != nullptr) cudaEventDestroy(e);
  }
}

absl::Status NodeProfile::before(int id) {
  const auto at = static_cast<size_t>(id);
  for (auto* events : {&start_, &stop_}) {
    if ((*events)[at] != nullptr) continue;
    if (absl::Status st = cuda_status(cudaEventCreate(&(*events)[at]), "cudaEventCreate");
        !st.ok()) {
      return st;
    }
  }
  recorded_[at] = true;
  return cuda_status(cudaEventRecord(start_[at]), "recording a profile event");
}

absl::Status NodeProfile::after(int id) {
  return cuda_status(cudaEventRecord(stop_[static_cast<size_t>(id)]), "recording a profile event");
}

absl::Status NodeProfile::add_step() {
  for (size_t i = 0; i < recorded_.size(); ++i) {
    if (!recorded_[i]) continue;
    float ms = 0;
    if (absl::Status st =
            cuda_status(cudaEventElapsedTime(&ms, start_[i], stop_[i]), "reading a profile event");
        !st.ok()) {
      return st;
    }
    total_ms_[i] += ms;
    recorded_[i] = false;
    ran_[i] = true;
  }
  ++steps_;
  return absl::OkStatus();
}

std::string NodeProfile::table() const {
  const double steps = steps_ > 0 ? static_cast<double>(steps_) : 1.0;
  double all = 0;
  for (double ms : total_ms_) all += ms;
  std::vector<int> order;
  std::map<std::string, double> by_op;
  for (int i = 0; i < graph_.size(); ++i) {
    if (!ran_[static_cast<size_t>(i)]) continue;
    order.push_back(i);
    by_op[op_name(graph_.node(i).op)] += total_ms_[static_cast<size_t>(i)];
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return total_ms_[static_cast<size_t>(a)] > total_ms_[static_cast<size_t>(b)];
  });
  auto row = [&](double ms, const std::string& what) {
    char figures[64];
    std::snprintf(figures, sizeof figures, "%10.4f %6.2f%%  ", ms / steps,
                  all > 0 ? 100.0 * ms / all : 0.0);
    return str_cat(figures, what, "\n");
  };
  std::string out = str_cat("gpu node profile: ", steps_, " steps, ", all / steps,
                            " ms a step on the device\n\n     ms/step  share  node\n");
  for (int i : order) {
    const Node& n = graph_.node(i);
    out += row(total_ms_[static_cast<size_t>(i)],
               str_cat(describe_node(graph_, i), " ", dtype_name(n.dtype), n.shape.str()));
  }
  std::vector<std::pair<double, std::string>> ops;
  for (const auto& [op, ms] : by_op) ops.push_back({ms, op});
  std::sort(ops.rbegin(), ops.rend());
  out += "\n     ms/step  share  op\n";
  for (const auto& [ms, op] : ops) out += row(ms, op);
  return out;
}

absl::Status NodeProfile::write() const {
  std::ofstream file(path_, std::ios::trunc);
  file << table();
  file.close();
  if (!file) return absl::InternalError(str_cat("cannot write the gpu profile to ", path_));
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::gpu
