#include "traces/trace_reader.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <nlohmann/json.hpp>

#include "common/input_file.h"
#include "common/json_text.h"
#include "common/strings.h"
#include "traces/perfetto_trace.pb.h"
#include "traces/trace_writer.h"
#include "traces/track_names.h"
#include "traces/xspace_reader.h"

namespace tpusim::traces {
namespace {

// The latest time a trace may hold, in microseconds: 10^12 us, 11.6 days.
constexpr double kMaxTraceMicroseconds = 1e12;

// A trace has no cap of its own (a pod's can be gigabytes): the host's memory budget bounds it.
absl::StatusOr<std::string> slurp(const std::string& path) {
  return read_input_file(path, "trace", UINT64_MAX);
}

// How deep a Chrome trace's arrays and objects may nest: its events nest four levels
// ({"traceEvents": [{"args": {...}}]}). The parser keeps a container a level, about 75 bytes of
// memory a byte of `[`: 45 MB of them took 3.4 GB before "not valid JSON".
constexpr int kMaxJsonDepth = 64;

struct TooDeep {};

// The trace's JSON, or why not: the byte offset and the parser's reason for a syntax error, the
// bound for nesting past kMaxJsonDepth (refused as the parser reaches it).
absl::StatusOr<nlohmann::json> parse_trace_json(const std::string& path, const std::string& text) {
  try {
    return nlohmann::json::parse(text,
                                 [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                                   if (depth > kMaxJsonDepth) throw TooDeep{};
                                   return true;
                                 });
  } catch (const TooDeep&) {
    return absl::DataLossError(str_cat("trace ", path, ": arrays and objects nested more than ",
                                       kMaxJsonDepth, " deep (a trace's events nest four levels)"));
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error ..."
    std::string why = e.what();
    if (const size_t colon = why.find(": "); colon != std::string::npos)
      why = why.substr(colon + 2);
    // e.byte counts from 1: the last byte read, where the text went wrong.
    return absl::DataLossError(str_cat("trace ", path, ": not valid JSON at byte offset ",
                                       e.byte > 0 ? e.byte - 1 : 0, ": ", why));
  } catch (const nlohmann::json::exception& e) {
    // A number past double's range ("1e400": out_of_range.406) and the like.
    std::string why = e.what();
    if (const size_t end = why.find("] "); end != std::string::npos) why = why.substr(end + 2);
    return absl::DataLossError(str_cat("trace ", path, ": not valid JSON: ", why));
  }
}

struct OpenSlice {
  std::string name;
  TimePs start;
};

// What a Perfetto trace has declared so far, and the slices still open on each track.
struct PerfettoTracks {
  std::map<uint64_t, int> process_pid;  // process track uuid -> pid
  std::map<uint64_t, TrackId> tracks;   // track uuid -> our id
  std::map<uint64_t, std::vector<OpenSlice>> open;
};

// A TrackDescriptor: a process's pid, or a unit's or a counter's track declared to `out`; ""
// or why it is refused.
// A track descriptor whose uuid an earlier one declared: a trace declares each track once, so
// this is a second trace after the first (files concatenated).
std::string declared_again(uint64_t uuid) {
  return str_cat("track uuid ", uuid,
                 " is declared again (two traces concatenated? each declares its tracks once)");
}

std::string declare_track(const perfetto::TrackDescriptor& d, PerfettoTracks* t,
                          RecordingSink* out) {
  if (d.has_process()) {
    const bool first = t->process_pid.emplace(d.uuid(), d.process().pid()).second;
    return first ? "" : declared_again(d.uuid());
  }
  absl::StatusOr<TrackInfo> info = absl::InvalidArgumentError("neither thread nor counter");
  if (d.has_thread()) {
    info =
        parse_track_label(TrackInfo::Kind::kUnit, d.thread().pid(), d.thread().thread_name(), "");
  } else if (d.has_counter()) {
    auto pid = t->process_pid.find(d.parent_uuid());
    if (pid == t->process_pid.end()) return "a counter track under an unknown process";
    info = parse_track_label(TrackInfo::Kind::kCounter, pid->second, d.name(),
                             d.counter().unit_name());
  }
  if (!info.ok()) return std::string(info.status().message());
  if (t->tracks.count(d.uuid()) > 0) return declared_again(d.uuid());
  t->tracks[d.uuid()] = out->declare_track(*info);
  return "";
}

// A TrackEvent at `time` on `track`: a slice begun or ended, or a counter's value; "" or why it
// is refused.
std::string record_event(const perfetto::TrackEvent& e, TimePs time, TrackId track,
                         PerfettoTracks* t, RecordingSink* out) {
  switch (e.type()) {
    case perfetto::TrackEvent::TYPE_SLICE_BEGIN:
      t->open[e.track_uuid()].push_back({e.name(), time});
      break;
    case perfetto::TrackEvent::TYPE_SLICE_END: {
      auto& stack = t->open[e.track_uuid()];
      if (stack.empty()) return "a slice end with no slice open on its track";
      if (time < stack.back().start) return "a slice that ends before it begins";
      out->slice(track, stack.back().name, stack.back().start, time);
      stack.pop_back();
      break;
    }
    case perfetto::TrackEvent::TYPE_COUNTER:
      out->counter(track, time,
                   e.has_double_counter_value() ? e.double_counter_value()
                                                : static_cast<double>(e.counter_value()));
      break;
    default:
      break;  // instants carry nothing tpusim reads
  }
  return "";
}

absl::Status read_perfetto(const std::string& path, const std::string& bytes, RecordingSink* out) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(static_cast<int>(std::min<size_t>(bytes.size() + 1, INT32_MAX)));
  PerfettoTracks t;
  perfetto::TracePacket p;
  std::string payload;
  for (uint64_t index = 0;; ++index) {
    const int offset = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      if (static_cast<size_t>(offset) != bytes.size()) {
        return absl::DataLossError(
            str_cat("trace ", path, ": byte offset ", offset, ": not a Trace.packet field"));
      }
      break;
    }
    auto bad = [&](const std::string& why) {
      return absl::DataLossError(
          str_cat("trace ", path, ": packet ", index, " at byte offset ", offset, ": ", why));
    };
    uint32_t length = 0;
    if (tag != 0x0a || !in.ReadVarint32(&length)) return bad("not a Trace.packet field");
    if (!in.ReadString(&payload, static_cast<int>(length))) return bad("truncated");
    if (!p.ParseFromString(payload)) return bad("not a TracePacket");
    if (p.has_track_descriptor()) {
      if (std::string why = declare_track(p.track_descriptor(), &t, out); !why.empty())
        return bad(why);
      continue;
    }
    if (!p.has_track_event()) continue;
    const auto& e = p.track_event();
    auto track = t.tracks.find(e.track_uuid());
    if (track == t.tracks.end())
      return bad(str_cat("an event on undeclared track ", e.track_uuid()));
    if (static_cast<double>(p.timestamp()) > kMaxTraceMicroseconds * 1000) {
      return bad(str_cat("timestamp ", p.timestamp(), " ns is beyond 1e15 ns (11.6 days)"));
    }
    const TimePs time = static_cast<TimePs>(p.timestamp()) * 1000;
    if (std::string why = record_event(e, time, track->second, &t, out); !why.empty())
      return bad(why);
  }
  for (const auto& [uuid, stack] : t.open) {
    if (!stack.empty()) {
      return absl::DataLossError(str_cat("trace ", path, ": slice '", stack.back().name,
                                         "' on track ", uuid, " never ends (a truncated trace?)"));
    }
  }
  return absl::OkStatus();
}

