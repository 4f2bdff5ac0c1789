#pragma once
// The backends tpusim knows by name (tpusim | cpu | gpu), each with whether this binary was
// built with it and whether it can run here. Backends are listed in one table in
// backend_registry.cc, one line each; the CLI and the estimator choose them by name.

#include <string>
#include <vector>

namespace tpusim::runtime {

struct BackendInfo {
  std::string name;
  std::string description;
  bool built = false;      // compiled into this binary
  bool available = false;  // can run on this machine now
  std::string reason;      // why it is not available ("" when it is)
};

// Every backend of the table, in the table's order.
std::vector<BackendInfo> list_backends();

}  // namespace tpusim::runtime
