#include "tools/tpusim/sweep_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "common/strings.h"
#include "tools/tpusim/subprocess.h"

namespace tpusim::cli {
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
// FLOPS), a series per point (circles for ops on the MXUs, squares for the vector units'), under
// each distinct set of the chip's roofs (the MXUs' peak and the HBM slope solid, the vector
// units' peak dashed), drawn in the colour of the first point that has it. A point's size grows
// with the op's share of the step. Drawn when at least one report has an op profile ("ops" and
// "roofline").
// A chip's roofs on the roofline plot, in the colour of the first point drawn under them.
struct Roof {
  double peak_tflops, vector_tflops, hbm_tb_per_s;
  int colour;
};

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
// per distinct vector peak (an HBM sweep moves only the vector roof's slope). Sets `titled` to
// the vector roofs given a key entry.
std::vector<std::string> roof_lines(const std::vector<Roof>& roofs, size_t* titled) {
  std::vector<std::string> parts;
  std::vector<double> titled_vector_roofs;
  for (const Roof& r : roofs) {
    parts.push_back(fmt::format("(x * {1} < {0} ? x * {1} : {0}) with lines lw 2 lc {2} title {3}",
                                r.peak_tflops, r.hbm_tb_per_s, r.colour,
                                gp_string(fmt::format("roof: MXU {:.1f} TFLOPS, HBM {:.0f} GB/s",
                                                      r.peak_tflops, r.hbm_tb_per_s * 1e3))));
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
  *titled = titled_vector_roofs.size();
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
    const int colour = static_cast<int>(series.size()) / 2 + 1;
    series.push_back(
        fmt::format("'{}' index 0 using 1:2:3 with points pt 7 ps variable lc {} title {}",
                    (plots / file).string(), colour, gp_string(point_title(axes, rows[i]))));
    series.push_back(
        fmt::format("'{}' index 1 using 1:2:3 with points pt 5 ps variable lc {} notitle",
                    (plots / file).string(), colour));
    for (const double ridge : {peak / bw, vector / bw}) {
      if (ridge <= 0) continue;
      lo = std::min(lo, ridge);
      hi = std::max(hi, ridge);
    }
    const bool seen = std::any_of(roofs.begin(), roofs.end(), [&](const Roof& r) {
      return r.peak_tflops == peak && r.vector_tflops == vector && r.hbm_tb_per_s == bw;
    });
    if (!seen) roofs.push_back({peak, vector, bw, colour});
  }
  if (series.empty()) return absl::OkStatus();
  size_t titled_vector_roofs = 0;
  std::vector<std::string> parts = roof_lines(roofs, &titled_vector_roofs);
  parts.insert(parts.end(), series.begin(), series.end());
  const std::string settings = fmt::format(
      "set title 'roofline: each op of a step on chip 0 (circles: MXU ops, squares: vector ops; "
      "size: share of the step)'\n"
      "set xlabel 'arithmetic intensity (FLOPs per HBM byte)'\nset ylabel 'achieved TFLOPS'\n"
      "set logscale xy\nset format x '%g'\nset format y '%g'\nset grid\n"
      "set key below maxrows {} width -4\nset samples 400\nset xrange [{}:{}]",
      std::max(roofs.size() + titled_vector_roofs, series.size() / 2), lo / 4, hi * 4);
  return run_gnuplot(gnuplot, plots, "roofline",
                     both_formats(plots, "roofline", settings,
                                  "plot " + str_join(parts, ", \\\n     "), "960,800"),
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

// 1. The metric against the first axis, a series per combination of the other axes (none drawn
// when no point reports the metric: gnuplot would fail on empty data).
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
  std::vector<std::string> plot_parts;
  bool any_metric = false;
  for (size_t s = 0; s < order.size(); ++s) {
    const std::string file = fmt::format("metric_{}.dat", s);
    std::ofstream out(plots / file);
    out << "# position  " << axes[0].field << "  " << metric << "\n";
    int position = 0;
    for (const SweepRow* row : series[order[s]]) {
      const double y = row_number(*row, metric);
      const std::string& x = row->point.values[0];
      if (!std::isnan(y)) {
        out << position << " " << (numeric_x ? x : gp_string(x)) << " " << y << "\n";
        any_metric = true;
      }
      ++position;
    }
    plot_parts.push_back(fmt::format("'{}' using {}:3{} with linespoints lw 2 pt 7 title {}",
                                     (plots / file).string(), numeric_x ? "2" : "1",
                                     numeric_x ? "" : ":xtic(2)", gp_string(order[s])));
  }
  if (!any_metric) return absl::OkStatus();
  const std::string settings = fmt::format(
      "set title {}\nset xlabel {}\nset ylabel {}\nset grid\nset key outside right top\n"
      "set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05{}",
      gp_string(metric + " vs " + axes[0].field), gp_string(axes[0].field), gp_string(metric),
      log2_axis(axes[0]) ? "\nset logscale x 2" : "");
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
  fs::create_directories(plots);
  std::vector<std::string> drawn;
  if (absl::Status s = draw_metric(gnuplot, plots, axes, rows, metric, &drawn); !s.ok()) return s;
  if (absl::Status s = draw_breakdown(gnuplot, plots, axes, rows, &drawn); !s.ok()) return s;
  if (absl::Status s = draw_roofline(gnuplot, plots, axes, rows, &drawn); !s.ok()) return s;
  return drawn;
}

}  // namespace tpusim::cli
