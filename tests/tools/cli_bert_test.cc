// `tpusim train` and `compile` with a BERT as a user meets them: timing-only on synthetic
// features, a values run on the cpu backend that makes its records and evaluates
// run_pretraining's metrics, and the flags that do not apply refused by name.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_bert_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

TEST(CliBert, TimingOnlyTrainOnSyntheticFeaturesPrintsAStepAndExamplesASecond) {
  const std::string report = ::testing::TempDir() + "tpusim_bert_timing.json";
  auto r = run_tpusim({"train", "--model", "bert_tiny", "--seq-length", "32", "--input",
                       "synthetic", "--batch-size", "16", "--timing-only", "--train-steps", "2",
                       "--iterations-per-loop", "1", "--dtype-policy", "mixed_bfloat16", "--report",
                       report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("training bert_tiny (32 tokens, synthetic) (mixed_bfloat16) on "
                               "v3-8 (8 cores), global batch 16, 1 steps per loop, lamb at 5e-05"));
  EXPECT_THAT(r.out, HasSubstr("no loss or accuracy (timing-only: no values computed)"));
  EXPECT_THAT(r.out, HasSubstr(" examples/s) = compute "));
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["seq_length"], 32);
  EXPECT_EQ(j["input"], "synthetic");
  EXPECT_TRUE(j["image_size"].is_null());
  EXPECT_TRUE(j["final_loss"].is_null());
  EXPECT_NEAR(j["examples_per_second"].get<double>(), 16 / j["sim_seconds_per_step"].get<double>(),
              1e-6);
  std::filesystem::remove(report);
}

// Records are made on first use (what `tpusim data make-bert` writes), the step trains with LAMB
// and evaluation reports run_pretraining's four metrics; a near-uniform start is ln(30522) and
// ln(2) give or take.
TEST(CliBert, CpuTrainMakesItsRecordsAndEvaluatesThePretrainingMetrics) {
  const std::string data = ::testing::TempDir() + "tpusim_bert_records";
  std::filesystem::remove_all(data);
  const std::string report = ::testing::TempDir() + "tpusim_bert_cpu.json";
  auto r = run_tpusim({"train", "--model", "bert_tiny", "--backend", "cpu", "--seq-length", "16",
                       "--data", data, "--batch-size", "8", "--train-steps", "2",
                       "--iterations-per-loop", "1", "--eval-steps", "1", "--report", report});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("writing 10240 synthetic BERT pretraining examples of 16 tokens"));
  EXPECT_TRUE(std::filesystem::exists(data + "/train-00000-of-00010.tfrecord"));
  std::ifstream in(report);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["input"], "records");
  const nlohmann::json& eval = j["eval_metrics"];
  for (const char* metric :
       {"masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy", "next_sentence_loss"})
    EXPECT_TRUE(eval.contains(metric)) << metric;
  EXPECT_NEAR(eval["masked_lm_loss"].get<double>(), 10.33, 0.5);
  EXPECT_NEAR(eval["next_sentence_loss"].get<double>(), 0.69, 0.3);
  EXPECT_NEAR(j["final_loss"].get<double>(), 11.0, 0.6);
  EXPECT_THAT(r.out, HasSubstr("masked_lm_accuracy "));
  std::filesystem::remove_all(data);
  std::filesystem::remove(report);
}

// compare trains a BERT on tpusim and the cpu from the same weights and records: the compiled
// program (gathers as indexed DMAs, the scatter-add gradient, GELU's erf, layer norms, the
// masked-LM head against the tied table) computes what the cpu does, within the rounding
// baseline.
TEST(CliBert, CompareAgreesOnTpusimAndTheCpu) {
  const std::string data = ::testing::TempDir() + "tpusim_bert_compare";
  std::filesystem::remove_all(data);
  auto r = run_tpusim({"compare", "--model", "bert_tiny", "--seq-length", "16", "--data", data,
                       "--batch-size", "8", "--steps", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"], "bert_tiny");
  EXPECT_EQ(j["verdict"], "agree") << r.out;
  std::filesystem::remove_all(data);
}

TEST(CliBert, FlagsThatDoNotApplyAreRefusedByName) {
  auto r = run_tpusim({"train", "--model", "bert_tiny", "--seq-length", "1000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--seq-length must be in [8, 512]"));
  r = run_tpusim({"train", "--model", "resnet50", "--seq-length", "128"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--seq-length is for BERT models; resnet50 reads images"));
  r = run_tpusim({"train", "--model", "bert_tiny", "--input", "jpeg"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("bert_tiny reads token ids: --input is raw"));
  r = run_tpusim(
      {"compile", "--model", "bert_tiny", "--batch", "2", "--seq-length", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["seq_length"], 64);
  // BERT-Tiny: embeddings 3,972,864, two layers of 198,272, pooler 16,512, heads 47,548.
  EXPECT_EQ(j["parameters"], 4'433'468);
}

}  // namespace cli_bert_test
}  // namespace tpusim::cli
