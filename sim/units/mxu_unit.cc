#include "sim/units/mxu_unit.h"

#include <cmath>

#include "sim/isa/ops.h"
#include "sim/numerics/bf16.h"

namespace tpusim::sim {

namespace {

using StridedMap = Eigen::Map<MatrixF, Eigen::Unaligned, Eigen::OuterStride<>>;

// bf16 terms of each operand each pass multiplies, smallest products first so the f32 sum
// loses as little as possible (as XLA's bf16_3x / bf16_6x algorithms do).
struct Pass {
  int lhs_term;
  int weight_term;
};
constexpr Pass kDefault[] = {{0, 0}};
constexpr Pass kHigh[] = {{1, 0}, {0, 1}, {0, 0}};
constexpr Pass kHighest[] = {{2, 0}, {1, 1}, {0, 2}, {1, 0}, {0, 1}, {0, 0}};

}  // namespace

MxuUnit::MxuUnit(const sc_core::sc_module_name& name, CoreContext& ctx, StatGroup& stats,
                 MxuWiring wiring, std::unique_ptr<MxuTimingPolicy> policy)
    : Unit(name, ctx, stats, "matrix unit (systolic array)", /*core_work=*/true),
      vmem_(wiring.vmem),
      numerics_(wiring.numerics),
      policy_(std::move(policy)) {
  stats_.add("macs", "MACs", "useful multiply-accumulates (M x K x N of each matmul)",
             [this] { return static_cast<double>(macs_); });
  stats_.add("stream_cycles", "cycles",
             "cycles rows were streaming into the array (passes included)",
             [this] { return static_cast<double>(stream_cycles_); });
  stats_.add("weight_loads", "tiles", "weight tiles loaded",
             [this] { return static_cast<double>(weight_loads_); });
  stats_.on_reset([this] {
    macs_ = 0;
    stream_cycles_ = 0;
    weight_loads_ = 0;
  });
}

void MxuUnit::execute(const IssuedInstruction& item) {
  if (item.instr->has_load_weights()) {
    load_weights(item);
  } else {
    matmul(item);
  }
}

void MxuUnit::load_weights(const IssuedInstruction& item) {
  const isa::LoadWeights& lw = item.instr->load_weights();
  vmem_.touch(end_address(lw.weights()));
  const WeightLoadTiming t = policy_->load_weights(ctx_.now_cycle(), lw.slot());
  const double vmem_end =
      vmem_.ports()
          .reserve(static_cast<double>(t.start), static_cast<double>(payload_bytes(lw.weights())))
          .end;
  const uint64_t ready = std::max(t.ready, ceil_cycle(vmem_end));
  wait_until(t.start);
  if (!ctx_.timing_only()) {
    // Keep the f32 values; matmuls round them to as many bf16 terms as their precision needs.
    const isa::Block* weights = &lw.weights();
    const uint32_t slot = lw.slot();
    const uint8_t* vmem = vmem_.memory().base_covering(weights->address(), end_address(*weights));
    numerics_.post(false, host_range(vmem, *weights), HostRange{}, [this, vmem, weights, slot] {
      load_block(vmem, *weights, &weight_source_[slot]);
      weight_terms_[slot] = 0;
    });
  }
  ++weight_loads_;
  busy_cycles_ += ready - t.start;
  trace("mxu.load_weights", t.start, ready);
  profile(t.start, ready);
  ctx_.sync().complete_at(ready, item.instr->signal());
}

void MxuUnit::matmul(const IssuedInstruction& item) {
  const isa::Matmul& mm = item.instr->matmul();
  const uint32_t groups = matmul_groups(mm);
  // Every group's rows stream through the array, one group after the other.
  const uint64_t m = uint64_t{mm.lhs().rows()} * groups;
  vmem_.touch(std::max(groups_lhs_end(mm), groups_out_end(mm)));
  const uint64_t stream = static_cast<uint64_t>(mxu_passes(mm.precision())) * m;
  const MatmulTiming t = policy_->matmul(ctx_.now_cycle(), mm.slot(), stream);
  const uint64_t out_bytes = payload_bytes(mm.out());
  const double vmem_bytes = static_cast<double>(
      (payload_bytes(mm.lhs()) + out_bytes + (mm.accumulate() ? out_bytes : 0)) * groups);
  const double vmem_end = vmem_.ports().reserve(static_cast<double>(t.start), vmem_bytes).end;
  uint64_t done = t.done;
  uint64_t stream_end = t.stream_end;
  if (vmem_end > static_cast<double>(t.stream_end)) {
    stream_end = ceil_cycle(vmem_end);
    done = policy_->stall_last_stream(stream_end);
  }
  wait_until(t.start);
  if (!ctx_.timing_only()) post_compute(mm);
  macs_ += m * mm.lhs().cols() * mm.out().cols();
  stream_cycles_ += stream_end - t.start;
  busy_cycles_ += stream_end - t.start;
  trace("mxu.matmul", t.start, stream_end);
  const double flops = 2.0 * static_cast<double>(m * mm.lhs().cols() * mm.out().cols());
  profile(t.start, done, {flops, 0, /*on_mxu=*/true});
  ctx_.sync().complete_at(done, item.instr->signal());
}

void MxuUnit::post_compute(const isa::Matmul& mm) {
  const int p = mxu_passes(mm.precision());
  const int terms = p == 1 ? 1 : (p == 3 ? 2 : 3);
  const isa::Block& lhs = mm.lhs();
  const isa::Block& out = mm.out();
  const uint32_t groups = matmul_groups(mm);
  const uint64_t lhs_end = groups_lhs_end(mm), out_end = groups_out_end(mm);
  LhsCache& cache = vmem_.lhs_cache();
  // A grouped matmul splits each group's rows as it goes and leaves the cache empty.
  const bool refill =
      groups > 1 || !(cache.valid && cache.terms >= terms && same_block(cache.block, lhs));
  if (groups > 1) {
    cache.valid = false;
  } else if (refill) {
    cache.valid = true;
    cache.block = lhs;
    cache.terms = terms;
    cache.lo = lhs.address();
    cache.hi = lhs_end;
  }
  // The output overlapping the block invalidates it for the next matmul, as any write does.
  vmem_.note_write(out.address(), out_end);
  uint8_t* vmem = vmem_.memory().base_covering(std::min(lhs.address(), out.address()),
                                               std::max(lhs_end, out_end));
  numerics_.post(false, HostRange{vmem + lhs.address(), vmem + lhs_end},
                 HostRange{vmem + out.address(), vmem + out_end},
                 [this, vmem, &mm, refill, terms, groups] {
                   if (groups == 1) {
                     compute(vmem, mm, mm.lhs(), mm.out(), refill, terms);
                     return;
                   }
                   for (uint32_t g = 0; g < groups; ++g)
                     compute(vmem, mm, group_lhs(mm, g), group_out(mm, g), refill, terms);
                 });
}

void MxuUnit::split_lhs(const uint8_t* vmem, const isa::Block& lhs, int terms) {
  std::array<MatrixF, 3>& parts = vmem_.lhs_cache().parts;
  if (lhs.dtype() == isa::BF16 && terms == 1) {
    load_block(vmem, lhs, &parts[0]);  // bf16 values are their own single term
    return;
  }
  const MatrixF* source = &lhs_;
  if (lhs.dtype() == isa::BF16) {
    load_block(vmem, lhs, &lhs_);
  }
  for (int i = 0; i < terms; ++i) parts[i].resize(lhs.rows(), lhs.cols());
  // Split row by row straight from VMEM (f32) or from the widened bf16 copy.
  for (uint32_t r = 0; r < lhs.rows(); ++r) {
    const float* row =
        lhs.dtype() == isa::F32
            ? reinterpret_cast<const float*>(vmem + lhs.address() + r * row_stride(lhs))
            : source->data() + static_cast<size_t>(r) * lhs.cols();
    float* out[3] = {parts[0].row(r).data(), terms > 1 ? parts[1].row(r).data() : nullptr,
                     terms > 2 ? parts[2].row(r).data() : nullptr};
    split_bf16(row, lhs.cols(), terms, out);
  }
}

const std::array<MatrixF, 3>& MxuUnit::weight_terms(uint32_t slot, int terms) {
  if (weight_terms_[slot] < terms) {
    const MatrixF& w = weight_source_[slot];
    auto& parts = weights_[slot];
    for (int i = 0; i < terms; ++i) parts[i].resize(w.rows(), w.cols());
    float* out[3] = {parts[0].data(), parts[1].data(), parts[2].data()};
    split_bf16(w.data(), static_cast<size_t>(w.size()), terms, out);
    weight_terms_[slot] = terms;
  }
  return weights_[slot];
}

void MxuUnit::compute(uint8_t* vmem, const isa::Matmul& mm, const isa::Block& lhs,
                      const isa::Block& out, bool refill_lhs, int terms) {
  const int p = mxu_passes(mm.precision());
  if (refill_lhs) split_lhs(vmem, lhs, terms);
  const auto& a = vmem_.lhs_cache().parts;
  const auto& w = weight_terms(mm.slot(), terms);
  StridedMap result(
      reinterpret_cast<float*>(vmem + out.address()), out.rows(), out.cols(),
      Eigen::OuterStride<>(static_cast<Eigen::Index>(row_stride(out) / sizeof(float))));
  if (p == 1) {
    // One pass straight into VMEM: the common case, no temporary.
    if (mm.accumulate()) {
      result.noalias() += a[0] * w[0];
    } else {
      result.noalias() = a[0] * w[0];
    }
  } else {
    const Pass* begin = p == 3 ? kHigh : kHighest;
    MatrixF acc = MatrixF::Zero(out.rows(), out.cols());
    for (const Pass* pass = begin; pass != begin + p; ++pass) {
      acc.noalias() += a[pass->lhs_term] * w[pass->weight_term];
    }
    if (mm.accumulate()) {
      result += acc;
    } else {
      result = acc;
    }
  }
}

}  // namespace tpusim::sim
