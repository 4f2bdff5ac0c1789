#include "sim/isa/builder.h"

#include <utility>

namespace tpusim::sim {

isa::Block block(uint64_t address, uint32_t rows, uint32_t cols, isa::DType dtype,
                 uint64_t row_stride_bytes) {
  isa::Block b;
  b.set_address(address);
  b.set_rows(rows);
  b.set_cols(cols);
  b.set_dtype(dtype);
  b.set_row_stride_bytes(row_stride_bytes);
  return b;
}

InstrRef& InstrRef::wait(uint32_t flag, uint64_t value) {
  auto* w = instruction().add_wait();
  w->set_flag(flag);
  w->set_value(value);
  return *this;
}

InstrRef& InstrRef::signal(uint32_t flag) {
  instruction().add_signal(flag);
  return *this;
}

InstrRef& InstrRef::note(std::string text) {
  instruction().set_note(std::move(text));
  return *this;
}

CoreBuilder::CoreBuilder(isa::Program* program, uint32_t core) : core_(program->add_cores()) {
  core_->set_core(core);
}

uint32_t CoreBuilder::new_flag() { return next_flag_++; }

void CoreBuilder::set_origin(const std::string& label, const std::string& op) {
  pending_label_ = label;
  pending_op_ = op;
  origin_ = 0;
}

InstrRef CoreBuilder::append() {
  if (origin_ == 0 && !pending_label_.empty()) {
    const int last = core_->origins_size() - 1;
    if (last < 0 || core_->origins(last).label() != pending_label_ ||
        core_->origins(last).op() != pending_op_) {
      isa::Origin* origin = core_->add_origins();
      origin->set_label(pending_label_);
      origin->set_op(pending_op_);
    }
    origin_ = static_cast<uint32_t>(core_->origins_size());
  }
  core_->add_instructions()->set_origin(origin_);
  return InstrRef(core_, core_->instructions_size() - 1);
}

InstrRef CoreBuilder::dma_to_vmem(const isa::Block& hbm_src, const isa::Block& vmem_dst,
                                  uint32_t engine) {
  InstrRef r = append();
  auto* d = r.instruction().mutable_dma();
  d->set_direction(isa::Dma::HBM_TO_VMEM);
  *d->mutable_src() = hbm_src;
  *d->mutable_dst() = vmem_dst;
  d->set_engine(engine);
  return r;
}

InstrRef CoreBuilder::dma_to_hbm(const isa::Block& vmem_src, const isa::Block& hbm_dst,
                                 uint32_t engine) {
  InstrRef r = append();
  auto* d = r.instruction().mutable_dma();
  d->set_direction(isa::Dma::VMEM_TO_HBM);
  *d->mutable_src() = vmem_src;
  *d->mutable_dst() = hbm_dst;
  d->set_engine(engine);
  return r;
}

InstrRef CoreBuilder::dma_gather(const isa::Block& table, const isa::Block& vmem_dst,
                                 const isa::Block& index, uint32_t engine) {
  InstrRef r = dma_to_vmem(table, vmem_dst, engine);
  *r.instruction().mutable_dma()->mutable_index() = index;
  return r;
}

InstrRef CoreBuilder::dma_scatter(const isa::Block& vmem_src, const isa::Block& table,
                                  const isa::Block& index, uint32_t engine) {
  InstrRef r = dma_to_hbm(vmem_src, table, engine);
  *r.instruction().mutable_dma()->mutable_index() = index;
  return r;
}

InstrRef CoreBuilder::load_weights(uint32_t mxu, uint32_t slot, const isa::Block& weights) {
  InstrRef r = append();
  auto* lw = r.instruction().mutable_load_weights();
  lw->set_mxu(mxu);
  lw->set_slot(slot);
  *lw->mutable_weights() = weights;
  return r;
}

InstrRef CoreBuilder::matmul(uint32_t mxu, uint32_t slot, const isa::Block& lhs,
                             const isa::Block& out, bool accumulate, isa::Precision precision) {
  InstrRef r = append();
  auto* mm = r.instruction().mutable_matmul();
  mm->set_mxu(mxu);
  mm->set_slot(slot);
  *mm->mutable_lhs() = lhs;
  *mm->mutable_out() = out;
  mm->set_accumulate(accumulate);
  mm->set_precision(precision);
  return r;
}

InstrRef CoreBuilder::grouped_matmul(uint32_t mxu, uint32_t slot, const isa::Block& lhs,
                                     const isa::Block& out, uint32_t groups,
                                     uint64_t lhs_group_stride_bytes,
                                     uint64_t out_group_stride_bytes, bool accumulate,
                                     isa::Precision precision) {
  InstrRef r = matmul(mxu, slot, lhs, out, accumulate, precision);
  if (groups > 1) {
    auto* mm = r.instruction().mutable_matmul();
    mm->set_groups(groups);
    mm->set_lhs_group_stride_bytes(lhs_group_stride_bytes);
    mm->set_out_group_stride_bytes(out_group_stride_bytes);
  }
  return r;
}

namespace vector_ops {

namespace {
isa::Vector op_of(isa::Vector::Op op, const isa::Block& dst) {
  isa::Vector v;
  v.set_op(op);
  *v.mutable_dst() = dst;
  return v;
}
}  // namespace

isa::Vector binary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                   const isa::Block& b) {
  isa::Vector v = op_of(op, dst);
  *v.mutable_a() = a;
  *v.mutable_b() = b;
  return v;
}

isa::Vector binary_scalar(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                          float scalar) {
  isa::Vector v = op_of(op, dst);
  *v.mutable_a() = a;
  v.set_scalar(scalar);
  return v;
}

isa::Vector unary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a) {
  isa::Vector v = op_of(op, dst);
  *v.mutable_a() = a;
  return v;
}

