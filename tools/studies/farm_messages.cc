#include "tools/studies/farm_messages.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <unistd.h>

#include "common/strings.h"
#include "tools/studies/subprocess.h"

namespace tpusim::studies::farm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A farm's messages nest three deep (an object, its inputs, each a [path, text] pair).
constexpr int kMaxNesting = 16;

// nlohmann's DOM builder, stopped past kMaxNesting arrays and objects: its CBOR reader recurses
// once a level, and 4 KB of nested array headers overflowed the stack (fuzz_cli_values).
class NestingLimitedSax : public nlohmann::detail::json_sax_dom_parser<Json> {
 public:
  using Base = nlohmann::detail::json_sax_dom_parser<Json>;
  explicit NestingLimitedSax(Json& j) : Base(j, /*allow_exceptions_=*/false) {}
  bool start_object(std::size_t n) { return enter() && Base::start_object(n); }
  bool start_array(std::size_t n) { return enter() && Base::start_array(n); }
  bool end_object() { return leave() && Base::end_object(); }
  bool end_array() { return leave() && Base::end_array(); }
  bool too_deep() const { return too_deep_; }

 private:
  bool enter() {
    too_deep_ = too_deep_ || ++depth_ > kMaxNesting;
    return !too_deep_;
  }
  bool leave() {
    --depth_;
    return true;
  }
  int depth_ = 0;
  bool too_deep_ = false;
};

absl::StatusOr<Json> decode(const std::string& bytes, const char* what) {
  const std::string refused = str_cat("a ", what, " message of ", bytes.size(),
                                      " bytes is not the CBOR object a farm sends");
  Json j;
  NestingLimitedSax sax(j);
  bool parsed = false;
  try {
    parsed = Json::sax_parse(bytes, &sax, Json::input_format_t::cbor, /*strict=*/true);
  } catch (const Json::exception& e) {
    // nlohmann 3.11 throws for a declared array size past its limit even when told not to.
    return absl::DataLossError(str_cat(refused, ": ", e.what()));
  }
  if (sax.too_deep())
    return absl::DataLossError(str_cat(refused, ": it nests past ", kMaxNesting, " levels"));
  if (!parsed || sax.is_errored() || !j.is_object()) return absl::DataLossError(refused);
  return j;
}

}  // namespace

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string encode_task(size_t index, const FarmJob& job, const std::string& marker) {
  Json inputs = Json::array();
  for (const auto& [path, text] : job.inputs) inputs.push_back({path, text});
  const Json j = {
      {"index", index},         {"id", job.id},         {"args", job.args},
      {"log", job.log},         {"report", job.report}, {"report_on_stdout", job.report_on_stdout},
      {"run_dir", job.run_dir}, {"inputs", inputs},     {"marker", marker}};
  const std::vector<uint8_t> cbor = Json::to_cbor(j);
  return std::string(cbor.begin(), cbor.end());
}

absl::StatusOr<Task> decode_task(const std::string& bytes) {
  auto j = decode(bytes, "task");
  if (!j.ok()) return j.status();
  try {
    Task t;
    t.index = j->at("index").get<size_t>();
    t.marker = j->at("marker").get<std::string>();
    t.job.id = j->at("id").get<std::string>();
    t.job.args = j->at("args").get<std::vector<std::string>>();
    t.job.log = j->at("log").get<std::string>();
    t.job.report = j->at("report").get<std::string>();
    t.job.report_on_stdout = j->at("report_on_stdout").get<bool>();
    t.job.run_dir = j->at("run_dir").get<std::string>();
    for (const Json& in : j->at("inputs"))
      t.job.inputs.emplace_back(in.at(0).get<std::string>(), in.at(1).get<std::string>());
    return t;
  } catch (const Json::exception& e) {
    return absl::DataLossError(str_cat("a task message lacks a field: ", e.what()));
  }
}

std::string encode_result(const Result& r) {
  const Json j = {{"index", r.index},           {"exit_code", r.exit_code}, {"seconds", r.seconds},
                  {"has_report", r.has_report}, {"report", r.report},       {"log", r.log}};
  const std::vector<uint8_t> cbor = Json::to_cbor(j);
  return std::string(cbor.begin(), cbor.end());
}

absl::StatusOr<Result> decode_result(const std::string& bytes) {
  auto j = decode(bytes, "result");
  if (!j.ok()) return j.status();
  try {
    Result r;
    r.index = j->at("index").get<size_t>();
    r.exit_code = j->at("exit_code").get<int>();
    r.seconds = j->at("seconds").get<double>();
    r.has_report = j->at("has_report").get<bool>();
    r.report = j->at("report").get<std::string>();
    r.log = j->at("log").get<std::string>();
    return r;
  } catch (const Json::exception& e) {
    return absl::DataLossError(str_cat("a result message lacks a field: ", e.what()));
  }
}

std::optional<std::string> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

absl::Status write_bytes(const std::string& path, const std::string& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = str_cat(path, ".tmp-", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush())
      return absl::UnavailableError(str_cat("cannot write ", path, " (through ", tmp, ")"));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return absl::UnavailableError(str_cat("cannot write ", path, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> start_job(const FarmJob& job) {
  prepare_job_files(job);
  return spawn_self(job.args, job.log, job.report_on_stdout ? job.report : "");
}

}  // namespace tpusim::studies::farm
