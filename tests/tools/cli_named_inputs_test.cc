// Imported models fed by their inputs' names rather than images: a token classifier (integer ids
// into an embedding table, and a float mask) on synthetic inputs, and a regression trained with
// the mean squared error on TFRecords of tf.Example written here (a feature per input and
// "label"); evaluate and predict on those records, and what cannot feed them refused.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "estimator/jobs/onnx_job.h"
#include "runtime/data/example.h"
#include "runtime/data/shard_files.h"
#include "runtime/data/tfrecord.h"
#include "sim/numerics/bf16.h"
#include "tests/tools/cli_runner.h"
#include "tests/tools/onnx_text_model.h"

namespace tpusim::cli {
namespace cli_named_inputs_test {

using ::testing::HasSubstr;
using testing::run_tpusim;
using testing::write_model;

// Token ids [N, 4] looked up in a 10-row table of width 2, weighted by `keep`, summed and
// classified in 3.
const char kTokens[] = R"(
<ir_version: 8, opset_import: ["" : 13], producer_name: "handwritten">
tokens (int64[N, 4] ids, float[N, 4] keep) => (float[N, 3] logits)
<float[10, 2] table = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -0.1, 0.2, -0.3, -0.4, 0.5, -0.6, -0.7, 0.8, -0.9, -1.0}, float[2, 3] D = {1, -1, 0.5, -0.5, 1, 0.25}, int64[1] axes = {1}>
{
  E = Gather (table, ids)
  axes2 = Constant <value = int64[1] {2}> ()
  M = Unsqueeze (keep, axes2)
  W = Mul (E, M)
  S = ReduceSum <keepdims = 0> (W, axes)
  logits = MatMul (S, D)
}
)";

// y = x . w + b for x of 3 values.
const char kRegression[] = R"(
<ir_version: 8, opset_import: ["" : 13], producer_name: "handwritten">
regression (float[N, 3] x) => (float[N, 1] y)
<float[3, 1] w = {0.5, -0.25, 1.0}, float[1] b = {0.125}>
{
  h = MatMul (x, w)
  y = Add (h, b)
}
)";

std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-named-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Example i's x: three values in [0, 1) that differ from example to example.
std::vector<float> x_of(int i) {
  return {static_cast<float>((i * 7) % 11) / 11.0f, static_cast<float>((i * 5) % 13) / 13.0f,
          static_cast<float>((i * 3) % 17) / 17.0f};
}
float target_of(const std::vector<float>& x) { return 2.0f * x[0] - x[1] + 0.5f * x[2] + 0.25f; }

// `count` regression records from example `first` on, as a tf.data pipeline would write them.
void write_records(const std::string& path, int first, int count) {
  auto writer = runtime::data::TFRecordWriter::open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int i = first; i < first + count; ++i) {
    const std::vector<float> x = x_of(i);
    runtime::data::ExampleBuilder e;
    e.floats("x", x).floats("label", {target_of(x)});
    ASSERT_TRUE((*writer)->write(e.serialize()).ok());
  }
  ASSERT_TRUE((*writer)->close().ok());
}

TEST(CliNamedInputs, ATokenModelsInputsAreDescribedWithTheirTablesRows) {
  const std::string path = write_model(kTokens, "named-tokens.onnx");
  auto job = jobs::open_onnx_job(path, "", "");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->inputs.size(), 2u);
  EXPECT_EQ(job->inputs[0].name, "ids");
  EXPECT_EQ(job->inputs[0].dtype, runtime::DType::kS32);
  EXPECT_EQ(job->inputs[0].example, runtime::Shape{4});
  EXPECT_EQ(job->inputs[0].id_bound, 10);  // the table's rows
  EXPECT_EQ(job->inputs[1].id_bound, 0);
  EXPECT_TRUE(job->image_input.empty());
  EXPECT_EQ(job->classes, 3);
  std::filesystem::remove(path);
}

