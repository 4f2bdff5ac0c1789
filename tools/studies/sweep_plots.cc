#include "tools/studies/sweep_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "common/strings.h"
#include "tools/studies/subprocess.h"

namespace tpusim::studies {
namespace {

namespace fs = std::filesystem;

// The analyzer's categories, bottom of the stack first.
constexpr const char* kCategories[] = {"compute",    "input",           "output",
                                       "all_reduce", "all_reduce_wait", "idle"};

bool is_number(const std::string& s) {
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return !s.empty() && *end == 0;
}

std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? '\'' : c;
  return out + "\"";
}

// The script's output lines for both formats: draws `plot` once as PNG, once as SVG.
std::string both_formats(const fs::path& plots, const std::string& name,
                         const std::string& settings, const std::string& plot,
                         const std::string& size = "960,600") {
  return fmt::format(
      "{0}\nset terminal pngcairo size {3} noenhanced font 'sans,10'\nset output '{1}.png'\n"
      "{2}\nset terminal svg size {3} noenhanced font 'sans,10'\nset output '{1}.svg'\n"
      "replot\nset output\n",
      settings, (plots / name).string(), plot, size);
}

absl::Status run_gnuplot(const std::string& gnuplot, const fs::path& plots, const std::string& name,
                         const std::string& script, std::vector<std::string>* drawn) {
  const fs::path gp = plots / (name + ".gp");
  std::ofstream(gp) << script;
  const std::string log = (plots / "gnuplot.log").string();
  auto pid = spawn_program(gnuplot, {"gnuplot", gp.string()}, log);
  if (!pid.ok()) return pid.status();
  auto rc = wait_child(*pid);
  if (!rc.ok()) return rc.status();
  if (*rc != 0) {
    return absl::InternalError(str_cat("gnuplot failed on ", gp.string(), " (exit ", *rc, "); ",
                                       log, " ends:\n", log_tail(log)));
  }
  for (const char* ext : {".png", ".svg"}) drawn->push_back((plots / (name + ext)).string());
  return absl::OkStatus();
}

std::string point_label(const SweepRow& row) { return str_join(row.point.values, "/"); }

// "field=value field=value" of a row's point.
std::string point_title(const std::vector<SweepAxis>& axes, const SweepRow& row) {
  std::vector<std::string> parts;
  for (size_t a = 0; a < axes.size() && a < row.point.values.size(); ++a)
    parts.push_back(axes[a].field + "=" + row.point.values[a]);
  return str_join(parts, " ");
}

std::string axes_label(const std::vector<SweepAxis>& axes) {
  std::vector<std::string> fields;
  for (const SweepAxis& a : axes) fields.push_back(a.field);
  return str_join(fields, " / ");
}

// 3. The roofline: each op with FLOPs and HBM traffic at (arithmetic intensity, achieved
// FLOPS), a series per point, under each distinct set of the chip's roofs (the MXUs' peak and the
// HBM slope solid, the vector units' peak dashed). A roof and the points under it share a colour
// and the roof's key entry names them; the points under one roof differ in shape, filled for MXU
// ops, open for the vector units'. A point's size grows with the op's share of the step. Drawn
// when at least one report has an op profile ("ops" and "roofline"), its key beside the plot.
// A chip's roofs on the roofline plot.
struct Roof {
  double peak_tflops, vector_tflops, hbm_tb_per_s;
  int colour;
  std::vector<std::string> points;  // the ids of the points under it
};

// The points under one roof share its colour and differ in shape: filled shapes for MXU ops
// (circle, triangle, diamond, pentagon), the open ones for the vector units'.
constexpr int kMxuShapes[] = {7, 9, 13, 15};
constexpr int kVectorShapes[] = {6, 8, 12, 14};

// Writes a report's ops as two gnuplot data blocks (index 0: the MXUs' ops, 1: the vector
// units'): intensity, TFLOPS, point size (by the op's share of the step, `total` seconds), its
// seconds, op and label; ops with no FLOPs, HBM bytes or time, or with ICI bytes, are left off.
// Widens [lo, hi] to the intensities written; returns how many points.
int write_roofline_points(const nlohmann::json& ops, double total, std::ostream& out, double* lo,
                          double* hi) {
  int written = 0;
  for (const bool mxu : {true, false}) {
    out << (mxu ? "" : "\n\n") << "# " << (mxu ? "MXU" : "vector unit")
        << " ops: FLOP/byte  TFLOPS  point_size  seconds_per_step  op  label\n";
    for (const auto& op : ops) {
      const double flops = op.value("flops", 0.0), bytes = op.value("hbm_bytes", 0.0),
                   seconds = op.value("seconds", 0.0);
      if (flops <= 0 || bytes <= 0 || seconds <= 0) continue;  // off a log-log roofline
      if (op.value("ici_bytes", 0.0) > 0) continue;            // the links' time, no roof here
      if ((op.value("mxu_flops", 0.0) > 0) != mxu) continue;
      const double intensity = flops / bytes;
      *lo = std::min(*lo, intensity);
      *hi = std::max(*hi, intensity);
      out << intensity << " " << flops / seconds / 1e12 << " "
          << 0.6 + 3 * std::sqrt(total > 0 ? seconds / total : 0) << " " << seconds << " "
          << gp_string(op.value("op", "")) << " " << gp_string(op.value("label", "")) << "\n";
      ++written;
    }
  }
  return written;
}

// The roofs as gnuplot functions: each chip's MXU roof, and its vector roof dashed, titled once
// per distinct vector peak (an HBM sweep moves only the vector roof's slope).
std::vector<std::string> roof_lines(const std::vector<Roof>& roofs) {
  std::vector<std::string> parts;
  std::vector<double> titled_vector_roofs;
  for (const Roof& r : roofs) {
    parts.push_back(fmt::format(
        "(x * {1} < {0} ? x * {1} : {0}) with lines lw 2 lc {2} title {3}", r.peak_tflops,
        r.hbm_tb_per_s, r.colour,
        gp_string(fmt::format("roof of {}: MXU {:.1f} TFLOPS, HBM {:.0f} GB/s",
                              str_join(r.points, " "), r.peak_tflops, r.hbm_tb_per_s * 1e3))));
    if (r.vector_tflops <= 0) continue;
    const bool first = std::find(titled_vector_roofs.begin(), titled_vector_roofs.end(),
                                 r.vector_tflops) == titled_vector_roofs.end();
    if (first) titled_vector_roofs.push_back(r.vector_tflops);
    const std::string title =
        first ? "title " + gp_string(fmt::format("vector roof: {:.2f} TFLOPS", r.vector_tflops))
              : "notitle";
    parts.push_back(fmt::format("(x * {1} < {0} ? x * {1} : {0}) with lines lw 1 dt 2 lc {2} {3}",
                                r.vector_tflops, r.hbm_tb_per_s, r.colour, title));
  }
  return parts;
}

absl::Status draw_roofline(const std::string& gnuplot, const fs::path& plots,
                           const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows,
                           std::vector<std::string>* drawn) {
  std::vector<Roof> roofs;
  std::vector<std::string> series;
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& report = rows[i].report;
    if (!report.is_object() || !report.contains("ops") || !report.contains("roofline")) continue;
    const double peak = report["roofline"].value("peak_flops", 0.0) / 1e12;
    const double vector = report["roofline"].value("peak_vector_flops", 0.0) / 1e12;
    const double bw = report["roofline"].value("hbm_bytes_per_second", 0.0) / 1e12;
    if (peak <= 0 || bw <= 0) continue;
    double total = 0;
    for (const auto& op : report["ops"]) total += op.value("seconds", 0.0);
    const std::string file = fmt::format("roofline_{}.dat", i);
    std::ofstream out(plots / file);
    if (write_roofline_points(report["ops"], total, out, &lo, &hi) == 0) continue;
    // A point is drawn in its roof's colour, so the roof it is measured against is plain.
    auto roof = std::find_if(roofs.begin(), roofs.end(), [&](const Roof& r) {
      return r.peak_tflops == peak && r.vector_tflops == vector && r.hbm_tb_per_s == bw;
    });
    if (roof == roofs.end()) {
      roofs.push_back({peak, vector, bw, static_cast<int>(roofs.size()) + 1, {}});
      roof = roofs.end() - 1;
    }
    roof->points.push_back(rows[i].point.id);
    const int shape = static_cast<int>(roof->points.size()) - 1;  // its place under the roof
    series.push_back(
        fmt::format("'{}' index 0 using 1:2:3 with points pt {} ps variable lc {} title {}",
                    (plots / file).string(), kMxuShapes[shape % std::size(kMxuShapes)],
                    roof->colour, gp_string(rows[i].point.id + " " + point_title(axes, rows[i]))));
    series.push_back(fmt::format(
        "'{}' index 1 using 1:2:3 with points pt {} ps variable lc {} notitle",
        (plots / file).string(), kVectorShapes[shape % std::size(kVectorShapes)], roof->colour));
    for (const double ridge : {peak / bw, vector / bw}) {
      if (ridge <= 0) continue;
      lo = std::min(lo, ridge);
      hi = std::max(hi, ridge);
    }
  }
  if (series.empty()) return absl::OkStatus();
  std::vector<std::string> parts = roof_lines(roofs);
  parts.insert(parts.end(), series.begin(), series.end());
  const std::string settings = fmt::format(
      "set title 'roofline: each op of a step on chip 0 (filled: MXU ops, open: vector ops; "
      "size: share of the step; colour: the roof it runs under)'\n"
      "set xlabel 'arithmetic intensity (FLOPs per HBM byte)'\nset ylabel 'achieved TFLOPS'\n"
      "set logscale xy\nset format x '%g'\nset format y '%g'\nset grid\n"
      "set key outside right top vertical Left reverse width 2 spacing 1.1\nset samples 400\n"
      "set xrange [{}:{}]",
      lo / 4, hi * 4);
  return run_gnuplot(gnuplot, plots, "roofline",
                     both_formats(plots, "roofline", settings,
                                  "plot " + str_join(parts, ", \\\n     "), "1400,800"),
                     drawn);
}

