#include "sim/process_restart.h"

#include "common/strings.h"

namespace tpusim::sim {

ProcessRestart::ProcessRestart(const sc_core::sc_module_name& name, sc_core::sc_object& root)
    : sc_module(name), root_(root) {
  SC_METHOD(reset_threads);
  sensitive << requested_;
  dont_initialize();
}

void ProcessRestart::cancel_notifications(sc_core::sc_object& object) {
  // An event made while a module is being built is that module's child (SystemC 2.3), unnamed
  // ones included: the units' work and completion events, the feed queues', the collectives'.
  for (sc_core::sc_event* event : object.get_child_events()) event->cancel();
  for (sc_core::sc_object* child : object.get_child_objects()) cancel_notifications(*child);
}

void ProcessRestart::gather_threads(sc_core::sc_object& object) {
  for (sc_core::sc_object* child : object.get_child_objects()) {
    sc_core::sc_process_handle process(child);
    if (process.valid()) {
      if (process.proc_kind() != sc_core::SC_METHOD_PROC_) threads_.push_back(process);
      continue;
    }
    gather_threads(*child);
  }
}

void ProcessRestart::reset_threads() {
  for (sc_core::sc_process_handle& thread : threads_) thread.reset();
}

absl::Status ProcessRestart::restart() {
  if (sc_core::sc_get_status() != sc_core::SC_PAUSED) {
    return absl::FailedPreconditionError(
        "the simulation kernel is not paused between runs: its processes cannot be restarted");
  }
  if (threads_.empty()) gather_threads(root_);
  cancel_notifications(root_);
  requested_.notify(sc_core::SC_ZERO_TIME);
  // The reset evaluation, then whatever the restarted threads notify on their way to their
  // first waits (nothing in this model, but a delta costs nothing to check).
  while (sc_core::sc_pending_activity_at_current_time()) sc_core::sc_start(sc_core::SC_ZERO_TIME);
  if (sc_core::sc_pending_activity()) {
    return absl::FailedPreconditionError(
        str_cat("after restarting ", threads_.size(),
                " processes an event is still pending: the model is not idle"));
  }
  return absl::OkStatus();
}

}  // namespace tpusim::sim
