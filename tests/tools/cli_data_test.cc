// `tpusim data make-bert` as a user meets it: what it prints, the files `data inspect` then finds
// in them, and its usage errors.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/tools/cli_runner.h"

namespace tpusim::cli {
namespace cli_data_test {

using ::testing::HasSubstr;
using testing::run_tpusim;

TEST(CliData, MakeBertWritesShardsThatInspectReadsAsBertExamples) {
  const std::string dir = ::testing::TempDir() + "tpusim_cli_make_bert";
  std::filesystem::remove_all(dir);
  auto r = run_tpusim({"data", "make-bert", "--out", dir, "--examples", "10", "--shards", "2",
                       "--compression", "gzip", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto made = nlohmann::json::parse(r.out);
  EXPECT_EQ(made["examples"], 10);
  EXPECT_EQ(made["seq_length"], 128);
  EXPECT_EQ(made["max_predictions"], 20);  // the default at 128
  EXPECT_EQ(made["vocab"], 30522);
  EXPECT_EQ(made["compression"], "gzip");
  ASSERT_EQ(made["shards"].size(), 2u);
  const std::string shard = dir + "/train-00001-of-00002.tfrecord.gz";
  EXPECT_EQ(made["shards"][1]["path"], shard);
  EXPECT_EQ(made["shards"][1]["examples"], 5);
  EXPECT_EQ(made["bytes"].get<uint64_t>(),
            std::filesystem::file_size(dir + "/train-00000-of-00002.tfrecord.gz") +
                std::filesystem::file_size(shard));

  r = run_tpusim({"data", "inspect", "--json", shard});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out)["files"][0];
  EXPECT_EQ(j["records"], 5);
  EXPECT_EQ(j["compression"], "gzip");
  EXPECT_EQ(j["tf_example"], true);
  EXPECT_EQ(j["features"], (nlohmann::json{{"input_ids", "int64"},
                                           {"input_mask", "int64"},
                                           {"masked_lm_ids", "int64"},
                                           {"masked_lm_positions", "int64"},
                                           {"masked_lm_weights", "float"},
                                           {"next_sentence_labels", "int64"},
                                           {"segment_ids", "int64"}}));
  for (const auto& f : j["first_example"]) {
    const std::string name = f["name"];
    const int want = name == "next_sentence_labels"     ? 1
                     : name.rfind("masked_lm_", 0) == 0 ? 20
                                                        : 128;
    EXPECT_EQ(f["values"], want) << name;
    if (name == "input_ids") {
      EXPECT_THAT(f["preview"].get<std::string>(), HasSubstr("[101, "));
    }
  }

  // Text output, and the default max_predictions at 512.
  r = run_tpusim({"data", "make-bert", "--out", dir + "/long", "--seq-length", "512", "--examples",
                  "3", "--prefix", "eval"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote 3 BERT pretraining examples (seq_length 512, "
                               "max_predictions 76, vocab 30522, seed 1, "));
  EXPECT_THAT(r.out, HasSubstr(dir + "/long/eval-00000-of-00001.tfrecord\t3 examples"));
  std::filesystem::remove_all(dir);
}

TEST(CliData, MakeBertBadFlagsAreUsageErrorsNamingTheField) {
  const std::string dir = ::testing::TempDir() + "tpusim_cli_make_bert_bad";
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--seq-length", "4"}, "seq_length must be 8..4096"},
           {{"--max-predictions", "0"}, "max_predictions must be 1..128"},
           {{"--vocab", "100"}, "vocab must be 105.."},
           {{"--examples", "0"}, "examples must be at least 1, not 0"},
           {{"--examples", "3", "--shards", "4"}, "shards must be 1..3"},
           {{"--compression", "auto"}, "--compression must be none, gzip or zlib"},
           {{"--prefix", "a/b"}, "prefix must be a file name prefix (no '/', not . or ..)"},
           {{"--examples", "ten"}, "the argument ('ten') for option '--examples' is invalid"}}) {
    std::vector<std::string> argv = {"data", "make-bert", "--out", dir};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_tpusim(argv);
    EXPECT_EQ(r.exit_code, 2) << message;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_THAT(r.err, HasSubstr("usage: tpusim data make-bert"));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing written for a refused run
  auto r = run_tpusim({"data", "make-bert"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--out"));
  r = run_tpusim({"data", "make-bert", "--out", "/proc/no/such/dir", "--examples", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot create /proc/no/such/dir"));
}

}  // namespace cli_data_test
}  // namespace tpusim::cli
