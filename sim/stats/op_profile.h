#pragma once
// Per graph op figures of one core's run: FLOPs, HBM bytes and time, grouped by the origin every
// instruction carries (isa::Instruction.origin, set by the compiler per graph node). Units add
// each instruction's work as they execute it, with the span [start, end) its unit was busy.
//
// An op's time in a step is its span: from its first instruction's start to its last one's end
// on this core, as a profiler's op track shows it (units overlapping inside the op count once;
// stalls inside it count). The sequencer drains the units between steps, so every instruction
// runs in the step the core's step counter shows; the profile keeps one open span per op and
// adds it to the op's time when the op's next step begins.

#include <cstdint>
#include <string>
#include <vector>

namespace tpusim::sim {

struct OpFigures {
  std::string label;     // the graph node: "dense_1/matmul"
  std::string op;        // its kind: "matmul", "fused", "infeed", ...
  double flops = 0;      // MXU: 2 per multiply-accumulate; vector unit: 1 per arithmetic element
  double mxu_flops = 0;  // the MXUs' part of flops: an op with none runs on the vector unit
  double hbm_bytes = 0;
  double ici_bytes = 0;  // sent over the interconnect by its collectives
  uint64_t cycles = 0;   // the sum over steps of its span in the step
  uint64_t instructions = 0;
};

// What one instruction did for its graph op.
struct OpWork {
  double flops = 0;
  double hbm_bytes = 0;
  bool on_mxu = false;   // its FLOPs are the MXUs'
  double ici_bytes = 0;  // sent over the interconnect
};

class OpProfile {
 public:
  // Starts afresh for a program whose origin table is (labels, ops); index i is origin i + 1.
  void reset(std::vector<OpFigures> origins);
  // An instruction of `origin` (0: none, ignored) in step `step`, busy over [start, end) cycles.
  void record(uint32_t origin, uint64_t step, uint64_t start, uint64_t end, const OpWork& work);
  // Every origin's figures, open spans closed.
  std::vector<OpFigures> figures() const;

 private:
  struct Entry {
    OpFigures figures;
    uint64_t open_step = 0, open_start = 0, open_end = 0;
    bool open = false;
  };
  std::vector<Entry> entries_;
};

}  // namespace tpusim::sim
