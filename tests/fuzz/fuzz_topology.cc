// SCALE-Sim topology CSVs on any text, in each format.
#include "runtime/workloads/scalesim_topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  using tpusim::runtime::TopologyFormat;
  const TopologyFormat formats[] = {TopologyFormat::kAuto, TopologyFormat::kConv,
                                    TopologyFormat::kGemm};
  (void)tpusim::runtime::parse_scalesim_topology(
      std::string(reinterpret_cast<const char*>(data) + 1, size - 1), "fuzz.csv",
      formats[data[0] % 3]);
  return 0;
}
