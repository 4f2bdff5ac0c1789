#pragma once
// What `tpusim sweep` runs: its own flags, the subcommands it can sweep and how each takes its
// outputs, and the command of each grid point.

#include <filesystem>
#include <string>
#include <vector>

#include "configs/slice_spec.h"
#include "tools/studies/point_farm.h"
#include "tools/studies/sweep_grid.h"
#include "tools/studies/sweep_table.h"
#include "tools/tpusim/refusal.h"

namespace tpusim::cli {
using studies::FarmJob;
using studies::SweepAxis;
using studies::SweepRow;

// A subcommand a sweep runs at each point: any that reports JSON.
struct SweepJobKind {
  const char* name;
  const char* metric;  // the default --metric ("" : the first case's, for validate)
  bool writes_report;  // takes --report FILE; else prints its report with --json
  bool model_dir;      // takes --model-dir
  bool config_file;    // takes --config SLICE; else a config field goes as --set FIELD=VALUE
};

// The kind named `name`, or null.
const SweepJobKind* find_sweep_job_kind(const std::string& name);
// "train, compare, matmul, allreduce, layers, validate".
std::string sweep_job_kind_names();

// sweep's flags and the job after --.
struct SweepFlags {
  bool help = false;  // -h or --help came before any problem
  std::vector<SweepAxis> axes;
  std::string out_dir, metric, resume_dir;
  int parallel = 1;
  double rank_timeout_seconds = 60;
  std::vector<std::string> sub;  // the job: a subcommand with its options
  const SweepJobKind* kind = nullptr;
  std::vector<std::string> args;  // the sweep's own arguments, as DIR/sweep-args.json keeps them
};

// sweep's flags up to --, the job after it.
Refused parse_sweep_args(const std::vector<std::string>& args, SweepFlags* f);

// The flags make a sweep: axes, a folder, a job that sweep may run; the metric defaults to the
// job's.
Refused check_sweep(SweepFlags* f);

// Takes `flag VALUE` out of `args`; returns VALUE ("" when absent).
std::string take_option(std::vector<std::string>* args, const std::string& flag);

// Each point's row and job, its config written under dir/configs when the point sets config
// fields of a job that takes --config: all checked before anything runs. `base` is the job's
// --config (null for validate, which takes config fields as --set).
Refused point_jobs(const SweepFlags& f, const std::filesystem::path& dir,
                   const std::string& base_name, const config::SliceSpec* base,
                   std::vector<SweepRow>* rows, std::vector<FarmJob>* jobs);

}  // namespace tpusim::cli
