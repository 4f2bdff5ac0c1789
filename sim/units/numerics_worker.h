#pragma once
// A second host thread for the simulator's numerics. Every functional effect of an
// instruction (a DMA's copy, a vector op, a matmul, an infeed's write into VMEM) is posted here
// as a job on its core's lane, and the simulation thread goes on with timing and the SystemC
// kernel. A worker thread runs the jobs; the simulation thread runs them too whenever it has to
// wait (the queue is full, it must read memory a job writes, a collective or the run's end), so
// both host cores compute.
//
// Ordering: one lane's jobs run one at a time in the order posted, so a core's values are
// exactly those of running its instructions inline, and the units' own state (MXU weight
// buffers, the core's LHS cache terms) is touched only by its lane's jobs. Lanes run in
// parallel; a job that touches memory another lane can reach (HBM, which a chip's cores share)
// is posted as `shared` and first waits for the other lanes' unfinished shared jobs it
// overlaps. The simulation thread's own accesses go through before_access (one lane's VMEM) or
// drain (everything).
//
// Threads: post, before_access, drain and take_error are called from the simulation thread
// only.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sim/memory/block.h"

namespace tpusim::sim {

class NumericsWorker {
 public:
  // `lanes` independent job streams. With `threaded` false (or a host with one core) every job
  // runs inside post().
  NumericsWorker(uint32_t lanes, bool threaded);
  ~NumericsWorker();  // runs what is queued, then stops the thread
  NumericsWorker(const NumericsWorker&) = delete;
  NumericsWorker& operator=(const NumericsWorker&) = delete;

  bool threaded() const { return thread_.joinable(); }
  // Whether a posted job may still be unfinished (false: before_access has nothing to check).
  bool may_be_busy() const { return unfinished_hint_ != 0; }

  // Queues `job` on `lane`; it reads the host bytes `read` and writes `write`. `shared`: the
  // ranges may overlap other lanes' (HBM).
  void post(uint32_t lane, bool shared, HostRange read, HostRange write, std::function<void()> job);
  // Returns once no unfinished job of `lane` writes a byte of `reads[0..count)` or `write`, or
  // reads a byte of `write`: call it before reading `reads` and writing `write` (the lane's
  // memory only; see drain for the rest).
  void before_access(uint32_t lane, const HostRange* reads, size_t count, HostRange write);
  // The same for the shared jobs of every lane: call it before the simulation thread reads
  // `reads` and writes `write` in HBM itself (a collective's values).
  void before_shared_access(const HostRange* reads, size_t count, HostRange write);
  // Returns once every posted job has run.
  void drain();
  // The first error a job threw since the last call, "" when none.
  std::string take_error();

  // Jobs posted (for tests).
  uint64_t posted() const { return posted_total_; }

 private:
  struct Job {
    uint32_t lane = 0;
    std::function<void()> fn;
  };
  struct Pending {
    uint32_t lane = 0;
    uint64_t seq = 0;  // the lane's count of jobs once this one is posted
    HostRange read, write;
  };
  static constexpr size_t kMaxQueued = 512;

  void run_thread();
  void run_job(const std::function<void()>& job);
  // With mutex_ held by `lock`: runs the oldest queued job whose lane is free (preferring
  // `lane`), releasing the lock meanwhile; false when there is none.
  bool run_one(std::unique_lock<std::mutex>& lock, uint32_t lane);
  // Runs or waits for jobs until `done` holds (checked with mutex_ held).
  template <typename Done>
  void help_until(uint32_t lane, Done done);

  // Waits for the unfinished `jobs` that write a byte of `reads[0..count)` or touch `write`.
  void wait_before_access(std::deque<Pending>& jobs, const HostRange* reads, size_t count,
                          HostRange write);
  // Waits (helping) for the last of `jobs` (oldest first) that `conflicts` with.
  template <typename Conflicts>
  void wait_for_conflicts(const std::deque<Pending>& jobs, Conflicts conflicts);
  static void prune(std::deque<Pending>& jobs, const std::atomic<uint64_t>* done);

  // Simulation thread only: posted jobs, oldest first, not yet seen finished; per lane, and the
  // shared ones of all lanes.
  std::vector<std::deque<Pending>> pending_;
  std::deque<Pending> pending_shared_;
  uint64_t unfinished_hint_ = 0;  // jobs posted since the last drain
  std::vector<uint64_t> posted_;
  uint64_t posted_total_ = 0;

  // Finished jobs per lane (a lane's jobs finish in order); written with mutex_ held.
  std::unique_ptr<std::atomic<uint64_t>[]> done_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a job queued or finished, or stopping
  std::deque<Job> queue_;
  std::vector<char> running_;  // per lane: a job of it is running
  bool stopping_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace tpusim::sim
