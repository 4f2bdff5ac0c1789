#pragma once
// Runs the points of a study (`tpusim sweep`, `tpusim tune`): each point a `tpusim` command in a
// process of its own, `slots` at a time. Started by an MPI launcher (`mpirun -np N tpusim sweep
// ...`), every rank runs points: rank 0 hands them out one at a time as ranks ask (points differ
// in cost by 100x, so no split is fixed in advance), runs its own share, and gets each point's
// report and log back. Paths are the same on every rank: a rank whose file system is not rank 0's
// writes a point's files where rank 0 would, sends them, and removes them (docs/studies.md).
//
// Faults: a point that crashes ends with its exit code (128 + its signal); a rank that says
// nothing for rank_timeout_seconds is lost, and the points it ran end as failed (exit code -1)
// with the reason, while the other ranks go on.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/statusor.h>

namespace tpusim::studies {

class MpiWorld;

// One point: a tpusim command and where its output goes, every path absolute.
struct FarmJob {
  std::string id;                 // "p003", for messages
  std::vector<std::string> args;  // tpusim's arguments
  std::string log;                // its stderr, and its stdout unless report_on_stdout
  std::string report;             // its JSON report
  bool report_on_stdout = false;  // it prints its report (--json) rather than writing it
  std::string run_dir;            // a folder it writes (a model dir), "" for none
  // Files it reads that rank 0 wrote (a point's config): path and contents.
  std::vector<std::pair<std::string, std::string>> inputs;
};

struct FarmOutcome {
  int exit_code = 0;    // 128 + the signal when killed; -1 when lost with its rank
  double seconds = 0;   // host seconds from its start to its end
  int rank = 0;         // the rank that ran it
  std::string failure;  // why it failed without an exit code of its own; "" otherwise
};

struct FarmOptions {
  int slots = 1;                     // points at a time on each rank
  double rank_timeout_seconds = 60;  // a rank silent this long is lost
  std::string study_dir;             // the study's folder, where ranks find whether it is shared
};

class PointFarm {
 public:
  // Joins the MPI job when an MPI launcher started this process; else a farm of this process.
  static absl::StatusOr<std::unique_ptr<PointFarm>> open();
  ~PointFarm();  // a coordinator that never ran tells the other ranks to stop

  // The exit code a study's command returns once the farm is done with `exit_code`. Under MPI,
  // after a rank was lost, it ends the process here instead (MPI_Abort on rank 0, which ends
  // every rank): the survivors' MPI_Finalize would wait for the lost one forever.
  int finish(int exit_code);

  // Rank 0's `text` on every rank (a collective under MPI; `text` itself without). An empty text
  // says the study ends before its points run: the other ranks return rather than serve.
  std::string share(std::string text);
  // Names this study on every rank: rank 0's host and pid.
  const std::string& nonce() const { return nonce_; }

  bool coordinator() const;  // rank 0, or a farm of one process
  int ranks() const;

  // The other ranks: runs the points rank 0 hands out until it has no more; the exit code.
  int serve(const FarmOptions& options);

  // Rank 0: runs every job, on_done called for each (in the order they end) once its log and
  // report are in place. A job that fails is an outcome, not an error: an error is the study's
  // itself (a process that cannot be started, a folder that cannot be written).
  using OnDone = std::function<void(size_t job, const FarmOutcome&)>;
  absl::Status run(const std::vector<FarmJob>& jobs, const FarmOptions& options,
                   const OnDone& on_done);

 private:
  explicit PointFarm(std::unique_ptr<MpiWorld> world);
  std::unique_ptr<MpiWorld> world_;  // null when not under MPI
  std::string nonce_;                // the same on every rank: names the shared-folder marker
  // Ends the process with `exit_code`: MPI_Abort under MPI.
  [[noreturn]] void exit(int exit_code);

  bool ran_ = false;          // run() was called, or share("") ended the study
  bool lost_a_rank_ = false;  // rank 0 gave up a rank for lost
  bool lost_rank0_ = false;   // this rank gave up rank 0 for lost
};

// The job's files as a rank that runs it needs them: `inputs` written where absent or different,
// the folders of its outputs made, its outputs from an earlier run removed.
void prepare_job_files(const FarmJob& job);

}  // namespace tpusim::studies
