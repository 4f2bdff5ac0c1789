#include "runtime/lowering/gemm_tiling.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/align.h"
#include "common/strings.h"
#include "runtime/lowering/vmem_budget.h"
#include "sim/isa/ops.h"

namespace tpusim::runtime {

namespace {

uint32_t element_bytes(isa::DType d) { return d == isa::BF16 ? 2 : 4; }
uint64_t tiles_covering(uint64_t extent, uint64_t tile) { return (extent + tile - 1) / tile; }

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
  const uint64_t col_tiles = tiles_covering(cols, core.mxu_cols);
  const uint64_t row_parts =
      std::max<uint64_t>(1, std::min<uint64_t>(core.mxu_count / col_tiles, rows / 8));
  const uint64_t stream = std::max<uint64_t>(uint64_t(passes) * tiles_covering(rows, row_parts),
                                             core.mxu_rows);  // a weight load hides behind it
  return tiles_covering(depth, core.mxu_rows) *
         tiles_covering(row_parts * col_tiles, core.mxu_count) * stream;
}

// Powers of two from 8 below `extent`, largest first, after the whole extent.
std::vector<uint32_t> candidates(uint32_t extent) {
  std::vector<uint32_t> sizes{extent};
  uint32_t p = 8;
  while (p * 2 < extent) p *= 2;
  for (; p >= 8; p /= 2)
    if (p < extent) sizes.push_back(p);
  return sizes;
}

}  // namespace

uint64_t gemm_vmem_bytes(GemmTiling t, isa::DType input_dtype) {
  const uint32_t in_bytes = element_bytes(input_dtype);
  return 2 * align_up(uint64_t{t.tm} * t.tk * in_bytes) +
         2 * align_up(uint64_t{t.tk} * t.tn * in_bytes) + 2 * align_up(uint64_t{t.tm} * t.tn * 4);
}

absl::Status check_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                               isa::DType input_dtype, GemmTiling t) {
  if (t.tm == 0 || t.tk == 0 || t.tn == 0)
    return absl::InvalidArgumentError(str_cat("tiles ", t.tm, "x", t.tk, "x", t.tn, " are empty"));
  const GemmTiling used{std::min(t.tm, shape.m), std::min(t.tk, shape.k), std::min(t.tn, shape.n)};
  const uint64_t bytes = gemm_vmem_bytes(used, input_dtype), budget = tiled_bytes(chip.core);
  if (bytes > budget) {
    return absl::InvalidArgumentError(str_cat("tiles ", used.tm, "x", used.tk, "x", used.tn,
                                              " need ", bytes, " bytes of VMEM; the core has ",
                                              chip.core.vmem_bytes,
                                              " (GEMMs use 3/4 of it: ", budget, ")"));
  }
  return absl::OkStatus();
}

