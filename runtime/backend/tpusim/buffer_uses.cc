// Declared buffer uses and their check (buffer_uses.h).
#include "runtime/backend/tpusim/buffer_uses.h"

#include <algorithm>

#include "common/strings.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

std::vector<int> BufferUses::needs() const {
  std::vector<int> out = reads;
  if (aliases >= 0) out.push_back(aliases);
  return out;
}

BufferUses reads_inputs_writes_self(const Graph& graph, int id) {
  return {graph.node(id).inputs, {id}};
}

namespace {

// One HBM access of an instruction.
struct Access {
  HbmRange range;
  bool write = false;
};

HbmRange f32_words(uint64_t address, uint64_t elements) {
  return {address, address + elements * 4};
}

// The HBM accesses of one instruction, appended to `out`. False for a collective whose extent
// the check does not know (only all-reduces and permutes move `elements` on both sides).
bool hbm_accesses(const isa::Instruction& in, std::vector<Access>* out) {
  if (in.op_case() == isa::Instruction::kDma) {
    const isa::Dma& dma = in.dma();
    const bool write = dma.direction() != isa::Dma::HBM_TO_VMEM;
    const isa::Block& hbm = write ? dma.dst() : dma.src();
    out->push_back({{hbm.address(), sim::end_address(hbm)}, write});
    return true;
  }
  if (in.op_case() != isa::Instruction::kCollective) return true;
  const isa::Collective& c = in.collective();
  if (c.kind() != isa::Collective::ALL_REDUCE && c.kind() != isa::Collective::PERMUTE) return false;
  for (const isa::CollectivePart& p : c.parts()) {
    out->push_back({f32_words(p.src(), p.elements()), false});
    out->push_back({f32_words(p.dst(), p.elements()), true});
  }
  if (c.parts_size() == 0) {
    out->push_back({f32_words(c.src(), c.elements()), false});
    out->push_back({f32_words(c.dst(), c.elements()), true});
  }
  return true;
}

bool inside_one(const HbmRange& touched, const std::vector<HbmRange>& ranges) {
  return std::any_of(ranges.begin(), ranges.end(), [&](const HbmRange& r) {
    return touched.begin >= r.begin && touched.end <= r.end;
  });
}

}  // namespace

absl::Status check_fragment_hbm(const isa::CoreProgram& core, int begin, int end,
                                const FragmentHbm& allowed, int node, std::string_view op) {
  std::vector<Access> accesses;
  for (int i = begin; i < end; ++i) {
    accesses.clear();
    if (!hbm_accesses(core.instructions(i), &accesses)) {
      return absl::InternalError(
          str_cat("tpusim backend: node %", node, " (", op, "): instruction ", i,
                  " is a collective whose HBM the buffer check does not know"));
    }
    for (const Access& a : accesses) {
      if (inside_one(a.range, a.write ? allowed.writable : allowed.readable)) continue;
      return absl::InternalError(
          fmt::format("tpusim backend: node %{} ({}): instruction {} {} HBM [{:#x}, {:#x}), "
                      "outside the buffers its lowering declared (buffer_uses.h)",
                      node, op, i, a.write ? "writes" : "reads", a.range.begin, a.range.end));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
