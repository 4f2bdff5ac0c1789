// Saved models a C++ program exported, on the CLI: tpusim predict --saved-model on a user's model
// whose predictions are not the zoo's class and probabilities (each example's values by
// prediction name, with its label: it stopped with "internal error: map::at"); a classifier's
// export trained, evaluated and compiled with --saved-model, and what it cannot do refused.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "estimator/checkpoint.h"
#include "estimator/jobs/saved_model_job.h"
#include "estimator/saved_model.h"
#include "runtime/graph/builder.h"
#include "runtime/graph/layers.h"
#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_saved_model_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

TEST(CliSavedModel, AUsersPredictionsArePrintedByName) {
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-saved-model-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  // Each image's brightness (its pixels' sum) and its rows' sums.
  runtime::GraphBuilder b;
  const runtime::Value image = b.infeed("image", runtime::DType::kF32, {4, 28, 28, 1});
  const runtime::Value rows = b.reduce(runtime::Op::kReduceSum, image, {2, 3});
  b.output("prediction/brightness", b.reduce(runtime::Op::kReduceSum, rows, {1}));
  b.output("prediction/row_sums", rows);
  ASSERT_TRUE(b.status().ok()) << b.status();
  const std::string saved = (tmp / "saved").string();
  ASSERT_TRUE(estimator::write_saved_model(saved, b.graph(), {},
                                           {{"image", runtime::DType::kF32, {4, 28, 28, 1}}},
                                           {"brightness", "row_sums"}, 4, 7)
                  .ok());
  const std::string data = (tmp / "data").string();
  auto r = run_tpusim({"predict", "--saved-model", saved, "--data", data, "--count", "5",
                       "--backend", "cpu", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 5u);
  EXPECT_EQ(j[0]["label"], 9);  // the first Fashion-MNIST test image is an ankle boot
  for (const auto& p : j) {
    ASSERT_EQ(p["row_sums"].size(), 28u);
    double total = 0;
    for (const auto& v : p["row_sums"]) total += v.get<double>();
    EXPECT_NEAR(p["brightness"].get<double>(), total, 1e-3);
    EXPECT_GT(total, 0);
  }
  auto text = run_tpusim(
      {"predict", "--saved-model", saved, "--data", data, "--count", "2", "--backend", "cpu"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("    0  {\"brightness\":"));
  EXPECT_THAT(text.out, HasSubstr("\"label\":9}"));
  std::filesystem::remove_all(tmp);
}

// A user's dense classifier as export_saved_model writes it, at `batch` examples a replica:
// logits = flatten(image) x kernel + bias (the node labelled "dense/logits"), predictions class
// and probabilities (its softmax). Returns the weights written.
runtime::Variables write_dense_classifier(const std::string& dir, int64_t batch) {
  runtime::GraphBuilder b;
  const runtime::Value image = b.infeed("image", runtime::DType::kF32, {batch, 28, 28, 1});
  const runtime::Value kernel = b.variable("dense/kernel", runtime::DType::kF32, {784, 10}, {});
  const runtime::Value bias = b.variable("dense/bias", runtime::DType::kF32, {10}, {});
  const runtime::Value logits =
      b.matmul(b.reshape(image, {batch, 784}), kernel) + b.broadcast(bias, {batch, 10}, {1});
  b.mutable_graph().mutable_node(logits.id).label = "dense/logits";
  b.output("prediction/class", b.argmax(logits, 1));
  b.output("prediction/probabilities", runtime::layers::softmax(logits));
  EXPECT_TRUE(b.status().ok()) << b.status();
  runtime::Variables weights;
  std::vector<float> k(784 * 10);
  for (size_t i = 0; i < k.size(); ++i) k[i] = 0.002f * static_cast<float>((i * 7) % 17) - 0.016f;
  weights["dense/kernel"] = runtime::HostTensor::from({784, 10}, k);
  weights["dense/bias"] = runtime::HostTensor::from({10}, std::vector<float>(10, 0.05f));
  EXPECT_TRUE(estimator::write_saved_model(dir, b.graph(), weights,
                                           {{"image", runtime::DType::kF32, {batch, 28, 28, 1}}},
                                           {"class", "probabilities"}, batch, 7)
                  .ok());
  return weights;
}

std::filesystem::path scratch(const std::string& name) {
  const auto tmp = std::filesystem::temp_directory_path() /
                   ("tpusim-cli-saved-model-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(tmp);
  return tmp;
}

// The classifier trains on its logits (the softmax's input), not on the probabilities.
TEST(CliSavedModel, AClassifierTrainsOnTheLogitsItsProbabilitiesAreTheSoftmaxOf) {
  const auto tmp = scratch("logits");
  const std::string saved = (tmp / "dense").string();
  write_dense_classifier(saved, 4);
  auto job = jobs::open_saved_model_job(saved, "");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name, "dense");
  EXPECT_EQ(job->fixed_batch, 4);
  EXPECT_EQ(job->global_step, 7);
  EXPECT_EQ(job->classes, 10);
  EXPECT_EQ(job->image_side, 28);
  runtime::GraphBuilder b;
  const runtime::Value images = b.infeed("image", runtime::DType::kF32, {4, 28, 28, 1});
  auto forward = job->forward(b, {{"image", images}}, {4, true, false});
  ASSERT_TRUE(forward.ok()) << forward.status();
  EXPECT_EQ(b.graph().node(forward->output.id).label, "dense/logits");
  EXPECT_EQ(forward->initial_values.size(), 2u);
  EXPECT_THAT(
      std::string(job->forward(b, {{"image", images}}, {8, true, false}).status().message()),
      HasSubstr("takes 4 examples a replica, not 8"));
  std::filesystem::remove_all(tmp);
}

// train --saved-model starts from the export's weights (a step at learning rate 0 keeps them
// bit for bit), evaluate runs them with or without that training, and compile builds its step.
TEST(CliSavedModel, AnExportTrainsFromItsWeightsEvaluatesAndCompiles) {
  const auto tmp = scratch("train");
  const std::string saved = (tmp / "dense").string(), data = (tmp / "data").string(),
                    model_dir = (tmp / "run").string();
  const runtime::Variables weights = write_dense_classifier(saved, 4);
  auto trained =
      run_tpusim({"train", "--saved-model", saved, "--backend", "cpu", "--optimizer", "sgd",
                  "--learning-rate", "0", "--train-steps", "1", "--iterations-per-loop", "1",
                  "--eval-steps", "1", "--data", data, "--model-dir", model_dir});
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_THAT(trained.out,
              HasSubstr("training dense on the cpu backend (8 cores), global batch 32"));
  auto ckpt = estimator::load_latest_checkpoint(model_dir);
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->global_step, 1);
  for (const auto& [name, value] : weights) EXPECT_EQ((*ckpt)->variables.at(name).f, value.f);

  const auto accuracy = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--backend", "cpu", "--data", data, "--json", "--eval-steps", "5"});
    auto r = run_tpusim(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const auto exported = accuracy({"evaluate", "--saved-model", saved});
  const auto after = accuracy({"evaluate", "--saved-model", saved, "--model-dir", model_dir});
  EXPECT_EQ(exported["global_step"], 7);
  EXPECT_EQ(after["global_step"], 1);
  EXPECT_EQ(exported["accuracy"], after["accuracy"]);  // the same weights
  EXPECT_GT(exported["loss"].get<double>(), 0);

  auto compiled = run_tpusim({"compile", "--saved-model", saved});
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  EXPECT_THAT(compiled.out, HasSubstr("compiled dense (training step, batch 4 per core)"));
  EXPECT_THAT(compiled.out, HasSubstr("7850 parameters"));
  std::filesystem::remove_all(tmp);
}

// A C++ model of token ids (a gather from a 50-row table) and a float weight per token, its
// logits its only prediction: fed by name, its ids drawn below the table's rows.
TEST(CliSavedModel, AnExportOfTokensTrainsOnSyntheticInputsByName) {
  const auto tmp = scratch("tokens");
  const std::string saved = (tmp / "tokens").string();
  runtime::GraphBuilder b;
  const runtime::Value ids = b.infeed("ids", runtime::DType::kS32, {8, 6});
  const runtime::Value weight = b.infeed("weight", runtime::DType::kF32, {8, 6});
  const runtime::Value table = b.variable("embedding", runtime::DType::kF32, {50, 4}, {});
  const runtime::Value kernel = b.variable("dense/kernel", runtime::DType::kF32, {4, 5}, {});
  const runtime::Value embedded = b.gather(table, ids);  // [8, 6, 4]
  const runtime::Value pooled =
      b.reduce(runtime::Op::kReduceSum, embedded * b.broadcast(weight, {8, 6, 4}, {0, 1}), {1});
  b.output("prediction/logits", b.matmul(pooled, kernel));
  ASSERT_TRUE(b.status().ok()) << b.status();
  runtime::Variables weights;
  std::vector<float> e(200), k(20);
  for (size_t i = 0; i < e.size(); ++i) e[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
  for (size_t i = 0; i < k.size(); ++i) k[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  weights["embedding"] = runtime::HostTensor::from({50, 4}, e);
  weights["dense/kernel"] = runtime::HostTensor::from({4, 5}, k);
  ASSERT_TRUE(estimator::write_saved_model(
                  saved, b.graph(), weights,
                  {{"ids", runtime::DType::kS32, {8, 6}}, {"weight", runtime::DType::kF32, {8, 6}}},
                  {"logits"}, 8, 3)
                  .ok());
  auto job = jobs::open_saved_model_job(saved, "");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->inputs.size(), 2u);
  EXPECT_EQ(job->inputs[0].id_bound, 50);
  EXPECT_EQ(job->inputs[1].id_bound, 0);
  EXPECT_TRUE(job->image_input.empty());
  EXPECT_EQ(job->classes, 5);
  auto r = run_tpusim(
      {"compare", "--saved-model", saved, "--input", "synthetic", "--steps", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["verdict"], "agree");
  std::filesystem::remove_all(tmp);
}

TEST(CliSavedModel, WhatAnExportCannotRunIsRefused) {
  const auto tmp = scratch("refused");
  const std::string saved = (tmp / "dense").string();
  write_dense_classifier(saved, 4);
  const auto refusal = [](const std::vector<std::string>& args) {
    auto r = run_tpusim(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(r.exit_code == -1, false) << "crashed";
    return r.err;
  };
  EXPECT_THAT(refusal({"train", "--saved-model", saved, "--batch-size", "12"}),
              HasSubstr("dense's graph takes 4 examples a replica (its shapes are fixed when it "
                        "is exported); on 8 replicas that is a batch of 32, not 12"));
  EXPECT_THAT(refusal({"compile", "--saved-model", saved, "--batch", "3"}),
              HasSubstr("on 1 replica that is a batch of 4, not 3"));
  EXPECT_THAT(refusal({"train", "--saved-model", saved, "--dtype-policy", "mixed_bfloat16"}),
              HasSubstr("keeps the dtypes it was exported with"));
  EXPECT_THAT(refusal({"train", "--saved-model", saved, "--saved-model-output", "class"}),
              HasSubstr("output class s32[N] is no float output with the batch first"));
  EXPECT_THAT(refusal({"train", "--saved-model", saved, "--onnx", "m.onnx"}),
              HasSubstr("--onnx and --saved-model each name a model: give one"));
  EXPECT_THAT(refusal({"train", "--saved-model", saved, "--model", "mlp"}),
              HasSubstr("--saved-model and --model each name a model: give one"));
  EXPECT_THAT(refusal({"train", "--saved-model", (tmp / "none").string()}),
              HasSubstr("no saved model at"));
  std::filesystem::remove_all(tmp);
}

}  // namespace cli_saved_model_test
}  // namespace tpusim::cli
