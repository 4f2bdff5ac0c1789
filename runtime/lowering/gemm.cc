#include "runtime/lowering/gemm.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "common/align.h"
#include "common/strings.h"
#include "sim/isa/builder.h"
#include "sim/memory/block.h"

namespace tpusim::runtime {

using sim::block;
using sim::CoreBuilder;

namespace {

constexpr uint64_t kAlign = kPageBytes;

}  // namespace

uint64_t pack_gemm_layout(GemmShape shape, isa::DType input_dtype, uint64_t base,
                          GemmLayout* layout) {
  const uint32_t in_bytes = sim::dtype_bytes(input_dtype);
  layout->input_dtype = input_dtype;
  layout->a_address = base;
  layout->b_address = align_up(layout->a_address + uint64_t{shape.m} * shape.k * in_bytes, kAlign);
  layout->c_address = align_up(layout->b_address + uint64_t{shape.k} * shape.n * in_bytes, kAlign);
  return align_up(layout->c_address + uint64_t{shape.m} * shape.n * 4, kAlign) - base;
}

std::array<uint32_t, 8> allocate_gemm_flags(FlagPool& pool) {
  std::array<uint32_t, 8> ids{};
  for (uint32_t& id : ids) id = pool.allocate();
  return ids;
}

uint32_t emit_mxu_product(const config::CoreSpec& core, CoreBuilder& b, const isa::Block& lhs,
                          const isa::Block& weights, const isa::Block& out, bool accumulate,
                          isa::Precision precision, std::vector<uint32_t>& next_slot,
                          const std::function<void(sim::InstrRef&)>& on_load,
                          const std::function<void(sim::InstrRef&, bool overwrites)>& on_matmul) {
  const uint32_t R = core.mxu_rows, C = core.mxu_cols;
  const uint32_t rows = lhs.rows(), depth = lhs.cols(), cols = weights.cols();
  const uint64_t lhs_stride = sim::row_stride(lhs), w_stride = sim::row_stride(weights),
                 out_stride = sim::row_stride(out);
  const uint32_t lhs_bytes = sim::dtype_bytes(lhs.dtype()),
                 w_bytes = sim::dtype_bytes(weights.dtype());
  const MxuSplit split = mxu_split(core, rows, cols);  // gemm_tiling.h
  const uint32_t col_tiles = split.col_tiles, row_parts = split.row_parts;
  uint32_t matmuls = 0;
  for (uint32_t kk = 0; kk * R < depth; ++kk) {
    const uint32_t kw = std::min(R, depth - kk * R);
    for (uint32_t part = 0; part < row_parts; ++part) {
      const uint32_t r0 = part * rows / row_parts, r1 = (part + 1) * rows / row_parts;
      for (uint32_t nn = 0; nn < col_tiles; ++nn, ++matmuls) {
        const uint32_t nw = std::min(C, cols - nn * C);
        const uint32_t mxu = (part * col_tiles + nn) % core.mxu_count;
        const uint32_t slot = next_slot[mxu];
        next_slot[mxu] ^= 1;
        sim::InstrRef load = b.load_weights(
            mxu, slot,
            block(weights.address() + uint64_t{kk} * R * w_stride + uint64_t{nn} * C * w_bytes, kw,
                  nw, weights.dtype(), w_stride));
        on_load(load);
        const bool overwrites = !accumulate && kk == 0;
        sim::InstrRef mm =
            b.matmul(mxu, slot,
                     block(lhs.address() + uint64_t{r0} * lhs_stride + uint64_t{kk} * R * lhs_bytes,
                           r1 - r0, kw, lhs.dtype(), lhs_stride),
                     block(out.address() + uint64_t{r0} * out_stride + uint64_t{nn} * C * 4,
                           r1 - r0, nw, isa::F32, out_stride),
                     !overwrites, precision);
        on_matmul(mm, overwrites);
      }
    }
  }
  return matmuls;
}

namespace {

// One GEMM fragment as emit_gemm (gemm.h) describes it: the C tiles in row-major order, each the
// sum over its K slices, the slices double-buffered and the accumulators too.
class GemmEmission {
 public:
  GemmEmission(const config::CoreSpec& core, GemmShape shape, isa::Precision precision,
               const GemmLayout& layout, GemmContext& ctx, const GemmTiling& t)
      : core_(core),
        shape_(shape),
        precision_(precision),
        layout_(layout),
        ctx_(ctx),
        t_(t),
        in_(layout.input_dtype),
        in_bytes_(sim::dtype_bytes(layout.input_dtype)),
        b_(*ctx.builder),
        pool_(*ctx.flags),
        next_slot_(core.mxu_count, 0) {
    // VMEM: two A slices, two B slices, two accumulators; then each transposed operand's two
    // staging buffers.
    uint64_t at = ctx.vmem_base;
    const uint64_t a_bytes = align_up(uint64_t{t.tm} * t.tk * in_bytes_, kAlign),
                   b_bytes = align_up(uint64_t{t.tk} * t.tn * in_bytes_, kAlign);
    for (int i = 0; i < 2; ++i) a_buf_[i] = std::exchange(at, at + a_bytes);
    for (int i = 0; i < 2; ++i) b_buf_[i] = std::exchange(at, at + b_bytes);
    for (int i = 0; i < 2; ++i)
      c_buf_[i] = std::exchange(at, at + align_up(uint64_t{t.tm} * t.tn * 4, kAlign));
    for (int i = 0; i < 2 && layout.transposes.a; ++i)
      a_stage_[i] = std::exchange(at, at + a_bytes);
    for (int i = 0; i < 2 && layout.transposes.b; ++i)
      b_stage_[i] = std::exchange(at, at + b_bytes);
    plan_.tiling = t;
    plan_.vmem_bytes = at - ctx.vmem_base;
    // Counts before this fragment: waits name counts above them.
    for (int i = 0; i < 2; ++i) {
      consumed_n_[i] = pool_.count(consumed(i));
      freed_n_[i] = pool_.count(freed(i));
    }
    consumed_start_ = consumed_n_;
    freed_start_ = freed_n_;
  }

