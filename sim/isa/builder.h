#pragma once
// Builds ISA programs in code. A CoreBuilder appends to one core's stream; each append returns
// an InstrRef to attach waits, signals and a note:
//
//   isa::Program program;
//   CoreBuilder core(&program, 0);
//   const uint32_t loaded = core.new_flag();
//   core.dma_to_vmem(hbm_block, vmem_block).signal(loaded);
//   core.load_weights(0, 0, w).wait(loaded, 1);
//
// Flags are numbered per core; the builder hands them out in order.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

// A dense (or strided, when row_stride_bytes > 0) block.
isa::Block block(uint64_t address, uint32_t rows, uint32_t cols, isa::DType dtype,
                 uint64_t row_stride_bytes = 0);

class InstrRef {
 public:
  InstrRef(isa::CoreProgram* core, int index) : core_(core), index_(index) {}
  InstrRef& wait(uint32_t flag, uint64_t value);
  InstrRef& signal(uint32_t flag);
  InstrRef& note(std::string text);
  isa::Instruction& instruction() { return *core_->mutable_instructions(index_); }
  int index() const { return index_; }

 private:
  isa::CoreProgram* core_;
  int index_;
};

// Vector ops as values: appended as one instruction (CoreBuilder::vector) or as a step of a
// chain (VectorChain).
namespace vector_ops {
// dst = a op b, with b of a's shape, a row or a column; dst = a op scalar.
isa::Vector binary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                   const isa::Block& b);
isa::Vector binary_scalar(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                          float scalar);
isa::Vector unary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a);
isa::Vector select(const isa::Block& dst, const isa::Block& mask, const isa::Block& if_true,
                   const isa::Block& if_false);
isa::Vector reduce(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a, uint32_t axis);
isa::Vector fill(const isa::Block& dst, float value);
// dst = uniform [0, 1) draws of `seed`, element i of dst (row-major) taking counter index_base + i.
isa::Vector rng_uniform(const isa::Block& dst, uint64_t seed, uint64_t index_base);
}  // namespace vector_ops

// The steps of a CHAIN (isa.proto), one vector instruction once CoreBuilder::vector appends it.
class VectorChain {
 public:
  VectorChain();
  // `in_register`: the step's result stays in vector registers (no instruction after the chain
  // may read its block).
  void add(isa::Vector step, bool in_register = false);
  bool empty() const { return chain_.steps().empty(); }
  const isa::Vector& instruction() const { return chain_; }

 private:
  isa::Vector chain_;
};

class CoreBuilder {
 public:
  // Appends a stream for `core` to `program`.
  CoreBuilder(isa::Program* program, uint32_t core);

  uint32_t new_flag();
  // Instructions appended from now on belong to the graph op `label` of kind `op` (an empty
  // label: to none). The op enters the core's origin table with its first instruction, unless
  // it repeats the table's last entry; ops that emit nothing stay out of it.
  void set_origin(const std::string& label, const std::string& op);
  int size() const { return core_->instructions_size(); }
  // The last instruction appended, to set fields the helpers do not take.
  isa::Instruction* instruction_back() { return core_->mutable_instructions(size() - 1); }
  isa::Instruction* builder_instruction(int index) { return core_->mutable_instructions(index); }

  InstrRef dma_to_vmem(const isa::Block& hbm_src, const isa::Block& vmem_dst, uint32_t engine = 0);
  InstrRef dma_to_hbm(const isa::Block& vmem_src, const isa::Block& hbm_dst, uint32_t engine = 0);
  // Indexed DMAs (isa.proto, Dma.index): rows of the HBM `table` named by the s32 `index` block
  // in VMEM gathered into `vmem_dst`, or `vmem_src`'s rows scattered to them.
  InstrRef dma_gather(const isa::Block& table, const isa::Block& vmem_dst, const isa::Block& index,
                      uint32_t engine = 0);
  InstrRef dma_scatter(const isa::Block& vmem_src, const isa::Block& table, const isa::Block& index,
                       uint32_t engine = 0);
  InstrRef load_weights(uint32_t mxu, uint32_t slot, const isa::Block& weights);
  InstrRef matmul(uint32_t mxu, uint32_t slot, const isa::Block& lhs, const isa::Block& out,
                  bool accumulate, isa::Precision precision = isa::DEFAULT);
  // A grouped matmul (isa.proto, Matmul.groups): `groups` pairs of lhs and out blocks, each a
  // stride further on than the last.
  InstrRef grouped_matmul(uint32_t mxu, uint32_t slot, const isa::Block& lhs, const isa::Block& out,
                          uint32_t groups, uint64_t lhs_group_stride_bytes,
                          uint64_t out_group_stride_bytes, bool accumulate,
                          isa::Precision precision = isa::DEFAULT);
  // One vector op (vector_ops) or chain (VectorChain::instruction).
  InstrRef vector(const isa::Vector& v);
  // dst = a op b, with b of a's shape, a row or a column.
  InstrRef binary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                  const isa::Block& b);
  // dst = a op scalar.
  InstrRef binary_scalar(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                         float scalar);
  InstrRef unary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a);
  InstrRef select(const isa::Block& dst, const isa::Block& mask, const isa::Block& if_true,
                  const isa::Block& if_false);
  InstrRef cast(const isa::Block& dst, const isa::Block& a);
  InstrRef reduce(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a, uint32_t axis);
  InstrRef transpose(const isa::Block& dst, const isa::Block& a);
  InstrRef broadcast(const isa::Block& dst, const isa::Block& a);
  InstrRef fill(const isa::Block& dst, float value);
  InstrRef infeed(const isa::Block& vmem_dst);
  InstrRef outfeed(const isa::Block& vmem_src);
  // A collective over f32 buffers in HBM; set group, chunk_bytes or peer on the result.
  InstrRef collective(isa::Collective::Kind kind, isa::Collective::Algorithm algorithm,
                      uint64_t hbm_src, uint64_t hbm_dst, uint64_t elements);
  // A combined all-reduce over `parts` (Collective.parts), each summed into its own dst; set
  // group or chunk_bytes on the result.
  InstrRef combined_all_reduce(isa::Collective::Algorithm algorithm,
                               const std::vector<isa::CollectivePart>& parts);
  // Appends a loop whose body is what `body` appends.
  InstrRef loop(uint32_t count, const std::function<void()>& body);
  InstrRef halt();

 private:
  InstrRef append();
  isa::CoreProgram* core_;
  uint32_t next_flag_ = 0;
  uint32_t origin_ = 0;  // stamped on every appended instruction (0 until the pending op's first)
  std::string pending_label_, pending_op_;
};

}  // namespace tpusim::sim
