// tpusim sweep: runs a subcommand (train, compare, a kernel, validate) at every point of a
// parameter grid, each point in a process of its own (-j at a time; across the ranks of an MPI job
// when mpirun or srun started it), and collects the reports into DIR: sweep.csv (a row per point),
// sweep.json, each run's config, log and report, and plots drawn with gnuplot.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "common/input_file.h"
#include "common/strings.h"
#include "configs/loader.h"
#include "tools/studies/point_farm.h"
#include "tools/studies/subprocess.h"
#include "tools/studies/sweep_journal.h"
#include "tools/studies/sweep_plots.h"
#include "tools/studies/sweep_table.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/sweep_jobs.h"

namespace tpusim::cli {
using studies::append_journal;
using studies::clear_journal;
using studies::describe_point;
using studies::draw_sweep_plots;
using studies::every_point_input_bound;
using studies::FarmJob;
using studies::FarmOptions;
using studies::FarmOutcome;
using studies::find_in_path;
using studies::JournalEntry;
using studies::load_sweep_args;
using studies::PointFarm;
using studies::read_journal;
using studies::row_number;
using studies::save_sweep_args;
using studies::set_report;
using studies::sweep_csv;
using studies::sweep_fingerprint;
using studies::sweep_json;
using studies::SweepRow;
namespace {

// A point's report is a run's JSON report: kilobytes, megabytes with every op of a large model.
constexpr uint64_t kMaxReportBytes = 256ull << 20;

namespace fs = std::filesystem;

const char* const kSweepUsage =
    "usage: tpusim sweep --set FIELD=v1,v2,... [--set ...] --out DIR [-j N] [--metric NAME]\n"
    "                    [--rank-timeout S] -- JOB [its options]\n"
    "       tpusim sweep --resume DIR [-j N] [--rank-timeout S]\n\n"
    "Runs `tpusim JOB` (train, compare, matmul, allreduce, layers or validate) at every\n"
    "combination of the --set values, each in its own process (N at a time, default 1). FIELD is\n"
    "a slice config field by its dotted path (chip.core.mxu_count, chip.hbm.bandwidth_gb_per_s,\n"
    "chip.ici.link_bandwidth_gb_per_s, topology.shape=2x2; a unique prefix of the last name will\n"
    "do) or the job's option by name (iterations_per_loop, batch_size, steps, m, bytes, ...).\n"
    "DIR gets sweep.csv (one row per point: the values, the exit code and every figure of the\n"
    "run's report), sweep.json, configs/, logs/, reports/, runs/ (train and compare), and plots/\n"
    "drawn by gnuplot as PNG and SVG: NAME (default: the job's headline figure, such as\n"
    "sim_seconds_per_step for train; any column of the CSV) against the first FIELD, and for\n"
    "train the step-time breakdown and roofline per point. A compare point whose backends differ\n"
    "keeps its figures and counts as differing.\n\n"
    "Results are written as points end, so a sweep that is killed loses only the points it was\n"
    "running; --resume DIR runs the points of that sweep that are missing or failed.\n\n"
    "Under MPI (`mpirun -np R tpusim sweep ...`, or srun) every rank runs N points at a time:\n"
    "rank 0 hands them out as ranks free up and writes DIR. A rank silent for S seconds (default\n"
    "60) is lost and its points fail; with `mpirun --enable-recovery` the other ranks go on.\n";

// How the points ended.
struct Tally {
  size_t failed = 0, differ = 0;
};

// A compare whose backends differ exits 1 with its report written: a verdict, not a failure.
bool row_differs(const SweepRow& row) {
  return row.exit_code == 1 && row.flat.contains("verdict") && row.flat["verdict"] == "differ";
}

// The rows that have ended, in grid order.
std::vector<SweepRow> ended_rows(const std::vector<SweepRow>& rows) {
  std::vector<SweepRow> out;
  for (const SweepRow& row : rows) {
    if (row.ended) out.push_back(row);
  }
  return out;
}

// A sweep as it runs: its flags, its folder, its rows and the tables kept current in DIR.
class Sweep {
 public:
  Sweep(const SweepFlags& flags, fs::path dir) : f_(flags), dir_(std::move(dir)) {}

  std::vector<SweepRow>& rows() { return rows_; }
  const Tally& tally() const { return tally_; }

  // The row of a point as an earlier run of this sweep left it (--resume).
  SweepRow as_journaled(const SweepRow& row, const JournalEntry& e) const {
    SweepRow out = row;
    end_row(out, {e.exit_code, e.seconds, e.rank, e.failure});
    return out;
  }
  // Keeps `row` (as_journaled) as the point's result.
  void keep(SweepRow& row, SweepRow kept) {
    row = std::move(kept);
    count(row);
  }

