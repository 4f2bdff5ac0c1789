// Will this input pipeline keep a v3-8 busy? Runs a real host pipeline over Fashion-MNIST
// TFRecords (from `tpusim data convert-idx`, raw or --jpeg), measures each stage's CPU time, and
// feeds a zoo model's training step on every core of a simulated slice through the infeed
// driver. The host model places the measured work on the target host's cores (from the slice's
// host config) with the given number of map threads; the device waits where the host falls
// behind. Prints each loop's device time and infeed wait, the host's stages and the busiest one,
// and what 2x and 4x its threads would give.
//
//   build/bin/infeed_study DIR [--jpeg] [--map-threads N] [--loops L] [--steps S]
//                              [--batch B] [--model NAME] [--slice NAME]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "configs/loader.h"
#include "runtime/backend/registry.h"
#include "runtime/data/dataset.h"
#include "runtime/data/mnist_records.h"
#include "runtime/data/stage_profile.h"
#include "runtime/graph/initializers.h"
#include "runtime/infeed/infeed_driver.h"
#include "runtime/models/zoo.h"

namespace {

using namespace tpusim;
using namespace tpusim::runtime;

struct Args {
  std::string dir;
  bool jpeg = false;
  int map_threads = 1;
  int loops = 2;
  int steps = 10;
  int batch = 1024;
  std::string model = "mlp";
  std::string slice = "v3-8";
};

bool parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (arg == "--jpeg") {
      a->jpeg = true;
    } else if (arg == "--map-threads" && (v = value())) {
      a->map_threads = std::atoi(v);
    } else if (arg == "--loops" && (v = value())) {
      a->loops = std::atoi(v);
    } else if (arg == "--steps" && (v = value())) {
      a->steps = std::atoi(v);
    } else if (arg == "--batch" && (v = value())) {
      a->batch = std::atoi(v);
    } else if (arg == "--model" && (v = value())) {
      a->model = v;
    } else if (arg == "--slice" && (v = value())) {
      a->slice = v;
    } else if (arg[0] != '-' && a->dir.empty()) {
      a->dir = arg;
    } else {
      std::fprintf(stderr, "infeed_study: bad argument '%s'\n", arg.c_str());
      return false;
    }
  }
  return !a->dir.empty() && a->map_threads > 0 && a->loops > 0 && a->steps > 0 && a->batch > 0;
}

// Each host stage's measured CPU a batch, the busiest, and what more threads on it would give.
void print_host_stages(const HostPipelineModel& m) {
  std::printf("\nhost stages (measured CPU per batch; wall per batch on the target host):\n");
  for (size_t i = 0; i < m.stages().size(); ++i) {
    std::printf("  %-8s %2u thread(s)  %9.3f ms/batch\n", m.stages()[i].name.c_str(),
                m.stages()[i].threads,
                m.busy_seconds()[i] * 1e3 / static_cast<double>(m.batches()));
  }
  // The what-ifs are the host alone (as if the device took every batch at once), and so is the
  // figure they compare with.
  const size_t slow = m.busiest_stage();
  std::printf("busiest stage: %s; the host alone makes %llu batches in %.3f s",
              m.stages()[slow].name.c_str(), static_cast<unsigned long long>(m.batches()),
              m.with_threads(slow, m.stages()[slow].threads).last_ready_seconds());
  for (uint32_t factor : {2u, 4u}) {
    const HostPipelineModel what_if = m.with_threads(slow, m.stages()[slow].threads * factor);
    std::printf("; %ux threads: %.3f s", factor, what_if.last_ready_seconds());
  }
  std::printf("\n");
}

int fail(const absl::Status& s) {
  std::fprintf(stderr, "infeed_study: %s\n", std::string(s.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: infeed_study DIR [--jpeg] [--map-threads N] [--loops L] [--steps S] "
                 "[--batch B] [--model NAME] [--slice NAME]\n");
    return 2;
  }
  auto slice = config::load_slice(a.slice);
  if (!slice.ok()) return fail(slice.status());
  const uint32_t replicas = (*slice)->cores;
  if (a.batch % static_cast<int>(replicas) != 0) {
    return fail(absl::InvalidArgumentError("the batch must divide by the slice's " +
                                           std::to_string(replicas) + " cores"));
  }
  // input_fn: shards -> records (read) -> parse and decode (map) -> batch -> prefetch.
  auto profile = std::make_shared<data::StageProfile>();
  data::InterleaveOptions files;
  files.cycle_length = 4;
  const auto input =
      data::Dataset::list_files(a.dir + "/train-*", /*shuffle=*/true, /*seed=*/1)
          ->interleave_tfrecords(files)
          ->profiled(profile, "read")
          ->repeat()
          ->map(profile->timed("decode", data::mnist_parse_fn(28, 28, 1, a.jpeg), a.map_threads),
                a.map_threads)
          ->batch(a.batch, /*drop_remainder=*/true)
          ->profiled(profile, "batch")
          ->prefetch(2);

  GraphBuilder b;
  const int64_t per_core = a.batch / static_cast<int>(replicas);
  if (auto s = models::build_training_step(b, a.model, per_core, 0.05f, 1); !s.ok()) return fail(s);
  auto backend = make_backend("tpusim");
  if (!backend.ok()) return fail(backend.status());
  auto exe = (*backend)->compile(b.graph(), {Precision::kFp32, replicas});
  if (!exe.ok()) return fail(exe.status());
  InfeedOptions options;
  options.replicas = replicas;
  options.timing.cpu_cores = (*slice)->host.cpu_cores;
  options.timing.prefetch_depth = 2;
  auto driver = InfeedDriver::create(b.graph(), {{input, profile}}, options);
  if (!driver.ok()) return fail(driver.status());

  std::printf("%s, %u cores, %s, global batch %d; host: %u cores, %d map thread(s)\n",
              (*slice)->name.c_str(), replicas, a.model.c_str(), a.batch, (*slice)->host.cpu_cores,
              a.map_threads);
  std::printf("%5s %6s %11s %9s %14s %12s %8s\n", "loop", "steps", "device ms", "ms/step",
              "busy ms/step", "infeed wait", "loss");
  Variables vars = initial_variables(b.graph());
  for (int loop = 0; loop < a.loops; ++loop) {
    auto steps =
        (*driver)->next_loop(static_cast<uint32_t>(a.steps), (*backend)->device_now_seconds());
    if (!steps.ok()) return fail(steps.status());
    auto run = (*backend)->run_loop(**exe, vars, *steps, (*driver)->steps_taken() - a.steps);
    if (!run.ok()) return fail(run.status());
    const DeviceTiming& t = run->timing;
    uint64_t wait = 0;
    for (uint64_t w : t.infeed_wait_cycles) wait = std::max(wait, w);
    const double wait_fraction = static_cast<double>(wait) / static_cast<double>(t.cycles);
    std::printf("%5d %6d %11.3f %9.3f %14.3f %11.1f%% %8.4f\n", loop, a.steps, t.seconds * 1e3,
                t.seconds * 1e3 / a.steps, t.seconds * (1 - wait_fraction) * 1e3 / a.steps,
                100.0 * wait_fraction, run->outputs.back()[0].at("loss").f[0]);
    if (auto st = (*backend)->host_round_trip((*slice)->host.loop_overhead_s); !st.ok())
      return fail(st);
  }
  print_host_stages((*driver)->host_models()[0]);
  return 0;
}