// Values that span a factor of 16 or more (VMEM 0.25 .. 32 MiB, bandwidth 225 .. 3600) are
// drawn on a log2 axis, where doublings are evenly spaced.
bool log2_axis(const SweepAxis& axis) {
  double x_min = 0, x_max = 0;
  for (const std::string& v : axis.values) {
    if (!is_number(v)) return false;
    const double x = std::strtod(v.c_str(), nullptr);
    if (x <= 0) return false;
    x_min = x_min == 0 ? x : std::min(x_min, x);
    x_max = std::max(x_max, x);
  }
  return x_max >= 16 * x_min;
}

// A metric in seconds (its last dotted name holds "seconds": sim_seconds_per_step,
// analysis.step_seconds) is drawn in the unit that puts its largest value between 1 and 1000,
// on an axis from zero: a 3% spread of step times is not stretched across the whole plot.
struct Unit {
  double scale = 1;
  std::string name;  // "" for a metric that is no time
};

Unit unit_of(const std::string& metric, const std::vector<SweepRow>& rows) {
  const std::string last =
      metric.substr(metric.rfind('.') == std::string::npos ? 0 : metric.rfind('.') + 1);
  if (last.find("seconds") == std::string::npos) return {};
  double largest = 0;
  for (const SweepRow& row : rows) {
    const double y = row_number(row, metric);
    if (!std::isnan(y)) largest = std::max(largest, std::abs(y));
  }
  if (largest >= 1 || largest == 0) return {1, "s"};
  if (largest >= 1e-3) return {1e3, "ms"};
  if (largest >= 1e-6) return {1e6, "us"};
  return {1e9, "ns"};
}

