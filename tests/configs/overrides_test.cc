// Editing a slice by dotted field path (configs/overrides.h), as `tpusim sweep --set` does.

#include "configs/overrides.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"

namespace tpusim::config {
namespace overrides_test {

using ::testing::HasSubstr;

std::shared_ptr<const SliceSpec> v3_8() {
  auto slice = load_slice("v3-8");
  EXPECT_TRUE(slice.ok()) << slice.status();
  return *slice;
}

TEST(ConfigOverrides, SetsFieldsByExactNameAndByUniquePrefix) {
  auto base = v3_8();
  auto edited = with_overrides(*base,
                               {{"chip.core.mxu_count", "4"},
                                {"chip.hbm.bandwidth", "1800"},
                                {"chip.ici.link_bandwidth_gb_per_s", "100"}},
                               "v3-8 edited");
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_EQ((*edited)->chip.core.mxu_count, 4u);
  EXPECT_EQ((*edited)->proto.chip().hbm().bandwidth_gb_per_s(), 1800);
  EXPECT_EQ((*edited)->proto.chip().ici().link_bandwidth_gb_per_s(), 100);
  // The derived figures follow: twice the MXUs, twice the peak.
  EXPECT_DOUBLE_EQ((*edited)->peak_bf16_flops, 2 * base->peak_bf16_flops);
  // The base is untouched.
  EXPECT_EQ(base->chip.core.mxu_count, 2u);
}

TEST(ConfigOverrides, RepeatedFieldsTakeValuesJoinedByX) {
  auto edited = with_overrides(*v3_8(), {{"topology.shape", "4x1"}}, "v3-8 4x1");
  ASSERT_TRUE(edited.ok()) << edited.status();
  EXPECT_EQ((*edited)->proto.topology().shape_size(), 2);
  EXPECT_EQ((*edited)->proto.topology().shape(0), 4u);
  EXPECT_EQ((*edited)->chips, 4u);
}

TEST(ConfigOverrides, ErrorsNameThePathAndWhatWasExpected) {
  auto base = v3_8();
  auto error = [&](const std::string& path, const std::string& value) {
    auto s = with_overrides(*base, {{path, value}}, "v3-8 at p001");
    EXPECT_FALSE(s.ok()) << path;
    return std::string(s.status().message());
  };
  EXPECT_THAT(error("chip.core.mxu", "4"), HasSubstr("could be any of mxu_count, mxu_rows"));
  EXPECT_THAT(error("chip.core.nope", "4"), HasSubstr("CoreConfig has no field 'nope'"));
  EXPECT_THAT(error("chip.core.nope", "4"), HasSubstr("mxu_count"));
  EXPECT_THAT(error("chip.core.mxu_count", "four"), HasSubstr("'four' is not a whole number"));
  EXPECT_THAT(error("chip.core.mxu_count", "-1"), HasSubstr("is not a whole number"));
  EXPECT_THAT(error("chip.core", "4"), HasSubstr("is a message; name one of its fields"));
  EXPECT_THAT(error("chip.core.mxu_count.x", "4"), HasSubstr("has no fields to name after it"));
  EXPECT_THAT(error("topology.kind", "SPHERE"), HasSubstr("is not one of"));
  // The edited slice is validated like a file: the rule and the field are named.
  const std::string zero = error("chip.core.mxu_count", "0");
  EXPECT_THAT(zero, HasSubstr("v3-8 at p001"));
  EXPECT_THAT(zero, HasSubstr("mxu_count"));
}

// Numbers are read as a config file's parser reads them: "-18446744073709551614" wrapped to 2
// through strtoull and was used; a leading space or '+', a hex float, or anything after the
// number was taken too.
TEST(ConfigOverrides, NumbersAreReadWholeAsAConfigFileReadsThem) {
  auto base = v3_8();
  for (const char* text : {" -18446744073709551614", "-18446744073709551614", " 4", "+4", "4 ",
                           "0x4", "4.0", "1e1", ""}) {
    auto s = with_overrides(*base, {{"chip.core.mxu_count", text}}, "v3-8 at p000");
    EXPECT_FALSE(s.ok()) << "'" << text << "'";
    EXPECT_THAT(
        std::string(s.status().message()),
        HasSubstr(std::string("'chip.core.mxu_count': '") + text + "' is not a whole number >= 0"));
  }
  for (const char* text : {"0x1p11", " 1800", "+1800", "1800GB"}) {
    auto s = with_overrides(*base, {{"chip.hbm.bandwidth_gb_per_s", text}}, "v3-8 at p000");
    EXPECT_FALSE(s.ok()) << "'" << text << "'";
    EXPECT_THAT(std::string(s.status().message()), HasSubstr("' is not a number"));
  }
  auto fine = with_overrides(*base, {{"chip.hbm.bandwidth_gb_per_s", "1.8e3"}}, "v3-8 fine");
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ((*fine)->proto.chip().hbm().bandwidth_gb_per_s(), 1800);
}

TEST(ConfigOverrides, TellsConfigFieldsFromRunOptions) {
  EXPECT_TRUE(is_config_path("chip.core.mxu_count"));
  EXPECT_TRUE(is_config_path("topology.shape"));
  EXPECT_TRUE(is_config_path("chips_per_host"));
  EXPECT_FALSE(is_config_path("iterations_per_loop"));
  EXPECT_FALSE(is_config_path("batch_size"));
}

TEST(ConfigOverrides, TheWrittenConfigLoadsBackTheSame) {
  auto edited = with_overrides(*v3_8(), {{"chip.hbm.bandwidth_gb_per_s", "450"}}, "v3-8 slow");
  ASSERT_TRUE(edited.ok()) << edited.status();
  const std::string text = to_config_text(**edited);
  auto again = parse_slice(ConfigText{"p000.pbtxt", text, "", false});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->proto.SerializeAsString(), (*edited)->proto.SerializeAsString());
  EXPECT_DOUBLE_EQ((*again)->hbm_bandwidth_bytes_per_s, (*edited)->hbm_bandwidth_bytes_per_s);
}

}  // namespace overrides_test
}  // namespace tpusim::config
