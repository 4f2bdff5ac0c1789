#pragma once
// Statistics as a tree of named groups, each owned by the module that produces it (a core owns
// its units' groups, a chip its cores'). A statistic is read through a function when the tree
// is dumped, so modules keep plain counters on their hot path and formulas (utilisation) are
// computed only when asked for. Every statistic has a unit and a description.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim::sim {

class StatGroup {
 public:
  StatGroup(std::string name, std::string description);

  // A child group, owned by this one.
  StatGroup& child(std::string name, std::string description);
  // A statistic read through `value` at dump time.
  void add(std::string name, std::string unit, std::string description,
           std::function<double()> value);
  // Called by reset(), for the module to zero its counters.
  void on_reset(std::function<void()> reset);

  const std::string& name() const { return name_; }
  // Resets this group and every descendant.
  void reset();
  // {"name": value, ..., "child": {...}}; with `describe`, each value is
  // {"value", "unit", "description"}.
  nlohmann::ordered_json to_json(bool describe = false) const;
  // The value of a statistic by dotted path below this group ("mxu0.busy_cycles").
  double value(const std::string& path) const;

 private:
  struct Stat {
    std::string name;
    std::string unit;
    std::string description;
    std::function<double()> value;
  };
  std::string name_;
  std::string description_;
  std::vector<Stat> stats_;
  std::vector<std::unique_ptr<StatGroup>> children_;
  std::vector<std::function<void()>> resets_;
};

}  // namespace tpusim::sim
