// Derived figures per generation against the published numbers in docs/references.md, "TPU
// generations".
#include <gtest/gtest.h>

#include "configs/loader.h"

namespace tpusim::config {
namespace derived_figures_test {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::shared_ptr<const ChipSpec> chip(const std::string& name) {
  auto c = load_chip(name);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : nullptr;
}

std::shared_ptr<const SliceSpec> slice(const std::string& name) {
  auto s = load_slice(name);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : nullptr;
}

// Peak = cores x MXUs x R x C x 2 x clock must reproduce each published peak within 0.5%.
TEST(DerivedFigures, PeakBf16PerChipMatchesPublishedFigures) {
  struct Case {
    const char* chip;
    double published_tflops;
  };
  for (const Case& c : {Case{"tpu_v2", 45.9}, Case{"tpu_v3", 123.2}, Case{"tpu_v4", 275.3},
                        Case{"tpu_v5e", 197.0}, Case{"tpu_v5p", 459.0}}) {
    SCOPED_TRACE(c.chip);
    auto spec = chip(c.chip);
    ASSERT_NE(spec, nullptr);
    EXPECT_NEAR(spec->peak_bf16_flops / 1e12, c.published_tflops, c.published_tflops * 0.005);
  }
}

// v3: 2 cores x 2 MXUs x 128 x 128 x 2 x 940e6 = 123,207,680,000,000 FLOP/s exactly.
TEST(DerivedFigures, PeakArithmeticIsExactForV3) {
  auto v3 = chip("tpu_v3");
  ASSERT_NE(v3, nullptr);
  EXPECT_DOUBLE_EQ(v3->core.peak_bf16_flops, 2.0 * 128 * 128 * 2 * 940e6);
  EXPECT_DOUBLE_EQ(v3->peak_bf16_flops, 123207680e6);
  // 128 lanes x 8 sublanes x 940 MHz.
  EXPECT_DOUBLE_EQ(v3->core.vector_elements_per_s, 128.0 * 8 * 2 * 940e6);
  // Ridge point: 123.2e12 / 900e9 = 136.9 FLOP per byte.
  EXPECT_NEAR(v3->machine_balance_flops_per_byte, 136.89, 0.01);
}

TEST(DerivedFigures, UnitsAreConvertedToSi) {
  auto v3 = chip("tpu_v3");
  ASSERT_NE(v3, nullptr);
  EXPECT_EQ(v3->core.vmem_bytes, 16u * 1024 * 1024);
  EXPECT_EQ(v3->hbm.capacity_bytes, static_cast<uint64_t>(32 * kGiB));
  EXPECT_DOUBLE_EQ(v3->hbm.bandwidth_bytes_per_s, 900e9);
  EXPECT_DOUBLE_EQ(v3->hbm.latency_s, 500e-9);
  EXPECT_DOUBLE_EQ(v3->core.clock_hz, 940e6);
  EXPECT_DOUBLE_EQ(v3->host_link.host_to_device_bytes_per_s, 16e9);
  EXPECT_DOUBLE_EQ(v3->host_link.latency_s, 1e-6);
  EXPECT_DOUBLE_EQ(v3->ici.link_bandwidth_bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(v3->ici.hop_latency_s, 1e-6);
}

TEST(DerivedFigures, V3_8IsFourChipsEightCoresOneHost) {
  auto s = slice("v3-8");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->chips, 4u);
  EXPECT_EQ(s->cores, 8u);
  EXPECT_EQ(s->hosts, 1u);
  EXPECT_TRUE(s->topology.torus);
  EXPECT_EQ(s->topology.shape, (std::vector<uint32_t>{2, 2}));
  EXPECT_EQ(s->topology.links_needed_per_chip, 4u);
  EXPECT_NEAR(s->peak_bf16_flops / 1e12, 4 * 123.2, 4 * 123.2 * 0.005);
  EXPECT_DOUBLE_EQ(s->hbm_bandwidth_bytes_per_s, 4 * 900e9);
  EXPECT_EQ(s->host.cpu_cores, 96u);
  EXPECT_DOUBLE_EQ(s->host.loop_overhead_s, 2e-3);
}

TEST(DerivedFigures, EverySliceHasItsShape) {
  struct Case {
    const char* slice;
    uint32_t chips, cores, hosts, links_needed;
    const char* chip;
  };
  for (const Case& c :
       {Case{"v2-8", 4, 8, 1, 4, "tpu_v2"}, Case{"v3-8", 4, 8, 1, 4, "tpu_v3"},
        Case{"v3-32", 16, 32, 4, 4, "tpu_v3"}, Case{"v4-8", 4, 8, 1, 2, "tpu_v4"},
        Case{"v4-128", 64, 128, 16, 6, "tpu_v4"}, Case{"v3-2048", 1024, 2048, 256, 4, "tpu_v3"}}) {
    SCOPED_TRACE(c.slice);
    auto s = slice(c.slice);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->name, c.slice);
    EXPECT_EQ(s->chip.name, c.chip);
    EXPECT_EQ(s->chips, c.chips);
    EXPECT_EQ(s->cores, c.cores);
    EXPECT_EQ(s->hosts, c.hosts);
    EXPECT_EQ(s->topology.links_needed_per_chip, c.links_needed);
  }
}

TEST(DerivedFigures, StageCostsAreSecondsPerUnit) {
  auto s = slice("v3-8");
  ASSERT_NE(s, nullptr);
  const HostStageCostsSpec& c = s->host.stage_costs;
  EXPECT_DOUBLE_EQ(c.parse_example_s, 5e-6);
  // 10,000 us per megapixel = 1e-8 s per pixel.
  EXPECT_DOUBLE_EQ(c.decode_jpeg_s_per_pixel, 1e-8);
  // 1000 us per MiB.
  EXPECT_DOUBLE_EQ(c.file_read_s_per_byte, 1e-3 / (1024.0 * 1024.0));
}

}  // namespace derived_figures_test
}  // namespace tpusim::config