  GemmPlan emit() {
    const uint64_t mt = pieces_covering(shape_.m, t_.tm), nt = pieces_covering(shape_.n, t_.tn),
                   kt = pieces_covering(shape_.k, t_.tk);
    uint64_t step = 0, tile = 0;
    for (uint32_t mi = 0; mi < mt; ++mi) {
      const uint32_t rows = std::min(t_.tm, shape_.m - mi * t_.tm);
      for (uint32_t ni = 0; ni < nt; ++ni, ++tile) {
        const uint32_t cols = std::min(t_.tn, shape_.n - ni * t_.tn);
        const int cb = static_cast<int>(tile % 2);
        for (uint32_t ki = 0; ki < kt; ++ki, ++step)
          multiply_slice(mi, ni, ki, rows, cols, cb, step);
        store_tile(mi, ni, rows, cols, cb);
      }
    }
    return plan_;
  }

 private:
  uint32_t loaded(int i) const { return ctx_.flag_ids[static_cast<size_t>(i)]; }
  uint32_t consumed(int i) const { return ctx_.flag_ids[static_cast<size_t>(2 + i)]; }
  uint32_t written(int i) const { return ctx_.flag_ids[static_cast<size_t>(4 + i)]; }
  uint32_t freed(int i) const { return ctx_.flag_ids[static_cast<size_t>(6 + i)]; }