// The step's compute beside a step time (train's headline figure): what the hardware changes
// when the input pipeline sets the step.
std::string compute_companion(const std::string& metric) {
  return metric == "sim_seconds_per_step" || metric == "analysis.step_seconds"
             ? "analysis.step_breakdown.compute"
             : "";
}

// 1. The metric against the first axis, a series per combination of the other axes (none drawn
// when no point reports the metric: gnuplot would fail on empty data); for a step time, each
// series' compute per step dashed beside it.
absl::Status draw_metric(const std::string& gnuplot, const fs::path& plots,
                         const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows,
                         const std::string& metric, std::vector<std::string>* drawn) {
  bool numeric_x = true;
  for (const std::string& v : axes[0].values) numeric_x = numeric_x && is_number(v);
  std::map<std::string, std::vector<const SweepRow*>> series;  // rest-of-axes label -> rows
  std::vector<std::string> order;
  for (const SweepRow& row : rows) {
    std::vector<std::string> rest;
    for (size_t a = 1; a < axes.size(); ++a)
      rest.push_back(axes[a].field + "=" + row.point.values[a]);
    const std::string key = rest.empty() ? metric : str_join(rest, " ");
    if (series.count(key) == 0) order.push_back(key);
    series[key].push_back(&row);
  }
  const Unit unit = unit_of(metric, rows);
  const std::string companion = compute_companion(metric);
  std::vector<std::string> plot_parts;
  bool any_metric = false, any_companion = false;
  for (size_t s = 0; s < order.size(); ++s) {
    const std::string file = fmt::format("metric_{}.dat", s);
    std::ofstream out(plots / file);
    out << "# position  " << axes[0].field << "  " << metric << "  " << companion
        << (unit.name.empty() ? "" : " (" + unit.name + ")") << "\n";
    int position = 0;
    for (const SweepRow* row : series[order[s]]) {
      const double y = row_number(*row, metric);
      const double compute = companion.empty() ? std::nan("") : row_number(*row, companion);
      const std::string& x = row->point.values[0];
      if (!std::isnan(y)) {
        out << position << " " << (numeric_x ? x : gp_string(x)) << " " << y * unit.scale << " "
            << (std::isnan(compute) ? std::string("NaN") : fmt::format("{}", compute * unit.scale))
            << "\n";
        any_metric = true;
        any_companion = any_companion || !std::isnan(compute);
      }
      ++position;
    }
    const std::string x_column = numeric_x ? "2" : "1";
    const std::string x_tics = numeric_x ? "" : ":xtic(2)";
    plot_parts.push_back(fmt::format("'{}' using {}:3{} with linespoints lw 2 pt 7 lc {} title {}",
                                     (plots / file).string(), x_column, x_tics, s + 1,
                                     gp_string(order[s])));
    if (!companion.empty()) {
      plot_parts.push_back(fmt::format(
          "'{}' using {}:4{} with linespoints lw 2 dt 2 pt 6 lc {} title {}",
          (plots / file).string(), x_column, x_tics, s + 1,
          gp_string((order.size() > 1 ? order[s] + ": " : std::string()) + "compute per step")));
    }
  }
  if (!any_metric) return absl::OkStatus();
  if (!any_companion && !companion.empty()) {
    for (size_t s = order.size(); s-- > 0;) plot_parts.erase(plot_parts.begin() + 2 * s + 1);
  }
  std::string title = metric + " vs " + axes[0].field;
  if (every_point_input_bound(rows)) {
    title += "\\nevery point is input-bound: the host's input pipeline sets the step time";
  }
  const std::string y_label = unit.name.empty() ? metric : metric + " (" + unit.name + ")";
  const std::string settings = fmt::format(
      "set title {}\nset xlabel {}\nset ylabel {}\nset grid\nset key outside right top\n"
      "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05{}{}",
      gp_string(title), gp_string(axes[0].field), gp_string(y_label),
      log2_axis(axes[0]) ? "\nset logscale x 2" : "",
      unit.name.empty() ? "" : "\nset yrange [0:*]");
  return run_gnuplot(
      gnuplot, plots, "metric",
      both_formats(plots, "metric", settings, "plot " + str_join(plot_parts, ", \\\n     ")),
      drawn);
}

