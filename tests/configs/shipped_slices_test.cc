// The built-in slices users ask for, each loaded the way `tpusim config show NAME` loads it
// (read_config, detect_kind, parse_slice; tools/tpusim/cmd_config.cc), and every built-in chip's
// peak recomputed from its fields against the published figure (docs/references.md, "TPU
// generations"; the slices' table is docs/configs.md, "Shipped slices").
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "configs/embedded_files.h"
#include "configs/loader.h"

namespace tpusim::config {
namespace shipped_slices_test {

struct SliceCase {
  const char* name;
  const char* chip;
  uint32_t chips, cores, hosts, chips_per_host;
  std::vector<uint32_t> shape;
  bool torus;
  uint32_t links_needed;
};

// The sixteen slices, as docs/configs.md lists them.
const std::vector<SliceCase>& shipped_slices() {
  static const std::vector<SliceCase> cases = {
      {"v2-8", "tpu_v2", 4, 8, 1, 4, {2, 2}, true, 4},
      {"v2-32", "tpu_v2", 16, 32, 4, 4, {4, 4}, true, 4},
      {"v2-512", "tpu_v2", 256, 512, 64, 4, {16, 16}, true, 4},
      {"v3-8", "tpu_v3", 4, 8, 1, 4, {2, 2}, true, 4},
      {"v3-32", "tpu_v3", 16, 32, 4, 4, {4, 4}, true, 4},
      {"v3-2048", "tpu_v3", 1024, 2048, 256, 4, {32, 32}, true, 4},
      {"v4-8", "tpu_v4", 4, 8, 1, 4, {2, 2, 1}, false, 2},
      {"v4-16", "tpu_v4", 8, 16, 2, 4, {2, 2, 2}, false, 3},
      {"v4-32", "tpu_v4", 16, 32, 4, 4, {2, 2, 4}, false, 4},
      {"v4-128", "tpu_v4", 64, 128, 16, 4, {4, 4, 4}, true, 6},
      {"v4-512", "tpu_v4", 256, 512, 64, 4, {4, 8, 8}, true, 6},
      {"v5e-4", "tpu_v5e", 4, 4, 1, 4, {2, 2}, false, 2},
      {"v5e-8", "tpu_v5e", 8, 8, 1, 8, {2, 4}, false, 3},
      {"v5e-256", "tpu_v5e", 256, 256, 32, 8, {16, 16}, true, 4},
      {"v5p-8", "tpu_v5p", 4, 8, 1, 4, {2, 2, 1}, false, 2},
      {"v5p-128", "tpu_v5p", 64, 128, 16, 4, {4, 4, 4}, true, 6},
  };
  return cases;
}

TEST(ShippedConfigs, EverySliceNameLoadsAsConfigShowLoadsIt) {
  for (const SliceCase& c : shipped_slices()) {
    SCOPED_TRACE(c.name);
    auto text = read_config(c.name);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_TRUE(text->embedded);
    EXPECT_EQ(text->label, std::string("<embedded>/") + c.name + ".pbtxt");
    ASSERT_EQ(detect_kind(*text), ConfigKind::kSlice);
    auto slice = parse_slice(*text);
    ASSERT_TRUE(slice.ok()) << slice.status();
    const SliceSpec& s = **slice;
    EXPECT_EQ(s.name, c.name);
    EXPECT_EQ(s.chip.name, c.chip);
    EXPECT_EQ(s.chips, c.chips);
    EXPECT_EQ(s.cores, c.cores);
    EXPECT_EQ(s.hosts, c.hosts);
    EXPECT_EQ(s.chips_per_host, c.chips_per_host);
    EXPECT_EQ(s.topology.shape, c.shape);
    EXPECT_EQ(s.topology.torus, c.torus);
    EXPECT_EQ(s.topology.links_needed_per_chip, c.links_needed);
    // Cores are chips times the chip's TensorCores; the slice's peak is its chips'.
    EXPECT_EQ(s.cores, s.chips * s.chip.tensor_cores);
    EXPECT_DOUBLE_EQ(s.peak_bf16_flops, s.chips * s.chip.peak_bf16_flops);
  }
}

// A slice file added to configs/ without a row here (and in docs/configs.md) fails.
TEST(ShippedConfigs, TheBuiltInSlicesAreExactlyTheListedOnes) {
  std::vector<std::string> built_in;
  for (const std::string& file : embedded_names()) {
    auto text = read_config(file);
    ASSERT_TRUE(text.ok()) << text.status();
    if (detect_kind(*text) == ConfigKind::kSlice) {
      built_in.push_back(file.substr(0, file.size() - std::string(".pbtxt").size()));
    }
  }
  std::vector<std::string> listed;
  for (const SliceCase& c : shipped_slices()) listed.push_back(c.name);
  std::sort(built_in.begin(), built_in.end());
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(built_in, listed);
}

// Peak bf16 per chip = TensorCores x MXUs x R x C MACs x 2 FLOPs x clock, from the chip's own
// fields, within 1% of the published per-chip peak: v2 45.9 [Norrie21], v3 123 [Norrie21,
// Cloud], v4 275 [Jouppi23, Cloud], v5e 197 [Cloud], v5p 459 [Cloud] TFLOPS.
TEST(ShippedConfigs, ChipPeakFromItsFieldsMatchesThePublishedFigure) {
  struct Case {
    const char* chip;
    double published_tflops;
  };
  for (const Case& c : {Case{"tpu_v2", 45.9}, Case{"tpu_v3", 123.0}, Case{"tpu_v4", 275.0},
                        Case{"tpu_v5e", 197.0}, Case{"tpu_v5p", 459.0}}) {
    SCOPED_TRACE(c.chip);
    auto text = read_config(c.chip);
    ASSERT_TRUE(text.ok()) << text.status();
    ASSERT_EQ(detect_kind(*text), ConfigKind::kChip);
    auto chip = parse_chip(*text);
    ASSERT_TRUE(chip.ok()) << chip.status();
    const ChipSpec& s = **chip;
    const double peak = static_cast<double>(s.tensor_cores) * s.core.mxu_count * s.core.mxu_rows *
                        s.core.mxu_cols * 2.0 * s.core.clock_hz;
    EXPECT_NEAR(peak / 1e12, c.published_tflops, c.published_tflops * 0.01);
    EXPECT_DOUBLE_EQ(peak, s.peak_bf16_flops);  // the derived figure is the same arithmetic
  }
}

}  // namespace shipped_slices_test
}  // namespace tpusim::config
