// Every validation rule, each with a bad copy of a shipped file. A rejection must name the
// file, the line where the parser saw one, the dotted field path and the rule.
#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::config {
namespace validation_test {

using config::testing::TempDir;
using ::testing::HasSubstr;
using testing::read_shipped;
using testing::replace_once;

struct BadFile {
  const char* test_name;
  const char* base;  // shipped file the bad copy is made from
  const char* from;  // text replaced ...
  const char* to;    // ... by this
  // Expected in the message; "{file}" is the bad copy's path, "{line}" the 1-based line on
  // which `from` began.
  const char* expect;
};

std::ostream& operator<<(std::ostream& os, const BadFile& c) { return os << c.test_name; }

int line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  return static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n')) + 1;
}

std::string expand(std::string pattern, const std::string& file, int line) {
  for (size_t at; (at = pattern.find("{file}")) != std::string::npos;) pattern.replace(at, 6, file);
  for (size_t at; (at = pattern.find("{line}")) != std::string::npos;) {
    pattern.replace(at, 6, std::to_string(line));
  }
  return pattern;
}

class ValidationRule : public ::testing::TestWithParam<BadFile> {};

TEST_P(ValidationRule, IsRejectedWithFileLineFieldAndRule) {
  const BadFile& c = GetParam();
  const std::string original = read_shipped(c.base);
  TempDir dir;
  const std::string path =
      dir.write(std::string("bad_") + c.base, replace_once(original, c.from, c.to));
  const std::string expected = expand(c.expect, path, line_of(original, c.from));

  auto text = read_config(path);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::Status status;
  switch (detect_kind(*text)) {
    case ConfigKind::kChip:
      status = parse_chip(*text).status();
      break;
    case ConfigKind::kHost:
      status = parse_host(*text).status();
      break;
    case ConfigKind::kSlice:
      status = parse_slice(*text).status();
      break;
  }
  ASSERT_FALSE(status.ok()) << "accepted: " << c.test_name;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(expected));
}