  // A point's run ended: its report into its row, a line saying so, the journal and (at most
  // every few seconds) the tables.
  void point_ended(SweepRow& row, const FarmOutcome& o) {
    end_row(row, o);
    count(row);
    if (absl::Status s = append_journal(dir_, row, sweep_fingerprint(f_.args)); !s.ok())
      std::cerr << "tpusim sweep: " << s.message() << "\n";
    const bool comparing = f_.sub[0] == "compare";
    std::cerr << fmt::format(
        "sweep: {} {}: {} ({:.1f} s{})\n", row.point.id, describe_point(f_.axes, row.point),
        row.exit_code == 0  ? (comparing ? "done, agree" : "done")
        : row_differs(row)  ? "done, DIFFER"
        : row.failure != "" ? str_cat("FAILED, ", row.failure)
                            : str_cat("FAILED, exit ", row.exit_code, "; see ", row.log),
        row.seconds, row.rank > 0 ? str_cat(", rank ", row.rank) : "");
    if (std::chrono::steady_clock::now() - last_write_ > std::chrono::seconds(2)) {
      // A table that cannot be written now is said at the end, when the last write fails too.
      (void)write_tables();
    }
  }

  // sweep.csv and sweep.json of the points that have ended; `study` (how the sweep ran) goes
  // into the JSON when given.
  // Errors name the table that could not be written (a folder where it goes, a full disk).
  absl::Status write_tables(const nlohmann::ordered_json& study = nullptr) {
    const std::vector<SweepRow> ended = ended_rows(rows_);
    nlohmann::ordered_json j = sweep_json(f_.axes, ended, f_.metric);
    if (!study.is_null()) j["study"] = study;
    last_write_ = std::chrono::steady_clock::now();
    for (const auto& [name, text] :
         {std::pair<std::string, std::string>{"sweep.csv", sweep_csv(f_.axes, ended)},
          {"sweep.json", json_text(j) + "\n"}}) {
      const fs::path path = dir_ / name;
      std::ofstream out(path);
      if (!(out << text) || !out.flush()) {
        return absl::FailedPreconditionError(str_cat("cannot write ", path.string()));
      }
    }
    return absl::OkStatus();
  }

 private:
  // How the point's run ended, and its report, into its row.
  void end_row(SweepRow& row, const FarmOutcome& o) const {
    row.ended = true;
    row.exit_code = o.exit_code;
    row.rank = o.rank;
    row.seconds = o.seconds;
    row.failure = o.failure;
    // A point that failed may have no report; one that is there but no file is said, and its
    // row keeps no figures.
    const fs::path path = dir_ / "reports" / (row.point.id + ".json");
    std::error_code ec;
    nlohmann::ordered_json report;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
      auto text = read_input_file(path.string(), "point report", kMaxReportBytes);
      if (text.ok()) {
        report = nlohmann::ordered_json::parse(*text, nullptr, false);
      } else {
        std::cerr << "tpusim sweep: " << text.status().message() << "\n";
      }
    }
    set_report(&row, report.is_discarded() ? nlohmann::ordered_json() : std::move(report));
  }
  void count(const SweepRow& row) {
    if (row_differs(row)) {
      ++tally_.differ;
    } else if (row.exit_code != 0) {
      ++tally_.failed;
    }
  }

