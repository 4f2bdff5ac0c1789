#include "traces/chrome_json_writer.h"

#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/strings.h"
#include "traces/file_output.h"
#include "traces/slice_clamp.h"
#include "traces/track_names.h"

namespace tpusim::traces {
namespace {

// Microseconds with three decimals: exactly the nanoseconds.
std::string micros(TimePs t) {
  const uint64_t ns = t / 1000;
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

class ChromeJsonWriter final : public TraceWriter {
 public:
  explicit ChromeJsonWriter(std::string path) : out_(std::move(path)) {}

  absl::Status open() {
    if (auto s = out_.open(); !s.ok()) return s;
    out_.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    return absl::OkStatus();
  }

  TrackId declare_track(const TrackInfo& info) override {
    const auto id = static_cast<TrackId>(tracks_.size());
    Track t;
    t.pid = pid_of(info);
    t.tid = static_cast<int>(tracks_.size()) + 1;
    t.counter = info.kind == TrackInfo::Kind::kCounter;
    t.label = json_text(nlohmann::json(track_label(info)), -1);
    tracks_.push_back(t);
    if (t.pid >= static_cast<int>(named_.size())) named_.resize(static_cast<size_t>(t.pid) + 1);
    if (!named_[static_cast<size_t>(t.pid)]) {
      named_[static_cast<size_t>(t.pid)] = true;
      event(
          fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})",
                      t.pid, json_text(nlohmann::json(process_label(info)), -1)));
    }
    if (t.counter) {
      // Chrome has no counter-track metadata; the unit travels in an "M" event of our own that
      // viewers ignore and the reader uses.
      event(fmt::format(
          R"({{"ph":"M","name":"tpusim_counter","pid":{},"tid":{},"args":{{"name":{},"unit":{}}}}})",
          t.pid, t.tid, t.label, json_text(nlohmann::json(info.unit), -1)));
    } else {
      event(
          fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                      t.pid, t.tid, t.label));
    }
    return id;
  }

  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override {
    if (!clamp_.clamp(track, &start, &end)) return;
    const Track& t = tracks_.at(static_cast<size_t>(track));
    event(fmt::format(R"({{"ph":"X","name":{},"pid":{},"tid":{},"ts":{},"dur":{}}})",
                      json_text(nlohmann::json(name), -1), t.pid, t.tid, micros(start),
                      micros(end - start)));
  }

  void counter(TrackId track, TimePs time, double value) override {
    const Track& t = tracks_.at(static_cast<size_t>(track));
    event(fmt::format(R"({{"ph":"C","name":{},"pid":{},"tid":{},"ts":{},"args":{{"value":{}}}}})",
                      t.label, t.pid, t.tid, micros(time), json_text(nlohmann::json(value), -1)));
  }

  absl::Status close() override {
    if (out_.is_open()) out_.write("\n]}\n");
    return out_.close();
  }

  uint64_t bytes_written() const override { return out_.bytes(); }

 private:
  struct Track {
    int pid = 0;
    int tid = 0;
    bool counter = false;
    std::string label;  // JSON-quoted
  };

  void event(const std::string& json) {
    if (!first_) out_.write(",\n");
    first_ = false;
    out_.write(json);
  }

  FileOutput out_;
  bool first_ = true;
  std::vector<Track> tracks_;
  std::vector<bool> named_;
  SliceClamp clamp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceWriter>> open_chrome_json_writer(const std::string& path) {
  return open_writer<ChromeJsonWriter, TraceWriter>(path);
}

}  // namespace tpusim::traces
