#include <string>

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

// tk and tn take up to 4 array tiles; tm the largest power of two up to 1024 that fits 3/4 of
// VMEM: 1024 x 512 x 4 bytes x 2 (A) + 512 x 512 x 4 x 2 (B) + 1024 x 512 x 4 x 2 (C) = 10 MiB.
TEST(GemmTiling, LargeGemmOnV3) {
  auto t = choose_gemm_tiling(v3_8().chip.core, {8192, 8192, 8192}, isa::F32);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tm, 1024u);
  EXPECT_EQ(t->tk, 512u);
  EXPECT_EQ(t->tn, 512u);
}

TEST(GemmTiling, SmallShapesAreOneTile) {
  auto t = choose_gemm_tiling(v3_8().chip.core, {1, 100, 60}, isa::F32);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm, 1u);
  EXPECT_EQ(t->tk, 100u);
  EXPECT_EQ(t->tn, 60u);
  t = choose_gemm_tiling(v3_8().chip.core, {300, 1000, 700}, isa::F32);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm, 300u);
}

config::CoreSpec core_with_vmem(uint64_t bytes) {
  config::CoreSpec core = v3_8().chip.core;
  core.vmem_bytes = bytes;
  return core;
}

// The tiling of an 8192-cube f32 GEMM on a v3 core with `vmem_bytes` of VMEM, as tm x tk x tn.
std::string cube_tiling(uint64_t vmem_bytes) {
  auto t = choose_gemm_tiling(core_with_vmem(vmem_bytes), {8192, 8192, 8192}, isa::F32);
  if (!t.ok()) return std::string(t.status().message());
  return std::to_string(t->tm) + "x" + std::to_string(t->tk) + "x" + std::to_string(t->tn);
}

// 1 MiB of VMEM (768 KiB for the GEMM): 512-wide B slices alone take 1 MiB (2 x 512 x 512 x 4)
// or 512 KiB at tk 128; at 128 x 256 the buffers of 128 rows take 2 x 64 KiB (A) + 2 x 128 KiB
// (B) + 2 x 128 KiB (C) = 640 KiB, and 256 rows would take 1 MiB.
TEST(GemmTiling, SmallVmemShrinksTheSlicesBeforeTheRows) {
  EXPECT_EQ(cube_tiling(1 << 20), "128x128x256");
  // Depth goes first: 2 MiB (1.5 MiB for the GEMM) keeps the 512-wide output tiles, 128 deep:
  // 2 x 64 KiB + 2 x 256 KiB + 2 x 256 KiB = 1.125 MiB (256 deep would take 1.75 MiB).
  EXPECT_EQ(cube_tiling(2 << 20), "128x128x512");
  // 4 MiB still fits the widest slices with 128 rows, exactly: 3 MiB.
  EXPECT_EQ(cube_tiling(4 << 20), "128x512x512");
}

// 64 KiB (48 KiB for the GEMM) holds no 128 x 128 slice twice over; 64 x 64 slices with 16 rows
// take exactly 2 x 4 KiB (A) + 2 x 16 KiB (B) + 2 x 4 KiB (C). 16 KiB cannot hold the 3 x 2
// aligned 4 KiB buffers of the smallest tiles.
TEST(GemmTiling, TinyVmemGoesBelowTheArrayTile) {
  EXPECT_EQ(cube_tiling(64 << 10), "16x64x64");
  EXPECT_THAT(cube_tiling(16 << 10),
              ::testing::HasSubstr("GEMM 8192x8192x8192: even tiles of 8x8x8 need 24576 bytes"));
}

TEST(GemmTiling, EmptyDimensionIsRejected) {
  EXPECT_FALSE(choose_gemm_tiling(v3_8().chip.core, {0, 1, 1}, isa::F32).ok());
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
