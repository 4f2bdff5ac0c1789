// tpusim sweep: runs `tpusim train` (or `tpusim compare`) at every point of a parameter grid,
// each point in a process of its own (-j at a time), and collects the reports into DIR:
// sweep.csv (a row per point), sweep.json, each run's config, log and report, and plots drawn
// with gnuplot.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "configs/overrides.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/subprocess.h"
#include "tools/tpusim/sweep_grid.h"
#include "tools/tpusim/sweep_plots.h"
#include "tools/tpusim/sweep_table.h"

namespace tpusim::cli {
namespace {

namespace fs = std::filesystem;

const char* const kSweepUsage =
    "usage: tpusim sweep --set FIELD=v1,v2,... [--set ...] --out DIR [-j N] [--metric NAME]\n"
    "                    -- train|compare [its options]\n\n"
    "Runs `tpusim train` (or `tpusim compare`) at every combination of the --set values, each in\n"
    "its own process (N at a time, default 1). FIELD is a slice config field by its dotted path\n"
    "(chip.core.mxu_count, chip.hbm.bandwidth_gb_per_s, chip.ici.link_bandwidth_gb_per_s,\n"
    "topology.shape=2x2; a unique prefix of the last name will do) or the job's option by name\n"
    "(iterations_per_loop, batch_size, steps, ...). DIR gets sweep.csv (one row per point: the\n"
    "values, the exit code and every figure of the run's report), sweep.json, configs/, logs/,\n"
    "reports/, and plots/ drawn by gnuplot as PNG and SVG: NAME (default sim_seconds_per_step\n"
    "for train, max_loss_difference for compare; any column of the CSV) against the first\n"
    "FIELD, and for train the step-time breakdown per point. A compare point whose backends\n"
    "differ keeps its figures and counts as differing.\n";

// Takes `flag VALUE` out of `args`; returns VALUE ("" when absent).
std::string take_option(std::vector<std::string>* args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args->size(); ++i) {
    if ((*args)[i] == flag) {
      std::string value = (*args)[i + 1];
      args->erase(args->begin() + static_cast<std::ptrdiff_t>(i),
                  args->begin() + static_cast<std::ptrdiff_t>(i + 2));
      return value;
    }
  }
  return "";
}

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

struct Job {
  size_t row = 0;
  std::vector<std::string> args;
  std::chrono::steady_clock::time_point started;
};

// sweep's own flags and the job after --.
struct SweepFlags {
  bool help = false;  // -h or --help came before any problem
  std::vector<SweepAxis> axes;
  std::string out_dir, metric;
  int parallel = 1;
  std::vector<std::string> sub;  // the job: train or compare, with its options
};

// sweep's flags up to --, the job after it.
Refused parse_sweep_args(const std::vector<std::string>& args, SweepFlags* f) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      f->help = true;
      return std::nullopt;
    } else if (a == "--") {
      f->sub.assign(args.begin() + static_cast<std::ptrdiff_t>(i + 1), args.end());
      break;
    } else if (a == "--set") {
      if (!value(&v)) return usage_problem("--set needs FIELD=v1,v2,...");
      auto axis = parse_sweep_axis(v);
      if (!axis.ok()) return usage_problem(axis.status());
      for (const SweepAxis& other : f->axes) {
        if (other.field == axis->field)
          return usage_problem("--set names " + other.field + " twice");
      }
      f->axes.push_back(*std::move(axis));
    } else if (a == "--out") {
      if (!value(&f->out_dir)) return usage_problem("--out needs a folder");
    } else if (a == "-j" || a == "--jobs") {
      if (!value(&v)) return usage_problem("-j needs a count from 1 to 256");
      auto jobs = parse_count(a, v, 1, 256);
      if (!jobs.ok()) return usage_problem(jobs.status());
      f->parallel = static_cast<int>(*jobs);
    } else if (a == "--metric") {
      if (!value(&f->metric)) return usage_problem("--metric needs a report column");
    } else {
      return usage_problem("unknown sweep option '" + a + "' (the job's options go after --)");
    }
  }
  return std::nullopt;
}

