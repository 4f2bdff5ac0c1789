#pragma once
// Shared between dataset.cc, dataset_batch.cc and dataset_parallel.cc.

#include <functional>

#include "runtime/data/dataset.h"

namespace tpusim::runtime::data {

// What an iterator's next() returns: an element, the end (nullopt) or an error.
using Next = absl::StatusOr<std::optional<Element>>;
inline const Next kEnd = std::optional<Element>();

// Whether `n` ends an iteration: the end marker or an error.
inline bool is_terminal(const Next& n) { return !n.ok() || !n->has_value(); }

// `f()` on a worker thread, an exception from the work it runs returned as an error instead of
// ending the process there (nothing above a worker thread can catch it): std::bad_alloc as
// ResourceExhausted (a batch or record too big for the host's memory), any other as Internal.
template <typename F>
Next guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of host memory in the input pipeline (a batch or an element too big for this "
        "host: a smaller batch size?)");
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("input pipeline: ") + e.what());
  }
}

// The host bytes an element holds: its values and the strings' characters.
uint64_t element_bytes(const Element& e);

// An iterator that yields `status` once, then ends.
std::unique_ptr<Iterator> error_iterator(absl::Status status);

// A dataset whose iterators fail with `status`: how a transformation with bad arguments reports
// them (at the first next(), with the message).
class FailingDataset final : public Dataset {
 public:
  explicit FailingDataset(absl::Status status) : status_(std::move(status)) {}
  std::unique_ptr<Iterator> make_iterator() const override { return error_iterator(status_); }

 private:
  absl::Status status_;
};

// The machine's hardware threads (at least 1): what kAutotune stands for.
int machine_threads();

// Turns one job's inputs into its outputs, on a worker thread. The inputs are consecutive
// elements of the input iterator, the first of them element number `first`; only the last input
// may be terminal (the input's end or error). The outputs are handed out in order; a terminal
// output ends the iteration once handed out.
using ParallelWork = std::function<std::vector<Next>(std::vector<Next> inputs, int64_t first)>;

// `threads` workers draw jobs of up to `job_inputs` consecutive input elements, in order, and
// run `work` on them with no lock held. The consumer takes the jobs' outputs in job order when
// `deterministic`, else the lowest-numbered finished job first (the one that met the input's end
// only once every job before it was taken). At most `max_jobs` jobs are drawn and not yet taken
// by the consumer (backpressure). Destroying the iterator cancels and joins the workers.
std::unique_ptr<Iterator> parallel_jobs(std::unique_ptr<Iterator> in, ParallelWork work,
                                        int threads, int64_t job_inputs, int64_t max_jobs,
                                        bool deterministic);

}  // namespace tpusim::runtime::data
