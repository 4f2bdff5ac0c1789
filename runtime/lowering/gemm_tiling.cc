#include "runtime/lowering/gemm_tiling.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/align.h"
#include "common/strings.h"
#include "runtime/lowering/vmem_budget.h"
#include "sim/isa/builder.h"
#include "sim/isa/ops.h"
#include "sim/memory/block.h"
#include "sim/units/vector_cost.h"

namespace tpusim::runtime {

using sim::block;

namespace {

// The tiles of one dimension: `count` of `size` each (the full tiles, then the edge).
struct TileRun {
  uint32_t size = 0;
  uint64_t count = 0;
};

std::array<TileRun, 2> runs_of(uint32_t extent, uint32_t tile) {
  return {TileRun{tile, extent / tile}, TileRun{extent % tile, extent % tile ? 1u : 0u}};
}

// MXU cycles of one slice: rows x depth times depth x cols, as emit_mxu_product issues it.
uint64_t slice_cycles(const config::CoreSpec& core, uint32_t rows, uint32_t depth, uint32_t cols,
                      int passes) {
  const MxuSplit split = mxu_split(core, rows, cols);
  const uint64_t stream =
      std::max<uint64_t>(uint64_t(passes) * pieces_covering(rows, split.row_parts),
                         core.mxu_rows);  // a weight load hides behind it
  return pieces_covering(depth, core.mxu_rows) * split.per_mxu * stream;
}

// Powers of two from 8 below `extent`, largest first, after the whole extent.
std::vector<uint32_t> candidates(uint32_t extent) {
  std::vector<uint32_t> sizes{extent};
  uint64_t p = 8;
  while (p * 2 < extent) p *= 2;
  for (; p >= 8; p /= 2)
    if (p < extent) sizes.push_back(static_cast<uint32_t>(p));
  return sizes;
}

}  // namespace

MxuSplit mxu_split(const config::CoreSpec& core, uint32_t rows, uint32_t cols) {
  MxuSplit split;
  split.col_tiles = static_cast<uint32_t>(pieces_covering(cols, core.mxu_cols));
  split.row_parts = std::max(1u, std::min(core.mxu_count / split.col_tiles, rows / 8));
  split.per_mxu = static_cast<uint32_t>(
      pieces_covering(uint64_t{split.row_parts} * split.col_tiles, core.mxu_count));
  return split;
}

GemmTiling tiling_within(GemmTiling t, GemmShape shape) {
  return {std::min(t.tm, shape.m), std::min(t.tk, shape.k), std::min(t.tn, shape.n)};
}

bool gemm_slice_fits_queues(const config::CoreSpec& core, GemmTiling t) {
  const uint64_t per_mxu =
      pieces_covering(t.tk, core.mxu_rows) * mxu_split(core, t.tm, t.tn).per_mxu;
  return 2 * per_mxu <= core.unit_queue_depth / 2;
}

uint64_t gemm_vmem_bytes(GemmTiling t, isa::DType input_dtype, GemmTransposes transposes) {
  const uint32_t in_bytes = sim::dtype_bytes(input_dtype);
  const uint64_t a = align_up(uint64_t{t.tm} * t.tk * in_bytes),
                 b = align_up(uint64_t{t.tk} * t.tn * in_bytes);
  return 2 * a * (transposes.a ? 2 : 1) + 2 * b * (transposes.b ? 2 : 1) +
         2 * align_up(uint64_t{t.tm} * t.tn * 4);
}

absl::Status check_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                               isa::DType input_dtype, GemmTiling t, GemmTransposes transposes) {
  if (shape.m == 0 || shape.k == 0 || shape.n == 0) {
    return absl::InvalidArgumentError(
        str_cat("GEMM ", shape.m, "x", shape.k, "x", shape.n, " has an empty dimension"));
  }
  if (t.tm == 0 || t.tk == 0 || t.tn == 0)
    return absl::InvalidArgumentError(str_cat("tiles ", t.tm, "x", t.tk, "x", t.tn, " are empty"));
  const GemmTiling used = tiling_within(t, shape);
  const uint64_t bytes = gemm_vmem_bytes(used, input_dtype, transposes),
                 budget = tiled_bytes(chip.core);
  if (bytes > budget) {
    return absl::InvalidArgumentError(str_cat("tiles ", used.tm, "x", used.tk, "x", used.tn,
                                              " need ", bytes, " bytes of VMEM; the core has ",
                                              chip.core.vmem_bytes,
                                              " (GEMMs use 3/4 of it: ", budget, ")"));
  }
  return absl::OkStatus();
}

