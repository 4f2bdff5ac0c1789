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
//
// On a chip (chip_figures) an op's time in a step is the time at least one of the chip's cores
// was inside its span for the op: the union of the cores' spans. The chip's HBM serves every
// byte the op moves on either core within that union, so its bytes over its time never exceed
// the chip's bandwidth, however the cores interleave it, and neither do its FLOPs exceed the
// chip's peaks. (The longest core's span alone would credit a chip whose cores take turns with
// both cores' bytes in one core's time; the hull from the first start to the last end would
// count the gap between two cores that drifted apart, when neither ran the op.)

#include <cstdint>
#include <string>
#include <vector>

namespace tpusim::sim {

// An op's span in one step, in cycles.
struct OpSpan {
  uint64_t step = 0, start = 0, end = 0;
};

struct OpFigures {
  std::string label;     // the graph node: "dense_1/matmul"
  std::string op;        // its kind: "matmul", "fused", "infeed", ...
  double flops = 0;      // MXU: 2 per multiply-accumulate; vector unit: 1 per arithmetic element
  double mxu_flops = 0;  // the MXUs' part of flops: an op with none runs on the vector unit
  double hbm_bytes = 0;
  double ici_bytes = 0;  // sent over the interconnect by its collectives
  uint64_t cycles = 0;   // the sum over steps of its span in the step
  uint64_t instructions = 0;
  std::vector<OpSpan> spans{};  // per step it ran in, in step order
};

// One chip's figures from its cores' (the same programs' origins, so the same ops at the same
// index): the work summed, cycles the union of the cores' spans step by step, and `spans` per
// step the hull from the first start on any core to the last end on any. Cores' tables of
// different lengths are merged up to the shortest.
std::vector<OpFigures> chip_figures(const std::vector<std::vector<OpFigures>>& cores);

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
    OpSpan open_span;
    bool open = false;
  };
  std::vector<Entry> entries_;
};

}  // namespace tpusim::sim
