#include "traces/profile_compare.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

namespace tpusim::traces {
namespace {

using Key = std::pair<std::string, std::string>;  // name, category

bool costlier(const SideBySide& a, const SideBySide& b) {
  return std::tie(b.measured, b.simulated, a.name, a.category) <
         std::tie(a.measured, a.simulated, b.name, b.category);
}

std::string ratio_text(const std::optional<double>& r) {
  return r ? fmt::format("{:.3f}", *r) : std::string("-");
}

nlohmann::ordered_json ratio_json(const std::optional<double>& r) {
  return r ? nlohmann::ordered_json(*r) : nlohmann::ordered_json(nullptr);
}

std::string category_text(const std::string& category) {
  return category.empty() ? std::string("-") : category;
}

// Each op of `profile` by name and category, its time a step.
std::map<Key, double> times_of(const OpProfile& profile) {
  std::map<Key, double> out;
  for (const ProfileOp& op : profile.ops) {
    out[{op.name, op.category}] += profile.seconds_per_step(op);
  }
  return out;
}

void add_category(std::map<std::string, SideBySide>* rows, const SideBySide& op) {
  SideBySide& row = (*rows)[op.category];
  row.name = category_text(op.category);
  row.measured += op.measured;
  row.simulated += op.simulated;
  row.ops_measured += op.measured > 0 ? 1 : 0;
  row.ops_simulated += op.simulated > 0 ? 1 : 0;
}

std::string profile_line(const char* side, const OpProfile& p) {
  return fmt::format("{:<10} {}: {}, {} device(s), {} step(s), step {:.3f} ms, {} op(s)\n", side,
                     p.path, p.device, p.devices, p.steps, p.step_ps * 1e-9, p.ops.size());
}

// The width of the first column: the longest name shown, at least 40.
size_t name_width(const std::vector<SideBySide>& rows, size_t shown) {
  size_t width = 40;
  for (size_t i = 0; i < shown && i < rows.size(); ++i)
    width = std::max(width, rows[i].name.size());
  return width;
}

std::string rows_text(const std::vector<SideBySide>& rows, size_t shown, bool with_category,
                      size_t width) {
  std::string out;
  for (size_t i = 0; i < shown && i < rows.size(); ++i) {
    const SideBySide& r = rows[i];
    out += with_category ? fmt::format("  {:<{}} {:<22}", r.name, width, category_text(r.category))
                         : fmt::format("  {:<{}}", r.name, width);
    out += fmt::format(" {:>12.3f} {:>12.3f} {:>9}\n", r.measured * 1e3, r.simulated * 1e3,
                       ratio_text(r.ratio()));
  }
  return out;
}

std::string unmatched_text(const char* side, const std::vector<SideBySide>& ops, bool measured) {
  if (ops.empty()) return fmt::format("only in the {} profile: none\n", side);
  double seconds = 0;
  std::vector<std::string> names;
  for (const SideBySide& op : ops) {
    seconds += measured ? op.measured : op.simulated;
    if (names.size() < 5) names.push_back(op.name);
  }
  return fmt::format("only in the {} profile: {} op(s), {:.3f} ms a step (costliest: {})\n", side,
                     ops.size(), seconds * 1e3, fmt::join(names, ", "));
}

nlohmann::ordered_json rows_json(const std::vector<SideBySide>& rows, bool ops) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SideBySide& r : rows) {
    nlohmann::ordered_json row;
    row[ops ? "name" : "category"] = r.name;
    if (ops) row["category"] = r.category;
    row["measured_seconds_per_step"] = r.measured;
    row["simulated_seconds_per_step"] = r.simulated;
    row["ratio"] = ratio_json(r.ratio());
    if (!ops) {
      row["ops_measured"] = r.ops_measured;
      row["ops_simulated"] = r.ops_simulated;
    }
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace

std::optional<double> SideBySide::ratio() const {
  if (measured <= 0) return std::nullopt;
  return simulated / measured;
}

std::optional<double> ProfileComparison::step_ratio() const {
  if (measured.step_ps <= 0) return std::nullopt;
  return simulated.step_ps / measured.step_ps;
}

ProfileComparison compare_profiles(OpProfile measured, OpProfile simulated) {
  ProfileComparison out;
  const std::map<Key, double> real = times_of(measured), sim = times_of(simulated);
  std::map<std::string, SideBySide> categories;
  for (const auto& [key, seconds] : real) {
    auto it = sim.find(key);
    SideBySide row{key.first, key.second,
                   seconds,   it == sim.end() ? 0 : it->second,
                   1,         it == sim.end() ? 0 : 1};
    (it == sim.end() ? out.only_measured : out.matched).push_back(row);
    add_category(&categories, row);
  }
  for (const auto& [key, seconds] : sim) {
    if (real.count(key) > 0) continue;
    SideBySide row{key.first, key.second, 0, seconds, 0, 1};
    out.only_simulated.push_back(row);
    add_category(&categories, row);
  }
  out.ops_total.name = "all ops";
  for (auto& [category, row] : categories) {
    out.ops_total.measured += row.measured;
    out.ops_total.simulated += row.simulated;
    out.ops_total.ops_measured += row.ops_measured;
    out.ops_total.ops_simulated += row.ops_simulated;
    out.categories.push_back(std::move(row));
  }
  for (auto* rows : {&out.matched, &out.only_measured, &out.categories}) {
    std::sort(rows->begin(), rows->end(), costlier);
  }
  std::sort(out.only_simulated.begin(), out.only_simulated.end(),
            [](const SideBySide& a, const SideBySide& b) {
              return std::tie(b.simulated, a.name) < std::tie(a.simulated, b.name);
            });
  out.measured = std::move(measured);
  out.simulated = std::move(simulated);
  return out;
}

std::string ProfileComparison::to_text(size_t top) const {
  std::string out = profile_line("measured", measured) + profile_line("simulated", simulated);
  out += fmt::format("step time: measured {:.3f} ms, simulated {:.3f} ms, simulated/measured {}\n",
                     measured.step_ps * 1e-9, simulated.step_ps * 1e-9, ratio_text(step_ratio()));
  out += "\nby category (ms a step on one device; ratio simulated/measured):\n";
  const size_t category_width = name_width(categories, categories.size());
  out += fmt::format("  {:<{}} {:>12} {:>12} {:>9}\n", "category", category_width, "measured",
                     "simulated", "ratio");
  out += rows_text(categories, categories.size(), false, category_width);
  out += rows_text({ops_total}, 1, false, category_width);
  const size_t shown = top == 0 ? matched.size() : std::min(top, matched.size());
  const size_t op_width = name_width(matched, shown);
  out +=
      fmt::format("\ncostliest ops in both ({} of {}, by measured time):\n", shown, matched.size());
  out += fmt::format("  {:<{}} {:<22} {:>12} {:>12} {:>9}\n", "op", op_width, "category",
                     "measured", "simulated", "ratio");
  out += rows_text(matched, shown, true, op_width);
  out += unmatched_text("measured", only_measured, true);
  out += unmatched_text("simulated", only_simulated, false);
  return out;
}

nlohmann::ordered_json ProfileComparison::to_json() const {
  nlohmann::ordered_json j;
  for (const auto& [side, p] : {std::pair{"measured", &measured}, {"simulated", &simulated}}) {
    j[side] = {{"path", p->path},
               {"device", p->device},
               {"devices", p->devices},
               {"steps", p->steps},
               {"step_seconds", p->step_ps * 1e-12},
               {"ops", p->ops.size()}};
  }
  j["step_ratio"] = ratio_json(step_ratio());
  j["categories"] = rows_json(categories, false);
  j["ops_total"] = rows_json({ops_total}, false)[0];
  j["matched"] = rows_json(matched, true);
  j["only_measured"] = rows_json(only_measured, true);
  j["only_simulated"] = rows_json(only_simulated, true);
  return j;
}

}  // namespace tpusim::traces
