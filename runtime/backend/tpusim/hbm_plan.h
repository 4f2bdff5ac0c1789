#pragma once
// The liveness-based HBM planner of the tpusim compiler. Every node's value gets a buffer in
// the chip's HBM (4 bytes per element: floating values as f32, s32 as s32). Reshapes,
// stop_gradient and a one-replica cross_replica_sum share their input's buffer. Variables and
// constants live for the whole program; every other buffer is free again after its last use
// (outputs and update values live to the end of the step) and is reused first-fit. "Last use"
// follows the order the fragments are emitted in (PlanRequest::order). An update value computed
// elementwise after its variable's last other read takes the variable's buffer (HbmPlan::in_place).

#include <cstdint>
#include <vector>

#include "runtime/graph/graph.h"

namespace tpusim::runtime::tpusim_backend {

struct HbmPlan {
  std::vector<uint64_t> address;  // per node
  std::vector<int> owner;         // the node whose buffer a node uses (itself unless aliased)
  uint64_t persistent_bytes = 0;  // variables and constants
  uint64_t peak_bytes = 0;        // everything at the busiest point, persistent included
  // The same as a TPU holds the buffers: bf16 ones at 2 bytes a value (device_bytes), each
  // allocated and freed when the simulator's is. What the core's share of HBM must hold.
  uint64_t device_persistent_bytes = 0;
  uint64_t device_peak_bytes = 0;
  // The buffers (besides variables and constants) allocated when the device's peak was reached,
  // for saying what holds it.
  std::vector<int> live_at_device_peak;
  int device_peak_position = -1;  // where in the emission order the device's peak was reached
  std::vector<int> position;      // per node, its place in the emission order
  // Per buffer owner, the position of the last fragment reading it through any alias (its own
  // position when none does; graph.size() for outputs and update values, which live to the end).
  std::vector<int> last_read;
  // Per node, the variable whose buffer it was written into (an update value computed after the
  // variable's last other read, as XLA's buffer assignment gives an elementwise fusion's output
  // the buffer of an operand that dies there and aliases a training loop's updated variables
  // with their inputs); -1 for any other. The step's closing copy skips those updates.
  std::vector<int> in_place;
};

// What the compiler decided about each node: whether its value lives in HBM (fused
// intermediates and dead nodes do not) and which buffers its fragment reads or writes (a fused
// group's root reads the outside inputs of all its members; step_plan.h): each lives at least
// until the fragment runs. Without it every node has a buffer and reads its inputs.
struct PlanRequest {
  std::vector<bool> materialized;
  std::vector<std::vector<int>> reads;
  uint32_t replicas = 1;  // with more than one, cross_replica_sum gets a buffer of its own
  // The order fragments are emitted in (schedule.h); empty: graph order.
  std::vector<int> order;
  // cross_replica_sum runs while later fragments compute (schedule.h): what it reads stays
  // allocated as long as its result does, so no later fragment writes over it while it runs.
  bool overlapped_collectives = false;
  // Per node, the bytes of scratch its fragment uses while it runs (a transpose's or a reduce's
  // partial results: CompilerHbm::temporary), known once the step has been emitted; empty: none.
  // The device allocates them beside the live buffers at the node's position and frees them
  // after it; the simulator keeps them in a region of their own, so they move no address.
  std::vector<uint64_t> temporaries;
  // Per node, whether its own fragment computes it elementwise, each element from its operands'
  // elements at the same index (a fused elementwise group's root): such an update value is
  // written into its variable's buffer when no later fragment reads the variable (in_place);
  // empty: none is.
  std::vector<bool> elementwise_fragment;
};

HbmPlan plan_hbm(const Graph& graph, uint64_t base, const PlanRequest* request = nullptr);

// Whether the node's buffer lives through the whole step (a variable or a constant), outside the
// plan's reuse of buffers.
bool persistent(const Node& node);

// Bytes of a node's buffer in the simulator (4 a value) and on the device (2 for bf16).
uint64_t buffer_bytes(const Node& node);
uint64_t device_bytes(const Node& node);

}  // namespace tpusim::runtime::tpusim_backend
