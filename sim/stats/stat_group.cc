#include "sim/stats/stat_group.h"

#include <stdexcept>

namespace tpusim::sim {

StatGroup::StatGroup(std::string name, std::string description)
    : name_(std::move(name)), description_(std::move(description)) {}

StatGroup& StatGroup::child(std::string name, std::string description) {
  children_.push_back(std::make_unique<StatGroup>(std::move(name), std::move(description)));
  return *children_.back();
}

void StatGroup::add(std::string name, std::string unit, std::string description,
                    std::function<double()> value) {
  stats_.push_back(
      Stat{std::move(name), std::move(unit), std::move(description), std::move(value)});
}

void StatGroup::on_reset(std::function<void()> reset) { resets_.push_back(std::move(reset)); }

void StatGroup::reset() {
  for (auto& r : resets_) r();
  for (auto& c : children_) c->reset();
}

nlohmann::ordered_json StatGroup::to_json(bool describe) const {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const Stat& s : stats_) {
    const double v = s.value();
    if (describe) {
      j[s.name] = {{"value", v}, {"unit", s.unit}, {"description", s.description}};
    } else {
      j[s.name] = v;
    }
  }
  for (const auto& c : children_) j[c->name()] = c->to_json(describe);
  return j;
}

double StatGroup::value(const std::string& path) const {
  const size_t dot = path.find('.');
  if (dot == std::string::npos) {
    for (const Stat& s : stats_) {
      if (s.name == path) return s.value();
    }
  } else {
    const std::string head = path.substr(0, dot);
    for (const auto& c : children_) {
      if (c->name() == head) return c->value(path.substr(dot + 1));
    }
  }
  throw std::out_of_range("no statistic " + path + " under " + name_);
}

}  // namespace tpusim::sim
