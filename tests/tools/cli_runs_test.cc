// CLI runs that start training processes: compile and train under their options (dtype policy,
// synthetic input, replica folding, the fusions) and the numerics thread against inline numerics.
// `tpusim sweep` in one process is cli_sweep_test.cc; across MPI ranks, cli_mpi_test.cc.
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_runs_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

// compile builds the step under either dtype policy: mixed_bfloat16 adds the casts of the
// variables to bf16 (an op of its own) and the roundings of bf16 results on the vector unit.
TEST(Cli, CompileBuildsEitherDtypePolicy) {
  std::map<std::string, nlohmann::json> compiled;
  for (const char* policy : {"float32", "mixed_bfloat16"}) {
    auto r = run_tpusim(
        {"compile", "--model", "mlp", "--batch", "8", "--json", "--dtype-policy", policy});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    compiled[policy] = nlohmann::json::parse(r.out);
    EXPECT_EQ(compiled[policy]["dtype_policy"], policy);
  }
  EXPECT_FALSE(compiled["float32"]["instructions_per_op"].contains("cast"));
  EXPECT_TRUE(compiled["mixed_bfloat16"]["instructions_per_op"].contains("cast"));
  EXPECT_GT(compiled["mixed_bfloat16"]["instructions_per_unit"]["vpu"].get<int>(),
            compiled["float32"]["instructions_per_unit"]["vpu"].get<int>());
  auto r = run_tpusim({"compile", "--model", "mlp", "--dtype-policy", "bf16"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--dtype-policy: unknown dtype policy 'bf16'"));
}

// train under mixed_bfloat16: the report names the policy, and on tpusim the run says what its
// step time does not model yet.
TEST(Cli, TrainReportsItsDtypePolicy) {
  const std::string dir = ::testing::TempDir() + "tpusim-mixed-train";
  std::filesystem::remove_all(dir);
  auto r = run_tpusim({"train", "--model", "mlp", "--train-steps", "2", "--iterations-per-loop",
                       "1", "--timing-only", "--host-timing", "config", "--dtype-policy",
                       "mixed_bfloat16", "--model-dir", dir, "--report", dir + "/report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("training mlp (mixed_bfloat16) on v3-8"));
  EXPECT_THAT(r.out,
              HasSubstr("note: tpusim charges bf16 transfers and HBM footprints at 2 bytes"));
  std::ifstream in(dir + "/report.json");
  EXPECT_EQ(nlohmann::json::parse(in)["dtype_policy"], "mixed_bfloat16");
  std::filesystem::remove_all(dir);
}

// --precision: the cpu backend computes what it is told and says so, at the start and in the
// report (fp32 and mxu losses differ from the first step: mxu rounds the matmul inputs); tpusim
// computes only the MXU's way and refuses fp32 rather than ignore it.
TEST(Cli, TrainSaysWhichPrecisionItComputes) {
  const std::string dir = ::testing::TempDir() + "tpusim-precision-train";
  std::map<std::string, nlohmann::json> reports;
  for (const char* precision : {"fp32", "mxu"}) {
    std::filesystem::remove_all(dir);
    auto r =
        run_tpusim({"train", "--model", "mlp", "--backend", "cpu", "--precision", precision,
                    "--input", "synthetic", "--train-steps", "1", "--iterations-per-loop", "1",
                    "--batch-size", "64", "--model-dir", dir, "--report", dir + "/report.json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(std::string(", ") + precision + " precision; model_dir"));
    std::ifstream in(dir + "/report.json");
    reports[precision] = nlohmann::json::parse(in);
    EXPECT_EQ(reports[precision]["precision"], precision);
  }
  EXPECT_NE(reports["fp32"]["final_loss"], reports["mxu"]["final_loss"]);
  auto r = run_tpusim({"train", "--precision", "fp32"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("'--precision fp32': tpusim's precision is its MXU's (bf16 "
                               "products), not an option"));
  r = run_tpusim({"evaluate", "--model-dir", dir, "--backend", "cpu", "--precision", "bf16"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--precision must be mxu or fp32 (got 'bf16')"));
  std::filesystem::remove_all(dir);
}

// --input synthetic, TensorFlow's fake data: no files are read or converted (the --data folder is
// never made), the host's stages cost nothing, and the host link still carries each step's batch:
// a chip's PCIe link takes both its cores' 128 images of 28x28 f32 and labels (2 x 401,920 bytes
// at 16 GB/s: 50.2 us), which with one step per loop the cores wait for every step. Train only.
TEST(Cli, SyntheticInputNeedsNoFilesAndChargesOnlyTheHostLink) {
  const std::string dir = ::testing::TempDir() + "tpusim-synthetic-train";
  std::filesystem::remove_all(dir);
  auto r = run_tpusim({"train", "--model", "mlp", "--input", "synthetic", "--train-steps", "2",
                       "--iterations-per-loop", "1", "--timing-only", "--data", dir + "/no-data",
                       "--model-dir", dir + "/model", "--report", dir + "/report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/no-data"));
  std::ifstream in(dir + "/report.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["input"], "synthetic");
  const double input = report["step_breakdown"]["input"].get<double>();
  EXPECT_GT(input, 50.2e-6);
  EXPECT_LT(input, 60e-6);
  for (const auto& stage : report["analysis"]["host_stages"])
    EXPECT_EQ(stage["seconds_per_step"].get<double>(), 0) << stage;

  r = run_tpusim(
      {"evaluate", "--model", "mlp", "--model-dir", dir + "/model", "--input", "synthetic"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--input synthetic is for train's performance runs"));
  std::filesystem::remove_all(dir);
}

// --fold-replicas: v4-128's 16 hosts read the 10 Fashion-MNIST shards (each host keeps its share
// of the examples), and only the first host's 8 replicas are simulated; the other 120 cores
// only join the all-reduces. Folding needs --timing-only.
TEST(Cli, TrainFoldsAPodOntoItsFirstHost) {
  const std::string dir = ::testing::TempDir() + "tpusim-fold-train";
  std::filesystem::remove_all(dir);
  auto r = run_tpusim({"train",
                       "--model",
                       "mlp",
                       "--config",
                       "v4-128",
                       "--batch-size",
                       "1024",
                       "--train-steps",
                       "2",
                       "--iterations-per-loop",
                       "1",
                       "--timing-only",
                       "--host-timing",
                       "config",
                       "--fold-replicas",
                       "on",
                       "--model-dir",
                       dir,
                       "--report",
                       dir + "/report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("replica folding: replicas 0..7 (the first host's) simulated, "
                               "120 only join the collectives"));
  std::ifstream in(dir + "/report.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["fold_replicas"], true);
  EXPECT_EQ(report["steps_run"], 2);
  EXPECT_GT(report["analysis"]["step_breakdown"]["all_reduce"].get<double>(), 0);
  std::filesystem::remove_all(dir);
  r = run_tpusim({"train", "--config", "v4-128", "--fold-replicas", "on"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fold-replicas needs --timing-only"));
}

// The simulator's numerics run on a second host thread (sim/units/numerics_worker.h); with
// TPUSIM_NUMERICS_THREAD=0 they run inline. A few mnist_cnn steps (DMAs, im2col on the vector
// unit, matmuls, all-reduces, infeed and outfeed) end with bitwise the same weights.
TEST(Cli, TheNumericsThreadChangesNoValue) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-threads-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::string fingerprint[2];
  for (int inline_numerics = 0; inline_numerics < 2; ++inline_numerics) {
    const std::string report = (tmp / ("report" + std::to_string(inline_numerics))).string();
    auto r =
        run_tpusim({"train", "--model", "mnist_cnn", "--data", (tmp / "data").string(),
                    "--model-dir", (tmp / ("model" + std::to_string(inline_numerics))).string(),
                    "--batch-size", "64", "--train-steps", "3", "--iterations-per-loop", "3",
                    "--eval-steps", "1", "--report", report},
                   "", {{"TPUSIM_NUMERICS_THREAD", inline_numerics ? "0" : "1"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(report);
    fingerprint[inline_numerics] = nlohmann::json::parse(in)["weights_fingerprint"];
  }
  EXPECT_EQ(fingerprint[0], fingerprint[1]);
  std::filesystem::remove_all(tmp);
}

// No op of chip 0 outruns its roofs: its time spans both cores' work (sim/stats/op_profile.h),
// so its HBM bytes and FLOPs fit in what the chip can do in that time. The time at the roofs is
// the floor the roof fraction holds the op against: never more than its simulated time, and for
// an op with FLOPs that fraction of it.
void expect_ops_under_their_roofs(const nlohmann::json& report) {
  const auto& roofs = report["roofline"];
  for (const auto& op : report["ops"]) {
    const double seconds = op["seconds"].get<double>();
    if (seconds <= 0) continue;
    const std::string name = op["label"].get<std::string>();
    EXPECT_LE(op["hbm_bytes"].get<double>() / seconds,
              roofs["hbm_bytes_per_second"].get<double>() * 1.001)
        << name;
    EXPECT_LE(op["flops"].get<double>() / seconds,
              roofs["peak_flops"].get<double>() + roofs["peak_vector_flops"].get<double>())
        << name;
    EXPECT_LE(op["roof_fraction"].get<double>(), 1.001) << name;
    const double at_roof = op["roof_seconds"].get<double>();
    EXPECT_LE(at_roof, seconds * 1.001) << name;
    if (op["unit"] == "ici") {
      EXPECT_EQ(at_roof, 0) << name;
      continue;
    }
    if (op["flops"].get<double>() > 0) {
      EXPECT_NEAR(at_roof, op["roof_fraction"].get<double>() * seconds, 1e-9 + 1e-6 * seconds)
          << name;
    }
    if (op["hbm_bytes"].get<double>() > 0) {
      EXPECT_GT(at_roof, 0) << name;
    }
  }
}

// --fuse-convolutions on (the default) keeps mnist_cnn's im2col patches in VMEM: the step
// moves far fewer HBM bytes and takes less device time; compile shows the fragments and the
// smaller footprint. Only tpusim times it.
TEST(Cli, FusedConvolutionsKeepThePatchesOutOfHbm) {
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tpusim-cli-fuse-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  std::map<std::string, nlohmann::json> report, compiled;
  for (const char* fuse : {"on", "off"}) {
    const std::string file = (tmp / (std::string(fuse) + ".json")).string();
    auto r = run_tpusim({"train",
                         "--model",
                         "mnist_cnn",
                         "--data",
                         (tmp / "data").string(),
                         "--model-dir",
                         (tmp / fuse).string(),
                         "--batch-size",
                         "64",
                         "--train-steps",
                         "2",
                         "--iterations-per-loop",
                         "2",
                         "--timing-only",
                         "--host-timing",
                         "config",
                         "--fuse-convolutions",
                         fuse,
                         "--report",
                         file});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream in(file);
    report[fuse] = nlohmann::json::parse(in);
    r = run_tpusim(
        {"compile", "--model", "mnist_cnn", "--batch", "8", "--json", "--fuse-convolutions", fuse});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    compiled[fuse] = nlohmann::json::parse(r.out);
  }
  auto hbm_bytes = [&](const char* fuse) {
    double bytes = 0;
    for (const auto& op : report[fuse]["ops"]) bytes += op["hbm_bytes"].get<double>();
    return bytes;
  };
  // 164 MB against 230 MB a step on chip 0 at 8 images per core (1.15 GB against 2.19 GB at the
  // demo's 128): what is left is mostly the max pools' and the elementwise ops' traffic.
  EXPECT_LT(hbm_bytes("on"), 0.75 * hbm_bytes("off"));
  EXPECT_LT(report["on"]["analysis"]["step_breakdown"]["compute"].get<double>(),
            report["off"]["analysis"]["step_breakdown"]["compute"].get<double>());
  for (const char* fuse : {"on", "off"}) expect_ops_under_their_roofs(report[fuse]);
  // The HBM account: the ops' bytes by op beside the graph's floor, the same floor fused or not
  // (one graph), the fused step nearer it.
  for (const char* fuse : {"on", "off"}) {
    const auto& account = report[fuse]["hbm_account"];
    EXPECT_NEAR(account["bytes"].get<double>(), hbm_bytes(fuse), 1e-6 * hbm_bytes(fuse)) << fuse;
    double by_op = 0;
    for (const auto& op : account["by_op"]) by_op += op["bytes"].get<double>();
    EXPECT_NEAR(by_op, hbm_bytes(fuse), 1e-6 * hbm_bytes(fuse)) << fuse;
    const auto& floor = account["floor"];
    EXPECT_GT(floor["saved_activations"].get<double>(), 0) << fuse;
    // 8 images a core (64 over v3-8's 8), two cores on chip 0: 16 f32 images of 28 x 28 and
    // their 16 s32 labels, read once.
    EXPECT_EQ(floor["inputs"].get<double>(), 16 * 28 * 28 * 4 + 16 * 4) << fuse;
    EXPECT_NEAR(floor["total"].get<double>(),
                floor["inputs"].get<double>() + floor["variables"].get<double>() +
                    floor["gradients"].get<double>() + floor["saved_activations"].get<double>(),
                1.0)
        << fuse;
    EXPECT_GT(account["over_floor"].get<double>(), 1.0) << fuse;
  }
  EXPECT_EQ(report["on"]["hbm_account"]["floor"], report["off"]["hbm_account"]["floor"]);
  EXPECT_LT(report["on"]["hbm_account"]["over_floor"].get<double>(),
            report["off"]["hbm_account"]["over_floor"].get<double>());
  EXPECT_EQ(compiled["on"]["fused_convolutions"], 5);
  EXPECT_EQ(compiled["off"]["fused_convolutions"], 0);
  EXPECT_LT(compiled["on"]["hbm_tensors_peak_bytes"].get<uint64_t>(),
            compiled["off"]["hbm_tensors_peak_bytes"].get<uint64_t>());
  auto r = run_tpusim({"train", "--backend", "cpu", "--fuse-convolutions", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fuse-convolutions needs the tpusim backend"));
  std::filesystem::remove_all(tmp);
}

// --fuse-pools on (the default) computes mnist_cnn's max pools and their gradients from the
// images in VMEM: compile counts the fragments, the step needs fewer instructions and less HBM
// at its peak. Only tpusim times it.
TEST(Cli, FusedPoolsNeedNoWindowsInHbm) {
  std::map<std::string, nlohmann::json> compiled;
  for (const char* fuse : {"on", "off"}) {
    auto r = run_tpusim(
        {"compile", "--model", "mnist_cnn", "--batch", "8", "--json", "--fuse-pools", fuse});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    compiled[fuse] = nlohmann::json::parse(r.out);
  }
  EXPECT_EQ(compiled["on"]["fused_pools"], 4);
  EXPECT_EQ(compiled["off"]["fused_pools"], 0);
  EXPECT_EQ(compiled["on"]["instructions_per_op"].count("extract_patches"), 0u);
  EXPECT_GT(compiled["off"]["instructions_per_op"]["extract_patches"].get<uint64_t>(), 0u);
  EXPECT_LT(compiled["on"]["instructions"].get<uint64_t>(),
            compiled["off"]["instructions"].get<uint64_t>());
  EXPECT_LT(compiled["on"]["hbm_tensors_peak_bytes"].get<uint64_t>(),
            compiled["off"]["hbm_tensors_peak_bytes"].get<uint64_t>());
  auto r = run_tpusim({"train", "--backend", "cpu", "--fuse-pools", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fuse-pools needs the tpusim backend"));
}

// resnet_small's batch norms: its reductions take their elementwise inputs into their own
// fragments, whose values never make a round trip through HBM (fewer DMAs), and the option turns
// that off. (The step's HBM peak is the same either way: it is set where the backward pass holds
// the activations, after those inputs are dead. Producers written by their reductions and groups
// recomputed by their readers stay off in both: which groups a reduction takes in, and so which
// ones its readers recompute, moves where a ReLU gradient's inputs die.)
TEST(Cli, FusedReductionsKeepTheirInputsOutOfHbm) {
  std::map<std::string, nlohmann::json> compiled;
  for (const char* fuse : {"on", "off"}) {
    auto r = run_tpusim({"compile", "--model", "resnet_small", "--batch", "8", "--json",
                         "--fuse-reductions", fuse, "--fuse-producers", "off",
                         "--fuse-conv-producers", "off"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    compiled[fuse] = nlohmann::json::parse(r.out);
  }
  EXPECT_GT(compiled["on"]["fused_reductions"].get<uint64_t>(), 10u);
  EXPECT_EQ(compiled["off"]["fused_reductions"], 0);
  EXPECT_EQ(compiled["on"]["hbm_tensors_peak_bytes"], compiled["off"]["hbm_tensors_peak_bytes"]);
  EXPECT_LT(compiled["on"]["instructions_per_unit"]["dma"].get<uint64_t>(),
            compiled["off"]["instructions_per_unit"]["dma"].get<uint64_t>());
  auto r = run_tpusim({"train", "--backend", "cpu", "--fuse-reductions", "off"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fuse-reductions needs the tpusim backend"));
}

}  // namespace cli_runs_test
}  // namespace tpusim::cli
