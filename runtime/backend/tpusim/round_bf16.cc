// bf16 values out of fragments that sum in f32 (lowering.h: leaves_f32_sums,
// round_to_bf16_in_place).
#include "runtime/backend/tpusim/lowering.h"

namespace tpusim::runtime::tpusim_backend {

bool leaves_f32_sums(const Node& n) {
  if (n.dtype != DType::kBF16) return false;
  switch (n.op) {
    case Op::kMatMul:
    case Op::kReduceSum:
    case Op::kPatchesToImage:
      return true;
    default:
      return false;
  }
}

void round_to_bf16_in_place(Lowering& l, int id) {
  const Shape& s = l.node(id).shape;
  const uint64_t at = l.address(id);
  l.emit.rowwise(at, rows_of(s), cols_of(s), isa::F32,
                 {TileOperand{TileOperand::Kind::kFull, at, isa::F32}}, 1, 0, [](Tile& t) {
                   // The bf16 block takes the f32 scratch's place (half of it).
                   isa::Block half = t.scratch(0);
                   half.set_dtype(isa::BF16);
                   sim::CoreBuilder& b = t.e_builder();
                   t.chain(b.cast(half, t.in(0)));
                   t.chain(b.cast(t.out(), half));
                 });
}

}  // namespace tpusim::runtime::tpusim_backend
