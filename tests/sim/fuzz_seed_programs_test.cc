// The program fuzzer's seeds (tests/fuzz/corpus/program) are valid programs that run to their
// halt on the v3-8 the harness uses: mutations start from programs that reach the units, not
// from ones the validator stops.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace tpusim::sim {
namespace fuzz_seed_programs_test {

TEST(FuzzSeeds, EveryProgramSeedRunsToItsHalt) {
  SystemOptions options;
  options.max_run_cycles = 200000;  // the harness's cap
  auto system = testing::make_system("v3-8", options);
  ASSERT_NE(system, nullptr);
  int seeds = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(TPUSIM_SOURCE_DIR "/tests/fuzz/corpus/program")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    isa::Program program;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &program))
        << entry.path();
    auto run = system->run(program);
    ASSERT_TRUE(run.ok()) << entry.path() << ": " << run.status();
    EXPECT_GT(run->cycles(), 0u) << entry.path();
    ++seeds;
  }
  EXPECT_EQ(seeds, 3);
}

}  // namespace fuzz_seed_programs_test
}  // namespace tpusim::sim
