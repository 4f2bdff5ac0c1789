// The CLI's value parsers on any text: the input's first byte picks the parser, the rest is the
// flag's value. Sizes (--hbm-bytes 256KiB), step ranges (--trace-steps A:B), counts (-j N),
// sweep axes (--set FIELD=v1,v2,... and the grid they make), dotted config paths (--set
// chip.hbm.bandwidth_gb_per_s=900, applied to a v3-8 and validated again), sweep's own flags, the
// files `sweep --resume DIR` reads (points.jsonl, sweep-args.json), and the messages a study's
// MPI ranks send each other.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <absl/strings/str_split.h>

#include "configs/loader.h"
#include "configs/overrides.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/studies/farm_messages.h"
#include "tools/studies/sweep_grid.h"
#include "tools/studies/sweep_journal.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/sweep_jobs.h"

namespace {

using namespace tpusim;

// "a=1\nb=2": each line one --set of a single point.
std::vector<std::pair<std::string, std::string>> config_sets(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> sets;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t eq = line.find('=');
    if (eq != absl::string_view::npos)
      sets.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return sets;
}

// Up to 8 axes, one per line, and the grid's points when it is small enough to list.
void sweep_grid(const std::string& text) {
  std::vector<studies::SweepAxis> axes;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (axes.size() == 8) break;
    auto axis = studies::parse_sweep_axis(std::string(line));
    if (axis.ok()) axes.push_back(*std::move(axis));
  }
  if (studies::check_sweep_size(axes).ok()) {
    for (const studies::SweepPoint& p : studies::sweep_points(axes))
      (void)studies::describe_point(axes, p);
  }
}

// sweep's flags, one argument per line, checked as a sweep would check them.
void sweep_flags(const std::string& text) {
  std::vector<std::string> args;
  for (absl::string_view line : absl::StrSplit(text, '\n')) args.emplace_back(line);
  cli::SweepFlags flags;
  if (!cli::parse_sweep_args(args, &flags) && !flags.help) (void)cli::check_sweep(&flags);
}

// A sweep's folder whose points.jsonl and sweep-args.json are both `text`.
void sweep_folder(const std::string& text) {
  static const std::string dir = [] {
    const std::string path =
        std::filesystem::path(fuzz::write_input(nullptr, 0, "probe")).string() + "-sweep";
    std::filesystem::create_directories(path);
    return path;
  }();
  for (const char* name : {"points.jsonl", "sweep-args.json"}) {
    std::ofstream(dir + "/" + name, std::ios::binary | std::ios::trunc) << text;
  }
  (void)studies::read_journal(dir, studies::sweep_fingerprint({"--out", "x"}));
  auto args = studies::load_sweep_args(dir);
  if (args.ok()) {
    cli::SweepFlags flags;
    if (!cli::parse_sweep_args(*args, &flags) && !flags.help) (void)cli::check_sweep(&flags);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      (void)cli::parse_bytes("--size", text, 4);
      break;
    case 1:
      (void)cli::parse_step_range("--trace-steps", text);
      break;
    case 2:
      (void)cli::parse_count("-j", text, 1, 256);
      (void)cli::parse_precision(text);
      break;
    case 3:
      sweep_grid(text);
      break;
    case 5:
      sweep_flags(text);
      break;
    case 6:
      sweep_folder(text);
      break;
    case 7:
      (void)studies::farm::decode_task(text);
      (void)studies::farm::decode_result(text);
      break;
    default: {
      static const auto base = config::load_slice("v3-8");
      if (base.ok()) (void)config::with_overrides(**base, config_sets(text), "fuzz --set");
      break;
    }
  }
  return 0;
}
