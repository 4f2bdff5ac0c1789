// tpusim predict --saved-model on a user's model whose predictions are not the zoo's class and
// probabilities: each example's values by prediction name, with its label (it stopped with
// "internal error: map::at").
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "estimator/saved_model.h"
#include "runtime/graph/builder.h"
#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace {

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

}  // namespace
}  // namespace tpusim::cli
