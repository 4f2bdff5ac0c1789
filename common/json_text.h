#pragma once
// JSON text that never throws on the names users' files bring.

#include <string>

namespace tpusim {

// `j` (an nlohmann::json or ordered_json) as JSON text, indented by `indent` (-1: one line).
// Names read from users' files may hold bytes that are not UTF-8; they print as U+FFFD instead
// of failing the dump.
template <typename Json>
std::string json_text(const Json& j, int indent = 2) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tpusim
