#pragma once
// Lowers C (M x N, f32) = A (M x K) x B (K x N) to one core's ISA program. A and B sit in the
// chip's HBM row-major (f32 or bf16); C is written back to HBM as f32.
//
// Tiling: C is cut into tm x tn output tiles and K into tk slices. For each output tile the
// core streams the k slices: DMA A(m, k) and B(k, n) into one of two VMEM buffers while the
// MXUs work on the other (double buffering), then for every R x C sub-tile of B: load it as
// weights and stream A's tm rows through it, accumulating into the tile's f32 accumulator in
// VMEM. Column sub-tiles are spread over the core's MXUs; when there are fewer than MXUs, each
// tile's rows are split between the MXUs as well, so a narrow GEMM (a convolution's 32 or 64
// output channels) keeps every MXU streaming. When the last k slice is done the
// accumulator goes back to HBM while the next tile accumulates into the other accumulator.
//
// The buffers fit in the 3/4 of VMEM a fragment tiles (vmem_budget.h); tm, tk and tn are chosen
// for the chip by gemm_tiling.h, so that a product runs at the MXU or HBM roof wherever its shape
// allows. Sync flags (8 per program) order the units:
//   loaded[b]   DMAs of slice buffer b landed (2 per step)      -> MXU work of the step waits
//   consumed[b] matmuls that read slice buffer b completed      -> the DMA reusing b waits
//   written[c]  matmuls into accumulator c completed            -> the write-back of c waits
//   freed[c]    write-backs of accumulator c completed          -> the first matmuls into c wait

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "runtime/lowering/flag_pool.h"
#include "runtime/lowering/gemm_tiling.h"
#include "sim/isa/builder.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime {

struct GemmLayout {
  uint64_t a_address = 0;             // HBM, M x K row-major (K x M when transposes.a)
  uint64_t b_address = 0;             // HBM, K x N row-major (N x K when transposes.b)
  uint64_t c_address = 0;             // HBM, M x N row-major f32
  isa::DType input_dtype = isa::F32;  // of A and B
  // A transposed operand's slice is loaded as it lies into a staging buffer and transposed into
  // its slice buffer by the vector unit before the MXUs read it (gemm_tiling.h).
  GemmTransposes transposes;
  // Elements from one stored row's start to the next's, for each matrix as it is stored (A's K,
  // or its M when transposed; B's N, or its K; C's N); 0: the rows are dense. A wider stride
  // reads a matrix whose rows are interleaved with another's (a head's rows of
  // [seq, heads, depth]: gemm.cc).
  std::array<uint64_t, 3> row_elements{};
};

struct GemmPlan {
  isa::Program program;
  GemmTiling tiling;
  uint64_t vmem_bytes = 0;  // VMEM the buffers take
  uint64_t matmuls = 0;
  uint64_t dmas = 0;
};

// HBM bytes a row-major layout of the three matrices needs from `base`, each matrix 4 KiB
// aligned; fills `layout`.
uint64_t pack_gemm_layout(GemmShape shape, isa::DType input_dtype, uint64_t base,
                          GemmLayout* layout);

// The GEMM alone on `core`, which has its chip's HBM to itself. `tiling`, when given, replaces the
// chosen one (check_gemm_tiling refuses one that cannot run).
absl::StatusOr<GemmPlan> lower_gemm(const config::SliceSpec& slice, uint32_t core, GemmShape shape,
                                    isa::Precision precision, const GemmLayout& layout,
                                    std::optional<GemmTiling> tiling = std::nullopt);

// Where a GEMM fragment sits in a larger program: the builder and flags it shares, the VMEM it
// may use from `vmem_base`, and hooks that order it after what comes before (`before_read` is
// applied to each DMA that reads A or B from HBM) and announce its results (`after_write` to
// each write-back of C).
struct GemmContext {
  sim::CoreBuilder* builder = nullptr;
  FlagPool* flags = nullptr;
  std::array<uint32_t, 8> flag_ids{};  // loaded[2], consumed[2], written[2], freed[2]
  uint64_t vmem_base = 0;
  std::function<void(sim::InstrRef&)> before_read;
  std::function<void(sim::InstrRef&)> after_write;
  // C holds bf16 values: each finished tile is rounded in VMEM (one vector ROUND_BF16) before
  // it goes back to HBM.
  bool round_to_bf16 = false;
  // The tiles to use instead of choose_gemm_tiling's (checked by check_gemm_tiling).
  std::optional<GemmTiling> tiling;
  // The chip's cores that stream from its HBM while this GEMM runs (gemm_tiling.h): all of them
  // in a step every core runs (0 says so), 1 for a GEMM run alone.
  uint32_t streaming_cores = 0;
};

// Allocates the 8 flags a GEMM fragment uses.
std::array<uint32_t, 8> allocate_gemm_flags(FlagPool& pool);

// The MXU work of out (+)= lhs x weights with all three in VMEM (lhs rows x depth, weights
// depth x cols, out rows x cols f32, each with its own row stride): for every R x C sub-tile of
// the weights, load it into an MXU and stream lhs's rows through it. Column sub-tiles go round
// the MXUs; when there are too few to give every MXU one, the rows are split between them too
// (each MXU loads the same weights and streams its share of the rows). A given rows-and-columns
// part always goes to the same MXU, which takes its depth chunks in order, so every sum runs in
// one fixed order. Without `accumulate` the first depth chunk overwrites out. `next_slot` is each
// MXU's next weight slot (they alternate); `on_load` sees each load_weights and `on_matmul` each
// matmul (with whether it is the chunk that overwrites), to add their waits and signals.
// Returns the matmuls emitted.
uint32_t emit_mxu_product(const config::CoreSpec& core, sim::CoreBuilder& b, const isa::Block& lhs,
                          const isa::Block& weights, const isa::Block& out, bool accumulate,
                          isa::Precision precision, std::vector<uint32_t>& next_slot,
                          const std::function<void(sim::InstrRef&)>& on_load,
                          const std::function<void(sim::InstrRef&, bool overwrites)>& on_matmul);

// Appends the GEMM's instructions (no halt) and returns what it emitted.
absl::StatusOr<GemmPlan> emit_gemm(const config::ChipSpec& chip, GemmShape shape,
                                   isa::Precision precision, const GemmLayout& layout,
                                   GemmContext& context);

}  // namespace tpusim::runtime
