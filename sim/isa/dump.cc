#include "sim/isa/dump.h"

#include <iterator>

#include <fmt/format.h>

#include "sim/isa/ops.h"
#include "sim/memory/block.h"

namespace tpusim::sim {
namespace {

using isa::Instruction;

const char* precision_name(isa::Precision p) {
  switch (p) {
    case isa::HIGH:
      return "high";
    case isa::HIGHEST:
      return "highest";
    default:
      return "default";
  }
}

// A vector op's blocks and immediates; a chain's steps, each as "op: ...", separated by "; ".
std::string vector_operands(const isa::Vector& v) {
  if (v.op() == isa::Vector::CHAIN) {
    std::string out;
    for (const isa::Vector& step : v.steps()) {
      out += fmt::format("{}{}: {}{}", out.empty() ? "" : "; ", vector_op_name(step.op()),
                         vector_operands(step), step.in_register() ? " (in registers)" : "");
    }
    return out;
  }
  std::string out = describe_block("vmem", v.dst()) + " <-";
  if (v.has_a()) out += " " + describe_block("vmem", v.a());
  if (v.has_b()) out += " " + describe_block("vmem", v.b());
  if (v.has_c()) out += " " + describe_block("vmem", v.c());
  const VectorOpClass cls = classify(v.op());
  if (cls == VectorOpClass::kFill || (cls == VectorOpClass::kBinary && !v.has_b())) {
    out += fmt::format(" scalar {}", v.scalar());
  }
  if (cls == VectorOpClass::kReduce) out += fmt::format(" axis {}", v.axis());
  return out;
}

std::string operands(const Instruction& in) {
  switch (in.op_case()) {
    case Instruction::kDma: {
      const bool to_vmem = in.dma().direction() == isa::Dma::HBM_TO_VMEM;
      return fmt::format(
          "{} -> {} engine {}{}{}", describe_block(to_vmem ? "hbm" : "vmem", in.dma().src()),
          describe_block(to_vmem ? "vmem" : "hbm", in.dma().dst()), in.dma().engine(),
          in.dma().packed_bf16() ? " packed_bf16" : "",
          in.dma().has_index() ? " rows by index " + describe_block("vmem", in.dma().index()) : "");
    }
    case Instruction::kLoadWeights:
      return fmt::format("mxu{} slot{} {}", in.load_weights().mxu(), in.load_weights().slot(),
                         describe_block("vmem", in.load_weights().weights()));
    case Instruction::kMatmul: {
      const auto& m = in.matmul();
      const std::string groups =
          matmul_groups(m) > 1 ? fmt::format(" in {} groups (lhs +{}, out +{} bytes)", m.groups(),
                                             m.lhs_group_stride_bytes(), m.out_group_stride_bytes())
                               : "";
      return fmt::format("mxu{} slot{} {} -> {}{}{} precision {}", m.mxu(), m.slot(),
                         describe_block("vmem", m.lhs()), describe_block("vmem", m.out()), groups,
                         m.accumulate() ? " (accumulate)" : "", precision_name(m.precision()));
    }
    case Instruction::kVector:
      return vector_operands(in.vector());
    case Instruction::kInfeed:
      return describe_block("vmem", in.infeed().dst());
    case Instruction::kOutfeed:
      return describe_block("vmem", in.outfeed().src());
    case Instruction::kCollective: {
      const auto& c = in.collective();
      std::string out;
      if (c.parts().empty()) {
        out = fmt::format("{} f32 hbm[{:#x}] -> hbm[{:#x}] {}", c.elements(), c.src(), c.dst(),
                          collective_algorithm_name(c.algorithm()));
      } else {
        out = fmt::format("{} f32 in {} parts {}:", c.elements(), c.parts_size(),
                          collective_algorithm_name(c.algorithm()));
        for (const isa::CollectivePart& p : c.parts())
          out += fmt::format(" {} hbm[{:#x}] -> hbm[{:#x}];", p.elements(), p.src(), p.dst());
        out.pop_back();
      }
      if (c.kind() == isa::Collective::PERMUTE) out += fmt::format(" to core {}", c.peer());
      if (c.group_size() > 0) {
        out += " group";
        for (uint32_t g : c.group()) out += fmt::format(" {}", g);
      }
      return out;
    }
    case Instruction::kLoop:
      return fmt::format("x{} over the next {} instructions", in.loop().count(),
                         in.loop().body_length());
    default:
      return "";
  }
}

void dump_range(const isa::CoreProgram& core, int begin, int end, int depth, std::string* out) {
  for (int i = begin; i < end; ++i) {
    const Instruction& in = core.instructions(i);
    fmt::format_to(std::back_inserter(*out), "  {:6}  {}{:<17} {}", i, std::string(2 * depth, ' '),
                   op_name(in), operands(in));
    for (const auto& w : in.wait())
      fmt::format_to(std::back_inserter(*out), "  wait f{}>={}", w.flag(), w.value());
    for (uint32_t f : in.signal()) fmt::format_to(std::back_inserter(*out), "  signal f{}", f);
    if (!in.note().empty()) fmt::format_to(std::back_inserter(*out), "  # {}", in.note());
    if (in.origin() > 0 && static_cast<int>(in.origin()) <= core.origins_size()) {
      const isa::Origin& o = core.origins(static_cast<int>(in.origin()) - 1);
      fmt::format_to(std::back_inserter(*out), "  @{} {}", o.op(), o.label());
    }
    out->push_back('\n');
    if (in.op_case() == Instruction::kLoop) {
      const int body_end = std::min<int>(end, i + 1 + static_cast<int>(in.loop().body_length()));
      dump_range(core, i + 1, body_end, depth + 1, out);
      i = body_end - 1;
    }
  }
}

}  // namespace

std::string describe_block(const char* memory, const isa::Block& b) {
  std::string out = fmt::format("{}[{:#x}: {}x{} {}", memory, b.address(), b.rows(), b.cols(),
                                dtype_name(b.dtype()));
  if (!is_dense(b)) out += fmt::format(" stride {}", row_stride(b));
  return out + "]";
}

std::string dump_program(const isa::Program& program) {
  std::string out =
      fmt::format("program {}\n", program.name().empty() ? "(unnamed)" : program.name());
  for (const auto& core : program.cores()) {
    if (core.has_instructions_from()) {  // printed once, where they are held
      fmt::format_to(std::back_inserter(out), "core {} (the instructions of core {})\n",
                     core.core(), core.instructions_from());
      continue;
    }
    fmt::format_to(std::back_inserter(out), "core {} ({} instructions)\n", core.core(),
                   core.instructions_size());
    dump_range(core, 0, core.instructions_size(), 0, &out);
  }
  return out;
}

}  // namespace tpusim::sim