// 2. The step-time breakdown per point, stacked (milliseconds per step); none when no point has
// an analysis.
absl::Status draw_breakdown(const std::string& gnuplot, const fs::path& plots,
                            const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows,
                            std::vector<std::string>* drawn) {
  bool any_breakdown = false;
  {
    std::ofstream out(plots / "breakdown.dat");
    out << "point";
    for (const char* c : kCategories) out << " " << c;
    out << "\n";
    for (const SweepRow& row : rows) {
      if (std::isnan(row_number(row, "analysis.step_seconds"))) continue;
      any_breakdown = true;
      out << gp_string(point_label(row));
      for (const char* c : kCategories) {
        const double v = row_number(row, std::string("analysis.step_breakdown.") + c);
        out << " " << (std::isnan(v) ? 0.0 : v * 1e3);
      }
      out << "\n";
    }
  }
  if (!any_breakdown) return absl::OkStatus();
  const std::string settings = fmt::format(
      "set title 'step time breakdown (the slowest core each step)'\nset xlabel {}\n"
      "set ylabel 'ms per step'\nset style data histograms\nset style histogram rowstacked\n"
      "set style fill solid 0.85 border -1\nset boxwidth 0.7\nset key outside right top\n"
      "set grid ytics\nset xtics rotate by -30",
      gp_string(axes_label(axes)));
  return run_gnuplot(
      gnuplot, plots, "breakdown",
      both_formats(plots, "breakdown", settings,
                   fmt::format("plot for [c=2:7] '{}' using c:xtic(1) title columnheader(c)",
                               (plots / "breakdown.dat").string())),
      drawn);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> draw_sweep_plots(const std::string& gnuplot,
                                                          const std::string& dir,
                                                          const std::vector<SweepAxis>& axes,
                                                          const std::vector<SweepRow>& rows,
                                                          const std::string& metric) {
  const fs::path plots = fs::path(dir) / "plots";
  std::error_code ec;
  fs::create_directories(plots, ec);
  if (ec)
    return absl::FailedPreconditionError(
        str_cat("cannot create ", plots.string(), ": ", ec.message()));
  std::vector<std::string> drawn;
  if (absl::Status s = draw_metric(gnuplot, plots, axes, rows, metric, &drawn); !s.ok()) return s;
  if (absl::Status s = draw_breakdown(gnuplot, plots, axes, rows, &drawn); !s.ok()) return s;
  if (absl::Status s = draw_roofline(gnuplot, plots, axes, rows, &drawn); !s.ok()) return s;
  return drawn;
}

}  // namespace tpusim::studies
