// tpusim's scalesim_ws policy against SCALE-Sim v2.0.2's own reports (data/scalesim_v2): every
// layer's Total Cycles and Overall Util % must be equal.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/lowering/weight_stationary_layers.h"
#include "runtime/workloads/scalesim_topology.h"
#include "sim/system.h"

namespace tpusim::runtime {
namespace scalesim_reference_test {

struct Reference {
  uint64_t total_cycles;
  double overall_util_percent;
};

std::vector<Reference> read_reference(const std::string& name) {
  std::ifstream in(std::string(TPUSIM_SOURCE_DIR) + "/tests/runtime/data/scalesim_v2/" + name +
                   ".csv");
  std::vector<Reference> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, cycles, stalls, util;
    std::getline(fields, id, ',');
    std::getline(fields, cycles, ',');
    std::getline(fields, stalls, ',');
    std::getline(fields, util, ',');
    out.push_back({std::stoull(cycles), std::stod(util)});
  }
  return out;
}

TEST(ScaleSimReference, EveryLayerOfEveryTopologyMatchesExactly) {
  auto spec = config::load_slice("v3-8");
  auto system = sim::System::create(*spec, {sim::MxuPolicy::kScaleSimWs, true, nullptr});
  ASSERT_TRUE(system.ok());
  const std::string workloads =
      std::string(TPUSIM_SOURCE_DIR) + "/tests/runtime/data/scalesim_topologies/";
  int checked = 0;
  for (const char* name : {"transformer_partial_gemm", "resnet18", "resnet50_mlperf"}) {
    SCOPED_TRACE(name);
    auto layers = read_scalesim_topology(workloads + name + ".csv");
    ASSERT_TRUE(layers.ok()) << layers.status();
    const auto reference = read_reference(name);
    ASSERT_EQ(layers->size(), reference.size());
    for (size_t i = 0; i < layers->size(); ++i) {
      const TopologyLayer& layer = (*layers)[i];
      auto program = lower_weight_stationary_layer(**spec, 0, layer);
      ASSERT_TRUE(program.ok()) << program.status();
      auto run = (*system)->run(program->program);
      ASSERT_TRUE(run.ok()) << run.status();
      const uint64_t cycles = run->cycles() - 1;  // SCALE-Sim counts the last output's cycle from 0
      EXPECT_EQ(cycles, reference[i].total_cycles) << layer.name;
      const double util =
          100.0 * static_cast<double>(layer.macs()) / (static_cast<double>(cycles) * 128 * 128);
      EXPECT_NEAR(util, reference[i].overall_util_percent, 1e-9) << layer.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6 + 21 + 54);
}

}  // namespace scalesim_reference_test
}  // namespace tpusim::runtime
