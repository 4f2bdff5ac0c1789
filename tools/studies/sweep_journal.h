#pragma once
// A sweep's record in its folder, so that a sweep killed part way keeps every point that ended and
// `tpusim sweep --resume DIR` runs only the rest: DIR/sweep-args.json holds the sweep's own
// arguments, DIR/points.jsonl a line per point as it ends (the last line for a point holds).

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "tools/studies/sweep_table.h"

namespace tpusim::studies {

absl::Status save_sweep_args(const std::filesystem::path& dir,
                             const std::vector<std::string>& args);
// The arguments save_sweep_args kept; the error names the file and what is wrong with it.
absl::StatusOr<std::vector<std::string>> load_sweep_args(const std::filesystem::path& dir);

struct JournalEntry {
  int exit_code = 0;
  int rank = 0;
  double seconds = 0;
  std::string failure;
};

// The sweep's arguments as 16 hex digits (64-bit FNV-1a of their JSON text), written on each
// journal line: a line of other arguments (sweep-args.json edited after its points ran) would
// otherwise give its result to whatever point the new arguments name alike.
std::string sweep_fingerprint(const std::vector<std::string>& args);

// Starts an empty journal (a sweep run afresh into DIR redoes every point).
absl::Status clear_journal(const std::filesystem::path& dir);
// Adds the row's ending, written through at once.
absl::Status append_journal(const std::filesystem::path& dir, const SweepRow& row,
                            const std::string& fingerprint);
// The last entry of each point; a line cut short (the sweep killed while writing it) is skipped.
// A line whose sweep fingerprint is not `fingerprint` is an error naming its point (a line with
// none, from a journal older than the fingerprint, is taken).
absl::StatusOr<std::map<std::string, JournalEntry>> read_journal(const std::filesystem::path& dir,
                                                                 const std::string& fingerprint);

}  // namespace tpusim::studies