GemmEstimate estimate_gemm(const config::ChipSpec& chip, GemmShape shape, isa::DType input_dtype,
                           isa::Precision precision, GemmTiling t, uint32_t streaming_cores) {
  const config::CoreSpec& core = chip.core;
  const uint32_t in_bytes = element_bytes(input_dtype);
  const int passes = sim::mxu_passes(precision);
  const double bandwidth =
      chip.hbm.bandwidth_bytes_per_s / std::clamp(streaming_cores, 1u, chip.tensor_cores);
  GemmEstimate e;
  const double latency = chip.hbm.latency_s;
  // Between a slice's last product and the next load into its buffer, the array drains (R + C - 2
  // cycles); after the load lands, the first weights take R cycles to load.
  const double turnaround =
      static_cast<double>(2 * core.mxu_rows + core.mxu_cols - 2) / core.clock_hz;
  double tiles_seconds = 0;
  for (const TileRun& m : runs_of(shape.m, t.tm)) {
    for (const TileRun& n : runs_of(shape.n, t.tn)) {
      const uint64_t tiles = m.count * n.count;
      if (tiles == 0) continue;
      const uint64_t store_bytes = uint64_t{m.size} * n.size * 4;
      uint64_t bytes = store_bytes;
      double mxu = 0, slices = 0, store_delay = 0;
      for (const TileRun& k : runs_of(shape.k, t.tk)) {
        if (k.count == 0) continue;
        const double work =
            static_cast<double>(slice_cycles(core, m.size, k.size, n.size, passes)) / core.clock_hz;
        const uint64_t load_bytes = (uint64_t{m.size} + n.size) * k.size * in_bytes;
        // A slice's loads reuse the buffer of the slice two back, so they start when that one's
        // products are done and have only the slice in between to hide under: a slice takes at
        // least half its loads' time (latency, transfer, turnaround) and its own work.
        auto slice = [&](uint64_t moved) {
          const double load = latency + static_cast<double>(moved) / bandwidth + turnaround;
          return std::max(work, (work + load) / 2);
        };
        slices += static_cast<double>(k.count) * slice(load_bytes);
        // The tile before's store leaves with one slice's loads and shares the bandwidth.
        store_delay = slice(load_bytes + store_bytes) - slice(load_bytes);
        mxu += static_cast<double>(k.count) * work;
        bytes += k.count * load_bytes;
      }
      const double tile = std::max(slices + store_delay, static_cast<double>(bytes) / bandwidth);
      tiles_seconds += static_cast<double>(tiles) * tile;
      e.mxu_seconds += static_cast<double>(tiles) * mxu;
      e.hbm_bytes += tiles * bytes;
    }
  }
  const uint32_t tm = std::min(t.tm, shape.m), tk = std::min(t.tk, shape.k),
                 tn = std::min(t.tn, shape.n);
  const uint32_t last_m = shape.m % t.tm ? shape.m % t.tm : tm,
                 last_n = shape.n % t.tn ? shape.n % t.tn : tn;
  const double first_load = static_cast<double>((uint64_t{tm} + tn) * tk * in_bytes) / bandwidth;
  const double last_store = static_cast<double>(uint64_t{last_m} * last_n * 4) / bandwidth;
  const double array_drain = static_cast<double>(core.mxu_rows + core.mxu_cols - 2) / core.clock_hz;
  e.hbm_seconds = static_cast<double>(e.hbm_bytes) / bandwidth;
  e.seconds = 2 * latency + first_load + tiles_seconds + array_drain + last_store;
  e.vmem_bytes = gemm_vmem_bytes(t, input_dtype);
  return e;
}

absl::StatusOr<GemmTiling> choose_gemm_tiling(const config::ChipSpec& chip, GemmShape shape,
                                              isa::DType input_dtype, isa::Precision precision,
                                              uint32_t streaming_cores) {
  if (shape.m == 0 || shape.k == 0 || shape.n == 0) {
    return absl::InvalidArgumentError(
        str_cat("GEMM ", shape.m, "x", shape.k, "x", shape.n, " has an empty dimension"));
  }
  const uint64_t budget = tiled_bytes(chip.core);  // vmem_budget.h
  GemmTiling best;
  double best_seconds = 0;
  for (uint32_t tm : candidates(shape.m)) {
    for (uint32_t tn : candidates(shape.n)) {
      for (uint32_t tk : candidates(shape.k)) {
        const GemmTiling t{tm, tk, tn};
        if (gemm_vmem_bytes(t, input_dtype) > budget) continue;
        const double seconds =
            estimate_gemm(chip, shape, input_dtype, precision, t, streaming_cores).seconds;
        if (best.tm == 0 || seconds < best_seconds) best = t, best_seconds = seconds;
      }
    }
  }
  if (best.tm != 0) return best;
  const GemmTiling smallest{std::min(8u, shape.m), std::min(8u, shape.k), std::min(8u, shape.n)};
  return absl::InvalidArgumentError(
      str_cat("GEMM ", shape.m, "x", shape.k, "x", shape.n, ": even tiles of ", smallest.tm, "x",
              smallest.tk, "x", smallest.tn, " need ", gemm_vmem_bytes(smallest, input_dtype),
              " bytes of VMEM; the core has ", chip.core.vmem_bytes, " (GEMMs use 3/4 of it)"));
}

}  // namespace tpusim::runtime
