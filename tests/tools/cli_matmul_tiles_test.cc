// tpusim matmul's tiles: the compiler's choice, its estimate and the roofline bound printed beside
// the simulated time, and --tiles to run others.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_matmul_tiles_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

nlohmann::json matmul_json(std::vector<std::string> extra) {
  std::vector<std::string> args = {"matmul", "--config",      "v5e-4", "--m",  "2048",
                                   "--k",    "2048",          "--n",   "2048", "--input-dtype",
                                   "bf16",   "--timing-only", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_tpusim(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

// v5e's 128 MiB of VMEM takes 1024-cube tiles; the fixed 1024 x 512 x 512 of before reads A
// twice as often and runs 12% slower. The roof is the same for both; the estimate follows each.
TEST(CliMatmulTiles, TheChosenTilesBeatTheOldFixedOnesAndBothShowTheirRoof) {
  const auto chosen = matmul_json({});
  const auto fixed = matmul_json({"--tiles", "1024x512x512"});
  ASSERT_TRUE(chosen.contains("tiling") && fixed.contains("tiling"));
  EXPECT_EQ(chosen["tiling"]["tm"], 1024);
  EXPECT_EQ(chosen["tiling"]["tk"], 1024);
  EXPECT_EQ(chosen["tiling"]["tn"], 1024);
  EXPECT_EQ(fixed["tiling"]["tk"], 512);
  EXPECT_EQ(chosen["cycles"], 148654);
  EXPECT_EQ(fixed["cycles"], 165982);
  EXPECT_EQ(chosen["roofline_seconds"], fixed["roofline_seconds"]);
  // 2 x 2048^3 FLOPs at 196.6 TFLOPS: the MXU bounds it (the bytes take 41 us at 819 GB/s).
  EXPECT_NEAR(chosen["roofline_seconds"].get<double>(), 2.0 * 2048 * 2048 * 2048 / 196.608e12,
              1e-12);
  EXPECT_NEAR(chosen["fraction_of_roofline"].get<double>(),
              chosen["roofline_seconds"].get<double>() / chosen["seconds"].get<double>(), 1e-12);
  for (const auto* run : {&chosen, &fixed}) {
    EXPECT_NEAR((*run)["estimate_seconds"].get<double>() / (*run)["seconds"].get<double>(), 1.0,
                0.1);
  }
}

TEST(CliMatmulTiles, TilesThatCannotRunAreRefusedSayingWhy) {
  auto r = run_tpusim({"matmul", "--m", "4096", "--k", "4096", "--n", "4096", "--timing-only",
                       "--tiles", "4096x1024x1024"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tiles 4096x1024x1024 need 75497472 bytes of VMEM; the core has "
                               "16777216 (GEMMs use 3/4 of it: 12582912)"));
  for (const char* bad : {"12x-3x4", "12x3", "0x8x8", "8x8x8x", "axbxc", "99999999999x8x8",
                          " 8x8x8", "+8x8x8", "8 x 8 x 8"}) {
    r = run_tpusim({"matmul", "--m", "64", "--k", "64", "--n", "64", "--tiles", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--tiles must be TMxTKxTN, three positive numbers")) << bad;
  }
}

// 1x1x1 tiles of a 128-cube GEMM are 2^21 tiles: a program of instructions for each took 3.2 GB
// and 20 s before its first cycle. Refused before anything is built; 4x4x4 (32,768 tiles) runs.
TEST(CliMatmulTiles, TilesPastTheBoundAreRefusedBeforeTheProgramIsBuilt) {
  auto r = run_tpusim(
      {"matmul", "--m", "128", "--k", "128", "--n", "128", "--timing-only", "--tiles", "1x1x1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tiles 1x1x1 make 2097152 tiles of the 128x128x128 GEMM, past the "
                               "bound of 65536 a given tiling may make"));
  EXPECT_THAT(r.err, HasSubstr("the compiler's tiles 128x128x128 make 1"));
  r = run_tpusim(
      {"matmul", "--m", "128", "--k", "128", "--n", "128", "--timing-only", "--tiles", "4x4x4"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Tiles that do not divide the GEMM compute the same product.
TEST(CliMatmulTiles, OddTilesComputeTheSameProduct) {
  const auto r = run_tpusim(
      {"matmul", "--m", "100", "--k", "100", "--n", "100", "--tiles", "24x40x8", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(nlohmann::json::parse(r.out)["max_rel_error_vs_bf16_ref"].get<double>(), 1e-5);
}

}  // namespace cli_matmul_tiles_test
}  // namespace tpusim::cli
