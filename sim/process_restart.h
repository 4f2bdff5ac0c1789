#pragma once
// Puts every SystemC process under a module back at its start, so that a System recovers from
// a failed run (a deadlock, a cycle cap, a unit's error) in the same process: every pending
// notification of an event under the module is cancelled and every thread process is reset
// (IEEE 1666-2011 sc_process_handle::reset(): the thread unwinds from the wait it sits in and
// runs again from its first statement to its first wait). SystemC resets a process only while
// the simulation runs (error E573 otherwise), so the resets are made by a method process of this
// module in one evaluation at the current time: simulated time does not move.
//
// The modules' own state (queues, flags, reservations) is theirs to clear before restart() is
// called: a thread that restarts finds its queue empty and waits, as it did after elaboration.

#include <string>
#include <systemc>
#include <vector>

#include <absl/status/status.h>

namespace tpusim::sim {

class ProcessRestart : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(ProcessRestart);
  // `root`: the module whose processes and events (at any depth) are restarted; this module
  // may be one of its children.
  ProcessRestart(const sc_core::sc_module_name& name, sc_core::sc_object& root);

  // Between runs (sc_start has returned). Cancels every pending notification under the root,
  // resets every thread process and runs the deltas that takes. FailedPrecondition if anything
  // is still pending afterwards (a process restarted into a timed wait, which no thread of the
  // model does) or the kernel is not paused between runs.
  absl::Status restart();

 private:
  void reset_threads();  // SC_METHOD, triggered by requested_
  void cancel_notifications(sc_core::sc_object& object);
  void gather_threads(sc_core::sc_object& object);

  sc_core::sc_object& root_;
  std::vector<sc_core::sc_process_handle> threads_;  // gathered at the first restart
  sc_core::sc_event requested_;
};

}  // namespace tpusim::sim