  const SweepFlags& f_;
  const fs::path dir_;
  std::vector<SweepRow> rows_;
  Tally tally_;
  std::chrono::steady_clock::time_point last_write_ = std::chrono::steady_clock::now();
};

// How the sweep ran, for sweep.json: its ranks and slots, the points this run ran, its wall time,
// and this process's own CPU time (rank 0's bookkeeping: the points' processes are not in it).
nlohmann::ordered_json study_figures(const PointFarm& farm, const SweepFlags& f, size_t points_run,
                                     std::chrono::steady_clock::time_point started) {
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec;
  };
  return {{"ranks", farm.ranks()},
          {"points_at_a_time_per_rank", f.parallel},
          {"points_run", points_run},
          {"wall_seconds",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()},
          {"coordinator_cpu_seconds", seconds(self.ru_utime) + seconds(self.ru_stime)}};
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
  if (every_point_input_bound(rows)) {
    double lo = INFINITY, hi = -INFINITY;
    for (const SweepRow& row : rows) {
      const double compute = row_number(row, "analysis.step_breakdown.compute");
      if (std::isnan(compute)) continue;
      lo = std::min(lo, compute);
      hi = std::max(hi, compute);
    }
    std::cout << "every point is input-bound (analysis.classification): the host's input "
                 "pipeline sets the step time"
              << (lo <= hi ? fmt::format("; compute per step goes from {:.3g} to {:.3g} ms "
                                         "(analysis.step_breakdown.compute)",
                                         lo * 1e3, hi * 1e3)
                           : "")
              << "\n";
  }
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

// --resume DIR: the flags the sweep in DIR ran with, DIR itself, and -j and --rank-timeout as
// given now.
Refused resume_flags(const std::vector<std::string>& args, const SweepFlags& given, SweepFlags* f) {
  if (!given.axes.empty() || !given.out_dir.empty() || !given.sub.empty() ||
      !given.metric.empty()) {
    return usage_problem(
        "--resume DIR runs the sweep in DIR as it was given; only -j and --rank-timeout may "
        "change");
  }
  auto saved = load_sweep_args(given.resume_dir);
  if (!saved.ok()) return failure_of(saved.status());
  if (Refused r = parse_sweep_args(*saved, f)) return r;
  f->args = *saved;
  f->out_dir = f->resume_dir = given.resume_dir;
  for (const std::string& a : args) {
    if (a == "-j" || a == "--jobs") f->parallel = given.parallel;
    if (a == "--rank-timeout") f->rank_timeout_seconds = given.rank_timeout_seconds;
  }
  return check_sweep(f);
}

// The flags of this sweep, from the command line or from the folder it resumes.
Refused sweep_flags(const std::vector<std::string>& args, SweepFlags* flags) {
  SweepFlags given;
  if (Refused r = parse_sweep_args(args, &given)) return r;
  if (given.help) {
    *flags = given;
    return std::nullopt;
  }
  if (!given.resume_dir.empty()) return resume_flags(args, given, flags);
  *flags = given;
  flags->args = args;
  return check_sweep(flags);
}

// Why `metric` is no column of the sweep (no point that reported has a number there: a name
// mistyped, say), naming a few numeric columns the reports do have; "" when some point has it,
// or none reported.
std::string missing_metric(const std::string& metric, const std::vector<SweepRow>& rows) {
  std::vector<std::string> columns;
  for (const SweepRow& row : rows) {
    if (!row.ended || !row.flat.is_object() || row.flat.empty()) continue;
    if (!std::isnan(row_number(row, metric))) return "";
    if (columns.empty()) {
      for (const auto& [name, value] : row.flat.items()) {
        if (value.is_number() && columns.size() < 8) columns.push_back(name);
      }
    }
  }
  if (columns.empty()) return "";
  return str_cat("--metric ", metric,
                 ": no point's report has a number there (its columns include ",
                 str_join(columns, ", "), "; sweep.csv has them all)");
}

// Rank 0 (or the one process): prepares DIR and the points, runs them, writes the tables.
// The points this run runs: on --resume, those an earlier run of this sweep did not finish (what
// it finished is kept in `sweep`); else every point, the journal cleared and the arguments saved.
absl::StatusOr<std::vector<size_t>> points_to_run(const SweepFlags& flags, const fs::path& dir,
                                                  size_t points, Sweep* sweep) {
  std::vector<size_t> to_run;
  if (!flags.resume_dir.empty()) {
    auto journal = read_journal(dir, sweep_fingerprint(flags.args));
    if (!journal.ok()) return journal.status();
    for (size_t p = 0; p < points; ++p) {
      SweepRow& row = sweep->rows()[p];
      auto e = journal->find(row.point.id);
      if (e != journal->end()) {
        SweepRow kept = sweep->as_journaled(row, e->second);
        // A point kept has its report: one whose report is gone or torn runs again.
        if ((kept.exit_code == 0 && kept.report.is_object()) || row_differs(kept)) {
          sweep->keep(row, std::move(kept));
          continue;
        }
      }
      to_run.push_back(p);
    }
    return to_run;
  }
  for (size_t p = 0; p < points; ++p) to_run.push_back(p);
  // The journal first: killed between the two, the folder holds no journal of another grid.
  if (absl::Status s = clear_journal(dir); !s.ok()) return s;
  if (absl::Status s = save_sweep_args(dir, flags.args); !s.ok()) return s;
  return to_run;
}

int coordinate_sweep(SweepFlags& flags, PointFarm& farm) {
  // Each point's config, checked before anything runs.
  std::string base_name = flags.kind->config_file ? take_option(&flags.sub, "--config") : "";
  if (base_name.empty()) base_name = "v3-8";
  std::shared_ptr<const config::SliceSpec> base;
  if (flags.kind->config_file) {
    auto loaded = config::load_slice(base_name);
    if (!loaded.ok()) return failure(std::string(loaded.status().message()));
    base = *std::move(loaded);
  }
  const fs::path dir = fs::absolute(flags.out_dir);
  for (const char* part : {"configs", "logs", "reports"}) {
    std::error_code ec;
    fs::create_directories(dir / part, ec);
    if (ec) return failure(str_cat("cannot create ", (dir / part).string(), ": ", ec.message()));
  }
  Sweep sweep(flags, dir);
  std::vector<FarmJob> jobs;
  if (Refused r = point_jobs(flags, dir, base_name, base.get(), &sweep.rows(), &jobs))
    return refuse(*r, kSweepUsage);

  auto to_run = points_to_run(flags, dir, jobs.size(), &sweep);
  if (!to_run.ok()) return failure(std::string(to_run.status().message()));
  std::vector<FarmJob> run_jobs;
  for (size_t p : *to_run) run_jobs.push_back(jobs[p]);

  std::cerr << fmt::format(
      "sweep: {} point(s){}, {} at a time{}, into {}\n", run_jobs.size(),
      run_jobs.size() < jobs.size() ? str_cat(" of ", jobs.size(), " (the rest ended before)") : "",
      flags.parallel, farm.ranks() > 1 ? str_cat(" on each of ", farm.ranks(), " ranks") : "",
      dir.string());
  FarmOptions options;
  options.slots = flags.parallel;
  options.rank_timeout_seconds = flags.rank_timeout_seconds;
  options.study_dir = dir.string();
  const auto started = std::chrono::steady_clock::now();
  const absl::Status ran = farm.run(run_jobs, options, [&](size_t j, const FarmOutcome& o) {
    sweep.point_ended(sweep.rows()[(*to_run)[j]], o);
  });
  if (!ran.ok()) return failure(std::string(ran.message()));
  for (size_t p : *to_run) {
    SweepRow& row = sweep.rows()[p];
    if (!row.ended) sweep.point_ended(row, {-1, 0, 0, "the farm never reported it"});
  }

  const absl::Status tables =
      sweep.write_tables(study_figures(farm, flags, run_jobs.size(), started));
  if (!tables.ok()) return failure(std::string(tables.message()));
  print_table(flags, dir, sweep.rows());
  const Tally& tally = sweep.tally();
  int rc = tally.failed > 0 || tally.differ > 0 ? kFailed : kOk;
  if (!draw_plots(flags, dir, sweep.rows())) rc = kFailed;
  if (std::string why = missing_metric(flags.metric, sweep.rows()); !why.empty()) {
    std::cerr << "tpusim sweep: " << why << "\n";
    rc = kFailed;
  }
  if (tally.failed > 0) std::cerr << "tpusim sweep: " << tally.failed << " point(s) failed\n";
  if (tally.differ > 0)
    std::cerr << "tpusim sweep: at " << tally.differ << " point(s) the backends differ\n";
  return rc;
}

}  // namespace

int run_sweep(const std::vector<std::string>& args) {
  SweepFlags given;
  if (Refused r = parse_sweep_args(args, &given)) return refuse(*r, kSweepUsage);
  if (given.help) {
    std::cout << kSweepUsage;
    return kOk;
  }
  auto farm = PointFarm::open();
  if (!farm.ok()) return failure(std::string(farm.status().message()));
  // Rank 0 reads the sweep (a resumed one's arguments are in its folder, on rank 0's disk) and
  // tells the other ranks their slots and timeout; nothing when it refuses, and they return.
  SweepFlags flags;
  Refused refused = (*farm)->coordinator() ? sweep_flags(args, &flags) : std::nullopt;
  const std::string told =
      (*farm)->share(refused ? "" : str_cat(flags.parallel, " ", flags.rank_timeout_seconds));
  if (!(*farm)->coordinator()) {
    if (told.empty()) return kUsage;  // rank 0 said why
    FarmOptions options;
    std::istringstream(told) >> options.slots >> options.rank_timeout_seconds;
    return (*farm)->finish((*farm)->serve(options));
  }
  if (refused) return refuse(*refused, kSweepUsage);
  return (*farm)->finish(coordinate_sweep(flags, **farm));
}

}  // namespace tpusim::cli
