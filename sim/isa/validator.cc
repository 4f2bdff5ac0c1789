#include "sim/isa/validator.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/strings.h"
#include "sim/core_map.h"
#include "sim/isa/collective_checks.h"
#include "sim/isa/ops.h"
#include "sim/isa/stream_bodies.h"
#include "sim/isa/vector_checks.h"
#include "sim/memory/block.h"

namespace tpusim::sim {
namespace {

using isa::Block;
using isa::Instruction;
using isa::Vector;

constexpr size_t kMaxReported = 50;

struct WeightShape {
  uint32_t rows = 0;
  uint32_t cols = 0;
};

// Validates one core's stream; appends "core C instruction I (op): reason" lines.
class CoreChecker {
 public:
  // `core` is the entry checked; `body` holds its instructions and origins (itself, or the
  // entry its instructions_from names, checked in full as that entry's own).
  CoreChecker(const config::SliceSpec& slice, const isa::CoreProgram& core,
              const isa::CoreProgram& body, const std::set<uint32_t>& program_cores,
              std::vector<std::string>* errors)
      : slice_(slice), core_(core), body_(body), program_cores_(program_cores), errors_(errors) {}

  void run() {
    const auto& instrs = body_.instructions();
    if (&body_ != &core_) {
      // The stream was checked as its holder's; only a collective's group depends on which core
      // runs it (it must be a member).
      for (int i = 0; i < instrs.size(); ++i) {
        if (instrs[i].op_case() == Instruction::kCollective) check_collective_of_core(i, instrs[i]);
      }
      return;
    }
    check_range(0, instrs.size(), instrs.size());
    for (int i = 0; i < instrs.size(); ++i) {
      check_instruction(i, instrs[i]);
      if (instrs[i].origin() > static_cast<uint32_t>(body_.origins_size())) {
        fail(i, str_cat("names origin ", instrs[i].origin(), " but the core's program lists ",
                        body_.origins_size(), " origin(s) (origin is 1 + an index, 0 for none)"));
      }
    }
    check_waits(0, instrs.size());
  }

 private:
  void fail(int index, const std::string& reason) {
    errors_->push_back(str_cat("core ", core_.core(), " instruction ", index, " (",
                               op_name(body_.instructions(index)), "): ", reason));
  }

  void check_collective_of_core(int index, const Instruction& in) {
    check_collective({slice_, program_cores_, core_.core(),
                      [&](const std::string& reason) { fail(index, reason); }},
                     in.collective());
  }

  // A block in VMEM (`in_vmem`) or HBM: shape, alignment and bounds.
  bool check_block(int index, const char* what, const Block& b, bool in_vmem) {
    const uint32_t esize = dtype_bytes(b.dtype());
    if (esize == 0) {
      fail(index, str_cat(what, " has no dtype (f32, bf16 or s32)"));
      return false;
    }
    if (b.rows() == 0 || b.cols() == 0) {
      fail(index, str_cat(what, " is empty (", b.rows(), " x ", b.cols(), ")"));
      return false;
    }
    if (b.address() % esize != 0 || row_stride(b) % esize != 0) {
      fail(index, str_cat(what, " at address ", b.address(), " with row stride ", row_stride(b),
                          " is not aligned to its ", esize, "-byte elements"));
      return false;
    }
    if (b.row_stride_bytes() != 0 && b.rows() > 1 &&
        b.row_stride_bytes() < static_cast<uint64_t>(b.cols()) * esize) {
      fail(index, str_cat(what, " row stride ", b.row_stride_bytes(), " is shorter than a row of ",
                          static_cast<uint64_t>(b.cols()) * esize, " bytes: rows would overlap"));
      return false;
    }
    const uint64_t capacity = in_vmem ? slice_.chip.core.vmem_bytes : hbm_address_space(slice_);
    if (end_address(b) > capacity) {
      fail(index, str_cat(what, " [", b.address(), ", ", end_address(b), ") overflows ",
                          in_vmem ? "VMEM" : "HBM", " of ", capacity, " bytes"));
      return false;
    }
    return true;
  }

