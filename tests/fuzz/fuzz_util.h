#pragma once
// Shared by the libFuzzer harnesses: the readers under test take paths, so an input is written
// to a file of this process's own (in /dev/shm when it exists: no disk I/O per execution).

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include <unistd.h>

namespace tpusim::fuzz {

// Writes `data` to a file named `name` (its extension matters to some readers) and returns its
// path; the same path each call, so a run leaves one file.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/tpusim-fuzz-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace tpusim::fuzz