// The flags make a sweep: axes, a folder, a job that sweep may run; the metric defaults to the
// job's.
Refused check_sweep(SweepFlags* f) {
  if (f->axes.empty()) return usage_problem("give at least one --set FIELD=v1,v2,...");
  if (absl::Status s = check_sweep_size(f->axes); !s.ok()) return usage_problem(s);
  if (f->out_dir.empty()) return usage_problem("--out DIR is required");
  if (f->sub.empty() || (f->sub[0] != "train" && f->sub[0] != "compare"))
    return usage_problem("after -- comes the job to sweep: train or compare, with its options");
  if (f->metric.empty())
    f->metric = f->sub[0] == "compare" ? "max_loss_difference" : "sim_seconds_per_step";
  for (const char* chosen : {"--report", "--model-dir", "--trace"}) {
    if (has_flag(f->sub, chosen))
      return usage_problem(std::string(chosen) + " is chosen by sweep for each point");
  }
  for (const SweepAxis& axis : f->axes) {
    if (!axis.config && has_flag(f->sub, run_option_flag(axis.field))) {
      return usage_problem(str_cat("--set ", axis.field, " and ", run_option_flag(axis.field),
                                   " after -- both set it"));
    }
  }
  return std::nullopt;
}

// Each point's row and job, its config written under dir/configs when the point sets config
// fields: all checked before anything runs.
Refused point_jobs(const SweepFlags& f, const fs::path& dir, const std::string& base_name,
                   const config::SliceSpec& base, std::vector<SweepRow>* rows,
                   std::vector<Job>* jobs) {
  const std::vector<SweepPoint> points = sweep_points(f.axes);
  rows->resize(points.size());
  for (size_t p = 0; p < points.size(); ++p) {
    (*rows)[p].point = points[p];
    (*rows)[p].log = (dir / "logs" / (points[p].id + ".log")).string();
    std::vector<std::pair<std::string, std::string>> sets;
    Job job;
    job.row = p;
    job.args = f.sub;
    for (size_t a = 0; a < f.axes.size(); ++a) {
      if (f.axes[a].config) {
        sets.emplace_back(f.axes[a].field, points[p].values[a]);
      } else {
        job.args.insert(job.args.end(), {run_option_flag(f.axes[a].field), points[p].values[a]});
      }
    }
    std::string config_arg = base_name;
    if (!sets.empty()) {
      auto slice = config::with_overrides(base, sets, str_cat(base_name, " at ", points[p].id));
      if (!slice.ok()) return usage_problem(slice.status());
      config_arg = (dir / "configs" / (points[p].id + ".pbtxt")).string();
      std::ofstream(config_arg) << config::to_config_text(**slice);
    }
    job.args.insert(job.args.end(), {"--config", config_arg, "--report",
                                     (dir / "reports" / (points[p].id + ".json")).string(),
                                     "--model-dir", (dir / "runs" / points[p].id).string()});
    jobs->push_back(std::move(job));
  }
  return std::nullopt;
}

// How the points ended.
struct Tally {
  size_t failed = 0, differ = 0;
};

// A point's process ended with `exit_code` after `seconds`: its report into its row, and a line
// saying so. A compare whose backends differ exits 1 with its report written: a verdict, not a
// failure.
void point_ended(const SweepFlags& f, const fs::path& dir, int exit_code, double seconds,
                 SweepRow& row, Tally* tally) {
  row.exit_code = exit_code;
  std::ifstream in(dir / "reports" / (row.point.id + ".json"));
  auto report = nlohmann::ordered_json::parse(in, nullptr, false);
  set_report(&row, report.is_discarded() ? nlohmann::ordered_json() : std::move(report));
  const bool differs =
      row.exit_code == 1 && row.flat.contains("verdict") && row.flat["verdict"] == "differ";
  if (differs) {
    ++tally->differ;
  } else if (row.exit_code != 0) {
    ++tally->failed;
  }
  const bool comparing = f.sub[0] == "compare";
  std::cerr << fmt::format("sweep: {} {}: {} ({:.1f} s)\n", row.point.id,
                           describe_point(f.axes, row.point),
                           row.exit_code == 0 ? (comparing ? "done, agree" : "done")
                           : differs          ? "done, DIFFER"
                                     : str_cat("FAILED, exit ", row.exit_code, "; see ", row.log),
                           seconds);
}

// Runs the jobs, f.parallel at a time, each point's leftovers from a sweep before removed first.
Refused run_points(const SweepFlags& f, const fs::path& dir, std::vector<Job>& jobs,
                   std::vector<SweepRow>& rows, Tally* tally) {
  std::map<int, Job> running;
  size_t next = 0;
  while (next < jobs.size() || !running.empty()) {
    while (next < jobs.size() && static_cast<int>(running.size()) < f.parallel) {
      Job& job = jobs[next++];
      fs::remove(rows[job.row].log);
      // A sweep run again into DIR redoes each point: no report or run left from before.
      fs::remove(dir / "reports" / (rows[job.row].point.id + ".json"));
      fs::remove_all(dir / "runs" / rows[job.row].point.id);
      auto pid = spawn_self(job.args, rows[job.row].log);
      if (!pid.ok()) return failure_of(pid.status());
      job.started = std::chrono::steady_clock::now();
      running[*pid] = job;
    }
    auto ended = wait_any_child();
    if (!ended.ok()) return failure_of(ended.status());
    auto it = running.find(ended->first);
    if (it == running.end()) continue;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second.started)
            .count();
    point_ended(f, dir, ended->second, seconds, rows[it->second.row], tally);
    running.erase(it);
  }
  return std::nullopt;
}