  void check_instruction(int index, const Instruction& in) {
    check_flags(index, in);
    switch (in.op_case()) {
      case Instruction::kDma:
        check_dma(index, in.dma());
        return;
      case Instruction::kLoadWeights:
        check_load_weights(index, in.load_weights());
        return;
      case Instruction::kMatmul:
        check_matmul(index, in.matmul());
        return;
      case Instruction::kVector:
        check_vector(index, in.vector());
        return;
      case Instruction::kInfeed:
        check_block(index, "dst", in.infeed().dst(), true);
        return;
      case Instruction::kOutfeed:
        check_block(index, "src", in.outfeed().src(), true);
        return;
      case Instruction::kCollective:
        check_collective_of_core(index, in);
        return;
      case Instruction::kLoop:
        if (in.loop().count() < 1) fail(index, "count must be >= 1");
        return;
      case Instruction::kHalt:
        return;
      default:
        fail(index, "has no operation: the instruction's op is unset or unknown to this tpusim");
        return;
    }
  }

  // The sync flags it signals and waits on, and what a shadow core's stream may hold.
  void check_flags(int index, const Instruction& in) {
    for (uint32_t f : in.signal()) {
      if (f >= kNumFlags)
        fail(index, str_cat("signals flag ", f, "; flags are 0..", kNumFlags - 1));
    }
    for (const auto& w : in.wait()) {
      if (w.flag() >= kNumFlags)
        fail(index, str_cat("waits on flag ", w.flag(), "; flags are 0..", kNumFlags - 1));
    }
    if (core_.shadow()) {
      const auto op = in.op_case();
      if (op != Instruction::kLoop && op != Instruction::kCollective && op != Instruction::kHalt) {
        fail(index, str_cat("is a ", op_name(in),
                            " in a shadow core's stream, which runs only loops, collectives "
                            "and halts"));
      }
      if (in.wait_size() > 0 || in.signal_size() > 0)
        fail(index, "waits or signals in a shadow core's stream, whose collectives run in order");
    }
  }

  void check_load_weights(int index, const isa::LoadWeights& lw) {
    const auto& core = slice_.chip.core;
    if (!check_mxu_slot(index, lw.mxu(), lw.slot())) return;
    if (!check_block(index, "weights", lw.weights(), true)) return;
    if (!is_float(lw.weights())) fail(index, "weights must be f32 or bf16");
    if (lw.weights().rows() > core.mxu_rows || lw.weights().cols() > core.mxu_cols) {
      fail(index, str_cat("weights ", lw.weights().rows(), "x", lw.weights().cols(), " exceed the ",
                          core.mxu_rows, "x", core.mxu_cols, " array"));
      return;
    }
    loaded_[{lw.mxu(), lw.slot()}] = {lw.weights().rows(), lw.weights().cols()};
  }

  void check_matmul(int index, const isa::Matmul& mm) {
    if (!check_mxu_slot(index, mm.mxu(), mm.slot())) return;
    bool ok = check_block(index, "lhs", mm.lhs(), true) & check_block(index, "out", mm.out(), true);
    if (const uint32_t last = matmul_groups(mm) - 1; ok && last > 0) {
      constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
      if (mm.lhs_group_stride_bytes() > (kMax - mm.lhs().address()) / last ||
          mm.out_group_stride_bytes() > (kMax - mm.out().address()) / last) {
        fail(index,
             str_cat(mm.groups(), " groups of strides ", mm.lhs_group_stride_bytes(), " and ",
                     mm.out_group_stride_bytes(), " bytes run past the end of addresses"));
        return;
      }
      // Every group lies where the last one ends furthest on (the strides are not negative).
      ok = check_block(index, "last group's lhs", group_lhs(mm, last), true) &
           check_block(index, "last group's out", group_out(mm, last), true);
    }
    if (!ok) return;
    if (!is_float(mm.lhs())) fail(index, "lhs must be f32 or bf16");
    if (mm.out().dtype() != isa::F32) fail(index, "out must be f32 (the MXU accumulates in f32)");
    auto it = loaded_.find({mm.mxu(), mm.slot()});
    if (it == loaded_.end()) {
      fail(index, str_cat("MXU ", mm.mxu(), " slot ", mm.slot(),
                          " has no weights: no load_weights before it"));
      return;
    }
    const WeightShape w = it->second;
    if (mm.lhs().cols() != w.rows) {
      fail(index, str_cat("lhs has ", mm.lhs().cols(), " columns but the weights in slot ",
                          mm.slot(), " have ", w.rows, " rows"));
    }
    if (mm.out().rows() != mm.lhs().rows() || mm.out().cols() != w.cols) {
      fail(index,
           str_cat("out is ", mm.out().rows(), "x", mm.out().cols(), "; lhs ", mm.lhs().rows(),
                   " rows x weights ", w.cols, " columns make ", mm.lhs().rows(), "x", w.cols));
    }
  }

