#pragma once
// Fault points for crash-consistency tests. With TPUSIM_KILL_AT=NAME:N in the environment, the
// Nth time the process passes fault point NAME it kills itself with SIGKILL, as a power cut or
// the OOM killer would, at a moment a test names instead of one a timer guesses. Without it
// (every real run) a fault point costs one load of a pointer.
//
// Points (docs/reliability.md): checkpoint.partial (a checkpoint's temporary file half written),
// checkpoint.written (complete, not yet renamed), checkpoint.renamed (in place, the index not yet
// rewritten), checkpoint.indexed (the index rewritten, old checkpoints not yet removed),
// summary.event (an event appended) and loop.done (a device loop's steps counted, nothing saved).

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

namespace tpusim {
namespace internal {

struct FaultPlan {
  std::string name;
  long count = 1;
  std::atomic<long> hits{0};
};

// The plan TPUSIM_KILL_AT gives ("NAME" or "NAME:N"), read once; nullptr without one.
inline FaultPlan* fault_plan() {
  static FaultPlan* const plan = []() -> FaultPlan* {
    const char* env = std::getenv("TPUSIM_KILL_AT");
    if (env == nullptr || *env == '\0') return nullptr;
    auto* p = new FaultPlan;  // lives as long as the process
    const std::string text(env);
    const size_t colon = text.rfind(':');
    p->name = text.substr(0, colon);
    if (colon != std::string::npos) p->count = std::max(1L, std::atol(text.c_str() + colon + 1));
    return p;
  }();
  return plan;
}

}  // namespace internal

inline void fault_point(const char* name) {
  internal::FaultPlan* plan = internal::fault_plan();
  if (plan == nullptr || plan->name != name) return;
  if (plan->hits.fetch_add(1) + 1 == plan->count) std::raise(SIGKILL);
}

}  // namespace tpusim
