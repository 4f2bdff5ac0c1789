#include "tools/tpusim/sweep_jobs.h"

#include <fstream>

#include "common/strings.h"
#include "configs/loader.h"
#include "configs/overrides.h"
#include "tools/tpusim/options.h"

namespace tpusim::cli {
using studies::check_sweep_size;
using studies::parse_sweep_axis;
using studies::run_option_flag;
using studies::sweep_points;
using studies::SweepPoint;

namespace fs = std::filesystem;

namespace {

// train and compare write their report and keep a model dir; the kernels and validate print
// theirs (validate takes config fields as --set, on every case's own slice).
constexpr SweepJobKind kJobKinds[] = {
    {"train", "sim_seconds_per_step", true, true, true},
    {"compare", "max_loss_difference", true, true, true},
    {"matmul", "seconds", false, false, true},
    {"allreduce", "seconds", false, false, true},
    {"layers", "total_cycles", false, false, true},
    {"validate", "", true, false, false},
};

bool has_flag(const std::vector<std::string>& args, const std::string& flag) {
  for (const std::string& a : args) {
    if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

const SweepJobKind* find_sweep_job_kind(const std::string& name) {
  for (const SweepJobKind& k : kJobKinds) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

std::string sweep_job_kind_names() {
  std::string out;
  for (const SweepJobKind& k : kJobKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

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
    } else if (a == "--resume") {
      if (!value(&f->resume_dir)) return usage_problem("--resume needs the folder of a sweep");
    } else if (a == "-j" || a == "--jobs") {
      if (!value(&v)) return usage_problem("-j needs a count from 1 to 256");
      auto jobs = parse_count(a, v, 1, 256);
      if (!jobs.ok()) return usage_problem(jobs.status());
      f->parallel = static_cast<int>(*jobs);
    } else if (a == "--rank-timeout") {
      if (!value(&v)) return usage_problem("--rank-timeout needs seconds from 5 to 86400");
      auto seconds = parse_rank_timeout(v);
      if (!seconds.ok()) return usage_problem(seconds.status());
      f->rank_timeout_seconds = *seconds;
    } else if (a == "--metric") {
      if (!value(&f->metric)) return usage_problem("--metric needs a report column");
    } else {
      return usage_problem("unknown sweep option '" + a + "' (the job's options go after --)");
    }
  }
  return std::nullopt;
}

Refused check_sweep(SweepFlags* f) {
  if (f->axes.empty()) return usage_problem("give at least one --set FIELD=v1,v2,...");
  if (absl::Status s = check_sweep_size(f->axes); !s.ok()) return usage_problem(s);
  if (f->out_dir.empty()) return usage_problem("--out DIR is required");
  if (f->sub.empty() || (f->kind = find_sweep_job_kind(f->sub[0])) == nullptr) {
    return usage_problem("after -- comes the job to sweep, with its options: one of " +
                         sweep_job_kind_names());
  }
  if (f->metric.empty()) f->metric = f->kind->metric;
  if (f->metric.empty()) {
    // validate: the predicted step time of its (first) case.
    std::vector<std::string> sub = f->sub;
    const std::string first_case = take_option(&sub, "--case");
    if (first_case.empty())
      return usage_problem("a sweep of validate needs --case NAME after -- or a --metric");
    f->metric = first_case + ".predicted_step_seconds";
  }
  for (const char* chosen : {"--report", "--model-dir", "--trace", "--json"}) {
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

Refused point_jobs(const SweepFlags& f, const fs::path& dir, const std::string& base_name,
                   const config::SliceSpec* base, std::vector<SweepRow>* rows,
                   std::vector<FarmJob>* jobs) {
  const std::vector<SweepPoint> points = sweep_points(f.axes);
  const SweepJobKind& kind = *f.kind;
  rows->resize(points.size());
  for (size_t p = 0; p < points.size(); ++p) {
    const std::string& id = points[p].id;
    (*rows)[p].point = points[p];
    FarmJob job;
    job.id = id;
    job.log = (*rows)[p].log = (dir / "logs" / (id + ".log")).string();
    job.report = (dir / "reports" / (id + ".json")).string();
    job.args = f.sub;
    std::vector<std::pair<std::string, std::string>> sets;
    for (size_t a = 0; a < f.axes.size(); ++a) {
      if (!f.axes[a].config) {
        job.args.insert(job.args.end(), {run_option_flag(f.axes[a].field), points[p].values[a]});
      } else if (kind.config_file) {
        sets.emplace_back(f.axes[a].field, points[p].values[a]);
      } else {
        job.args.insert(job.args.end(), {"--set", f.axes[a].field + "=" + points[p].values[a]});
      }
    }
    if (kind.config_file) {
      std::string config_arg = base_name;
      if (!sets.empty()) {
        auto slice = config::with_overrides(*base, sets, str_cat(base_name, " at ", id));
        if (!slice.ok()) return usage_problem(slice.status());
        config_arg = (dir / "configs" / (id + ".pbtxt")).string();
        const std::string text = config::to_config_text(**slice);
        std::ofstream(config_arg) << text;
        job.inputs.emplace_back(config_arg, text);
      }
      job.args.insert(job.args.end(), {"--config", config_arg});
    }
    if (kind.writes_report) {
      job.args.insert(job.args.end(), {"--report", job.report});
    } else {
      job.args.push_back("--json");
      job.report_on_stdout = true;
    }
    if (kind.model_dir) {
      job.run_dir = (dir / "runs" / id).string();
      job.args.insert(job.args.end(), {"--model-dir", job.run_dir});
    }
    jobs->push_back(std::move(job));
  }
  return std::nullopt;
}

}  // namespace tpusim::cli