namespace {

// One core's view of the chip while the GEMM runs: its share of the HBM bandwidth and the
// pipeline's fixed latencies (gemm_tiling.h).
struct Pipeline {
  const config::CoreSpec& core;
  isa::DType input_dtype;
  uint32_t in_bytes;
  int passes;
  GemmTransposes transposes;
  double bandwidth;   // bytes per second
  double latency;     // an HBM access's, seconds
  double turnaround;  // seconds from a slice's last product to its buffer's next load being used
};

Pipeline pipeline_of(const config::ChipSpec& chip, isa::DType input_dtype, isa::Precision precision,
                     uint32_t streaming_cores, GemmTransposes transposes) {
  const uint32_t sharing =
      streaming_cores == 0 ? chip.tensor_cores : std::clamp(streaming_cores, 1u, chip.tensor_cores);
  // Between a slice's last product and the next load into its buffer the array drains (R + C - 2
  // cycles); after the load lands, the first weights take R cycles to load.
  const config::CoreSpec& core = chip.core;
  return {core,
          input_dtype,
          sim::dtype_bytes(input_dtype),
          sim::mxu_passes(precision),
          transposes,
          chip.hbm.bandwidth_bytes_per_s / sharing,
          chip.hbm.latency_s,
          static_cast<double>(2 * core.mxu_rows + core.mxu_cols - 2) / core.clock_hz};
}

// Cycles the vector unit takes to transpose a rows x cols slice of `dtype` in VMEM, as the
// simulator costs the instruction (vector_cost.h): its issue, or the bytes it reads and writes
// through the VMEM ports if those take longer.
uint64_t transpose_cycles(const config::CoreSpec& core, uint32_t rows, uint32_t cols,
                          isa::DType dtype) {
  const sim::VectorCost cost =
      sim::vector_cost(sim::vector_ops::unary(isa::Vector::TRANSPOSE, block(0, cols, rows, dtype),
                                              block(0, rows, cols, dtype)),
                       core);
  const uint64_t port_bytes = uint64_t{core.vmem_ports} * core.vmem_port_bytes_per_cycle;
  return std::max(cost.issue_cycles, pieces_covering(cost.vmem_bytes, port_bytes));
}

// One output tile of rows x cols over K in slices of tk, after a tile whose store (taken as this
// one's size) leaves while it runs when `store_before`. Adds its MXU work to `mxu_seconds`.
double tile_seconds(const Pipeline& p, uint32_t rows, uint32_t cols, uint32_t k, uint32_t tk,
                    bool store_before, double* mxu_seconds) {
  const uint64_t store_bytes = store_before ? uint64_t{rows} * cols * 4 : 0;
  uint64_t bytes = store_bytes;
  double mxu = 0, slices = 0;
  auto mxu_of = [&](uint32_t depth) {
    return static_cast<double>(slice_cycles(p.core, rows, depth, cols, p.passes)) / p.core.clock_hz;
  };
  // The vector unit transposes the next slice while the MXUs work on this one.
  auto work_of = [&](uint32_t depth) {
    const uint64_t transposing =
        (p.transposes.a ? transpose_cycles(p.core, depth, rows, p.input_dtype) : 0) +
        (p.transposes.b ? transpose_cycles(p.core, cols, depth, p.input_dtype) : 0);
    return std::max(mxu_of(depth), static_cast<double>(transposing) / p.core.clock_hz);
  };
  // A slice's loads reuse the buffer of the slice two back, so they start when that one's products
  // are done and have only the slice in between to hide under: a slice takes at least half its
  // loads' time (latency, transfer, turnaround) and its own work.
  auto slice = [&](double work, uint32_t depth, uint64_t extra_bytes) {
    const uint64_t moved = (uint64_t{rows} + cols) * depth * p.in_bytes + extra_bytes;
    const double load = p.latency + static_cast<double>(moved) / p.bandwidth + p.turnaround;
    return std::max(work, (work + load) / 2);
  };
  for (const TileRun& run : runs_of(k, tk)) {
    if (run.count == 0) continue;
    const double work = work_of(run.size);
    slices += static_cast<double>(run.count) * slice(work, run.size, 0);
    mxu += static_cast<double>(run.count) * mxu_of(run.size);
    bytes += run.count * (uint64_t{rows} + cols) * run.size * p.in_bytes;
  }
  // The store before leaves with the loads of one slice (the second, or the only one) and shares
  // their bandwidth.
  const uint32_t shared = k > tk ? std::min(tk, k - tk) : k;
  const double shared_work = work_of(shared);
  const double store_delay =
      slice(shared_work, shared, store_bytes) - slice(shared_work, shared, 0);
  *mxu_seconds += mxu;
  return std::max(slices + store_delay, static_cast<double>(bytes) / p.bandwidth);
}

}  // namespace

