// The NumericsWorker's ordering contract: a lane's jobs run in post order, accesses wait for
// the jobs they share bytes with (and only those), shared jobs wait for other lanes' overlapping
// jobs, errors surface, and an unthreaded worker runs jobs inline. Jobs that must still be
// running when the simulation thread checks are held on a gate that another thread opens, so no
// check depends on timing.

#include "sim/units/numerics_worker.h"

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tpusim::sim {
namespace numerics_worker_test {

HostRange bytes(const std::vector<uint8_t>& memory, size_t lo, size_t hi) {
  return {memory.data() + lo, memory.data() + hi};
}

TEST(NumericsWorkerTest, RunsALanesJobsInTheOrderPosted) {
  NumericsWorker worker(2, true);
  std::vector<int> order0, order1;
  for (int i = 0; i < 2000; ++i) {  // more than the queue holds: post helps until there is room
    worker.post(0, false, {}, {}, [&order0, i] { order0.push_back(i); });
    worker.post(1, false, {}, {}, [&order1, i] { order1.push_back(i); });
  }
  worker.drain();
  ASSERT_EQ(order0.size(), 2000u);
  ASSERT_EQ(order1.size(), 2000u);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_EQ(order0[i], i);
    EXPECT_EQ(order1[i], i);
  }
  EXPECT_EQ(worker.posted(), 4000u);
}

TEST(NumericsWorkerTest, AnAccessWaitsOnlyForTheJobsWhoseBytesItShares) {
  NumericsWorker worker(2, true);
  if (!worker.threaded()) GTEST_SKIP() << "this host has one core: jobs run inline";
  std::vector<uint8_t> vmem(256);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> wrote{0};
  // The job writes bytes [0, 64) once the gate opens.
  worker.post(0, false, {}, bytes(vmem, 0, 64), [open, &wrote] {
    open.wait();
    wrote = 1;
  });
  // Other bytes of the lane, and the same bytes of another lane (another core's VMEM), do not
  // wait: were they to, the gate (still shut) would hang the test.
  const HostRange elsewhere = bytes(vmem, 64, 128);
  worker.before_access(0, &elsewhere, 1, bytes(vmem, 128, 192));
  const HostRange same = bytes(vmem, 0, 64);
  worker.before_access(1, &same, 1, {});
  EXPECT_EQ(wrote.load(), 0);
  // Reading what the job writes waits for it.
  std::thread opener([&gate] { gate.set_value(); });
  const HostRange overlapping = bytes(vmem, 60, 70);
  worker.before_access(0, &overlapping, 1, {});
  EXPECT_EQ(wrote.load(), 1);
  opener.join();
  worker.drain();
}

TEST(NumericsWorkerTest, AWriteWaitsForTheJobsThatReadItsBytes) {
  NumericsWorker worker(1, true);
  if (!worker.threaded()) GTEST_SKIP() << "this host has one core: jobs run inline";
  std::vector<uint8_t> vmem(256);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> read{0};
  worker.post(0, false, bytes(vmem, 100, 200), {}, [open, &read] {
    open.wait();
    read = 1;
  });
  const HostRange also_read = bytes(vmem, 150, 160);
  worker.before_access(0, &also_read, 1, {});  // two readers do not conflict
  EXPECT_EQ(read.load(), 0);
  std::thread opener([&gate] { gate.set_value(); });
  worker.before_access(0, nullptr, 0, bytes(vmem, 199, 201));
  EXPECT_EQ(read.load(), 1);
  opener.join();
}

// The simulation thread's own HBM access (a collective's values) waits for the shared jobs of
// any lane that touch its bytes, and for nothing else: the other jobs keep running.
TEST(NumericsWorkerTest, AnHbmAccessWaitsOnlyForTheSharedJobsWhoseBytesItShares) {
  NumericsWorker worker(2, true);
  if (!worker.threaded()) GTEST_SKIP() << "this host has one core: jobs run inline";
  std::vector<uint8_t> hbm(1024), vmem(256);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> wrote{0};
  // Lane 1 writes HBM bytes [0, 512) once the gate opens; lane 0 has a VMEM job that also waits.
  worker.post(1, true, {}, bytes(hbm, 0, 512), [open, &wrote] {
    open.wait();
    wrote = 1;
  });
  worker.post(0, false, {}, bytes(vmem, 0, 64), [open] { open.wait(); });
  // Other HBM bytes, and the VMEM job's bytes (not shared), do not wait: were they to, the gate
  // (still shut) would hang the test.
  const HostRange elsewhere = bytes(hbm, 512, 600);
  worker.before_shared_access(&elsewhere, 1, bytes(hbm, 700, 800));
  const HostRange vmem_bytes = bytes(vmem, 0, 64);
  worker.before_shared_access(&vmem_bytes, 1, {});
  EXPECT_EQ(wrote.load(), 0);
  std::thread opener([&gate] { gate.set_value(); });
  worker.before_shared_access(nullptr, 0, bytes(hbm, 500, 520));  // writes what it writes
  EXPECT_EQ(wrote.load(), 1);
  opener.join();
  worker.drain();
}

TEST(NumericsWorkerTest, ASharedJobWaitsForOtherLanesOverlappingJobs) {
  NumericsWorker worker(2, true);
  if (!worker.threaded()) GTEST_SKIP() << "this host has one core: jobs run inline";
  std::vector<uint8_t> hbm(1024);
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::atomic<int> written{0};
  std::atomic<int> seen{-1};
  // Lane 0 writes HBM bytes [0, 512); lane 1 then reads [256, 768).
  worker.post(0, true, {}, bytes(hbm, 0, 512), [open, &written] {
    open.wait();
    written = 1;
  });
  std::thread opener([&gate] { gate.set_value(); });
  worker.post(1, true, bytes(hbm, 256, 768), {}, [&written, &seen] { seen = written.load(); });
  worker.drain();
  opener.join();
  EXPECT_EQ(seen.load(), 1);
}

TEST(NumericsWorkerTest, ReportsTheFirstErrorAJobThrowsOnce) {
  NumericsWorker worker(1, true);
  worker.post(0, false, {}, {}, [] { throw std::runtime_error("first"); });
  worker.post(0, false, {}, {}, [] { throw std::runtime_error("second"); });
  worker.drain();
  EXPECT_EQ(worker.take_error(), "first");
  EXPECT_EQ(worker.take_error(), "");
}

TEST(NumericsWorkerTest, UnthreadedRunsEachJobInsidePost) {
  NumericsWorker worker(1, false);
  EXPECT_FALSE(worker.threaded());
  int ran = 0;
  worker.post(0, false, {}, {}, [&ran] { ++ran; });
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(worker.may_be_busy());
}

}  // namespace numerics_worker_test
}  // namespace tpusim::sim
