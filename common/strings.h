#pragma once
// String building shared by every library: str_cat concatenates anything fmt can format (so
// std::string_view works, which Debian's absl::StrCat does not accept); str_join joins.

#include <iterator>
#include <string>
#include <string_view>

#include <absl/strings/string_view.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#if !defined(ABSL_USES_STD_STRING_VIEW)
// Debian's absl has its own string_view (absl::Status::message() returns one): format it as text.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};
#endif

namespace tpusim {

template <typename... Args>
std::string str_cat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

// The elements of `range` formatted with "{}" and separated by `sep`.
template <typename Range>
std::string str_join(const Range& range, std::string_view sep) {
  return fmt::format("{}", fmt::join(range, sep));
}

}  // namespace tpusim