// Lines of tpu_v3.pbtxt are found by `from`, so the table does not hard-code them.
const BadFile kBadFiles[] = {
    // The done-when case: a copy of tpu_v3.pbtxt with a negative bandwidth.
    {"NegativeHbmBandwidth", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: -900",
     "{file}:{line}: hbm.bandwidth_gb_per_s = -900: must be a finite number > 0"},
    // Rates and delays past what a run can simulate (a typo like 9e-7 for 900).
    {"TinyHbmBandwidth", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: 1e-12",
     "{file}:{line}: hbm.bandwidth_gb_per_s = 1e-12: must be in [0.001, 10000000] (GB/s, from 1 "
     "MB/s to 10 PB/s)"},
    {"HugeHbmBandwidth", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: 4.5e11",
     "{file}:{line}: hbm.bandwidth_gb_per_s = 450000000000: must be in [0.001, 10000000]"},
    {"TinyHostLink", "tpu_v3.pbtxt", "host_to_device_gb_per_s: 16", "host_to_device_gb_per_s: 1e-6",
     "{file}:{line}: host_link.host_to_device_gb_per_s = 1e-06: must be in [0.001, 10000000]"},
    {"HugeHopLatency", "tpu_v3.pbtxt", "hop_latency_ns: 1000", "hop_latency_ns: 2e9",
     "{file}:{line}: ici.hop_latency_ns = 2000000000: must be at most 1000000000 (ns, at most 1 "
     "s)"},
    {"HugeHostLinkLatency", "tpu_v3.pbtxt", "latency_us: 1", "latency_us: 1e7",
     "{file}:{line}: host_link.latency_us = 10000000: must be at most 1000000 (us, at most 1 s)"},
    {"ZeroHbmBandwidth", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: 0",
     "{file}:{line}: hbm.bandwidth_gb_per_s = 0: must be a finite number > 0"},
    {"NanBandwidth", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: nan",
     "{file}:{line}: hbm.bandwidth_gb_per_s = nan: must be a finite number > 0"},
    {"InfiniteClock", "tpu_v3.pbtxt", "clock_mhz: 940", "clock_mhz: inf",
     "{file}:{line}: core.clock_mhz = inf: must be a finite number (clock in MHz)"},
    {"ZeroClock", "tpu_v3.pbtxt", "clock_mhz: 940", "clock_mhz: 0",
     "{file}:{line}: core.clock_mhz = 0: must be in [1, 100000] (clock in MHz)"},
    {"NegativeHbmLatency", "tpu_v3.pbtxt", "latency_ns: 500", "latency_ns: -1",
     "{file}:{line}: hbm.latency_ns = -1: must be a finite number >= 0"},
    {"NegativeHostLinkLatency", "tpu_v3.pbtxt", "latency_us: 1", "latency_us: -0.5",
     "{file}:{line}: host_link.latency_us = -0.5: must be a finite number >= 0"},
    {"ZeroHostToDevice", "tpu_v3.pbtxt", "host_to_device_gb_per_s: 16",
     "host_to_device_gb_per_s: 0",
     "{file}:{line}: host_link.host_to_device_gb_per_s = 0: must be a finite number > 0"},
    {"ZeroMxuCount", "tpu_v3.pbtxt", "mxu_count: 2", "mxu_count: 0",
     "{file}:{line}: core.mxu_count = 0: must be in [1, 64] (MXUs per core)"},
    {"HugeMxuRows", "tpu_v3.pbtxt", "mxu_rows: 128", "mxu_rows: 5000",
     "{file}:{line}: core.mxu_rows = 5000: must be in [1, 4096] (systolic array rows)"},
    {"ZeroMxuCols", "tpu_v3.pbtxt", "mxu_cols: 128", "mxu_cols: 0",
     "{file}:{line}: core.mxu_cols = 0: must be in [1, 4096] (systolic array columns)"},
    {"ZeroVectorLanes", "tpu_v3.pbtxt", "vector_lanes: 128", "vector_lanes: 0",
     "{file}:{line}: core.vector_lanes = 0: must be in [1, 65536]"},
    {"ZeroSublanes", "tpu_v3.pbtxt", "vector_sublanes: 8", "vector_sublanes: 0",
     "{file}:{line}: core.vector_sublanes = 0: must be in [1, 1024]"},
    {"TinyVmem", "tpu_v3.pbtxt", "vmem_mib: 16", "vmem_mib: 0",
     "{file}:{line}: core.vmem_mib = 0: must be in [0.0009765625, 1048576] (VMEM capacity in MiB)"},
    {"ZeroHbmCapacity", "tpu_v3.pbtxt", "capacity_gib: 32", "capacity_gib: 0",
     "{file}:{line}: hbm.capacity_gib = 0: must be in [0.0009765625, 1048576]"},
    {"ZeroHbmChannels", "tpu_v3.pbtxt", "channels: 32", "channels: 0",
     "{file}:{line}: hbm.channels = 0: must be in [1, 4096] (HBM channels)"},
    {"ZeroTensorCores", "tpu_v3.pbtxt", "tensor_cores: 2", "tensor_cores: 0",
     "{file}:{line}: tensor_cores = 0: must be in [1, 64] (TensorCores per chip)"},
    {"EmptyChipName", "tpu_v3.pbtxt", "name: \"tpu_v3\"", "name: \"\"",
     "{file}:{line}: name: must not be empty"},
    {"ZeroInfeedDepth", "tpu_v3.pbtxt", "infeed_queue_depth: 4", "infeed_queue_depth: 0",
     "{file}:{line}: infeed_queue_depth = 0: must be in [1, 1048576] (infeed queue entries)"},
    {"ZeroOutfeedDepth", "tpu_v3.pbtxt", "outfeed_queue_depth: 4", "outfeed_queue_depth: 0",
     "{file}:{line}: outfeed_queue_depth = 0: must be in [1, 1048576]"},
    {"ZeroIciBandwidthWithLinks", "tpu_v3.pbtxt", "link_bandwidth_gb_per_s: 100",
     "link_bandwidth_gb_per_s: 0",
     "{file}:{line}: ici.link_bandwidth_gb_per_s = 0: must be a finite number > 0"},
    {"NegativeHopLatency", "tpu_v3.pbtxt", "hop_latency_ns: 1000", "hop_latency_ns: -1",
     "{file}:{line}: ici.hop_latency_ns = -1: must be a finite number >= 0"},
    // A chip of two cores needs the link between them.
    {"TwoCoresWithoutCoreLink", "tpu_v3.pbtxt",
     "  core_link_gb_per_s: 200          # (unverified) the two TensorCores' on-chip link, one "
     "way\n",
     "",
     "ici.core_link_gb_per_s: required field is missing: the chip has 2 TensorCores, and "
     "collectives between them use this link"},
    {"ZeroCoreLink", "tpu_v3.pbtxt", "core_link_gb_per_s: 200", "core_link_gb_per_s: 0",
     "{file}:{line}: ici.core_link_gb_per_s = 0: must be a finite number > 0"},
    {"MissingRequiredField", "tpu_v3.pbtxt", "clock_mhz: 940", "",
     "core.clock_mhz: required field is missing"},
    {"UnknownBlock", "tpu_v3.pbtxt", "hbm {", "unused_hbm {",
     "{file}:{line}:12: Message type \"tpusim.config.ChipConfig\" has no field named "
     "\"unused_hbm\". (fields of ChipConfig: name, tensor_cores, core, hbm, host_link, "
     "infeed_queue_depth, outfeed_queue_depth, ici)"},
    // Unknown fields name the line and column and list the fields that exist.
    {"MisspelledField", "tpu_v3.pbtxt", "bandwidth_gb_per_s: 900", "bandwidht_gb_per_s: 900",
     "{file}:{line}:21: Message type \"tpusim.config.HbmConfig\" has no field named "
     "\"bandwidht_gb_per_s\". (fields of HbmConfig: capacity_gib, bandwidth_gb_per_s, "
     "latency_ns, channels, interleave_bytes)"},
    {"NegativeUnsigned", "tpu_v3.pbtxt", "mxu_count: 2", "mxu_count: -2",
     "{file}:{line}:14: Expected integer, got: -"},
    {"SyntaxError", "tpu_v3.pbtxt", "hbm {", "hbm {{", "{file}:{line}:"},
    {"DuplicateField", "tpu_v3.pbtxt", "mxu_count: 2", "mxu_count: 2 mxu_count: 4",
     "Non-repeated field \"mxu_count\" is specified multiple times"},
    // Slice rules.
    {"EmptySliceName", "v3-8.pbtxt", "name: \"v3-8\"", "name: \"\"",
     "{file}:{line}: name: must not be empty"},
    {"SliceWithoutChip", "v3-8.pbtxt", "chip_file: \"tpu_v3.pbtxt\"", "",
     "{file}: (top level): the slice names no chip"},
    {"SliceWithoutHost", "v3-8.pbtxt", "host_file: \"host_96.pbtxt\"", "",
     "{file}: (top level): the slice names no host"},
    {"UnknownTopLevelField", "v3-8.pbtxt", "topology {", "unused {",
     "{file}:{line}:8: Message type \"tpusim.config.SliceConfig\" has no field named "
     "\"unused\"."},
    {"TopologyWithoutKind", "v3-8.pbtxt", "kind: TORUS", "",
     "topology.kind: required field is missing (MESH or TORUS)"},
    {"TopologyKindUnspecified", "v3-8.pbtxt", "kind: TORUS", "kind: KIND_UNSPECIFIED",
     "topology.kind: must be MESH or TORUS"},
    {"TopologyWithoutDimensions", "v3-8.pbtxt", "  shape: 2\n  shape: 2\n", "",
     "topology.shape: has 0 dimensions; a slice is arranged in 1, 2 or 3 dimensions"},
    {"TopologyWithFourDimensions", "v3-8.pbtxt", "  shape: 2\n  shape: 2\n",
     "  shape: 2\n  shape: 2\n  shape: 1\n  shape: 1\n",
     "topology.shape: has 4 dimensions; a slice is arranged in 1, 2 or 3 dimensions"},
    {"TopologyZeroDimension", "v3-8.pbtxt", "  shape: 2\n  shape: 2\n", "  shape: 2\n  shape: 0\n",
     "{file}:{line}: topology.shape: dimension 1 is 0; each must be in [1, 4096] chips"},
    // v3 chips have 4 ICI links; a 3D torus needs 6.
    {"TorusNeedsMoreLinksThanTheChipHas", "v3-8.pbtxt", "  shape: 2\n  shape: 2\n",
     "  shape: 2\n  shape: 2\n  shape: 2\n",
     "topology: a torus of this shape needs 6 ICI links per chip, but chip tpu_v3 has 4 "
     "(ici.links_per_chip)"},
    {"ChipsPerHostDoesNotDivide", "v3-8.pbtxt", "chips_per_host: 4", "chips_per_host: 3",
     "{file}:{line}: chips_per_host: 3 does not divide the slice's 4 chips"},
    {"ZeroChipsPerHost", "v3-8.pbtxt", "chips_per_host: 4", "chips_per_host: 0",
     "{file}:{line}: chips_per_host = 0: must be in [1, 4096] (chips fed by one host)"},
    {"BadChipInsideSliceNamesTheChipFile", "v3-8.pbtxt", "chip_file: \"tpu_v3.pbtxt\"",
     "chip { name: \"x\" tensor_cores: 0 }", "{file}:{line}: chip.tensor_cores = 0"},
    // Host rules.
    {"ZeroHostCores", "host_96.pbtxt", "cpu_cores: 96", "cpu_cores: 0",
     "{file}:{line}: cpu_cores = 0: must be in [1, 65536] (host CPU cores for the input pipeline)"},
    {"NegativeLoopOverhead", "host_96.pbtxt", "loop_overhead_us: 2000", "loop_overhead_us: -1",
     "{file}:{line}: loop_overhead_us = -1: must be a finite number >= 0"},
    {"NegativeStageCost", "host_96.pbtxt", "parse_example_us: 5", "parse_example_us: -5",
     "{file}:{line}: stage_costs.parse_example_us = -5: must be a finite number >= 0"},
    {"HugeStageCost", "host_96.pbtxt", "decode_jpeg_us_per_mpixel: 10000",
     "decode_jpeg_us_per_mpixel: 1e12",
     "{file}:{line}: stage_costs.decode_jpeg_us_per_mpixel = 1000000000000: must be at most "
     "1000000000 (us, at most 1000 s per unit)"},
    {"HugeLoopOverhead", "host_96.pbtxt", "loop_overhead_us: 2000", "loop_overhead_us: 5e6",
     "{file}:{line}: loop_overhead_us = 5000000: must be at most 1000000 (us, at most 1 s)"},
    {"MissingStageCost", "host_96.pbtxt", "  batch_us_per_mib: 100", "",
     "stage_costs.batch_us_per_mib: required field is missing"},
    {"EmptyHostName", "host_96.pbtxt", "name: \"cloud_tpu_host_96\"", "name: \"\"",
     "{file}:{line}: name: must not be empty"},
};

