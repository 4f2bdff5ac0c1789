// Loading and composing configs: from disk and embedded, names, kinds, referenced files.
#include "configs/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/embedded_files.h"
#include "tests/configs/config_test_util.h"

namespace tpusim::config {
namespace loader_test {

using config::testing::TempDir;
using ::testing::HasSubstr;
using testing::read_shipped;
using testing::replace_once;
using testing::shipped;

// The header that names a file's kind is read without a regular expression: libstdc++'s regex
// recurses once a matched character, and fuzz_config's header of 29 KB of word characters
// ("# proto-message: tpusim.config.Chip777...") overflowed the stack. Long names are read
// whole and name no kind of theirs.
TEST(Loader, AHeaderOfAnyLengthIsReadWithoutRecursion) {
  auto kind = [](const std::string& text) { return detect_kind(ConfigText{"t", text, "", false}); };
  EXPECT_EQ(kind("# proto-message: tpusim.config.ChipConfig\nx: 1\n"), ConfigKind::kChip);
  EXPECT_EQ(kind("#proto-message:HostConfig"), ConfigKind::kHost);
  EXPECT_EQ(kind("# comment\n#  proto-message:  tpusim.config.SliceConfig\n"), ConfigKind::kSlice);
  EXPECT_EQ(kind("# proto-message: tpusim.config.ChipConfigs\n"), ConfigKind::kSlice);
  EXPECT_EQ(kind("# proto-message: ChipConfig.x\n"), ConfigKind::kChip);       // \w+ stops at '.'
  EXPECT_EQ(kind("x: 1\n# proto-message: ChipConfig\n"), ConfigKind::kSlice);  // not at the top
  EXPECT_EQ(kind("# proto-message: " + std::string(1 << 20, '7') + "\n"), ConfigKind::kSlice);
  EXPECT_EQ(kind("# proto-message: tpusim.config.Chip" + std::string(1 << 20, 'o')),
            ConfigKind::kSlice);
}

TEST(Loader, EveryShippedFileIsEmbeddedVerbatim) {
  const auto names = embedded_names();
  for (const char* name :
       {"tpu_v2.pbtxt",   "tpu_v3.pbtxt",   "tpu_v4.pbtxt",  "tpu_v5e.pbtxt", "v2-8.pbtxt",
        "v2-32.pbtxt",    "v2-512.pbtxt",   "v3-8.pbtxt",    "v3-32.pbtxt",   "v3-2048.pbtxt",
        "v4-8.pbtxt",     "v4-16.pbtxt",    "v4-32.pbtxt",   "v4-128.pbtxt",  "v4-512.pbtxt",
        "v5e-4.pbtxt",    "v5e-8.pbtxt",    "v5e-256.pbtxt", "host_96.pbtxt", "host_112.pbtxt",
        "host_224.pbtxt", "host_240.pbtxt", "tpu_v5p.pbtxt", "v5p-8.pbtxt",   "v5p-128.pbtxt",
        "host_208.pbtxt"}) {
    SCOPED_TRACE(name);
    auto found = find_embedded(name);
    ASSERT_TRUE(found.has_value());
    EXPECT_EQ(std::string(*found), read_shipped(name));
  }
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(Loader, DiskAndEmbeddedCopiesGiveTheSameSpec) {
  auto disk = load_slice(shipped("v3-8.pbtxt"));
  auto embedded = load_slice("v3-8");
  ASSERT_TRUE(disk.ok()) << disk.status();
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_EQ((*disk)->proto.SerializeAsString(), (*embedded)->proto.SerializeAsString());
  EXPECT_EQ((*disk)->source, shipped("v3-8.pbtxt"));
  EXPECT_EQ((*embedded)->source, "<embedded>/v3-8.pbtxt");
  EXPECT_EQ((*disk)->chip.source, shipped("tpu_v3.pbtxt"));
}

TEST(Loader, EmbeddedNamesResolveWithOrWithoutFolderAndExtension) {
  for (const char* name : {"v3-8", "v3-8.pbtxt", "configs/v3-8.pbtxt", "/nowhere/v3-8"}) {
    SCOPED_TRACE(name);
    auto s = load_slice(name);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->name, "v3-8");
  }
}

TEST(Loader, ComposedProtoHoldsChipAndHostInline) {
  auto s = load_slice("v3-32");
  ASSERT_TRUE(s.ok()) << s.status();
  const SliceConfig& proto = (*s)->proto;
  EXPECT_EQ(proto.chip_source_case(), SliceConfig::kChip);
  EXPECT_EQ(proto.host_source_case(), SliceConfig::kHost);
  EXPECT_EQ(proto.chip().name(), "tpu_v3");
  EXPECT_EQ(proto.host().cpu_cores(), 96u);
  // The inline proto validates again to the same figures: what sweeps rely on.
  auto again = validate_slice(proto, "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->cores, (*s)->cores);
  EXPECT_DOUBLE_EQ((*again)->peak_bf16_flops, (*s)->peak_bf16_flops);
}

TEST(Loader, ChipFileResolvesNextToTheSliceFirst) {
  TempDir dir;
  // A local tpu_v3.pbtxt with a faster HBM shadows the embedded one.
  dir.write("tpu_v3.pbtxt", replace_once(read_shipped("tpu_v3.pbtxt"), "bandwidth_gb_per_s: 900",
                                         "bandwidth_gb_per_s: 1800"));
  const std::string path = dir.write("my-slice.pbtxt", read_shipped("v3-8.pbtxt"));
  auto s = load_slice(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ((*s)->chip.hbm.bandwidth_bytes_per_s, 1800e9);
  EXPECT_EQ((*s)->chip.source, (dir.path() / "tpu_v3.pbtxt").string());
}

TEST(Loader, ChipFileFallsBackToTheEmbeddedCopy) {
  TempDir dir;
  const std::string path = dir.write("copy.pbtxt", read_shipped("v3-8.pbtxt"));
  auto s = load_slice(path);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->chip.source, "<embedded>/tpu_v3.pbtxt");
}

TEST(Loader, MissingChipFileIsNamed) {
  TempDir dir;
  const std::string path = dir.write(
      "s.pbtxt", replace_once(read_shipped("v3-8.pbtxt"), "tpu_v3.pbtxt", "tpu_v9.pbtxt"));
  auto s = load_slice(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("chip_file \"tpu_v9.pbtxt\" not found in " + dir.path().string()));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("tpu_v3.pbtxt"));  // the list
}

TEST(Loader, UnknownNameListsTheEmbeddedConfigs) {
  auto s = load_slice("v7-9000");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("no config file \"v7-9000\""));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("v3-8.pbtxt"));
}

