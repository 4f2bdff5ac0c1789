#pragma once
// Why a command stops before (or while) running, for the helpers that read its flags: a usage
// problem (exit 2, printed with the usage) or a failure of the job itself (exit 1). A helper
// returns a Refused, empty when the command goes on; the command turns it into its exit code.

#include <optional>
#include <string>

#include <absl/status/status.h>

#include "tools/tpusim/command.h"

namespace tpusim::cli {

struct Refusal {
  bool usage = true;
  std::string message;
};
using Refused = std::optional<Refusal>;

// A usage problem with `s`'s message.
inline Refused usage_problem(const absl::Status& s) {
  return Refusal{true, std::string(s.message())};
}
inline Refused usage_problem(std::string message) { return Refusal{true, std::move(message)}; }
// A failure with `s`'s message.
inline Refused failure_of(const absl::Status& s) {
  return Refusal{false, std::string(s.message())};
}
inline Refused failure_of(std::string message) { return Refusal{false, std::move(message)}; }

// The exit code for `r`, its message printed (with `usage` when it is a usage problem).
inline int refuse(const Refusal& r, const std::string& usage) {
  return r.usage ? usage_error(r.message, usage) : failure(r.message);
}

}  // namespace tpusim::cli
