#include "traces/perfetto_writer.h"

#include "traces/file_output.h"
#include "traces/perfetto_trace.pb.h"
#include "traces/slice_clamp.h"
#include "traces/track_names.h"

namespace tpusim::traces {
namespace {

constexpr uint32_t kSequence = 1;
constexpr uint64_t kProcessUuidBase = 1;       // + pid
constexpr uint64_t kTrackUuidBase = 1u << 20;  // + track id

uint64_t to_ns(TimePs t) { return t / 1000; }

class PerfettoWriter final : public TraceWriter {
 public:
  explicit PerfettoWriter(std::string path) : out_(std::move(path)) {}

  absl::Status open() { return out_.open(); }

  TrackId declare_track(const TrackInfo& info) override {
    const auto id = static_cast<TrackId>(tracks_++);
    const int pid = pid_of(info);
    if (pid >= static_cast<int>(processes_.size())) processes_.resize(static_cast<size_t>(pid) + 1);
    if (!processes_[static_cast<size_t>(pid)]) {
      processes_[static_cast<size_t>(pid)] = true;
      perfetto::TracePacket p;
      auto* d = p.mutable_track_descriptor();
      d->set_uuid(kProcessUuidBase + static_cast<uint64_t>(pid));
      d->mutable_process()->set_pid(pid);
      d->mutable_process()->set_process_name(process_label(info));
      write(p);
    }
    perfetto::TracePacket p;
    auto* d = p.mutable_track_descriptor();
    d->set_uuid(kTrackUuidBase + static_cast<uint64_t>(id));
    const std::string label = track_label(info);
    if (info.kind == TrackInfo::Kind::kCounter) {
      d->set_parent_uuid(kProcessUuidBase + static_cast<uint64_t>(pid));
      d->set_name(label);
      d->mutable_counter()->set_unit_name(info.unit);
    } else {
      d->mutable_thread()->set_pid(pid);
      d->mutable_thread()->set_tid(static_cast<int32_t>(kTrackUuidBase) + static_cast<int32_t>(id));
      d->mutable_thread()->set_thread_name(label);
    }
    write(p);
    return id;
  }

  void slice(TrackId track, std::string_view name, TimePs start, TimePs end) override {
    if (!clamp_.clamp(track, &start, &end)) return;
    event(track, perfetto::TrackEvent::TYPE_SLICE_BEGIN, to_ns(start), name);
    event(track, perfetto::TrackEvent::TYPE_SLICE_END, to_ns(end), {});
  }

  void counter(TrackId track, TimePs time, double value) override {
    perfetto::TracePacket p;
    p.set_timestamp(to_ns(time));
    p.set_trusted_packet_sequence_id(kSequence);
    auto* e = p.mutable_track_event();
    e->set_type(perfetto::TrackEvent::TYPE_COUNTER);
    e->set_track_uuid(kTrackUuidBase + static_cast<uint64_t>(track));
    e->set_double_counter_value(value);
    write(p);
  }

  absl::Status close() override { return out_.close(); }
  uint64_t bytes_written() const override { return out_.bytes(); }

 private:
  void event(TrackId track, perfetto::TrackEvent::Type type, uint64_t ns, std::string_view name) {
    perfetto::TracePacket p;
    p.set_timestamp(ns);
    p.set_trusted_packet_sequence_id(kSequence);
    auto* e = p.mutable_track_event();
    e->set_type(type);
    e->set_track_uuid(kTrackUuidBase + static_cast<uint64_t>(track));
    if (!name.empty()) e->set_name(std::string(name));
    write(p);
  }

  // One `Trace.packet` field: tag (field 1, length-delimited), varint length, the packet.
  void write(const perfetto::TracePacket& packet) {
    packet.SerializeToString(&buffer_);
    char header[11];
    size_t n = 0;
    header[n++] = 0x0a;
    for (uint64_t len = buffer_.size();; len >>= 7) {
      const auto byte = static_cast<uint8_t>(len & 0x7f);
      if (len < 0x80) {
        header[n++] = static_cast<char>(byte);
        break;
      }
      header[n++] = static_cast<char>(byte | 0x80);
    }
    out_.write(header, n);
    out_.write(buffer_);
  }

  FileOutput out_;
  std::string buffer_;
  uint32_t tracks_ = 0;
  std::vector<bool> processes_;
  SliceClamp clamp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceWriter>> open_perfetto_writer(const std::string& path) {
  return open_writer<PerfettoWriter, TraceWriter>(path);
}

}  // namespace tpusim::traces
