#pragma once
// Reports a blocking wait that lasts: the diagnosis path of a host input pipeline that stops
// producing (a source that blocks forever, a map function that never returns), where the
// pipeline's threads give the consumer no error to return.
//
//   StallWatch watch(std::chrono::seconds(60), log);
//   {
//     auto waiting = watch.watch([&](double s) { return str_cat("no batch after ", s, " s"); });
//     auto next = iterator->next();  // reported after 60 s, 120 s, 240 s, ... while it blocks
//   }                                // and, once it returns after a report, "resumed"
//
// One thread per watch, asleep on a condition variable; a wait that ends before its first report
// costs two lock round trips. One wait at a time: watch() while another wait is open replaces it.
// Reports of a wait still open run on the watch's thread, the one of a wait that ended on the
// thread that waited; they never run at once.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace tpusim::runtime {

class StallWatch {
 public:
  using Report = std::function<void(const std::string&)>;
  // The text of a report for a wait of `seconds` so far, or, once it has ended
  // (`ended` true), for a wait that lasted `seconds`.
  using Describe = std::function<std::string(double seconds, bool ended)>;

  class Scope {
   public:
    Scope() = default;
    Scope(Scope&& other) noexcept : watch_(other.watch_), id_(other.id_) { other.watch_ = nullptr; }
    Scope& operator=(Scope&& other) noexcept;
    Scope(const Scope&) = delete;
    ~Scope();

   private:
    friend class StallWatch;
    Scope(StallWatch* watch, uint64_t id) : watch_(watch), id_(id) {}
    StallWatch* watch_ = nullptr;
    uint64_t id_ = 0;  // the wait it closes: a replaced wait's scope closes nothing
  };

  // The first report after `first_report`; then each time the wait doubles.
  StallWatch(std::chrono::milliseconds first_report, Report report);
  ~StallWatch();  // stops and joins the thread
  // A watch whose first report comes after `seconds` (at most 1e9); null, not watched, when
  // `seconds` is 0 or less or `report` is empty.
  static std::unique_ptr<StallWatch> after_seconds(double seconds, Report report);
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // Opens a wait, watched until the returned scope ends.
  [[nodiscard]] Scope watch(Describe describe);

 private:
  using Clock = std::chrono::steady_clock;
  void run();
  void end_wait(uint64_t id);

  const std::chrono::milliseconds first_report_;
  const Report report_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool waiting_ = false;
  uint64_t wait_id_ = 0;  // which wait the thread's deadline belongs to
  Clock::time_point since_;
  Clock::time_point next_report_;
  Describe describe_;
  std::mutex report_m_;    // one report at a time
  bool reported_ = false;  // the open wait has been reported at least once
  std::thread thread_;
};

}  // namespace tpusim::runtime
