#include "runtime/data/stage_profile.h"

#include <ctime>

namespace tpusim::runtime::data {
namespace {

thread_local StageRegion* current_region = nullptr;

}  // namespace

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

size_t StageProfile::declare(const std::string& name, int threads) {
  std::lock_guard<std::mutex> lock(m_);
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].name == name) return i;
  }
  Stage& s = stages_.emplace_back();
  s.name = name;
  s.threads = threads < 1 ? 1 : threads;
  return stages_.size() - 1;
}

MapFn StageProfile::timed(const std::string& stage, MapFn fn, int threads) {
  const size_t index = declare(stage, threads);
  return
      [self = shared_from_this(), index, fn = std::move(fn)](Element e) -> absl::StatusOr<Element> {
        StageRegion region(*self, index);
        region.count_element();
        return fn(std::move(e));
      };
}

void StageProfile::add(size_t stage, uint64_t cpu_ns, uint64_t elements) {
  Stage* s = nullptr;
  {
    std::lock_guard<std::mutex> lock(m_);  // a deque keeps its elements where they are
    s = &stages_[stage];
  }
  s->cpu_ns.fetch_add(cpu_ns, std::memory_order_relaxed);
  s->elements.fetch_add(elements, std::memory_order_relaxed);
}

std::vector<StageSample> StageProfile::snapshot() const {
  std::lock_guard<std::mutex> lock(m_);
  std::vector<StageSample> out;
  for (const Stage& s : stages_) {
    out.push_back(
        {s.name, s.threads, static_cast<double>(s.cpu_ns.load()) * 1e-9, s.elements.load()});
  }
  return out;
}

namespace {

// Charges each next() of its input (less nested regions) to a stage.
class ProfiledDataset final : public Dataset {
 public:
  ProfiledDataset(DatasetPtr input, std::shared_ptr<StageProfile> profile, size_t stage)
      : input_(std::move(input)), profile_(std::move(profile)), stage_(stage) {}
  std::unique_ptr<Iterator> make_iterator() const override {
    class It final : public Iterator {
     public:
      It(std::unique_ptr<Iterator> in, std::shared_ptr<StageProfile> profile, size_t stage)
          : in_(std::move(in)), profile_(std::move(profile)), stage_(stage) {}
      absl::StatusOr<std::optional<Element>> next() override {
        StageRegion region(*profile_, stage_);
        auto e = in_->next();
        if (e.ok() && e->has_value()) region.count_element();
        return e;
      }

     private:
      std::unique_ptr<Iterator> in_;
      std::shared_ptr<StageProfile> profile_;
      size_t stage_;
    };
    return std::make_unique<It>(input_->make_iterator(), profile_, stage_);
  }

 private:
  DatasetPtr input_;
  std::shared_ptr<StageProfile> profile_;
  size_t stage_;
};

}  // namespace

DatasetPtr Dataset::profiled(std::shared_ptr<StageProfile> profile, const std::string& stage,
                             int threads) const {
  const size_t index = profile->declare(stage, threads);
  return std::make_shared<ProfiledDataset>(self(), std::move(profile), index);
}

StageRegion::StageRegion(StageProfile& profile, size_t stage)
    : profile_(profile), stage_(stage), parent_(current_region), start_ns_(thread_cpu_ns()) {
  current_region = this;
}

StageRegion::~StageRegion() {
  const uint64_t total = thread_cpu_ns() - start_ns_;
  profile_.add(stage_, total > children_ns_ ? total - children_ns_ : 0, elements_);
  if (parent_ != nullptr) parent_->children_ns_ += total;
  current_region = parent_;
}

}  // namespace tpusim::runtime::data