INSTANTIATE_TEST_SUITE_P(EveryRule, ValidationRule, ::testing::ValuesIn(kBadFiles),
                         [](const auto& param_info) {
                           return std::string(param_info.param.test_name);
                         });

TEST(Validation, EveryProblemOfAFileIsReportedAtOnce) {
  std::string text = read_shipped("tpu_v3.pbtxt");
  text = replace_once(text, "mxu_count: 2", "mxu_count: 0");
  text = replace_once(text, "bandwidth_gb_per_s: 900", "bandwidth_gb_per_s: -1");
  text = replace_once(text, "links_per_chip: 4", "links_per_chip: 99");
  auto chip = parse_chip(ConfigText{"three.pbtxt", text, "", false});
  ASSERT_FALSE(chip.ok());
  const std::string msg(chip.status().message());
  EXPECT_THAT(msg, HasSubstr("config three.pbtxt rejected (3 problems)"));
  EXPECT_THAT(msg, HasSubstr("core.mxu_count"));
  EXPECT_THAT(msg, HasSubstr("hbm.bandwidth_gb_per_s"));
  EXPECT_THAT(msg, HasSubstr("ici.links_per_chip = 99"));
}

TEST(Validation, BadSliceBuiltInCodeIsRejectedWithoutLines) {
  auto good = load_slice("v3-8");
  ASSERT_TRUE(good.ok());
  SliceConfig edited = (*good)->proto;
  edited.mutable_chip()->mutable_hbm()->set_bandwidth_gb_per_s(-5);
  auto bad = validate_slice(edited, "sweep point 3");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(
      std::string(bad.status().message()),
      HasSubstr("sweep point 3: chip.hbm.bandwidth_gb_per_s = -5: must be a finite number > 0"));
}