// The table of every point's metric (and verdict) on stdout.
void print_table(const SweepFlags& f, const fs::path& dir, const std::vector<SweepRow>& rows) {
  const bool comparing = f.sub[0] == "compare";
  size_t width = 6;
  for (const SweepRow& row : rows)
    width = std::max(width, describe_point(f.axes, row.point).size());
  std::cout << fmt::format("{:<6} {:<{}} {:>14}{}\n", "point", "values", width, f.metric,
                           comparing ? "  verdict" : "");
  for (const SweepRow& row : rows) {
    const double v = row_number(row, f.metric);
    const bool reported = row.flat.contains("verdict");
    std::cout << fmt::format(
        "{:<6} {:<{}} {:>14}{}\n", row.point.id, describe_point(f.axes, row.point), width,
        row.exit_code != 0 && !reported ? "failed"
        : std::isnan(v)                 ? "-"
                                        : fmt::format("{:.6g}", v),
        comparing && reported ? "  " + row.flat.at("verdict").get<std::string>() : "");
  }
  std::cout << "table: " << (dir / "sweep.csv").string() << "\n";
}

// The plots, drawn with gnuplot when it is on PATH; false when drawing failed.
bool draw_plots(const SweepFlags& f, const fs::path& dir, const std::vector<SweepRow>& rows) {
  const std::string gnuplot = find_in_path("gnuplot");
  if (gnuplot.empty()) {
    std::cout << "plots: none (no gnuplot on PATH; make deps installs gnuplot-nox)\n";
    return true;
  }
  auto drawn = draw_sweep_plots(gnuplot, dir.string(), f.axes, rows, f.metric);
  if (!drawn.ok()) {
    std::cerr << "tpusim sweep: " << drawn.status().message() << "\n";
    return false;
  }
  std::cout << "plots: "
            << (drawn->empty() ? "none (no point reported a figure to draw)"
                               : str_join(*drawn, " "))
            << "\n";
  return true;
}

}  // namespace

int run_sweep(const std::vector<std::string>& args) {
  SweepFlags flags;
  if (Refused r = parse_sweep_args(args, &flags)) return refuse(*r, kSweepUsage);
  if (flags.help) {
    std::cout << kSweepUsage;
    return kOk;
  }
  if (Refused r = check_sweep(&flags)) return refuse(*r, kSweepUsage);

  // Each point's config, checked before anything runs.
  std::string base_name = take_option(&flags.sub, "--config");
  if (base_name.empty()) base_name = "v3-8";
  auto base = config::load_slice(base_name);
  if (!base.ok()) return failure(std::string(base.status().message()));
  const fs::path dir = fs::absolute(flags.out_dir);
  for (const char* part : {"configs", "logs", "reports", "runs"})
    fs::create_directories(dir / part);
  std::vector<SweepRow> rows;
  std::vector<Job> jobs;
  if (Refused r = point_jobs(flags, dir, base_name, **base, &rows, &jobs))
    return refuse(*r, kSweepUsage);

  std::cerr << fmt::format("sweep: {} point(s), {} at a time, into {}\n", rows.size(),
                           flags.parallel, dir.string());
  Tally tally;
  if (Refused r = run_points(flags, dir, jobs, rows, &tally)) return refuse(*r, kSweepUsage);

  std::ofstream(dir / "sweep.csv") << sweep_csv(flags.axes, rows);
  std::ofstream(dir / "sweep.json")
      << json_text(sweep_json(flags.axes, rows, flags.metric)) << "\n";
  print_table(flags, dir, rows);
  int rc = tally.failed > 0 || tally.differ > 0 ? kFailed : kOk;
  if (!draw_plots(flags, dir, rows)) rc = kFailed;
  if (tally.failed > 0) std::cerr << "tpusim sweep: " << tally.failed << " point(s) failed\n";
  if (tally.differ > 0)
    std::cerr << "tpusim sweep: at " << tally.differ << " point(s) the backends differ\n";
  return rc;
}

}  // namespace tpusim::cli
