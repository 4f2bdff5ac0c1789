#pragma once
// How a GEMM's tiles are chosen for a chip (gemm.h emits them): from every tiling whose buffers
// fit the GEMM's share of VMEM (vmem_budget.h), the one an analytic estimate of the emitted
// pipeline says is fastest. XLA's TPU backend chooses its tile sizes the same way, ranking
// candidates with an analytical performance model of the chip (Kaufman et al., "A Learned
// Performance Model for Tensor Processing Units", MLSys 2021; docs/references.md [Kaufman21]).
//
// The estimate models the pipeline gemm.h emits: C in tm x tn tiles, each the sum over K's tk-deep
// slices; the slices double-buffered so that one slice loads while the MXUs multiply the other,
// and a finished tile's store overlapping the next tile's slices. A tile then takes the longer of
// its MXU work and its HBM traffic (its slices' loads and its store); what no double buffer hides
// is the first slices' load and the last tile's store, each after an HBM latency, and the array's
// fill and drain (R + C - 2 cycles). The core's HBM bandwidth is its share of the chip's: the
// chip's divided by the cores that stream at once (every TensorCore of the chip in a data-parallel
// step, which runs the same program on each; one for a GEMM run alone). The MXU work of a slice is
// what emit_mxu_product issues: each R x C weight tile's rows streamed (passes x rows cycles, at
// least the R cycles its weights take to load behind the other slot's stream), the column tiles
// spread over the MXUs, a narrow product's rows split between them.

#include <cstdint>

#include <absl/status/statusor.h>

#include "configs/slice_spec.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::runtime {

struct GemmShape {
  uint32_t m = 0;
  uint32_t k = 0;
  uint32_t n = 0;
};

// Which of a GEMM's operands lie transposed in HBM: A as K x M, B as N x K, row-major. A transposed
// operand's slices are loaded as they lie into a staging buffer of their own and transposed into
// the slice buffer by the vector unit while the MXUs work on the other slice (gemm.h), as a GEMM
// kernel that transposes its inputs runs the dots XLA's TransposeFolding folds transposes into
// (docs/runtime.md, "Transposes folded into matmuls").
struct GemmTransposes {
  bool a = false;
  bool b = false;
};

struct GemmTiling {
  uint32_t tm = 0;
  uint32_t tk = 0;
  uint32_t tn = 0;
};

// How a product of rows x cols spreads over a core's MXUs (emit_mxu_product in gemm.h): cols in
// C-wide column tiles, each MXU taking them in turn; when there are fewer column tiles than
// MXUs, the rows are split into parts as well (at least 8 rows each), so every MXU streams.
struct MxuSplit {
  uint32_t col_tiles = 1;
  uint32_t row_parts = 1;
  // The products (one weight tile's rows, or their part) each MXU takes per R-deep chunk, at most.
  uint32_t per_mxu = 1;
};
MxuSplit mxu_split(const config::CoreSpec& core, uint32_t rows, uint32_t cols);

// `tiling` with each tile no larger than its dimension (a larger tile takes the dimension).
GemmTiling tiling_within(GemmTiling tiling, GemmShape shape);

// The estimate of one tiling (seconds and bytes on one core).
struct GemmEstimate {
  double seconds = 0;       // the whole GEMM: pipeline fill, the tiles, the drain
  double mxu_seconds = 0;   // the MXU work alone (the tiles' streaming and weight loads)
  double hbm_seconds = 0;   // the HBM traffic alone at the core's share of the bandwidth
  uint64_t hbm_bytes = 0;   // A read once per column tile, B once per row tile, C written once
  uint64_t vmem_bytes = 0;  // the double-buffered slices and the two accumulators
};

// The estimate of `tiling` (which need not fit VMEM: vmem_bytes says what it takes).
// `streaming_cores` is how many of the chip's cores share its HBM bandwidth meanwhile (1 to
// tensor_cores; 0 says all of them). Tiles larger than their dimension take the dimension.
// A slice's work is the longer of its MXU work and the vector unit's transposes of its transposed
// operands' slices.
GemmEstimate estimate_gemm(const config::ChipSpec& chip, GemmShape shape, isa::DType input_dtype,
                           isa::Precision precision, GemmTiling tiling, uint32_t streaming_cores,
                           GemmTransposes transposes = {});

// VMEM the tiling's double-buffered slices and two accumulators take, with the double-buffered
// staging of each transposed operand's slices.
uint64_t gemm_vmem_bytes(GemmTiling tiling, isa::DType input_dtype, GemmTransposes transposes = {});

// Whether a slice's instructions for one MXU (a weight load and a matmul per product it takes) fit
// half its queue: the sequencer issues in order, and the loads of the slice after next come after
// the next slice's MXU instructions, which must be queued behind this slice's for those loads to
// leave when this slice's buffer frees.
bool gemm_slice_fits_queues(const config::CoreSpec& core, GemmTiling tiling);

// OK when `tiling` (a user's choice) can run `shape`: no tile empty, the buffers within the GEMM's
// share of VMEM; otherwise InvalidArgument saying which.
absl::Status check_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                               isa::DType input_dtype, GemmTiling tiling,
                               GemmTransposes transposes = {});

// The tiling emit_gemm uses: the shortest estimate among tm, tk and tn each a power of two from 8
// or the whole dimension, whose buffers fit the GEMM's share of VMEM and whose slices fit half of
// each MXU's instruction queue (so the loads of the slice after next issue in time; ignored only
// when no tiling meets it). Estimates within a part in 10^9 are ties, won by the tiles of most
// elements. InvalidArgument when the dimensions are empty or not even 8 x 8 x 8 tiles fit.
absl::StatusOr<GemmTiling> choose_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                                              isa::DType input_dtype, isa::Precision precision,
                                              uint32_t streaming_cores,
                                              GemmTransposes transposes = {});

}  // namespace tpusim::runtime