  // Slices ki of A's row tile mi and B's column tile ni into buffer step % 2 (once the matmuls
  // that last read it are done), multiplied into accumulator cb.
  void multiply_slice(uint32_t mi, uint32_t ni, uint32_t ki, uint32_t rows, uint32_t cols, int cb,
                      uint64_t step) {
    const uint32_t engines = core_.dma_engines;
    const uint32_t depth = std::min(t_.tk, shape_.k - ki * t_.tk);
    const int sb = static_cast<int>(step % 2);
    const uint64_t m0 = uint64_t{mi} * t_.tm, k0 = uint64_t{ki} * t_.tk, n0 = uint64_t{ni} * t_.tn;
    const GemmTransposes& tr = layout_.transposes;
    // Each operand's slice as it lies in HBM (rows x cols of its stored matrix) and where it lands.
    const uint64_t a_row = stored_row(0, tr.a ? shape_.m : shape_.k),
                   b_row = stored_row(1, tr.b ? shape_.k : shape_.n);
    const isa::Block a_src = tr.a ? block(layout_.a_address + (k0 * a_row + m0) * in_bytes_, depth,
                                          rows, in_, a_row * in_bytes_)
                                  : block(layout_.a_address + (m0 * a_row + k0) * in_bytes_, rows,
                                          depth, in_, a_row * in_bytes_);
    const isa::Block b_src = tr.b ? block(layout_.b_address + (n0 * b_row + k0) * in_bytes_, cols,
                                          depth, in_, b_row * in_bytes_)
                                  : block(layout_.b_address + (k0 * b_row + n0) * in_bytes_, depth,
                                          cols, in_, b_row * in_bytes_);
    auto dma_a = b_.dma_to_vmem(
        a_src, block(tr.a ? a_stage_[sb] : a_buf_[sb], a_src.rows(), a_src.cols(), in_),
        0 % engines);
    auto dma_b = b_.dma_to_vmem(
        b_src, block(tr.b ? b_stage_[sb] : b_buf_[sb], b_src.rows(), b_src.cols(), in_),
        1 % engines);
    for (auto* dma : {&dma_a, &dma_b}) {
      pool_.signal(*dma, loaded(sb));
      if (consumed_n_[sb] > consumed_start_[sb] || step >= 2)
        dma->wait(consumed(sb), consumed_n_[sb]);
      if (ctx_.before_read) ctx_.before_read(*dma);
    }
    plan_.dmas += 2;
    // A staged slice is transposed once both loads landed; the MXUs' loads below wait for the
    // count its signal makes. Its staging buffer is free again when the matmuls that read the
    // slice buffer it fills are done, which the next load into it waits for.
    if (tr.a) transpose_staged(a_stage_[sb], a_buf_[sb], depth, rows, sb);
    if (tr.b) transpose_staged(b_stage_[sb], b_buf_[sb], cols, depth, sb);
    const uint32_t sub = emit_mxu_product(
        core_, b_, block(a_buf_[sb], rows, depth, in_), block(b_buf_[sb], depth, cols, in_),
        block(c_buf_[cb], rows, cols, isa::F32), ki > 0, precision_, next_slot_,
        [&](sim::InstrRef& load) { load.wait(loaded(sb), pool_.count(loaded(sb))); },
        [&](sim::InstrRef& mm, bool overwrites) {
          pool_.signal(mm, consumed(sb));
          pool_.signal(mm, written(cb));
          if (overwrites && freed_n_[cb] > freed_start_[cb]) mm.wait(freed(cb), freed_n_[cb]);
        });
    plan_.matmuls += sub;
    consumed_n_[sb] += sub;
  }

  // Elements from one of matrix i's stored rows to the next (GemmLayout::row_elements), `dense`
  // when its rows are.
  uint64_t stored_row(size_t i, uint64_t dense) const {
    return layout_.row_elements[i] > 0 ? layout_.row_elements[i] : dense;
  }

  // stage (rows x cols) transposed into slice (cols x rows) by the vector unit, after the loads of
  // slice buffer `sb` landed; signals `loaded` as they do.
  void transpose_staged(uint64_t stage, uint64_t slice, uint32_t rows, uint32_t cols, int sb) {
    auto t = b_.transpose(block(slice, cols, rows, in_), block(stage, rows, cols, in_));
    t.wait(loaded(sb), pool_.count(loaded(sb)));
    pool_.signal(t, loaded(sb));
  }

  // The finished tile (rounded to bf16 values first when asked) back to HBM.
  void store_tile(uint32_t mi, uint32_t ni, uint32_t rows, uint32_t cols, int cb) {
    const uint64_t c_row = stored_row(2, shape_.n);
    const uint64_t c_dst =
        layout_.c_address + (uint64_t{mi} * t_.tm * c_row + uint64_t{ni} * t_.tn) * 4;
    if (ctx_.round_to_bf16) {
      // Signals `written` too, so that the store below waits for the rounding.
      const isa::Block finished = block(c_buf_[cb], rows, cols, isa::F32);
      auto round = b_.unary(isa::Vector::ROUND_BF16, finished, finished);
      round.wait(written(cb), pool_.count(written(cb)));
      pool_.signal(round, written(cb));
    }
    auto store =
        b_.dma_to_hbm(block(c_buf_[cb], rows, cols, isa::F32),
                      block(c_dst, rows, cols, isa::F32, c_row * 4), 2 % core_.dma_engines);
    store.wait(written(cb), pool_.count(written(cb)));
    pool_.signal(store, freed(cb));
    if (ctx_.after_write) ctx_.after_write(store);
    ++freed_n_[cb];
    ++plan_.dmas;
  }