isa::Vector select(const isa::Block& dst, const isa::Block& mask, const isa::Block& if_true,
                   const isa::Block& if_false) {
  isa::Vector v = binary(isa::Vector::SELECT, dst, mask, if_true);
  *v.mutable_c() = if_false;
  return v;
}

isa::Vector reduce(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a, uint32_t axis) {
  isa::Vector v = unary(op, dst, a);
  v.set_axis(axis);
  return v;
}

isa::Vector fill(const isa::Block& dst, float value) {
  isa::Vector v = op_of(isa::Vector::FILL, dst);
  v.set_scalar(value);
  return v;
}

isa::Vector rng_uniform(const isa::Block& dst, uint64_t seed, uint64_t index_base) {
  isa::Vector v = op_of(isa::Vector::RNG_UNIFORM, dst);
  v.set_seed(seed);
  v.set_index_base(index_base);
  return v;
}

}  // namespace vector_ops

VectorChain::VectorChain() { chain_.set_op(isa::Vector::CHAIN); }

void VectorChain::add(isa::Vector step, bool in_register) {
  step.set_in_register(in_register);
  *chain_.add_steps() = std::move(step);
}

InstrRef CoreBuilder::vector(const isa::Vector& v) {
  InstrRef r = append();
  *r.instruction().mutable_vector() = v;
  return r;
}

InstrRef CoreBuilder::binary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                             const isa::Block& b) {
  return vector(vector_ops::binary(op, dst, a, b));
}

InstrRef CoreBuilder::binary_scalar(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                                    float scalar) {
  return vector(vector_ops::binary_scalar(op, dst, a, scalar));
}

InstrRef CoreBuilder::unary(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a) {
  return vector(vector_ops::unary(op, dst, a));
}

InstrRef CoreBuilder::select(const isa::Block& dst, const isa::Block& mask,
                             const isa::Block& if_true, const isa::Block& if_false) {
  return vector(vector_ops::select(dst, mask, if_true, if_false));
}

InstrRef CoreBuilder::cast(const isa::Block& dst, const isa::Block& a) {
  return unary(isa::Vector::CAST, dst, a);
}

InstrRef CoreBuilder::reduce(isa::Vector::Op op, const isa::Block& dst, const isa::Block& a,
                             uint32_t axis) {
  return vector(vector_ops::reduce(op, dst, a, axis));
}

InstrRef CoreBuilder::transpose(const isa::Block& dst, const isa::Block& a) {
  return unary(isa::Vector::TRANSPOSE, dst, a);
}

InstrRef CoreBuilder::broadcast(const isa::Block& dst, const isa::Block& a) {
  return unary(isa::Vector::BROADCAST, dst, a);
}

InstrRef CoreBuilder::fill(const isa::Block& dst, float value) {
  return vector(vector_ops::fill(dst, value));
}

InstrRef CoreBuilder::infeed(const isa::Block& vmem_dst) {
  InstrRef r = append();
  *r.instruction().mutable_infeed()->mutable_dst() = vmem_dst;
  return r;
}

InstrRef CoreBuilder::outfeed(const isa::Block& vmem_src) {
  InstrRef r = append();
  *r.instruction().mutable_outfeed()->mutable_src() = vmem_src;
  return r;
}

InstrRef CoreBuilder::collective(isa::Collective::Kind kind, isa::Collective::Algorithm algorithm,
                                 uint64_t hbm_src, uint64_t hbm_dst, uint64_t elements) {
  InstrRef r = append();
  isa::Collective* c = r.instruction().mutable_collective();
  c->set_kind(kind);
  c->set_algorithm(algorithm);
  c->set_src(hbm_src);
  c->set_dst(hbm_dst);
  c->set_elements(elements);
  return r;
}

InstrRef CoreBuilder::combined_all_reduce(isa::Collective::Algorithm algorithm,
                                          const std::vector<isa::CollectivePart>& parts) {
  InstrRef r = append();
  isa::Collective* c = r.instruction().mutable_collective();
  c->set_kind(isa::Collective::ALL_REDUCE);
  c->set_algorithm(algorithm);
  uint64_t elements = 0;
  for (const isa::CollectivePart& p : parts) {
    *c->add_parts() = p;
    elements += p.elements();
  }
  c->set_elements(elements);
  return r;
}

InstrRef CoreBuilder::loop(uint32_t count, const std::function<void()>& body) {
  InstrRef r = append();
  const int first = size();
  body();
  auto* loop = core_->mutable_instructions(r.index())->mutable_loop();
  loop->set_count(count);
  loop->set_body_length(static_cast<uint32_t>(size() - first));
  return r;
}

InstrRef CoreBuilder::halt() {
  InstrRef r = append();
  r.instruction().mutable_halt();
  return r;
}

}  // namespace tpusim::sim
