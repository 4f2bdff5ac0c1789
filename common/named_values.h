#pragma once
// An enum's values and the words users write for them ("mxu", "torus2d", "mixed_bfloat16"), in
// one table per enum: the only place an option's word is compared with text. The CLI, configs
// and files parse a word once, at their edge, with parse(); the code behind them compares
// enums, and prints a value with name(). A table reads
//   inline constexpr NamedValues<Precision, 2> kPrecisionNames{
//       {{{Precision::kFp32, "fp32"}, {Precision::kMxu, "mxu"}}}};

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tpusim {

template <typename Enum, std::size_t N>
struct NamedValues {
  std::array<std::pair<Enum, std::string_view>, N> entries;

  // The word for `value` ("" for a value the table lacks, which a complete table never does).
  constexpr std::string_view name(Enum value) const {
    for (const auto& [v, word] : entries) {
      if (v == value) return word;
    }
    return {};
  }
  // The value `word` names, or nothing.
  constexpr std::optional<Enum> parse(std::string_view word) const {
    for (const auto& [v, w] : entries) {
      if (w == word) return v;
    }
    return std::nullopt;
  }
  // The words in order, for messages and help: "a, b or c" (or "a | b | c" with " | ", " | ").
  std::string list(std::string_view separator = ", ", std::string_view last = " or ") const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) out += i + 1 == N ? last : separator;
      out += entries[i].second;
    }
    return out;
  }
};

}  // namespace tpusim
