#pragma once
// This process's place in an MPI job, for the studies that spread their points over ranks
// (`mpirun -np N tpusim sweep ...`, or a scheduler's `srun`). Only messages between rank 0 and the
// others, as byte strings with a tag, sent without blocking the sender and polled by the
// receiver: a rank that runs a point waits on its child process, not in MPI, and a rank that dies
// leaves the others running (under `mpirun --enable-recovery`; docs/studies.md).

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include <absl/status/statusor.h>

namespace tpusim::studies {

// Whether an MPI launcher started this process: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), a PMIx
// launcher such as Slurm's srun (PMIX_RANK) or a PMI-1/2 one (PMI_RANK). A process started any
// other way runs its study alone, as it always has.
bool started_by_mpi_launcher();

struct MpiMessage {
  int source = 0;
  int tag = 0;  // kUnfinished: a message from `source` began and did not finish
  std::string bytes;
};

// The tag poll() gives a message whose transfer did not finish in time (its sender died
// mid-message, most likely).
constexpr int kUnfinished = -1;

// MPI_COMM_WORLD, initialized on join() and finalized when the last MpiWorld goes.
class MpiWorld {
 public:
  // MPI_Init; the error says what failed (no launcher that can be reached, for instance).
  static absl::StatusOr<std::unique_ptr<MpiWorld>> join();
  ~MpiWorld();
  MpiWorld(const MpiWorld&) = delete;
  MpiWorld& operator=(const MpiWorld&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Sends `bytes` to rank `to` without waiting for it to be received: the bytes are kept until
  // the transfer completes (a send to a rank that died never does: its bytes are never freed).
  // False when MPI refused the send (the rank is gone).
  bool send(int to, int tag, std::string bytes);
  // Waits up to `seconds` for every send to complete; whether they did.
  bool flush(double seconds);
  // The next message from any rank, or none when nothing has arrived. A message that began but
  // did not finish within `seconds` comes back as tag kUnfinished from its sender.
  std::optional<MpiMessage> poll(double seconds);
  // Rank 0's `text` on every rank (a collective: every rank calls it).
  std::string broadcast(std::string text);
  // Ends every rank with `exit_code` (MPI_Abort) instead of finalizing: after a rank died,
  // MPI_Finalize on the others can wait for it forever (Open MPI 4.1 under --enable-recovery).
  [[noreturn]] void abort_all(int exit_code);

 private:
  MpiWorld(int rank, int size);
  // Frees the sends that have completed.
  void reap_sends();

  struct PendingSend;
  int rank_ = 0, size_ = 1;
  std::deque<std::unique_ptr<PendingSend>> sends_;
};

}  // namespace tpusim::studies
