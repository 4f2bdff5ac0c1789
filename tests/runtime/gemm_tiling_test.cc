#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/lowering/gemm.h"
#include "sim/isa/validator.h"

namespace tpusim::runtime {
namespace gemm_tiling_test {

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

const config::ChipSpec& chip_of(const std::string& slice) {
  static std::map<std::string, std::shared_ptr<const config::SliceSpec>> loaded;
  auto& spec = loaded[slice];
  if (!spec) spec = *config::load_slice(slice);
  return spec->chip;
}

std::string text(GemmTiling t) {
  return std::to_string(t.tm) + "x" + std::to_string(t.tk) + "x" + std::to_string(t.tn);
}

// The chosen tiling fits the GEMM's 3/4 of VMEM and the MXUs' queues, and no tiling of powers of
// two from 8 to 8192 (or the whole dimension) that fits them has a shorter estimate: the choice is
// the estimate's minimum, not a fixed size.
TEST(GemmTiling, ChoosesTheShortestEstimateThatFits) {
  for (const char* slice : {"v2-8", "v3-8", "v4-8", "v5e-4"}) {
    const config::ChipSpec& chip = chip_of(slice);
    for (GemmShape s : {GemmShape{8192, 8192, 8192}, GemmShape{7168, 1024, 4096},
                        GemmShape{200, 2048, 1000}, GemmShape{1, 100, 60}}) {
      for (isa::DType dtype : {isa::F32, isa::BF16}) {
        SCOPED_TRACE(::testing::Message() << slice << " " << s.m << "x" << s.k << "x" << s.n);
        auto chosen = choose_gemm_tiling(chip, s, dtype, isa::DEFAULT, chip.tensor_cores);
        ASSERT_TRUE(chosen.ok()) << chosen.status();
        EXPECT_TRUE(check_gemm_tiling(chip, s, dtype, *chosen).ok());
        const double best =
            estimate_gemm(chip, s, dtype, isa::DEFAULT, *chosen, chip.tensor_cores).seconds;
        std::vector<uint32_t> sizes;
        for (uint32_t p = 8; p <= 8192; p *= 2) sizes.push_back(p);
        for (uint32_t tm : sizes) {
          for (uint32_t tk : sizes) {
            for (uint32_t tn : sizes) {
              const GemmTiling t{std::min(tm, s.m), std::min(tk, s.k), std::min(tn, s.n)};
              if (!check_gemm_tiling(chip, s, dtype, t).ok() ||
                  !gemm_slice_fits_queues(chip.core, t))
                continue;
              EXPECT_GE(estimate_gemm(chip, s, dtype, isa::DEFAULT, t, chip.tensor_cores).seconds,
                        best)
                  << text(t) << " beats " << text(*chosen);
            }
          }
        }
      }
    }
  }
}

// The tiles each chip's compiler takes for an 8192-cube bf16 GEMM in a step on every core, and for
// one run alone: v5e's 128 MiB of VMEM takes tiles of 1024 x 1024 (the fixed 1024 x 512 x 512 of
// before moved A 16 times where these move it 8); chips of two cores, each with half the HBM,
// take deeper or wider slices than when one core has it all.
TEST(GemmTiling, TilesFollowTheChip) {
  auto tiles = [](const char* slice, uint32_t streaming) {
    auto t =
        choose_gemm_tiling(chip_of(slice), {8192, 8192, 8192}, isa::BF16, isa::DEFAULT, streaming);
    return t.ok() ? text(*t) : std::string(t.status().message());
  };
  EXPECT_EQ(tiles("v5e-4", 1), "1024x1024x1024");
  EXPECT_EQ(tiles("v3-8", 1), "512x512x512");
  EXPECT_EQ(tiles("v3-8", 2), "512x1024x512");
  EXPECT_EQ(tiles("v2-8", 1), "256x512x256");
  EXPECT_EQ(tiles("v4-8", 1), "512x1024x512");
}

// What the estimate counts: A is read once per column tile, B once per row tile, C written once;
// the MXU work is every R x C weight tile's rows streamed, over the MXUs.
TEST(GemmTiling, EstimateCountsTrafficAndWork) {
  const config::ChipSpec& chip = chip_of("v3-8");
  const GemmShape s{3000, 1000, 700};
  const GemmTiling t{1024, 512, 256};  // 3 row tiles, 2 slices, 3 column tiles (2 full, 1 of 188)
  const GemmEstimate e = estimate_gemm(chip, s, isa::F32, isa::DEFAULT, t, 1);
  EXPECT_EQ(e.hbm_bytes, 3000ull * 1000 * 4 * 3 + 1000ull * 700 * 4 * 3 + 3000ull * 700 * 4);
  // Per (row tile, column tile, slice): ceil(depth / 128) chunks x 2 column blocks over 2 MXUs x
  // rows cycles; the rows sum to 3000, the slices' chunks to 4 + 4, the column tiles to 3.
  EXPECT_DOUBLE_EQ(e.mxu_seconds, 3000.0 * 8 * 3 / chip.core.clock_hz);
  EXPECT_GT(e.seconds, e.mxu_seconds);
  EXPECT_EQ(e.vmem_bytes, gemm_vmem_bytes(t, isa::F32));
  // Two cores streaming at once: the same bytes over half the bandwidth.
  const GemmEstimate shared = estimate_gemm(chip, s, isa::F32, isa::DEFAULT, t, 2);
  EXPECT_EQ(shared.hbm_bytes, e.hbm_bytes);
  EXPECT_DOUBLE_EQ(shared.hbm_seconds, 2 * e.hbm_seconds);
}

config::ChipSpec chip_with_vmem(uint64_t bytes) {
  config::ChipSpec chip = chip_of("v3-8");
  chip.core.vmem_bytes = bytes;
  return chip;
}

// The tiling of an 8192-cube f32 GEMM on a v3 core with `vmem_bytes` of VMEM, as tm x tk x tn.
std::string cube_tiling(uint64_t vmem_bytes) {
  auto t =
      choose_gemm_tiling(chip_with_vmem(vmem_bytes), {8192, 8192, 8192}, isa::F32, isa::DEFAULT, 2);
  return t.ok() ? text(*t) : std::string(t.status().message());
}

// Smaller VMEMs still run every GEMM, on smaller tiles; 16 KiB cannot hold the 3 x 2 aligned 4 KiB
// buffers of the smallest.
TEST(GemmTiling, SmallVmemsTakeSmallerTiles) {
  EXPECT_EQ(cube_tiling(4 << 20), "512x128x512");
  EXPECT_EQ(cube_tiling(1 << 20), "256x64x256");
  EXPECT_EQ(cube_tiling(64 << 10), "64x16x64");
  EXPECT_THAT(cube_tiling(16 << 10),
              ::testing::HasSubstr("GEMM 8192x8192x8192: even tiles of 8x8x8 need 24576 bytes"));
}

TEST(GemmTiling, EmptyDimensionIsRejected) {
  EXPECT_FALSE(choose_gemm_tiling(chip_of("v3-8"), {0, 1, 1}, isa::F32, isa::DEFAULT, 2).ok());
}

// A user's tiling is checked before it runs: empty tiles and tiles beyond the GEMM's VMEM are
// refused, saying what they need.
TEST(GemmTiling, UserTilingIsChecked) {
  const config::ChipSpec& chip = chip_of("v3-8");
  EXPECT_TRUE(check_gemm_tiling(chip, {4096, 4096, 4096}, isa::F32, {1024, 512, 512}).ok());
  EXPECT_FALSE(check_gemm_tiling(chip, {4096, 4096, 4096}, isa::F32, {0, 512, 512}).ok());
  auto big = check_gemm_tiling(chip, {4096, 4096, 4096}, isa::F32, {4096, 1024, 1024});
  EXPECT_THAT(std::string(big.message()),
              ::testing::HasSubstr("tiles 4096x1024x1024 need 75497472 bytes of VMEM"));
  // A tile larger than its dimension takes the dimension.
  EXPECT_TRUE(check_gemm_tiling(chip, {100, 100, 100}, isa::F32, {8192, 8192, 8192}).ok());
}

TEST(GemmLowering, ProgramsValidateAndCountTheirWork) {
  for (GemmShape s : {GemmShape{1, 1, 1}, GemmShape{2048, 1536, 1024}, GemmShape{130, 257, 129}}) {
    GemmLayout layout;
    pack_gemm_layout(s, isa::BF16, 0, &layout);
    auto plan = lower_gemm(v3_8(), 3, s, isa::HIGH, layout);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_TRUE(sim::validate_program(plan->program, v3_8()).ok())
        << sim::validate_program(plan->program, v3_8());
    EXPECT_EQ(plan->program.cores(0).core(), 3u);
    // One matmul per (m tile, n tile, k slice, R x C sub-tile); 2 loads per step, 1 store per tile.
    const uint64_t mt = (s.m + plan->tiling.tm - 1) / plan->tiling.tm;
    const uint64_t nt = (s.n + plan->tiling.tn - 1) / plan->tiling.tn;
    const uint64_t kt = (s.k + plan->tiling.tk - 1) / plan->tiling.tk;
    EXPECT_EQ(plan->dmas, mt * nt * (2 * kt + 1));
    EXPECT_EQ(plan->matmuls, mt * ((s.n + 127) / 128) * ((s.k + 127) / 128));
  }
}

TEST(GemmLowering, LayoutPacksMatricesAligned) {
  GemmLayout layout;
  const uint64_t bytes = pack_gemm_layout({100, 30, 7}, isa::F32, 4096, &layout);
  EXPECT_EQ(layout.a_address, 4096u);
  EXPECT_EQ(layout.b_address, 4096u + 12288u);  // 100 x 30 x 4 = 12000 -> 12288
  EXPECT_EQ(layout.c_address % 4096, 0u);
  EXPECT_EQ(bytes, layout.c_address + 4096 - 4096);
}

}  // namespace gemm_tiling_test
}  // namespace tpusim::runtime