GemmEstimate estimate_gemm(const config::ChipSpec& chip, GemmShape shape, isa::DType input_dtype,
                           isa::Precision precision, GemmTiling t, uint32_t streaming_cores,
                           GemmTransposes transposes) {
  GemmEstimate e;
  if (shape.m == 0 || shape.k == 0 || shape.n == 0) return e;
  t = tiling_within({std::max(t.tm, 1u), std::max(t.tk, 1u), std::max(t.tn, 1u)}, shape);
  const Pipeline p = pipeline_of(chip, input_dtype, precision, streaming_cores, transposes);
  // The tiles in row-major order, each after the one whose store leaves while it runs: all but
  // the first, whose place no store takes; the last tile's own store is the drain below.
  double tiles = 0;
  for (const TileRun& m : runs_of(shape.m, t.tm)) {
    for (const TileRun& n : runs_of(shape.n, t.tn)) {
      const uint64_t count = m.count * n.count;
      if (count == 0) continue;
      double mxu = 0;
      tiles +=
          static_cast<double>(count) * tile_seconds(p, m.size, n.size, shape.k, t.tk, true, &mxu);
      e.mxu_seconds += static_cast<double>(count) * mxu;
    }
  }
  double unused = 0;
  tiles += tile_seconds(p, t.tm, t.tn, shape.k, t.tk, false, &unused) -
           tile_seconds(p, t.tm, t.tn, shape.k, t.tk, true, &unused);
  const uint32_t last_m = shape.m % t.tm ? shape.m % t.tm : t.tm,
                 last_n = shape.n % t.tn ? shape.n % t.tn : t.tn;
  const uint64_t first_load_bytes = (uint64_t{t.tm} + t.tn) * t.tk * p.in_bytes;
  const uint64_t last_store_bytes = uint64_t{last_m} * last_n * 4;
  // A read once per column tile, B once per row tile, C written once.
  const uint64_t row_tiles = pieces_covering(shape.m, t.tm),
                 col_tiles = pieces_covering(shape.n, t.tn);
  e.hbm_bytes =
      (uint64_t{shape.m} * shape.k * col_tiles + uint64_t{shape.k} * shape.n * row_tiles) *
          p.in_bytes +
      uint64_t{shape.m} * shape.n * 4;
  const double array_drain =
      static_cast<double>(chip.core.mxu_rows + chip.core.mxu_cols - 2) / chip.core.clock_hz;
  e.hbm_seconds = static_cast<double>(e.hbm_bytes) / p.bandwidth;
  e.seconds = 2 * p.latency + static_cast<double>(first_load_bytes) / p.bandwidth + tiles +
              array_drain + static_cast<double>(last_store_bytes) / p.bandwidth;
  e.vmem_bytes = gemm_vmem_bytes(t, input_dtype, transposes);
  return e;
}

absl::StatusOr<GemmTiling> choose_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                                              isa::DType input_dtype, isa::Precision precision,
                                              uint32_t streaming_cores, GemmTransposes transposes) {
  if (shape.m == 0 || shape.k == 0 || shape.n == 0) {
    return absl::InvalidArgumentError(
        str_cat("GEMM ", shape.m, "x", shape.k, "x", shape.n, " has an empty dimension"));
  }
  const uint64_t budget = tiled_bytes(chip.core);  // vmem_budget.h
  // Estimates within a part in 10^9 are ties (rounding, not the model, tells them apart), won by
  // the tiles of most elements (fewest instructions), then the first in the loops' order.
  constexpr double kTie = 1e-9;
  GemmTiling best;
  double best_seconds = 0;
  uint64_t best_volume = 0;
  // Slices that overflow the MXUs' queues only when no other tiling fits (a core configured with
  // queues too short for any).
  for (const bool respect_queues : {true, false}) {
    for (uint32_t tm : candidates(shape.m)) {
      for (uint32_t tn : candidates(shape.n)) {
        for (uint32_t tk : candidates(shape.k)) {
          const GemmTiling t{tm, tk, tn};
          if (gemm_vmem_bytes(t, input_dtype, transposes) > budget) continue;
          if (respect_queues && !gemm_slice_fits_queues(chip.core, t)) continue;
          const double seconds =
              estimate_gemm(chip, shape, input_dtype, precision, t, streaming_cores, transposes)
                  .seconds;
          const uint64_t volume = uint64_t{tm} * tk * tn;
          const bool faster = seconds < best_seconds * (1 - kTie);
          const bool tie = !faster && seconds <= best_seconds * (1 + kTie);
          if (best.tm == 0 || faster || (tie && volume > best_volume))
            best = t, best_seconds = seconds, best_volume = volume;
        }
      }
    }
    if (best.tm != 0) return best;
  }
  const GemmTiling smallest{std::min(8u, shape.m), std::min(8u, shape.k), std::min(8u, shape.n)};
  return absl::InvalidArgumentError(str_cat(
      "GEMM ", shape.m, "x", shape.k, "x", shape.n, ": even tiles of ", smallest.tm, "x",
      smallest.tk, "x", smallest.tn, " need ", gemm_vmem_bytes(smallest, input_dtype, transposes),
      " bytes of VMEM; the core has ", chip.core.vmem_bytes, " (GEMMs use 3/4 of it)"));
}

}  // namespace tpusim::runtime
