// The stall watch: a wait that lasts is reported, again as it doubles, and closed when it ends;
// a short wait says nothing; the infeed driver names a pipeline that gives no batch, with its
// stages so far, and the batch when it comes.
#include "runtime/infeed/stall_watch.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/data/stage_profile.h"
#include "runtime/graph/builder.h"
#include "runtime/infeed/infeed_driver.h"

namespace tpusim::runtime {
namespace stall_watch_test {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Lines reported from any thread; a test waits for them by count, bounded so that a watch that
// never reports fails the test instead of hanging it.
class Lines {
 public:
  void add(const std::string& line) {
    {
      std::lock_guard<std::mutex> lock(m_);
      lines_.push_back(line);
    }
    cv_.notify_all();
  }
  bool wait_for_count(size_t n) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, 30s, [&] { return lines_.size() >= n; });
  }
  std::vector<std::string> all() {
    std::lock_guard<std::mutex> lock(m_);
    return lines_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// A gate a map function waits at until the test opens it.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void pass() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(m);
      open = true;
    }
    cv.notify_all();
  }
};

TEST(StallWatch, AWaitThatLastsIsReportedAsItDoublesThenClosed) {
  Lines lines;
  std::vector<std::pair<double, bool>> calls;  // written on the watch's thread, read after
  std::mutex calls_m;
  {
    StallWatch watch(10ms, [&](const std::string& l) { lines.add(l); });
    auto waiting = watch.watch([&](double seconds, bool ended) {
      std::lock_guard<std::mutex> lock(calls_m);
      calls.emplace_back(seconds, ended);
      return ended ? "ended" : "waiting";
    });
    ASSERT_TRUE(lines.wait_for_count(3));
  }
  const auto all = lines.all();
  ASSERT_GE(all.size(), 4u);
  EXPECT_EQ(all.back(), "ended");
  for (size_t i = 0; i + 1 < all.size(); ++i) EXPECT_EQ(all[i], "waiting");
  // Reported at 10 ms, then each time the wait doubles: 20, 40, ...
  std::lock_guard<std::mutex> lock(calls_m);
  EXPECT_GE(calls[0].first, 0.010);
  for (size_t i = 1; i + 1 < calls.size(); ++i) EXPECT_GE(calls[i].first, 2 * calls[i - 1].first);
  EXPECT_TRUE(calls.back().second);
}

TEST(StallWatch, AWaitEndedBeforeItsFirstReportSaysNothing) {
  Lines lines;
  StallWatch watch(1h, [&](const std::string& l) { lines.add(l); });
  for (int i = 0; i < 100; ++i) {
    auto waiting = watch.watch([](double, bool) { return std::string("reported"); });
  }
  EXPECT_TRUE(lines.all().empty());
}

TEST(StallWatch, AReplacedWaitIsTheOneReported) {
  Lines lines;
  StallWatch watch(10ms, [&](const std::string& l) { lines.add(l); });
  StallWatch::Scope waiting = watch.watch([](double, bool) { return std::string("first"); });
  waiting = watch.watch([](double, bool ended) { return std::string(ended ? "end" : "second"); });
  ASSERT_TRUE(lines.wait_for_count(1));
  EXPECT_EQ(lines.all().front(), "second");
}

data::FeatureValue floats(int64_t rows, int64_t cols) {
  data::FeatureValue v;
  v.type = data::FeatureType::kFloat;
  v.shape = {rows, cols};
  v.floats.assign(static_cast<size_t>(rows * cols), 1.0f);
  return v;
}

TEST(InfeedStall, APipelineThatGivesNoBatchIsNamedWithItsStagesThenItsBatch) {
  GraphBuilder b;
  b.output("y", b.infeed("x", DType::kF32, {4, 3}) * 2.0f);
  auto profile = std::make_shared<data::StageProfile>();
  Gate gate;
  // The second element's decode blocks until the test opens the gate: a map function that
  // does not return.
  int decoded = 0;
  auto decode = [&](data::Element e) -> absl::StatusOr<data::Element> {
    if (++decoded == 2) gate.pass();
    return e;
  };
  auto ds = data::Dataset::from_elements({{{"x", floats(4, 3)}}, {{"x", floats(4, 3)}}})
                ->profiled(profile, "read")
                ->map(profile->timed("decode", decode));
  Lines lines;
  InfeedOptions o;
  o.replicas = 1;
  o.stall_report_seconds = 0.01;
  o.log = [&](const std::string& l) { lines.add(l); };
  auto driver = InfeedDriver::create(b.graph(), {{ds, profile}}, o);
  ASSERT_TRUE(driver.ok()) << driver.status();
  std::thread opener([&] {
    lines.wait_for_count(1);  // bounded: the gate opens after 30 s even if nothing is said
    gate.release();
  });
  auto loop = (*driver)->next_loop(2, 0);
  opener.join();
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ(loop->size(), 2u);
  const auto all = lines.all();
  ASSERT_GE(all.size(), 2u);
  EXPECT_THAT(
      all.front(),
      AllOf(HasSubstr("input pipeline 0: no batch for step 1 after"), HasSubstr("still waiting"),
            HasSubstr("its stages so far: read: 2 done, "), HasSubstr("decode: 1 done, ")));
  EXPECT_THAT(all.back(), HasSubstr("input pipeline 0: batch for step 1 came after"));
}

TEST(InfeedStall, ZeroSecondsIsNotWatched) {
  GraphBuilder b;
  b.output("y", b.infeed("x", DType::kF32, {4, 3}) * 2.0f);
  // A pipeline 50 ms slow per batch: a watch at any positive time would have said something.
  auto slow = [](data::Element e) -> absl::StatusOr<data::Element> {
    std::this_thread::sleep_for(50ms);
    return e;
  };
  Lines lines;
  InfeedOptions o;
  o.replicas = 1;
  o.timing.stages = {{"input", 1}};
  o.timing.stage_seconds = {0};
  o.stall_report_seconds = 0;
  o.log = [&](const std::string& l) { lines.add(l); };
  auto ds = data::Dataset::from_elements({{{"x", floats(4, 3)}}})->map(slow);
  auto driver = InfeedDriver::create(b.graph(), {{ds, nullptr}}, o);
  ASSERT_TRUE(driver.ok()) << driver.status();
  ASSERT_TRUE((*driver)->next_loop(1, 0).ok());
  EXPECT_TRUE(lines.all().empty());
}

}  // namespace stall_watch_test
}  // namespace tpusim::runtime
