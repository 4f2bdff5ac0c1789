#include "tools/studies/sweep_table.h"

#include <cmath>
#include <set>
#include <utility>

#include "common/json_text.h"

namespace tpusim::studies {
namespace {

void flatten_into(const nlohmann::ordered_json& j, const std::string& prefix,
                  nlohmann::ordered_json* out) {
  for (const auto& [key, value] : j.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      flatten_into(value, path, out);
    } else if (value.is_number() || value.is_string() || value.is_boolean() || value.is_null()) {
      (*out)[path] = value;  // null: a figure the point did not compute (an empty cell)
    }
  }
}

std::string csv_cell(const nlohmann::ordered_json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string quoted = "\"";
    for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
  }
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
    return buf;
  }
  return json_text(v, -1);
}

}  // namespace

nlohmann::ordered_json flatten_report(const nlohmann::ordered_json& report) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (report.is_object()) flatten_into(report, "", &out);
  // A report that is a list of named results (validate's cases): each under its name.
  if (report.is_array()) {
    for (size_t i = 0; i < report.size(); ++i) {
      const auto& item = report[i];
      if (!item.is_object()) continue;
      const auto name = item.find("name");
      flatten_into(
          item,
          name != item.end() && name->is_string() ? name->get<std::string>() : std::to_string(i),
          &out);
    }
  }
  return out;
}

void set_report(SweepRow* row, nlohmann::ordered_json report) {
  row->report = std::move(report);
  row->flat = flatten_report(row->report);
}

std::vector<std::string> report_columns(const std::vector<SweepRow>& rows) {
  std::vector<std::string> columns;
  std::set<std::string> seen;
  for (const SweepRow& row : rows) {
    for (const auto& [key, value] : row.flat.items()) {
      if (seen.insert(key).second) columns.push_back(key);
    }
  }
  return columns;
}

std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows) {
  const std::vector<std::string> columns = report_columns(rows);
  std::string out = "point";
  for (const SweepAxis& a : axes) out += "," + csv_cell(a.field);
  out += ",exit_code";
  for (const std::string& c : columns) out += "," + csv_cell(c);
  out += "\n";
  for (const SweepRow& row : rows) {
    out += row.point.id;
    for (const std::string& v : row.point.values) out += "," + csv_cell(v);
    out += "," + std::to_string(row.exit_code);
    for (const std::string& c : columns) {
      out += ",";
      if (row.flat.contains(c)) out += csv_cell(row.flat[c]);
    }
    out += "\n";
  }
  return out;
}

nlohmann::ordered_json sweep_json(const std::vector<SweepAxis>& axes,
                                  const std::vector<SweepRow>& rows, const std::string& metric) {
  nlohmann::ordered_json j;
  j["axes"] = nlohmann::ordered_json::array();
  for (const SweepAxis& a : axes) {
    j["axes"].push_back(
        {{"field", a.field}, {"values", a.values}, {"kind", a.config ? "config" : "run_option"}});
  }
  j["metric"] = metric;
  j["points"] = nlohmann::ordered_json::array();
  for (const SweepRow& row : rows) {
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    for (size_t a = 0; a < axes.size(); ++a) values[axes[a].field] = row.point.values[a];
    nlohmann::ordered_json point = {
        {"point", row.point.id}, {"values", values}, {"exit_code", row.exit_code}};
    if (!row.failure.empty()) point["failure"] = row.failure;
    point["rank"] = row.rank;
    point["host_seconds"] = row.seconds;
    point["log"] = row.log;
    point["report"] = row.report;
    j["points"].push_back(std::move(point));
  }
  return j;
}

bool every_point_input_bound(const std::vector<SweepRow>& rows) {
  size_t classified = 0;
  for (const SweepRow& row : rows) {
    const auto c = row.flat.find("analysis.classification");
    if (c == row.flat.end() || !c->is_string()) continue;
    ++classified;
    if (c->get<std::string>() == "not_input_bound") return false;
  }
  return classified > 0;
}

double row_number(const SweepRow& row, const std::string& column) {
  if (!row.flat.contains(column) || !row.flat[column].is_number()) return std::nan("");
  return row.flat[column].get<double>();
}

}  // namespace tpusim::studies
