#include "runtime/workloads/scalesim_topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tpusim::runtime {
namespace scalesim_topology_test {

using ::testing::HasSubstr;

TEST(ScaleSimTopology, ConvLayersMapAsScaleSimDoes) {
  // Conv1 of ResNet-18: ofmap ceil((224 - 7 + 2) / 2) = 110, so T = 110 x 110 = 12100;
  // K = 7 x 7 x 3 = 147; N = 64 filters.
  auto layers = parse_scalesim_topology(
      "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, "
      "Strides,\n"
      "Conv1,224,224,7,7,3,64,2,\n\n  Conv2 , 56 ,56,3,3,64,64,1,\n",
      "r.csv");
  ASSERT_TRUE(layers.ok()) << layers.status();
  ASSERT_EQ(layers->size(), 2u);
  EXPECT_EQ((*layers)[0].name, "Conv1");
  EXPECT_EQ((*layers)[0].t, 12100u);
  EXPECT_EQ((*layers)[0].k, 147u);
  EXPECT_EQ((*layers)[0].n, 64u);
  EXPECT_EQ((*layers)[1].name, "Conv2");
  EXPECT_EQ((*layers)[1].t, 54u * 54u);
  EXPECT_EQ((*layers)[1].macs(), 54u * 54u * 576u * 64u);
}

TEST(ScaleSimTopology, GemmLayersAreMNK) {
  auto layers = parse_scalesim_topology("Layer,M,N,K,\nFF_A_0,128,512,2048,", "g.csv");
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ((*layers)[0].t, 128u);
  EXPECT_EQ((*layers)[0].n, 512u);
  EXPECT_EQ((*layers)[0].k, 2048u);
}

TEST(ScaleSimTopology, ShippedWorkloadsParse) {
  for (const char* name : {"resnet18.csv", "resnet50_mlperf.csv", "transformer_partial_gemm.csv",
                           "test_mnk_gemm.csv"}) {
    auto layers = read_scalesim_topology(std::string(TPUSIM_SOURCE_DIR) +
                                         "/tests/runtime/data/scalesim_topologies/" + name);
    ASSERT_TRUE(layers.ok()) << name << ": " << layers.status();
    EXPECT_FALSE(layers->empty()) << name;
  }
}

TEST(ScaleSimTopology, BadFilesNameFileAndLine) {
  auto bad = parse_scalesim_topology("Layer,M,N,K,\nA,1,2,3,\nB,1,x,3,\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("t.csv:3: field 3 (\"x\") of layer B must be a positive integer"));
  bad = parse_scalesim_topology("Layer,M,N,K,\nA,1,2,3,4,5\n", "t.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("t.csv:2: 5 numeric fields"));
  bad = parse_scalesim_topology("Layer,M,N,K,\nA,0,2,3\n", "t.csv");
  EXPECT_FALSE(bad.ok());
  bad = parse_scalesim_topology("h,a,b,c,d,e,f,g\nC,3,3,5,5,1,1,1\n", "c.csv");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("c.csv:2: layer C has a 5x5 filter larger than its 3x3 input"));
  EXPECT_FALSE(parse_scalesim_topology("Layer,M,N,K,\n", "e.csv").ok());
  EXPECT_EQ(read_scalesim_topology("/no/such.csv").status().code(), absl::StatusCode::kNotFound);
  // A forced format that does not fit.
  EXPECT_FALSE(
      parse_scalesim_topology("Layer,M,N,K,\nA,1,2,3\n", "f.csv", TopologyFormat::kConv).ok());
}

// 10,000 layers parse; the 10,001st is refused by name and line. A topology near the 16 MiB file
// cap (456,000 layers) took `tpusim layers` 11 s and 720 MB, each layer simulated.
TEST(ScaleSimTopology, ALayerPastTheBoundIsRefusedByNameAndLine) {
  std::string text = "Layer,M,N,K,\n";
  for (int i = 0; i < 10000; ++i) text += "L" + std::to_string(i) + ",8,8,8,\n";
  auto layers = parse_scalesim_topology(text, "big.csv");
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(layers->size(), 10000u);
  text += "one_more,8,8,8,\n";
  auto refused = parse_scalesim_topology(text, "big.csv");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("big.csv:10002: layer one_more is past the bound of 10000 layers"));
}

}  // namespace scalesim_topology_test
}  // namespace tpusim::runtime
