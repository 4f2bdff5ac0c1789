#include "sim/units/vector_cost.h"

#include <algorithm>
#include <array>
#include <vector>

#include "sim/clock.h"
#include "sim/isa/ops.h"
#include "sim/memory/block.h"

namespace tpusim::sim {

namespace {

using isa::Vector;

uint64_t vregs_of(uint64_t elements, const config::CoreSpec& core) {
  const uint64_t width = static_cast<uint64_t>(core.vector_lanes) * core.vector_sublanes;
  return (elements + width - 1) / width;
}

// Cycles per vreg of an op that does not dual-issue: a divide's, a transcendental's; 0 for any
// other.
double serial_cycles_per_vreg(Vector::Op op, const config::CoreSpec& core) {
  if (op == Vector::DIV) return core.vector_divide_cycles_per_vreg;
  if (is_transcendental(op)) return core.vector_transcendental_cycles_per_vreg;
  return 0;
}

// The blocks an op reads, null where it takes none (no allocation: this runs per instruction).
std::array<const isa::Block*, 3> operands(const Vector& v) {
  return {v.has_a() ? &v.a() : nullptr, v.has_b() ? &v.b() : nullptr, v.has_c() ? &v.c() : nullptr};
}

bool among(const std::vector<isa::Block>& blocks, const isa::Block& b) {
  for (const isa::Block& x : blocks) {
    if (same_block(x, b)) return true;
  }
  return false;
}

// Forgets the blocks a write to `dst` changes without being them: what was loaded or made there
// is stale, and a later read loads it again.
void forget_overlapped(std::vector<isa::Block>* blocks, const isa::Block& dst) {
  blocks->erase(std::remove_if(blocks->begin(), blocks->end(),
                               [&](const isa::Block& x) {
                                 const bool overlap = x.address() < end_address(dst) &&
                                                      dst.address() < end_address(x);
                                 return overlap && !same_block(x, dst);
                               }),
                blocks->end());
}

VectorCost single_cost(const Vector& v, const config::CoreSpec& core) {
  VectorCost cost;
  cost.elements = work_elements(v);
  const double serial = serial_cycles_per_vreg(v.op(), core);
  cost.issue_cycles =
      ceil_cycle(static_cast<double>(vregs_of(cost.elements, core)) * (serial > 0 ? serial : 1));
  cost.vmem_bytes = payload_bytes(v.dst());
  for (const isa::Block* in : operands(v)) {
    if (in != nullptr) cost.vmem_bytes += payload_bytes(*in);
  }
  cost.flop_elements = is_arithmetic(v.op()) ? cost.elements : 0;
  cost.transcendental = is_transcendental(v.op());
  return cost;
}

VectorCost chain_cost(const Vector& chain, const config::CoreSpec& core) {
  VectorCost cost;
  double alu_vregs = 0, serial_cycles = 0;
  std::vector<isa::Block> made, loaded;
  for (const Vector& step : chain.steps()) {
    for (const isa::Block* in : operands(step)) {
      if (in == nullptr || among(made, *in) || among(loaded, *in)) continue;
      loaded.push_back(*in);
      cost.vmem_bytes += payload_bytes(*in);
    }
    const uint64_t elements = work_elements(step);
    const auto vregs = static_cast<double>(vregs_of(elements, core));
    const VectorOpClass cls = classify(step.op());
    if (const double serial = serial_cycles_per_vreg(step.op(), core); serial > 0) {
      serial_cycles += vregs * serial;
    } else if ((cls != VectorOpClass::kFill || step.op() == Vector::RNG_UNIFORM) &&
               cls != VectorOpClass::kBroadcast) {
      alu_vregs += vregs;  // an RNG's draws take an ALU slot a vreg, as they do alone
    }
    if (!step.in_register()) cost.vmem_bytes += payload_bytes(step.dst());
    forget_overlapped(&made, step.dst());
    forget_overlapped(&loaded, step.dst());
    if (!among(made, step.dst())) made.push_back(step.dst());
    cost.elements += elements;
    if (is_arithmetic(step.op())) cost.flop_elements += elements;
    cost.transcendental = cost.transcendental || is_transcendental(step.op());
  }
  cost.issue_cycles = ceil_cycle(alu_vregs / core.vector_alus + serial_cycles);
  return cost;
}

}  // namespace

uint64_t work_elements(const Vector& v) {
  const isa::Block& b = classify(v.op()) == VectorOpClass::kReduce ? v.a() : v.dst();
  return static_cast<uint64_t>(b.rows()) * b.cols();
}

VectorCost vector_cost(const Vector& v, const config::CoreSpec& core) {
  return v.op() == Vector::CHAIN ? chain_cost(v, core) : single_cost(v, core);
}

uint64_t vector_issue_cycles(const Vector& v, const config::CoreSpec& core) {
  return vector_cost(v, core).issue_cycles;
}

}  // namespace tpusim::sim