  void check_dma(int index, const isa::Dma& d) {
    if (d.direction() != isa::Dma::HBM_TO_VMEM && d.direction() != isa::Dma::VMEM_TO_HBM) {
      fail(index, "has no direction (HBM_TO_VMEM or VMEM_TO_HBM)");
      return;
    }
    const bool to_vmem = d.direction() == isa::Dma::HBM_TO_VMEM;
    const bool ok =
        check_block(index, "src", d.src(), !to_vmem) & check_block(index, "dst", d.dst(), to_vmem);
    // An indexed DMA's HBM block is the whole table: only its rows may differ.
    const bool rows_differ = !d.has_index() && d.src().rows() != d.dst().rows();
    if (ok &&
        (rows_differ || d.src().cols() != d.dst().cols() || d.src().dtype() != d.dst().dtype())) {
      fail(index, str_cat("src ", d.src().rows(), "x", d.src().cols(), " ",
                          dtype_name(d.src().dtype()), " and dst ", d.dst().rows(), "x",
                          d.dst().cols(), " ", dtype_name(d.dst().dtype()),
                          d.has_index() ? " differ in their rows' width or dtype (an indexed DMA "
                                          "moves whole table rows)"
                                        : " differ; a DMA copies bytes and converts nothing"));
    }
    if (d.has_index()) check_dma_index(index, d.index(), to_vmem ? d.dst() : d.src());
    if (d.packed_bf16() && (d.src().dtype() != isa::F32 || d.dst().dtype() != isa::F32))
      fail(index, "packed_bf16 moves bf16 values held as f32 words: both blocks must be f32");
    if (d.engine() >= slice_.chip.core.dma_engines) {
      fail(index, str_cat("uses DMA engine ", d.engine(), "; the core has ",
                          slice_.chip.core.dma_engines));
    }
  }

  // An indexed DMA's indices: s32 in VMEM, one per row of the VMEM block.
  void check_dma_index(int index, const Block& indices, const Block& vmem) {
    if (!check_block(index, "index", indices, true)) return;
    if (indices.dtype() != isa::S32)
      fail(index, str_cat("index is ", dtype_name(indices.dtype()), "; row indices are s32"));
    const uint64_t count = static_cast<uint64_t>(indices.rows()) * indices.cols();
    if (count != vmem.rows()) {
      fail(index, str_cat("index holds ", count, " indices but the VMEM block has ", vmem.rows(),
                          " rows (one index per row)"));
    }
  }

  bool check_mxu_slot(int index, uint32_t mxu, uint32_t slot) {
    if (mxu >= slice_.chip.core.mxu_count) {
      fail(index, str_cat("uses MXU ", mxu, "; the core has ", slice_.chip.core.mxu_count));
      return false;
    }
    if (slot >= kWeightSlots) {
      fail(index, str_cat("uses weight slot ", slot, "; slots are 0 and 1"));
      return false;
    }
    return true;
  }

  static bool is_float(const Block& b) { return b.dtype() == isa::F32 || b.dtype() == isa::BF16; }

  void check_vector(int index, const Vector& v) {
    check_vector_instruction(
        v, {[&](const char* what, const Block& b) { return check_block(index, what, b, true); },
            [&](const std::string& reason) { fail(index, reason); }});
  }

  // Loop bodies must end inside the stream and inside any enclosing loop's body.
  void check_range(int begin, int end, int limit) {
    const auto& instrs = body_.instructions();
    for (int i = begin; i < end; ++i) {
      if (instrs[i].op_case() != Instruction::kLoop) continue;
      const int body_end = i + 1 + static_cast<int>(instrs[i].loop().body_length());
      if (instrs[i].loop().body_length() == 0) {
        fail(i, "has an empty body (body_length 0)");
      } else if (body_end > limit) {
        fail(i,
             str_cat("body of ", instrs[i].loop().body_length(), " instructions runs past ",
                     limit == instrs.size() ? "the end of the stream" : "the enclosing loop's body",
                     " (instruction ", limit, ")"));
      } else {
        check_range(i + 1, body_end, body_end);
        i = body_end - 1;
      }
    }
  }