// Synthetic ids below the table's rows and keep weights in [0, 1): tpusim's training agrees with
// the cpu's step for step; images cannot feed it.
TEST(CliNamedInputs, ATokenModelTrainsOnSyntheticInputsAsTheCpuDoes) {
  const std::string path = write_model(kTokens, "named-tokens-train.onnx");
  auto r = run_tpusim({"compare", "--onnx", path, "--input", "synthetic", "--steps", "3",
                       "--batch-size", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "agree");
  EXPECT_EQ(j["model"], "named-tokens-train");
  auto images = run_tpusim({"train", "--onnx", path, "--train-steps", "1"});
  EXPECT_EQ(images.exit_code, 2);
  EXPECT_THAT(images.err,
              HasSubstr(path + " takes ids s32[4], keep f32[4], not images: feed them "
                               "with --input synthetic or --input examples --data DIR"));
  std::filesystem::remove(path);
}

// A regression trained with the mean squared error on tf.Example records: the file's weights
// evaluate to the mean of their squared errors over the eval records, training brings it down,
// and predict prints each example's output.
TEST(CliNamedInputs, ARegressionTrainsOnRecordsWithTheMeanSquaredError) {
  const auto dir = scratch("regression");
  const std::string path = write_model(kRegression, "named-regression.onnx");
  const std::string data = (dir / "records").string(), run = (dir / "run").string();
  std::filesystem::create_directories(data);
  write_records(data + "/train-00000-of-00002", 0, 512);
  write_records(data + "/train-00001-of-00002", 512, 512);
  write_records(data + "/eval-00000-of-00001", 2000, 64);
  // The file's weights over the 64 eval examples, with x rounded to bf16 as the cpu backend's
  // "mxu" precision rounds a matmul's operands (w's values are bf16 already).
  const auto bf16 = [](float v) {
    return sim::bits_float(sim::round_bits_to_bf16(sim::float_bits(v)));
  };
  double file_mse = 0;
  for (int i = 2000; i < 2064; ++i) {
    const std::vector<float> x = x_of(i);
    const double y = 0.5 * bf16(x[0]) - 0.25 * bf16(x[1]) + 1.0 * bf16(x[2]) + 0.125;
    file_mse += std::pow(y - target_of(x), 2) / 64;
  }
  const std::vector<std::string> model = {
      "--onnx", path,        "--loss", "mean_squared_error", "--input", "examples", "--data",
      data,     "--backend", "cpu",    "--batch-size",       "32"};
  const auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), model.begin(), model.end());
    return args;
  };
  auto before = run_tpusim(with({"evaluate", "--json"}));
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_NEAR(nlohmann::json::parse(before.out)["mean_squared_error"].get<double>(), file_mse,
              1e-5 * file_mse);

  auto trained =
      run_tpusim(with({"train", "--train-steps", "60", "--iterations-per-loop", "20", "--optimizer",
                       "adam", "--learning-rate", "0.05", "--model-dir", run}));
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  auto after = run_tpusim(with({"evaluate", "--json", "--model-dir", run}));
  ASSERT_EQ(after.exit_code, 0) << after.err;
  const double trained_mse = nlohmann::json::parse(after.out)["mean_squared_error"];
  EXPECT_LT(trained_mse, file_mse / 4) << trained.out;

  auto predicted = run_tpusim(with({"predict", "--json", "--count", "3"}));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  const auto p = nlohmann::json::parse(predicted.out);
  ASSERT_EQ(p.size(), 3u);
  for (const auto& example : p) {
    ASSERT_TRUE(example.contains("output"));
    EXPECT_TRUE(example["output"].is_number());
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

TEST(CliNamedInputs, WhatCannotFeedAModelByNameIsRefused) {
  const std::string path = write_model(kRegression, "named-refused.onnx");
  const auto dir = scratch("refused");
  const auto refusal = [](const std::vector<std::string>& args) {
    auto r = run_tpusim(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.exit_code, -1) << "crashed";
    return r.err;
  };
  EXPECT_THAT(refusal({"train", "--onnx", path, "--input", "synthetic"}),
              HasSubstr("output y f32[N, 1] is no [N, classes] logits for softmax cross-entropy "
                        "(--loss mean_squared_error trains it"));
  EXPECT_THAT(
      refusal({"train", "--onnx", path, "--loss", "mean_squared_error", "--input", "examples"}),
      HasSubstr("--input examples reads the records in --data DIR"));
  EXPECT_THAT(refusal({"train", "--onnx", path, "--loss", "mean_squared_error", "--input",
                       "examples", "--data", dir.string(), "--backend", "cpu"}),
              HasSubstr("no train-* TFRecords in " + dir.string()));
  EXPECT_THAT(refusal({"train", "--onnx", path, "--loss", "hinge"}),
              HasSubstr("--loss: unknown loss 'hinge' (softmax_cross_entropy or "
                        "mean_squared_error)"));
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--loss", "mean_squared_error"}),
              HasSubstr("--loss is for --onnx and --saved-model models"));
  EXPECT_THAT(refusal({"train", "--model", "mlp", "--input", "examples", "--data", dir.string()}),
              HasSubstr("--input examples feeds an --onnx or --saved-model model"));
  // A record without the input's feature is named with the file's model and the feature.
  write_records((dir / "train-00000-of-00001").string(), 0, 4);
  {
    auto writer = runtime::data::TFRecordWriter::open((dir / "train-00000-of-00001").string());
    ASSERT_TRUE(writer.ok());
    runtime::data::ExampleBuilder e;
    e.floats("label", {1.0f});
    ASSERT_TRUE((*writer)->write(e.serialize()).ok());
    ASSERT_TRUE((*writer)->close().ok());
  }
  EXPECT_THAT(refusal({"train", "--onnx", path, "--loss", "mean_squared_error", "--input",
                       "examples", "--data", dir.string(), "--backend", "cpu", "--batch-size", "8",
                       "--train-steps", "1"}),
              HasSubstr("'x'"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove(path);
}

}  // namespace cli_named_inputs_test
}  // namespace tpusim::cli
