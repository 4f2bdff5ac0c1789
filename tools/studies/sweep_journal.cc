#include "tools/studies/sweep_journal.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/input_file.h"
#include "common/json_text.h"
#include "common/strings.h"

namespace tpusim::studies {

namespace fs = std::filesystem;

namespace {

fs::path args_file(const fs::path& dir) { return dir / "sweep-args.json"; }
fs::path journal_file(const fs::path& dir) { return dir / "points.jsonl"; }

// The files' caps, far past what a sweep writes: its arguments are a command line (kilobytes);
// its journal a line of under 1 kB a point ended, for at most kMaxSweepPoints points, each
// ended again by a few resumes.
constexpr uint64_t kMaxArgsBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxJournalBytes = uint64_t{512} << 20;

}  // namespace

absl::Status save_sweep_args(const fs::path& dir, const std::vector<std::string>& args) {
  std::ofstream out(args_file(dir), std::ios::trunc);
  out << json_text(nlohmann::json{{"tpusim_sweep_args", args}}) << "\n";
  if (!out.flush())
    return absl::UnavailableError(str_cat("cannot write ", args_file(dir).string()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> load_sweep_args(const fs::path& dir) {
  const fs::path file = args_file(dir);
  auto text = read_input_file(file.string(), "sweep arguments file", kMaxArgsBytes);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(
        str_cat(file.string(), " cannot be read: --resume takes the folder of a sweep"));
  }
  if (!text.ok()) return text.status();
  const auto j = nlohmann::json::parse(*text, nullptr, false);
  const auto args = j.is_object() ? j.find("tpusim_sweep_args") : j.end();
  if (j.is_discarded() || !j.is_object() || args == j.end() || !args->is_array()) {
    return absl::DataLossError(str_cat(
        file.string(), " is not a sweep's arguments (a JSON object with tpusim_sweep_args)"));
  }
  std::vector<std::string> out;
  for (const auto& a : *args) {
    if (!a.is_string())
      return absl::DataLossError(str_cat(file.string(), ": an argument is not a string"));
    out.push_back(a.get<std::string>());
  }
  return out;
}

std::string sweep_fingerprint(const std::vector<std::string>& args) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const char c : json_text(nlohmann::json(args), -1)) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

absl::Status clear_journal(const fs::path& dir) {
  std::ofstream out(journal_file(dir), std::ios::trunc);
  if (!out) return absl::UnavailableError(str_cat("cannot write ", journal_file(dir).string()));
  return absl::OkStatus();
}

absl::Status append_journal(const fs::path& dir, const SweepRow& row,
                            const std::string& fingerprint) {
  nlohmann::json line = {{"point", row.point.id},
                         {"sweep", fingerprint},
                         {"exit_code", row.exit_code},
                         {"rank", row.rank},
                         {"host_seconds", row.seconds}};
  if (!row.failure.empty()) line["failure"] = row.failure;
  std::ofstream out(journal_file(dir), std::ios::app);
  out << json_text(line, -1) << "\n";
  if (!out.flush())
    return absl::UnavailableError(str_cat("cannot write ", journal_file(dir).string()));
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, JournalEntry>> read_journal(const fs::path& dir,
                                                                 const std::string& fingerprint) {
  std::map<std::string, JournalEntry> out;
  auto journal = read_input_file(journal_file(dir).string(), "sweep journal", kMaxJournalBytes);
  if (absl::IsNotFound(journal.status())) return out;  // no point ended
  if (!journal.ok()) return journal.status();
  std::istringstream in(*std::move(journal));
  for (std::string text; std::getline(in, text);) {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("point") || !j["point"].is_string() ||
        !j.contains("exit_code")) {
      continue;  // cut short by a kill: that point runs again
    }
    // A field out of its range or of another type: not a line this journal wrote, and the point
    // runs again.
    const auto small_int = [&](const char* key, int low, int high, int* v) {
      if (!j.contains(key)) return true;
      const auto& f = j[key];
      if (!f.is_number_integer()) return false;
      const int64_t x = f.get<int64_t>();
      if (x < low || x > high) return false;
      *v = static_cast<int>(x);
      return true;
    };
    // Every line this journal writes carries the sweep's fingerprint: a line without one (a
    // journal from before it, or edited) cannot say which arguments its point ran under, and the
    // point runs again rather than stand for another.
    if (!j.contains("sweep")) continue;
    if (j["sweep"] != fingerprint) {
      return absl::DataLossError(str_cat(
          journal_file(dir).string(), ": point ", j["point"].get<std::string>(),
          " ended under other arguments than ", args_file(dir).string(), " holds now (sweep ",
          j["sweep"].is_string() ? j["sweep"].get<std::string>() : json_text(j["sweep"], -1),
          ", not ", fingerprint,
          "): the file was edited after its points ran, and its results would "
          "stand for other points; run the sweep into a new folder"));
    }
    JournalEntry e;
    if (!small_int("exit_code", -1, 255, &e.exit_code) || !small_int("rank", 0, 1 << 24, &e.rank)) {
      continue;
    }
    if (j.contains("host_seconds") && j["host_seconds"].is_number())
      e.seconds = j["host_seconds"].get<double>();
    if (j.contains("failure") && j["failure"].is_string())
      e.failure = j["failure"].get<std::string>();
    out[j["point"].get<std::string>()] = e;
  }
  return out;
}

}  // namespace tpusim::studies
