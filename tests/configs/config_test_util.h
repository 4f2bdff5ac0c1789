#pragma once
// Helpers for config tests: shipped files, and bad copies of them written to a temp folder.

#include <filesystem>
#include <string>

namespace tpusim::config::testing {

// Path of a file in the repository's configs/ folder.
std::string shipped(const std::string& name);

// Text of a shipped config.
std::string read_shipped(const std::string& name);

// Replaces the first occurrence of `from` in `text` by `to`; fails the test when absent.
std::string replace_once(const std::string& text, const std::string& from, const std::string& to);

// A fresh temp folder for one test, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Writes `text` to `name` inside the folder and returns its path.
  std::string write(const std::string& name, const std::string& text) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tpusim::config::testing