TEST(Validation, MissingBlocksAreNamed) {
  auto good = load_slice("v3-8");
  ASSERT_TRUE(good.ok());
  SliceConfig edited = (*good)->proto;
  edited.mutable_chip()->clear_hbm();
  edited.clear_topology();
  auto bad = validate_slice(edited, "edited");
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_THAT(msg, HasSubstr("edited: chip.hbm: required block `hbm { ... }` is missing"));
  EXPECT_THAT(msg, HasSubstr("edited: topology: required block `topology { ... }` is missing"));
}

TEST(Validation, ChipWithoutIciIsFineAloneButNotInAMultiChipSlice) {
  auto good = load_slice("v3-8");
  ASSERT_TRUE(good.ok());
  SliceConfig one = (*good)->proto;
  one.mutable_chip()->mutable_ici()->set_links_per_chip(0);
  one.mutable_chip()->mutable_ici()->set_link_bandwidth_gb_per_s(0);
  one.mutable_topology()->clear_shape();
  one.mutable_topology()->add_shape(1);
  one.set_chips_per_host(1);
  auto single = validate_slice(one, "single");
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)->cores, 2u);

  one.mutable_topology()->set_shape(0, 2);
  auto pair = validate_slice(one, "pair");
  ASSERT_FALSE(pair.ok());
  EXPECT_THAT(std::string(pair.status().message()),
              HasSubstr("needs 2 ICI links per chip, but chip tpu_v3 has 0"));
}

}  // namespace validation_test
}  // namespace tpusim::config
