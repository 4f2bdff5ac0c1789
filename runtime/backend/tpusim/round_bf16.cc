// bf16 values in the f32 buffers of the tpusim compiler: rounding what fragments sum in f32, and
// charging their transfers as a TPU's packed bf16 (lowering.h: leaves_f32_sums,
// round_to_bf16_in_place, mark_packed_bf16).
#include "runtime/backend/tpusim/lowering.h"
#include "sim/memory/block.h"

namespace tpusim::runtime::tpusim_backend {

bool leaves_f32_sums(const Node& n) {
  if (n.dtype != DType::kBF16) return false;
  switch (n.op) {
    case Op::kMatMul:
    case Op::kReduceSum:
    case Op::kPatchesToImage:
    case Op::kScatterAdd:
      return true;
    default:
      return false;
  }
}

void round_to_bf16_in_place(Lowering& l, int id) {
  const Shape& s = l.node(id).shape;
  const uint64_t at = l.address(id);
  l.emit.rowwise(at, rows_of(s), cols_of(s), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, at, isa::F32}}, 0, 0, [](Tile& t) {
                   t.chain(t.e_builder().unary(isa::Vector::ROUND_BF16, t.out(), t.in(0)));
                 });
}

void round_bf16_in_tile(Tile& t, const isa::Block& values, bool after_products) {
  sim::InstrRef round = t.e_builder().unary(isa::Vector::ROUND_BF16, values, values);
  t.chain(after_products ? t.join(round) : round);
}

void mark_packed_bf16(sim::CoreBuilder& b, int begin, int end,
                      const std::vector<HbmRange>& bf16_buffers) {
  for (int i = begin; i < end; ++i) {
    isa::Instruction* in = b.builder_instruction(i);
    if (in->op_case() != isa::Instruction::kDma) continue;
    isa::Dma* dma = in->mutable_dma();
    const isa::Block& hbm = dma->direction() == isa::Dma::HBM_TO_VMEM ? dma->src() : dma->dst();
    if (hbm.dtype() != isa::F32) continue;
    const HbmRange touched{hbm.address(), sim::end_address(hbm)};
    for (const HbmRange& r : bf16_buffers) {
      if (touched.begin >= r.begin && touched.end <= r.end) {
        dma->set_packed_bf16(true);
        break;
      }
    }
  }
}

}  // namespace tpusim::runtime::tpusim_backend
