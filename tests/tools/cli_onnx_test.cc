// tpusim import and train --onnx on small models written in ONNX's text syntax: the summary and
// its JSON, a model with an op tpusim lacks (listed, exit 1), a file that is not a model, and an
// imported CNN training on synthetic images (its loss falls) and timing-only on a slice.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/onnx/resnet50_onnx.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/onnx_text_model.h"

namespace tpusim::cli {
namespace cli_onnx_test {

using ::testing::HasSubstr;
using testing::run_tpusim;
using testing::write_model;

// A one-convolution classifier of 8x8x1 images, as tf2onnx writes Keras's (an NHWC input
// transposed to NCHW), ending in a Softmax.
const char kCnn[] = R"(
<ir_version: 8, opset_import: ["" : 13], producer_name: "handwritten">
cnn (float[N, 8, 8, 1] image) => (float[N, 3] probabilities)
<float[4, 1, 3, 3] K = {1, 0, -1, 2, 0, -2, 1, 0, -1, 1, 2, 1, 0, 0, 0, -1, -2, -1, 0.5, 0.5, 0.5, 0.5, 1, 0.5, 0.5, 0.5, 0.5, 0, 0, 0, 0, 1, 0, 0, 0, 0}, float[4] KB = {0.1, -0.1, 0, 0.2}, float[4, 3] D = {1, -1, 0.5, -0.5, 1, 0.25, 0.3, 0.2, -1, 1, 0, -0.5}, float[3] DB = {0, 0.1, -0.1}>
{
  T = Transpose <perm = [0, 3, 1, 2]> (image)
  C = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (T, K, KB)
  R = Relu (C)
  P = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (R)
  G = GlobalAveragePool (P)
  F = Flatten (G)
  M = MatMul (F, D)
  L = Add (M, DB)
  probabilities = Softmax <axis = 1> (L)
}
)";

TEST(CliOnnx, ImportPrintsTheModelsInputsOpsAndSize) {
  const std::string path = write_model(kCnn, "cli-cnn.onnx");
  auto r = run_tpusim({"import", path, "--batch", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(path + ": handwritten, opset 13"));
  EXPECT_THAT(r.out,
              HasSubstr("inputs       image f32[4, 8, 8, 1] (the first dimension is the batch)"));
  EXPECT_THAT(r.out, HasSubstr("9 nodes: Add 1, Conv 1, Flatten 1, GlobalAveragePool 1, MatMul 1, "
                               "MaxPool 1, Relu 1, Softmax 1, Transpose 1"));
  EXPECT_THAT(r.out, HasSubstr("parameters   55 (55 trainable, 0 batch-norm statistics)"));
  // 8x8 outputs x 4 filters x 9 taps + 4 x 3, 2 FLOPs a multiply-accumulate.
  EXPECT_THAT(r.out, HasSubstr("FLOPs        0.004632 M per example"));
  auto json = run_tpusim({"import", path, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["parameters"], 55);
  EXPECT_EQ(j["ops"]["Conv"], 1);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::array({1, 8, 8, 1}));
  EXPECT_TRUE(j["unsupported"].empty());
  std::filesystem::remove(path);
}

TEST(CliOnnx, ImportListsEveryUnsupportedNodeAndFailsOnAFileThatIsNotAModel) {
  std::string text = kCnn;
  text.replace(text.find("R = Relu (C)"), 12, "R = Celu (C)");
  const std::string path = write_model(text, "cli-celu.onnx");
  auto r = run_tpusim({"import", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("unsupported  Celu (node 'R')"));
  EXPECT_THAT(r.out, HasSubstr("tpusim imports Add, AveragePool,"));
  auto train = run_tpusim({"train", "--onnx", path, "--input", "synthetic", "--timing-only"});
  EXPECT_EQ(train.exit_code, 1);
  EXPECT_THAT(train.err, HasSubstr("tpusim does not import Celu (node 'R')"));
  std::ofstream(path, std::ios::binary) << "definitely not protobuf";
  auto junk = run_tpusim({"import", path});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_THAT(junk.err, HasSubstr(path + ": not an ONNX model"));
  auto both = run_tpusim({"train", "--onnx", path, "--model", "mlp"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("--onnx and --model each name a model: give one"));
  std::filesystem::remove(path);
}

// An input of 10^12 elements an example: synthetic input asked the host for 4 TB a batch and the
// run ended in an unnamed "internal error: std::bad_alloc". One example must fit a tf.Example
// record (2 GiB, protobuf's limit), so no input pipeline could feed it: refused naming the input.
TEST(CliOnnx, AnInputOfATrillionElementsAnExampleIsRefused) {
  const std::string path = write_model(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 1000000, 1000000] X) => (float[N, 1000000, 1000000] Y)
{
  Y = Relu (X)
}
)",
                                       "cli-huge.onnx");
  auto r = run_tpusim({"train", "--onnx", path, "--input", "synthetic", "--timing-only", "--loss",
                       "mean_squared_error", "--train-steps", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cli-huge.onnx: input X f32[N, 1000000, 1000000] is "
                               "4000000000000 bytes an example; a tf.Example record (a protobuf "
                               "message) holds at most 2 GiB"));
  std::filesystem::remove(path);
}

// The imported CNN trains from the file's weights on synthetic 8x8x1 images of 3 classes (the
// model's own input and output sizes): its loss falls on the cpu; and a timing-only step on a
// v3-8 prints its time.
TEST(CliOnnx, AnImportedModelTrainsAndTimes) {
  const std::string path = write_model(kCnn, "cli-train.onnx");
  const std::string dir = ::testing::TempDir() + "cli-onnx-train";
  std::filesystem::remove_all(dir);
  auto r =
      run_tpusim({"train", "--onnx", path, "--backend", "cpu", "--input", "synthetic",
                  "--batch-size", "32", "--train-steps", "30", "--iterations-per-loop", "10",
                  "--learning-rate", "0.05", "--model-dir", dir, "--report", dir + "/report.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("training cli-train on the cpu backend"));
  std::ifstream in(dir + "/report.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_LT(report["final_loss"].get<double>(), 0.9 * std::log(3.0));
  std::filesystem::remove_all(dir);
  auto timing = run_tpusim({"train", "--onnx", path, "--input", "synthetic", "--timing-only",
                            "--batch-size", "64", "--train-steps", "2", "--iterations-per-loop",
                            "1", "--host-timing", "config", "--model-dir", dir});
  ASSERT_EQ(timing.exit_code, 0) << timing.err;
  EXPECT_THAT(timing.out, HasSubstr("step time "));
  EXPECT_THAT(timing.out, HasSubstr("no loss or accuracy (timing-only"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

// compare --onnx trains the imported model on tpusim and the cpu from the file's weights (the
// baseline's run from them nudged one ulp): they agree.
TEST(CliOnnx, CompareAgreesOnAnImportedModel) {
  const std::string path = write_model(kCnn, "cli-compare.onnx");
  auto r = run_tpusim({"compare", "--onnx", path, "--input", "synthetic", "--steps", "3",
                       "--batch-size", "16", "--baseline-runs", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "cli-compare");
  EXPECT_THAT(r.out, HasSubstr("\"verdict\": \"agree\""));
  std::filesystem::remove(path);
}

// evaluate and predict take --onnx: the file's weights where no training has run (global step
// 0), the newest checkpoint of a `train --onnx` model_dir otherwise; both on Fashion-MNIST.
TEST(CliOnnx, EvaluateAndPredictRunTheFilesWeightsOrATrainedCheckpoint) {
  std::string text = kCnn;
  text.replace(text.find("float[N, 8, 8, 1] image"), 23, "float[N, 28, 28, 1] image");
  const std::string path = write_model(text, "cli-eval.onnx");
  const auto tmp = std::filesystem::path(::testing::TempDir()) / "cli-onnx-eval";
  std::filesystem::remove_all(tmp);
  const std::string data = (tmp / "data").string(), dir = (tmp / "model").string();
  const std::vector<std::string> common = {"--onnx", path, "--backend",    "cpu",
                                           "--data", data, "--batch-size", "64"};
  auto args = [&common](std::vector<std::string> head) {
    head.insert(head.end(), common.begin(), common.end());
    return head;
  };
  auto untrained = run_tpusim(args({"evaluate", "--eval-steps", "2", "--json"}));
  ASSERT_EQ(untrained.exit_code, 0) << untrained.err;
  auto before = nlohmann::json::parse(untrained.out);
  EXPECT_EQ(before["global_step"], 0);
  auto train =
      run_tpusim(args({"train", "--train-steps", "20", "--iterations-per-loop", "10",
                       "--learning-rate", "0.01", "--eval-steps", "2", "--model-dir", dir}));
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto trained = run_tpusim(args({"evaluate", "--eval-steps", "2", "--json", "--model-dir", dir}));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto after = nlohmann::json::parse(trained.out);
  EXPECT_EQ(after["global_step"], 20);
  EXPECT_LT(after["loss"].get<double>(), before["loss"].get<double>());
  auto predicted = run_tpusim(args({"predict", "--count", "3", "--json", "--model-dir", dir}));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  const auto p = nlohmann::json::parse(predicted.out);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& e : p) {
    EXPECT_GE(e["class"].get<int>(), 0);
    EXPECT_LT(e["class"].get<int>(), 3);
  }
  std::filesystem::remove_all(tmp);
  std::filesystem::remove(path);
}

// ResNet-50 v1.5 as an NCHW ONNX file (resnet50_onnx.h) is the zoo's network: on a v3-8 its
// timing-only step takes the zoo model's time to the nanosecond (the graphs compile to the same
// program: the images are held NHWC from the infeed on).
TEST(CliOnnx, ResNet50FromOnnxStepsAsTheZoos) {
  const std::string path = ::testing::TempDir() + "cli-resnet50.onnx";
  std::ofstream(path, std::ios::binary)
      << runtime::onnx_import::testing::resnet50_v15(1).SerializeAsString();
  const std::string dir = ::testing::TempDir() + "cli-onnx-resnet50";
  std::string step_time[2];
  for (int i = 0; i < 2; ++i) {
    std::filesystem::remove_all(dir);
    std::vector<std::string> args = {"train",
                                     "--config",
                                     "v3-8",
                                     "--input",
                                     "synthetic",
                                     "--batch-size",
                                     "16",
                                     "--timing-only",
                                     "--train-steps",
                                     "1",
                                     "--optimizer",
                                     "momentum",
                                     "--host-timing",
                                     "config",
                                     "--model-dir",
                                     dir};
    if (i == 0) {
      args.insert(args.end(), {"--model", "resnet50"});
    } else {
      args.insert(args.end(), {"--onnx", path});
    }
    auto r = run_tpusim(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const size_t at = r.out.find("step time ");
    ASSERT_NE(at, std::string::npos) << r.out;
    step_time[i] = r.out.substr(at, r.out.find('\n', at) - at);
  }
  EXPECT_EQ(step_time[1], step_time[0]);
  EXPECT_EQ(step_time[0], "step time 10.073 ms (average of 1 step(s); the slowest core each step)");
  // tpusim compile --onnx: the same program, instruction for instruction, in float32 and under
  // mixed_bfloat16 (its casts where the zoo's are).
  for (const char* policy : {"float32", "mixed_bfloat16"}) {
    nlohmann::json compiled[2];
    for (int i = 0; i < 2; ++i) {
      auto r = run_tpusim({"compile", i == 0 ? "--model" : "--onnx", i == 0 ? "resnet50" : path,
                           "--batch", "2", "--dtype-policy", policy, "--json"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      compiled[i] = nlohmann::json::parse(r.out);
    }
    EXPECT_EQ(compiled[1]["instructions"], compiled[0]["instructions"]) << policy;
    EXPECT_EQ(compiled[1]["hbm_footprint_bytes"], compiled[0]["hbm_footprint_bytes"]) << policy;
    EXPECT_EQ(compiled[1]["parameters"], 25610152);
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

}  // namespace cli_onnx_test
}  // namespace tpusim::cli