  const config::CoreSpec& core_;
  const GemmShape shape_;
  const isa::Precision precision_;
  const GemmLayout& layout_;
  GemmContext& ctx_;
  const GemmTiling t_;
  const isa::DType in_;
  const uint32_t in_bytes_;
  CoreBuilder& b_;
  FlagPool& pool_;
  std::vector<uint32_t> next_slot_;  // each MXU's next weight slot
  std::array<uint64_t, 2> a_buf_{}, b_buf_{}, c_buf_{};
  std::array<uint64_t, 2> a_stage_{}, b_stage_{};  // transposed operands' slices as they lie
  std::array<uint64_t, 2> consumed_n_{}, freed_n_{};
  std::array<uint64_t, 2> consumed_start_{}, freed_start_{};
  GemmPlan plan_;
};

// The tiles a tiling makes of a GEMM.
uint64_t tile_count(GemmTiling t, GemmShape shape) {
  const auto parts = [](uint64_t whole, uint64_t part) { return (whole + part - 1) / part; };
  return parts(shape.m, t.tm) * parts(shape.k, t.tk) * parts(shape.n, t.tn);
}

// A tiling given by the caller (tpusim matmul --tiles) makes a program of instructions for each
// of its tiles, about 2 kB of host memory each: 1x1x1 tiles of a 128^3 GEMM were 2^21 tiles, 3.2
// GB and 20 s before the first cycle. Refused past 65,536 tiles (about 130 MB, under a second)
// unless the compiler's own tiling makes as many, so a GEMM the compiler would run is never
// refused.
absl::Status check_given_tile_count(const config::ChipSpec& chip, GemmShape shape,
                                    isa::Precision precision, const GemmLayout& layout,
                                    GemmTiling given, uint32_t streaming) {
  constexpr uint64_t kMaxGivenTiles = 65536;
  const uint64_t tiles = tile_count(given, shape);
  if (tiles <= kMaxGivenTiles) return absl::OkStatus();
  auto chosen =
      choose_gemm_tiling(chip, shape, layout.input_dtype, precision, streaming, layout.transposes);
  if (chosen.ok() && tiles <= tile_count(*chosen, shape)) return absl::OkStatus();
  return absl::InvalidArgumentError(str_cat(
      "tiles ", given.tm, "x", given.tk, "x", given.tn, " make ", tiles, " tiles of the ", shape.m,
      "x", shape.k, "x", shape.n, " GEMM, past the bound of ", kMaxGivenTiles,
      " a given tiling may make (a program's instructions for each: about 2 kB of host memory a "
      "tile)",
      chosen.ok() ? str_cat("; the compiler's tiles ", chosen->tm, "x", chosen->tk, "x", chosen->tn,
                            " make ", tile_count(*chosen, shape))
                  : std::string()));
}

}  // namespace

absl::StatusOr<GemmPlan> emit_gemm(const config::ChipSpec& chip, GemmShape shape,
                                   isa::Precision precision, const GemmLayout& layout,
                                   GemmContext& ctx) {
  const uint32_t streaming = ctx.streaming_cores ? ctx.streaming_cores : chip.tensor_cores;
  if (ctx.tiling) {
    if (auto s = check_gemm_tiling(chip, shape, layout.input_dtype, *ctx.tiling, layout.transposes);
        !s.ok())
      return s;
    if (auto s = check_given_tile_count(chip, shape, precision, layout,
                                        tiling_within(*ctx.tiling, shape), streaming);
        !s.ok())
      return s;
    return GemmEmission(chip.core, shape, precision, layout, ctx, tiling_within(*ctx.tiling, shape))
        .emit();
  }
  auto tiling =
      choose_gemm_tiling(chip, shape, layout.input_dtype, precision, streaming, layout.transposes);
  if (!tiling.ok()) return tiling.status();
  return GemmEmission(chip.core, shape, precision, layout, ctx, *tiling).emit();
}

absl::StatusOr<GemmPlan> lower_gemm(const config::SliceSpec& slice, uint32_t core_index,
                                    GemmShape shape, isa::Precision precision,
                                    const GemmLayout& layout, std::optional<GemmTiling> tiling) {
  isa::Program program;
  program.set_name(str_cat("gemm_", shape.m, "x", shape.k, "x", shape.n));
  CoreBuilder b(&program, core_index);
  FlagPool pool;
  GemmContext ctx;
  ctx.builder = &b;
  ctx.flags = &pool;
  ctx.flag_ids = allocate_gemm_flags(pool);
  ctx.tiling = tiling;
  ctx.streaming_cores = 1;
  auto plan = emit_gemm(slice.chip, shape, precision, layout, ctx);
  if (!plan.ok()) return plan.status();
  b.halt();
  plan->program = std::move(program);
  return plan;
}

}  // namespace tpusim::runtime
