#pragma once
// String building shared by every library: str_cat concatenates anything fmt can format (so
// std::string_view works, which Debian's absl::StrCat does not accept); str_join joins.

#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