TEST(Loader, FolderIsNotAConfig) {
  TempDir dir;
  auto s = load_slice(dir.path().string());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("is a folder"));
}

TEST(Loader, KindComesFromTheHeader) {
  EXPECT_EQ(detect_kind(*read_config("tpu_v3")), ConfigKind::kChip);
  EXPECT_EQ(detect_kind(*read_config("host_96")), ConfigKind::kHost);
  EXPECT_EQ(detect_kind(*read_config("v3-8")), ConfigKind::kSlice);
  EXPECT_EQ(detect_kind(ConfigText{"x", "name: \"s\"", "", false}), ConfigKind::kSlice);
}

TEST(Loader, ChipGivenWhereASliceIsExpectedIsRejected) {
  auto s = load_slice("tpu_v3");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("is not a slice config"));
  auto c = load_chip("v3-8");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("is not a chip config: its first lines lack \"# proto-message: "
                        "tpusim.config.ChipConfig\""));
}

TEST(Loader, SliceWithInlineChipAndHost) {
  std::string chip = read_shipped("tpu_v3.pbtxt");
  std::string host = read_shipped("host_96.pbtxt");
  const std::string text = "name: \"inline\"\nchip {\n" + chip +
                           "\n}\ntopology { shape: 4 kind: MESH }\nchips_per_host: 2\nhost {\n" +
                           host + "\n}\n";
  auto s = parse_slice(ConfigText{"inline.pbtxt", text, "", false});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->chips, 4u);
  EXPECT_EQ((*s)->hosts, 2u);
  EXPECT_FALSE((*s)->topology.torus);
  // A 4-chip line: the two middle chips have two neighbours.
  EXPECT_EQ((*s)->topology.links_needed_per_chip, 2u);
  EXPECT_EQ((*s)->chip.source, "inline.pbtxt");
}

// fuzz_config: a chip_file name longer than the file system allows made std::filesystem::exists
// throw (ENAMETOOLONG), and the exception ended the process. It is a name that is not there.
TEST(Loader, AChipFileNameTooLongForTheFileSystemIsNotFound) {
  const std::string name = std::string(400, 'x') + ".pbtxt";
  const std::string text = "name: \"long\"\nchip_file: \"" + name +
                           "\"\ntopology { shape: 2 kind: MESH }\nhost_file: \"host_96.pbtxt\"\n";
  auto s = parse_slice(ConfigText{"long.pbtxt", text, "/tmp", false});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("chip_file \"xxxx"));
}

}  // namespace loader_test
}  // namespace tpusim::config
