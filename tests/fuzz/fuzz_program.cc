// ISA programs on any bytes, binary or text format: validated against a v3-8 and, when valid,
// run on it with values (MXU numerics on the caller's thread) and a cycle cap, so a program
// that would run for simulated days ends in a diagnosis instead of taking the fuzzer's time.
//
// SystemC builds one System per process: every input runs on the same one. A run that
// deadlocks, passes the cap or stops on a unit's error leaves it as it was built (the System
// recovers, sim/system.h), so the next input runs as it would in a new process. A System left
// unusable (the kernel or the numerics threw, or the recovery failed) is a finding: abort.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <google/protobuf/text_format.h>

#include "configs/loader.h"
#include "sim/isa/isa.pb.h"
#include "sim/system.h"

namespace {

using namespace tpusim;

// The simulated cycles a run may take (about 0.2 ms at 940 MHz; seconds of host time at most).
constexpr uint64_t kMaxRunCycles = 200000;

sim::System* fuzz_system() {
  static const std::unique_ptr<sim::System> system = [] {
    auto slice = config::load_slice("v3-8");
    if (!slice.ok()) std::abort();
    sim::SystemOptions options;
    options.numerics_thread = false;
    options.max_run_cycles = kMaxRunCycles;
    auto made = sim::System::create(*slice, options);
    if (!made.ok()) std::abort();
    return *std::move(made);
  }();
  return system.get();
}

void run(const isa::Program& program) {
  sim::System* system = fuzz_system();
  auto result = system->run(program);
  if (system->usable()) return;
  std::fprintf(stderr, "fuzz_program: the System is unusable after: %s\n",
               result.status().ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  isa::Program program;
  if (program.ParseFromArray(data, static_cast<int>(size))) run(program);
  program.Clear();
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (google::protobuf::TextFormat::ParseFromString(text, &program)) run(program);
  return 0;
}
