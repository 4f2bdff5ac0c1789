#include "tools/studies/mpi_world.h"

#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>

#include <mpi.h>

#include "common/strings.h"

namespace tpusim::studies {

bool started_by_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

struct MpiWorld::PendingSend {
  std::string bytes;
  MPI_Request request = MPI_REQUEST_NULL;
};

namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return str_cat("error ", code);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiWorld>> MpiWorld::join() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized != 0) return absl::FailedPreconditionError("MPI is already initialized");
  if (const int rc = MPI_Init(nullptr, nullptr); rc != MPI_SUCCESS)
    return absl::UnavailableError(str_cat("MPI_Init failed: ", mpi_error_text(rc)));
  // A failed call returns its code instead of ending every rank: a rank that died must not take
  // the study with it.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiWorld>(new MpiWorld(rank, size));
}

MpiWorld::MpiWorld(int rank, int size) : rank_(rank), size_(size) {}

MpiWorld::~MpiWorld() {
  reap_sends();
  // Sends still in flight go to ranks that died: let them go rather than wait forever. Their
  // bytes are never freed, since MPI may still read them.
  for (auto& s : sends_) {
    if (s->request != MPI_REQUEST_NULL) MPI_Request_free(&s->request);
    (void)s.release();
  }
  sends_.clear();
  MPI_Finalize();
}

bool MpiWorld::send(int to, int tag, std::string bytes) {
  reap_sends();
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  auto s = std::make_unique<PendingSend>();
  s->bytes = std::move(bytes);
  if (MPI_Isend(s->bytes.data(), static_cast<int>(s->bytes.size()), MPI_BYTE, to, tag,
                MPI_COMM_WORLD, &s->request) != MPI_SUCCESS) {
    return false;
  }
  sends_.push_back(std::move(s));
  return true;
}

bool MpiWorld::flush(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    reap_sends();
    if (sends_.empty()) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void MpiWorld::reap_sends() {
  while (!sends_.empty()) {
    int done = 0;
    if (MPI_Test(&sends_.front()->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
    if (done == 0) {
      // Later sends may be done while an earlier one waits on a slow or dead rank: keep looking.
      for (auto it = sends_.begin() + 1; it != sends_.end();) {
        int later = 0;
        if (MPI_Test(&(*it)->request, &later, MPI_STATUS_IGNORE) != MPI_SUCCESS) later = 1;
        it = later != 0 ? sends_.erase(it) : it + 1;
      }
      return;
    }
    sends_.pop_front();
  }
}

std::optional<MpiMessage> MpiWorld::poll(double seconds) {
  reap_sends();
  int arrived = 0;
  MPI_Message matched = MPI_MESSAGE_NULL;
  MPI_Status status;
  // A matched probe: the message found is the one received, and no other receive can take it.
  if (MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &arrived, &matched, &status) !=
          MPI_SUCCESS ||
      arrived == 0) {
    return std::nullopt;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  auto m = std::make_unique<MpiMessage>();
  m->source = status.MPI_SOURCE;
  m->tag = status.MPI_TAG;
  m->bytes.resize(static_cast<size_t>(count));
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Imrecv(m->bytes.data(), count, MPI_BYTE, &matched, &request) != MPI_SUCCESS) {
    return MpiMessage{status.MPI_SOURCE, kUnfinished, ""};
  }
  // A large message moves after it is matched; a sender that dies part way leaves it unfinished,
  // and the receive must not wait for it forever.
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    int done = 0;
    if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    if (done != 0) return std::move(*m);
    if (std::chrono::steady_clock::now() > end) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (request != MPI_REQUEST_NULL) {
    MPI_Request_free(&request);
    (void)m.release();  // MPI may still write into its bytes
  }
  return MpiMessage{status.MPI_SOURCE, kUnfinished, ""};
}

void MpiWorld::abort_all(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this is for the compiler
}

std::string MpiWorld::broadcast(std::string text) {
  uint64_t length = text.size();
  MPI_Bcast(&length, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  text.resize(length);
  MPI_Bcast(text.data(), static_cast<int>(length), MPI_BYTE, 0, MPI_COMM_WORLD);
  return text;
}

}  // namespace tpusim::studies
