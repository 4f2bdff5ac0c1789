#pragma once
// Loads configs: reads a slice (or chip) file from disk or from the copies embedded in the
// binary, composes a slice with the chip file it names, checks every field once and returns
// an immutable validated spec. A bad file is rejected with one line per problem, each naming
// file, line (where the parser saw one), field and rule.

#include <memory>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>

#include "configs/config.pb.h"
#include "configs/slice_spec.h"

namespace tpusim::config {

// The text of one config file and where it came from.
struct ConfigText {
  std::string label;  // what error messages call it: the path, or "<embedded>/v3-8.pbtxt"
  std::string text;
  std::string dir;  // folder that relative chip_file names resolve against ("" if embedded)
  bool embedded = false;
};

// Which message a file holds, from its "# proto-message: tpusim.config.X" header line.
enum class ConfigKind { kSlice, kChip, kHost };

// Reads `path_or_name`: an existing file, else an embedded config by name ("v3-8",
// "v3-8.pbtxt" or "configs/v3-8.pbtxt"). NotFound lists the embedded names.
absl::StatusOr<ConfigText> read_config(std::string_view path_or_name);

// The kind named by the header; kSlice when there is none.
ConfigKind detect_kind(const ConfigText& text);

absl::StatusOr<std::shared_ptr<const SliceSpec>> load_slice(std::string_view path_or_name);
absl::StatusOr<std::shared_ptr<const ChipSpec>> load_chip(std::string_view path_or_name);
absl::StatusOr<std::shared_ptr<const HostSpec>> load_host(std::string_view path_or_name);

// Parses and validates already-read text (tests; files are read with read_config).
absl::StatusOr<std::shared_ptr<const SliceSpec>> parse_slice(const ConfigText& text);
absl::StatusOr<std::shared_ptr<const ChipSpec>> parse_chip(const ConfigText& text);
absl::StatusOr<std::shared_ptr<const HostSpec>> parse_host(const ConfigText& text);

// Validates a slice built or edited in code (its chip inline); `label` names it in errors.
absl::StatusOr<std::shared_ptr<const SliceSpec>> validate_slice(const SliceConfig& slice,
                                                                std::string label);

}  // namespace tpusim::config