  // Flags reset at every loop boundary: count the signals of each segment and check its waits.
  void check_waits(int begin, int end) {
    const auto& instrs = body_.instructions();
    std::vector<int> segment;
    auto close_segment = [&]() {
      std::array<uint64_t, kNumFlags> signals{};
      for (int i : segment) {
        for (uint32_t f : instrs[i].signal()) {
          if (f < kNumFlags) ++signals[f];
        }
      }
      for (int i : segment) {
        for (const auto& w : instrs[i].wait()) {
          if (w.flag() < kNumFlags && w.value() > signals[w.flag()]) {
            fail(i, str_cat("waits for flag ", w.flag(), " to reach ", w.value(), " but only ",
                            signals[w.flag()],
                            " signal(s) of it can happen before the next loop "
                            "boundary: the wait would never be met"));
          }
        }
      }
      segment.clear();
    };
    for (int i = begin; i < end; ++i) {
      if (instrs[i].op_case() == Instruction::kLoop && instrs[i].loop().body_length() > 0) {
        segment.push_back(i);  // the loop instruction's own waits count before the loop
        close_segment();
        const int body_end =
            std::min<int>(end, i + 1 + static_cast<int>(instrs[i].loop().body_length()));
        check_waits(i + 1, body_end);
        i = body_end - 1;
        continue;
      }
      segment.push_back(i);
    }
    close_segment();
  }

  const config::SliceSpec& slice_;
  const isa::CoreProgram& core_;
  const isa::CoreProgram& body_;
  const std::set<uint32_t>& program_cores_;
  std::vector<std::string>* errors_;
  std::map<std::pair<uint32_t, uint32_t>, WeightShape> loaded_;
};

// Problems with an entry that runs another's instructions (instructions_from): that entry must
// exist, hold its own instructions and not be a shadow, and this one must hold none of its own.
std::string shared_stream_problem(const isa::CoreProgram& core, const isa::CoreProgram& body) {
  if (!core.has_instructions_from()) return "";
  const std::string prefix =
      str_cat("core ", core.core(), ": runs the instructions of core ", core.instructions_from());
  if (&body == &core) return str_cat(prefix, ", which the program does not run");
  if (body.has_instructions_from())
    return str_cat(prefix, ", which runs another's itself; name the core that holds them");
  if (body.shadow() || core.shadow())
    return str_cat(prefix, ": a shadow neither lends nor borrows a program");
  if (core.instructions_size() > 0 || core.origins_size() > 0)
    return str_cat(prefix, " but holds ", core.instructions_size(), " of its own");
  return "";
}

}  // namespace

absl::Status validate_program(const isa::Program& program, const config::SliceSpec& slice) {
  std::vector<std::string> errors;
  std::set<uint32_t> program_cores;
  for (const auto& core : program.cores()) program_cores.insert(core.core());
  std::set<uint32_t> seen;
  const std::vector<const isa::CoreProgram*> bodies = stream_bodies(program);
  for (int i = 0; i < program.cores_size(); ++i) {
    const isa::CoreProgram& core = program.cores(i);
    if (core.core() >= slice.cores) {
      errors.push_back(str_cat("core ", core.core(), ": the slice ", slice.name, " has cores 0..",
                               slice.cores - 1));
      continue;
    }
    if (!seen.insert(core.core()).second) {
      errors.push_back(str_cat("core ", core.core(), ": has two instruction streams"));
      continue;
    }
    if (std::string problem = shared_stream_problem(core, *bodies[static_cast<size_t>(i)]);
        !problem.empty()) {
      errors.push_back(problem);
      continue;
    }
    CoreChecker(slice, core, *bodies[static_cast<size_t>(i)], program_cores, &errors).run();
  }
  std::map<uint32_t, bool> shadow_of_core;
  for (const auto& core : program.cores()) shadow_of_core[core.core()] = core.shadow();
  for (const auto& core : program.cores()) {
    if (!core.shadow()) continue;
    auto it = shadow_of_core.find(core.stands_for());
    if (it == shadow_of_core.end() || it->second) {
      errors.push_back(str_cat(
          "core ", core.core(), ": a shadow standing for core ", core.stands_for(), ", which ",
          it == shadow_of_core.end() ? "the program does not run" : "is a shadow too",
          "; it must stand for a simulated core"));
    }
  }
  if (errors.empty()) return absl::OkStatus();
  const size_t total = errors.size();
  if (errors.size() > kMaxReported) {
    errors.resize(kMaxReported);
    errors.push_back(str_cat("... and ", total - kMaxReported, " more"));
  }
  return absl::InvalidArgumentError(str_cat("program '", program.name(), "' rejected (", total,
                                            total == 1 ? " problem" : " problems", "):\n  ",
                                            str_join(errors, "\n  ")));
}

}  // namespace tpusim::sim
