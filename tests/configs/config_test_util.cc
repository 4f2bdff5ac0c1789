#include "tests/configs/config_test_util.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

namespace tpusim::config::testing {

std::string shipped(const std::string& name) {
  return std::string(TPUSIM_SOURCE_DIR) + "/configs/" + name;
}

std::string read_shipped(const std::string& name) {
  std::ifstream in(shipped(name));
  std::ostringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << "cannot read " << shipped(name);
  return ss.str();
}

std::string replace_once(const std::string& text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not found";
  if (at == std::string::npos) return text;
  std::string out = text;
  out.replace(at, from.size(), to);
  return out;
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "tpusim-test-XXXXXX").string();
  const char* made = mkdtemp(pattern.data());
  EXPECT_NE(made, nullptr);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const auto file = path_ / name;
  std::ofstream out(file);
  out << text;
  return file.string();
}

}  // namespace tpusim::config::testing
