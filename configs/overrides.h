#pragma once
// Edits a slice config by dotted field path, the way `tpusim sweep --set` names a parameter:
// "chip.core.mxu_count=4", "chip.hbm.bandwidth_gb_per_s=1800", "topology.shape=4x2". Each name
// is a field of config.proto's messages, exactly or as a prefix that only one field has
// ("chip.hbm.bandwidth"). The edited slice is validated again like a file, so a value out of
// range is rejected with the field and rule.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>
#include <google/protobuf/message.h>

#include "configs/slice_spec.h"

namespace tpusim::config {

// Whether `path` names a slice config field (rather than a run option such as
// iterations_per_loop): it starts with a SliceConfig field name followed by '.' or is one.
bool is_config_path(std::string_view path);

// Sets the field at `path` in `message` from `text`: numbers, true/false, enum value names,
// strings; a repeated number field takes its values joined by 'x' ("4x2"). The error names the
// path, the field and what it expected.
absl::Status set_field(google::protobuf::Message* message, std::string_view path,
                       std::string_view text);

// `base` with each (path, value) applied in order, validated; `label` names it in errors.
absl::StatusOr<std::shared_ptr<const SliceSpec>> with_overrides(
    const SliceSpec& base, const std::vector<std::pair<std::string, std::string>>& sets,
    const std::string& label);

// The slice as a config file (its proto-message header first) that load_slice reads back.
std::string to_config_text(const SliceSpec& slice);

}  // namespace tpusim::config
