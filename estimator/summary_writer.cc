#include "estimator/summary_writer.h"

#include <chrono>
#include <filesystem>

#include <unistd.h>

#include "common/fault_point.h"
#include "common/strings.h"
#include "estimator/event.pb.h"
#include "runtime/data/tfrecord.h"

namespace tpusim::estimator {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SummaryWriter>> SummaryWriter::create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(str_cat("cannot create ", dir, ": ", ec.message()));
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const double wall = now_seconds();
  std::string path = str_cat(dir, "/events.out.tfevents.",
                             fmt::format("{:010d}", static_cast<int64_t>(wall)), ".", host);
  // Two writers in one second: a suffix keeps their files apart.
  for (int n = 1; std::filesystem::exists(path, ec); ++n) {
    path = str_cat(dir, "/events.out.tfevents.", fmt::format("{:010d}", static_cast<int64_t>(wall)),
                   ".", host, ".", n);
  }
  if (ec)
    return absl::FailedPreconditionError(str_cat("cannot look at ", path, ": ", ec.message()));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(str_cat("cannot write ", path));
  std::unique_ptr<SummaryWriter> w(new SummaryWriter(path, f));
  tensorflow::Event first;
  first.set_wall_time(wall);
  first.set_file_version("brain.Event:2");
  if (auto s = w->write_event(first.SerializeAsString()); !s.ok()) return s;
  return w;
}

SummaryWriter::~SummaryWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  tensorflow::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  return write_event(e.SerializeAsString());
}

absl::Status SummaryWriter::write_event(const std::string& serialized) {
  const std::string framed = runtime::data::frame_record(serialized);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size() ||
      std::fflush(file_) != 0) {
    return absl::InternalError(str_cat("cannot write to ", path_));
  }
  fault_point("summary.event");
  return absl::OkStatus();
}

}  // namespace tpusim::estimator
