#include "tools/studies/sweep_journal.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/strings.h"

namespace tpusim::studies {

namespace fs = std::filesystem;

namespace {

fs::path args_file(const fs::path& dir) { return dir / "sweep-args.json"; }
fs::path journal_file(const fs::path& dir) { return dir / "points.jsonl"; }

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
  std::ifstream in(file);
  if (!in) {
    return absl::NotFoundError(
        str_cat(file.string(), " cannot be read: --resume takes the folder of a sweep"));
  }
  const auto j = nlohmann::json::parse(in, nullptr, false);
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

absl::Status clear_journal(const fs::path& dir) {
  std::ofstream out(journal_file(dir), std::ios::trunc);
  if (!out) return absl::UnavailableError(str_cat("cannot write ", journal_file(dir).string()));
  return absl::OkStatus();
}

absl::Status append_journal(const fs::path& dir, const SweepRow& row) {
  nlohmann::json line = {{"point", row.point.id},
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

absl::StatusOr<std::map<std::string, JournalEntry>> read_journal(const fs::path& dir) {
  std::map<std::string, JournalEntry> out;
  std::ifstream in(journal_file(dir));
  if (!in) return out;  // no point ended
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
