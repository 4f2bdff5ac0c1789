#include "traces/xplane_builder.h"

namespace tpusim::traces {

XPlaneBuilder::XPlaneBuilder(xprof::XPlane* plane, int64_t id, std::string_view name)
    : plane_(plane) {
  plane_->set_id(id);
  plane_->set_name(std::string(name));
}

int64_t XPlaneBuilder::stat_id(std::string_view name) {
  if (auto it = stat_ids_.find(name); it != stat_ids_.end()) return it->second;
  const auto id = static_cast<int64_t>(stat_ids_.size()) + 1;
  stat_ids_.emplace(std::string(name), id);
  xprof::XStatMetadata& m = (*plane_->mutable_stat_metadata())[id];
  m.set_id(id);
  m.set_name(std::string(name));
  return id;
}

xprof::XEventMetadata& XPlaneBuilder::event_metadata(std::string_view name) {
  auto it = event_ids_.find(name);
  if (it == event_ids_.end()) {
    const auto id = static_cast<int64_t>(event_ids_.size()) + 1;
    it = event_ids_.emplace(std::string(name), id).first;
    xprof::XEventMetadata& m = (*plane_->mutable_event_metadata())[id];
    m.set_id(id);
    m.set_name(std::string(name));
  }
  return (*plane_->mutable_event_metadata())[it->second];
}

xprof::XLine* XPlaneBuilder::add_line(int64_t id, std::string_view name) {
  xprof::XLine* line = plane_->add_lines();
  line->set_id(id);
  line->set_display_id(id);
  line->set_name(std::string(name));
  line->set_timestamp_ns(0);
  return line;
}

xprof::XEvent* XPlaneBuilder::add_event(xprof::XLine* line, const xprof::XEventMetadata& metadata,
                                        uint64_t start_ps, uint64_t end_ps) {
  xprof::XEvent* e = line->add_events();
  e->set_metadata_id(metadata.id());
  e->set_offset_ps(static_cast<int64_t>(start_ps));
  e->set_duration_ps(static_cast<int64_t>(end_ps > start_ps ? end_ps - start_ps : 0));
  const auto end = static_cast<int64_t>(end_ps);
  if (end > line->duration_ps()) line->set_duration_ps(end);
  return e;
}

xprof::XStat* XPlaneBuilder::add_stat(Stats* stats, std::string_view name) {
  xprof::XStat* s = stats->Add();
  s->set_metadata_id(stat_id(name));
  return s;
}

void XPlaneBuilder::add_double(Stats* stats, std::string_view name, double value) {
  add_stat(stats, name)->set_double_value(value);
}

void XPlaneBuilder::add_int(Stats* stats, std::string_view name, int64_t value) {
  add_stat(stats, name)->set_int64_value(value);
}

void XPlaneBuilder::add_str(Stats* stats, std::string_view name, std::string_view value) {
  add_stat(stats, name)->set_str_value(std::string(value));
}

void XPlaneBuilder::add_bytes(Stats* stats, std::string_view name, const std::string& value) {
  add_stat(stats, name)->set_bytes_value(value);
}

}  // namespace tpusim::traces
