#include "configs/embedded_files.h"

namespace tpusim::config {

std::optional<std::string_view> find_embedded(std::string_view name) {
  for (const EmbeddedFile* f = embedded_files_begin(); f != embedded_files_end(); ++f) {
    if (name == f->name) return std::string_view(f->contents);
  }
  return std::nullopt;
}

std::vector<std::string> embedded_names() {
  std::vector<std::string> names;
  for (const EmbeddedFile* f = embedded_files_begin(); f != embedded_files_end(); ++f) {
    names.emplace_back(f->name);
  }
  return names;
}

}  // namespace tpusim::config