// A Chrome trace time (microseconds) in picoseconds: a finite number in [0, 10^12 us] (11.6
// days; tpusim's traces cover milliseconds to seconds), so no sum of two overflows. `field`
// names it in the error.
absl::StatusOr<TimePs> json_time(const nlohmann::json& v, const char* field) {
  const double us = v.get<double>();
  if (!std::isfinite(us) || us < 0 || us > kMaxTraceMicroseconds) {
    return absl::InvalidArgumentError(
        str_cat("\"", field, "\": ", json_text(v, -1), " is not a time in [0, 1e12] microseconds"));
  }
  return static_cast<TimePs>(std::llround(us * 1000.0)) * 1000;
}

// A process or thread id: an integer that fits an int (a float, or 10^70, is no id; converting
// one would be undefined behaviour).
absl::StatusOr<int> json_id(const nlohmann::json& v, const char* field) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t{INT32_MAX}
                              : v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX)) {
    return absl::InvalidArgumentError(
        str_cat("\"", field, "\": ", json_text(v, -1), " is not an id"));
  }
  return static_cast<int>(v.get<int64_t>());
}

absl::Status read_chrome_json(const std::string& path, const std::string& text,
                              RecordingSink* out) {
  // JSON has no raw NUL (RFC 8259: control characters only escaped, inside strings), and
  // nlohmann's parser takes one as the end of its input, so bytes after it went unread.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    return absl::DataLossError(str_cat("trace ", path, ": byte offset ", nul,
                                       ": a NUL byte, which JSON text cannot hold"));
  }
  auto parsed = parse_trace_json(path, text);
  if (!parsed.ok()) return parsed.status();
  nlohmann::json doc = std::move(*parsed);
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return absl::DataLossError(str_cat("trace ", path, ": no \"traceEvents\" array"));
  std::map<std::pair<int, int>, TrackId> tracks;
  size_t index = 0;
  for (const auto& e : doc["traceEvents"]) {
    auto bad = [&](const std::string& why) {
      return absl::DataLossError(str_cat("trace ", path, ": traceEvents[", index, "]: ", why));
    };
    if (!e.is_object() || !e.contains("ph") || !e.contains("pid") || !e.contains("tid"))
      return bad("an event needs ph, pid and tid");
    const char* field = "";  // the field read when the JSON library throws, for its message
    try {
      field = "ph";
      const std::string ph = e.at("ph").get<std::string>();
      const auto pid = json_id(e.at("pid"), "pid"), tid = json_id(e.at("tid"), "tid");
      if (!pid.ok()) return bad(std::string(pid.status().message()));
      if (!tid.ok()) return bad(std::string(tid.status().message()));
      const auto key = std::pair{*pid, *tid};
      field = "name";
      const std::string name = e.value("name", "");
      if (ph == "M" && (name == "thread_name" || name == "tpusim_counter")) {
        const bool counter = name == "tpusim_counter";
        field = "args.name";
        const std::string label = e.at("args").at("name").get<std::string>();
        field = "args.unit";
        auto info = parse_track_label(counter ? TrackInfo::Kind::kCounter : TrackInfo::Kind::kUnit,
                                      key.first, label,
                                      counter ? e.at("args").at("unit").get<std::string>() : "");
        if (!info.ok()) return bad(std::string(info.status().message()));
        tracks[key] = out->declare_track(*info);
      } else if (ph == "X" || ph == "C") {
        auto track = tracks.find(key);
        if (track == tracks.end()) return bad("an event on a track with no name");
        field = "ts";
        const auto ts = json_time(e.at("ts"), "ts");
        if (!ts.ok()) return bad(std::string(ts.status().message()));
        if (ph == "X") {
          field = "dur";
          const auto dur = json_time(e.at("dur"), "dur");
          if (!dur.ok()) return bad(std::string(dur.status().message()));
          out->slice(track->second, name, *ts, *ts + *dur);
        } else {
          field = "args.value";
          out->counter(track->second, *ts, e.at("args").at("value").get<double>());
        }
      }
    } catch (const nlohmann::json::out_of_range&) {  // at(): the field is missing
      return bad(str_cat("no \"", field, "\""));
    } catch (const nlohmann::json::exception& x) {  // get<>(): the field is of another type
      std::string why = x.what();  // "[json.exception.type_error.302] type must be ..."
      if (const size_t end = why.find("] "); end != std::string::npos) why = why.substr(end + 2);
      return bad(str_cat("\"", field, "\": ", why));
    }
    ++index;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RecordingSink>> read_trace(const std::string& path) {
  if (is_xspace_path(path)) return read_xspace(path);
  auto format = trace_format_of(path);
  if (!format.ok()) {
    return absl::InvalidArgumentError(
        str_cat(format.status().message(), ", or .xplane.pb (an XProf profile) to read"));
  }
  auto bytes = slurp(path);
  if (!bytes.ok()) return bytes.status();
  auto out = std::make_unique<RecordingSink>();
  const absl::Status s = *format == TraceFormat::kPerfetto
                             ? read_perfetto(path, *bytes, out.get())
                             : read_chrome_json(path, *bytes, out.get());
  if (!s.ok()) return s;
  return out;
}

}  // namespace tpusim::traces
